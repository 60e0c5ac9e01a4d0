//! The simulated server's appliers: they take the engine's tasks as real appliers do
//! (`NodeEngine::next_task`), run write-sets through the apply monitor in parallel (staging
//! their rows, brute-force aborting local transactions that hold them) and commit them in
//! order through the commit monitor; serial tasks run alone.

use base::Seqno;
use engine::{NextTask, Task};
use rand::Rng;
use writeset::{flags, WriteSet};

use crate::kv::{decode_ops, Op, StreamStep};
use crate::node::{Phase, Process, Running};
use crate::{Event, Simulation, SLAVE_THREADS};

/// How long one apply takes, microseconds: on a healthy node, and on one made slow.
const APPLY_US: std::ops::Range<u64> = 50..3_000;
const SLOW_APPLY_US: std::ops::Range<u64> = 40_000..120_000;

impl Simulation {
    /// Moves everything the server does on: tasks taken and run, clients, state transfers,
    /// pauses. True when anything changed.
    pub(crate) fn serve(&mut self, slot: usize) -> Result<bool, String> {
        let mut moved = false;
        loop {
            if !self.nodes[slot].alive() {
                return Ok(moved);
            }
            let mut step = self.take_tasks(slot)?;
            step |= self.advance_running(slot)?;
            step |= self.advance_clients(slot)?;
            step |= self.advance_incoming(slot)?;
            step |= self.advance_donations(slot)?;
            step |= self.advance_pause(slot);
            self.carry_out(slot)?;
            if !step || !self.nodes[slot].alive() {
                return Ok(moved);
            }
            moved = true;
        }
    }

    /// Hands the engine's next tasks to free appliers.
    fn take_tasks(&mut self, slot: usize) -> Result<bool, String> {
        let mut took = false;
        loop {
            let process = self.nodes[slot].process();
            if process.parallel_running() >= SLAVE_THREADS {
                return Ok(took);
            }
            let task = match process.engine.next_task() {
                NextTask::Run(task) => task,
                NextTask::Wait | NextTask::Closed => return Ok(took),
                NextTask::Inconsistent => {
                    return Err(format!("node {slot}: left the cluster as inconsistent"))
                }
            };
            took = true;
            self.check_task(slot, &task)?;
            let process = self.nodes[slot].process();
            let running = match task {
                Task::Connected(_) | Task::Synced => {
                    process.engine.task_done(true);
                    continue;
                }
                Task::View { ordered: false, .. } => {
                    process.engine.task_done(true);
                    continue;
                }
                Task::View { view, .. } => Running::View {
                    view,
                    phase: Phase::WaitApply,
                },
                Task::Skip { seqno } => Running::Skip {
                    seqno,
                    phase: Phase::WaitApply,
                },
                Task::Apply {
                    seqno,
                    depends_on,
                    write_set,
                    failed,
                } => Running::Apply {
                    seqno,
                    depends_on,
                    write_set,
                    failed,
                    phase: Phase::WaitApply,
                },
                Task::RequestState => {
                    // A server connected again at runtime asks for no snapshot: its own
                    // data is the snapshot, and IST brings the rest.
                    let request = if process.reconnected {
                        Vec::new()
                    } else {
                        b"sim".to_vec()
                    };
                    let sent = process.engine.send_state_request(Some(request));
                    if !sent {
                        return Err(format!("node {slot}: could not ask for state"));
                    }
                    Running::RequestState
                }
                Task::Donate {
                    request,
                    wait_for,
                    bypass,
                } => Running::Donate {
                    request,
                    wait_for,
                    bypass,
                },
            };
            process.next_applier += 1;
            let id = process.next_applier;
            process.running.insert(id, running);
        }
    }

    /// Every applier's task that can move, moves.
    fn advance_running(&mut self, slot: usize) -> Result<bool, String> {
        let ids: Vec<u64> = self.nodes[slot].process().running.keys().copied().collect();
        let mut moved = false;
        for id in ids {
            moved |= self.advance_one(slot, id)?;
            if !self.nodes[slot].alive() {
                return Ok(moved);
            }
        }
        Ok(moved)
    }

