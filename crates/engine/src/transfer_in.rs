//! What a joiner receives from its donor, record by record: the stream's header (the donor's
//! certification index, and whether IST records, a snapshot or a refusal follow), each IST
//! record queued for the appliers in order, and the stream's end or failure. The driver
//! reads the bytes (`ist::read_header`, `ist::RecordReader`) and hands over what they
//! decoded to.

use base::{Seqno, Uuid};
use cert::Certifier;
use writeset::{Bytes, WriteSet};

use crate::effects::{CacheWrite, Effect};
use crate::ist::{Action, ActionKind, Header, IstError, Outcome, FAILED_CERT};
use crate::task::Task;
use crate::{view_record, LogLevel, NodeEngine};

/// What follows a stream's header (see [`NodeEngine::stream_header`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamNext {
    /// IST records: wait for the server's snapshot ([`NodeEngine::snapshot_position`]),
    /// then hand them over one by one.
    Records,
    /// Nothing more: the stream served its purpose (a snapshot comes by SST) or was refused
    /// or ignored.
    Nothing,
}

/// Where the server's snapshot stands for an IST stream (see
/// [`NodeEngine::snapshot_position`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotWait {
    /// In place up to this seqno: records after it are queued.
    Ready(Seqno),
    /// Not reported yet.
    Wait,
    /// The node is no longer joining (or closes): the stream is of no use.
    Gone,
}

impl NodeEngine {
    /// A stream from `peer` failed or was refused: the joiner asks again (see
    /// [`crate::Joining::next_step`]) from what it queued.
    pub fn stream_failed(&mut self, message: String) {
        self.say(LogLevel::Warning, message.clone());
        if let Some(joining) = self.joining.as_mut() {
            joining.transfer.failed = Some(message);
        }
    }

    /// A stream's header arrived from `peer`: takes the donor's index, or its refusal.
    pub fn stream_header(&mut self, peer: &str, header: &Header) -> StreamNext {
        if let Some(joining) = self
            .joining
            .as_mut()
            .filter(|_| self.view.cluster == header.cluster)
        {
            joining.donor_awaited_since = None;
        }
        if self.joining.is_none() || self.view.cluster != header.cluster {
            let message = format!(
                "ignored a state transfer stream from {peer} for history {}: not joining it",
                header.cluster
            );
            self.say(LogLevel::Warning, message);
            return StreamNext::Nothing;
        }
        if header.outcome == Outcome::Refused {
            if let Some(joining) = self.joining.as_mut() {
                joining.transfer.refusals += 1;
            }
            self.stream_failed(format!("donor {peer} cannot serve IST: {}", header.reason));
            return StreamNext::Nothing;
        }
        let cert = match Certifier::decode(&header.index) {
            Ok(cert) => cert,
            Err(error) => {
                base::mark!("engine.donor_index_refused");
                self.stream_failed(format!(
                    "the certification index from {peer} does not decode: {error}"
                ));
                return StreamNext::Nothing;
            }
        };
        if header.outcome == Outcome::Sst {
            if !header.reason.is_empty() {
                // A note: the donor warns when a joiner that had a position could not get IST.
                let message = format!("state transfer by SST from {peer}: {}", header.reason);
                self.say(LogLevel::Info, message);
            }
            let joining = self.joining.as_mut().expect("checked");
            joining.transfer.index = Some((header.last, cert));
            joining.transfer.by_sst = true;
            joining.transfer.done = true;
            return StreamNext::Nothing;
        }
        // Galera's words: DBAs' scripts and MariaDB's tests look for "Receiving IST".
        let message = format!(
            "Receiving IST: {} write-sets, seqnos {}-{} from {peer}",
            header.last.0 - header.first.0 + 1,
            header.first,
            header.last
        );
        self.say(LogLevel::Info, message);
        let joining = self.joining.as_mut().expect("checked");
        joining.transfer.index = Some((header.last, cert));
        joining.transfer.refusals = 0;
        StreamNext::Records
    }

