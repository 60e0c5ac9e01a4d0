//! One group member as a deterministic state machine over raft-rs.
//!
//! [`GroupNode`] holds the member's whole state; its behaviour is split by role into the
//! files below, each an `impl GroupNode` block over the part of the state it concerns.
//! Nothing here does I/O or reads a clock: `transport` (or the simulator) feeds it
//! messages and ticks and carries out what it asks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use base::{Nanos, NodeState, SeededRng, Seqno};
use raft::RawNode;

use crate::admission::ChallengeKey;
use crate::config::GroupConfig;
use crate::log::OrderLog;
use crate::state::{GroupState, MemberInfo, StateRequest, Submission};
use crate::vote::VoteCode;

mod admission;
mod causal;
mod controls;
mod delivery;
mod flow;
mod membership;
mod primary;
mod raft_driver;
mod receive;
mod start;
mod state_requests;
mod status;
mod submit;
mod votes;

pub use delivery::{Delivery, Outgoing, View, ViewMember};
pub use receive::ReceiveError;
pub use status::{FlowCounters, GroupStatus};
pub use submit::CHUNK_BYTES;

use controls::ControlPacing;
use membership::{ConfOp, Leaving};
use submit::PendingSubmission;

/// One member of the group.
pub struct GroupNode {
    config: GroupConfig,
    raw: RawNode<OrderLog>,
    me: MemberInfo,
    rng: SeededRng,
    /// The group state as of the applied Raft index.
    state: GroupState,
    /// True from the view that added this member until the one that removed it.
    member: bool,
    tick: u64,
    now: Nanos,
    last_delivered: Seqno,
    deliveries: VecDeque<Delivery>,
    outbox: Vec<Outgoing>,
    /// Addresses of nodes that are not (or not yet) in `state.members`.
    known_addresses: BTreeMap<u64, String>,
    departed: VecDeque<MemberInfo>,
    seeds: Vec<String>,
    last_join_tick: Option<u64>,
    /// Leader only: the key of the challenges that prove a joiner's address.
    challenge_key: ChallengeKey,
    /// Joining only: the last challenge received, sent back with the next join request.
    join_proof: Option<u64>,
    next_submit_id: u64,
    pending: BTreeMap<u64, PendingSubmission>,
    /// Leader only: submissions waiting to be proposed.
    batch: Vec<Submission>,
    /// Leader only: membership changes to propose, one at a time.
    conf_queue: VecDeque<ConfOp>,
    /// Leader only: tick of the last message from each peer.
    last_heard: BTreeMap<u64, u64>,
    /// Members added while this node was a member that it has not received a Raft message
    /// from since. As leader it admits no new joiner while one is left (other than one
    /// being replaced): joiners that never answer could otherwise outvote the members.
    unheard: BTreeSet<u64>,
    /// Members whose flow-control stop this leader lifted for their silence, until heard.
    stops_lifted: BTreeSet<u64>,
    was_leader: bool,
    leader_contact_tick: u64,
    primary: bool,
    /// The tick this member, a member still, lost the primary component.
    non_primary_since: Option<u64>,
    /// `gmcast.isolate`: the transport drops every frame, so nothing is sent (see
    /// [`GroupNode::set_isolated`]).
    isolated: bool,
    current_view: Option<View>,
    /// What this node wants the group to know: its node state and flow-control stop.
    local_state: NodeState,
    apply_queue_len: u64,
    committed: Seqno,
    /// The oldest seqno this node's write-set cache holds, as last reported to it.
    cached_from: Seqno,
    /// This node's state request until it is ordered, and when it was last sent.
    state_request: Option<(StateRequest, Option<u64>)>,
    /// Numbers this node's state requests.
    next_state_request_id: u64,
    /// The first state request this process sent: an ordered request of this joiner below
    /// it is an earlier process's (one that came back as this member), not this one's.
    first_state_request_id: Option<u64>,
    stop_wanted: bool,
    /// Until this tick a member restarted under its saved identity waits to be brought
    /// back without campaigning (see [`GroupNode::come_back`]).
    returning_until: Option<u64>,
    /// This node's votes not yet seen in the order (see [`GroupNode::vote`]).
    votes_wanted: BTreeMap<Seqno, VoteCode>,
    pacing: ControlPacing,
    flow: FlowCounters,
    paused_since: Option<Nanos>,
    leaving: Option<Leaving>,
    closed: bool,
    /// Set when this member learns it was evicted; acted on at the end of `poll`, never in
    /// the middle of handling a Raft Ready.
    rejoin_due: bool,
    last_snapshot_index: u64,
    /// A snapshot was due (a membership change) but put off while a chunked write-set was
    /// being reassembled: taken at the first chance.
    snapshot_due: bool,
    /// Causal reads asked of Raft and not answered yet: request id -> tick of the last ask.
    causal_asked: BTreeMap<u64, u64>,
    /// Causal reads whose read index is known: answered once that index is applied.
    causal_ready: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests;
