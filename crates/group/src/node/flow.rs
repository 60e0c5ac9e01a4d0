//! Flow control: this member's apply queue and state, the group's pause clock, and stops
//! lifted for members that went silent.

use std::collections::BTreeSet;

use base::{Nanos, NodeState};

use super::catch_up::{CatchUp, FlowLimits};
use super::{FlowCounters, GroupNode};
use crate::state::{Control, LogEntry};

/// A pause at least this long is logged, when it reaches this length and when it ends;
/// shorter ones (the routine kind, a few milliseconds each under load) are only counted,
/// in the next line logged.
const LOGGED_PAUSE_NS: u64 = 100_000_000;

/// How long a queue must stay over the stop limit before this member asks for a pause. Under
/// load most crossings are a burst of deliveries that the appliers work off within a
/// millisecond or two (measured on followers: median 1.5 ms); a stop for one of those pauses
/// the whole group for a round through the leader after the queue has already drained.
/// Measured on 3 nodes with 4 appliers: 5 ms sent 0.5-0.8 times the stops of 2 ms, at the
/// same throughput.
pub const FLOW_STOP_GRACE_NS: u64 = 5_000_000;

/// A queue that grows past the stop limit by this many limits more asks for the pause at
/// once, grace or not: the grace only forgives bursts, never a queue that keeps growing.
pub(super) const FLOW_STOP_AT_ONCE_LIMITS: u64 = 1;

const _: () = assert!(FLOW_STOP_GRACE_NS < LOGGED_PAUSE_NS);
const _: () = assert!(FLOW_STOP_AT_ONCE_LIMITS >= 1);

/// Election timeouts of silence after which the leader lifts a member's flow-control stop
/// (at the default 100 ms election timeout: half a second, against 5 s for eviction).
const FLOW_STOP_SILENCE_ELECTIONS: u64 = 5;

/// The apply queue lengths at which this member's flow-control wish would change. A real
/// node's shell hands reports to the member without waking it, except one that crosses a
/// trigger: that one must reach the group at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTriggers {
    /// A queue longer than this may make the member ask for a stop (`None`: it already did);
    /// while the queue is in its grace, the level that asks at once.
    pub stop_above: Option<u64>,
    /// A queue at or below this makes the member lift its stop (`None`: it has none).
    pub resume_at_or_below: Option<u64>,
}

/// Flow control as this member sees it.
#[derive(Default)]
pub(super) struct FlowControl {
    /// Ordered actions no applier has taken yet (Galera's recv queue), as last reported.
    pub(super) apply_queue_len: u64,
    /// Whether this member wants the group paused for its queue.
    pub(super) stop_wanted: bool,
    /// Since when the queue has been over the stop limit without a stop asked for yet (the
    /// grace, [`FLOW_STOP_GRACE_NS`]); `None` while it is not over.
    pub(super) over_limit_since: Option<Nanos>,
    /// Members whose stop this leader lifted for their silence, until heard.
    pub(super) stops_lifted: BTreeSet<u64>,
    /// When the current pause of the group began.
    pub(super) paused_since: Option<Nanos>,
    /// The counters behind the `wsrep_flow_control_*` variables.
    pub(super) counters: FlowCounters,
    /// Whether the current pause was logged (it lasted [`LOGGED_PAUSE_NS`]).
    pause_logged: bool,
    /// Pauses too short to log since the last one logged.
    short_pauses: u64,
    /// While this member is JOINED: its catch-up (`catch_up.rs`).
    pub(super) catch_up: Option<CatchUp>,
}

/// The names of `members` (Raft ids), in name order.
fn names_of(node: &GroupNode, members: &BTreeSet<u64>) -> Vec<String> {
    let mut names: Vec<String> = members.iter().map(|id| node.member_name(*id)).collect();
    names.sort();
    names
}

