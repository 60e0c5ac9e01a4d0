//! A seeded simulation of the three monitors under a random scheduler.
//!
//! Each seqno is an actor with chains of steps (certify in the local monitor, apply, commit;
//! or, for a failed certification, self-cancels that may run at any time). At every tick the
//! scheduler lists the steps the monitors would admit now, picks one at random and runs it,
//! checking the oracles: local and commit order are exactly seqno order, and no apply starts
//! before everything up to its `depends_on` has finished applying. Running out of admissible
//! steps before every actor is done is a deadlock and fails the seed.

use base::{seeded_rng, SeededRng, Seqno};
use rand::Rng;

use super::{Monitor, NotYet, Policy};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    LocalEnter,
    LocalLeave,
    ApplyEnter,
    ApplyLeave,
    CommitEnter,
    CommitLeave,
    CancelApply,
    CancelCommit,
}

/// One ordered action and the steps it still has to take.
struct Actor {
    seqno: Seqno,
    depends_on: Seqno,
    /// Independent chains of steps; within a chain, steps run front to back.
    chains: Vec<Vec<Step>>,
}

/// What the simulation saw, summed over seeds to prove the interesting cases happened.
#[derive(Default)]
struct Coverage {
    max_applying_together: usize,
    window_refusals: usize,
    cancels_ahead_of_turn: usize,
}

struct World {
    seed: u64,
    first: Seqno,
    local: Monitor,
    apply: Monitor,
    commit: Monitor,
    /// Indexed by `seqno - first`.
    applied: Vec<bool>,
    committed: Vec<bool>,
    local_order: Vec<Seqno>,
    commit_order: Vec<Seqno>,
    applying: usize,
}

impl World {
    fn offset(&self, seqno: Seqno) -> usize {
        usize::try_from(seqno.0 - self.first.0).expect("seqno below the first one")
    }

    fn admitted(&self, actor: &Actor, step: Step, coverage: &mut Coverage) -> bool {
        let seqno = actor.seqno;
        let result = match step {
            Step::LocalEnter => self.local.can_enter(seqno, seqno.prev()),
            Step::ApplyEnter => self.apply.can_enter(seqno, actor.depends_on),
            Step::CommitEnter => self.commit.can_enter(seqno, seqno.prev()),
            Step::CancelApply => self.apply.can_self_cancel(seqno),
            Step::CancelCommit => self.commit.can_self_cancel(seqno),
            Step::LocalLeave | Step::ApplyLeave | Step::CommitLeave => Ok(()),
        };
        if matches!(result, Err(NotYet::Window { .. })) {
            coverage.window_refusals += 1;
        }
        result.is_ok()
    }

    fn run(&mut self, actor: &Actor, step: Step, coverage: &mut Coverage) {
        let seed = self.seed;
        let seqno = actor.seqno;
        match step {
            Step::LocalEnter => {
                self.local.try_enter(seqno, seqno.prev()).unwrap();
                let expected = self
                    .local_order
                    .last()
                    .map_or(self.first, |last| last.next());
                assert_eq!(seqno, expected, "seed {seed}: local order broken");
                self.local_order.push(seqno);
            }
            Step::LocalLeave => self.local.leave(seqno),
            Step::ApplyEnter => {
                self.apply.try_enter(seqno, actor.depends_on).unwrap();
                let mut earlier = self.first;
                while earlier <= actor.depends_on {
                    let done = self.applied[self.offset(earlier)];
                    assert!(
                        done,
                        "seed {seed}: {seqno:?} applies before {earlier:?} finished"
                    );
                    earlier = earlier.next();
                }
                self.applying += 1;
                coverage.max_applying_together = coverage.max_applying_together.max(self.applying);
            }
            Step::ApplyLeave => {
                self.applying -= 1;
                let offset = self.offset(seqno);
                self.applied[offset] = true;
                self.apply.leave(seqno);
            }
            Step::CommitEnter => {
                self.commit.try_enter(seqno, seqno.prev()).unwrap();
                let offset = self.offset(seqno);
                let all_before = self.committed[..offset].iter().all(|done| *done);
                assert!(
                    all_before,
                    "seed {seed}: {seqno:?} commits before an earlier seqno"
                );
                self.commit_order.push(seqno);
            }
            Step::CommitLeave => {
                let offset = self.offset(seqno);
                self.committed[offset] = true;
                self.commit.leave(seqno);
            }
            Step::CancelApply => {
                if seqno != self.apply.last_left().next() {
                    coverage.cancels_ahead_of_turn += 1;
                }
                let offset = self.offset(seqno);
                self.applied[offset] = true;
                self.apply.self_cancel(seqno).unwrap();
            }
            Step::CancelCommit => {
                if seqno != self.commit.last_left().next() {
                    coverage.cancels_ahead_of_turn += 1;
                }
                let offset = self.offset(seqno);
                self.committed[offset] = true;
                self.commit.self_cancel(seqno).unwrap();
            }
        }
        self.local.check_invariants();
        self.apply.check_invariants();
        self.commit.check_invariants();
    }
}

