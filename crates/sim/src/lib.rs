//! Deterministic simulation of a Trireme cluster.
//!
//! N nodes run in one process on one thread: each is a real [`group::GroupNode`] (Raft
//! ordering), a real [`cert::Certifier`], real [`order::Monitor`]s and a toy key-value
//! database ([`kv::KvDb`]) that applies write-sets with real conflicts. The network, clock,
//! crashes and restarts are simulated and every random choice comes from one seed, so a
//! failing seed replays exactly.
//!
//! A run has three phases: a fault phase (drops, delays, reordering, duplicates, partitions,
//! clogged and slow nodes, crashes and restarts (two nodes at once in a cluster of five),
//! damaged and forged messages, under client load), a
//! heal (all links restored, crashed nodes restarted) and a liveness phase (the cluster must converge and serve a probe
//! transaction from every node). Checkers run on every step; see [`Checker`].

pub mod checker;
pub mod forge;
pub mod kv;
pub mod network;
pub mod node;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::panic::AssertUnwindSafe;

use base::{seeded_rng, KeyType, Nanos, NodeState, SeededRng, Seqno, Uuid};
use group::{Contact, Delivery, GroupConfig, GroupNode};
use rand::seq::SliceRandom;
use rand::Rng;
use writeset::{flags, Key, WriteSet};

use checker::Checker;
use kv::{decode_ops, encode_ops, Op};
use network::{Network, NetworkFaults};
use node::{Donation, Ordered, PendingTransfer, PipelineEntry, SimNode, Stage, TransferPayload};

/// Simulated time between two group ticks, microseconds.
const TICK_US: u64 = 10_000;
/// A joiner that got no state this long after asking tries another donor.
const TRANSFER_TIMEOUT_US: u64 = 1_000_000;
/// Applier threads per node (`wsrep_slave_threads`).
const SLAVE_THREADS: usize = 4;
/// Client transactions one node keeps in flight at most.
const CLIENT_INFLIGHT_MAX: usize = 4;
/// Events one run may process; more means messages breed messages.
const EVENTS_MAX: u64 = 3_000_000;
/// Polls of one node in a row that may still produce output; more means a livelock.
const POLL_ROUNDS_MAX: usize = 1_000;
/// Nodes a cluster needs for two of them to crash at once and the rest keep the quorum.
const DOUBLE_CRASH_NODES_MIN: usize = 5;
/// How long one apply takes, microseconds: on a healthy node, and on one made slow.
const APPLY_US: std::ops::Range<u64> = 50..3_000;
const SLOW_APPLY_US: std::ops::Range<u64> = 40_000..120_000;
/// Bursts of forged messages a run's fault phase may hold.
const FORGERY_BURSTS_MAX: u64 = 8;
/// Forged messages in one burst, at most.
const FORGERY_BURST_LEN_MAX: u64 = 4;
/// What a damaged copy of a message is called when it must be refused.
const DAMAGED: &str = "damaged frame";

/// What one run does.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Inject faults (network, partitions, crashes); off for a clean run.
    pub faults: bool,
    /// Length of the fault phase, simulated microseconds.
    pub fault_phase_us: u64,
    /// Time the cluster gets to converge after the heal, simulated microseconds.
    pub liveness_deadline_us: u64,
    /// Client transactions over the whole run.
    pub transactions: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            faults: true,
            fault_phase_us: 4_000_000,
            liveness_deadline_us: 40_000_000,
            transactions: 400,
        }
    }
}

/// What a successful run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    /// Nodes in the run.
    pub nodes: usize,
    /// Highest seqno committed.
    pub committed: i64,
    /// Client transactions acknowledged.
    pub acknowledged: u64,
    /// Causal reads answered (each checked against the writes acknowledged before it).
    pub causal_reads: u64,
    /// Client transactions that failed certification.
    pub cert_failures: u64,
    /// Crashes injected.
    pub crashes: u64,
    /// State transfers completed.
    pub transfers: u64,
    /// Events processed.
    pub events: u64,
    /// Damaged messages delivered (each one refused, or the run fails).
    pub refused_damaged: u64,
    /// Forged messages delivered that the receiver had to refuse (and did).
    pub refused_forgeries: u64,
    /// Coverage marks hit in the run, by name (see `base::marks`).
    pub marks: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Debug)]
enum Fault {
    Isolate {
        slot: usize,
        for_us: u64,
    },
    Split {
        side: Vec<usize>,
        for_us: u64,
    },
    Clog {
        slot: usize,
        extra_us: u64,
        for_us: u64,
    },
    /// One node crashes, or two at once (five nodes only: two of three would take the
    /// quorum with them for good, as with Galera).
    Crash {
        slots: Vec<usize>,
        down_us: u64,
    },
    /// A node's applies take milliseconds each for a while (a slow disk): its queue grows
    /// and flow control paces the cluster to it.
    Slow {
        slot: usize,
        for_us: u64,
    },
}