    /// Where the server's snapshot (for IST, its own position) stands: IST records after it
    /// are queued.
    pub fn snapshot_position(&self) -> SnapshotWait {
        match self.joining.as_ref() {
            None => SnapshotWait::Gone,
            Some(_) if self.stopped() => SnapshotWait::Gone,
            Some(joining) if joining.received.is_some() => {
                SnapshotWait::Ready(joining.in_place_upto())
            }
            Some(_) => SnapshotWait::Wait,
        }
    }

    /// The IST of `header` starts on a server whose state is in place (in it, or queued for
    /// its appliers) up to `position`: a stream that starts after it would leave a hole.
    pub fn ist_begins(&mut self, header: &Header, position: Seqno) -> Result<(), IstError> {
        if position.0 < header.first.0 - 1 {
            return Err(IstError::BadRecord {
                seqno: header.first,
                what:
                    "the stream starts after the joiner's position: seqnos in between are missing",
            });
        }
        // The monitors continue from the server's snapshot, not from what an earlier stream
        // queued after it: those seqnos are still to pass them.
        let snapshot = self
            .joining
            .as_ref()
            .filter(|j| !j.appliers_behind)
            .and_then(|j| j.received);
        if let Some(snapshot) = snapshot {
            self.emit(Effect::MonitorsAt(snapshot.seqno));
        }
        Ok(())
    }

    /// One IST record of `cluster`'s history, for a server in place up to `position`:
    /// queued for the appliers (and cached) unless the server holds it already. A record
    /// that does not decode is refused whole and never kept.
    pub fn ist_record(
        &mut self,
        cluster: Uuid,
        action: Action,
        position: Seqno,
    ) -> Result<(), IstError> {
        if action.seqno <= position {
            return Ok(());
        }
        let task = task_of(&action, cluster, self.view.own)?;
        let member_view = matches!(&task, Task::View { view, .. } if view.my_index >= 0);
        let seqno = action.seqno;
        self.emit(Effect::Cache(CacheWrite {
            history: cluster,
            seqno,
            kind: action.kind,
            depends_on: action.depends_on,
            payload: Bytes::from(action.payload),
        }));
        self.tasks.push(task);
        if let Some(joining) = self.joining.as_mut() {
            joining.transfer.queued_upto = seqno;
            joining.member_view_queued |= member_view;
        }
        Ok(())
    }

    /// An IST stream from `peer` ended verified after `count` records in `seconds`.
    pub fn ist_finished(&mut self, peer: &str, header: &Header, count: u64, seconds: f64) {
        let message = format!(
            "IST of seqnos {}..={} from {peer} complete: {count} write-sets in {seconds:.1} s \
             ({:.0}/s)",
            header.first,
            header.last,
            count as f64 / seconds.max(1e-3)
        );
        self.say(LogLevel::Info, message);
        if let Some(joining) = self.joining.as_mut() {
            joining.transfer.done = true;
        }
    }
}

/// The applier task for one received action of `cluster`, on the node whose identity is
/// `own` (which places it in the views the stream carries: all ordered before its request,
/// so none names an identity it takes later).
fn task_of(action: &Action, cluster: Uuid, own: Uuid) -> Result<Task, IstError> {
    match action.kind {
        ActionKind::Skip => Ok(Task::Skip {
            seqno: action.seqno,
        }),
        ActionKind::View => {
            let view = view_record::decode(cluster, action.seqno, &action.payload, own).map_err(
                |error| IstError::BadView {
                    seqno: action.seqno,
                    error,
                },
            )?;
            Ok(Task::View {
                view,
                ordered: true,
            })
        }
        ActionKind::WriteSet => {
            let write_set = WriteSet::decode(&action.payload).map_err(|_| IstError::BadRecord {
                seqno: action.seqno,
                what: "the write-set does not decode",
            })?;
            let failed = action.depends_on == FAILED_CERT;
            let depends_on = if failed {
                action.seqno.prev()
            } else {
                Seqno(action.depends_on)
            };
            Ok(Task::Apply {
                seqno: action.seqno,
                depends_on,
                write_set,
                failed,
            })
        }
    }
}
