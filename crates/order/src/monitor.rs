//! The pure, window-based ordering monitor.
//!
//! A [`Monitor`] tracks the seqnos between `last_left` (every seqno at or below it has left)
//! and `last_left + window`. Each seqno in that range owns one slot of a ring preallocated at
//! construction, so the monitor never allocates afterwards. A slot goes
//! `Free -> Entered -> Left` (or `Free -> Left` for a self-cancelled seqno); when the slot of
//! `last_left + 1` becomes `Left`, `last_left` advances over the whole contiguous run of left
//! seqnos and their slots become `Free` again.

use std::fmt;

use base::Seqno;

/// The window Galera uses for its monitors (`1 << 16` slots).
pub const DEFAULT_WINDOW: usize = 1 << 16;

/// The largest window a monitor accepts; it bounds the slot ring's memory (16 bytes a slot).
pub const MAX_WINDOW: usize = 1 << 20;

const _: () = assert!(DEFAULT_WINDOW > 0);
const _: () = assert!(DEFAULT_WINDOW <= MAX_WINDOW);
// Window arithmetic converts the window to i64 and u64; the conversions must be lossless.
const _: () = assert!(MAX_WINDOW as u64 <= i64::MAX as u64);

/// The admission rule of a monitor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Policy {
    /// Parallel applying: a seqno may enter once every seqno up to its `depends_on` has left.
    Apply,
    /// Commit order: a seqno may enter only right after its predecessor has left.
    Commit,
    /// Local certification order: the same strict rule as [`Policy::Commit`], kept as its own
    /// name so that diagnostics say which monitor is meant.
    Local,
}

impl Policy {
    /// True for the policies that admit exactly `last_left + 1` and nothing else.
    fn is_strict(self) -> bool {
        matches!(self, Policy::Commit | Policy::Local)
    }
}

/// Why a seqno may not enter (or self-cancel) yet. Not an error: the caller waits and retries
/// after other seqnos have left.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
pub enum NotYet {
    /// The seqno is further than `window` past `last_left`; its slot is still taken.
    #[error("seqno {seqno} is beyond the window: last left {last_left}, window {window}")]
    Window {
        /// The seqno that asked.
        seqno: Seqno,
        /// The monitor's last left seqno when it asked.
        last_left: Seqno,
        /// The monitor's window.
        window: usize,
    },
    /// An apply monitor: some seqno up to `depends_on` has not finished yet.
    #[error("seqno {seqno} depends on {depends_on}, but only seqnos up to {last_left} have left")]
    Dependency {
        /// The seqno that asked.
        seqno: Seqno,
        /// The highest seqno that must have left first.
        depends_on: Seqno,
        /// The monitor's last left seqno when it asked.
        last_left: Seqno,
    },
    /// A commit or local monitor: the predecessor has not left yet.
    #[error("seqno {seqno} waits for its predecessor: only seqnos up to {last_left} have left")]
    Order {
        /// The seqno that asked.
        seqno: Seqno,
        /// The monitor's last left seqno when it asked.
        last_left: Seqno,
    },
}

/// The state of one seqno inside the window.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    /// No seqno in the window maps here, or the one that does has not entered yet.
    Free,
    /// The seqno is inside the monitor.
    Entered { seqno: Seqno, depends_on: Seqno },
    /// The seqno left (or self-cancelled) above a gap; it is consumed when the gap closes.
    Left { seqno: Seqno, cancelled: bool },
}

/// A window-based ordering monitor over seqnos; see the [crate docs](crate).
///
/// Pure and deterministic: no threads, no clock. Misuse (a seqno entering twice, leaving
/// without entering, leaving twice, acting at or below `last_left`, `depends_on >= seqno`)
/// is a bug in the caller and panics with a message naming the monitor and the seqno.
pub struct Monitor {
    name: &'static str,
    policy: Policy,
    window: usize,
    /// Every seqno at or below this has left or self-cancelled; `last_left + 1` has not.
    /// Only grows.
    last_left: Seqno,
    /// The `last_left` the monitor started from, to check that `last_left` only grows.
    initial_last_left: Seqno,
    /// The number of `Entered` slots.
    entered_count: usize,
    /// `slots[s mod window]` holds seqno `s` for `last_left < s <= last_left + window`; since
    /// that range has exactly `window` seqnos, no two of them share a slot. Every slot that no
    /// seqno of the range has reached is `Free`.
    slots: Vec<Slot>,
}

