//! A thread-safe, blocking wrapper around [`Monitor`] for the provider's callers.
//!
//! MariaDB calls the provider from its own threads (appliers inside `recv`, client threads in
//! `certify` and `commit_order_enter`), and those calls must block until their seqno's turn.
//! [`BlockingMonitor`] puts one [`Monitor`] behind a `Mutex`. A thread waiting to enter
//! sleeps on a condvar of its own, and a leave wakes exactly the waiters it let in (for
//! commit order, the one next seqno): with many clients waiting for their turn, waking them
//! all at every commit cost each of them a context switch only to sleep again. The rarer
//! waits (for a seqno to leave, or for room in the window) share one condvar, signalled only
//! when someone waits on it. Every wait re-checks its own condition under the lock.
//!
//! Deadlock freedom: there is one lock, nothing is called while holding it except the pure
//! monitor, and every wait is for `last_left` to grow, which only depends on earlier seqnos.
//!
//! If a thread panics while holding the lock (a broken ordering invariant), the lock is
//! poisoned and every waiter is woken so that it panics too, instead of hanging forever.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use base::Seqno;

use crate::monitor::{Monitor, Policy};

/// A wait to enter was cut short by [`BlockingMonitor::interrupt`] (a brute-force abort).
///
/// The seqno has not entered. Its holder must either enter again later (a replay) or
/// self-cancel it: the seqno still has to pass through the monitor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
#[error("entering seqno {seqno} was interrupted")]
pub struct Interrupted {
    /// The seqno that did not enter.
    pub seqno: Seqno,
}

/// Why [`BlockingMonitor::enter_timeout`] returned without entering.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
pub enum EnterError {
    /// The wait was interrupted.
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    /// The seqno was not admitted in time. It has not entered; the caller may try again.
    #[error("seqno {seqno} was not admitted within {timeout:?}")]
    TimedOut {
        /// The seqno that did not enter.
        seqno: Seqno,
        /// The timeout that elapsed.
        timeout: Duration,
    },
}

/// A [`Monitor`] shared between threads, with blocking `enter`.
///
/// All methods take `&self`; share it with an `Arc` or a scoped borrow.
pub struct BlockingMonitor {
    /// A copy of the monitor's name, readable without the lock (and after poisoning).
    name: &'static str,
    state: Mutex<State>,
    /// Signalled (notify_all) when `last_left` grows while a thread waits in
    /// [`BlockingMonitor::wait_left`] or [`BlockingMonitor::self_cancel`].
    changed: Condvar,
}

struct State {
    monitor: Monitor,
    /// Seqnos whose next (or current) wait to enter must fail with `Interrupted`. Every member
    /// is pending in `monitor`: it is removed when the wait fails or the seqno self-cancels.
    interrupted: BTreeSet<Seqno>,
    /// The threads blocked in `enter` or `enter_timeout`, by the seqno each waits to enter
    /// (one thread per seqno: a seqno has one holder).
    entering: HashMap<Seqno, EnterWaiter>,
    /// Threads blocked in `wait_left` or `self_cancel` (on `changed`).
    others_waiting: usize,
    /// Wake-ups of threads waiting to enter that found they could not yet.
    futile_wakeups: u64,
}

/// A thread waiting to enter a seqno, on its own condvar.
struct EnterWaiter {
    depends_on: Seqno,
    wake: Arc<Condvar>,
}

impl State {
    /// True once a wait to enter `seqno` should end: it is interrupted or may enter.
    fn enter_wait_over(&self, seqno: Seqno, depends_on: Seqno) -> bool {
        self.interrupted.contains(&seqno) || self.monitor.can_enter(seqno, depends_on).is_ok()
    }

    /// The condvars of the threads whose wait to enter is over now, to signal once the lock
    /// is released.
    fn ready_to_enter(&self) -> Vec<Arc<Condvar>> {
        self.entering
            .iter()
            .filter(|(seqno, waiter)| self.enter_wait_over(**seqno, waiter.depends_on))
            .map(|(_, waiter)| Arc::clone(&waiter.wake))
            .collect()
    }
}

/// Who must be woken after `last_left` grew: taken under the lock, signalled after it.
#[must_use = "the waiters must be woken"]
struct Wakeups {
    enter: Vec<Arc<Condvar>>,
    others: bool,
}

/// Wakes every waiter if dropped during a panic, so that they see the poisoned lock.
///
/// Declared before the lock guard, it is dropped after it: the lock is already poisoned and
/// released when the waiters wake.
struct WakeOnPanic<'a>(&'a BlockingMonitor);

impl Drop for WakeOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.changed.notify_all();
            let state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
            for waiter in state.entering.values() {
                waiter.wake.notify_all();
            }
        }
    }
}

impl BlockingMonitor {
    /// Creates a monitor where every seqno up to `last_left` has already left; see
    /// [`Monitor::new`].
    pub fn new(
        name: &'static str,
        policy: Policy,
        last_left: Seqno,
        window: usize,
    ) -> BlockingMonitor {
        BlockingMonitor::from_monitor(Monitor::new(name, policy, last_left, window))
    }

