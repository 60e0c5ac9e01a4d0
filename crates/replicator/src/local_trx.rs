//! The local transaction's life up to its verdict: keys and rows gathered, the write-set
//! replicated and certified, streaming fragments, rollbacks of streaming transactions, and
//! brute-force aborts by earlier seqnos.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Instant;

use base::{Gtid, KeyType, NodeState, Seqno};
use cert::Verdict;
use writeset::{flags, Bytes, Key, WriteSet, WriteSetView};

use transport::RunnerHandle;

use crate::app::{LogLevel, Meta};
use crate::error::{AbortOutcome, CertifyOutcome, ReplicatorError};
use crate::shared::{lock, Inner};
use crate::Replicator;

/// Galera's default `repl.max_ws_size` (2 GiB - 1), until the provider sets its own.
pub const DEFAULT_MAX_WRITE_SET_BYTES: u64 = (1 << 31) - 1;

/// A write-set handed to the group, with what its waiter needs to follow it.
struct Submitted {
    runner: RunnerHandle,
    /// The group's ticket for the submission (see `GroupNode::submit`).
    ticket: u64,
    sent_at: Instant,
}

/// A local transaction, from its first key to its release (across its fragments, for a
/// streaming one).
pub(crate) struct LocalTrx {
    pub(crate) conn_id: u64,
    pub(crate) keys: Vec<Key>,
    pub(crate) data: Vec<u8>,
    pub(crate) flags: u32,
    /// Seqno and verdict, once ordered.
    pub(crate) outcome: Option<(Seqno, Verdict)>,
    /// Set by a brute-force abort from this seqno.
    pub(crate) aborted_by: Option<Seqno>,
    /// True once handed to the group: its ordered write-set belongs to this record.
    pub(crate) submitted: bool,
    /// True once its seqno left commit order.
    pub(crate) commit_done: bool,
    /// The server rolled it back after fragments had been replicated (`rollback`).
    rolled_back: bool,
    /// The `last_seen` of the write-set last submitted: certification needs the index
    /// from here on.
    pub(crate) last_seen: Seqno,
}

impl LocalTrx {
    /// After `release`, does this transaction go on with another fragment? Only after a
    /// fragment that passed, left commit order and neither ended nor rolled back the
    /// transaction (wsrep-lib releases the handle after every fragment).
    pub(crate) fn continues_after_release(&self) -> bool {
        let fragment = self.flags & (flags::TRX_END | flags::ROLLBACK | flags::ISOLATION) == 0;
        let passed = matches!(self.outcome, Some((_, Verdict::Pass { .. })));
        fragment && passed && self.commit_done && !self.rolled_back
    }

    /// Clears what the last fragment carried, so that the next one replicates only its own
    /// keys and rows. A brute-force abort stays: the next certify must fail.
    pub(crate) fn start_next_fragment(&mut self) {
        self.keys.clear();
        self.data.clear();
        self.outcome = None;
        self.submitted = false;
        self.commit_done = false;
    }
}

pub(crate) fn new_trx() -> LocalTrx {
    LocalTrx {
        conn_id: 0,
        keys: Vec::new(),
        data: Vec::new(),
        flags: 0,
        outcome: None,
        aborted_by: None,
        submitted: false,
        commit_done: false,
        rolled_back: false,
        last_seen: Seqno::UNDEFINED,
    }
}

/// How a wait at the pause gate ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GatePassage {
    /// Not held (any more): the seqno is recorded as started.
    Passed,
    /// The local transaction waiting there was brute-force aborted by an earlier seqno.
    Aborted,
    /// The node is closing.
    Closing,
}

impl Replicator {
    /// Adds a key to a local transaction (created on first use).
    pub fn append_key(&self, trx_id: u64, parts: Vec<Vec<u8>>, key_type: KeyType) {
        let mut inner = lock(&self.shared.inner);
        let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
        trx.keys.push(Key { parts, key_type });
    }

