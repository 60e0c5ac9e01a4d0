//! What a member hands out and sends: deliveries in order ([`Delivery`], [`View`]) and
//! messages for its peers ([`Outgoing`]).

use base::{NodeState, Seqno, Uuid};

use crate::state::{NoDonor, StateRequest};
use crate::vote::VoteCode;

/// Bytes for the driver to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The recipient's Raft id, when it is known.
    pub to_raft_id: Option<u64>,
    /// Where the recipient listens.
    pub address: String,
    /// One encoded group message.
    pub bytes: Vec<u8>,
}

/// A member as listed in a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewMember {
    /// The member's UUID for this membership.
    pub uuid: Uuid,
    /// `wsrep_node_name`.
    pub name: String,
    /// Where its peers reach its group layer.
    pub address: String,
    /// Where clients reach its database server (empty when it did not say).
    pub incoming: String,
    /// Its last announced node state.
    pub state: NodeState,
}

/// A membership view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The cluster state UUID.
    pub cluster: Uuid,
    /// For an ordered view, the seqno it took. For a local view (non-primary, or primary
    /// again without a membership change), the last seqno this node had delivered.
    pub seqno: Seqno,
    /// wsrep's view id: how many primary views the cluster has had.
    pub view_id: u64,
    /// True if this component holds a quorum.
    pub primary: bool,
    /// True if the view is an ordered action (it took `seqno` on every member).
    pub ordered: bool,
    /// The members, by UUID: the order they started in (see `GroupState::members_by_uuid`).
    pub members: Vec<ViewMember>,
    /// This node's position in `members`, if it is one.
    pub own_index: Option<usize>,
    /// This node's membership: its Raft id, new each time it is admitted (after an
    /// eviction it rejoins under a new one, keeping its UUID), so that a user tells a
    /// readmission, whose gap comes by state transfer, from the membership it knew.
    pub membership: u64,
    /// The first view of a primary component this member founded holding the state
    /// already (a bootstrap, or a restore after a full crash): it gets no state transfer.
    pub founding: bool,
}

/// What the group hands to the node, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// An ordered write-set.
    WriteSet {
        /// Its global seqno.
        seqno: Seqno,
        /// The member that submitted it.
        origin: Uuid,
        /// The origin's submission number.
        submit_id: u64,
        /// True if this node submitted it.
        local: bool,
        /// The commit cut as of this write-set: certification may purge up to here. It is
        /// part of the ordered stream, so every node purges at the same point.
        safe_seqno: Seqno,
        /// The encoded write-set.
        payload: Vec<u8>,
    },
    /// A view change.
    View(View),
    /// The log jumped over seqnos this node never saw (it lagged past the retained log):
    /// `(last_delivered, resume_after]` must come by state transfer.
    StateGap {
        /// The last seqno delivered before the jump.
        last_delivered: Seqno,
        /// Delivery resumes after this seqno.
        resume_after: Seqno,
    },
    /// Submissions that will never be ordered (this membership ended before they were).
    Abandoned {
        /// Their submission numbers.
        submit_ids: Vec<u64>,
    },
    /// A member asked for state transfer; every member gets it at the same point of the
    /// order, so all agree on the donor (see [`GroupState::select_donor`]).
    StateRequest {
        /// The joiner's UUID.
        joiner: Uuid,
        /// The request, with the donor chosen for it (or why none could be).
        request: StateRequest,
        /// The chosen donor's Raft id.
        donor: Result<u64, NoDonor>,
        /// The chosen donor's UUID for this membership (as views list members), so that the
        /// joiner notices when its donor leaves before the transfer is done.
        donor_uuid: Option<Uuid>,
        /// True if this node is the chosen donor.
        donor_is_me: bool,
        /// The commit cut at this point of the order: every member had committed up to
        /// here (the donor purges its certification index to it before sending it).
        safe_seqno: Seqno,
    },
    /// The answer to [`GroupNode::causal_read`]: everything the group had ordered when the
    /// read was asked is at or below `seqno`, and was delivered before this.
    Causal {
        /// The caller's request id.
        id: u64,
        /// The seqno a causal read must wait for.
        seqno: Seqno,
    },
    /// Another member voted on `seqno` (a write-set that failed to apply there, or here
    /// only) and this node must say what it did: see [`GroupNode::vote`].
    VoteRequested {
        /// The seqno voted on.
        seqno: Seqno,
        /// The name of the member that opened the vote.
        by: String,
    },
    /// A vote this node took part in is decided: it holds the group's data only if its
    /// own verdict is the winner.
    VoteDecided {
        /// The seqno voted on.
        seqno: Seqno,
        /// The winning verdict.
        winner: VoteCode,
        /// This node's verdict.
        mine: VoteCode,
        /// Every vote counted: member name and verdict.
        votes: Vec<(String, VoteCode)>,
    },
    /// A forced bootstrap elsewhere superseded this node's component, and this node holds
    /// seqnos past the fork that the forced component does not have (see `forced`): its
    /// data is no longer the cluster's. `message` says so, for the log.
    HistoryDiverged {
        /// What happened and what the DBA does next.
        message: String,
    },
    /// This node's donor could not send its snapshot: it will never arrive.
    TransferFailed {
        /// The donor's name.
        donor: String,
    },
    /// The node left the group (graceful leave finished).
    Closed,
}