    /// Wraps an existing monitor.
    pub fn from_monitor(monitor: Monitor) -> BlockingMonitor {
        BlockingMonitor {
            name: monitor.name(),
            state: Mutex::new(State {
                monitor,
                interrupted: BTreeSet::new(),
                entering: HashMap::new(),
                others_waiting: 0,
                futile_wakeups: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// The monitor's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Blocks until `seqno` may enter (see [`Monitor::can_enter`]), then enters it.
    ///
    /// Returns [`Interrupted`] instead if [`BlockingMonitor::interrupt`] was called for
    /// `seqno` before it entered. Panics on misuse, as [`Monitor::can_enter`] does.
    pub fn enter(&self, seqno: Seqno, depends_on: Seqno) -> Result<(), Interrupted> {
        match self.enter_within(seqno, depends_on, None) {
            Ok(()) => Ok(()),
            Err(EnterError::Interrupted(interrupted)) => Err(interrupted),
            Err(EnterError::TimedOut { .. }) => {
                panic!("{} monitor: a wait without timeout timed out", self.name)
            }
        }
    }

    /// Enters `seqno` whatever interrupts were aimed at it: for a caller that must pass it
    /// (an applier, or the replay of a victim whose abort already took effect). An
    /// interrupt left behind by a brute-force abort would otherwise make the enter fail,
    /// and leaving a seqno that never entered breaks the monitor.
    pub fn enter_regardless(&self, seqno: Seqno, depends_on: Seqno) {
        while self.enter(seqno, depends_on).is_err() {}
    }

    /// Like [`BlockingMonitor::enter`], but gives up after `timeout`.
    pub fn enter_timeout(
        &self,
        seqno: Seqno,
        depends_on: Seqno,
        timeout: Duration,
    ) -> Result<(), EnterError> {
        self.enter_within(seqno, depends_on, Some(timeout))
    }

    fn enter_within(
        &self,
        seqno: Seqno,
        depends_on: Seqno,
        timeout: Option<Duration>,
    ) -> Result<(), EnterError> {
        let _wake = WakeOnPanic(self);
        let mut state = self.lock();
        // The first check runs before any waiting, so misuse panics at once.
        if !state.enter_wait_over(seqno, depends_on) {
            let wake = Arc::new(Condvar::new());
            let waiter = EnterWaiter {
                depends_on,
                wake: Arc::clone(&wake),
            };
            let earlier = state.entering.insert(seqno, waiter);
            assert!(
                earlier.is_none(),
                "{} monitor: two threads wait to enter {seqno:?}",
                self.name
            );
            state = self.wait_to_enter(state, &wake, seqno, depends_on, timeout);
            state.entering.remove(&seqno);
        }
        if state.interrupted.remove(&seqno) {
            return Err(Interrupted { seqno }.into());
        }
        match state.monitor.try_enter(seqno, depends_on) {
            Ok(()) => Ok(()),
            Err(_) => {
                let timeout = timeout.unwrap_or_else(|| {
                    panic!(
                        "{} monitor: an unbounded wait for {seqno:?} ended early",
                        self.name
                    )
                });
                Err(EnterError::TimedOut { seqno, timeout })
            }
        }
    }

    /// Sleeps on `wake` until `seqno` may enter (or is interrupted), or `timeout` elapses;
    /// counts the wake-ups that found it could not enter yet.
    fn wait_to_enter<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
        wake: &Condvar,
        seqno: Seqno,
        depends_on: Seqno,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        let mut woken = false;
        let keep_waiting = |state: &mut State| {
            let wait = !state.enter_wait_over(seqno, depends_on);
            if wait && woken {
                state.futile_wakeups += 1;
            }
            woken = true;
            wait
        };
        match timeout {
            None => wake
                .wait_while(state, keep_waiting)
                .unwrap_or_else(|_| poisoned(self.name)),
            Some(timeout) => {
                wake.wait_timeout_while(state, timeout, keep_waiting)
                    .unwrap_or_else(|_| poisoned(self.name))
                    .0
            }
        }
    }

    /// Leaves `seqno`, which must have entered; see [`Monitor::leave`].
    pub fn leave(&self, seqno: Seqno) {
        let _wake = WakeOnPanic(self);
        let mut state = self.lock();
        let before = state.monitor.last_left();
        state.monitor.leave(seqno);
        let wakeups = self.wakeups_after(&state, before);
        drop(state);
        self.wake(wakeups);
    }

    /// Who must be woken now that `last_left` may have grown from `before`: the threads it
    /// lets enter, and the others' condvar if anyone waits on it.
    fn wakeups_after(&self, state: &State, before: Seqno) -> Wakeups {
        if state.monitor.last_left() == before {
            return Wakeups {
                enter: Vec::new(),
                others: false,
            };
        }
        Wakeups {
            enter: state.ready_to_enter(),
            others: state.others_waiting > 0,
        }
    }

    /// Signals what [`BlockingMonitor::wakeups_after`] found, with the lock released.
    fn wake(&self, wakeups: Wakeups) {
        for wake in wakeups.enter {
            wake.notify_one();
        }
        if wakeups.others {
            self.changed.notify_all();
        }
    }

    /// Marks `seqno` as left without entering; see [`Monitor::self_cancel`].
    ///
    /// Blocks while `seqno` is beyond the window (earlier seqnos will make room). Also drops
    /// a pending interrupt of `seqno`, which no longer has anything to interrupt.
    pub fn self_cancel(&self, seqno: Seqno) {
        let _wake = WakeOnPanic(self);
        let mut state = self.lock();
        if state.monitor.can_self_cancel(seqno).is_err() {
            state.others_waiting += 1;
            state = self
                .changed
                .wait_while(state, |state| state.monitor.can_self_cancel(seqno).is_err())
                .unwrap_or_else(|_| poisoned(self.name));
            state.others_waiting -= 1;
        }
        state.interrupted.remove(&seqno);
        let before = state.monitor.last_left();
        if let Err(not_yet) = state.monitor.self_cancel(seqno) {
            panic!(
                "{} monitor: self-cancel refused under the lock: {not_yet}",
                self.name
            );
        }
        let wakeups = self.wakeups_after(&state, before);
        drop(state);
        self.wake(wakeups);
    }

    /// Makes the current or next wait to enter `seqno` return [`Interrupted`].
    ///
    /// Used for brute-force aborts: the victim may be blocked in `enter` already, or about to
    /// call it. The interrupt is recorded rather than delivered only to a current waiter, so
    /// that it cannot be lost in that race; one failed enter consumes it. Returns false (and
    /// does nothing) if `seqno` has already entered, left or self-cancelled: it is too late
    /// to interrupt.
    pub fn interrupt(&self, seqno: Seqno) -> bool {
        let mut state = self.lock();
        if !state.monitor.is_pending(seqno) {
            return false;
        }
        state.interrupted.insert(seqno);
        let waiter = state.entering.get(&seqno).map(|w| Arc::clone(&w.wake));
        drop(state);
        if let Some(wake) = waiter {
            wake.notify_one();
        }
        true
    }

    /// Drops a recorded interrupt of `seqno` that no wait consumed: the wait it was meant
    /// for never came (a victim aborted on its way to this monitor turns back), and the
    /// next wait for `seqno` belongs to someone who must not be interrupted (its replay).
    pub fn withdraw_interrupt(&self, seqno: Seqno) {
        self.lock().interrupted.remove(&seqno);
    }

    /// Blocks until `seqno` and every seqno below it have left, or `timeout` elapses.
    ///
    /// Returns whether `seqno` has left (used for causal reads, `sync_wait`).
    pub fn wait_left(&self, seqno: Seqno, timeout: Duration) -> bool {
        let mut state = self.lock();
        if state.monitor.is_left(seqno) {
            return true;
        }
        state.others_waiting += 1;
        let (mut state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |state| !state.monitor.is_left(seqno))
            .unwrap_or_else(|_| poisoned(self.name));
        state.others_waiting -= 1;
        state.monitor.is_left(seqno)
    }

    /// The highest seqno such that it and every seqno below it have left.
    pub fn last_left(&self) -> Seqno {
        self.lock().monitor.last_left()
    }

    /// True if `seqno` and every seqno below it have left.
    pub fn is_left(&self, seqno: Seqno) -> bool {
        self.lock().monitor.is_left(seqno)
    }

    /// How many seqnos are inside the monitor now.
    pub fn entered_count(&self) -> usize {
        self.lock().monitor.entered_count()
    }

    /// How many threads are blocked in `enter`, `enter_timeout` or `self_cancel` now.
    pub fn waiting_count(&self) -> usize {
        let state = self.lock();
        state.entering.len() + state.others_waiting
    }

    /// How many times a thread waiting to enter woke and found it could not enter yet
    /// (spurious wake-ups included): each one a context switch spent for nothing.
    pub fn futile_wakeups(&self) -> u64 {
        self.lock().futile_wakeups
    }

    /// Checks the monitor's invariants and the wrapper's own; see
    /// [`Monitor::check_invariants`].
    pub fn check_invariants(&self) {
        let _wake = WakeOnPanic(self);
        let state = self.lock();
        state.monitor.check_invariants();
        for seqno in &state.interrupted {
            assert!(
                state.monitor.is_pending(*seqno),
                "{} monitor: interrupt of {seqno:?} outlived its wait",
                self.name
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|_| poisoned(self.name))
    }
}

impl fmt::Debug for BlockingMonitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never block (or panic on poison) just to print.
        let mut debug = f.debug_struct("BlockingMonitor");
        debug.field("name", &self.name);
        if let Ok(state) = self.state.try_lock() {
            debug
                .field("monitor", &state.monitor)
                .field("entering", &state.entering.len())
                .field("others_waiting", &state.others_waiting);
        }
        debug.finish_non_exhaustive()
    }
}

/// A panic inside the monitor (a broken ordering invariant) poisons it for good.
fn poisoned(name: &str) -> ! {
    panic!("{name} monitor is poisoned: a thread panicked inside it (ordering invariant broken)")
}

#[cfg(test)]
mod tests;
