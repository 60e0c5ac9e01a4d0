//! The faults a run injects in its fault phase: isolated and split nodes, clogged links,
//! crashes (two nodes at once in a cluster of five), slow appliers, forged messages, a
//! FLUSH TABLES WITH READ LOCK held for a while, and a gcache frozen for a while.

use base::FreezePurge;
use rand::seq::SliceRandom;
use rand::Rng;

use crate::node::{PauseHold, SimNode};
use crate::{forge, Event, Simulation};

/// Nodes a cluster needs for two of them to crash at once and the rest keep the quorum.
const DOUBLE_CRASH_NODES_MIN: usize = 5;

/// The chance that a crash takes every node at once (a power loss).
const FULL_CRASH_CHANCE: f64 = 0.1;
/// Bursts of forged messages a run's fault phase may hold.
const FORGERY_BURSTS_MAX: u64 = 8;
/// Forged messages in one burst, at most.
const FORGERY_BURST_LEN_MAX: u64 = 4;
/// Faults one run's fault phase may hold.
const FAULTS_MAX: u64 = 10;

/// One fault.
#[derive(Clone, Debug)]
pub enum Fault {
    /// A node loses its links for a while.
    Isolate {
        /// The node.
        slot: usize,
        /// For how long, microseconds.
        for_us: u64,
    },
    /// The cluster splits in two for a while.
    Split {
        /// One side.
        side: Vec<usize>,
        /// For how long, microseconds.
        for_us: u64,
    },
    /// A node's links slow down for a while.
    Clog {
        /// The node.
        slot: usize,
        /// Added delay, microseconds.
        extra_us: u64,
        /// For how long, microseconds.
        for_us: u64,
    },
    /// One node crashes, two at once (five nodes only: two of three would take the quorum
    /// with them for good, as with Galera), or all of them (a power loss, restored from the
    /// saved views).
    Crash {
        /// The nodes.
        slots: Vec<usize>,
        /// How long they stay down, microseconds.
        down_us: u64,
    },
    /// A node's applies take milliseconds each for a while (a slow disk): its queue grows
    /// and flow control paces the cluster to it.
    Slow {
        /// The node.
        slot: usize,
        /// For how long, microseconds.
        for_us: u64,
    },
    /// A node's server holds FLUSH TABLES WITH READ LOCK for a while: the node desyncs and
    /// pauses, and resumes.
    Pause {
        /// The node.
        slot: usize,
        /// For how long once reached, microseconds.
        for_us: u64,
    },
    /// A node's gcache stops purging for a while (`gcache.freeze_purge_at_seqno=now`).
    Freeze {
        /// The node.
        slot: usize,
        /// For how long, microseconds.
        for_us: u64,
    },
    /// A donor crashes while its stream is on the way (only while every other node runs).
    CrashDonor {
        /// The donor.
        slot: usize,
        /// How long it stays down, microseconds.
        down_us: u64,
    },
    /// The node's server changes its cluster address at runtime: it disconnects and
    /// connects again as a new member, with its own data.
    Reconnect {
        /// The node.
        slot: usize,
    },
    /// The second half of a reconnect.
    Connect {
        /// The node.
        slot: usize,
        /// The process that disconnected.
        incarnation: u64,
    },
    /// The freeze of a node's running process ends.
    Unfreeze {
        /// The node.
        slot: usize,
        /// The process that froze.
        incarnation: u64,
    },
}

impl Simulation {
    /// Draws the fault phase's faults and forgeries.
    pub(crate) fn schedule_faults(&mut self) {
        let slots = self.nodes.len();
        for _ in 0..self.rng.gen_range(0..FAULTS_MAX) {
            let at = self.rng.gen_range(200_000..self.options.fault_phase_us);
            let slot = self.rng.gen_range(0..slots);
            let fault = self.draw_fault(slot, slots);
            self.schedule_at(at, Event::Fault(fault));
        }
        for _ in 0..self.rng.gen_range(0..=FORGERY_BURSTS_MAX) {
            let at = self.rng.gen_range(200_000..self.options.fault_phase_us);
            self.schedule_at(at, Event::Forge);
        }
    }

    fn draw_fault(&mut self, slot: usize, slots: usize) -> Fault {
        let for_us = self.rng.gen_range(100_000..2_000_000);
        match self.rng.gen_range(0..8) {
            0 => Fault::Isolate {
                slot,
                for_us: self.rng.gen_range(100_000..3_000_000),
            },
            1 => {
                let mut all: Vec<usize> = (0..slots).collect();
                all.shuffle(&mut self.rng);
                let cut = self.rng.gen_range(1..slots);
                Fault::Split {
                    side: all[..cut].to_vec(),
                    for_us: self.rng.gen_range(100_000..3_000_000),
                }
            }
            2 => Fault::Clog {
                slot,
                extra_us: self.rng.gen_range(5_000..100_000),
                for_us,
            },
            3 => {
                let mut crashed = vec![slot];
                if self.rng.gen_bool(FULL_CRASH_CHANCE) {
                    // A power loss: every node at once. The saved views restore the primary
                    // component (`group::recovery`).
                    crashed = (0..slots).collect();
                } else if slots >= DOUBLE_CRASH_NODES_MIN && self.rng.gen_bool(0.3) {
                    crashed.push((slot + self.rng.gen_range(1..slots)) % slots);
                }
                Fault::Crash {
                    slots: crashed,
                    down_us: for_us,
                }
            }
            4 => Fault::Slow { slot, for_us },
            5 => Fault::Pause {
                slot,
                for_us: self.rng.gen_range(20_000..500_000),
            },
            6 => Fault::Reconnect { slot },
            _ => Fault::Freeze { slot, for_us },
        }
    }