impl Monitor {
    /// Creates a monitor where every seqno up to `last_left` has already left.
    ///
    /// `window` bounds how far past `last_left` a seqno may be admitted: seqnos up to
    /// `last_left + window` can enter or self-cancel, later ones get [`NotYet::Window`].
    /// Panics if `window` is 0 or above [`MAX_WINDOW`], or `last_left` is below
    /// `Seqno::UNDEFINED`.
    pub fn new(name: &'static str, policy: Policy, last_left: Seqno, window: usize) -> Monitor {
        assert!(
            window > 0,
            "{name} monitor: the window must hold at least one seqno"
        );
        assert!(
            window <= MAX_WINDOW,
            "{name} monitor: window {window} is above MAX_WINDOW ({MAX_WINDOW})"
        );
        assert!(
            last_left >= Seqno::UNDEFINED,
            "{name} monitor: initial last_left {last_left:?} is below UNDEFINED"
        );
        Monitor {
            name,
            policy,
            window,
            last_left,
            initial_last_left: last_left,
            entered_count: 0,
            slots: vec![Slot::Free; window],
        }
    }

    /// The name given at construction, used in diagnostics.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The admission policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// How far past `last_left` a seqno may be admitted.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The highest seqno such that it and every seqno below it have left.
    pub fn last_left(&self) -> Seqno {
        self.last_left
    }

    /// How many seqnos are inside the monitor now (entered, not yet left).
    pub fn entered_count(&self) -> usize {
        self.entered_count
    }

    /// True if `seqno` and every seqno below it have left: `seqno <= last_left`.
    ///
    /// A seqno that left above a gap is not "left" in this sense until the gap closes. That is
    /// the meaning causal reads (`sync_wait`) and "last committed" need.
    pub fn is_left(&self, seqno: Seqno) -> bool {
        seqno <= self.last_left
    }

    /// True if `seqno` has entered and not left yet.
    pub fn is_entered(&self, seqno: Seqno) -> bool {
        seqno > self.last_left
            && self.in_window(seqno)
            && matches!(self.slots[self.index_of(seqno)], Slot::Entered { .. })
    }

    /// True if `seqno` has neither entered nor left (nor self-cancelled) yet.
    pub fn is_pending(&self, seqno: Seqno) -> bool {
        seqno > self.last_left
            && (!self.in_window(seqno) || self.slots[self.index_of(seqno)] == Slot::Free)
    }

    /// Whether `seqno` (which must wait for every seqno up to `depends_on`) may enter now.
    ///
    /// Does not change the monitor. Panics on misuse: `seqno` at or below `last_left`, already
    /// entered or self-cancelled, or `depends_on` not below `seqno`.
    pub fn can_enter(&self, seqno: Seqno, depends_on: Seqno) -> Result<(), NotYet> {
        self.assert_enter_arguments(seqno, depends_on);
        if !self.in_window(seqno) {
            return Err(self.beyond_window(seqno));
        }
        match self.slots[self.index_of(seqno)] {
            Slot::Free => {}
            Slot::Entered { .. } => {
                panic!("{} monitor: seqno {seqno:?} entered twice", self.name)
            }
            Slot::Left {
                cancelled: true, ..
            } => {
                panic!(
                    "{} monitor: seqno {seqno:?} enters after self-cancelling",
                    self.name
                )
            }
            Slot::Left {
                cancelled: false, ..
            } => {
                panic!(
                    "{} monitor: seqno {seqno:?} enters again after leaving",
                    self.name
                )
            }
        }
        match self.policy {
            Policy::Apply if depends_on > self.last_left => Err(NotYet::Dependency {
                seqno,
                depends_on,
                last_left: self.last_left,
            }),
            Policy::Commit | Policy::Local if seqno != self.last_left.next() => {
                Err(NotYet::Order {
                    seqno,
                    last_left: self.last_left,
                })
            }
            _ => Ok(()),
        }
    }

    /// Enters `seqno` if [`Monitor::can_enter`] allows it; otherwise changes nothing.
    pub fn try_enter(&mut self, seqno: Seqno, depends_on: Seqno) -> Result<(), NotYet> {
        self.can_enter(seqno, depends_on)?;
        let index = self.index_of(seqno);
        self.slots[index] = Slot::Entered { seqno, depends_on };
        self.entered_count += 1;
        assert!(
            self.entered_count <= self.window,
            "{} monitor: more entered than slots",
            self.name
        );
        Ok(())
    }

