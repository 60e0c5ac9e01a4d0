//! A local transaction's life up to its verdict: keys and rows gathered, the write-set
//! encoded for the group, its verdict handed over (or its withdrawal), streaming fragments,
//! rollbacks of streaming transactions, and brute-force aborts by earlier seqnos.

use std::time::Duration;

use base::{KeyType, NodeState, Seqno};
use cert::Verdict;
use writeset::{flags, Bytes, Key, WriteSet, WriteSetView};

use crate::outcome::{AbortOutcome, SubmitRefusal};
use crate::{LogLevel, NodeEngine, ABANDONED_REMEMBERED};

/// A local transaction, from its first key to its release (across its fragments, for a
/// streaming one).
#[derive(Debug)]
pub struct LocalTrx {
    /// The client connection it runs on.
    pub conn_id: u64,
    /// The keys of the current fragment (or of the whole transaction).
    pub keys: Vec<Key>,
    /// Its row data.
    pub data: Vec<u8>,
    /// wsrep flags of the last submission.
    pub flags: u32,
    /// Seqno and verdict, once ordered.
    pub outcome: Option<(Seqno, Verdict)>,
    /// Set by a brute-force abort from this seqno.
    pub aborted_by: Option<Seqno>,
    /// True once handed to the group: its ordered write-set belongs to this record.
    pub submitted: bool,
    /// The group's ticket for the last submission.
    pub ticket: Option<u64>,
    /// True once its seqno left commit order.
    pub commit_done: bool,
    /// The server rolled it back after fragments had been replicated (`rollback`).
    pub rolled_back: bool,
    /// The `last_seen` of the write-set last submitted: certification needs the index
    /// from here on.
    pub last_seen: Seqno,
    /// Its replay began ([`NodeEngine::begin_replay`]): it commits whatever comes, and
    /// no seqno may abort it any more.
    pub replaying: bool,
}

impl Default for LocalTrx {
    fn default() -> LocalTrx {
        LocalTrx {
            conn_id: 0,
            keys: Vec::new(),
            data: Vec::new(),
            flags: 0,
            outcome: None,
            aborted_by: None,
            submitted: false,
            ticket: None,
            commit_done: false,
            rolled_back: false,
            last_seen: Seqno::UNDEFINED,
            replaying: false,
        }
    }
}

impl LocalTrx {
    /// After `release`, does this transaction go on with another fragment? Only after a
    /// fragment that passed, left commit order and neither ended nor rolled back the
    /// transaction (wsrep-lib releases the handle after every fragment).
    pub fn continues_after_release(&self) -> bool {
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
        self.ticket = None;
        self.commit_done = false;
    }
}

/// Where a waiter for a verdict stands (see [`NodeEngine::poll_verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictPoll {
    /// Ordered and certified.
    Ordered(Seqno, Verdict),
    /// It will never be ordered here: withdrawn, given up by the group, or the node is
    /// closing.
    NotOrdered,
    /// Brute-force aborted while its write-set may still be held back unsent: the waiter
    /// should try to withdraw it from the group ([`NodeEngine::withdrawn_before_sending`]).
    TryCancel,
    /// Nothing yet: wait for the engine to change.
    Pending,
}

/// How a wait at the pause gate ends (see [`NodeEngine::pass_pause_gate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatePassage {
    /// Not held (any more): the seqno is recorded as started.
    Passed,
    /// The local transaction waiting there was brute-force aborted by an earlier seqno.
    Aborted,
    /// The node is closing.
    Closing,
    /// Still held: wait for `resume`.
    Held,
}

impl NodeEngine {
    /// Adds a key to a local transaction (created on first use).
    pub fn append_key(&mut self, trx_id: u64, parts: Vec<Vec<u8>>, key_type: KeyType) {
        let trx = self.trxs.entry(trx_id).or_default();
        trx.keys.push(Key { parts, key_type });
    }

    /// Appends row data to a local transaction (pieces are joined in order).
    pub fn append_data(&mut self, trx_id: u64, data: &[u8]) {
        let trx = self.trxs.entry(trx_id).or_default();
        trx.data.extend_from_slice(data);
    }

