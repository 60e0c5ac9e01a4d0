//! The local transaction's life up to its verdict, on the client's thread: keys and rows
//! gathered, the write-set replicated, the wait for its verdict, and brute-force aborts. The
//! decisions and the records are the engine's (`engine::local_trx`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use base::{KeyType, Seqno};
use cert::Verdict;
use engine::{
    AbortOutcome, CertifyOutcome, GatePassage, SubmitRefusal, VerdictAction, VerdictPoll,
};
use transport::RunnerHandle;

use crate::error::ReplicatorError;
use crate::seqno_trace::Stage;
use crate::shared::{lock, Inner, VerdictWaiter};
use crate::timings;
use crate::Replicator;

/// A local transaction waiting for its verdict looks again after this long even if nothing
/// woke it: it is woken when its write-set is certified and on every event that can end
/// the wait otherwise, and this bounds the cost of one such event missed.
const VERDICT_RECHECK: Duration = Duration::from_millis(100);

/// Galera's default `repl.max_ws_size` (2 GiB - 1), until the provider sets its own.
pub const DEFAULT_MAX_WRITE_SET_BYTES: u64 = (1 << 31) - 1;

/// A write-set handed to the group, with what its waiter needs to follow it.
struct Submitted {
    runner: RunnerHandle,
    /// The group's ticket for the submission (see `GroupNode::submit`).
    ticket: u64,
    sent_at: Instant,
}

impl Replicator {
    /// Adds a key to a local transaction (created on first use).
    pub fn append_key(&self, trx_id: u64, parts: Vec<Vec<u8>>, key_type: KeyType) {
        lock(&self.shared.inner)
            .engine
            .append_key(trx_id, parts, key_type);
    }

    /// Appends row data to a local transaction (pieces are joined in order).
    pub fn append_data(&self, trx_id: u64, data: &[u8]) {
        lock(&self.shared.inner).engine.append_data(trx_id, data);
    }

    /// Replicates and certifies a local transaction.
    pub fn certify(&self, conn_id: u64, trx_id: u64, trx_flags: u32) -> CertifyOutcome {
        self.replicate(conn_id, trx_id, trx_flags, false)
    }

    pub(crate) fn replicate(
        &self,
        conn_id: u64,
        trx_id: u64,
        trx_flags: u32,
        toi: bool,
    ) -> CertifyOutcome {
        let submitted = match self.submit(conn_id, trx_id, trx_flags) {
            Ok(submitted) => submitted,
            Err(refusal) => return refusal.into(),
        };
        let inner = lock(&self.shared.inner);
        let (inner, outcome) = self.wait_for_verdict(inner, trx_id, &submitted);
        let Some((seqno, verdict)) = outcome else {
            return CertifyOutcome::NotOrdered;
        };
        self.shared
            .trace_at(seqno, Stage::Submitted, submitted.sent_at);
        // Ordered after the pause point: the server is reading its data as of that point,
        // so this transaction commits (or reports its failure) only after `resume`.
        let (mut inner, gate) = self.pass_pause_gate(inner, seqno, Some(trx_id));
        if gate == GatePassage::Closing {
            return CertifyOutcome::NotOrdered;
        }
        let action = inner
            .engine
            .verdict_action(trx_id, conn_id, seqno, verdict, toi);
        drop(inner);
        self.take_verdict(action, toi)
    }

    /// Encodes the transaction's write-set and hands it to the group. `Err` when nothing
    /// was sent.
    fn submit(
        &self,
        conn_id: u64,
        trx_id: u64,
        trx_flags: u32,
    ) -> Result<Submitted, SubmitRefusal> {
        let shared = &self.shared;
        let monitors = lock(&shared.monitors).clone();
        let limit = shared.max_write_set_bytes.load(Ordering::Relaxed);
        let (bytes, runner, pending) = {
            let mut inner = lock(&shared.inner);
            // Read under the engine's lock, which the dispatcher also holds while it works
            // out the commit position it reports (`purge_floor`): either it sees this
            // write-set submitted, or this reads at least what it reported. Read before
            // the lock, a report in between could pass this `last_seen` and let the cut
            // fail the write-set as too old.
            let committed = monitors
                .as_ref()
                .map_or(Seqno::UNDEFINED, |m| m.apply.last_left());
            let prepared = inner
                .engine
                .prepare_submission(conn_id, trx_id, trx_flags, committed, limit);
            if prepared.is_ok() {
                let waiting = inner
                    .runner
                    .as_ref()
                    .map_or(0, RunnerHandle::write_sets_waiting_to_send);
                inner.engine.sample_send_queue(waiting);
            }
            let pending = shared.drain(&mut inner);
            (prepared, inner.runner.clone(), pending)
        };
        shared.carry_out(pending);
        let bytes = bytes?;
        // Never block on the transport while holding the engine's lock: the dispatcher
        // needs it to hand out verdicts.
        let sent_at = Instant::now();
        let ticket = runner.as_ref().and_then(|r| r.submit(bytes).ok());
        lock(&shared.inner).engine.submitted(trx_id, ticket);
        match (runner, ticket) {
            (Some(runner), Some(ticket)) => Ok(Submitted {
                runner,
                ticket,
                sent_at,
            }),
            _ => Err(SubmitRefusal::NotOrdered),
        }
    }