    /// Appends row data to a local transaction (pieces are joined in order).
    pub fn append_data(&self, trx_id: u64, data: &[u8]) {
        let mut inner = lock(&self.shared.inner);
        let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
        trx.data.extend_from_slice(data);
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
            Err(outcome) => return outcome,
        };
        let inner = lock(&self.shared.inner);
        let (inner, outcome) = self.wait_for_verdict(inner, trx_id, &submitted);
        let Some((seqno, verdict)) = outcome else {
            return CertifyOutcome::NotOrdered;
        };
        // Ordered after the pause point: the server is reading its data as of that point,
        // so this transaction commits (or reports its failure) only after `resume`.
        let (inner, gate) = self.pass_pause_gate(inner, seqno, Some(trx_id));
        if gate == GatePassage::Closing {
            return CertifyOutcome::NotOrdered;
        }
        let meta = Meta {
            gtid: Gtid {
                cluster: inner.cluster,
                seqno,
            },
            source: inner.own,
            trx_id,
            conn_id,
            depends_on: Seqno::UNDEFINED,
        };
        let aborted_by = inner.trxs.get(&trx_id).and_then(|t| t.aborted_by);
        drop(inner);
        self.take_verdict(meta, verdict, aborted_by, toi)
    }

    /// Encodes the transaction's write-set and hands it to the group. `Err` with the
    /// outcome when nothing was sent.
    fn submit(
        &self,
        conn_id: u64,
        trx_id: u64,
        trx_flags: u32,
    ) -> Result<Submitted, CertifyOutcome> {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let ready = inner.primary && matches!(inner.state, NodeState::Synced | NodeState::Donor);
        let own = inner.own;
        let last_seen = self.last_committed_locked();
        let Some(trx) = inner.trxs.get_mut(&trx_id) else {
            return Err(CertifyOutcome::NotOrdered);
        };
        if trx.aborted_by.is_some() || !ready {
            return Err(CertifyOutcome::NotOrdered);
        }
        trx.conn_id = conn_id;
        trx.flags = trx_flags;
        trx.last_seen = last_seen;
        // Encoded from the record, which keeps keys and data: a BF-aborted transaction is
        // replayed from it.
        let write_set = WriteSetView {
            source: own,
            conn_id,
            trx_id,
            last_seen,
            flags: trx_flags,
            keys: &trx.keys,
            data: &trx.data,
        };
        let bytes = write_set.to_bytes();
        let limit = shared.max_write_set_bytes.load(Ordering::Relaxed);
        if bytes.len() as u64 > limit {
            let size = bytes.len() as u64;
            inner.counters.size_exceeded += 1;
            drop(inner);
            let message = format!(
                "transaction {trx_id}: write-set of {size} bytes exceeds repl.max_ws_size = \
                 {limit}; nothing was replicated (raise wsrep_max_ws_size, or replicate it in \
                 fragments with wsrep_trx_fragment_size)"
            );
            shared.app.log(LogLevel::Warning, &message);
            return Err(CertifyOutcome::SizeExceeded { size, limit });
        }
        let key_bytes: usize = write_set
            .keys
            .iter()
            .flat_map(|key| key.parts.iter())
            .map(Vec::len)
            .sum();
        let (key_count, data_len) = (write_set.keys.len(), write_set.data.len());
        trx.submitted = true;
        let counters = &mut inner.counters;
        counters.replicated += 1;
        counters.replicated_bytes += bytes.len() as u64;
        counters.repl_keys += key_count as u64;
        counters.repl_keys_bytes += key_bytes as u64;
        counters.repl_data_bytes += data_len as u64;
        let in_flight = inner.write_sets_in_flight();
        inner.window.send_queue.record(in_flight as u64);
        let Some(runner) = inner.runner.clone() else {
            return Err(CertifyOutcome::NotOrdered);
        };
        // Never block on the transport while holding the state lock: the dispatcher needs
        // it to hand out verdicts.
        drop(inner);
        let sent_at = Instant::now();
        let Ok(ticket) = runner.submit(bytes) else {
            return Err(CertifyOutcome::NotOrdered);
        };
        Ok(Submitted {
            runner,
            ticket,
            sent_at,
        })
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
        let ticket = submitted.ticket;
        let mut cancel_tried = false;
        let outcome = loop {
            let trx = inner
                .trxs
                .get(&trx_id)
                .expect("a waiting trx stays registered");
            if let Some(outcome) = trx.outcome {
                inner
                    .window
                    .replication_latency
                    .record(submitted.sent_at.elapsed());
                break Some(outcome);
            }
            // Withdrawn: this node fell out of the order (see `withdraw_waiting`).
            if inner.closing || !inner.connected || !trx.submitted {
                break None;
            }
            // Given up by the group before it left this node (see `withdraw_abandoned`).
            if let Some(at) = inner.abandoned.iter().position(|t| *t == ticket) {
                inner.abandoned.remove(at);
                if let Some(trx) = inner.trxs.get_mut(&trx_id) {
                    trx.submitted = false;
                }
                break None;
            }
            if trx.aborted_by.is_some() && !cancel_tried {
                // Brute-force aborted while flow control may hold the write-set back: an
                // applier is waiting for this transaction's locks, so give up now if the
                // write-set never left. If it did leave, it will be ordered (nothing holds
                // sent write-sets) and the transaction is replayed.
                cancel_tried = true;
                drop(inner);
                let cancelled = submitted.runner.cancel(ticket).unwrap_or(false);
                inner = lock(&shared.inner);
                if cancelled {
                    if let Some(trx) = inner.trxs.get_mut(&trx_id) {
                        trx.submitted = false;
                    }
                    break None;
                }
                continue;
            }
            inner = shared
                .changed
                .wait(inner)
                .unwrap_or_else(|p| p.into_inner());
        };
        (inner, outcome)
    }

    /// Acts on a certified write-set's verdict: a failure passes its seqno in the apply
    /// monitor; a pass enters it (TOI also enters commit order, to run alone) unless an
    /// earlier seqno brute-force aborted the transaction meanwhile.
    fn take_verdict(
        &self,
        meta: Meta,
        verdict: Verdict,
        aborted_by: Option<Seqno>,
        toi: bool,
    ) -> CertifyOutcome {
        let seqno = meta.gtid.seqno;
        let monitors = self.monitors();
        match verdict {
            Verdict::Fail(_) => {
                monitors.apply.self_cancel(seqno);
                lock(&self.shared.inner).counters.cert_failures += 1;
                CertifyOutcome::Failed(meta)
            }
            Verdict::Pass { depends_on } => {
                if aborted_by.is_some_and(|bf| bf < seqno) {
                    return CertifyOutcome::BfAborted(Meta { depends_on, ..meta });
                }
                let depends_on = if toi { seqno.prev() } else { depends_on };
                let meta = Meta { depends_on, ..meta };
                if monitors.apply.enter(seqno, depends_on).is_err() {
                    return CertifyOutcome::BfAborted(meta);
                }
                lock(&self.shared.inner).entered_apply.insert(seqno);
                if toi {
                    monitors.commit.enter_regardless(seqno, seqno.prev());
                    lock(&self.shared.inner)
                        .toi_by_conn
                        .insert(meta.conn_id, seqno);
                }
                CertifyOutcome::Committable(meta)
            }
        }
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
            if !inner.pause.holds(seqno) {
                inner.pause.started(seqno);
                return (inner, GatePassage::Passed);
            }
            if inner.closing || !inner.connected {
                return (inner, GatePassage::Closing);
            }
            // Only an abort by an earlier seqno counts: a later one could not run anyway.
            let aborted = trx_id
                .and_then(|id| inner.trxs.get(&id))
                .and_then(|trx| trx.aborted_by)
                .is_some_and(|bf| bf < seqno);
            if aborted {
                return (inner, GatePassage::Aborted);
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
        let mut inner = lock(&self.shared.inner);
        if !inner.primary || !inner.connected {
            return Err(ReplicatorError::NotConnected);
        }
        let conn_id = match inner.trxs.get_mut(&trx_id) {
            Some(trx) => {
                trx.rolled_back = true;
                trx.conn_id
            }
            None => 0,
        };
        let write_set = WriteSet {
            source: inner.own,
            conn_id,
            trx_id,
            last_seen: self.last_committed_locked(),
            flags: flags::ROLLBACK | flags::PA_UNSAFE,
            keys: Vec::new(),
            data: Bytes::copy_from_slice(data),
        };
        let Some(runner) = inner.runner.clone() else {
            return Err(ReplicatorError::NotConnected);
        };
        inner.counters.streaming_rollbacks += 1;
        drop(inner);
        runner
            .submit_urgent(write_set.to_bytes())
            .map(|_| ())
            .map_err(|_| ReplicatorError::NotConnected)
    }

    /// Brute-force aborts local transaction `victim` on behalf of the write-set at `bf_seqno`.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> AbortOutcome {
        let mut inner = lock(&self.shared.inner);
        let Some(trx) = inner.trxs.get_mut(&victim) else {
            return AbortOutcome::Aborted;
        };
        if let Some((seqno, _)) = trx.outcome {
            if seqno < bf_seqno {
                return AbortOutcome::NotAllowed(seqno);
            }
            trx.aborted_by = Some(bf_seqno);
            inner.counters.bf_aborts += 1;
            drop(inner);
            if let Some(monitors) = lock(&self.shared.monitors).clone() {
                // Interrupt exactly the wait the victim is in (or will be in next). An
                // interrupt left on the commit monitor for a victim stopped at the apply
                // monitor would later abort its own replay.
                if !monitors.apply.interrupt(seqno) {
                    monitors.commit.interrupt(seqno);
                }
            }
            // Or the victim waits at the pause gate.
            self.shared.changed.notify_all();
            return AbortOutcome::Aborted;
        }
        trx.aborted_by = Some(bf_seqno);
        inner.counters.bf_aborts += 1;
        drop(inner);
        // Wake a victim waiting in `certify`.
        self.shared.changed.notify_all();
        AbortOutcome::Aborted
    }
}
