//! Flow control: this member's apply queue and state, the group's pause clock, and stops
//! lifted for members that went silent.

use std::collections::BTreeSet;

use base::{Nanos, NodeState};

use super::{FlowCounters, GroupNode};
use crate::state::{Control, LogEntry};

/// Election timeouts of silence after which the leader lifts a member's flow-control stop
/// (at the default 100 ms election timeout: half a second, against 5 s for eviction).
const FLOW_STOP_SILENCE_ELECTIONS: u64 = 5;

/// The apply queue lengths at which this member's flow-control wish would change. A real
/// node's shell hands reports to the member without waking it, except one that crosses a
/// trigger: that one must reach the group at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTriggers {
    /// A queue longer than this makes the member ask for a stop (`None`: it already did).
    pub stop_above: Option<u64>,
    /// A queue at or below this makes the member lift its stop (`None`: it has none).
    pub resume_at_or_below: Option<u64>,
}

/// Flow control as this member sees it.
#[derive(Default)]
pub(super) struct FlowControl {
    /// Ordered-but-not-committed actions, as the server last reported them.
    pub(super) apply_queue_len: u64,
    /// Whether this member wants the group paused for its queue.
    pub(super) stop_wanted: bool,
    /// Members whose stop this leader lifted for their silence, until heard.
    pub(super) stops_lifted: BTreeSet<u64>,
    /// When the current pause of the group began.
    pub(super) paused_since: Option<Nanos>,
    /// The counters behind the `wsrep_flow_control_*` variables.
    pub(super) counters: FlowCounters,
}

impl GroupNode {
    /// Reports the node's queue of ordered-but-not-committed actions, for flow control.
    pub fn report_apply_queue(&mut self, queued: u64) {
        self.flow.apply_queue_len = queued;
    }

    /// The queue lengths that would change this member's flow-control wish now. A member
    /// that may not pause the group (a joiner, a donor, one outside the primary component)
    /// has no stop trigger: its queue, however long, changes nothing (a joiner's stays
    /// thousands long through its IST, and a trigger below it woke the loop at every
    /// write-set it applied). Nor has one while another member holds the group stopped.
    /// When it may pause again, the next poll reads its queue.
    pub fn flow_triggers(&self) -> FlowTriggers {
        let members = self.state.members.len();
        if self.flow.stop_wanted {
            FlowTriggers {
                stop_above: None,
                resume_at_or_below: Some(self.config.fc_resume_at(members)),
            }
        } else if self.may_pause_the_group() && !self.paused_by_others() {
            FlowTriggers {
                stop_above: Some(self.config.fc_stop_above(members)),
                resume_at_or_below: None,
            }
        } else {
            FlowTriggers {
                stop_above: None,
                resume_at_or_below: None,
            }
        }
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
        self.local_state = state;
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

    pub(super) fn update_pause_clock(&mut self) {
        match (self.state.is_paused(), self.flow.paused_since) {
            (true, None) => self.flow.paused_since = Some(self.now),
            (false, Some(since)) => {
                self.flow.counters.paused_ns += self.now.since(since);
                self.flow.paused_since = None;
            }
            _ => {}
        }
    }
}
