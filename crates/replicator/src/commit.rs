//! Commit order for local and applied write-sets, the release of finished transactions,
//! and the replay of brute-force aborted ones.

use std::time::Duration;

use base::{Gtid, Seqno};
use cert::Verdict;

use crate::app::{ApplyAction, LogLevel, Meta, RecvContext};
use crate::applier::RecvEvent;
use crate::error::{BfAborted, ReplicatorError};
use crate::local_trx::GatePassage;
use crate::shared::lock;
use crate::Replicator;

/// A commit that waits this long for its turn is reported in the error log, with what is
/// known about the seqno it waits for.
pub(crate) const STALL_REPORT_AFTER: Duration = Duration::from_secs(10);

impl Replicator {
    /// Waits for the seqno's turn to commit. `Err` if the transaction was BF-aborted.
    pub fn commit_order_enter(&self, seqno: Seqno) -> Result<(), BfAborted> {
        let monitors = self.monitors();
        let last_committed = monitors.commit.last_left();
        lock(&self.shared.inner)
            .window
            .commit_window
            .record(seqno.0.saturating_sub(last_committed.0).max(0) as u64);
        loop {
            match monitors
                .commit
                .enter_timeout(seqno, seqno.prev(), STALL_REPORT_AFTER)
            {
                Ok(()) => return Ok(()),
                Err(order::EnterError::Interrupted(_)) => return Err(BfAborted(seqno)),
                Err(order::EnterError::TimedOut { .. }) => {
                    let blocker = monitors.commit.last_left().next();
                    let message = format!(
                        "commit of {seqno} has waited {STALL_REPORT_AFTER:?} for {blocker}: {}",
                        self.describe(blocker)
                    );
                    self.shared.app.log(LogLevel::Warning, &message);
                }
            }
        }
    }

    /// What this node knows about `seqno`, for stall reports.
    pub(crate) fn describe(&self, seqno: Seqno) -> String {
        let inner = lock(&self.shared.inner);
        let local = inner.trxs.iter().find_map(|(id, trx)| {
            trx.outcome
                .filter(|(s, _)| *s == seqno)
                .map(|(_, verdict)| {
                    format!(
                        "local transaction {id} ({verdict:?}, aborted by {:?})",
                        trx.aborted_by
                    )
                })
        });
        let queued = inner.queue.iter().position(|event| {
            matches!(event, RecvEvent::Apply { seqno: s, .. } if *s == seqno)
                || matches!(event, RecvEvent::View { view, .. } if view.state_id.seqno == seqno)
        });
        let applying = inner.entered_apply.contains(&seqno);
        format!(
            "{}; queued for appliers at {queued:?}; in the apply monitor: {applying}; \
             appliers busy {}, serial event running {}, paused at {:?}",
            local.unwrap_or_else(|| "no local transaction".into()),
            inner.applying_now,
            inner.serial_running,
            inner.pause.point()
        )
    }

    /// Lets the next seqno commit; the seqno counts as committed. `failure` is the server's
    /// error when it failed to apply the seqno: the members vote on it first (see
    /// `vote.rs`), and an error says this node lost the vote and is leaving the cluster.
    pub fn commit_order_leave(
        &self,
        seqno: Seqno,
        failure: Option<&[u8]>,
    ) -> Result<(), ReplicatorError> {
        let voted = match failure {
            Some(error) if !error.is_empty() => self.vote_on_failure(seqno, error),
            _ => Ok(()),
        };
        self.leave_commit_order(seqno);
        voted
    }

    fn leave_commit_order(&self, seqno: Seqno) {
        let monitors = self.monitors();
        monitors.commit.leave(seqno);
        let mut inner = lock(&self.shared.inner);
        let local = match inner
            .trxs
            .values_mut()
            .find(|t| t.outcome.is_some_and(|(s, _)| s == seqno))
        {
            Some(trx) => {
                trx.commit_done = true;
                true
            }
            None => false,
        };
        // A remote write-set leaves the apply monitor when its apply callback returns (in
        // `run_event`), after the server's whole commit: with the binary log on, the
        // server leaves commit order before the storage engine's commit is visible, and a
        // causal read (`sync_wait`, which waits on the apply monitor) must not count the
        // seqno done before a reader can see it.
        let entered = local && inner.entered_apply.remove(&seqno);
        if entered {
            let out_of_order = monitors.apply.last_left().next() != seqno;
            inner.window.apply_out_of_order_leave.record(out_of_order);
        }
        inner.counters.commits += 1;
        drop(inner);
        if entered {
            monitors.apply.leave(seqno);
        }
        self.shared.changed.notify_all();
    }

