//! The simulated server's clients: transactions that lock rows, replicate through the engine
//! (`prepare_submission`, `poll_verdict`, `verdict_action`), wait at the pause gate, enter
//! the monitors, commit in order and are acknowledged; transactions an applier brute-force
//! aborts replay; streaming transactions replicate fragment by fragment; TOI statements run
//! alone; causal reads are checked against every write acknowledged before them.

use base::{KeyType, Seqno};
use cert::Verdict;
use engine::{GatePassage, ReleaseOutcome, VerdictAction, VerdictPoll};
use rand::Rng;
use writeset::{flags, Key};

use crate::kv::{encode_ops, Op, StreamStep};
use crate::node::{Client, ClientKind, ClientPhase};
use crate::{Event, Simulation};

/// Client transactions one node keeps in flight at most.
const CLIENT_INFLIGHT_MAX: usize = 4;
/// The largest write-set a client may replicate (`repl.max_ws_size`).
const MAX_WRITE_SET_BYTES: u64 = 1 << 24;

impl Client {
    /// Whether this transaction holds the row `op` writes (or any row of a table it
    /// truncates).
    pub fn holds(&self, op: &Op) -> bool {
        match op {
            Op::Put { table, row, .. } => self.locks.contains(&(table.clone(), row.clone())),
            Op::Truncate { table } => self.locks.iter().any(|(t, _)| t == table),
            Op::Filler(_) => false,
        }
    }
}

impl Simulation {
    /// A client's turn on `slot`: maybe a new transaction, then the node works.
    pub(crate) fn on_client_tick(&mut self, slot: usize) -> Result<(), String> {
        if self.transactions_started < self.options.transactions {
            self.start_transaction(slot, false);
            let next = self.rng.gen_range(5_000..60_000);
            self.schedule(next, Event::Client { slot });
        }
        if self.nodes[slot].alive() {
            self.pump(slot)?;
        }
        Ok(())
    }

    /// Starts a client transaction on `slot`; returns its id.
    pub(crate) fn start_transaction(&mut self, slot: usize, probe: bool) -> Option<u64> {
        let ready = self.nodes[slot].process.as_ref().is_some_and(|p| {
            p.engine.state() == base::NodeState::Synced
                && p.group.is_primary()
                && (probe || p.clients.len() < CLIENT_INFLIGHT_MAX)
        });
        if !ready {
            return None;
        }
        if !probe {
            self.transactions_started += 1;
        }
        self.trx_counter += 1;
        let trx_id = self.trx_counter;
        let roll = self.rng.gen_range(0..100);
        let kind = match roll {
            0..=2 if !probe => ClientKind::Toi,
            3..=7 if !probe => ClientKind::Streaming {
                left: self.rng.gen_range(1..=3),
            },
            _ => ClientKind::Plain,
        };
        let (ops, keys, extra_flags) = self.draw_ops(&kind, probe);
        let source = self.nodes[slot].process().engine.own();
        let client = Client {
            conn_id: slot as u64 * 1_000_000 + trx_id,
            kind,
            ops: Vec::new(),
            fragment: ops,
            keys,
            extra_flags,
            source,
            locks: Default::default(),
            phase: ClientPhase::Certifying {
                cancel_tried: false,
            },
            probe,
        };
        if !self.lock_rows(slot, trx_id, client) {
            return None;
        }
        self.submit_fragment(slot, trx_id);
        if !probe && self.rng.gen_bool(0.25) {
            self.ask_causal_read(slot);
        }
        Some(trx_id)
    }

    /// The changes of one transaction (or fragment), their certification keys (updates or
    /// exclusive writes, and now and then a reference to a parent row) and extra flags.
    fn draw_ops(&mut self, kind: &ClientKind, probe: bool) -> (Vec<Op>, Vec<Key>, u32) {
        if *kind == ClientKind::Toi {
            let table = format!("t{}", self.rng.gen_range(0..2));
            let key = Key::new(&["db".as_bytes(), table.as_bytes()], KeyType::Exclusive);
            return (vec![Op::Truncate { table }], vec![key], 0);
        }
        let mut ops = Vec::new();
        let mut keys = Vec::new();
        for _ in 0..self.rng.gen_range(1..=3) {
            let table = format!("t{}", self.rng.gen_range(0..2));
            let row = format!("r{}", self.rng.gen_range(0..12));
            let key_type = if self.rng.gen_bool(0.5) {
                KeyType::Update
            } else {
                KeyType::Exclusive
            };
            keys.push(Key::new(&["db", table.as_str(), row.as_str()], key_type));
            ops.push(Op::Put {
                table,
                row,
                value: self.trx_counter,
            });
        }
        if self.rng.gen_bool(0.2) {
            let parent = format!("r{}", self.rng.gen_range(0..12));
            keys.push(Key::new(&["db", "t0", parent.as_str()], KeyType::Reference));
        }
        if !probe && self.rng.gen_range(0..100) == 0 {
            // A large write-set: it travels and is ordered in several chunks.
            let size = self
                .rng
                .gen_range(group::CHUNK_BYTES..3 * group::CHUNK_BYTES);
            ops.push(Op::Filler(vec![0x5a; size]));
        }
        let extra = if !probe && self.rng.gen_range(0..100) < 5 {
            flags::PA_UNSAFE
        } else {
            0
        };
        (ops, keys, extra)
    }

