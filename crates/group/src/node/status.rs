//! What a member reports about itself: its status for the status variables, and its place
//! in the group.

use std::collections::BTreeMap;

use base::{Seqno, Uuid};
use raft::StateRole;

use super::GroupNode;
use crate::restart::SavedMembership;
use crate::state::{GroupState, MemberInfo};

/// Galera's flow-control counters, plus who caused the pauses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// `wsrep_flow_control_sent`: stop and resume requests this node sent.
    pub sent: u64,
    /// `wsrep_flow_control_recv`: stop and resume actions ordered by the group.
    pub recv: u64,
    /// `wsrep_flow_control_paused_ns`: total time ordering was paused.
    pub paused_ns: u64,
    /// Pauses started, by the name of the member that caused them.
    pub pauses_by: BTreeMap<String, u64>,
}

/// A snapshot of the member's situation, for status variables.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStatus {
    /// This member's Raft id.
    pub raft_id: u64,
    /// This member's UUID.
    pub uuid: Uuid,
    /// The cluster state UUID (nil before the first view).
    pub cluster: Uuid,
    /// True while in a primary component.
    pub primary: bool,
    /// True while this member is the Raft leader.
    pub leader: bool,
    /// The Raft term this member is in.
    pub term: u64,
    /// Members in the current view.
    pub members: usize,
    /// The sum of the members' `pc.weight` in a primary component; 0 outside one (as
    /// Galera's `wsrep_cluster_weight`).
    pub cluster_weight: u32,
    /// Last seqno handed to the node.
    pub last_delivered: Seqno,
    /// True while a flow-control stop is in force.
    pub paused: bool,
    /// The names of the members whose flow-control stop holds the group paused now, in
    /// name order; empty when none does.
    pub paused_by: Vec<String>,
    /// True while this member wants the group paused (its queue is over the limit).
    pub stop_requested: bool,
    /// Flow-control counters.
    pub flow: FlowCounters,
    /// Submissions not yet seen ordered.
    pub pending_submissions: usize,
    /// Raft log entries held in memory.
    pub log_entries: usize,
    /// What to save to come back as this member after a crash (in a component of two).
    pub saved_membership: Option<SavedMembership>,
    /// This member's ordered `pc.weight` once the quorum follows it (see
    /// `GroupNode::weight_in_force`).
    pub weight_in_force: Option<u8>,
}

impl GroupNode {
    /// Status figures.
    pub fn status(&self) -> GroupStatus {
        let mut flow = self.flow.counters.clone();
        if let Some(since) = self.flow.paused_since {
            flow.paused_ns += self.now.since(since);
        }
        GroupStatus {
            raft_id: self.me.raft_id,
            uuid: self.me.uuid,
            cluster: self.state.cluster,
            primary: self.primary,
            leader: self.is_leader(),
            term: self.raw.raft.term,
            members: if self.member {
                self.state.members.len()
            } else {
                0
            },
            cluster_weight: if self.member && self.primary {
                self.state.weights().values().map(|w| u32::from(*w)).sum()
            } else {
                0
            },
            last_delivered: self.last_delivered,
            paused: self.state.is_paused(),
            paused_by: self.paused_by_names(),
            flow,
            pending_submissions: self.submissions.pending.len(),
            stop_requested: self.flow.stop_wanted,
            log_entries: self.raw.store().len(),
            saved_membership: self.saved_membership(),
            weight_in_force: self.weight_in_force(),
        }
    }

    /// The Raft voters of this member's configuration: the members whose majority orders
    /// (see `crate::weights`).
    pub fn voters(&self) -> Vec<u64> {
        self.raw.store().conf_state().voters.clone()
    }

    /// True while this member leads the Raft group (orders the submissions).
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// This member's identity.
    pub fn me(&self) -> &MemberInfo {
        &self.me
    }

    /// True once the node left the group.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// True while the node is a member of a primary component.
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// The replicated group state as of the last applied entry.
    pub fn group_state(&self) -> &GroupState {
        &self.state
    }
}