    /// Forgets a finished local transaction. An ordered seqno it never took through commit
    /// order (a rollback the server did not order) is consumed here: a seqno left behind
    /// would stop every later commit.
    ///
    /// After a streaming fragment the transaction stays: wsrep-lib releases the handle after
    /// every fragment and goes on with the same transaction id.
    pub fn release(&self, trx_id: u64) {
        let mut inner = lock(&self.shared.inner);
        if let Some(trx) = inner
            .trxs
            .get_mut(&trx_id)
            .filter(|t| t.continues_after_release())
        {
            trx.start_next_fragment();
            inner.counters.fragments_replicated += 1;
            return;
        }
        let Some(trx) = inner.trxs.remove(&trx_id) else {
            return;
        };
        let Some((seqno, verdict)) = trx.outcome.filter(|_| !trx.commit_done) else {
            return;
        };
        let held_apply = inner.entered_apply.remove(&seqno);
        drop(inner);
        let Some(monitors) = lock(&self.shared.monitors).clone() else {
            return;
        };
        if !monitors.commit.is_left(seqno) {
            monitors.commit.self_cancel(seqno);
        }
        if held_apply {
            monitors.apply.leave(seqno);
        } else if verdict.is_pass() && !monitors.apply.is_left(seqno) {
            monitors.apply.self_cancel(seqno);
        }
        // The server rolled it back after it was ordered (a brute-force abort, a streaming
        // rollback): its seqno is passed over in both monitors above, so nothing waits on
        // it. A note, as in Galera, where this is routine.
        self.shared.app.log(
            LogLevel::Info,
            &format!("transaction {trx_id} released without committing its seqno {seqno}"),
        );
        self.shared.changed.notify_all();
    }

    /// Re-applies a BF-aborted local transaction on the caller's thread.
    pub fn replay(&self, trx_id: u64, ctx: RecvContext) -> Result<(), ReplicatorError> {
        let (seqno, depends_on, trx_flags, data, conn_id, cluster, own, holds_slot) = {
            let inner = lock(&self.shared.inner);
            let trx = inner
                .trxs
                .get(&trx_id)
                .ok_or(ReplicatorError::UnknownTransaction(trx_id))?;
            let Some((seqno, Verdict::Pass { depends_on })) = trx.outcome else {
                return Err(ReplicatorError::UnknownTransaction(trx_id));
            };
            // A victim aborted after certification already holds its apply slot; one aborted
            // while waiting for it does not.
            let holds_slot = inner.entered_apply.contains(&seqno);
            let (cluster, own) = (inner.cluster, inner.own);
            let (trx_flags, data, conn_id) = (trx.flags, trx.data.clone(), trx.conn_id);
            // A victim held by `pause` replays only after `resume`.
            let (inner, passage) = self.pass_pause_gate(inner, seqno, None);
            drop(inner);
            if passage == GatePassage::Closing {
                return Err(ReplicatorError::NotConnected);
            }
            (
                seqno, depends_on, trx_flags, data, conn_id, cluster, own, holds_slot,
            )
        };
        let monitors = self.monitors();
        if !holds_slot {
            monitors.apply.enter_regardless(seqno, depends_on);
            lock(&self.shared.inner).entered_apply.insert(seqno);
        }
        let action = ApplyAction {
            meta: Meta {
                gtid: Gtid { cluster, seqno },
                source: own,
                trx_id,
                conn_id,
                depends_on,
            },
            flags: trx_flags,
            data: &data,
        };
        let mut exit_loop = false;
        let ok = self.shared.app.apply(ctx, &action, &mut exit_loop);
        if lock(&self.shared.inner).entered_apply.remove(&seqno) {
            monitors.apply.leave(seqno);
        }
        lock(&self.shared.inner).counters.replays += 1;
        if ok {
            Ok(())
        } else {
            Err(ReplicatorError::NotConnected)
        }
    }
}