    /// Locks the rows a plain transaction writes or references (a real server locks a
    /// referenced parent row too, which certification does not count as a conflict: the
    /// source of brute-force aborts that end in a replay); false (and nothing started)
    /// when another local transaction holds one. Streaming and TOI transactions take no row
    /// locks here.
    fn lock_rows(&mut self, slot: usize, trx_id: u64, mut client: Client) -> bool {
        let process = self.nodes[slot].process();
        if client.kind == ClientKind::Plain {
            for key in &client.keys {
                let [_, table, row] = key.parts.as_slice() else {
                    continue;
                };
                let row = (
                    String::from_utf8_lossy(table).into_owned(),
                    String::from_utf8_lossy(row).into_owned(),
                );
                if process
                    .clients
                    .values()
                    .any(|other| other.locks.contains(&row))
                {
                    return false;
                }
                client.locks.insert(row);
            }
        }
        process.clients.insert(trx_id, client);
        true
    }

    /// Replicates the client's current fragment (its whole write-set unless streaming).
    fn submit_fragment(&mut self, slot: usize, trx_id: u64) {
        let process = self.nodes[slot].process();
        let committed = process.committed();
        let client = process.clients.get_mut(&trx_id).expect("started");
        let first = client.ops.is_empty();
        let (trx_flags, engine_trx) = match client.kind {
            ClientKind::Plain => (flags::TRX_START | flags::TRX_END, trx_id),
            ClientKind::Toi => (
                flags::TRX_START | flags::TRX_END | flags::ISOLATION,
                toi_trx_id(client.conn_id),
            ),
            ClientKind::Streaming { left } => {
                let start = if first { flags::TRX_START } else { 0 };
                let end = if left == 0 { flags::TRX_END } else { 0 };
                (start | end, trx_id)
            }
        };
        let trx_flags = trx_flags | client.extra_flags;
        let data = encode_ops(&client.fragment);
        let keys = client.keys.clone();
        let conn_id = client.conn_id;
        if client.kind == ClientKind::Toi {
            let parts = keys.into_iter().map(|k| k.parts).collect();
            process.engine.begin_toi(engine_trx, parts, &data);
        } else {
            for key in keys {
                process
                    .engine
                    .append_key(engine_trx, key.parts, key.key_type);
            }
            process.engine.append_data(engine_trx, &data);
        }
        let prepared = process.engine.prepare_submission(
            conn_id,
            engine_trx,
            trx_flags,
            committed,
            MAX_WRITE_SET_BYTES,
        );
        let ticket = prepared.ok().map(|bytes| process.group.submit(bytes));
        process.engine.submitted(engine_trx, ticket);
        let client = process.clients.get_mut(&trx_id).expect("started");
        client.phase = ClientPhase::Certifying {
            cancel_tried: false,
        };
    }

    /// Every client transaction that can move, moves.
    pub(crate) fn advance_clients(&mut self, slot: usize) -> Result<bool, String> {
        let mut moved = self.collect_causal_answers(slot)?;
        let ids: Vec<u64> = self.nodes[slot].process().clients.keys().copied().collect();
        for trx_id in ids {
            moved |= self.advance_client(slot, trx_id)?;
        }
        Ok(moved)
    }