impl GroupNode {
    /// Reports the node's queue of ordered actions no applier has taken yet, for flow control.
    pub fn report_apply_queue(&mut self, queued: u64) {
        self.flow.apply_queue_len = queued;
    }

    /// The queue lengths that would change this member's flow-control wish now. A member
    /// that may not pause the group (a joiner, a donor, one outside the primary component)
    /// has no stop trigger: its queue, however long, changes nothing (a joiner's stays
    /// thousands long through its IST, and a trigger below it woke the loop at every
    /// write-set it applied). Nor has one while another member holds the group stopped.
    /// When it may pause again, the next poll reads its queue. A JOINED member's limits
    /// glide down as it catches up (`catch_up.rs`): the loop asks again after every poll.
    pub fn flow_triggers(&self) -> FlowTriggers {
        let limits = self.flow_limits();
        if self.flow.stop_wanted {
            FlowTriggers {
                stop_above: None,
                resume_at_or_below: Some(limits.resume_at_or_below),
            }
        } else if self.may_pause_the_group() && !self.paused_by_others() {
            // In its grace the queue is known to be over the limit: only growth past the
            // at-once level needs the loop now; the grace's end is `flow_deadline`.
            let stop_above = match self.flow.over_limit_since {
                Some(_) => limits.stop_at_once_above,
                None => limits.stop_above,
            };
            FlowTriggers {
                stop_above: Some(stop_above),
                resume_at_or_below: None,
            }
        } else {
            FlowTriggers {
                stop_above: None,
                resume_at_or_below: None,
            }
        }
    }

    /// When this member must be polled again for its flow-control wish: the end of the
    /// grace of a queue over the stop limit, if it is in one and a stop could follow it
    /// (`None` otherwise).
    pub fn flow_deadline(&self) -> Option<Nanos> {
        if self.flow.stop_wanted || !self.may_pause_the_group() || self.paused_by_others() {
            return None;
        }
        self.flow
            .over_limit_since
            .map(|since| Nanos(since.0.saturating_add(FLOW_STOP_GRACE_NS)))
    }

    /// Whether the queue asks for a stop now, given `limits`: it has stayed over the stop
    /// limit for the grace, or grown past the at-once level. Starts and ends the grace.
    pub(super) fn queue_wants_stop(&mut self, limits: &FlowLimits) -> bool {
        let queue = self.flow.apply_queue_len;
        if queue <= limits.stop_above {
            if self.flow.over_limit_since.take().is_some() {
                base::mark!("group.flow_grace_drained_without_a_stop");
            }
            return false;
        }
        let since = *self.flow.over_limit_since.get_or_insert(self.now);
        queue > limits.stop_at_once_above || self.now.since(since) >= FLOW_STOP_GRACE_NS
    }

    /// Whether this member's queue may stop the group now (as `send_controls` decides).
    pub(super) fn may_pause_the_group(&self) -> bool {
        self.member && self.primary && self.local_state.may_send_flow_control()
    }

    /// Whether another member holds the group stopped. As in Galera, a member does not
    /// order a stop of its own then: nothing new is sent to it meanwhile, and a second stop
    /// only makes the pause last until the slower of the two resumes (each stop and resume
    /// is a round through the leader). If its queue is still long once the other resumed,
    /// it stops the group then.
    pub(super) fn paused_by_others(&self) -> bool {
        self.state
            .paused_by
            .iter()
            .any(|member| *member != self.me.raft_id)
    }

    /// Announces a node state change to the group (JOINER, JOINED, SYNCED, DONOR, ...).
    pub fn set_local_state(&mut self, state: NodeState) {
        let before = std::mem::replace(&mut self.local_state, state);
        self.follow_catch_up(before, state);
    }

