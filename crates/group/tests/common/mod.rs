//! The test cluster: a few group members on a perfect in-memory network that tests cut
//! links in by hand, run one tick at a time. Shared by the test files; each uses part of it.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, BTreeSet};

use base::{seeded_rng, Nanos, Seqno, Uuid};
use group::{Contact, Delivery, GroupConfig, GroupNode, View};

pub(crate) const TICK_NS: u64 = 10_000_000;

/// The test members' `log_retain_bytes`: forty entries of a few KiB each are past it.
pub(crate) const LOG_RETAIN_BYTES: u64 = 64 << 10;

/// Rounds of message exchange one tick may take; more means messages breed messages.
const ROUNDS_PER_STEP_MAX: usize = 1_000;

/// A few members on one in-memory network.
pub(crate) struct Cluster {
    /// The members by slot; `None` while a slot's process is down.
    pub(crate) nodes: Vec<Option<GroupNode>>,
    /// What each slot's members delivered.
    pub(crate) delivered: Vec<Vec<Delivery>>,
    /// Node indexes that can neither send nor receive.
    pub(crate) isolated: BTreeSet<usize>,
    /// Every message sent between members, when set (for tests that replay or mutate it).
    pub(crate) captured: Option<Vec<Vec<u8>>>,
    /// Simulated time, nanoseconds.
    pub(crate) now: u64,
    seed: u64,
}

/// The settings of every test member: short timeouts, frequent snapshots.
pub(crate) fn config() -> GroupConfig {
    let mut config = GroupConfig::default();
    config.tick_interval_ns = TICK_NS;
    config.apply_option("evs.suspect_timeout", "PT1S").unwrap();
    config.apply_option("evs.inactive_timeout", "PT1S").unwrap();
    config.apply_option("gcs.fc_limit", "4").unwrap();
    config.snapshot_interval_entries = 20;
    config.log_retain_entries = 40;
    config.log_retain_bytes = LOG_RETAIN_BYTES;
    config
}

/// Where slot `index` listens.
pub(crate) fn address(index: usize) -> String {
    format!("node{index}")
}

impl Cluster {
    /// A cluster of `size` members, once all of them see a primary view of all.
    pub(crate) fn new(size: usize) -> Cluster {
        let mut cluster = Cluster {
            nodes: Vec::new(),
            delivered: Vec::new(),
            isolated: BTreeSet::new(),
            captured: None,
            now: 0,
            seed: 11,
        };
        let founder = GroupNode::bootstrap(
            config(),
            &Contact::new("node0", &address(0)),
            seeded_rng(1),
            Nanos(0),
        );
        cluster.nodes.push(Some(founder));
        cluster.delivered.push(Vec::new());
        for _ in 1..size {
            cluster.add_joiner();
        }
        cluster.run_until(|c| c.members_seen_by_all() == size, 2_000);
        cluster
    }

    /// Starts a new node in a new slot, joining through nodes 0 and 1.
    pub(crate) fn add_joiner(&mut self) -> usize {
        let index = self.nodes.len();
        self.seed += 1;
        let joiner = GroupNode::join(
            config(),
            &Contact::new(&format!("node{index}"), &address(index)),
            vec![address(0), address(1)],
            seeded_rng(self.seed),
            Nanos(self.now),
        );
        self.nodes.push(Some(joiner));
        self.delivered.push(Vec::new());
        index
    }

    /// Starts a new process in slot `index` (crashed or stopped): a fresh identity that
    /// joins through node 0 from the same address. Returns its UUID.
    pub(crate) fn restart(&mut self, index: usize) -> Uuid {
        self.seed += 100;
        let restarted = GroupNode::join(
            config(),
            &Contact::new(&format!("node{index}"), &address(index)),
            vec![address(0)],
            seeded_rng(self.seed),
            Nanos(self.now),
        );
        let uuid = restarted.me().uuid;
        self.nodes[index] = Some(restarted);
        self.delivered[index].clear();
        uuid
    }

    /// The member running in slot `index`.
    pub(crate) fn node(&mut self, index: usize) -> &mut GroupNode {
        self.nodes[index].as_mut().expect("node is running")
    }

    /// One tick of every member, and of a fast network.
    pub(crate) fn step(&mut self) {
        self.now += TICK_NS;
        let now = Nanos(self.now);
        let mut traffic = Vec::new();
        for (index, slot) in self.nodes.iter_mut().enumerate() {
            let Some(node) = slot else { continue };
            node.tick(now);
            let (outgoing, deliveries) = node.poll(now);
            self.delivered[index].extend(deliveries);
            traffic.extend(outgoing.into_iter().map(|o| (index, o.address, o.bytes)));
        }
        self.exchange(traffic);
    }

