//! A node's processes: the founder, a node that starts (first, or again after a crash) and
//! joins by state transfer or comes back as the member it was, and a crash, which loses the
//! process and may tear or flip the gcache records it was writing.

use base::{seeded_rng, Gtid, SeededRng, Seqno};
use engine::memory_store::CrashDamage;
use engine::{ActionCache, ConnectionStart, EngineConfig, NodeEngine};
use group::recovery::RestartState;
use group::{Contact, GroupNode};
use rand::Rng;

use crate::node::{Process, SimNode};
use crate::{Event, Simulation, TICK_US};

/// How long a node stopped by a fatal error takes to leave the group at most, and to be
/// started again after it stopped, simulated microseconds (a real node waits 3 s).
pub(crate) const FATAL_LEAVE_WAIT_US: u64 = 3_000_000;
const RESTART_AFTER_FATAL_US: u64 = 500_000;
/// How long a server stays disconnected when its cluster address changes at runtime.
const RECONNECT_AFTER_US: u64 = 50_000;

impl Simulation {
    /// Starts the founder of the cluster.
    pub(crate) fn start_founder(&mut self) {
        let rng = seeded_rng(self.rng.gen());
        let mut group = GroupNode::bootstrap(
            self.config_for(0),
            &Contact::new("node0", &SimNode::address(0)),
            rng,
            self.now(),
        );
        group.hold_data(RestartState::default());
        self.start_process(0, group, true, None);
        self.pump(0).expect("the founder starts cleanly");
    }

    /// What a member on `slot` reaches the group with: a random stream of its own, the
    /// other slots as seeds, and its name and address.
    fn group_contact(&mut self, slot: usize) -> (SeededRng, Vec<String>, Contact) {
        let rng = seeded_rng(self.rng.gen());
        let seeds: Vec<String> = (0..self.nodes.len())
            .filter(|s| *s != slot)
            .map(SimNode::address)
            .collect();
        let contact = Contact::new(&format!("node{slot}"), &SimNode::address(slot));
        (rng, seeds, contact)
    }

    /// Starts a process on `slot` that joins through the other slots: as the member it
    /// was, when its saved membership says it was one of a component of two, else as a new
    /// member with the position its database recovers.
    pub(crate) fn start_node(&mut self, slot: usize) {
        let (rng, seeds, contact) = self.group_contact(slot);
        let now = self.now();
        let config = self.config_for(slot);
        let node = &mut self.nodes[slot];
        node.disk.db.roll_back_uncommitted();
        let dropped = node.disk.cache.recover();
        if dropped > 0 {
            base::mark!("sim.gcache_recovery_dropped_damaged_records");
        }
        let db = &node.disk.db;
        let position =
            (db.history != base::Uuid::NIL && db.committed.is_defined()).then_some(Gtid {
                cluster: db.history,
                seqno: db.committed,
            });
        let mut group = match engine::StateStore::load_membership(&node.disk.state) {
            Some(saved) => {
                base::mark!("sim.node_comes_back_as_the_member_it_was");
                GroupNode::come_back(config, &contact, &saved, seeds, rng, now)
            }
            None => GroupNode::join(config, &contact, seeds, rng, now),
        };
        // The server recovered its position (the simulated `--wsrep-recover`), and the last
        // primary view is on disk: a full crash is restored from them.
        let last_view =
            engine::StateStore::load_view(&node.disk.state).expect("the simulated disk reads back");
        group.hold_data(RestartState {
            last_view,
            position,
        });
        self.start_process(slot, group, false, position);
    }

    fn start_process(
        &mut self,
        slot: usize,
        group: GroupNode,
        bootstrap: bool,
        start_position: Option<Gtid>,
    ) {
        let now = self.now();
        let node = &mut self.nodes[slot];
        node.incarnation += 1;
        let config = EngineConfig {
            node_name: format!("node{slot}"),
            incoming_address: String::new(),
            strict_transitions: true,
        };
        let mut engine = NodeEngine::new(config, Box::new(node.disk.state.clone()), now);
        engine
            .begin_connection("")
            .expect("a new process is not connected");
        engine.group_started(group.me().uuid);
        engine.start_connection(ConnectionStart {
            bootstrap,
            start_position,
            ist_address: SimNode::ist_address(slot),
        });
        let mut cache = ActionCache::over(Box::new(node.disk.cache.clone()));
        if let Some(position) = start_position {
            cache
                .drop_past(position)
                .expect("the simulated cache truncates");
        }
        node.process = Some(Process {
            incarnation: node.incarnation,
            group,
            engine,
            cache,
            monitors: None,
            running: Default::default(),
            next_applier: 0,
            clients: Default::default(),
            incoming: None,
            pause: None,
            donations: Vec::new(),
            cached_reported: Seqno::UNDEFINED,
            causal: Default::default(),
            freeze: base::FreezePurge::Off,
            stopping_by: None,
            group_stopped: false,
            reconnected: false,
        });
        let incarnation = node.incarnation;
        let jitter = self.rng.gen_range(0..TICK_US);
        self.schedule(jitter, Event::Tick { slot, incarnation });
    }