    /// Waits for the dispatcher to order and certify the submitted write-set: its seqno and
    /// verdict, or `None` when it will never be ordered here.
    fn wait_for_verdict<'a>(
        &'a self,
        mut inner: MutexGuard<'a, Inner>,
        trx_id: u64,
        submitted: &Submitted,
    ) -> (MutexGuard<'a, Inner>, Option<(Seqno, Verdict)>) {
        let shared = &self.shared;
        let mut cancel_tried = false;
        // Registered under the engine's lock, before the first look at the verdict: a
        // verdict given after that look finds this waiter.
        let waiter = Arc::new(VerdictWaiter::default());
        lock(&shared.verdict_waiters).insert(submitted.ticket, Arc::clone(&waiter));
        let mut waited = false;
        let outcome = loop {
            match inner.engine.poll_verdict(trx_id, cancel_tried) {
                VerdictPoll::Ordered(seqno, verdict) => {
                    // Certified while this transaction slept, yet not marked by its
                    // certification: something else woke it.
                    if waited && !waiter.given.load(Ordering::Relaxed) {
                        shared.verdicts_found_late.fetch_add(1, Ordering::Relaxed);
                    }
                    let took = submitted.sent_at.elapsed();
                    inner.engine.record_replication_latency(took);
                    timings::observe(&shared.timings.replication, took);
                    break Some((seqno, verdict));
                }
                VerdictPoll::NotOrdered => break None,
                VerdictPoll::TryCancel => {
                    cancel_tried = true;
                    drop(inner);
                    let cancelled = submitted.runner.cancel(submitted.ticket).unwrap_or(false);
                    inner = lock(&shared.inner);
                    if cancelled {
                        inner.engine.withdrawn_before_sending(trx_id);
                        break None;
                    }
                }
                VerdictPoll::Pending => {
                    inner = waiter
                        .wake
                        .wait_timeout(inner, VERDICT_RECHECK)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    waited = true;
                }
            }
        };
        lock(&shared.verdict_waiters).remove(&submitted.ticket);
        (inner, outcome)
    }

    /// Local transactions that found their verdict after a wait that their certification
    /// did not end (the recheck after [`VERDICT_RECHECK`], or a wake-up meant for all):
    /// each is a wake-up the certification should have given.
    pub fn verdicts_found_late(&self) -> u64 {
        self.shared.verdicts_found_late.load(Ordering::Relaxed)
    }

    /// Acts on a certified write-set's verdict: a failure passes its seqno in the apply
    /// monitor; a pass enters it (TOI also enters commit order, to run alone) unless an
    /// earlier seqno brute-force aborted the transaction meanwhile.
    fn take_verdict(&self, action: VerdictAction, toi: bool) -> CertifyOutcome {
        let monitors = self.monitors();
        match action {
            VerdictAction::Failed(meta) => {
                monitors.apply.self_cancel(meta.gtid.seqno);
            }
            VerdictAction::Replay(_) => {}
            VerdictAction::Enter(meta) => {
                let seqno = meta.gtid.seqno;
                if monitors.apply.enter(seqno, meta.depends_on).is_err() {
                    return CertifyOutcome::BfAborted(meta);
                }
                self.shared.trace(seqno, Stage::ApplyEntered);
                if toi {
                    monitors.commit.enter_regardless(seqno, seqno.prev());
                }
                lock(&self.shared.inner)
                    .engine
                    .entered_apply(seqno, toi.then_some(meta.conn_id));
            }
        }
        action.into()
    }

    /// Waits while `pause` holds `seqno` back, then records it as started. A local
    /// transaction (`trx_id`) that is brute-force aborted meanwhile stops waiting: it has
    /// not started, and it replays (through this gate again) or rolls back.
    pub(crate) fn pass_pause_gate<'a>(
        &self,
        mut inner: MutexGuard<'a, Inner>,
        seqno: Seqno,
        trx_id: Option<u64>,
    ) -> (MutexGuard<'a, Inner>, GatePassage) {
        loop {
            let passage = inner.engine.pass_pause_gate(seqno, trx_id);
            if passage != GatePassage::Held {
                return (inner, passage);
            }
            inner = self
                .shared
                .changed
                .wait(inner)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Rolls back streaming transaction `trx_id` everywhere: orders a rollback write-set
    /// (`ROLLBACK|PA_UNSAFE`, carrying `data`) that every node, this one included, delivers
    /// to its appliers. It does not wait for the order, and flow control does not hold it.
    /// `Err` if it could not be sent; wsrep-lib then sends it again later.
    pub fn rollback(&self, trx_id: u64, data: &[u8]) -> Result<(), ReplicatorError> {
        let committed = self.last_committed_locked();
        let (bytes, runner) = {
            let mut inner = lock(&self.shared.inner);
            let bytes = inner.engine.prepare_rollback(trx_id, data, committed);
            (bytes, inner.runner.clone())
        };
        let (Some(bytes), Some(runner)) = (bytes, runner) else {
            return Err(ReplicatorError::NotConnected);
        };
        runner
            .submit_urgent(bytes)
            .map(|_| ())
            .map_err(|_| ReplicatorError::NotConnected)
    }

    /// Brute-force aborts local transaction `victim` on behalf of the write-set at `bf_seqno`.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> AbortOutcome {
        let monitors = lock(&self.shared.monitors).clone();
        let outcome = {
            let mut inner = lock(&self.shared.inner);
            let (outcome, interrupt) = inner.engine.abort_certification(bf_seqno, victim);
            if let (Some(seqno), Some(monitors)) = (interrupt, monitors) {
                // Interrupt exactly the wait the victim is in (or will be in next); under
                // the engine's lock, so that a replay beginning now either withdraws this
                // interrupt or was seen by the engine, which then refused the abort.
                if !monitors.apply.interrupt(seqno) {
                    monitors.commit.interrupt(seqno);
                }
            }
            outcome
        };
        // Wake a victim waiting in `certify`, or at the pause gate.
        self.shared.notify_everyone();
        outcome
    }
}
