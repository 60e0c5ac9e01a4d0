//! A node's process at work: its group member polled, every delivery checked and handed to
//! the engine, the engine ticked, and what the engine decided carried out (the group's
//! calls, cache writes, transfers, the monitors), until nothing moves.

use base::Seqno;
use engine::Effect;
use group::Delivery;
use order::{Monitor, Policy, DEFAULT_WINDOW};

use crate::node::{Monitors, SimNode};
use crate::{Simulation, DAMAGED};

/// Rounds of one node in a row that may still produce output; more means a livelock.
const PUMP_ROUNDS_MAX: usize = 1_000;

impl Simulation {
    /// Runs `slot`'s process until it is quiet.
    pub(crate) fn pump(&mut self, slot: usize) -> Result<(), String> {
        for round in 0..=PUMP_ROUNDS_MAX {
            if !self.nodes[slot].alive() {
                return Ok(());
            }
            let now = self.now();
            let process = self.nodes[slot].process();
            // A disconnected member's group is stopped: nothing goes in or out.
            let (outgoing, deliveries) = if process.group_stopped {
                (Vec::new(), Vec::new())
            } else {
                process.group.poll(now)
            };
            let quiet = outgoing.is_empty() && deliveries.is_empty();
            if round == PUMP_ROUNDS_MAX {
                return Err(format!(
                    "node {slot} keeps producing output with no input: {} messages, {deliveries:?}",
                    outgoing.len()
                ));
            }
            for message in outgoing {
                if let Some(to) = SimNode::slot_of(&message.address, self.nodes.len()) {
                    self.send(slot, to, &message.bytes);
                }
            }
            for delivery in deliveries {
                if std::env::var_os("SIM_TRACE").is_some() {
                    if let Delivery::View(view) = &delivery {
                        eprintln!(
                            "{} node {slot} view at {:?} ordered {} primary {} own {:?} members {}",
                            self.now_us,
                            view.seqno,
                            view.ordered,
                            view.primary,
                            view.own_index,
                            view.members.len()
                        );
                    }
                    if let Delivery::StateRequest {
                        joiner,
                        donor,
                        request,
                        ..
                    } = &delivery
                    {
                        eprintln!(
                            "{} node {slot} ordered request {} of {joiner:?} (ist from {}): {donor:?}",
                            self.now_us, request.request_id, request.ist_from
                        );
                    }
                }
                self.check_delivery(slot, &delivery)?;
                let Some(process) = self.nodes[slot].process.as_mut() else {
                    return Ok(());
                };
                process
                    .engine
                    .on_delivery(now, delivery, &mut process.cache);
                self.carry_out(slot)?;
            }
            let moved = self.serve(slot)?;
            if !self.nodes[slot].alive() {
                return Ok(());
            }
            self.tick_engine(slot)?;
            self.finish_stopping(slot);
            if !self.nodes[slot].alive() {
                return Ok(());
            }
            self.report_progress(slot);
            if quiet && !moved {
                return Ok(());
            }
        }
        unreachable!("the loop returns")
    }

    /// The engine's regular step.
    fn tick_engine(&mut self, slot: usize) -> Result<(), String> {
        let now = self.now();
        let process = self.nodes[slot].process();
        let committed = process.committed();
        let primary = process.group.is_primary();
        let membership = process.group.saved_membership();
        process.engine.tick(now, committed, primary, membership);
        self.carry_out(slot)
    }

    /// Tells the group what this node has committed and how much waits.
    fn report_progress(&mut self, slot: usize) {
        let process = self.nodes[slot].process();
        let committed = process.committed();
        let floor = process.engine.purge_floor(committed);
        let backlog = (process.engine.tasks().len() + process.running.len()) as u64;
        process.group.report_committed(floor);
        process.group.report_apply_queue(backlog);
    }

    /// Every node must see the same action at the same seqno.
    fn check_delivery(&mut self, slot: usize, delivery: &Delivery) -> Result<(), String> {
        match delivery {
            Delivery::WriteSet { seqno, payload, .. } => {
                self.checker
                    .delivered(slot, *seqno, format!("ws:{:08x}", crc32c::crc32c(payload)))
            }
            Delivery::View(view) if view.ordered => {
                if view.founding {
                    self.checker.history_restored(slot, view.seqno.prev())?;
                }
                let names: Vec<String> = view
                    .members
                    .iter()
                    .map(|m| format!("{:?}", m.uuid))
                    .collect();
                self.checker
                    .delivered(slot, view.seqno, format!("view:{}", names.join(",")))
            }
            Delivery::TransferFailed { donor } if !self.donor_failures_allowed() => Err(format!(
                "node {slot}: a failed transfer from {donor}, but no donor failed"
            )),
            Delivery::VoteRequested { seqno, .. } | Delivery::VoteDecided { seqno, .. } => {
                // The toy database applies every certified write-set, so no member ever
                // votes: a vote here is a bug.
                Err(format!(
                    "node {slot}: a consistency vote on {seqno:?}, but no node failed to apply"
                ))
            }
            _ => Ok(()),
        }
    }

