//! Unit tests of the pure monitor: one scenario per rule, then every misuse that must panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

use base::Seqno;

use super::{Monitor, NotYet, Policy, DEFAULT_WINDOW, MAX_WINDOW};

fn s(value: i64) -> Seqno {
    Seqno(value)
}

fn apply_monitor() -> Monitor {
    Monitor::new("apply", Policy::Apply, s(0), DEFAULT_WINDOW)
}

fn commit_monitor() -> Monitor {
    Monitor::new("commit", Policy::Commit, s(0), DEFAULT_WINDOW)
}

/// Runs `action` and returns its panic message; fails the test if it does not panic.
fn panic_message(action: impl FnOnce()) -> String {
    let payload = match catch_unwind(AssertUnwindSafe(action)) {
        Ok(()) => panic!("expected a panic, but the action returned"),
        Err(payload) => payload,
    };
    if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else {
        panic!("panic payload is not a string")
    }
}

#[test]
fn apply_admits_independent_seqnos_while_earlier_ones_are_inside() {
    let mut apply = apply_monitor();
    apply.try_enter(s(1), s(0)).unwrap();
    apply.try_enter(s(2), s(0)).unwrap();
    apply.try_enter(s(3), s(0)).unwrap();
    assert_eq!(apply.entered_count(), 3);
    assert_eq!(
        apply.try_enter(s(4), s(2)),
        Err(NotYet::Dependency {
            seqno: s(4),
            depends_on: s(2),
            last_left: s(0)
        })
    );

    // 2 finishing is not enough: 1 is still inside, so not every seqno up to 2 has left.
    apply.leave(s(2));
    assert_eq!(apply.last_left(), s(0));
    assert!(apply.can_enter(s(4), s(2)).is_err());
    apply.leave(s(1));
    assert_eq!(apply.last_left(), s(2));
    apply.try_enter(s(4), s(2)).unwrap();

    // A dependency below the start (or UNDEFINED) is already satisfied.
    apply.try_enter(s(5), Seqno::UNDEFINED).unwrap();
    assert_eq!(apply.entered_count(), 3);
    apply.check_invariants();
}

#[test]
fn commit_admits_only_the_successor_of_last_left() {
    let mut commit = commit_monitor();
    assert_eq!(
        commit.try_enter(s(2), s(1)),
        Err(NotYet::Order {
            seqno: s(2),
            last_left: s(0)
        })
    );
    commit.try_enter(s(1), s(0)).unwrap();
    // Strict order: a commit monitor ignores a looser depends_on.
    assert!(commit.can_enter(s(2), s(0)).is_err());
    commit.leave(s(1));
    commit.try_enter(s(2), s(0)).unwrap();
    assert!(commit.is_entered(s(2)));
    commit.leave(s(2));
    assert_eq!(commit.last_left(), s(2));
    assert_eq!(commit.entered_count(), 0);
    commit.check_invariants();
}

#[test]
fn local_policy_is_strict_like_commit() {
    let mut local = Monitor::new("local", Policy::Local, s(10), 8);
    assert!(matches!(
        local.try_enter(s(12), s(10)),
        Err(NotYet::Order { .. })
    ));
    local.try_enter(s(11), s(10)).unwrap();
    local.leave(s(11));
    local.try_enter(s(12), s(10)).unwrap();
    assert_eq!(local.policy(), Policy::Local);
    local.check_invariants();
}

#[test]
fn self_cancel_of_a_failed_seqno_unblocks_later_commits() {
    // The "gap deadlock": 2 failed certification. Without a self-cancel nothing after it can
    // ever commit, however often it retries.
    let mut commit = commit_monitor();
    commit.try_enter(s(1), s(0)).unwrap();
    commit.leave(s(1));
    for _ in 0..3 {
        assert_eq!(
            commit.try_enter(s(3), s(2)),
            Err(NotYet::Order {
                seqno: s(3),
                last_left: s(1)
            })
        );
    }
    commit.self_cancel(s(2)).unwrap();
    assert_eq!(commit.last_left(), s(2));
    commit.try_enter(s(3), s(2)).unwrap();
    commit.leave(s(3));
    assert!(commit.is_left(s(3)));
    commit.check_invariants();
}

