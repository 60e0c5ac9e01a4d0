//! What the node reports all the time: its last committed seqno, how far back its write-set
//! cache reaches, and its apply queue. They are kept here, in atomics, and the event loop
//! hands the latest values to the group member before every tick and poll. One figure goes
//! the other way: after each poll the loop leaves here how many local write-sets the member
//! has not yet sent (the send queue), for the node's status.
//!
//! Reporting them wakes nobody: the applier threads report after every write-set, and each
//! report used to wake the loop and run a poll of the whole member, two or three times per
//! write-set on every node. The member sends these figures on only every few ticks anyway;
//! flow control is the one that must act at once, so a queue that crosses one of the
//! member's [`FlowTriggers`] still wakes the loop. (A report that races with the loop
//! publishing new triggers may miss its wake-up; the loop reads it at its next tick, one
//! `tick_interval_ns` later at most.)

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use base::Seqno;
use group::{FlowTriggers, GroupNode};

/// A seqno gauge nobody has set yet.
const NOT_REPORTED: i64 = i64::MIN;

/// No queue length is above this: a wake threshold that never fires.
const NEVER_ABOVE: u64 = u64::MAX;

/// No queue length is below this: a wake threshold that never fires.
const NEVER_BELOW: u64 = 0;

/// The node's running figures, shared by its threads and the event loop.
pub(crate) struct Gauges {
    committed: AtomicI64,
    cached_from: AtomicI64,
    apply_queue: AtomicU64,
    /// Local write-sets not yet wholly sent to the leader, as of the loop's last poll
    /// (`GroupNode::write_sets_waiting_to_send`): the other way, from the member to the node.
    waiting_to_send: AtomicU64,
    /// A queue longer than this wakes the loop.
    wake_above: AtomicU64,
    /// A queue shorter than this wakes the loop.
    wake_below: AtomicU64,
}

impl Gauges {
    /// Nothing reported yet; every apply queue report wakes the loop until it has said which
    /// lengths matter.
    pub(crate) fn new() -> Gauges {
        Gauges {
            committed: AtomicI64::new(NOT_REPORTED),
            cached_from: AtomicI64::new(NOT_REPORTED),
            apply_queue: AtomicU64::new(0),
            waiting_to_send: AtomicU64::new(0),
            wake_above: AtomicU64::new(0),
            wake_below: AtomicU64::new(NEVER_BELOW),
        }
    }

    /// The node committed up to `seqno` (reports never move it back).
    pub(crate) fn set_committed(&self, seqno: Seqno) {
        self.committed.fetch_max(seqno.0, Ordering::Relaxed);
    }

    /// The node's write-set cache now starts at `seqno`.
    pub(crate) fn set_cached_from(&self, seqno: Seqno) {
        self.cached_from.store(seqno.0, Ordering::Relaxed);
    }

    /// The node's apply queue is `queued` long; true when that crosses a flow-control
    /// trigger, and the loop must be woken to act on it.
    pub(crate) fn set_apply_queue(&self, queued: u64) -> bool {
        self.apply_queue.store(queued, Ordering::Relaxed);
        queued > self.wake_above.load(Ordering::Relaxed)
            || queued < self.wake_below.load(Ordering::Relaxed)
    }

    /// Which apply queue lengths must wake the loop from now on.
    pub(crate) fn set_triggers(&self, triggers: FlowTriggers) {
        let above = triggers.stop_above.unwrap_or(NEVER_ABOVE);
        let below = triggers
            .resume_at_or_below
            .map_or(NEVER_BELOW, |at_most| at_most.saturating_add(1));
        self.wake_above.store(above, Ordering::Relaxed);
        self.wake_below.store(below, Ordering::Relaxed);
    }

    /// The member's send queue after a poll.
    pub(crate) fn set_waiting_to_send(&self, write_sets: u64) {
        self.waiting_to_send.store(write_sets, Ordering::Relaxed);
    }

    /// The member's send queue as of the loop's last poll.
    pub(crate) fn waiting_to_send(&self) -> u64 {
        self.waiting_to_send.load(Ordering::Relaxed)
    }

    /// Hands the latest figures to the group member.
    pub(crate) fn report_to(&self, node: &mut GroupNode) {
        let committed = self.committed.load(Ordering::Relaxed);
        if committed != NOT_REPORTED {
            node.report_committed(Seqno(committed));
        }
        let cached_from = self.cached_from.load(Ordering::Relaxed);
        if cached_from != NOT_REPORTED {
            node.report_cached(Seqno(cached_from));
        }
        node.report_apply_queue(self.apply_queue.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_the_loop_says_which_lengths_matter_every_queue_report_wakes_it() {
        let gauges = Gauges::new();
        assert!(gauges.set_apply_queue(1));
        assert!(!gauges.set_apply_queue(0), "an empty queue changes no wish");
    }

    #[test]
    fn only_a_queue_that_crosses_a_trigger_wakes_the_loop() {
        let gauges = Gauges::new();
        gauges.set_triggers(FlowTriggers {
            stop_above: Some(28),
            resume_at_or_below: None,
        });
        assert!(!gauges.set_apply_queue(28));
        assert!(gauges.set_apply_queue(29), "over the stop limit");
        gauges.set_triggers(FlowTriggers {
            stop_above: None,
            resume_at_or_below: Some(14),
        });
        assert!(!gauges.set_apply_queue(40), "already stopped");
        assert!(!gauges.set_apply_queue(15));
        assert!(gauges.set_apply_queue(14), "short enough to resume");
        assert!(gauges.set_apply_queue(0));
    }

    #[test]
    fn the_committed_gauge_never_moves_back() {
        let gauges = Gauges::new();
        gauges.set_committed(Seqno(9));
        gauges.set_committed(Seqno(7));
        assert_eq!(gauges.committed.load(Ordering::Relaxed), 9);
    }
}
