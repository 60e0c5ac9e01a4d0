//! Deterministic simulation of a Trireme cluster.
//!
//! N nodes run in one process on one thread. Each is a real [`group::GroupNode`] (Raft
//! ordering) and a real [`engine::NodeEngine`], the node engine a real node runs: it
//! certifies, hands out verdicts and tasks, joins by IST or SST, chooses what a donor sends,
//! keeps the gcache and the saved state. Around it the simulator plays the database server:
//! appliers through real [`order::Monitor`]s into a toy key-value database ([`kv::KvDb`]),
//! clients with row locks (so appliers brute-force abort them and they replay), streaming
//! transactions, TOI, pauses, snapshots, and the IST streams in the real wire format. The
//! network, clock, disks, crashes and restarts are simulated and every random choice comes
//! from one seed, so a failing seed replays exactly.
//!
//! A run has three phases: a fault phase (drops, delays, reordering, duplicates, partitions,
//! clogged and slow nodes, crashes and restarts (two nodes at once in a cluster of five)
//! that may tear or flip gcache records, damaged, cut and forged messages and streams,
//! pauses and gcache freezes, under client load), a heal (all links restored, crashed nodes
//! restarted) and a liveness phase (the cluster must converge and serve a probe
//! transaction from every node). Checkers run on every step; see [`Checker`].

pub mod appliers;
pub mod checker;
pub mod clients;
pub mod effects;
pub mod faults;
pub mod forge;
pub mod kv;
pub mod lifecycle;
pub mod network;
pub mod node;
pub mod run;
pub mod transfers;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::panic::AssertUnwindSafe;

use base::{seeded_rng, Gtid, Nanos, SeededRng};
use group::config::LOG_RETAIN_BYTES_DEFAULT;
use group::GroupConfig;
use rand::Rng;

use checker::Checker;
use faults::Fault;
use kv::KvDb;
use network::{Network, NetworkFaults};
use node::SimNode;

/// Simulated time between two group ticks, microseconds.
const TICK_US: u64 = 10_000;
/// Applier threads per node (`wsrep_slave_threads`).
const SLAVE_THREADS: usize = 4;
/// Events one run may process; more means messages breed messages.
const EVENTS_MAX: u64 = 3_000_000;
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
    /// Joins completed by IST (a stream of write-sets from a donor's gcache).
    pub joins_by_ist: u64,
    /// Joins completed by SST (a snapshot of a donor's database).
    pub joins_by_sst: u64,
    /// Streaming fragments replicated (commit fragments excluded).
    pub fragments: u64,
    /// Local transactions replayed after a brute-force abort.
    pub replays: u64,
    /// Events processed.
    pub events: u64,
    /// Damaged messages delivered (each one refused, or the run fails).
    pub refused_damaged: u64,
    /// Forged messages delivered that the receiver had to refuse (and did).
    pub refused_forgeries: u64,
    /// Damaged or cut state transfer streams the joiner refused (and asked again).
    pub refused_streams: u64,
    /// Coverage marks hit in the run, by name (see `base::marks`).
    pub marks: BTreeMap<&'static str, u64>,
}

impl SimReport {
    /// State transfers completed, by IST and by SST.
    pub fn transfers(&self) -> u64 {
        self.joins_by_ist + self.joins_by_sst
    }
}