    pub(crate) fn inject(&mut self, fault: Fault) -> Result<(), String> {
        match fault {
            Fault::Isolate { slot, for_us } => {
                let others: Vec<usize> = (0..self.nodes.len()).filter(|s| *s != slot).collect();
                self.network.partition(&[slot], &others);
                self.schedule(for_us, Event::HealLinks);
            }
            Fault::Split { side, for_us } => {
                let other: Vec<usize> = (0..self.nodes.len())
                    .filter(|s| !side.contains(s))
                    .collect();
                self.network.partition(&side, &other);
                self.schedule(for_us, Event::HealLinks);
            }
            Fault::Clog {
                slot,
                extra_us,
                for_us,
            } => {
                self.network.clog(slot, extra_us);
                self.schedule(for_us, Event::HealLinks);
            }
            Fault::Crash { slots, down_us } => {
                // Crash only a healthy cluster: losing another member while the first are
                // still being replaced would lose the quorum for good, as with Galera; so
                // would losing the members the weights count (a power loss is restored).
                let whole = slots.len() == self.nodes.len();
                if self.healthy() && (whole || self.quorum_survives(&slots)) {
                    if whole {
                        base::mark!("sim.whole_cluster_crashed");
                    } else if slots.len() > 1 {
                        base::mark!("sim.two_nodes_crashed_at_once");
                    }
                    for slot in slots {
                        self.crash(slot);
                        // After a power loss each comes back on its own time: the first
                        // wait for the last.
                        let jitter = if whole {
                            self.rng.gen_range(0..down_us)
                        } else {
                            0
                        };
                        self.schedule(down_us + jitter, Event::Restart { slot });
                    }
                }
            }
            Fault::Slow { slot, for_us } => {
                base::mark!("sim.node_made_slow");
                let node = &mut self.nodes[slot];
                node.slow_until_us = node.slow_until_us.max(self.now_us + for_us);
            }
            Fault::Pause { slot, for_us } => self.begin_pause(slot, for_us),
            Fault::Freeze { slot, for_us } => self.freeze_gcache(slot, for_us),
            Fault::CrashDonor { slot, down_us } => {
                // Only while every other node runs and another holds the data: the donor's
                // state must survive it, as with Galera.
                let others_up = self.nodes.iter().all(|n| n.slot == slot || n.alive());
                let another_synced = self.nodes.iter().any(|n| {
                    n.slot != slot
                        && n.process.as_ref().is_some_and(|p| {
                            p.engine.state() == base::NodeState::Synced && p.group.is_primary()
                        })
                });
                let survives = self.quorum_survives(&[slot]);
                if others_up && another_synced && survives && self.nodes[slot].alive() {
                    base::mark!("sim.donor_crashed_mid_stream");
                    self.crash(slot);
                    self.schedule(down_us, Event::Restart { slot });
                }
            }
            Fault::Reconnect { slot } => {
                // As a DBA would: on a healthy cluster, so that a donor holds its gap. The
                // simulated leave stops the group at once (its removal comes by eviction), so
                // only where the others keep the quorum without it.
                if self.healthy() && self.quorum_survives(&[slot]) {
                    self.disconnect_at_runtime(slot);
                }
            }
            Fault::Connect { slot, incarnation } => self.connect_at_runtime(slot, incarnation),
            Fault::Unfreeze { slot, incarnation } => {
                if let Some(process) = self.nodes[slot].process_of(incarnation) {
                    let _ = process.cache.set_freeze_purge(FreezePurge::Off);
                    process.freeze = FreezePurge::Off;
                }
            }
        }
        Ok(())
    }

    /// FLUSH TABLES WITH READ LOCK on `slot`'s server: desync, pause, hold, resume, resync.
    fn begin_pause(&mut self, slot: usize, for_us: u64) {
        let until_us = self.now_us + for_us;
        let Some(process) = self.nodes[slot].process.as_mut() else {
            return;
        };
        let synced = process.engine.state() == base::NodeState::Synced;
        if !synced || process.pause.is_some() || process.engine.pause_point().is_some() {
            return;
        }
        process.engine.desync();
        let point = process.engine.pause(process.committed());
        process.pause = Some(PauseHold {
            point,
            reached: false,
            until_us,
        });
    }

