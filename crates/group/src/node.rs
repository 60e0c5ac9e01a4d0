//! One group member as a deterministic state machine over raft-rs.
//!
//! [`GroupNode`] holds the member's whole state; its behaviour is split by role into the
//! files below, each an `impl GroupNode` block. A file that owns a part of the state
//! declares it as a struct of its own (`Admission`, `Roster`, `Submissions`,
//! `StateRequesting`, `FlowControl`, `Snapshots`, `CausalReads`, `Recovering`, `Forcing`).
//! Nothing here does I/O or reads a clock: `transport` (or the simulator) feeds it
//! messages and ticks and carries out what it asks.

use std::collections::{BTreeMap, VecDeque};

use base::{Nanos, NodeState, SeededRng, Seqno};
use raft::RawNode;

use crate::config::GroupConfig;
use crate::log::OrderLog;
use crate::state::{GroupState, MemberInfo};
use crate::vote::VoteCode;

mod admission;
mod catch_up;
mod causal;
mod controls;
mod delivery;
mod flow;
mod forced;
mod membership;
mod presence;
mod primary;
mod raft_driver;
mod receive;
mod recovery;
mod start;
mod state_requests;
mod status;
mod submit;
mod votes;
mod weights;

pub use delivery::{Delivery, Outgoing, View, ViewMember};
pub use flow::{FlowTriggers, FLOW_STOP_GRACE_NS};
pub use forced::ForcedBootstrap;
pub use receive::ReceiveError;
pub use status::{FlowCounters, GroupStatus, MemberRow, PauseLengths, PAUSE_BUCKET_BOUNDS_NS};
pub use submit::CHUNK_BYTES;

use admission::Admission;
use causal::CausalReads;
use controls::ControlPacing;
use flow::FlowControl;
use forced::Forcing;
use membership::{Leaving, Roster};
use raft_driver::Snapshots;
use recovery::Recovering;
use state_requests::StateRequesting;
use submit::Submissions;

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
    /// Getting into the group, and letting others in (`admission.rs`).
    admission: Admission,
    /// The leader's view of the members and the changes it proposes (`membership.rs`).
    roster: Roster,
    /// Write-sets and controls on their way to the order (`submit.rs`).
    submissions: Submissions,
    was_leader: bool,
    leader_contact_tick: u64,
    primary: bool,
    /// The tick this member, a member still, lost the primary component.
    non_primary_since: Option<u64>,
    /// Outside the primary component: when this member last announced itself
    /// (`presence.rs`).
    presence_tick: Option<u64>,
    /// `gmcast.isolate`: the transport drops every frame, so nothing is sent (see
    /// [`GroupNode::set_isolated`]).
    isolated: bool,
    current_view: Option<View>,
    /// What this node wants the group to know: its node state and flow-control stop.
    local_state: NodeState,
    committed: Seqno,
    /// The oldest seqno this node's write-set cache holds, as last reported to it.
    cached_from: Seqno,
    /// This node's state transfer request (`state_requests.rs`).
    requesting: StateRequesting,
    /// This node's votes not yet seen in the order (see [`GroupNode::vote`]).
    votes_wanted: BTreeMap<Seqno, VoteCode>,
    pacing: ControlPacing,
    /// This member's queue and stop, and the group's pause clock (`flow.rs`).
    flow: FlowControl,
    leaving: Option<Leaving>,
    closed: bool,
    /// Set when this member learns it was evicted; acted on at the end of `poll`, never in
    /// the middle of handling a Raft Ready.
    rejoin_due: bool,
    /// When the order log was last compacted (`raft_driver.rs`).
    snapshots: Snapshots,
    /// Causal reads waiting for their read index (`causal.rs`).
    causal: CausalReads,
    /// Restoring the primary component after a full crash (`recovery.rs`).
    recovery: Recovering,
    /// Forced bootstraps: founded here, or given way to (`forced.rs`).
    forcing: Forcing,
}

#[cfg(test)]
mod tests;
