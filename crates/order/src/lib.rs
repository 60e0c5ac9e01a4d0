//! Galera's ordering monitors: who may start applying, committing or certifying next.
//!
//! Every ordered action in the cluster has a global seqno, assigned consecutively and without
//! gaps. Three monitors turn that total order into scheduling rules:
//!
//! - the **apply monitor** ([`Policy::Apply`]) lets write-set S start applying once every seqno
//!   up to `depends_on(S)` has finished applying, so independent write-sets apply in parallel;
//! - the **commit monitor** ([`Policy::Commit`]) lets S commit only after S-1 has committed,
//!   which is what MariaDB's `commit_order_enter` expects;
//! - the **local monitor** ([`Policy::Local`]) runs certification strictly in seqno order, so
//!   every node reaches the same verdict.
//!
//! A write-set that failed certification still owns its seqno. It must pass through every
//! monitor by [`Monitor::self_cancel`] (leave without entering), or the commit order waits for
//! it forever. Self-cancelling ahead of its turn is legal: the seqno is consumed when the
//! monitor's `last_left` reaches it.
//!
//! The crate has two layers:
//!
//! - [`Monitor`] is the pure window logic: no threads, no clock, no allocation after
//!   construction. It answers "may this seqno enter now?" and keeps the ordering invariants,
//!   panicking on any misuse (entering twice, leaving without entering, and so on), because a
//!   broken ordering invariant means diverging nodes.
//! - [`BlockingMonitor`] wraps one `Monitor` in a `Mutex` and a `Condvar` for the provider's
//!   callers, which are MariaDB's own threads: `enter` blocks until admitted and can be
//!   interrupted (brute-force aborts) or bounded by a timeout.
//!
//! ```
//! use base::Seqno;
//! use order::{Monitor, NotYet, Policy, DEFAULT_WINDOW};
//!
//! let mut apply = Monitor::new("apply", Policy::Apply, Seqno(0), DEFAULT_WINDOW);
//! let mut commit = Monitor::new("commit", Policy::Commit, Seqno(0), DEFAULT_WINDOW);
//!
//! // Seqnos 1 and 3 are independent and apply in parallel; 2 failed certification.
//! apply.try_enter(Seqno(1), Seqno(0)).unwrap();
//! apply.try_enter(Seqno(3), Seqno(0)).unwrap();
//! apply.self_cancel(Seqno(2)).unwrap();
//! commit.self_cancel(Seqno(2)).unwrap();
//!
//! // 3 finished applying first, but must still commit after 1.
//! apply.leave(Seqno(3));
//! assert!(matches!(commit.try_enter(Seqno(3), Seqno(2)), Err(NotYet::Order { .. })));
//! apply.leave(Seqno(1));
//! commit.try_enter(Seqno(1), Seqno(0)).unwrap();
//! commit.leave(Seqno(1));
//! commit.try_enter(Seqno(3), Seqno(2)).unwrap();
//! commit.leave(Seqno(3));
//! assert_eq!(commit.last_left(), Seqno(3));
//! ```

pub mod blocking;
mod monitor;

pub use blocking::{BlockingMonitor, EnterError, Interrupted};
pub use monitor::{Monitor, NotYet, Policy, DEFAULT_WINDOW, MAX_WINDOW};