    /// Moves a held pause on: reached once everything up to its point is committed,
    /// released once its time is up.
    pub(crate) fn advance_pause(&mut self, slot: usize) -> bool {
        let now_us = self.now_us;
        let process = self.nodes[slot].process();
        let committed = process.committed();
        let Some(hold) = process.pause.as_mut() else {
            return false;
        };
        if !hold.reached {
            if !process.engine.pause_reached(hold.point, committed) {
                return false;
            }
            base::mark!("sim.pause_reached_its_point");
            hold.reached = true;
            // Held from the moment it is reached.
            hold.until_us = hold.until_us.max(now_us);
            return true;
        }
        if now_us < hold.until_us {
            return false;
        }
        process.pause = None;
        process.engine.resume();
        process.engine.resync();
        true
    }

    /// `gcache.freeze_purge_at_seqno=now` on `slot`, lifted after `for_us`.
    fn freeze_gcache(&mut self, slot: usize, for_us: u64) {
        let Some(process) = self.nodes[slot].process.as_mut() else {
            return;
        };
        if process.cache.set_freeze_purge(FreezePurge::Now).is_ok() {
            base::mark!("sim.gcache_frozen");
            process.freeze = FreezePurge::Now;
            let incarnation = process.incarnation;
            self.schedule(for_us, Event::Fault(Fault::Unfreeze { slot, incarnation }));
        }
    }

    /// Sends a burst of forged messages to live nodes, built from what an eavesdropper
    /// knows of them.
    pub(crate) fn forge(&mut self) {
        let targets: Vec<forge::Target> = self
            .nodes
            .iter()
            .filter_map(|n| {
                let group = &n.process.as_ref()?.group;
                Some(forge::Target {
                    slot: n.slot,
                    raft_id: group.me().raft_id,
                    uuid: group.me().uuid,
                    term: group.status().term,
                    address: SimNode::address(n.slot),
                })
            })
            .collect();
        for _ in 0..self.rng.gen_range(1..=FORGERY_BURST_LEN_MAX) {
            let Some(forged) = forge::forge(&mut self.rng, &targets) else {
                return;
            };
            let delay = self.rng.gen_range(20..3_000);
            let event = Event::Deliver {
                from: None,
                to: forged.to,
                bytes: forged.bytes,
                must_refuse: forged.must_refuse.then_some(forged.what),
            };
            self.schedule(delay, event);
        }
    }

    /// The end of the fault phase: links heal, faults stop, crashed nodes restart.
    pub(crate) fn end_fault_phase(&mut self) -> Result<(), String> {
        self.fault_phase = false;
        self.network.heal();
        self.network.faults = crate::network::NetworkFaults::none();
        for slot in 0..self.nodes.len() {
            if !self.nodes[slot].alive() {
                self.start_node(slot);
            }
        }
        Ok(())
    }

    /// Every node alive, SYNCED and in a primary component of all of them.
    /// Whether the members left when `crashed` die still make a primary component, by the
    /// run's weights (`group::weights`) and by the Raft voters in force now (while the
    /// leader moves the configuration to what the weights choose, the voters on the way are
    /// fewer). A crash that loses the quorum leaves the others waiting for the DBA, as in
    /// Galera, which is not what these runs are about.
    fn quorum_survives(&self, crashed: &[usize]) -> bool {
        use std::collections::{BTreeMap, BTreeSet};
        let weights: BTreeMap<u64, u8> = self
            .weights
            .iter()
            .enumerate()
            .map(|(slot, weight)| (slot as u64, *weight))
            .collect();
        let left: BTreeSet<u64> = (0..self.nodes.len())
            .filter(|slot| !crashed.contains(slot))
            .map(|slot| slot as u64)
            .collect();
        if !group::weights::majority_of(&group::weights::voters(&weights), &left) {
            return false;
        }
        // The voters in force, as slots, from each running member's configuration.
        let slot_of: BTreeMap<u64, u64> = self
            .nodes
            .iter()
            .filter_map(|n| {
                n.process
                    .as_ref()
                    .map(|p| (p.group.me().raft_id, n.slot as u64))
            })
            .collect();
        self.nodes
            .iter()
            .filter_map(|n| n.process.as_ref())
            .all(|p| {
                let voters: BTreeSet<u64> = p
                    .group
                    .voters()
                    .iter()
                    .map(|id| slot_of.get(id).copied().unwrap_or(u64::MAX))
                    .collect();
                group::weights::majority_of(&voters, &left)
            })
    }

    pub(crate) fn healthy(&self) -> bool {
        self.nodes.iter().all(|n| {
            n.process.as_ref().is_some_and(|p| {
                let status = p.group.status();
                p.engine.state() == base::NodeState::Synced
                    && status.primary
                    && status.members == self.nodes.len()
            })
        })
    }
}

/// What a group message is, for traces.
pub fn describe_message(bytes: &[u8]) -> String {
    match group::wire::decode(bytes) {
        Ok((_, group::wire::WireMessage::Raft(m))) => format!(
            "{:?} term {} idx {} rej {}",
            m.get_msg_type(),
            m.term,
            m.index,
            m.reject
        ),
        Ok((_, other)) => format!("{other:?}").chars().take(60).collect(),
        Err(e) => e.to_string(),
    }
}