#[derive(Clone, Debug)]
enum Event {
    Tick {
        slot: usize,
        incarnation: u64,
    },
    Deliver {
        /// The sending slot; `None` for a forged message.
        from: Option<usize>,
        to: usize,
        bytes: Vec<u8>,
        /// Set for a damaged or forged message the receiver must refuse: what it is.
        must_refuse: Option<&'static str>,
    },
    ApplyDone {
        slot: usize,
        incarnation: u64,
        seqno: Seqno,
    },
    Client {
        slot: usize,
    },
    TransferRequest {
        donor: usize,
        joiner: usize,
        joiner_incarnation: u64,
        join_seqno: Seqno,
    },
    Transfer {
        joiner: usize,
        joiner_incarnation: u64,
        join_seqno: Seqno,
        payload: Box<TransferPayload>,
    },
    Fault(Fault),
    HealLinks,
    /// A burst of forged messages.
    Forge,
    Restart {
        slot: usize,
    },
    EndFaultPhase,
}

struct Simulation {
    options: SimOptions,
    rng: SeededRng,
    now_us: u64,
    sequence: u64,
    events: BinaryHeap<Reverse<(u64, u64)>>,
    payloads: BTreeMap<u64, Event>,
    nodes: Vec<SimNode>,
    network: Network,
    config: GroupConfig,
    checker: Checker,
    report: SimReport,
    transactions_started: u64,
    fault_phase: bool,
    trx_counter: u64,
}

/// Runs one seed; `Err` carries the first broken invariant.
pub fn run_seed(seed: u64, options: &SimOptions) -> Result<SimReport, String> {
    // A run is one thread's work: the marks counted on it from here on are this run's.
    base::marks::count_on_this_thread();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut simulation = Simulation::new(seed, options.clone());
        simulation.run()
    }));
    let marks = base::marks::take();
    match outcome {
        Ok(result) => result.map(|report| SimReport { marks, ..report }),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panic".to_owned());
            Err(format!("invariant broken (panic): {message}"))
        }
    }
}

impl Simulation {
    fn new(seed: u64, options: SimOptions) -> Simulation {
        let mut rng = seeded_rng(seed);
        let node_count = if rng.gen_bool(0.3) { 5 } else { 3 };
        let faults = if options.faults {
            NetworkFaults::random(&mut rng)
        } else {
            NetworkFaults::none()
        };
        let mut config = GroupConfig {
            tick_interval_ns: TICK_US * 1_000,
            resend_ticks: 20,
            join_retry_ticks: 10,
            snapshot_interval_entries: rng.gen_range(20..200),
            log_retain_entries: rng.gen_range(10..400),
            ..GroupConfig::default()
        };
        config
            .apply_option("evs.suspect_timeout", "PT1S")
            .expect("valid");
        config
            .apply_option("evs.inactive_timeout", "PT1S")
            .expect("valid");
        config
            .apply_option("gcs.fc_limit", &rng.gen_range(4..64).to_string())
            .expect("valid");
        Simulation {
            options,
            rng,
            now_us: 0,
            sequence: 0,
            events: BinaryHeap::new(),
            payloads: BTreeMap::new(),
            nodes: (0..node_count).map(SimNode::new).collect(),
            network: Network::new(node_count, faults),
            config,
            checker: Checker::default(),
            report: SimReport {
                nodes: node_count,
                ..SimReport::default()
            },
            transactions_started: 0,
            fault_phase: true,
            trx_counter: 0,
        }
    }

    fn schedule(&mut self, after_us: u64, event: Event) {
        self.sequence += 1;
        self.events
            .push(Reverse((self.now_us + after_us, self.sequence)));
        self.payloads.insert(self.sequence, event);
    }

