//! Tests of the blocking wrapper with a few real threads (scoped, so nothing outlives a test).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use base::{seeded_rng, Seqno};
use rand::Rng;

use super::{BlockingMonitor, EnterError, Interrupted};
use crate::monitor::{Policy, DEFAULT_WINDOW};

/// Long enough never to fire on a healthy run; turns a deadlock into a failure, not a hang.
const GENEROUS: Duration = Duration::from_secs(60);

fn s(value: i64) -> Seqno {
    Seqno(value)
}

/// Polls `condition` until it holds; panics after a generous bound.
fn wait_until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..60_000 {
        if condition() {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting until {what}");
}

fn enter_or_fail(monitor: &BlockingMonitor, seqno: Seqno, depends_on: Seqno) {
    if let Err(error) = monitor.enter_timeout(seqno, depends_on, GENEROUS) {
        panic!("{} monitor: {error}", monitor.name());
    }
}

#[test]
fn blocking_monitor_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BlockingMonitor>();
}

/// One job per seqno: what the applier thread that receives it will do.
#[derive(Clone, Copy)]
struct Job {
    depends_on: Seqno,
    failed: bool,
    /// Galera's order: leave the apply monitor only after committing.
    leave_apply_after_commit: bool,
}

fn run_appliers(seed: u64, count: i64, threads: usize, window: usize) {
    let mut rng = seeded_rng(seed);
    let jobs: Vec<Job> = (0..=count)
        .map(|seqno| Job {
            depends_on: Seqno((seqno - 1 - rng.gen_range(0..8)).max(0)),
            failed: rng.gen_ratio(1, 10),
            leave_apply_after_commit: rng.gen_bool(0.5),
        })
        .collect();
    let apply = BlockingMonitor::new("apply", Policy::Apply, s(0), window);
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), window);
    // Seqnos are handed out in order, as the group delivers them to the appliers.
    let next = AtomicI64::new(1);
    let applied: Vec<AtomicBool> = (0..=count).map(|_| AtomicBool::new(false)).collect();
    let commits = Mutex::new(Vec::new());

    thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let seqno = s(next.fetch_add(1, Ordering::Relaxed));
                if seqno.0 > count {
                    break;
                }
                let index = usize::try_from(seqno.0).unwrap();
                let job = jobs[index];
                if job.failed {
                    // Mark before leaving, so anyone admitted after us sees it.
                    applied[index].store(true, Ordering::Release);
                    apply.self_cancel(seqno);
                    commit.self_cancel(seqno);
                    continue;
                }
                enter_or_fail(&apply, seqno, job.depends_on);
                for earlier in 1..=job.depends_on.0 {
                    let done = applied[usize::try_from(earlier).unwrap()].load(Ordering::Acquire);
                    assert!(
                        done,
                        "{seqno:?} started applying before #{earlier} finished"
                    );
                }
                thread::yield_now();
                if !job.leave_apply_after_commit {
                    applied[index].store(true, Ordering::Release);
                    apply.leave(seqno);
                }
                enter_or_fail(&commit, seqno, seqno.prev());
                commits.lock().unwrap().push(seqno);
                commit.leave(seqno);
                if job.leave_apply_after_commit {
                    applied[index].store(true, Ordering::Release);
                    apply.leave(seqno);
                }
            });
        }
    });

    let expected: Vec<Seqno> = (1..=count)
        .filter(|seqno| !jobs[usize::try_from(*seqno).unwrap()].failed)
        .map(Seqno)
        .collect();
    assert_eq!(
        *commits.lock().unwrap(),
        expected,
        "seed {seed}: commits out of order"
    );
    for monitor in [&apply, &commit] {
        assert_eq!(monitor.last_left(), s(count));
        assert_eq!(monitor.entered_count(), 0);
        assert_eq!(monitor.waiting_count(), 0);
        monitor.check_invariants();
    }
}

#[test]
fn threads_apply_in_parallel_and_commit_in_seqno_order() {
    run_appliers(1, 2000, 4, DEFAULT_WINDOW);
}

#[test]
fn threads_respect_a_small_window() {
    run_appliers(2, 2000, 4, 3);
}

#[test]
fn a_leave_wakes_only_the_committer_it_lets_in() {
    const WAITERS: i64 = 8;
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), DEFAULT_WINDOW);
    commit.enter(s(1), s(0)).unwrap();
    let order = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for seqno in 2..=WAITERS + 1 {
            let (commit, order) = (&commit, &order);
            scope.spawn(move || {
                enter_or_fail(commit, s(seqno), s(seqno - 1));
                order.lock().unwrap().push(seqno);
                commit.leave(s(seqno));
            });
        }
        wait_until("every committer waits for its turn", || {
            commit.waiting_count() == WAITERS as usize
        });
        commit.leave(s(1));
    });
    assert_eq!(
        *order.lock().unwrap(),
        (2..=WAITERS + 1).collect::<Vec<_>>()
    );
    // Woken all at once at every leave, the waiters would find their turn had not come
    // about WAITERS^2 / 2 times; woken one by one, only a spurious wake-up can.
    assert!(
        commit.futile_wakeups() <= 2,
        "{} futile wake-ups",
        commit.futile_wakeups()
    );
}

