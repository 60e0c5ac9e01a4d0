//! Commit order for local and applied write-sets, the release of finished transactions,
//! and the replay of brute-force aborted ones: the monitors' waits, on the server's
//! threads, around the engine's decisions (`engine::commit`).

use std::time::{Duration, Instant};

use base::Seqno;
use engine::{BfAborted, GatePassage, ReleaseOutcome};

use crate::app::{ApplyAction, LogLevel, RecvContext};
use crate::error::ReplicatorError;
use crate::seqno_trace::Stage;
use crate::shared::{lock, Monitors};
use crate::timings;
use crate::Replicator;

/// A commit that waits this long for its turn is reported in the error log, with what is
/// known about the seqno it waits for.
pub(crate) const STALL_REPORT_AFTER: Duration = Duration::from_secs(10);

impl Replicator {
    /// Waits for the seqno's turn to commit. `Err` if the transaction was BF-aborted.
    pub fn commit_order_enter(&self, seqno: Seqno) -> Result<(), BfAborted> {
        let monitors = self.monitors();
        self.shared.trace(seqno, Stage::CommitAsked);
        let asked = Instant::now();
        let last_committed = monitors.commit.last_left();
        lock(&self.shared.inner)
            .engine
            .entering_commit_order(seqno, last_committed);
        loop {
            match monitors
                .commit
                .enter_timeout(seqno, seqno.prev(), STALL_REPORT_AFTER)
            {
                Ok(()) => {
                    self.shared.trace(seqno, Stage::CommitEntered);
                    timings::observe(&self.shared.timings.commit_wait, asked.elapsed());
                    return Ok(());
                }
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
        lock(&self.shared.inner).engine.describe(seqno)
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
        self.shared.trace(seqno, Stage::CommitLeft);
        let last_applied = monitors.apply.last_left();
        let entered = lock(&self.shared.inner)
            .engine
            .left_commit_order(seqno, last_applied);
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
        let outcome = self.shared.with_engine(|engine| engine.release(trx_id));
        let ReleaseOutcome::Consume {
            seqno,
            held_apply,
            passed,
        } = outcome
        else {
            return;
        };
        let Some(monitors) = lock(&self.shared.monitors).clone() else {
            return;
        };
        if !monitors.commit.is_left(seqno) {
            monitors.commit.self_cancel(seqno);
        }
        if held_apply {
            monitors.apply.leave(seqno);
        } else if passed && !monitors.apply.is_left(seqno) {
            monitors.apply.self_cancel(seqno);
        }
        self.shared.changed.notify_all();
    }

    /// Re-applies a BF-aborted local transaction on the caller's thread. A replay cannot
    /// be aborted, and it applies only once every earlier seqno has committed (Galera's
    /// safety measure, here for every replay): no earlier applier can then find its rows
    /// locked and need to abort it. A replay the server fails leaves this node's data
    /// behind the cluster's: the node leaves, and the error says so.
    pub fn replay(&self, trx_id: u64, ctx: RecvContext) -> Result<(), ReplicatorError> {
        // No monitors yet: nothing was ordered, so there is nothing to replay.
        let monitors = lock(&self.shared.monitors)
            .clone()
            .ok_or(ReplicatorError::UnknownTransaction(trx_id))?;
        let plan = {
            let mut inner = lock(&self.shared.inner);
            let plan = inner
                .engine
                .begin_replay(trx_id)
                .ok_or(ReplicatorError::UnknownTransaction(trx_id))?;
            // Under the engine's lock, as `abort_certification` interrupts: an abort came
            // before (its interrupt, meant for the first execution, goes now) or comes
            // after (and is refused).
            let seqno = plan.meta.gtid.seqno;
            monitors.apply.withdraw_interrupt(seqno);
            monitors.commit.withdraw_interrupt(seqno);
            // A victim held by `pause` replays only after `resume`.
            let (_inner, passage) = self.pass_pause_gate(inner, seqno, None);
            if passage == GatePassage::Closing {
                return Err(ReplicatorError::NotConnected);
            }
            plan
        };
        let seqno = plan.meta.gtid.seqno;
        if plan.holds_slot {
            self.wait_for_earlier_commits(&monitors, seqno)?;
        } else {
            monitors.apply.enter_regardless(seqno, seqno.prev());
            lock(&self.shared.inner).engine.applier_entered(seqno);
        }
        let action = ApplyAction {
            meta: plan.meta,
            flags: plan.flags,
            data: &plan.data,
        };
        let mut exit_loop = false;
        let ok = self.shared.app.apply(ctx, &action, &mut exit_loop);
        let held = {
            let mut inner = lock(&self.shared.inner);
            inner.engine.replayed();
            inner.engine.leave_apply(seqno)
        };
        if held {
            monitors.apply.leave(seqno);
        }
        if ok {
            return Ok(());
        }
        let message = self
            .shared
            .with_engine(|engine| engine.replay_failed(trx_id, seqno));
        self.shared.notify_everyone();
        Err(ReplicatorError::Inconsistent(message))
    }

    /// Waits until every seqno below `seqno` has left the apply monitor (committed), for a
    /// replay that already holds its own place there. `Err` if the node closes meanwhile.
    fn wait_for_earlier_commits(
        &self,
        monitors: &Monitors,
        seqno: Seqno,
    ) -> Result<(), ReplicatorError> {
        let earlier = seqno.prev();
        while !monitors.apply.wait_left(earlier, STALL_REPORT_AFTER) {
            if lock(&self.shared.inner).engine.stopped() {
                return Err(ReplicatorError::NotConnected);
            }
            let blocker = monitors.apply.last_left().next();
            let message = format!(
                "replay of {seqno} has waited {STALL_REPORT_AFTER:?} for {blocker}: {}",
                self.describe(blocker)
            );
            self.shared.app.log(LogLevel::Warning, &message);
        }
        Ok(())
    }
}
