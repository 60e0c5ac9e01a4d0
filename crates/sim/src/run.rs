//! One run from start to verdict: the founder and the joiners start, events run in time
//! order, and once the load is over after the heal the cluster must converge, serve a probe
//! transaction on every node and end with equal databases that lose no acknowledged write.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use base::NodeState;
use rand::Rng;

use crate::kv::Op;
use crate::{Event, SimReport, Simulation, EVENTS_MAX};

impl Simulation {
    pub(crate) fn run(&mut self) -> Result<SimReport, String> {
        self.start_founder();
        for slot in 1..self.nodes.len() {
            self.start_node(slot);
        }
        for slot in 0..self.nodes.len() {
            let start = self.rng.gen_range(1_000..50_000);
            self.schedule(start, Event::Client { slot });
        }
        if self.options.faults {
            self.schedule_faults();
        }
        self.schedule(self.options.fault_phase_us, Event::EndFaultPhase);
        let deadline = self.options.fault_phase_us + self.options.liveness_deadline_us;
        let mut probes: Option<BTreeMap<usize, u64>> = None;
        while let Some(Reverse((at, sequence))) = self.events.pop() {
            let event = self
                .payloads
                .remove(&sequence)
                .expect("every event has a payload");
            self.now_us = at;
            self.report.events += 1;
            self.handle(event)?;
            if self.now_us > deadline {
                return Err(self.describe_stall());
            }
            if self.report.events > EVENTS_MAX {
                return Err(format!(
                    "event storm: {EVENTS_MAX} events by {} us",
                    self.now_us
                ));
            }
            // Liveness is judged once the load ran out after the heal, or at the deadline.
            let load_left = self.transactions_started < self.options.transactions
                && self.now_us
                    < self.options.fault_phase_us + self.options.liveness_deadline_us / 2;
            if self.fault_phase || load_left {
                continue;
            }
            if probes.is_none() && self.converged() {
                probes = Some(self.send_probes()?);
            }
            let probed = probes.as_ref().is_some_and(|probes| {
                probes.iter().all(|(slot, id)| {
                    self.nodes[*slot]
                        .process
                        .as_ref()
                        .is_some_and(|p| !p.clients.contains_key(id))
                })
            });
            if probed && self.converged() {
                return self.final_checks();
            }
        }
        Err("the event queue ran dry".into())
    }

    /// Liveness: every node must still be able to commit a transaction.
    fn send_probes(&mut self) -> Result<BTreeMap<usize, u64>, String> {
        let mut probes = BTreeMap::new();
        for slot in 0..self.nodes.len() {
            let id = self
                .start_transaction(slot, true)
                .ok_or_else(|| format!("node {slot} refused the probe once converged"))?;
            probes.insert(slot, id);
            self.pump(slot)?;
        }
        Ok(probes)
    }

    fn describe_stall(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let Some(p) = n.process.as_ref() else {
                    return format!("node {} down", n.slot);
                };
                let status = p.group.status();
                let running: Vec<String> = p.running.values().map(describe_running).collect();
                let clients: Vec<String> =
                    p.clients.values().map(|c| format!("{:?}", c.phase)).collect();
                let queued: Vec<String> = p
                    .engine
                    .tasks()
                    .iter()
                    .take(4)
                    .map(|t| match t.ordered_seqno() {
                        Some(seqno) => format!("{seqno:?}"),
                        None => format!("{t:?}").chars().take(20).collect(),
                    })
                    .collect();
                format!(
                    "node {} (raft {}) {} committed {:?} tasks {} {queued:?} running {running:?} clients \
                     {clients:?} joining {} paused at {:?} primary {} members {} leader {} term {}",
                    n.slot,
                    status.raft_id % 1000,
                    p.engine.state(),
                    n.disk.db.committed,
                    p.engine.tasks().len(),
                    p.engine.joining().is_some(),
                    p.engine.pause_point(),
                    status.primary,
                    status.members,
                    status.leader,
                    status.term
                )
            })
            .collect();
        format!(
            "liveness: the cluster did not converge after the heal: {}",
            nodes.join("; ")
        )
    }

    /// Every node alive, SYNCED, idle, at one committed seqno, in a primary component of
    /// all of them.
    fn converged(&self) -> bool {
        let committed = self.nodes[0].disk.db.committed;
        self.nodes.iter().all(|n| {
            n.disk.db.committed == committed
                && n.process.as_ref().is_some_and(|p| {
                    let status = p.group.status();
                    p.engine.state() == NodeState::Synced
                        && p.backlog() == 0
                        && p.pause.is_none()
                        && p.donations.is_empty()
                        && status.primary
                        && status.members == self.nodes.len()
                })
        })
    }

    fn final_checks(&mut self) -> Result<SimReport, String> {
        let reference = self.nodes[0].disk.db.clone();
        for node in &self.nodes[1..] {
            if node.disk.db != reference {
                return Err(format!(
                    "synced nodes 0 and {} differ at committed {:?}: {}",
                    node.slot,
                    node.disk.db.committed,
                    reference.difference(&node.disk.db)
                ));
            }
        }
        for (seqno, ops) in &self.checker.acknowledged {
            for op in ops {
                if let Op::Put { table, row, .. } = op {
                    if !reference.reflects(*seqno, table, row) {
                        return Err(format!(
                            "acknowledged write {table}/{row} at {seqno:?} is lost"
                        ));
                    }
                }
            }
            if *seqno > reference.committed {
                return Err(format!(
                    "acknowledged {seqno:?} is beyond the committed position"
                ));
            }
        }
        self.report.committed = reference.committed.0;
        self.report.acknowledged = self.checker.acknowledged.len() as u64;
        Ok(self.report.clone())
    }
}

/// A running task, for stall reports.
fn describe_running(running: &crate::node::Running) -> String {
    use crate::node::Running;
    match running {
        Running::Apply { seqno, phase, .. } => format!("apply {seqno:?} {phase:?}"),
        Running::Skip { seqno, phase } => format!("skip {seqno:?} {phase:?}"),
        Running::View { view, phase } => format!("view {:?} {phase:?}", view.state_id.seqno),
        Running::RequestState => "request state".to_owned(),
        Running::Donate {
            wait_for, bypass, ..
        } => format!("donate after {wait_for:?} bypass {bypass:?}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::{run_seed, SimOptions};

    #[test]
    fn a_clean_run_converges_and_commits() {
        let options = SimOptions {
            faults: false,
            transactions: 100,
            ..SimOptions::default()
        };
        let report = run_seed(1, &options).unwrap();
        assert!(report.acknowledged > 50, "{report:?}");
        assert!(report.causal_reads > 10, "{report:?}");
        assert!(report.joins_by_sst >= 2, "joiners got state: {report:?}");
        assert_eq!(report.crashes, 0, "no faults: {report:?}");
    }

    #[test]
    fn one_seed_replays_exactly() {
        let options = SimOptions::default();
        assert_eq!(run_seed(7, &options), run_seed(7, &options));
    }
}