#[test]
fn interrupt_wakes_a_waiting_enter() {
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), 16);
    commit.enter(s(1), s(0)).unwrap();
    thread::scope(|scope| {
        let victim = scope.spawn(|| commit.enter(s(3), s(2)));
        let bystander = scope.spawn(|| commit.enter(s(2), s(1)));
        wait_until("both wait", || commit.waiting_count() == 2);
        assert!(commit.interrupt(s(3)));
        assert_eq!(victim.join().unwrap(), Err(Interrupted { seqno: s(3) }));
        // Only the interrupted seqno gives up.
        assert_eq!(commit.waiting_count(), 1);
        assert!(
            !commit.interrupt(s(1)),
            "1 is inside: too late to interrupt"
        );
        commit.leave(s(1));
        assert_eq!(bystander.join().unwrap(), Ok(()));
    });
    // The interrupt was consumed: the replay of 3 enters normally in its turn.
    commit.leave(s(2));
    commit.enter(s(3), s(2)).unwrap();
    commit.leave(s(3));
    assert!(!commit.interrupt(s(3)), "3 has left: too late to interrupt");
    commit.check_invariants();
}

#[test]
fn interrupt_before_enter_is_not_lost() {
    // The abort may reach the victim before it starts waiting; it must still see it, even
    // though its turn has come in the meantime.
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), 16);
    assert!(commit.interrupt(s(1)));
    assert!(commit.interrupt(s(1)), "interrupting twice is harmless");
    assert_eq!(commit.enter(s(1), s(0)), Err(Interrupted { seqno: s(1) }));
    commit.enter(s(1), s(0)).unwrap();
    commit.leave(s(1));

    // A self-cancel drops a pending interrupt.
    assert!(commit.interrupt(s(2)));
    commit.self_cancel(s(2));
    commit.check_invariants();
    assert_eq!(commit.last_left(), s(2));
}

#[test]
fn enter_timeout_gives_up_without_entering() {
    let apply = BlockingMonitor::new("apply", Policy::Apply, s(0), 16);
    let timeout = Duration::from_millis(20);
    assert_eq!(
        apply.enter_timeout(s(2), s(1), timeout),
        Err(EnterError::TimedOut {
            seqno: s(2),
            timeout
        })
    );
    assert_eq!(apply.waiting_count(), 0);
    assert_eq!(apply.entered_count(), 0);
    apply.self_cancel(s(1));
    apply.enter_timeout(s(2), s(1), timeout).unwrap();
    assert_eq!(apply.entered_count(), 1);

    assert!(apply.interrupt(s(3)));
    assert_eq!(
        apply.enter_timeout(s(3), s(0), timeout),
        Err(EnterError::Interrupted(Interrupted { seqno: s(3) }))
    );
}

#[test]
fn wait_left_serves_causal_reads() {
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), 16);
    assert!(commit.wait_left(s(0), Duration::ZERO));
    assert!(!commit.wait_left(s(2), Duration::from_millis(10)));
    thread::scope(|scope| {
        let reader = scope.spawn(|| commit.wait_left(s(2), GENEROUS));
        commit.enter(s(1), s(0)).unwrap();
        commit.leave(s(1));
        commit.self_cancel(s(2));
        assert!(reader.join().unwrap());
    });
    assert!(commit.is_left(s(2)));
}

#[test]
fn self_cancel_beyond_the_window_waits_for_room() {
    let apply = BlockingMonitor::new("apply", Policy::Apply, s(0), 2);
    thread::scope(|scope| {
        let canceller = scope.spawn(|| apply.self_cancel(s(3)));
        wait_until("the self-cancel waits", || apply.waiting_count() == 1);
        apply.enter(s(1), s(0)).unwrap();
        apply.leave(s(1));
        canceller.join().unwrap();
    });
    apply.enter(s(2), s(0)).unwrap();
    apply.leave(s(2));
    assert_eq!(apply.last_left(), s(3));
}

#[test]
fn a_broken_invariant_wakes_waiters_instead_of_hanging_them() {
    let commit = BlockingMonitor::new("commit", Policy::Commit, s(0), 16);
    commit.enter(s(1), s(0)).unwrap();
    thread::scope(|scope| {
        let waiter = scope.spawn(|| commit.enter(s(2), s(1)));
        wait_until("the enter waits", || commit.waiting_count() == 1);
        // 5 never entered: a bug, which poisons the monitor.
        let bug = catch_unwind(AssertUnwindSafe(|| commit.leave(s(5))));
        assert!(bug.is_err());
        assert!(
            waiter.join().is_err(),
            "the waiter must panic on the poisoned monitor"
        );
    });
    assert!(catch_unwind(AssertUnwindSafe(|| commit.last_left())).is_err());
    assert!(format!("{commit:?}").contains("commit"));
}

#[test]
fn an_interrupt_nobody_consumed_does_not_stop_a_replay() {
    // A victim aborted after its verdict arrived gives up before it ever waits at the apply
    // monitor, so the interrupt stays; its replay must still enter and leave cleanly.
    let apply = BlockingMonitor::new("apply", Policy::Apply, s(0), 16);
    assert!(apply.interrupt(s(1)));
    apply.enter_regardless(s(1), s(0));
    apply.leave(s(1));
    assert!(apply.is_left(s(1)));
    apply.check_invariants();
}