#[test]
fn self_cancel_ahead_of_time_is_consumed_when_last_left_reaches_it() {
    let mut commit = commit_monitor();
    commit.self_cancel(s(3)).unwrap();
    commit.self_cancel(s(4)).unwrap();
    assert_eq!(commit.last_left(), s(0));
    assert!(!commit.is_left(s(3)));
    assert!(!commit.is_pending(s(3)));
    commit.check_invariants();

    commit.try_enter(s(1), s(0)).unwrap();
    commit.leave(s(1));
    assert_eq!(commit.last_left(), s(1));
    commit.try_enter(s(2), s(1)).unwrap();
    commit.leave(s(2));
    // 2 leaving closes the gap: last_left jumps over the cancelled 3 and 4.
    assert_eq!(commit.last_left(), s(4));
    assert!(commit.is_left(s(4)));
    assert!(commit.is_pending(s(5)));
    commit.check_invariants();
}

#[test]
fn is_left_ignores_seqnos_that_left_above_a_gap() {
    // Causal reads must not see 2 as done while 1 is still applying.
    let mut apply = apply_monitor();
    apply.try_enter(s(1), s(0)).unwrap();
    apply.try_enter(s(2), s(0)).unwrap();
    apply.leave(s(2));
    assert!(!apply.is_left(s(2)));
    assert!(!apply.is_left(s(1)));
    assert!(apply.is_left(s(0)));
    apply.leave(s(1));
    assert!(apply.is_left(s(2)));
}

#[test]
fn window_bounds_how_far_past_last_left_a_seqno_is_admitted() {
    let mut apply = Monitor::new("apply", Policy::Apply, s(10), 4);
    let beyond = NotYet::Window {
        seqno: s(15),
        last_left: s(10),
        window: 4,
    };
    assert_eq!(apply.try_enter(s(15), s(0)), Err(beyond));
    assert_eq!(apply.self_cancel(s(15)), Err(beyond));
    assert!(apply.is_pending(s(15)));
    apply.try_enter(s(14), s(0)).unwrap();
    apply.self_cancel(s(13)).unwrap();
    apply.try_enter(s(11), s(0)).unwrap();
    assert!(apply.can_enter(s(15), s(0)).is_err());

    apply.leave(s(11));
    assert_eq!(apply.last_left(), s(11));
    apply.try_enter(s(15), s(0)).unwrap();
    assert!(apply.can_enter(s(16), s(0)).is_err());
    apply.check_invariants();
}

#[test]
fn a_window_of_one_makes_apply_strict() {
    let mut apply = Monitor::new("apply", Policy::Apply, Seqno::UNDEFINED, 1);
    assert!(matches!(
        apply.try_enter(s(1), Seqno::UNDEFINED),
        Err(NotYet::Window { .. })
    ));
    apply.try_enter(s(0), Seqno::UNDEFINED).unwrap();
    apply.leave(s(0));
    apply.self_cancel(s(1)).unwrap();
    apply.try_enter(s(2), Seqno::UNDEFINED).unwrap();
    apply.leave(s(2));
    assert_eq!(apply.last_left(), s(2));
    apply.check_invariants();
}

#[test]
fn slots_are_reused_as_the_window_slides() {
    let mut commit = Monitor::new("commit", Policy::Commit, s(0), 3);
    for seqno in 1..=100 {
        if seqno % 7 == 0 {
            commit.self_cancel(s(seqno)).unwrap();
        } else {
            commit.try_enter(s(seqno), s(seqno - 1)).unwrap();
            commit.leave(s(seqno));
        }
        commit.check_invariants();
    }
    assert_eq!(commit.last_left(), s(100));
}

#[test]
fn not_yet_explains_itself() {
    let text = NotYet::Dependency {
        seqno: s(9),
        depends_on: s(7),
        last_left: s(5),
    }
    .to_string();
    assert_eq!(
        text,
        "seqno 9 depends on 7, but only seqnos up to 5 have left"
    );
    let debug = format!("{:?}", commit_monitor());
    assert!(debug.contains("commit"), "{debug}");
    assert!(debug.contains("last_left: #0"), "{debug}");
}

