//! A joiner's side of state transfer: its request, its progress ([`Joining`]), and the
//! moment its state, the donor's certification index and the held deliveries meet.

use std::time::{Duration, Instant};

use base::{Gtid, NodeState, Seqno, Uuid};
use group::{Delivery, NoDonor};

use crate::app::{view_info, LogLevel, ViewInfo, PROTOCOL_VERSION};
use crate::applier::RecvEvent;
use crate::connection::{leave_group, FATAL_LEAVE_WAIT};
use crate::dispatcher::Dispatcher;
use crate::error::ReplicatorError;
use crate::joining::{FinishedJoin, JoinStep, RETRY_AFTER};
use crate::persisted::save_running_state;
use crate::shared::{lock, monitors_continue_at};
use crate::{transfer, Replicator};

/// Requests without a donor (one a second) before the joiner warns that it still has none.
const DONORLESS_REQUESTS_BEFORE_WARNING: u32 = 30;

impl Replicator {
    /// Sends the server's state transfer request to the group, then holds this applier
    /// (and so the order of events) until the server reports the snapshot in place.
    pub(crate) fn request_state(&self) -> bool {
        let shared = &self.shared;
        let Some(sst_request) = shared.app.sst_request() else {
            // Galera's first words, which DBAs and the test suites look for.
            self.fatal(
                "Will never receive state. Need to abort. The server could not prepare a \
                 state transfer (see its error above): this node cannot join without one; fix \
                 the cause and restart it",
            );
            return false;
        };
        // IST can continue the server's own position if it is in this cluster's history.
        let (cluster, start_position) = {
            let inner = lock(&shared.inner);
            (inner.cluster, inner.start_position)
        };
        let ist_from = start_position
            .filter(|h| h.cluster == cluster && h.seqno.is_defined())
            .map_or(Seqno::UNDEFINED, |h| h.seqno);
        if ist_from.is_defined() {
            let message = format!("asking for state from {ist_from} (IST if a donor holds it)");
            shared.app.log(LogLevel::Info, &message);
        }
        if sst_request.is_empty() && !self.take_own_state(cluster, ist_from) {
            return false;
        }
        transfer::send_state_request(shared, sst_request.clone(), ist_from);
        let mut inner = lock(&shared.inner);
        loop {
            let Some(joining) = inner.joining.as_mut() else {
                return true;
            };
            if joining.received.is_some() {
                return true;
            }
            if std::mem::take(&mut joining.request_again) {
                drop(inner);
                transfer::send_state_request(shared, sst_request.clone(), ist_from);
                inner = lock(&shared.inner);
                continue;
            }
            if inner.closing || !inner.connected {
                return true;
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
    }

    /// A server that is already running (connected again at runtime, after `SET GLOBAL
    /// wsrep_cluster_address`) asks for no snapshot: its own state is the snapshot, and
    /// only IST can bring the rest. False, after a fatal error, when this node has no
    /// position in the cluster's history to continue by IST.
    fn take_own_state(&self, cluster: Uuid, position: Seqno) -> bool {
        if !position.is_defined() {
            self.fatal(
                "the running server asked for no snapshot (its SST method cannot run on a \
                 live server) and this node has no position in this cluster's history to \
                 continue by IST; restart it to join by SST",
            );
            return false;
        }
        let mut inner = lock(&self.shared.inner);
        // The server turns JOINED on a primary view at or past the position it connected
        // at; with no snapshot to report, that view is given once IST caught up.
        let my_index = inner
            .members
            .iter()
            .position(|m| m.uuid == inner.own)
            .map_or(-1, |i| i as i32);
        let view = ViewInfo {
            state_id: Gtid {
                cluster,
                seqno: inner.joining.as_ref().map_or(position, |j| j.join_seqno),
            },
            view_id: inner.view_id,
            primary: true,
            members: inner.members.clone(),
            my_index,
            proto_ver: PROTOCOL_VERSION,
        };
        if let Some(joining) = inner.joining.as_mut() {
            joining.continue_own_state(cluster, position);
            joining.rejoin_view = Some(view);
        }
        true
    }

    /// The joiner's server has its snapshot, at `state`.
    pub fn sst_received(&self, state: Gtid, rcode: i32) -> Result<(), ReplicatorError> {
        let mut inner = lock(&self.shared.inner);
        let cluster = inner.cluster;
        let Some(joining) = inner.joining.as_mut() else {
            return Err(ReplicatorError::NotConnected);
        };
        if rcode != 0 && !joining.ist_only {
            // The server's snapshot script failed: no state will come from it, and asking
            // again cannot restart the server's receiving side.
            drop(inner);
            let error = ReplicatorError::StateTransferFailed { rcode };
            self.fatal(&error.to_string());
            return Err(error);
        }
        if rcode != 0 || state.cluster != cluster || !state.seqno.is_defined() {
            drop(inner);
            let message = format!(
                "state transfer failed (code {rcode}, position {state}, cluster {cluster}); \
                 asking again"
            );
            self.shared.app.log(LogLevel::Error, &message);
            return Err(ReplicatorError::NotConnected);
        }
        joining.received = Some(state);
        drop(inner);
        self.shared.changed.notify_all();
        Ok(())
    }
}

impl Dispatcher {
    /// This joiner's donor could not send its snapshot: it will never arrive, and the
    /// server's receiving side cannot be restarted in place. Stops, as Galera's joiner does,
    /// after leaving the group (a joiner that died must not keep its vote).
    pub(crate) fn on_transfer_failed(&mut self, donor: &str) {
        let waiting = lock(&self.shared.inner)
            .joining
            .as_ref()
            .is_some_and(|joining| joining.received.is_none());
        if !waiting {
            return;
        }
        let message = format!(
            "Will never receive state. Need to abort. The state transfer from {donor} \
             failed on the donor (see its error log)."
        );
        leave_group(&self.shared, FATAL_LEAVE_WAIT);
        self.shared.app.fatal(&message);
    }

    /// The order jumped past this node: stop certifying, hold what comes, and catch up by
    /// IST from `position` (what this server already has).
    pub(crate) fn fall_behind(
        &mut self,
        cluster: Uuid,
        join_seqno: Seqno,
        position: Seqno,
        view: Option<ViewInfo>,
    ) {
        self.certifier = None;
        self.withdraw_waiting();
        transfer::start_rejoin(&self.shared, cluster, join_seqno, position);
        if let Some(joining) = lock(&self.shared.inner).joining.as_mut() {
            joining.rejoin_view = view;
        }
    }

    /// A joiner's side of its own ordered request: the donor it went to (watched until
    /// the transfer is done), or none free yet, and then it asks again in a second.
    pub(crate) fn note_own_request(
        &self,
        joiner: Uuid,
        donor: &Result<u64, NoDonor>,
        donor_uuid: Option<Uuid>,
    ) {
        let mut inner = lock(&self.shared.inner);
        let own_request = joiner == inner.own;
        let Some(joining) = inner.joining.as_mut().filter(|_| own_request) else {
            return;
        };
        let (level, message) = match donor {
            Ok(_) => {
                joining.donor = donor_uuid;
                let name = donor_uuid.map_or_else(|| "?".to_owned(), |u| self.member_name(u));
                let message = format!("our state transfer request is ordered: donor {name}");
                (LogLevel::Info, message)
            }
            Err(reason) => {
                joining.retry_at = Some(Instant::now() + RETRY_AFTER);
                joining.donorless += 1;
                let message =
                    format!("no donor for our state transfer yet: {reason}; asking again in 1 s");
                // A donor busy for a moment (another joiner's snapshot) is routine; one
                // missing for long is worth a warning, repeated at the same pace.
                let long = joining.donorless % DONORLESS_REQUESTS_BEFORE_WARNING == 0;
                (
                    if long {
                        LogLevel::Warning
                    } else {
                        LogLevel::Info
                    },
                    message,
                )
            }
        };
        drop(inner);
        self.shared.app.log(level, &message);
    }

    /// Moves a join on (see [`Joining::next_step`]); once the server has its state and the
    /// donor's index arrived, resumes delivery.
    pub(crate) fn try_finish_join(&mut self) {
        let step = match lock(&self.shared.inner).joining.as_mut() {
            Some(joining) => joining.next_step(Instant::now()),
            None => return,
        };
        match step {
            JoinStep::Wait => {}
            JoinStep::Say(level, message) => self.shared.app.log(level, &message),
            JoinStep::AskForIst { from, overdue } => {
                if overdue {
                    let message = format!(
                        "no donor stream {} s after asking for IST; asking again",
                        transfer::IST_START_TIMEOUT.as_secs()
                    );
                    self.shared.app.log(LogLevel::Warning, &message);
                }
                transfer::send_state_request(&self.shared, Vec::new(), from);
            }
            JoinStep::Finish(join) => self.finish_join(*join),
        }
    }

    /// The server's state, the donor's index and the held deliveries meet: certification
    /// continues from the index, what was held is certified (and applied where the state
    /// does not hold it yet), and the node is JOINED.
    fn finish_join(&mut self, join: FinishedJoin) {
        let FinishedJoin {
            received,
            index: (position, cert),
            queued_upto,
            rejoin_view,
            join_seqno,
        } = join;
        let applied_upto = received.seqno.max(queued_upto);
        assert!(
            applied_upto >= position && applied_upto >= join_seqno.prev(),
            "a join finished with a hole: state up to {applied_upto}, index at {position}, \
             joined at {join_seqno}"
        );
        self.in_server_upto = applied_upto;
        self.certifier = Some(cert);
        self.member_of = Some(self.membership);
        monitors_continue_at(&self.shared, received.seqno);
        if let Some(view) = rejoin_view {
            lock(&self.shared.inner).queue.push_back(RecvEvent::View {
                view,
                ordered: false,
            });
        }
        self.release_held(position, applied_upto);
        let mut inner = lock(&self.shared.inner);
        inner.joining = None;
        inner.shift(NodeState::Joined, &*self.shared.app);
        let cluster = inner.cluster;
        drop(inner);
        save_running_state(&self.shared, cluster, false);
        self.saved_sole_member = false;
    }

    /// Certifies what was held during the transfer after the index's `position`, and
    /// queues for the appliers what comes after `applied_upto`.
    fn release_held(&mut self, position: Seqno, applied_upto: Seqno) {
        for delivery in std::mem::take(&mut self.held) {
            match delivery {
                Delivery::WriteSet {
                    seqno,
                    local,
                    safe_seqno,
                    payload,
                    ..
                } if seqno > position => {
                    self.on_write_set(seqno, local, safe_seqno, payload.into(), applied_upto);
                }
                Delivery::View(view) if view.ordered && view.seqno > position => {
                    self.view_in_order(&view);
                    if view.seqno > applied_upto {
                        let info = view_info(&view);
                        let ordered = view.primary;
                        lock(&self.shared.inner).queue.push_back(RecvEvent::View {
                            view: info,
                            ordered,
                        });
                    }
                }
                _ => {}
            }
        }
    }
}