    fn advance_one(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let Some(running) = process.running.get(&id) else {
            return Ok(false);
        };
        match running {
            Running::Apply { phase, .. }
            | Running::Skip { phase, .. }
            | Running::View { phase, .. } => match *phase {
                Phase::WaitApply => self.enter_apply(slot, id),
                Phase::Applying => Ok(false),
                Phase::WaitLocks => self.take_locks(slot, id),
                Phase::WaitCommit => self.commit_in_order(slot, id),
            },
            Running::RequestState => self.advance_state_request(slot, id),
            Running::Donate { .. } => self.advance_donation(slot, id),
        }
    }

    /// Enters the apply monitor when its dependencies have left.
    fn enter_apply(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let slow = self.nodes[slot].slow_until_us > self.now_us;
        let process = self.nodes[slot].process();
        let monitors = process.monitors.as_mut().ok_or_else(|| {
            format!("node {slot}: an applier runs before the engine made the monitors")
        })?;
        let (seqno, depends_on, is_apply) = match &process.running[&id] {
            Running::Apply {
                seqno, depends_on, ..
            } => (*seqno, *depends_on, true),
            Running::Skip { seqno, .. } => (*seqno, seqno.prev(), false),
            Running::View { view, .. } => (view.state_id.seqno, view.state_id.seqno.prev(), false),
            _ => unreachable!("only ordered tasks enter"),
        };
        let last_applied = monitors.apply.last_left();
        if monitors.apply.try_enter(seqno, depends_on).is_err() {
            return Ok(false);
        }
        if !is_apply {
            set_phase(process, id, Phase::WaitCommit);
            return Ok(true);
        }
        process
            .engine
            .applier_entering(seqno, depends_on, last_applied);
        process.engine.applier_entered(seqno);
        set_phase(process, id, Phase::Applying);
        let incarnation = process.incarnation;
        let took = self
            .rng
            .gen_range(if slow { SLOW_APPLY_US } else { APPLY_US });
        self.schedule(
            took,
            Event::ApplyDone {
                slot,
                incarnation,
                applier: id,
            },
        );
        Ok(true)
    }

    /// An applier finished applying: it now needs the rows it writes.
    pub(crate) fn on_apply_done(
        &mut self,
        slot: usize,
        incarnation: u64,
        applier: u64,
    ) -> Result<(), String> {
        let Some(process) = self.nodes[slot].process_of(incarnation) else {
            return Ok(());
        };
        let Some(Running::Apply { phase, .. }) = process.running.get_mut(&applier) else {
            return Ok(());
        };
        assert_eq!(*phase, Phase::Applying, "apply finished twice");
        *phase = Phase::WaitLocks;
        self.pump(slot)
    }

    /// Takes the rows the write-set writes from local transactions that hold them:
    /// brute-force aborts the later ones, waits for the earlier ones. Then stages the
    /// write-set's changes.
    fn take_locks(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let process = self.nodes[slot].process();
        let Running::Apply {
            seqno,
            write_set,
            failed,
            ..
        } = &process.running[&id]
        else {
            unreachable!("only write-sets take locks");
        };
        let (seqno, failed) = (*seqno, *failed);
        // A rollback of a streaming transaction carries no changes of its own.
        let ops = if failed || write_set.is_rollback() {
            Vec::new()
        } else {
            decode_ops(&write_set.data)
        };
        if !self.brute_force_abort_holders(slot, seqno, &ops) {
            return Ok(false);
        }
        let node = &mut self.nodes[slot];
        let process = node.process.as_mut().expect("alive");
        let Running::Apply { write_set, .. } = &process.running[&id] else {
            unreachable!("checked");
        };
        let (changes, step) = if failed {
            (Vec::new(), StreamStep::None)
        } else {
            stream_step(write_set, ops)
        };
        node.disk
            .db
            .stage(seqno, changes, step)
            .map_err(|e| format!("node {slot}: {e}"))?;
        set_phase(process, id, Phase::WaitCommit);
        Ok(true)
    }