    /// Leaves `seqno`, which must have entered. If it was `last_left + 1`, `last_left`
    /// advances over the contiguous run of seqnos that have left.
    pub fn leave(&mut self, seqno: Seqno) {
        assert!(
            seqno > self.last_left,
            "{} monitor: seqno {seqno:?} leaves, but every seqno up to {:?} has already left \
             (left twice?)",
            self.name,
            self.last_left
        );
        assert!(
            self.in_window(seqno),
            "{} monitor: seqno {seqno:?} leaves without entering (beyond the window)",
            self.name
        );
        let index = self.index_of(seqno);
        match self.slots[index] {
            Slot::Entered { seqno: held, .. } => {
                assert_eq!(
                    held, seqno,
                    "{} monitor: slot {index} holds another seqno",
                    self.name
                );
            }
            Slot::Free => panic!(
                "{} monitor: seqno {seqno:?} leaves without entering",
                self.name
            ),
            Slot::Left {
                cancelled: true, ..
            } => {
                panic!(
                    "{} monitor: seqno {seqno:?} leaves after self-cancelling",
                    self.name
                )
            }
            Slot::Left {
                cancelled: false, ..
            } => {
                panic!("{} monitor: seqno {seqno:?} left twice", self.name)
            }
        }
        self.slots[index] = Slot::Left {
            seqno,
            cancelled: false,
        };
        assert!(
            self.entered_count > 0,
            "{} monitor: entered count underflow",
            self.name
        );
        self.entered_count -= 1;
        self.advance();
    }

    /// Whether `seqno` may self-cancel now: `Err` only with [`NotYet::Window`].
    ///
    /// Panics on misuse: `seqno` at or below `last_left`, already entered, left or
    /// self-cancelled.
    pub fn can_self_cancel(&self, seqno: Seqno) -> Result<(), NotYet> {
        assert!(
            seqno > self.last_left,
            "{} monitor: seqno {seqno:?} self-cancels, but every seqno up to {:?} has already \
             left (cancelled twice?)",
            self.name,
            self.last_left
        );
        if !self.in_window(seqno) {
            return Err(self.beyond_window(seqno));
        }
        match self.slots[self.index_of(seqno)] {
            Slot::Free => Ok(()),
            Slot::Entered { .. } => panic!(
                "{} monitor: seqno {seqno:?} self-cancels after entering (it must leave)",
                self.name
            ),
            Slot::Left {
                cancelled: true, ..
            } => {
                panic!(
                    "{} monitor: seqno {seqno:?} self-cancelled twice",
                    self.name
                )
            }
            Slot::Left {
                cancelled: false, ..
            } => {
                panic!(
                    "{} monitor: seqno {seqno:?} self-cancels after leaving",
                    self.name
                )
            }
        }
    }

    /// Marks `seqno` as left without entering: the seqno failed certification or is skipped,
    /// but its place in the order must still be consumed.
    ///
    /// Legal ahead of the seqno's turn: it is then consumed when `last_left` reaches it.
    /// Returns [`NotYet::Window`] (and changes nothing) if `seqno` is beyond the window.
    pub fn self_cancel(&mut self, seqno: Seqno) -> Result<(), NotYet> {
        self.can_self_cancel(seqno)?;
        let index = self.index_of(seqno);
        self.slots[index] = Slot::Left {
            seqno,
            cancelled: true,
        };
        self.advance();
        Ok(())
    }