    /// Carries out what `slot`'s engine decided, in order.
    pub(crate) fn carry_out(&mut self, slot: usize) -> Result<(), String> {
        loop {
            let Some(process) = self.nodes[slot].process.as_mut() else {
                return Ok(());
            };
            let effects = process.engine.take_effects();
            if effects.is_empty() {
                return Ok(());
            }
            for effect in effects {
                self.carry_out_one(slot, effect)?;
                if !self.nodes[slot].alive() {
                    return Ok(());
                }
            }
        }
    }

    fn carry_out_one(&mut self, slot: usize, effect: Effect) -> Result<(), String> {
        let node = &mut self.nodes[slot];
        let process = node.process.as_mut().expect("alive");
        match effect {
            Effect::Log(level, message) => {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("{} node {slot} {level:?}: {message}", self.now_us);
                }
            }
            Effect::AnnounceState(state) => process.group.set_local_state(state),
            Effect::Cache(write) => {
                process
                    .cache
                    .record(
                        write.history,
                        write.seqno,
                        write.kind,
                        write.depends_on,
                        &write.payload,
                    )
                    .map_err(|e| format!("node {slot}: the gcache refused a write: {e}"))?;
                let from = process.cache.reach_from();
                if from != process.cached_reported {
                    process.cached_reported = from;
                    process.group.report_cached(from);
                }
            }
            Effect::RequestState(request) => {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!(
                        "{} node {slot} asks for state from {}",
                        self.now_us, request.ist_from
                    );
                }
                process.group.request_state(request)
            }
            Effect::SendTransfer(transfer) => self.send_transfer(slot, transfer)?,
            Effect::Vote { seqno, .. } => {
                return Err(format!(
                    "node {slot}: voted on {seqno:?}, but nothing failed"
                ))
            }
            Effect::TransferFailed { joiner } => process.group.transfer_failed(joiner),
            Effect::Leave => process.group.leave(),
            Effect::Fatal(message) => {
                // The server stops; whoever runs it starts it again.
                base::mark!("sim.node_stopped_by_a_fatal_error");
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("{} node {slot} fatal: {message}", self.now_us);
                }
                process.group.leave();
                let by = self.now_us + crate::lifecycle::FATAL_LEAVE_WAIT_US;
                process.stopping_by.get_or_insert(by);
            }
            Effect::ResetMonitors(position) => {
                // A new cluster starts from an empty database; a restore after a full crash
                // continues exactly where this database stands.
                let db = &node.disk.db;
                let fresh = db.rows.is_empty() && db.committed <= position;
                let continued = db.history == process.engine.cluster() && db.committed == position;
                assert!(
                    fresh || continued,
                    "node {slot}: a bootstrap over existing data"
                );
                node.disk.db.committed = position;
                node.disk.db.history = process.engine.cluster();
                process.monitors = Some(monitors_at(position));
            }
            Effect::MonitorsAt(position) => {
                let behind = process
                    .monitors
                    .as_ref()
                    .is_none_or(|m| m.apply.last_left() < position);
                if behind {
                    process.monitors = Some(monitors_at(position));
                }
            }
        }
        Ok(())
    }

    /// Whether a donor may fail a transfer in this run (none does).
    fn donor_failures_allowed(&self) -> bool {
        false
    }

    /// Puts a message on the network from `from` to `to`: lost, delayed, duplicated, and
    /// now and then followed by a damaged copy.
    pub(crate) fn send(&mut self, from: usize, to: usize, bytes: &[u8]) {
        for delay in self.network.route(&mut self.rng, from, to) {
            let copy = crate::Event::Deliver {
                from: Some(from),
                to,
                bytes: bytes.to_vec(),
                must_refuse: None,
            };
            self.schedule(delay, copy);
            if rand::Rng::gen_bool(&mut self.rng, self.network.faults.corrupt_probability) {
                let damaged = crate::Event::Deliver {
                    from: Some(from),
                    to,
                    bytes: crate::forge::corrupt(&mut self.rng, bytes),
                    must_refuse: Some(DAMAGED),
                };
                self.schedule(delay, damaged);
            }
        }
    }
}

/// Monitors where everything up to `position` is done.
fn monitors_at(position: Seqno) -> Monitors {
    Monitors {
        apply: Monitor::new("apply", Policy::Apply, position, DEFAULT_WINDOW),
        commit: Monitor::new("commit", Policy::Commit, position, DEFAULT_WINDOW),
    }
}
