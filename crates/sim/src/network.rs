//! The simulated network: seeded drops, delays (and so reordering), duplicates and
//! partitions between node slots.

use std::collections::BTreeSet;

use base::SeededRng;
use rand::Rng;

/// How badly the network behaves in one run.
#[derive(Clone, Debug)]
pub struct NetworkFaults {
    /// Probability that a message is lost.
    pub drop_probability: f64,
    /// Probability that a message arrives twice.
    pub duplicate_probability: f64,
    /// Shortest one-way delay, microseconds.
    pub delay_min_us: u64,
    /// Longest ordinary one-way delay, microseconds. Different delays reorder messages.
    pub delay_max_us: u64,
    /// Probability that a message is held up much longer (a latency spike).
    pub spike_probability: f64,
    /// Length of a spike, microseconds.
    pub spike_us: u64,
    /// Probability that a damaged copy of a message (a bit flipped, or cut short) arrives
    /// too. The receiver must refuse every one.
    pub corrupt_probability: f64,
}

impl NetworkFaults {
    /// A perfect, fast network.
    pub fn none() -> NetworkFaults {
        NetworkFaults {
            drop_probability: 0.0,
            duplicate_probability: 0.0,
            delay_min_us: 100,
            delay_max_us: 100,
            spike_probability: 0.0,
            spike_us: 0,
            corrupt_probability: 0.0,
        }
    }

    /// Draws a faulty network from the run's generator.
    pub fn random(rng: &mut SeededRng) -> NetworkFaults {
        NetworkFaults {
            drop_probability: rng.gen_range(0.0..0.05),
            duplicate_probability: rng.gen_range(0.0..0.03),
            delay_min_us: rng.gen_range(20..200),
            delay_max_us: rng.gen_range(200..3_000),
            spike_probability: rng.gen_range(0.0..0.01),
            spike_us: rng.gen_range(10_000..200_000),
            corrupt_probability: rng.gen_range(0.0..0.005),
        }
    }
}

/// Links between slots, and their faults.
pub struct Network {
    /// Current fault settings (set to none for the liveness phase).
    pub faults: NetworkFaults,
    /// Directed links that are cut: (from, to).
    blocked: BTreeSet<(usize, usize)>,
    /// Extra delay per receiving slot ("clogged" node), microseconds.
    clogged: Vec<u64>,
}

impl Network {
    /// A network between `slots` nodes.
    pub fn new(slots: usize, faults: NetworkFaults) -> Network {
        Network {
            faults,
            blocked: BTreeSet::new(),
            clogged: vec![0; slots],
        }
    }

    /// Cuts every link between the two sides.
    pub fn partition(&mut self, side_a: &[usize], side_b: &[usize]) {
        for a in side_a {
            for b in side_b {
                self.blocked.insert((*a, *b));
                self.blocked.insert((*b, *a));
            }
        }
    }

    /// Slows every message to `slot` by `extra_us`.
    pub fn clog(&mut self, slot: usize, extra_us: u64) {
        self.clogged[slot] = extra_us;
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.blocked.clear();
        self.clogged.iter_mut().for_each(|c| *c = 0);
    }

    /// True if `from` can reach `to`.
    pub fn connected(&self, from: usize, to: usize) -> bool {
        !self.blocked.contains(&(from, to))
    }

    /// The delays after which copies of one message arrive: none if it is lost.
    pub fn route(&self, rng: &mut SeededRng, from: usize, to: usize) -> Vec<u64> {
        if !self.connected(from, to) {
            return Vec::new();
        }
        let faults = &self.faults;
        if from != to && rng.gen_bool(faults.drop_probability) {
            return Vec::new();
        }
        let copies = if rng.gen_bool(faults.duplicate_probability) {
            2
        } else {
            1
        };
        (0..copies)
            .map(|_| {
                let mut delay = rng.gen_range(faults.delay_min_us..=faults.delay_max_us);
                if rng.gen_bool(faults.spike_probability) {
                    delay += faults.spike_us;
                }
                delay + self.clogged[to]
            })
            .collect()
    }
}