/// Draws the actors of one seed: random dependencies, failures and leave order.
fn plan(rng: &mut SeededRng, first: Seqno, count: i64) -> Vec<Actor> {
    let spread = rng.gen_range(0..12);
    let failure_percent = rng.gen_range(0..40);
    (0..count)
        .map(|offset| {
            let seqno = Seqno(first.0 + offset);
            // PA-unsafe actions depend on their predecessor; others reach back at random,
            // sometimes below the first seqno (already finished).
            let depends_on = if rng.gen_ratio(1, 10) {
                seqno.prev()
            } else {
                Seqno((seqno.0 - 1 - rng.gen_range(0..=spread)).max(Seqno::UNDEFINED.0))
            };
            let chains = if rng.gen_range(0..100) < failure_percent {
                vec![
                    vec![Step::LocalEnter, Step::LocalLeave],
                    vec![Step::CancelApply],
                    vec![Step::CancelCommit],
                ]
            } else if rng.gen_bool(0.5) {
                // Galera's order: the apply slot is held until after the commit.
                vec![vec![
                    Step::LocalEnter,
                    Step::LocalLeave,
                    Step::ApplyEnter,
                    Step::CommitEnter,
                    Step::CommitLeave,
                    Step::ApplyLeave,
                ]]
            } else {
                vec![vec![
                    Step::LocalEnter,
                    Step::LocalLeave,
                    Step::ApplyEnter,
                    Step::ApplyLeave,
                    Step::CommitEnter,
                    Step::CommitLeave,
                ]]
            };
            Actor {
                seqno,
                depends_on,
                chains,
            }
        })
        .collect()
}

fn simulate(seed: u64, coverage: &mut Coverage) {
    let mut rng = seeded_rng(seed);
    let last_left = Seqno(rng.gen_range(-1..40));
    let window = if rng.gen_ratio(1, 5) {
        64
    } else {
        rng.gen_range(1..=10)
    };
    let count = rng.gen_range(1..=60);
    let first = last_left.next();
    let mut actors = plan(&mut rng, first, count);
    let mut world = World {
        seed,
        first,
        local: Monitor::new("local", Policy::Local, last_left, window),
        apply: Monitor::new("apply", Policy::Apply, last_left, window),
        commit: Monitor::new("commit", Policy::Commit, last_left, window),
        applied: vec![false; actors.len()],
        committed: vec![false; actors.len()],
        local_order: Vec::new(),
        commit_order: Vec::new(),
        applying: 0,
    };

    // Every step of every actor runs once, so the loop is bounded by the number of steps.
    let steps_total: usize = actors
        .iter()
        .flat_map(|actor| &actor.chains)
        .map(Vec::len)
        .sum();
    for _ in 0..steps_total {
        let mut runnable = Vec::new();
        for (actor_index, actor) in actors.iter().enumerate() {
            for (chain_index, chain) in actor.chains.iter().enumerate() {
                if let Some(step) = chain.first() {
                    if world.admitted(actor, *step, coverage) {
                        runnable.push((actor_index, chain_index));
                    }
                }
            }
        }
        assert!(
            !runnable.is_empty(),
            "seed {seed}: deadlock at {:?}",
            world.commit
        );
        let (actor_index, chain_index) = runnable[rng.gen_range(0..runnable.len())];
        let step = actors[actor_index].chains[chain_index].remove(0);
        world.run(&actors[actor_index], step, coverage);
    }

    let unfinished = actors
        .iter()
        .filter(|actor| actor.chains.iter().any(|c| !c.is_empty()));
    assert_eq!(unfinished.count(), 0, "seed {seed}: steps left over");
    let last = Seqno(first.0 + count - 1);
    for monitor in [&world.local, &world.apply, &world.commit] {
        assert_eq!(monitor.last_left(), last, "seed {seed}: {monitor:?}");
        assert_eq!(monitor.entered_count(), 0, "seed {seed}: {monitor:?}");
    }
    let all: Vec<Seqno> = actors.iter().map(|actor| actor.seqno).collect();
    assert_eq!(
        world.local_order, all,
        "seed {seed}: every seqno certifies, in order"
    );
    let succeeded: Vec<Seqno> = actors
        .iter()
        .filter(|actor| actor.chains.len() == 1)
        .map(|actor| actor.seqno)
        .collect();
    assert_eq!(
        world.commit_order, succeeded,
        "seed {seed}: commits out of seqno order"
    );
}

#[test]
fn random_schedules_keep_apply_dependencies_and_commit_order() {
    let mut coverage = Coverage::default();
    for seed in 0..1000 {
        simulate(seed, &mut coverage);
    }
    // The seeds must reach the cases the monitors exist for.
    assert!(
        coverage.max_applying_together > 1,
        "no parallel applying happened"
    );
    assert!(
        coverage.window_refusals > 0,
        "the window never held anything back"
    );
    assert!(
        coverage.cancels_ahead_of_turn > 0,
        "no seqno self-cancelled ahead of its turn"
    );
}

#[test]
fn a_forgotten_seqno_deadlocks_the_commit_order() {
    // The negative space of the simulation: drop one failed seqno's commit self-cancel and
    // every later seqno is stuck behind it for good.
    let mut commit = Monitor::new("commit", Policy::Commit, Seqno(0), 16);
    commit.try_enter(Seqno(1), Seqno(0)).unwrap();
    commit.leave(Seqno(1));
    // Seqno 2 failed certification and nobody self-cancels it.
    for seqno in 3..=10 {
        assert!(commit.can_enter(Seqno(seqno), Seqno(seqno - 1)).is_err());
    }
    commit.self_cancel(Seqno(2)).unwrap();
    assert!(commit.can_enter(Seqno(3), Seqno(2)).is_ok());
}