    /// A silent member cannot resume what it stopped: once the leader has not heard from it
    /// for [`FLOW_STOP_SILENCE_ELECTIONS`] election timeouts, long before eviction, the
    /// leader lifts its flow-control stop. A member that still wants the stop says so again
    /// when it is heard (it repeats a wish the group state does not show).
    pub(super) fn lift_silent_flow_stops(&mut self) {
        let silent: Vec<u64> = self
            .state
            .paused_by
            .iter()
            .copied()
            .filter(|id| *id != self.me.raft_id && !self.flow.stops_lifted.contains(id))
            .filter(|id| self.silent_for(*id, FLOW_STOP_SILENCE_ELECTIONS))
            .collect();
        for id in silent {
            if self.propose_entry(&LogEntry::Control(Control::FlowResume(id))) {
                base::mark!("group.flow_stop_lifted_for_silence");
                tracing::info!(
                    member = id,
                    "member silent with flow control stopped: lifting its stop"
                );
                self.flow.stops_lifted.insert(id);
            }
        }
    }

    /// The names of the members whose stop holds the group paused now, in name order
    /// (`wsrep_flow_control_paused_by`; empty when nothing holds it).
    pub(super) fn paused_by_names(&self) -> Vec<String> {
        names_of(self, &self.state.paused_by)
    }

    /// After an ordered change that may have changed who holds the group stopped (`before`):
    /// counts the stops that began, says when a logged pause ends and who held it, and runs
    /// the pause clock.
    pub(super) fn note_pause_change(&mut self, before: &BTreeSet<u64>) {
        let started: Vec<u64> = self.state.paused_by.difference(before).copied().collect();
        for id in started {
            let name = self.member_name(id);
            *self.flow.counters.pauses_by.entry(name).or_default() += 1;
        }
        if !before.is_empty() && !self.state.is_paused() {
            if std::mem::take(&mut self.flow.pause_logged) {
                let by = names_of(self, before).join(", ");
                let paused_ms = self
                    .flow
                    .paused_since
                    .map_or(0, |since| self.now.since(since) / 1_000_000);
                tracing::info!(
                    target: "wsrep",
                    "flow control: replication resumed after {paused_ms} ms paused by {by}"
                );
            } else {
                self.flow.short_pauses += 1;
            }
        }
        self.update_pause_clock();
    }

    /// Logs the current pause once it has lasted [`LOGGED_PAUSE_NS`]: who holds it, and on
    /// a member that does, its queue against the limit. Every member logs it, so any node's
    /// log answers "who paused the cluster".
    pub(super) fn log_long_pause(&mut self) {
        let long = self
            .flow
            .paused_since
            .is_some_and(|since| self.now.since(since) >= LOGGED_PAUSE_NS);
        if !long || self.flow.pause_logged {
            return;
        }
        self.flow.pause_logged = true;
        let by = self.paused_by_names().join(", ");
        let own = if self.state.paused_by.contains(&self.me.raft_id) {
            let members = self.state.members.len();
            let limit = if self.flow.catch_up.is_some() {
                "its limit while catching up as JOINED"
            } else {
                "gcs.fc_limit"
            };
            format!(
                "; this node's apply queue is {}, over {limit} ({} for {members} members)",
                self.flow.apply_queue_len,
                self.flow_limits().stop_above
            )
        } else {
            String::new()
        };
        let short = std::mem::take(&mut self.flow.short_pauses);
        tracing::info!(
            target: "wsrep",
            "flow control: replication paused for {} ms so far by {by}{own} ({short} shorter \
             pauses since the last one logged)",
            LOGGED_PAUSE_NS / 1_000_000
        );
    }

    pub(super) fn update_pause_clock(&mut self) {
        match (self.state.is_paused(), self.flow.paused_since) {
            (true, None) => self.flow.paused_since = Some(self.now),
            (false, Some(since)) => {
                let length = self.now.since(since);
                self.flow.counters.paused_ns += length;
                self.flow.counters.pause_lengths.record(length);
                self.flow.paused_since = None;
                self.flow.pause_logged = false;
            }
            _ => {}
        }
    }
}