    /// `SET GLOBAL wsrep_cluster_address` on a running server, first half: the node leaves
    /// and its server gets the final view; its clients waiting for an order fail.
    pub(crate) fn disconnect_at_runtime(&mut self, slot: usize) {
        let Some(process) = self.nodes[slot].process.as_mut() else {
            return;
        };
        if process.group_stopped || process.stopping_by.is_some() {
            return;
        }
        base::mark!("sim.server_reconnected_at_runtime");
        let last_member = process.engine.begin_disconnect();
        process.group.leave();
        process.group_stopped = true;
        process.engine.forget_membership();
        process.engine.forget_last_view();
        process.engine.close_with_final_view();
        let committed = process.committed();
        process.engine.save_final_state(last_member, committed);
        let incarnation = process.incarnation;
        self.schedule(
            RECONNECT_AFTER_US,
            Event::Fault(crate::faults::Fault::Connect { slot, incarnation }),
        );
    }

    /// Second half: the same server connects again as a new member, with its own position.
    pub(crate) fn connect_at_runtime(&mut self, slot: usize, incarnation: u64) {
        let (rng, seeds, contact) = self.group_contact(slot);
        let now = self.now();
        let config = self.config_for(slot);
        let node = &mut self.nodes[slot];
        let db = &node.disk.db;
        let position = (db.history != base::Uuid::NIL).then_some(Gtid {
            cluster: db.history,
            seqno: db.committed,
        });
        let Some(process) = node.process_of(incarnation) else {
            return;
        };
        if !process.engine.tasks().is_empty() || !process.running.is_empty() {
            // The server connects again once its appliers have passed on the final view.
            let again = Event::Fault(crate::faults::Fault::Connect { slot, incarnation });
            self.schedule(RECONNECT_AFTER_US, again);
            return;
        }
        let mut group = GroupNode::join(config, &contact, seeds, rng, now);
        // It left cleanly, so it saved no view: it joins as usual.
        group.hold_data(RestartState {
            last_view: None,
            position,
        });
        process
            .engine
            .begin_connection("")
            .expect("disconnected before");
        process.engine.group_started(group.me().uuid);
        process.engine.start_connection(ConnectionStart {
            bootstrap: false,
            start_position: position,
            ist_address: SimNode::ist_address(slot),
        });
        process.group = group;
        process.group_stopped = false;
        process.reconnected = true;
    }

    /// A process stopping after a fatal error ends once it is out of the group (or its time
    /// to leave is up), and is started again a while later (as systemd would).
    pub(crate) fn finish_stopping(&mut self, slot: usize) {
        let now_us = self.now_us;
        let Some(process) = self.nodes[slot].process.as_ref() else {
            return;
        };
        let Some(by) = process.stopping_by else {
            return;
        };
        if process.group.is_closed() || !process.group.is_primary() || now_us >= by {
            self.crash(slot);
            self.report.crashes -= 1;
            self.schedule(RESTART_AFTER_FATAL_US, Event::Restart { slot });
        }
    }

    /// Kills the node's process. Its database keeps what was committed; the gcache may
    /// lose the record it was writing (torn) or hold one with a flipped bit.
    pub(crate) fn crash(&mut self, slot: usize) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{} node {slot} crashes", self.now_us);
        }
        let node = &mut self.nodes[slot];
        if node.process.take().is_none() {
            return;
        }
        node.disk.db.roll_back_uncommitted();
        let roll = self.rng.gen_range(0..10);
        let damage = match roll {
            0 => Some(CrashDamage::TornLast),
            1 => engine::ActionStore::range(&node.disk.cache).map(|(from, to)| {
                CrashDamage::FlippedBit {
                    seqno: Seqno(self.rng.gen_range(from.0..=to.0)),
                    bit: self.rng.gen(),
                }
            }),
            _ => None,
        };
        if let Some(damage) = damage {
            if node.disk.cache.damage(damage) {
                base::mark!("sim.gcache_damaged_by_a_crash");
            }
        }
        self.report.crashes += 1;
    }
}