    /// Hands `bytes` to the member in slot `to` as if from the network (from no slot, so
    /// isolation does not stop it), then lets the network carry what follows; the member's
    /// verdict on the bytes.
    pub(crate) fn inject(&mut self, to: usize, bytes: &[u8]) -> Result<(), group::ReceiveError> {
        let now = Nanos(self.now);
        let Some(node) = self.nodes[to].as_mut() else {
            return Ok(());
        };
        let verdict = node.receive(now, bytes);
        let (outgoing, deliveries) = node.poll(now);
        self.delivered[to].extend(deliveries);
        let traffic = outgoing.into_iter().map(|o| (to, o.address, o.bytes));
        self.exchange(traffic.collect());
        verdict
    }

    /// Delivers until quiet, so one step is one tick of a fast network.
    fn exchange(&mut self, mut traffic: Vec<(usize, String, Vec<u8>)>) {
        let now = Nanos(self.now);
        for _ in 0..ROUNDS_PER_STEP_MAX {
            if traffic.is_empty() {
                return;
            }
            let mut next = Vec::new();
            for (from, to_address, bytes) in traffic {
                let Some(to) = (0..self.nodes.len()).find(|i| address(*i) == to_address) else {
                    continue;
                };
                if self.isolated.contains(&from) || self.isolated.contains(&to) {
                    continue;
                }
                let Some(node) = self.nodes[to].as_mut() else {
                    continue;
                };
                if let Err(e) = node.receive(now, &bytes) {
                    if std::env::var("DEBUG_GROUP").is_ok() {
                        eprintln!("{from}->{to}: {e}");
                    }
                }
                if let Some(captured) = self.captured.as_mut() {
                    captured.push(bytes);
                }
                let (outgoing, deliveries) = node.poll(now);
                self.delivered[to].extend(deliveries);
                next.extend(outgoing.into_iter().map(|o| (to, o.address, o.bytes)));
            }
            traffic = next;
        }
        assert!(
            traffic.is_empty(),
            "messages still breed messages after {ROUNDS_PER_STEP_MAX} rounds in one tick"
        );
    }

    /// Steps until `done`, failing the test after `max_steps`.
    pub(crate) fn run_until(&mut self, done: impl Fn(&Cluster) -> bool, max_steps: usize) {
        for _ in 0..max_steps {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("condition not reached in {max_steps} ticks");
    }

    /// Steps `steps` times.
    pub(crate) fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step();
        }
    }

    /// The last view slot `index` delivered.
    pub(crate) fn last_view(&self, index: usize) -> Option<&View> {
        self.delivered[index].iter().rev().find_map(|d| match d {
            Delivery::View(view) => Some(view),
            _ => None,
        })
    }

    /// The smallest member count in the last view of the running, connected nodes.
    pub(crate) fn members_seen_by_all(&self) -> usize {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_some() && !self.isolated.contains(i))
            .map(|i| {
                self.last_view(i)
                    .filter(|v| v.primary)
                    .map_or(0, |v| v.members.len())
            })
            .min()
            .unwrap_or(0)
    }

    /// Seqno -> a digest of what was delivered there, per node.
    pub(crate) fn ordered(&self, index: usize) -> BTreeMap<Seqno, String> {
        self.delivered[index]
            .iter()
            .filter_map(|d| match d {
                Delivery::WriteSet { seqno, payload, .. } => {
                    Some((*seqno, format!("ws:{payload:?}")))
                }
                Delivery::View(view) if view.ordered => {
                    let names: Vec<&str> = view.members.iter().map(|m| m.name.as_str()).collect();
                    Some((view.seqno, format!("view:{names:?}")))
                }
                _ => None,
            })
            .collect()
    }
}

/// Fails unless the slots delivered consecutive seqnos and agree on every seqno.
pub(crate) fn assert_same_history(cluster: &Cluster, indexes: &[usize]) {
    let histories: Vec<_> = indexes.iter().map(|i| cluster.ordered(*i)).collect();
    for (position, history) in histories.iter().enumerate() {
        let seqnos: Vec<i64> = history.keys().map(|s| s.0).collect();
        for pair in seqnos.windows(2) {
            assert_eq!(pair[1], pair[0] + 1, "gap on node {}", indexes[position]);
        }
        for (seqno, what) in history {
            for other in &histories {
                if let Some(theirs) = other.get(seqno) {
                    assert_eq!(what, theirs, "nodes disagree at {seqno:?}");
                }
            }
        }
    }
}