    /// Commits the task's seqno at its turn and ends the task.
    fn commit_in_order(&mut self, slot: usize, id: u64) -> Result<bool, String> {
        let node = &mut self.nodes[slot];
        let process = node.process.as_mut().expect("alive");
        let monitors = process.monitors.as_mut().expect("entered before");
        let seqno = match &process.running[&id] {
            Running::Apply { seqno, .. } | Running::Skip { seqno, .. } => *seqno,
            Running::View { view, .. } => view.state_id.seqno,
            _ => unreachable!("only ordered tasks commit"),
        };
        if monitors.commit.try_enter(seqno, seqno.prev()).is_err() {
            return Ok(false);
        }
        if let Running::View { view, .. } = &process.running[&id] {
            if view.primary {
                // The streams of members that left end here (their servers roll them back),
                // as certification closes them.
                let members = view.members.iter().map(|m| m.uuid).collect();
                node.disk
                    .db
                    .stage(seqno, Vec::new(), StreamStep::KeepOnly(members))
                    .map_err(|e| format!("node {slot}: {e}"))?;
            }
        }
        monitors.commit.leave(seqno);
        node.disk
            .db
            .commit_upto(monitors.commit.last_left())
            .map_err(|e| format!("node {slot}: {e}"))?;
        let last_applied = monitors.apply.last_left();
        process.engine.left_commit_order(seqno, last_applied);
        let held = matches!(process.running[&id], Running::Apply { .. });
        if !held || process.engine.leave_apply(seqno) {
            monitors.apply.leave(seqno);
        }
        let running = process.running.remove(&id).expect("listed");
        let serial = matches!(running, Running::View { .. });
        process.engine.task_done(serial);
        Ok(true)
    }

    /// Brute-force aborts the local transactions holding rows `ops` write, on behalf of
    /// `seqno`. False while an earlier-ordered holder must commit first.
    fn brute_force_abort_holders(&mut self, slot: usize, seqno: Seqno, ops: &[Op]) -> bool {
        let process = self.nodes[slot].process();
        let holders: Vec<u64> = process
            .clients
            .iter()
            .filter(|(_, client)| ops.iter().any(|op| client.holds(op)))
            .map(|(id, _)| *id)
            .collect();
        let mut free = true;
        for victim in holders {
            let (outcome, _interrupt) = process.engine.abort_certification(seqno, victim);
            match outcome {
                engine::AbortOutcome::Aborted => {
                    base::mark!("sim.applier_brute_force_aborted_a_local_transaction");
                    if let Some(client) = process.clients.get_mut(&victim) {
                        client.locks.clear();
                    }
                }
                engine::AbortOutcome::NotAllowed(_) => free = false,
            }
        }
        free
    }

    /// Checks what a task says about its seqno's verdict against what other nodes said.
    fn check_task(&mut self, slot: usize, task: &Task) -> Result<(), String> {
        if let Task::Apply {
            seqno,
            depends_on,
            failed,
            write_set,
        } = task
        {
            let verdict = (!failed).then_some(*depends_on);
            if std::env::var_os("SIM_TRACE").is_some() {
                let keys: Vec<String> = write_set.keys.iter().map(|k| format!("{k:?}")).collect();
                eprintln!(
                    "{} node {slot} task verdict {seqno:?} {verdict:?} flags {:#x} last_seen {:?} \
                     keys {keys:?}",
                    self.now_us, write_set.flags, write_set.last_seen,
                );
            }
            self.checker.certified(slot, *seqno, verdict)?;
        }
        Ok(())
    }
}

fn set_phase(process: &mut Process, id: u64, to: Phase) {
    match process.running.get_mut(&id) {
        Some(
            Running::Apply { phase, .. }
            | Running::Skip { phase, .. }
            | Running::View { phase, .. },
        ) => {
            *phase = to;
        }
        _ => unreachable!("only ordered tasks have phases"),
    }
}

/// What a write-set does to the streaming transactions: a fragment is kept until its
/// transaction's commit fragment, which commits them all; a rollback drops them.
pub(crate) fn stream_step(write_set: &WriteSet, ops: Vec<Op>) -> (Vec<Op>, StreamStep) {
    let key = (write_set.source, write_set.trx_id);
    if write_set.is_rollback() {
        return (Vec::new(), StreamStep::Drop(key));
    }
    let starts = write_set.flags & flags::TRX_START != 0;
    let ends = write_set.flags & flags::TRX_END != 0;
    match (starts, ends) {
        (true, true) => (ops, StreamStep::None),
        (_, true) => (ops, StreamStep::Commit(key)),
        (_, false) => (ops, StreamStep::Fragment(key)),
    }
}