    /// Sets a TOI statement's keys (every one exclusive) and data, under `trx_id`.
    pub fn begin_toi(&mut self, trx_id: u64, keys: Vec<Vec<Vec<u8>>>, data: &[u8]) {
        let trx = self.trxs.entry(trx_id).or_default();
        trx.keys = keys
            .into_iter()
            .map(|parts| Key {
                parts,
                key_type: KeyType::Exclusive,
            })
            .collect();
        trx.data = data.to_vec();
    }

    /// Encodes the transaction's write-set for the group and marks it submitted; `committed`
    /// is what this node has committed (its `last_seen`), `max_bytes` is `repl.max_ws_size`.
    /// The caller hands the bytes to the group and reports the ticket with
    /// [`NodeEngine::submitted`].
    pub fn prepare_submission(
        &mut self,
        conn_id: u64,
        trx_id: u64,
        trx_flags: u32,
        committed: Seqno,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SubmitRefusal> {
        let ready = self.view.primary && matches!(self.state, NodeState::Synced | NodeState::Donor);
        let own = self.view.own;
        let Some(trx) = self.trxs.get_mut(&trx_id) else {
            return Err(SubmitRefusal::NotOrdered);
        };
        if trx.aborted_by.is_some() || !ready || !self.life.connected {
            return Err(SubmitRefusal::NotOrdered);
        }
        trx.conn_id = conn_id;
        trx.flags = trx_flags;
        trx.last_seen = committed;
        // Encoded from the record, which keeps keys and data: a BF-aborted transaction is
        // replayed from it.
        let write_set = WriteSetView {
            source: own,
            conn_id,
            trx_id,
            last_seen: committed,
            flags: trx_flags,
            keys: &trx.keys,
            data: &trx.data,
        };
        let bytes = write_set.to_bytes();
        if bytes.len() as u64 > max_bytes {
            let size = bytes.len() as u64;
            self.stats.counters.size_exceeded += 1;
            let message = format!(
                "transaction {trx_id}: write-set of {size} bytes exceeds repl.max_ws_size = \
                 {max_bytes}; nothing was replicated (raise wsrep_max_ws_size, or replicate it \
                 in fragments with wsrep_trx_fragment_size)"
            );
            self.say(LogLevel::Warning, message);
            return Err(SubmitRefusal::SizeExceeded {
                size,
                limit: max_bytes,
            });
        }
        let key_bytes: usize = write_set
            .keys
            .iter()
            .flat_map(|key| key.parts.iter())
            .map(Vec::len)
            .sum();
        let (key_count, data_len) = (write_set.keys.len(), write_set.data.len());
        trx.submitted = true;
        let counters = &mut self.stats.counters;
        counters.replicated += 1;
        counters.replicated_bytes += bytes.len() as u64;
        counters.repl_keys += key_count as u64;
        counters.repl_keys_bytes += key_bytes as u64;
        counters.repl_data_bytes += data_len as u64;
        Ok(bytes)
    }

    /// The group took the submission under `ticket`; `None` when the group member is gone
    /// (the transaction will never be ordered).
    pub fn submitted(&mut self, trx_id: u64, ticket: Option<u64>) {
        if let Some(trx) = self.trxs.get_mut(&trx_id) {
            trx.ticket = ticket;
            if ticket.is_none() {
                trx.submitted = false;
            }
        }
    }

    /// Where the submitted write-set of `trx_id` stands. `cancel_tried`: the waiter already
    /// tried to withdraw it after a brute-force abort.
    pub fn poll_verdict(&mut self, trx_id: u64, cancel_tried: bool) -> VerdictPoll {
        let Some(trx) = self.trxs.get(&trx_id) else {
            return VerdictPoll::NotOrdered;
        };
        if let Some((seqno, verdict)) = trx.outcome {
            return VerdictPoll::Ordered(seqno, verdict);
        }
        // Withdrawn: this node fell out of the order (see `withdraw_waiting`).
        if self.stopped() || !trx.submitted {
            return VerdictPoll::NotOrdered;
        }
        let ticket = trx.ticket;
        let aborted = trx.aborted_by.is_some();
        // Given up by the group before it left this node (see `withdraw_abandoned`).
        if let Some(at) = ticket.and_then(|t| self.abandoned.iter().position(|a| *a == t)) {
            self.abandoned.remove(at);
            if let Some(trx) = self.trxs.get_mut(&trx_id) {
                trx.submitted = false;
            }
            return VerdictPoll::NotOrdered;
        }
        if aborted && !cancel_tried {
            // Brute-force aborted while flow control may hold the write-set back: an
            // applier is waiting for this transaction's locks, so give up now if the
            // write-set never left. If it did leave, it will be ordered (nothing holds sent
            // write-sets) and the transaction is replayed.
            return VerdictPoll::TryCancel;
        }
        VerdictPoll::Pending
    }

    /// The group withdrew the brute-force aborted transaction's write-set before it was
    /// sent: it will never be ordered.
    pub fn withdrawn_before_sending(&mut self, trx_id: u64) {
        if let Some(trx) = self.trxs.get_mut(&trx_id) {
            trx.submitted = false;
        }
    }

    /// A local write-set took `took` from submission to its ordered delivery.
    pub fn record_replication_latency(&mut self, took: Duration) {
        self.stats.window.replication_latency.record(took);
    }

    /// The group's ticket for the last submission of `trx_id`, if it has one.
    pub fn ticket_of(&self, trx_id: u64) -> Option<u64> {
        self.trxs.get(&trx_id).and_then(|t| t.ticket)
    }

    /// The brute-force abort of `trx_id`, if any.
    pub fn aborted_by(&self, trx_id: u64) -> Option<Seqno> {
        self.trxs.get(&trx_id).and_then(|t| t.aborted_by)
    }

    /// Rolls back streaming transaction `trx_id` everywhere: the write-set to order
    /// (`ROLLBACK|PA_UNSAFE`, carrying `data`) that every node, this one included, delivers
    /// to its appliers; `None` when this node cannot send one now.
    pub fn prepare_rollback(
        &mut self,
        trx_id: u64,
        data: &[u8],
        committed: Seqno,
    ) -> Option<Vec<u8>> {
        if !self.view.primary || !self.life.connected {
            return None;
        }
        let conn_id = match self.trxs.get_mut(&trx_id) {
            Some(trx) => {
                trx.rolled_back = true;
                trx.conn_id
            }
            None => 0,
        };
        let write_set = WriteSet {
            source: self.view.own,
            conn_id,
            trx_id,
            last_seen: committed,
            flags: flags::ROLLBACK | flags::PA_UNSAFE,
            keys: writeset::Keys::default(),
            data: Bytes::copy_from_slice(data),
        };
        self.stats.counters.streaming_rollbacks += 1;
        Some(write_set.to_bytes())
    }

    /// Brute-force aborts local transaction `victim` on behalf of the write-set at
    /// `bf_seqno`. With the outcome, the seqno whose monitor wait must be interrupted (a
    /// victim already ordered).
    pub fn abort_certification(
        &mut self,
        bf_seqno: Seqno,
        victim: u64,
    ) -> (AbortOutcome, Option<Seqno>) {
        let Some(trx) = self.trxs.get_mut(&victim) else {
            return (AbortOutcome::Aborted, None);
        };
        if let Some((seqno, _)) = trx.outcome {
            if seqno < bf_seqno {
                return (AbortOutcome::NotAllowed(seqno), None);
            }
            if trx.replaying {
                // A replay is this node's copy of a write-set the cluster committed: it
                // must commit, as Galera's replaying transaction does. Nothing earlier
                // waits on its rows long: it applies once every earlier seqno committed.
                base::mark!("engine.replaying_transaction_not_aborted");
                return (AbortOutcome::NotAllowed(seqno), None);
            }
            trx.aborted_by = Some(bf_seqno);
            self.stats.counters.bf_aborts += 1;
            base::mark!("engine.ordered_transaction_brute_force_aborted");
            return (AbortOutcome::Aborted, Some(seqno));
        }
        trx.aborted_by = Some(bf_seqno);
        self.stats.counters.bf_aborts += 1;
        (AbortOutcome::Aborted, None)
    }

    /// Waits while `pause` holds `seqno` back, then records it as started. A local
    /// transaction (`trx_id`) that is brute-force aborted meanwhile stops waiting: it has
    /// not started, and it replays (through this gate again) or rolls back.
    pub fn pass_pause_gate(&mut self, seqno: Seqno, trx_id: Option<u64>) -> GatePassage {
        if !self.pause.holds(seqno) {
            self.pause.started(seqno);
            return GatePassage::Passed;
        }
        if self.stopped() {
            return GatePassage::Closing;
        }
        // Only an abort by an earlier seqno counts: a later one could not run anyway.
        let aborted = trx_id
            .and_then(|id| self.trxs.get(&id))
            .and_then(|trx| trx.aborted_by)
            .is_some_and(|bf| bf < seqno);
        if aborted {
            return GatePassage::Aborted;
        }
        GatePassage::Held
    }

    /// What this node reports as committed for the commit cut, below which every member
    /// purges its certification index: no more than `committed`, and no more than the
    /// `last_seen` of any local write-set still waiting for its order. A large write-set
    /// takes long to order; had the cut passed its `last_seen` meanwhile, it would fail
    /// certification as too old although nothing conflicted with it.
    pub fn purge_floor(&self, committed: Seqno) -> Seqno {
        self.trxs
            .values()
            .filter(|t| t.submitted && t.outcome.is_none())
            .map(|t| t.last_seen)
            .fold(committed, Seqno::min)
    }

    /// Samples the send queue (`wsrep_local_send_queue_avg`) as a write-set about to be
    /// sent finds it: the node's write-sets not yet wholly sent to the group (`waiting`,
    /// from the group member), itself not counted, as Galera's send monitor samples it.
    pub fn sample_send_queue(&mut self, waiting: u64) {
        self.stats.window.send_queue.record(waiting);
    }

    /// Local transactions open.
    pub fn open_transactions(&self) -> usize {
        self.trxs.len()
    }

    /// Client connections with a local transaction or a TOI statement open.
    pub fn open_connections(&self) -> usize {
        let mut connections: Vec<u64> = self
            .trxs
            .values()
            .map(|t| t.conn_id)
            .chain(self.toi_by_conn.keys().copied())
            .collect();
        connections.sort_unstable();
        connections.dedup();
        connections.len()
    }

    /// Fails every local transaction still waiting for its write-set's verdict: this node
    /// left the order (its unordered submissions were abandoned, or it must catch up by
    /// IST). Such a verdict never comes here; a write-set the others did order comes back
    /// in the IST as a remote one. Waiting on would keep the transaction's row locks, which
    /// the IST appliers need: a deadlock. The server rolls it back, the client gets an
    /// error.
    pub(crate) fn withdraw_waiting(&mut self) {
        let mut withdrawn = 0;
        for trx in self.trxs.values_mut() {
            if trx.submitted && trx.outcome.is_none() {
                trx.submitted = false;
                withdrawn += 1;
            }
        }
        if withdrawn > 0 {
            base::mark!("engine.waiting_transactions_withdrawn");
            let message = format!(
                "{withdrawn} local transaction(s) waiting for their order are rolled back: \
                 this node left the primary component (their write-sets, if the others \
                 ordered them, come back by IST)"
            );
            self.say(LogLevel::Warning, message);
        }
    }

    /// The group gave these submissions up (they never left this node, which lost the
    /// primary component, or it is rejoining or closing): their transactions fail. Each
    /// waiter finds its ticket here, even one that has not started waiting yet.
    pub(crate) fn withdraw_abandoned(&mut self, tickets: &[u64]) {
        for ticket in tickets {
            if self.abandoned.len() == ABANDONED_REMEMBERED {
                self.abandoned.pop_front();
            }
            self.abandoned.push_back(*ticket);
        }
        let message = format!(
            "the group gave up {} local write-set(s) not ordered here (this node is out of \
             the primary component, rejoining or closing): their transactions fail",
            tickets.len()
        );
        // A note: the server reports each failed transaction itself, as with Galera.
        self.say(LogLevel::Info, message);
    }
}