    /// Checks every invariant of the monitor, panicking on the first broken one.
    ///
    /// Costs one pass over the window (`O(window)`): for tests and debug checks, not for every
    /// operation of a production monitor.
    pub fn check_invariants(&self) {
        let name = self.name;
        assert!(self.window > 0, "{name} monitor: empty window");
        assert!(
            self.window <= MAX_WINDOW,
            "{name} monitor: window above MAX_WINDOW"
        );
        assert_eq!(
            self.slots.len(),
            self.window,
            "{name} monitor: slot ring resized"
        );
        assert!(
            self.last_left >= self.initial_last_left,
            "{name} monitor: last_left {:?} went below its start {:?}",
            self.last_left,
            self.initial_last_left
        );
        let mut entered_count = 0;
        for (index, slot) in self.slots.iter().enumerate() {
            let seqno = match *slot {
                Slot::Free => continue,
                Slot::Entered { seqno, depends_on } => {
                    entered_count += 1;
                    self.check_entered(seqno, depends_on);
                    seqno
                }
                Slot::Left { seqno, .. } => {
                    assert_ne!(
                        seqno,
                        self.last_left.next(),
                        "{name} monitor: last_left did not advance over a left seqno"
                    );
                    seqno
                }
            };
            assert!(
                seqno > self.last_left,
                "{name} monitor: slot {index} holds {seqno:?}"
            );
            assert!(
                self.in_window(seqno),
                "{name} monitor: slot {index} holds {seqno:?}"
            );
            assert_eq!(
                self.index_of(seqno),
                index,
                "{name} monitor: {seqno:?} in a wrong slot"
            );
        }
        assert_eq!(
            entered_count, self.entered_count,
            "{name} monitor: entered count is off"
        );
    }

    /// The invariants of one entered seqno.
    fn check_entered(&self, seqno: Seqno, depends_on: Seqno) {
        let name = self.name;
        assert!(
            depends_on < seqno,
            "{name} monitor: {seqno:?} depends on a later seqno"
        );
        if self.policy.is_strict() {
            // Only last_left + 1 can enter, and nothing else until it leaves.
            assert_eq!(
                seqno,
                self.last_left.next(),
                "{name} monitor: {seqno:?} is inside out of order (last left {:?})",
                self.last_left
            );
        } else {
            // It entered when depends_on <= last_left, and last_left only grows.
            assert!(
                depends_on <= self.last_left,
                "{name} monitor: {seqno:?} is inside before its dependency {depends_on:?} left"
            );
        }
    }

    /// The caller's side of entering: arguments that are never legal.
    fn assert_enter_arguments(&self, seqno: Seqno, depends_on: Seqno) {
        let name = self.name;
        assert!(
            seqno > self.last_left,
            "{name} monitor: seqno {seqno:?} enters, but every seqno up to {:?} has already left",
            self.last_left
        );
        assert!(
            depends_on < seqno,
            "{name} monitor: seqno {seqno:?} depends on {depends_on:?}, which is not earlier"
        );
        assert!(
            depends_on >= Seqno::UNDEFINED,
            "{name} monitor: seqno {seqno:?} depends on {depends_on:?}, below UNDEFINED"
        );
    }

    /// Advances `last_left` over the contiguous run of left seqnos, freeing their slots.
    fn advance(&mut self) {
        let before = self.last_left;
        loop {
            let next = self.last_left.next();
            let index = self.index_of(next);
            match self.slots[index] {
                Slot::Left { seqno, .. } => {
                    assert_eq!(
                        seqno, next,
                        "{} monitor: slot {index} holds another seqno",
                        self.name
                    );
                    self.slots[index] = Slot::Free;
                    self.last_left = next;
                }
                Slot::Free | Slot::Entered { .. } => break,
            }
        }
        assert!(
            self.last_left >= before,
            "{} monitor: last_left went backwards",
            self.name
        );
        assert!(
            self.last_left.0.abs_diff(before.0) <= self.window as u64,
            "{} monitor: last_left advanced past the window",
            self.name
        );
    }

    /// True if `seqno` (above `last_left`) is at most `window` past `last_left`.
    fn in_window(&self, seqno: Seqno) -> bool {
        // abs_diff cannot overflow even for seqnos near i64::MAX; the window fits in u64.
        seqno > self.last_left && seqno.0.abs_diff(self.last_left.0) <= self.window as u64
    }

    fn beyond_window(&self, seqno: Seqno) -> NotYet {
        NotYet::Window {
            seqno,
            last_left: self.last_left,
            window: self.window,
        }
    }

    /// The slot of a seqno inside the window.
    fn index_of(&self, seqno: Seqno) -> usize {
        // The window fits in i64 (const-asserted above), and rem_euclid yields a value in
        // 0..window, which fits back in usize.
        seqno.0.rem_euclid(self.window as i64) as usize
    }
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The slot ring can be 64k entries long; a summary is what a log line needs.
        f.debug_struct("Monitor")
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("last_left", &self.last_left)
            .field("entered_count", &self.entered_count)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod simulation_tests;
#[cfg(test)]
mod tests;