#[test]
fn misuse_panics_with_a_message_naming_the_monitor() {
    type Misuse = fn(&mut Monitor);
    let cases: &[(&str, Misuse, &str)] = &[
        (
            "enter twice",
            |m| {
                m.try_enter(s(1), s(0)).unwrap();
                let _ = m.try_enter(s(1), s(0));
            },
            "entered twice",
        ),
        (
            "enter after cancelling",
            |m| {
                m.self_cancel(s(2)).unwrap();
                let _ = m.try_enter(s(2), s(0));
            },
            "enters after self-cancelling",
        ),
        (
            "enter after leaving above a gap",
            |m| {
                m.try_enter(s(2), s(0)).unwrap();
                m.leave(s(2));
                let _ = m.try_enter(s(2), s(0));
            },
            "enters again after leaving",
        ),
        (
            "enter at last_left",
            |m| {
                let _ = m.try_enter(s(0), Seqno::UNDEFINED);
            },
            "has already left",
        ),
        (
            "depends on itself",
            |m| {
                let _ = m.try_enter(s(1), s(1));
            },
            "which is not earlier",
        ),
        (
            "depends on a later seqno",
            |m| {
                let _ = m.can_enter(s(1), s(5));
            },
            "which is not earlier",
        ),
        (
            "depends below UNDEFINED",
            |m| {
                let _ = m.can_enter(s(1), s(-2));
            },
            "below UNDEFINED",
        ),
        (
            "leave without entering",
            |m| m.leave(s(1)),
            "leaves without entering",
        ),
        (
            "leave beyond the window",
            |m| m.leave(s(1_000_000)),
            "leaves without entering",
        ),
        (
            "leave twice above a gap",
            |m| {
                m.try_enter(s(2), s(0)).unwrap();
                m.leave(s(2));
                m.leave(s(2));
            },
            "left twice",
        ),
        (
            "leave twice after advancing",
            |m| {
                m.try_enter(s(1), s(0)).unwrap();
                m.leave(s(1));
                m.leave(s(1));
            },
            "has already left",
        ),
        (
            "leave after cancelling",
            |m| {
                m.self_cancel(s(3)).unwrap();
                m.leave(s(3));
            },
            "leaves after self-cancelling",
        ),
        (
            "cancel after entering",
            |m| {
                m.try_enter(s(1), s(0)).unwrap();
                let _ = m.self_cancel(s(1));
            },
            "self-cancels after entering",
        ),
        (
            "cancel twice above a gap",
            |m| {
                m.self_cancel(s(4)).unwrap();
                let _ = m.self_cancel(s(4));
            },
            "self-cancelled twice",
        ),
        (
            "cancel twice after advancing",
            |m| {
                m.self_cancel(s(1)).unwrap();
                let _ = m.self_cancel(s(1));
            },
            "has already left",
        ),
        (
            "cancel after leaving",
            |m| {
                m.try_enter(s(2), s(0)).unwrap();
                m.leave(s(2));
                let _ = m.self_cancel(s(2));
            },
            "self-cancels after leaving",
        ),
    ];
    for (what, misuse, expected) in cases {
        let mut monitor = apply_monitor();
        let message = panic_message(|| misuse(&mut monitor));
        assert!(message.contains(expected), "{what}: got {message:?}");
        assert!(
            message.starts_with("apply monitor"),
            "{what}: got {message:?}"
        );
    }
}

#[test]
fn bad_construction_panics() {
    let message = panic_message(|| drop(Monitor::new("local", Policy::Local, s(0), 0)));
    assert!(message.contains("at least one seqno"), "{message}");
    let message =
        panic_message(|| drop(Monitor::new("local", Policy::Local, s(0), MAX_WINDOW + 1)));
    assert!(message.contains("above MAX_WINDOW"), "{message}");
    let message = panic_message(|| drop(Monitor::new("local", Policy::Local, s(-2), 4)));
    assert!(message.contains("below UNDEFINED"), "{message}");
}

#[test]
fn check_invariants_catches_a_corrupted_monitor() {
    // The checker itself must bite: corrupt the private state the way a bug would.
    let mut monitor = commit_monitor();
    monitor.try_enter(s(1), s(0)).unwrap();
    monitor.entered_count = 2;
    assert!(panic_message(|| monitor.check_invariants()).contains("entered count is off"));

    let mut monitor = commit_monitor();
    monitor.self_cancel(s(3)).unwrap();
    monitor.last_left = s(2);
    assert!(panic_message(|| monitor.check_invariants()).contains("did not advance"));

    let mut monitor = apply_monitor();
    monitor.last_left = s(-1);
    assert!(panic_message(|| monitor.check_invariants()).contains("went below its start"));
}