/// Something that happens at a simulated time.
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
        applier: u64,
    },
    Client {
        slot: usize,
    },
    /// A state transfer stream reaches a joiner's IST port.
    Stream {
        to: usize,
        from: usize,
        bytes: Vec<u8>,
    },
    /// A donor's server delivers a snapshot (`db`) or, for IST, only the joiner's own
    /// position (`db` is `None`) to the joiner's server.
    Snapshot {
        to: usize,
        joiner_raft_id: u64,
        state: Gtid,
        db: Option<Box<KvDb>>,
    },
    /// A donor's server finished sending its snapshot.
    SnapshotSent {
        slot: usize,
        incarnation: u64,
        state: Gtid,
        rcode: i32,
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

/// One run.
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
    /// Each slot's `pc.weight` (see `group::weights`).
    weights: Vec<u8>,
    checker: Checker,
    report: SimReport,
    transactions_started: u64,
    fault_phase: bool,
    trx_counter: u64,
    /// Numbers causal reads across nodes for the checker.
    causal_counter: u64,
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
            // A budget of a few write-sets, on some runs: a snapshot every few entries, and
            // members brought back by Raft snapshots far more often than the default allows.
            log_retain_bytes: if rng.gen_bool(0.4) {
                rng.gen_range(4_000..400_000)
            } else {
                LOG_RETAIN_BYTES_DEFAULT
            },
            ..GroupConfig::default()
        };
        for (option, value) in [
            ("evs.suspect_timeout", "PT1S".to_owned()),
            ("evs.inactive_timeout", "PT1S".to_owned()),
            ("gcs.fc_limit", rng.gen_range(4..64).to_string()),
        ] {
            config.apply_option(option, &value).expect("valid");
        }
        // Small gcaches make some joins fall back to SST; a disk budget keeps what absent
        // members need on some runs.
        let cache_records = rng.gen_range(20..400);
        let disk_budget = rng.gen_bool(0.5);
        let nodes = (0..node_count)
            .map(|slot| SimNode::new(slot, cache_records, disk_budget))
            .collect();
        // Drawn from a stream of their own, so that the rest of a seed's run is what it was
        // before weights were simulated.
        let weights = random_weights(&mut seeded_rng(seed ^ WEIGHTS_STREAM), node_count);
        Simulation {
            options,
            rng,
            now_us: 0,
            sequence: 0,
            events: BinaryHeap::new(),
            payloads: BTreeMap::new(),
            nodes,
            network: Network::new(node_count, faults),
            config,
            weights,
            checker: Checker::default(),
            report: SimReport {
                nodes: node_count,
                ..SimReport::default()
            },
            transactions_started: 0,
            fault_phase: true,
            trx_counter: 0,
            causal_counter: 0,
        }
    }

    /// The group settings of the member on `slot`: the run's, with the slot's weight.
    pub(crate) fn config_for(&self, slot: usize) -> GroupConfig {
        GroupConfig {
            weight: self.weights[slot],
            ..self.config.clone()
        }
    }

    fn now(&self) -> Nanos {
        Nanos(self.now_us * 1_000)
    }

    fn schedule(&mut self, after_us: u64, event: Event) {
        self.schedule_at(self.now_us + after_us, event);
    }

    fn schedule_at(&mut self, at_us: u64, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((at_us, self.sequence)));
        self.payloads.insert(self.sequence, event);
    }

    fn handle(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Tick { slot, incarnation } => self.on_tick(slot, incarnation),
            Event::Deliver {
                from,
                to,
                bytes,
                must_refuse,
            } => self.on_message(from, to, &bytes, must_refuse),
            Event::ApplyDone {
                slot,
                incarnation,
                applier,
            } => self.on_apply_done(slot, incarnation, applier),
            Event::Client { slot } => self.on_client_tick(slot),
            Event::Stream { to, from, bytes } => self.on_stream(to, from, bytes),
            Event::Snapshot {
                to,
                joiner_raft_id,
                state,
                db,
            } => self.on_snapshot(to, joiner_raft_id, state, db),
            Event::SnapshotSent {
                slot,
                incarnation,
                state,
                rcode,
            } => self.on_snapshot_sent(slot, incarnation, state, rcode),
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
                if !self.nodes[slot].alive() {
                    self.start_node(slot);
                }
                Ok(())
            }
            Event::EndFaultPhase => self.end_fault_phase(),
        }
    }

    fn on_tick(&mut self, slot: usize, incarnation: u64) -> Result<(), String> {
        let now = self.now();
        let Some(process) = self.nodes[slot].process_of(incarnation) else {
            return Ok(());
        };
        if !process.group_stopped {
            process.group.tick(now);
        }
        self.schedule(TICK_US, Event::Tick { slot, incarnation });
        self.pump(slot)
    }

    fn on_message(
        &mut self,
        from: Option<usize>,
        to: usize,
        bytes: &[u8],
        must_refuse: Option<&'static str>,
    ) -> Result<(), String> {
        let now = self.now();
        let Some(process) = self.nodes[to].process.as_mut().filter(|p| !p.group_stopped) else {
            return Ok(());
        };
        // Refusals (a departed sender, a duplicate) are expected under faults; the group
        // logs them and carries on, as it must. Frames arrive in a shared buffer, as the
        // transport hands them over, so the Raft entries kept are views of it.
        let result = process
            .group
            .receive_shared(now, &bytes::Bytes::copy_from_slice(bytes));
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
        // SIM_TRACE=1 prints every delivered message and what its receiver made of it:
        // the first thing to read when a seed fails.
        if std::env::var_os("SIM_TRACE").is_some() {
            let from = from.map_or("forger".to_owned(), |slot| slot.to_string());
            eprintln!(
                "{} {from}->{to} {} => {result:?}",
                self.now_us,
                faults::describe_message(bytes)
            );
        }
        self.pump(to)
    }
}

/// Mixed into a seed for the stream that draws the weights.
const WEIGHTS_STREAM: u64 = 0x5745_4947_4854_5321;

/// `pc.weight` for each of `nodes` slots: on some runs one slot outweighs all the others
/// (the only Raft voter, the others learners), on some one slot weighs 0 (never counted);
/// else every slot weighs 1.
fn random_weights(rng: &mut SeededRng, nodes: usize) -> Vec<u8> {
    let mut weights = vec![group::weights::DEFAULT_WEIGHT; nodes];
    let slot = rng.gen_range(0..nodes);
    match rng.gen_range(0..10) {
        0 | 1 => {
            base::mark!("sim.one_member_outweighs_the_others");
            weights[slot] = u8::try_from(nodes).expect("a few nodes");
        }
        2 => {
            base::mark!("sim.a_member_weighs_nothing");
            weights[slot] = 0;
        }
        _ => {}
    }
    weights
}