    fn run(&mut self) -> Result<SimReport, String> {
        self.start_founder();
        for slot in 1..self.nodes.len() {
            self.start_joiner(slot);
        }
        for slot in 0..self.nodes.len() {
            let start = self.rng.gen_range(1_000..50_000);
            self.schedule(start, Event::Client { slot });
        }
        if self.options.faults {
            self.schedule_faults();
            self.schedule_forgeries();
        }
        self.schedule(self.options.fault_phase_us, Event::EndFaultPhase);
        let deadline = self.options.fault_phase_us + self.options.liveness_deadline_us;
        let mut probes_sent = false;
        let mut probes: BTreeMap<usize, u64> = BTreeMap::new();
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
            if !probes_sent && self.converged() {
                // Liveness: every node must still be able to commit a transaction.
                for slot in 0..self.nodes.len() {
                    let submit_id = self.start_transaction(slot, true);
                    probes.insert(slot, submit_id.expect("a converged node accepts a probe"));
                }
                probes_sent = true;
            }
            if probes_sent
                && probes
                    .iter()
                    .all(|(slot, id)| !self.nodes[*slot].clients.contains_key(id))
                && self.converged()
            {
                return self.final_checks();
            }
        }
        Err("the event queue ran dry".into())
    }

    fn describe_stall(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let status = n.group.as_ref().map(|g| g.status());
                let members: Vec<String> = n
                    .group
                    .as_ref()
                    .map(|g| {
                        g.group_state()
                            .members
                            .values()
                            .map(|m| format!("{}:{}", m.info.name, m.info.raft_id % 1000))
                            .collect()
                    })
                    .unwrap_or_default();
                format!(
                    "node {} (raft {:?}) {} committed {:?} backlog {} primary {:?} members {:?} \
                     state {:?}",
                    n.slot,
                    status.as_ref().map(|s| s.raft_id % 1000),
                    n.state,
                    n.db.committed,
                    n.backlog(),
                    status.as_ref().map(|s| s.primary),
                    status.as_ref().map(|s| s.members),
                    members
                )
            })
            .collect();
        format!(
            "liveness: the cluster did not converge after the heal: {}",
            nodes.join("; ")
        )
    }

    fn converged(&self) -> bool {
        let committed = self.nodes[0].db.committed;
        self.nodes.iter().all(|n| {
            n.alive
                && n.state == NodeState::Synced
                && n.backlog() == 0
                && n.db.committed == committed
                && n.group.as_ref().is_some_and(|g| {
                    let status = g.status();
                    status.primary && status.members == self.nodes.len()
                })
        })
    }

    fn final_checks(&mut self) -> Result<SimReport, String> {
        let reference = self.nodes[0].db.clone();
        for node in &self.nodes[1..] {
            if node.db != reference {
                return Err(format!(
                    "synced nodes 0 and {} differ at committed {:?}",
                    node.slot, node.db.committed
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

    fn start_founder(&mut self) {
        let rng = seeded_rng(self.rng.gen());
        let group = GroupNode::bootstrap(
            self.config.clone(),
            &Contact::new("node0", &SimNode::address(0)),
            rng,
            Nanos(self.now_us * 1_000),
        );
        let genesis = group.group_state().last_seqno;
        let member = group.me().raft_id;
        let node = &mut self.nodes[0];
        node.alive = true;
        node.incarnation += 1;
        node.group = Some(group);
        node.start_founder(genesis, member);
        node.transition(NodeState::Open);
        self.schedule(
            TICK_US,
            Event::Tick {
                slot: 0,
                incarnation: self.nodes[0].incarnation,
            },
        );
        self.process(0).expect("the founder starts cleanly");
    }

    fn start_joiner(&mut self, slot: usize) {
        let rng = seeded_rng(self.rng.gen());
        let seeds = (0..self.nodes.len())
            .filter(|s| *s != slot)
            .map(SimNode::address)
            .collect();
        let group = GroupNode::join(
            self.config.clone(),
            &Contact::new(&format!("node{slot}"), &SimNode::address(slot)),
            seeds,
            rng,
            Nanos(self.now_us * 1_000),
        );
        let node = &mut self.nodes[slot];
        node.alive = true;
        node.incarnation += 1;
        node.group = Some(group);
        node.transition(NodeState::Open);
        let incarnation = node.incarnation;
        let jitter = self.rng.gen_range(0..TICK_US);
        self.schedule(jitter, Event::Tick { slot, incarnation });
    }

    fn schedule_faults(&mut self) {
        let count = self.rng.gen_range(0..8);
        let slots = self.nodes.len();
        for _ in 0..count {
            let at = self.rng.gen_range(200_000..self.options.fault_phase_us);
            let slot = self.rng.gen_range(0..slots);
            let fault = match self.rng.gen_range(0..5) {
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
                    for_us: self.rng.gen_range(100_000..2_000_000),
                },
                3 => {
                    let mut crashed = vec![slot];
                    if slots >= DOUBLE_CRASH_NODES_MIN && self.rng.gen_bool(0.3) {
                        crashed.push((slot + self.rng.gen_range(1..slots)) % slots);
                    }
                    Fault::Crash {
                        slots: crashed,
                        down_us: self.rng.gen_range(100_000..2_000_000),
                    }
                }
                _ => Fault::Slow {
                    slot,
                    for_us: self.rng.gen_range(200_000..2_000_000),
                },
            };
            self.sequence += 1;
            self.events.push(Reverse((at, self.sequence)));
            self.payloads.insert(self.sequence, Event::Fault(fault));
        }
    }

    fn schedule_forgeries(&mut self) {
        for _ in 0..self.rng.gen_range(0..=FORGERY_BURSTS_MAX) {
            let at = self.rng.gen_range(200_000..self.options.fault_phase_us);
            self.schedule(at, Event::Forge);
        }
    }

    /// Sends a burst of forged messages to live nodes, built from what an eavesdropper
    /// knows of them.
    fn forge(&mut self) {
        let targets: Vec<forge::Target> = self
            .nodes
            .iter()
            .filter(|n| n.alive)
            .filter_map(|n| {
                let group = n.group.as_ref()?;
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

    fn handle(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Tick { slot, incarnation } => {
                let node = &mut self.nodes[slot];
                if !node.alive || node.incarnation != incarnation {
                    return Ok(());
                }
                node.group().tick(Nanos(self.now_us * 1_000));
                self.schedule(TICK_US, Event::Tick { slot, incarnation });
                self.retry_transfer(slot);
                self.process(slot)
            }
            Event::Deliver {
                from,
                to,
                bytes,
                must_refuse,
            } => {
                let node = &mut self.nodes[to];
                if !node.alive {
                    return Ok(());
                }
                // Refusals (a departed sender, a duplicate) are expected under faults; the
                // group logs them and carries on, as it must.
                let result = node.group().receive(Nanos(self.now_us * 1_000), &bytes);
                if let Some(what) = must_refuse {
                    if result.is_ok() {
                        return Err(format!("node {to} took a message it must refuse: {what}"));
                    }
                    if what == DAMAGED {
                        self.report.refused_damaged += 1;
                    } else {
                        self.report.refused_forgeries += 1;
                    }
                }
                // SIM_TRACE=1 prints every delivered message and what the receiver made of
                // it: the first thing to read when a seed fails.
                if std::env::var_os("SIM_TRACE").is_some() {
                    let what = match group::wire::decode(&bytes) {
                        Ok((_, group::wire::WireMessage::Raft(m))) => {
                            format!(
                                "{:?} term {} idx {} rej {}",
                                m.get_msg_type(),
                                m.term,
                                m.index,
                                m.reject
                            )
                        }
                        Ok((_, other)) => format!("{other:?}").chars().take(60).collect(),
                        Err(e) => e.to_string(),
                    };
                    let from = from.map_or("forger".to_owned(), |slot| slot.to_string());
                    eprintln!("{} {from}->{to} {what} => {result:?}", self.now_us);
                }
                self.process(to)
            }
            Event::ApplyDone {
                slot,
                incarnation,
                seqno,
            } => {
                let node = &mut self.nodes[slot];
                if !node.alive || node.incarnation != incarnation {
                    return Ok(());
                }
                let Some(entry) = node.pipeline.get_mut(&seqno) else {
                    return Ok(());
                };
                assert_eq!(
                    entry.stage,
                    Stage::Applying,
                    "apply finished twice for {seqno:?}"
                );
                let ops = entry.ops.clone().expect("only passed write-sets apply");
                entry.stage = Stage::Applied;
                node.db
                    .apply(seqno, &ops)
                    .map_err(|e| format!("node {slot}: {e}"))?;
                node.apply_monitor.leave(seqno);
                node.appliers_busy -= 1;
                self.process(slot)
            }
            Event::Client { slot } => {
                if self.transactions_started < self.options.transactions {
                    self.start_transaction(slot, false);
                    let next = self.rng.gen_range(5_000..60_000);
                    self.schedule(next, Event::Client { slot });
                }
                if self.nodes[slot].alive {
                    self.process(slot)?;
                }
                Ok(())
            }
            Event::TransferRequest {
                donor,
                joiner,
                joiner_incarnation,
                join_seqno,
            } => {
                self.begin_donation(
                    donor,
                    Donation {
                        joiner,
                        joiner_incarnation,
                        join_seqno,
                    },
                );
                if self.nodes[donor].alive {
                    self.process(donor)?;
                }
                Ok(())
            }
            Event::Transfer {
                joiner,
                joiner_incarnation,
                join_seqno,
                payload,
            } => {
                let node = &mut self.nodes[joiner];
                let expected = node.pending_transfer.map(|p| p.join_seqno);
                if !node.alive
                    || node.incarnation != joiner_incarnation
                    || node.state != NodeState::Joiner
                    || expected != Some(join_seqno)
                {
                    return Ok(());
                }
                assert!(
                    payload.db.committed >= join_seqno,
                    "a transfer older than the join point"
                );
                let member = node.group().me().raft_id;
                node.install_transfer(*payload, member);
                node.transition(NodeState::Joined);
                self.report.transfers += 1;
                self.process(joiner)
            }
            Event::Fault(fault) => self.inject(fault),
            Event::HealLinks => {
                self.network.heal();
                Ok(())
            }
            Event::Forge => {
                if self.fault_phase {
                    self.forge();
                }
                Ok(())
            }
            Event::Restart { slot } => {
                if !self.nodes[slot].alive {
                    self.start_joiner(slot);
                }
                Ok(())
            }
            Event::EndFaultPhase => {
                self.fault_phase = false;
                self.network.heal();
                self.network.faults = NetworkFaults::none();
                for slot in 0..self.nodes.len() {
                    if !self.nodes[slot].alive {
                        self.start_joiner(slot);
                    }
                }
                Ok(())
            }
        }
    }

    fn healthy(&self) -> bool {
        self.nodes.iter().all(|n| {
            n.alive
                && n.state == NodeState::Synced
                && n.group
                    .as_ref()
                    .is_some_and(|g| g.status().primary && g.status().members == self.nodes.len())
        })
    }

    fn inject(&mut self, fault: Fault) -> Result<(), String> {
        if !self.fault_phase {
            return Ok(());
        }
        match fault {
            Fault::Isolate { slot, for_us } => {
                let others: Vec<usize> = (0..self.nodes.len()).filter(|s| *s != slot).collect();
                self.network.partition(&[slot], &others);
                self.schedule(for_us, Event::HealLinks);
            }
            Fault::Split { side, for_us } => {
                let others: Vec<usize> = (0..self.nodes.len())
                    .filter(|s| !side.contains(s))
                    .collect();
                self.network.partition(&side, &others);
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
                // still being replaced would lose the quorum for good, as with Galera.
                if self.healthy() {
                    if slots.len() > 1 {
                        base::mark!("sim.two_nodes_crashed_at_once");
                    }
                    for slot in slots {
                        self.nodes[slot].crash();
                        self.report.crashes += 1;
                        self.schedule(down_us, Event::Restart { slot });
                    }
                }
            }
            Fault::Slow { slot, for_us } => {
                base::mark!("sim.node_made_slow");
                let node = &mut self.nodes[slot];
                node.slow_until_us = node.slow_until_us.max(self.now_us + for_us);
            }
        }
        Ok(())
    }

    /// Runs the node after an input: group output, deliveries, certification, apply, commit.
    fn process(&mut self, slot: usize) -> Result<(), String> {
        for round in 0.. {
            let now = Nanos(self.now_us * 1_000);
            let node = &mut self.nodes[slot];
            if !node.alive {
                return Ok(());
            }
            let (outgoing, deliveries) = node.group().poll(now);
            let quiet = outgoing.is_empty() && deliveries.is_empty();
            if round == POLL_ROUNDS_MAX {
                let kinds: Vec<String> = outgoing
                    .iter()
                    .map(|o| match group::wire::decode(&o.bytes) {
                        Ok((_, group::wire::WireMessage::Raft(m))) => {
                            format!("{:?}", m.get_msg_type())
                        }
                        Ok((_, other)) => format!("{other:?}").chars().take(40).collect(),
                        Err(e) => e.to_string(),
                    })
                    .collect();
                return Err(format!(
                    "node {slot} keeps producing output with no input: {kinds:?} {deliveries:?}"
                ));
            }
            for message in outgoing {
                let Some(to) =
                    (0..self.nodes.len()).find(|s| SimNode::address(*s) == message.address)
                else {
                    continue;
                };
                self.send(slot, to, &message.bytes);
            }
            for delivery in deliveries {
                self.on_delivery(slot, delivery)?;
            }
            self.advance_pipeline(slot)?;
            self.maybe_donate(slot);
            let node = &mut self.nodes[slot];
            if !node.alive {
                return Ok(());
            }
            let backlog = node.backlog() as u64;
            let committed = node.db.committed;
            let has_state = node.has_state();
            let group = node.group();
            group.report_apply_queue(backlog);
            if has_state {
                group.report_committed(committed);
            }
            if quiet {
                return Ok(());
            }
        }
        unreachable!("the loop returns")
    }

    /// Puts a message on the network from `from` to `to`: lost, delayed, duplicated, and
    /// now and then followed by a damaged copy.
    fn send(&mut self, from: usize, to: usize, bytes: &[u8]) {
        for delay in self.network.route(&mut self.rng, from, to) {
            let copy = Event::Deliver {
                from: Some(from),
                to,
                bytes: bytes.to_vec(),
                must_refuse: None,
            };
            self.schedule(delay, copy);
            if self.rng.gen_bool(self.network.faults.corrupt_probability) {
                let damaged = Event::Deliver {
                    from: Some(from),
                    to,
                    bytes: forge::corrupt(&mut self.rng, bytes),
                    must_refuse: Some(DAMAGED),
                };
                self.schedule(delay, damaged);
            }
        }
    }

    fn on_delivery(&mut self, slot: usize, delivery: Delivery) -> Result<(), String> {
        match delivery {
            Delivery::WriteSet {
                seqno,
                payload,
                local,
                submit_id,
                safe_seqno,
                ..
            } => {
                let write_set = WriteSet::decode(&payload)
                    .map_err(|e| format!("node {slot}: ordered write-set does not decode: {e}"))?;
                self.checker
                    .delivered(slot, seqno, format!("ws:{:08x}", crc(&payload)))?;
                let local_submit = local.then_some(submit_id);
                self.nodes[slot].queue.push_back(Ordered::WriteSet {
                    seqno,
                    write_set,
                    safe_seqno,
                    local_submit,
                });
            }
            Delivery::TransferFailed { donor } => {
                // The simulator's transfers do not fail on the donor.
                return Err(format!("node {slot}: a failed transfer from {donor}"));
            }
            Delivery::VoteRequested { seqno, .. } | Delivery::VoteDecided { seqno, .. } => {
                // The toy database applies every certified write-set, so no member ever
                // votes: a vote here is a bug in the group layer.
                return Err(format!(
                    "node {slot}: a consistency vote on {seqno:?}, but no node failed to apply"
                ));
            }
            Delivery::Causal { id, seqno } => {
                if self.checker.causal_answered(slot, id, seqno)? {
                    self.report.causal_reads += 1;
                }
            }
            Delivery::View(view) => {
                if view.ordered {
                    let names: Vec<String> = view
                        .members
                        .iter()
                        .map(|m| format!("{:?}", m.uuid))
                        .collect();
                    self.checker.delivered(
                        slot,
                        view.seqno,
                        format!("view:{}", names.join(",")),
                    )?;
                    self.nodes[slot]
                        .queue
                        .push_back(Ordered::View { seqno: view.seqno });
                }
                self.on_view(slot, view);
            }
            Delivery::StateGap { resume_after, .. } => {
                let node = &mut self.nodes[slot];
                node.drop_volatile_state();
                if node.state != NodeState::Open {
                    node.transition(NodeState::Joiner);
                    node.pending_transfer = Some(PendingTransfer {
                        join_seqno: resume_after,
                        requested_at_us: None,
                    });
                }
            }
            Delivery::Abandoned { submit_ids } => {
                for id in submit_ids {
                    self.nodes[slot].clients.remove(&id);
                }
            }
            // The simulator moves state with its own transfer events (a full copy of the
            // toy database and the certification index), not through ordered requests.
            Delivery::Closed | Delivery::StateRequest { .. } => {}
        }
        Ok(())
    }

    fn on_view(&mut self, slot: usize, view: group::View) {
        let node = &mut self.nodes[slot];
        node.view = Some(view.clone());
        if !view.primary || view.own_index.is_none() {
            if node.state != NodeState::Open {
                node.transition(NodeState::Open);
            }
            return;
        }
        if node.state != NodeState::Open {
            return;
        }
        node.transition(NodeState::Primary);
        if node.has_state() {
            node.transition(NodeState::Joined);
        } else {
            // A new membership: what came before the view arrives by state transfer.
            node.drop_volatile_state();
            node.transition(NodeState::Joiner);
            node.pending_transfer = Some(PendingTransfer {
                join_seqno: view.seqno,
                requested_at_us: None,
            });
        }
    }

    fn retry_transfer(&mut self, slot: usize) {
        let node = &self.nodes[slot];
        let Some(pending) = node.pending_transfer else {
            return;
        };
        if node.state != NodeState::Joiner {
            return;
        }
        let due = pending
            .requested_at_us
            .is_none_or(|t| self.now_us >= t + TRANSFER_TIMEOUT_US);
        if !due {
            return;
        }
        let Some(group) = node.group.as_ref() else {
            return;
        };
        // The replicated member states are current; the view's copy is as of the view.
        let own = group.me().uuid;
        let donors: Vec<Uuid> = group
            .group_state()
            .members
            .values()
            .filter(|m| m.state == NodeState::Synced && m.info.uuid != own)
            .map(|m| m.info.uuid)
            .collect();
        let candidates: Vec<usize> = donors
            .iter()
            .filter_map(|uuid| {
                self.nodes
                    .iter()
                    .position(|n| n.alive && n.group.as_ref().is_some_and(|g| g.me().uuid == *uuid))
            })
            .collect();
        let Some(donor) = candidates.choose(&mut self.rng).copied() else {
            return;
        };
        let joiner_incarnation = node.incarnation;
        self.nodes[slot].pending_transfer = Some(PendingTransfer {
            requested_at_us: Some(self.now_us),
            ..pending
        });
        for delay in self
            .network
            .route(&mut self.rng, slot, donor)
            .into_iter()
            .take(1)
        {
            self.schedule(
                delay,
                Event::TransferRequest {
                    donor,
                    joiner: slot,
                    joiner_incarnation,
                    join_seqno: pending.join_seqno,
                },
            );
        }
    }

    fn begin_donation(&mut self, donor: usize, donation: Donation) {
        let node = &mut self.nodes[donor];
        if !node.alive || node.state != NodeState::Synced || node.donation.is_some() {
            return;
        }
        node.transition(NodeState::Donor);
        node.donation = Some(donation);
    }

    fn maybe_donate(&mut self, slot: usize) {
        let node = &mut self.nodes[slot];
        let Some(donation) = node.donation else {
            return;
        };
        if !node.alive || node.db.committed < donation.join_seqno {
            return;
        }
        let Some(cert) = node.cert.clone() else {
            return;
        };
        let verdicts = node
            .pipeline
            .iter()
            .filter_map(|(seqno, entry)| entry.verdict.map(|v| (*seqno, v)))
            .collect();
        let payload = TransferPayload {
            db: node.db.clone(),
            cert,
            verdicts,
        };
        node.donation = None;
        // A donor that lost the primary component meanwhile is OPEN now: it still sends
        // what it has, and rejoins through PRIMARY -> JOINED like any member.
        if node.state == NodeState::Donor {
            node.transition(NodeState::Joined);
        }
        let size_delay = 1_000 + payload.db.rows.len() as u64 * 10;
        let delays = self.network.route(&mut self.rng, slot, donation.joiner);
        if let Some(delay) = delays.first() {
            self.schedule(
                delay + size_delay,
                Event::Transfer {
                    joiner: donation.joiner,
                    joiner_incarnation: donation.joiner_incarnation,
                    join_seqno: donation.join_seqno,
                    payload: Box::new(payload),
                },
            );
        }
    }

    /// Certifies queued actions, starts applies, commits in order.
    fn advance_pipeline(&mut self, slot: usize) -> Result<(), String> {
        if !self.nodes[slot].has_state() {
            return Ok(());
        }
        self.certify_queue(slot)?;
        self.start_applies(slot);
        self.commit_ready(slot)?;
        let node = &mut self.nodes[slot];
        if node.state == NodeState::Joined && node.backlog() <= 2 && node.donation.is_none() {
            node.transition(NodeState::Synced);
        }
        Ok(())
    }

    fn certify_queue(&mut self, slot: usize) -> Result<(), String> {
        while let Some(ordered) = self.nodes[slot].queue.pop_front() {
            let node = &mut self.nodes[slot];
            let seqno = ordered.seqno();
            if seqno <= node.db.committed {
                continue;
            }
            let cert = node.cert.as_mut().expect("a node with state has an index");
            let position = cert.position();
            let transferred = seqno <= position;
            if seqno > position.next() {
                return Err(format!(
                    "node {slot}: {seqno:?} reached certification after {position:?}: a gap"
                ));
            }
            let (verdict, ops, local_submit) = match ordered {
                Ordered::WriteSet {
                    write_set,
                    safe_seqno,
                    local_submit,
                    ..
                } => {
                    let verdict = if transferred {
                        node.transferred_verdicts.remove(&seqno).ok_or_else(|| {
                            format!("node {slot}: no transferred verdict for {seqno:?}")
                        })?
                    } else {
                        cert.purge_to(safe_seqno.min(position));
                        cert.certify(seqno, &write_set)
                    };
                    let ops = verdict.is_pass().then(|| decode_ops(&write_set.data));
                    (Some(verdict), ops, local_submit)
                }
                Ordered::View { .. } => {
                    if !transferred {
                        cert.skip(seqno);
                    }
                    (None, None, None)
                }
            };
            if let Some(verdict) = verdict {
                self.checker.certified(slot, seqno, verdict)?;
                if !verdict.is_pass() && local_submit.is_some() {
                    self.report.cert_failures += 1;
                }
            }
            let node = &mut self.nodes[slot];
            let stage = if ops.is_some() {
                Stage::Waiting
            } else {
                Stage::Applied
            };
            if ops.is_none() {
                node.apply_monitor
                    .self_cancel(seqno)
                    .map_err(|e| format!("node {slot}: apply monitor refused a cancel: {e}"))?;
            }
            node.pipeline.insert(
                seqno,
                PipelineEntry {
                    ops,
                    verdict,
                    local_submit,
                    stage,
                },
            );
        }
        Ok(())
    }

    fn start_applies(&mut self, slot: usize) {
        let node = &mut self.nodes[slot];
        let waiting: Vec<(Seqno, Seqno)> = node
            .pipeline
            .iter()
            .filter(|(_, e)| e.stage == Stage::Waiting)
            .map(|(s, e)| (*s, e.verdict.and_then(|v| v.depends_on()).expect("passed")))
            .collect();
        let mut started = Vec::new();
        for (seqno, depends_on) in waiting {
            if node.appliers_busy >= SLAVE_THREADS {
                break;
            }
            if node.apply_monitor.try_enter(seqno, depends_on).is_ok() {
                node.appliers_busy += 1;
                node.pipeline.get_mut(&seqno).expect("listed").stage = Stage::Applying;
                started.push(seqno);
            }
        }
        let incarnation = node.incarnation;
        let slow = node.slow_until_us > self.now_us;
        for seqno in started {
            let duration = self
                .rng
                .gen_range(if slow { SLOW_APPLY_US } else { APPLY_US });
            self.schedule(
                duration,
                Event::ApplyDone {
                    slot,
                    incarnation,
                    seqno,
                },
            );
        }
    }

    fn commit_ready(&mut self, slot: usize) -> Result<(), String> {
        loop {
            let node = &mut self.nodes[slot];
            let next = node.db.committed.next();
            let Some(entry) = node.pipeline.get(&next) else {
                return Ok(());
            };
            if entry.stage != Stage::Applied {
                return Ok(());
            }
            let entry = node.pipeline.remove(&next).expect("present");
            node.commit_monitor
                .try_enter(next, next.prev())
                .map_err(|e| format!("node {slot}: commit monitor refused {next:?}: {e}"))?;
            node.commit_monitor.leave(next);
            node.db
                .commit(next)
                .map_err(|e| format!("node {slot}: {e}"))?;
            if let Some(submit_id) = entry.local_submit {
                if let Some(ops) = node.clients.remove(&submit_id) {
                    if entry.verdict.is_some_and(|v| v.is_pass()) {
                        self.checker.acknowledge(next, ops);
                    }
                }
            }
        }
    }

    /// Starts a client transaction on `slot`; returns its submission number.
    fn start_transaction(&mut self, slot: usize, probe: bool) -> Option<u64> {
        let node = &self.nodes[slot];
        let ready = node.alive
            && node.state == NodeState::Synced
            && node.group.as_ref().is_some_and(|g| g.is_primary());
        if !ready || (!probe && node.clients.len() >= CLIENT_INFLIGHT_MAX) {
            return None;
        }
        if !probe {
            self.transactions_started += 1;
        }
        self.trx_counter += 1;
        let trx = self.trx_counter;
        let mut ops = Vec::new();
        let mut keys = Vec::new();
        let mut write_flags = flags::TRX_START | flags::TRX_END;
        let roll = self.rng.gen_range(0..100);
        if roll < 3 && !probe {
            let table = format!("t{}", self.rng.gen_range(0..2));
            keys.push(Key::new(
                &["db".as_bytes(), table.as_bytes()],
                KeyType::Exclusive,
            ));
            ops.push(Op::Truncate { table });
            write_flags |= flags::ISOLATION;
        } else {
            if roll < 8 {
                write_flags |= flags::PA_UNSAFE;
            }
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
                    value: trx,
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
        }
        let node = &mut self.nodes[slot];
        let write_set = WriteSet {
            source: node.group().me().uuid,
            conn_id: slot as u64,
            trx_id: trx,
            last_seen: node.db.committed,
            flags: write_flags,
            keys,
            data: encode_ops(&ops).into(),
        };
        let submit_id = node.group().submit(write_set.to_bytes());
        node.clients.insert(submit_id, ops);
        if !probe && self.rng.gen_bool(0.25) {
            let id = trx;
            self.checker
                .causal_floors
                .insert(id, self.checker.highest_acknowledged);
            self.nodes[slot].group().causal_read(id);
        }
        Some(submit_id)
    }
}

fn crc(bytes: &[u8]) -> u32 {
    // Only needs to tell payloads apart in the delivery checker.
    bytes.iter().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(report.transfers >= 2, "joiners got state: {report:?}");
    }

    #[test]
    fn one_seed_replays_exactly() {
        let options = SimOptions::default();
        assert_eq!(run_seed(7, &options), run_seed(7, &options));
    }
}
