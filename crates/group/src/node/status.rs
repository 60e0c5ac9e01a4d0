//! What a member reports about itself: its status for the status variables, and its place
//! in the group.

use std::collections::BTreeMap;

use base::{NodeState, Seqno, Uuid};
use raft::StateRole;

use super::GroupNode;
use crate::restart::SavedMembership;
use crate::state::{GroupState, MemberInfo};

/// Galera's flow-control counters, plus who caused the pauses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// `wsrep_flow_control_sent`: stop requests this node sent (as in Galera, which does not
    /// count the resumes).
    pub sent: u64,
    /// `wsrep_flow_control_recv`: stop requests the group ordered, this node's included
    /// (resumes not counted, as in Galera).
    pub recv: u64,
    /// `wsrep_flow_control_paused_ns`: total time ordering was paused.
    pub paused_ns: u64,
    /// Pauses started, by the name of the member that caused them.
    pub pauses_by: BTreeMap<String, u64>,
    /// How long the finished pauses lasted.
    pub pause_lengths: PauseLengths,
}

/// The upper bounds, in nanoseconds, of the pause-length buckets: from the few
/// milliseconds a busy follower's stop lasts to the seconds of a frozen node.
pub const PAUSE_BUCKET_BOUNDS_NS: [u64; 8] = [
    1_000_000,
    5_000_000,
    25_000_000,
    100_000_000,
    500_000_000,
    2_000_000_000,
    10_000_000_000,
    60_000_000_000,
];
const _: () = {
    let mut i = 1;
    while i < PAUSE_BUCKET_BOUNDS_NS.len() {
        assert!(PAUSE_BUCKET_BOUNDS_NS[i - 1] < PAUSE_BUCKET_BOUNDS_NS[i]);
        i += 1;
    }
};

/// A histogram of finished flow-control pauses (for the metrics endpoint).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PauseLengths {
    /// Pauses no longer than each bound of [`PAUSE_BUCKET_BOUNDS_NS`] (not cumulative; longer
    /// pauses are only in `count`).
    pub within: [u64; PAUSE_BUCKET_BOUNDS_NS.len()],
    /// Finished pauses.
    pub count: u64,
    /// Their total length.
    pub sum_ns: u64,
}

impl PauseLengths {
    /// Counts a pause that lasted `length_ns`.
    pub fn record(&mut self, length_ns: u64) {
        if let Some(bucket) = PAUSE_BUCKET_BOUNDS_NS
            .iter()
            .position(|bound| length_ns <= *bound)
        {
            self.within[bucket] += 1;
        }
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(length_ns);
    }
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
    /// Bytes of large write-sets' chunks sent and not yet seen ordered (a window of a few
    /// chunks: see `CHUNKS_IN_FLIGHT_BYTES`).
    pub chunk_bytes_in_flight: usize,
    /// Raft log entries held in memory.
    pub log_entries: usize,
    /// Payload bytes of those entries (bounded by `log_retain_bytes`, plus what came since
    /// the last snapshot).
    pub log_bytes: u64,
    /// What to save to come back as this member after a crash (in a component of two).
    pub saved_membership: Option<SavedMembership>,
    /// This member's ordered `pc.weight` once the quorum follows it (see
    /// `GroupNode::weight_in_force`).
    pub weight_in_force: Option<u8>,
    /// Every member of the view as the ordered state knows it, in name order (empty
    /// outside one).
    pub member_rows: Vec<MemberRow>,
}

/// One member as the group's ordered state knows it: what a status page lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    /// `wsrep_node_name`.
    pub name: String,
    /// Where clients reach it.
    pub incoming: String,
    /// The node state it last announced.
    pub state: NodeState,
    /// The last seqno it reported committed.
    pub committed: Seqno,
    /// The oldest seqno its write-set cache holds (how far back it can serve IST).
    pub cached_from: Seqno,
    /// Its flow-control stop holds the group paused now.
    pub pausing: bool,
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
            chunk_bytes_in_flight: self.submissions.chunk_bytes_in_flight(),
            stop_requested: self.flow.stop_wanted,
            log_entries: self.raw.store().len(),
            log_bytes: self.raw.store().bytes(),
            saved_membership: self.saved_membership(),
            weight_in_force: self.weight_in_force(),
            member_rows: if self.member {
                self.member_rows()
            } else {
                Vec::new()
            },
        }
    }

    fn member_rows(&self) -> Vec<MemberRow> {
        let state = &self.state;
        let mut rows: Vec<MemberRow> = state
            .members
            .iter()
            .map(|(id, record)| MemberRow {
                name: record.info.name.clone(),
                incoming: record.info.incoming.clone(),
                state: record.state,
                committed: state.committed.get(id).copied().unwrap_or(Seqno::UNDEFINED),
                cached_from: state
                    .cached_from
                    .get(id)
                    .copied()
                    .unwrap_or(Seqno::UNDEFINED),
                pausing: state.paused_by.contains(id),
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
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