    fn advance_client(&mut self, slot: usize, trx_id: u64) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let Some(client) = process.clients.get(&trx_id) else {
            return Ok(false);
        };
        match client.phase.clone() {
            ClientPhase::Certifying { cancel_tried } => {
                self.await_verdict(slot, trx_id, cancel_tried)
            }
            ClientPhase::Ordered { seqno, depends_on } => {
                self.act_on_verdict(slot, trx_id, seqno, depends_on)
            }
            ClientPhase::Entering { seqno, depends_on } => {
                self.enter_apply_order(slot, trx_id, seqno, depends_on)
            }
            ClientPhase::Committing { seqno } => self.commit_local(slot, trx_id, seqno),
            ClientPhase::Replaying { seqno, entered } => self.replay(slot, trx_id, seqno, entered),
        }
    }

    fn await_verdict(
        &mut self,
        slot: usize,
        trx_id: u64,
        cancel_tried: bool,
    ) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let engine_trx = engine_trx_of(process.clients.get(&trx_id).expect("listed"), trx_id);
        match process.engine.poll_verdict(engine_trx, cancel_tried) {
            VerdictPoll::Pending => Ok(false),
            VerdictPoll::TryCancel => {
                let ticket = process.engine_ticket(engine_trx);
                if ticket.is_some_and(|ticket| process.group.cancel(ticket)) {
                    base::mark!("sim.aborted_submission_withdrawn_before_it_left");
                    process.engine.withdrawn_before_sending(engine_trx);
                }
                set_client_phase(
                    process,
                    trx_id,
                    ClientPhase::Certifying { cancel_tried: true },
                );
                Ok(true)
            }
            VerdictPoll::NotOrdered => {
                self.end_client(slot, trx_id, None)?;
                Ok(true)
            }
            VerdictPoll::Ordered(seqno, verdict) => {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!(
                        "{} node {slot} local verdict {seqno:?} {verdict:?}",
                        self.now_us
                    );
                }
                self.checker.certified(slot, seqno, verdict.depends_on())?;
                let process = self.nodes[slot].process();
                let depends_on = verdict.depends_on();
                set_client_phase(process, trx_id, ClientPhase::Ordered { seqno, depends_on });
                Ok(true)
            }
        }
    }

    /// Past the pause gate, acts on the verdict: a failure rolls back, a pass enters the
    /// monitors, an abort by an earlier seqno replays.
    fn act_on_verdict(
        &mut self,
        slot: usize,
        trx_id: u64,
        seqno: Seqno,
        depends_on: Option<Seqno>,
    ) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let client = process.clients.get(&trx_id).expect("listed");
        let (engine_trx, conn_id, toi) = (
            engine_trx_of(client, trx_id),
            client.conn_id,
            client.kind == ClientKind::Toi,
        );
        match process.engine.pass_pause_gate(seqno, Some(engine_trx)) {
            GatePassage::Held => return Ok(false),
            GatePassage::Closing => {
                self.end_client(slot, trx_id, None)?;
                return Ok(true);
            }
            GatePassage::Passed | GatePassage::Aborted => {}
        }
        let verdict = match depends_on {
            Some(depends_on) => Verdict::Pass { depends_on },
            None => Verdict::Fail(cert::Conflict::TooOld {
                last_seen: Seqno::UNDEFINED,
                purged_to: Seqno::UNDEFINED,
            }),
        };
        let action = process
            .engine
            .verdict_action(engine_trx, conn_id, seqno, verdict, toi);
        let phase = match action {
            VerdictAction::Failed(_) => {
                self.report.cert_failures += 1;
                let monitors = process.monitors.as_mut().expect("ordered here");
                monitors
                    .apply
                    .self_cancel(seqno)
                    .map_err(|e| format!("node {slot}: {e}"))?;
                self.end_client(slot, trx_id, None)?;
                return Ok(true);
            }
            VerdictAction::Replay(_) => ClientPhase::Replaying {
                seqno,
                entered: false,
            },
            VerdictAction::Enter(meta) => ClientPhase::Entering {
                seqno,
                depends_on: meta.depends_on,
            },
        };
        set_client_phase(process, trx_id, phase);
        Ok(true)
    }

    fn enter_apply_order(
        &mut self,
        slot: usize,
        trx_id: u64,
        seqno: Seqno,
        depends_on: Seqno,
    ) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let client = process.clients.get(&trx_id).expect("listed");
        let toi = client.kind == ClientKind::Toi;
        let conn_id = client.conn_id;
        if aborted_before(process, client, trx_id, seqno) {
            // The applier interrupted its wait: it replays.
            set_client_phase(
                process,
                trx_id,
                ClientPhase::Replaying {
                    seqno,
                    entered: false,
                },
            );
            return Ok(true);
        }
        let monitors = process.monitors.as_mut().expect("ordered here");
        if monitors.apply.try_enter(seqno, depends_on).is_err() {
            return Ok(false);
        }
        process.engine.entered_apply(seqno, toi.then_some(conn_id));
        set_client_phase(process, trx_id, ClientPhase::Committing { seqno });
        Ok(true)
    }

    /// Commits the client's seqno at its turn (unless an applier aborted it first).
    fn commit_local(&mut self, slot: usize, trx_id: u64, seqno: Seqno) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let client = process.clients.get(&trx_id).expect("listed");
        if client.kind != ClientKind::Toi && aborted_before(process, client, trx_id, seqno) {
            set_client_phase(
                process,
                trx_id,
                ClientPhase::Replaying {
                    seqno,
                    entered: true,
                },
            );
            return Ok(true);
        }
        if !self.commit_client_seqno(slot, trx_id, seqno)? {
            return Ok(false);
        }
        self.end_client(slot, trx_id, Some(seqno))?;
        Ok(true)
    }

    /// Replays a brute-force aborted transaction at its seqno, as the server's replay does.
    fn replay(
        &mut self,
        slot: usize,
        trx_id: u64,
        seqno: Seqno,
        entered: bool,
    ) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let plan = process
            .engine
            .begin_replay(trx_id)
            .ok_or_else(|| format!("node {slot}: no replay plan for transaction {trx_id}"))?;
        if process.engine.pass_pause_gate(seqno, None) == GatePassage::Held {
            return Ok(false);
        }
        // As the replicator's replay: only once every earlier seqno has committed.
        let monitors = process.monitors.as_mut().expect("ordered here");
        if plan.holds_slot && monitors.apply.last_left() < seqno.prev() {
            return Ok(false);
        }
        if !entered && !plan.holds_slot {
            if monitors.apply.try_enter(seqno, seqno.prev()).is_err() {
                return Ok(false);
            }
            process.engine.applier_entered(seqno);
            set_client_phase(
                process,
                trx_id,
                ClientPhase::Replaying {
                    seqno,
                    entered: true,
                },
            );
        }
        if !self.commit_client_seqno(slot, trx_id, seqno)? {
            return Ok(false);
        }
        base::mark!("sim.brute_force_aborted_transaction_replayed");
        self.report.replays += 1;
        self.nodes[slot].process().engine.replayed();
        self.end_client(slot, trx_id, Some(seqno))?;
        Ok(true)
    }

    /// Enters commit order with the client's seqno, writes its changes and leaves; false
    /// while it is not its turn.
    fn commit_client_seqno(
        &mut self,
        slot: usize,
        trx_id: u64,
        seqno: Seqno,
    ) -> Result<bool, String> {
        let node = &mut self.nodes[slot];
        let process = node.process.as_mut().expect("alive");
        let monitors = process.monitors.as_mut().expect("ordered here");
        if monitors.commit.try_enter(seqno, seqno.prev()).is_err() {
            return Ok(false);
        }
        let client = process.clients.get(&trx_id).expect("listed");
        let source = process.engine.own();
        let step = match client.kind {
            ClientKind::Streaming { left } if left > 0 => StreamStep::Fragment((source, trx_id)),
            ClientKind::Streaming { .. } if !client.ops.is_empty() => {
                StreamStep::Commit((source, trx_id))
            }
            _ => StreamStep::None,
        };
        node.disk
            .db
            .stage(seqno, client.fragment.clone(), step)
            .map_err(|e| format!("node {slot}: {e}"))?;
        if client.kind == ClientKind::Toi {
            process.engine.end_toi(client.conn_id);
        }
        monitors.commit.leave(seqno);
        node.disk
            .db
            .commit_upto(monitors.commit.last_left())
            .map_err(|e| format!("node {slot}: {e}"))?;
        let last_applied = monitors.apply.last_left();
        if process.engine.left_commit_order(seqno, last_applied) {
            monitors.apply.leave(seqno);
        }
        Ok(true)
    }

    /// Ends the client's current write-set: committed at `committed`, or rolled back. A
    /// streaming transaction goes on with its next fragment after a committed one.
    fn end_client(
        &mut self,
        slot: usize,
        trx_id: u64,
        committed: Option<Seqno>,
    ) -> Result<(), String> {
        let process = self.nodes[slot].process();
        let client = process.clients.get_mut(&trx_id).expect("listed");
        let engine_trx = engine_trx_of(client, trx_id);
        if let Some(seqno) = committed {
            let fragment = std::mem::take(&mut client.fragment);
            client.ops.extend(fragment);
            if let ClientKind::Streaming { left } = &mut client.kind {
                if *left > 0 {
                    *left -= 1;
                    base::mark!("sim.streaming_fragment_committed");
                    self.report.fragments += 1;
                    process.engine.release(engine_trx);
                    let (ops, keys, _) = self.draw_ops(&ClientKind::Plain, false);
                    let process = self.nodes[slot].process();
                    let own = process.engine.own();
                    let client = process.clients.get_mut(&trx_id).expect("listed");
                    if client.source != own {
                        // Readmitted under another identity: the stream it began ended
                        // with the old one.
                        process.clients.remove(&trx_id);
                        return self.release(slot, engine_trx);
                    }
                    client.fragment = ops;
                    client.keys = keys;
                    self.submit_fragment(slot, trx_id);
                    return Ok(());
                }
            }
            let ops = client.ops.clone();
            self.checker.acknowledge(seqno, ops);
        } else if matches!(client.kind, ClientKind::Streaming { .. }) && !client.ops.is_empty() {
            // Fragments were certified: every node drops them.
            let committed_here = process.committed();
            if let Some(bytes) = process.engine.prepare_rollback(trx_id, b"", committed_here) {
                base::mark!("sim.streaming_transaction_rolled_back");
                process.group.submit_urgent(bytes);
            }
        }
        let process = self.nodes[slot].process();
        process.clients.remove(&trx_id);
        self.release(slot, engine_trx)
    }

    /// The engine forgets the transaction; a seqno it never took through commit order is
    /// passed over in both monitors.
    fn release(&mut self, slot: usize, engine_trx: u64) -> Result<(), String> {
        let node = &mut self.nodes[slot];
        let process = node.process.as_mut().expect("alive");
        let ReleaseOutcome::Consume {
            seqno,
            held_apply,
            passed,
        } = process.engine.release(engine_trx)
        else {
            return Ok(());
        };
        let monitors = process.monitors.as_mut().expect("ordered here");
        if !monitors.commit.is_left(seqno) {
            monitors
                .commit
                .self_cancel(seqno)
                .map_err(|e| format!("node {slot}: {e}"))?;
        }
        if held_apply {
            monitors.apply.leave(seqno);
        } else if passed && !monitors.apply.is_left(seqno) {
            monitors
                .apply
                .self_cancel(seqno)
                .map_err(|e| format!("node {slot}: {e}"))?;
        }
        node.disk
            .db
            .commit_upto(monitors.commit.last_left())
            .map_err(|e| format!("node {slot}: {e}"))
    }

    /// Asks a causal read on `slot`: its answer may not be below any write acknowledged now.
    fn ask_causal_read(&mut self, slot: usize) {
        let process = self.nodes[slot].process();
        let Ok(id) = process.engine.begin_causal_read() else {
            return;
        };
        process.group.causal_read(id);
        self.causal_counter += 1;
        let key = self.causal_counter;
        self.nodes[slot].process().causal.insert(id, key);
        self.checker
            .causal_floors
            .insert(key, self.checker.highest_acknowledged);
    }

    /// Checks every causal read the group answered.
    fn collect_causal_answers(&mut self, slot: usize) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let asked: Vec<(u64, u64)> = process.causal.iter().map(|(i, k)| (*i, *k)).collect();
        let mut moved = false;
        for (id, key) in asked {
            let process = self.nodes[slot].process();
            let Some(seqno) = process.engine.causal_answer(id) else {
                continue;
            };
            process.causal.remove(&id);
            if self.checker.causal_answered(slot, key, seqno)? {
                self.report.causal_reads += 1;
            }
            moved = true;
        }
        Ok(moved)
    }
}

impl crate::node::Process {
    /// The group's ticket for the transaction's submission.
    fn engine_ticket(&self, engine_trx: u64) -> Option<u64> {
        self.engine.ticket_of(engine_trx)
    }
}

/// Whether an applier brute-force aborted the client on behalf of a seqno before its own.
fn aborted_before(
    process: &crate::node::Process,
    client: &Client,
    trx_id: u64,
    seqno: Seqno,
) -> bool {
    process
        .engine
        .aborted_by(engine_trx_of(client, trx_id))
        .is_some_and(|bf| bf < seqno)
}

fn set_client_phase(process: &mut crate::node::Process, trx_id: u64, phase: ClientPhase) {
    if let Some(client) = process.clients.get_mut(&trx_id) {
        client.phase = phase;
    }
}

/// The transaction id the engine knows the client under (a TOI statement replicates under
/// its connection's).
fn engine_trx_of(client: &Client, trx_id: u64) -> u64 {
    match client.kind {
        ClientKind::Toi => toi_trx_id(client.conn_id),
        _ => trx_id,
    }
}

fn toi_trx_id(conn_id: u64) -> u64 {
    u64::MAX - conn_id
}
