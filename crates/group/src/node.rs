//! One group member as a deterministic state machine over raft-rs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use base::{Nanos, NodeState, SeededRng, Seqno, Uuid};
use protobuf::Message as _;
use raft::eraftpb::MessageType;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, Snapshot,
};
use raft::{RawNode, SnapshotStatus, StateRole};
use rand::Rng;

use crate::admission::ChallengeKey;
use crate::check::{self, MemberChange, RaftRefusal};
use crate::config::GroupConfig;
use crate::log::OrderLog;
use crate::restart::{self, SavedMembership};
use crate::state::{
    Contact, Control, GroupState, LogEntry, MemberInfo, NoDonor, StateRequest, Submission,
};
use crate::vote::{VoteCode, VoteDecision, VoteEvent, VoteRefusal};
use crate::wire::{self, WireError, WireMessage};

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
    /// This node's donor could not send its snapshot: it will never arrive.
    TransferFailed {
        /// The donor's name.
        donor: String,
    },
    /// The node left the group (graceful leave finished).
    Closed,
}

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
    /// Last seqno handed to the node.
    pub last_delivered: Seqno,
    /// True while a flow-control stop is in force.
    pub paused: bool,
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
}

/// Why a received message was refused. The message is dropped; nothing else changes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReceiveError {
    /// The bytes are not a valid group message.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The sender is not a member of this node's view.
    #[error("message from Raft id {from}, which is not in the current view")]
    NotInView {
        /// The sender's Raft id.
        from: u64,
    },
    /// The message is addressed to another Raft id.
    #[error("message for Raft id {to}, but this member is {me}")]
    WrongRecipient {
        /// The addressee.
        to: u64,
        /// This member.
        me: u64,
    },
    /// Raft refused the message.
    #[error("Raft refused a message from {from}: {reason}")]
    Raft {
        /// The sender's Raft id.
        from: u64,
        /// raft-rs's error text.
        reason: String,
    },
    /// A forwarded submission that does not come from its claimed origin.
    #[error("member {from} forwarded a submission of another origin")]
    ForeignSubmission {
        /// The sender's Raft id.
        from: u64,
    },
    /// A message that claims to come from this member, or from no member (id 0).
    #[error("message claims to come from Raft id {from}, which is this member or nobody")]
    ForgedSender {
        /// The sender id claimed.
        from: u64,
    },
    /// A Raft message raft-rs must not see (it would panic on it, or it is one no member
    /// sends); see [`RaftRefusal`].
    #[error("Raft message from {from} refused: {refusal}")]
    RaftRefused {
        /// The sender's Raft id.
        from: u64,
        /// Why.
        refusal: RaftRefusal,
    },
    /// A control message (flow control, node state, a state request) in another member's
    /// name: a member speaks for itself only.
    #[error("member {from} sent a control message about another member")]
    ForeignControl {
        /// The sender's Raft id.
        from: u64,
    },
    /// A forwarded submission over `repl.max_ws_size` or with an impossible chunk position.
    #[error("member {from} forwarded submission {submit_id}, refused: {reason}")]
    BadSubmission {
        /// The sender's Raft id.
        from: u64,
        /// The submission's number.
        submit_id: u64,
        /// Why.
        reason: &'static str,
    },
    /// A join request this member does not act on (it may be asked again).
    #[error("join of Raft id {raft_id} refused: {reason}")]
    JoinRefused {
        /// The joiner's Raft id.
        raft_id: u64,
        /// Why.
        reason: &'static str,
    },
    /// A welcome this joining node does not take.
    #[error("welcome from Raft id {from} refused: {reason}")]
    BadWelcome {
        /// The sender's Raft id.
        from: u64,
        /// Why.
        reason: &'static str,
    },
    /// This node has left the group.
    #[error("this member has left the group")]
    Closed,
}

impl ReceiveError {
    /// Whether this refusal is part of normal membership churn rather than a fault: a
    /// message that crossed a view change or a leader change, a join asked again before its
    /// proof arrived, traffic after this member left, or traffic still meant for the earlier
    /// incarnation of a node restarted at the same address.
    pub fn is_routine(&self) -> bool {
        matches!(
            self,
            ReceiveError::NotInView { .. }
                | ReceiveError::JoinRefused { .. }
                | ReceiveError::Closed
                | ReceiveError::WrongRecipient { .. }
                | ReceiveError::RaftRefused {
                    refusal: RaftRefusal::FromEarlierTerm { .. },
                    ..
                }
        )
    }
}

struct PendingSubmission {
    payload: Vec<u8>,
    /// Sent even while flow control is in force (a streaming rollback).
    urgent: bool,
    /// Tick and leader of the last send, if sent.
    sent: Option<(u64, u64)>,
    /// Sends to the current leader so far.
    sends: u32,
    /// `(index, count)` of a chunk of a large write-set (see [`Submission::chunk`]).
    chunk: (u32, u32),
}

/// Write-sets larger than this travel and are ordered in chunks of this size, so that no
/// single message holds up heartbeats (a 100 MB write-set in one message costs elections)
/// and ordering interleaves with other members' work, as Galera cuts actions into
/// `gcs.max_packet_size` fragments.
pub const CHUNK_BYTES: usize = 256 << 10;

/// At most this many payload bytes go out per poll: the rest of a large write-set follows
/// on the next polls instead of queueing ahead of every other message to the leader.
const SEND_BYTES_PER_POLL: usize = 4 << 20;

/// The wait before a resend doubles with each send to the same leader, up to this many
/// times: over a live connection a resend is rarely needed at all, and while a large
/// write-set is being ordered early resends only add copies for the leader to drop.
const MAX_RESEND_DOUBLINGS: u32 = 5;

impl PendingSubmission {
    /// Whether it is due to be sent (again) to `leader` at `tick`.
    fn resend_due(&self, leader: u64, tick: u64, resend_ticks: u64) -> bool {
        let Some((sent_tick, sent_leader)) = self.sent else {
            return true;
        };
        if sent_leader != leader {
            return true;
        }
        let doublings = self.sends.saturating_sub(1).min(MAX_RESEND_DOUBLINGS);
        tick >= sent_tick + (resend_ticks << doublings)
    }
}

enum ConfOp {
    Add(MemberInfo),
    Remove(u64),
}

struct Leaving {
    last_request_tick: Option<u64>,
    removal_seen_tick: Option<u64>,
}

/// Members that left recently are remembered this long (by count) to tell them so.
const DEPARTED_REMEMBERED: usize = 16;

/// Election timeouts the leader must not have heard from a member before a new process
/// joining from that member's address replaces it (at the default 100 ms election timeout,
/// half a second). A restarted process waits that long; a forged join while the member
/// lives is refused.
const REPLACE_SILENCE_ELECTIONS: u64 = 5;

/// Joiners the leader queues at once. Joins are admitted one at a time anyway (one
/// membership change in flight), and a joiner asks again until it is in.
const JOINS_QUEUED_MAX: usize = 1;

/// The most members a welcome may list.
const WELCOME_MEMBERS_MAX: usize = 128;

/// The most addresses of non-members a node remembers (from welcomes and joins).
const KNOWN_ADDRESSES_MAX: usize = 2 * WELCOME_MEMBERS_MAX;

/// The longest name or address a member may present, in bytes.
const MEMBER_FIELD_BYTES_MAX: usize = 1024;

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

/// Election timeouts of silence after which the leader lifts a member's flow-control stop
/// (at the default 100 ms election timeout: half a second, against 5 s for eviction).
const FLOW_STOP_SILENCE_ELECTIONS: u64 = 5;

impl GroupNode {
    /// Founds a new cluster with this node as its only member (`--wsrep-new-cluster`).
    pub fn bootstrap(
        config: GroupConfig,
        contact: &Contact,
        rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        GroupNode::bootstrap_from(config, contact, None, rng, now)
    }

    /// Founds a cluster that continues the history `history` (the founder's saved
    /// position): same cluster state UUID, and the first view takes the next seqno. Without
    /// a history, a new UUID and seqno 1.
    pub fn bootstrap_from(
        config: GroupConfig,
        contact: &Contact,
        history: Option<base::Gtid>,
        mut rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = new_identity(&mut rng, contact, now);
        let (cluster, first_seqno) = match history {
            Some(gtid) if gtid.cluster != Uuid::NIL && gtid.seqno.is_defined() => {
                (gtid.cluster, gtid.seqno.next())
            }
            _ => (Uuid::random(&mut rng), Seqno(1)),
        };
        let state = GroupState::genesis(cluster, first_seqno, me.clone());
        let mut node = GroupNode::found(config, me, rng, state, now);
        node.local_state = NodeState::Synced;
        node
    }

    /// A primary component of `me` alone, continuing `state` (whose only member is `me`): a
    /// new Raft group with `me` its only voter and leader, its founding view delivered.
    fn found(
        config: GroupConfig,
        me: MemberInfo,
        rng: SeededRng,
        state: GroupState,
        now: Nanos,
    ) -> GroupNode {
        let mut snapshot = Snapshot::default();
        snapshot.set_data(state.encode().into());
        let metadata = snapshot.mut_metadata();
        metadata.index = 1;
        metadata.term = 1;
        metadata.mut_conf_state().voters = vec![me.raft_id];
        let mut node = GroupNode::new(config, me, rng, OrderLog::from_snapshot(snapshot), 1, now);
        node.state = state;
        node.member = true;
        node.last_delivered = node.state.last_seqno;
        node.last_snapshot_index = 1;
        let view = node.view(true, true, node.state.last_seqno);
        node.deliver_view(view);
        node.primary = true;
        node.raw
            .campaign()
            .expect("a single-voter group elects itself");
        node.pin_election_timeout();
        node
    }

    /// A node that joins an existing cluster through the members listening at `seeds`.
    pub fn join(
        config: GroupConfig,
        contact: &Contact,
        seeds: Vec<String>,
        mut rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = new_identity(&mut rng, contact, now);
        let mut node = GroupNode::new(config, me, rng, OrderLog::default(), 0, now);
        node.seeds = seeds;
        node
    }

    /// Comes back under a saved identity after this member's process died, a voter of a
    /// configuration of two (see `crate::restart` for why only then): it answers the
    /// survivor's election, which brings it back with the group state, and joins as a new
    /// member if nobody does so in time.
    pub fn come_back(
        config: GroupConfig,
        contact: &Contact,
        saved: &SavedMembership,
        seeds: Vec<String>,
        rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = MemberInfo {
            raft_id: saved.raft_id,
            uuid: saved.uuid,
            name: contact.name.clone(),
            address: contact.address.clone(),
            incoming: contact.incoming.clone(),
        };
        let mut log = OrderLog::default();
        let mut conf = raft::eraftpb::ConfState::default();
        conf.voters = vec![saved.raft_id, saved.peer.0];
        assert_eq!(conf.voters.len(), restart::COME_BACK_VOTERS);
        log.set_conf_state(conf);
        let wait = restart::COME_BACK_TICKS_PER_SUSPECT * config.suspect_ticks();
        let mut node = GroupNode::new(config, me, rng, log, 0, now);
        node.seeds = seeds;
        node.known_addresses
            .insert(saved.peer.0, saved.peer.1.clone());
        node.returning_until = Some(wait);
        tracing::info!(
            raft_id = saved.raft_id,
            peer = saved.peer.1,
            "restarted after a crash: waiting to be brought back into the component of two"
        );
        node
    }

    /// What this member would save to come back as itself after a crash: while it is in a
    /// primary component of two voters.
    pub fn saved_membership(&self) -> Option<SavedMembership> {
        let conf = self.raw.store().conf_state();
        let two = conf.voters.len() == restart::COME_BACK_VOTERS && conf.learners.is_empty();
        if !self.member || !self.primary || !two || !conf.voters.contains(&self.me.raft_id) {
            return None;
        }
        let peer = *conf.voters.iter().find(|id| **id != self.me.raft_id)?;
        let address = self.address_of(peer)?;
        Some(SavedMembership {
            raft_id: self.me.raft_id,
            uuid: self.me.uuid,
            peer: (peer, address),
        })
    }

    /// A returning member ticks no election (it must not found an empty group); once
    /// brought back it is an ordinary member, and if nobody brings it back in time it joins
    /// as a new one.
    fn tick_returning(&mut self) -> bool {
        let Some(until) = self.returning_until else {
            return false;
        };
        if self.member {
            self.returning_until = None;
            return false;
        }
        if self.tick >= until {
            tracing::info!("nobody brought this restarted member back: joining as a new member");
            let contact = self.me.contact();
            let mut seeds = self.seeds.clone();
            seeds.extend(self.known_addresses.values().cloned());
            seeds.sort();
            seeds.dedup();
            let mut fresh = GroupNode::join(
                self.config.clone(),
                &contact,
                seeds,
                self.rng.clone(),
                self.now,
            );
            fresh.tick = self.tick;
            fresh.deliveries = std::mem::take(&mut self.deliveries);
            fresh.outbox = std::mem::take(&mut self.outbox);
            *self = fresh;
            return false;
        }
        true
    }

    /// Numbers submissions and state requests on from what the group recorded of this
    /// member: a member brought back after a crash (`come_back`) would otherwise reuse the
    /// numbers of its earlier process, which the group takes for resends and drops. A no-op
    /// for any other member, whose counters are ahead of the record.
    fn continue_numbering(&mut self) {
        if let Some(window) = self.state.dedup.get(&self.me.uuid) {
            let last = window
                .above
                .last()
                .copied()
                .unwrap_or(0)
                .max(window.contiguous);
            self.next_submit_id = self.next_submit_id.max(last + 1);
        }
        if let Some(last) = self.state.state_requests.get(&self.me.raft_id) {
            self.next_state_request_id = self.next_state_request_id.max(*last);
        }
    }

    fn new(
        config: GroupConfig,
        me: MemberInfo,
        mut rng: SeededRng,
        log: OrderLog,
        applied: u64,
        now: Nanos,
    ) -> GroupNode {
        config
            .validate()
            .expect("group configuration was validated by the caller");
        let raw = RawNode::new(
            &raft_config(&config, me.raft_id, applied),
            log,
            &discard_logger(),
        )
        .expect("valid Raft configuration");
        let state = GroupState::unknown();
        let challenge_key = ChallengeKey([rng.gen(), rng.gen()]);
        let mut node = GroupNode {
            config,
            raw,
            me,
            rng,
            state,
            member: false,
            tick: 0,
            now,
            last_delivered: Seqno::UNDEFINED,
            deliveries: VecDeque::new(),
            outbox: Vec::new(),
            known_addresses: BTreeMap::new(),
            departed: VecDeque::new(),
            seeds: Vec::new(),
            last_join_tick: None,
            challenge_key,
            join_proof: None,
            next_submit_id: 1,
            pending: BTreeMap::new(),
            batch: Vec::new(),
            conf_queue: VecDeque::new(),
            last_heard: BTreeMap::new(),
            unheard: BTreeSet::new(),
            stops_lifted: BTreeSet::new(),
            was_leader: false,
            leader_contact_tick: 0,
            primary: false,
            non_primary_since: None,
            isolated: false,
            current_view: None,
            local_state: NodeState::Open,
            apply_queue_len: 0,
            committed: Seqno::UNDEFINED,
            cached_from: Seqno::UNDEFINED,
            state_request: None,
            next_state_request_id: 0,
            stop_wanted: false,
            returning_until: None,
            votes_wanted: BTreeMap::new(),
            pacing: ControlPacing::default(),
            flow: FlowCounters::default(),
            paused_since: None,
            leaving: None,
            closed: false,
            rejoin_due: false,
            last_snapshot_index: applied,
            snapshot_due: false,
            causal_asked: BTreeMap::new(),
            causal_ready: Vec::new(),
        };
        node.pin_election_timeout();
        node
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

    /// Advances logical time by one tick.
    pub fn tick(&mut self, now: Nanos) {
        if self.closed {
            return;
        }
        self.advance_clock(now);
        self.tick += 1;
        if !self.tick_returning() {
            self.raw.tick();
        }
        self.pin_election_timeout();
    }

    /// Handles bytes received from a peer.
    pub fn receive(&mut self, now: Nanos, bytes: &[u8]) -> Result<(), ReceiveError> {
        if self.closed {
            return Err(ReceiveError::Closed);
        }
        self.advance_clock(now);
        let (from, message) = wire::decode(bytes)?;
        if from == 0 || from == self.me.raft_id {
            return Err(ReceiveError::ForgedSender { from });
        }
        match message {
            WireMessage::Raft(raft_message) => self.receive_raft(from, raft_message),
            WireMessage::Forward(submissions) => self.receive_forward(from, submissions),
            WireMessage::Join(info) => self.receive_join(from, info, None),
            WireMessage::ProvedJoin(info, proof) => self.receive_join(from, info, Some(proof)),
            WireMessage::Challenge(proof) => {
                // Anyone can send one; a wrong one only costs this joiner another round.
                if !self.member {
                    self.join_proof = Some(proof);
                    self.last_join_tick = None;
                }
                Ok(())
            }
            WireMessage::Welcome(members) => self.receive_welcome(from, members),
            WireMessage::Leave => {
                self.require_member(from)?;
                // Queued once however often it is asked: the queue holds no duplicates.
                if self.is_leader() {
                    self.queue_removal(from);
                }
                Ok(())
            }
            WireMessage::Control(control) => self.receive_control(from, control),
            WireMessage::Removed(raft_id) => {
                let sender_is_member = self.state.members.contains_key(&from);
                if raft_id == self.me.raft_id && self.member && sender_is_member && !self.primary {
                    // A member of the primary component says we were evicted while we could
                    // not hear it: start over as a new member.
                    // Routine after a partition, a note as in Galera (whose merge is one).
                    tracing::info!(me = self.me.raft_id, "evicted from the primary component");
                    self.rejoin_due = true;
                }
                Ok(())
            }
        }
    }

    /// A member's control message, for the leader to order: only about the member itself.
    fn receive_control(&mut self, from: u64, control: Control) -> Result<(), ReceiveError> {
        self.require_member(from)?;
        let concerns_sender = match control {
            Control::FlowStop(id)
            | Control::FlowResume(id)
            | Control::State(id, _)
            | Control::Committed(id, _)
            | Control::Cached(id, _)
            | Control::Vote(id, ..)
            | Control::TransferFailed(id, _) => id == from,
            Control::StateRequest(ref request) => request.joiner == from,
        };
        if !concerns_sender {
            return Err(ReceiveError::ForeignControl { from });
        }
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(control));
        }
        Ok(())
    }

    /// Queues a write-set for ordering; returns its submission number. A member outside the
    /// primary component gives it up at once ([`Delivery::Abandoned`] follows), as it gives
    /// up what it had not sent when it left the component.
    pub fn submit(&mut self, payload: Vec<u8>) -> u64 {
        self.submit_with(payload, false)
    }

    /// Queues a write-set that flow control does not hold back, as Galera sends a streaming
    /// transaction's rollback: other nodes hold that transaction's locks until it arrives,
    /// and their appliers may be what keeps flow control in force.
    pub fn submit_urgent(&mut self, payload: Vec<u8>) -> u64 {
        self.submit_with(payload, true)
    }

    fn submit_with(&mut self, payload: Vec<u8>, urgent: bool) -> u64 {
        let count = payload.len().div_ceil(CHUNK_BYTES).max(1);
        let count = u32::try_from(count).expect("a write-set below 2^32 chunks");
        let mut chunks: Vec<Vec<u8>> = if count == 1 {
            vec![payload]
        } else {
            payload.chunks(CHUNK_BYTES).map(<[u8]>::to_vec).collect()
        };
        self.continue_numbering();
        let mut submit_id = self.next_submit_id;
        for (index, chunk) in chunks.drain(..).enumerate() {
            submit_id = self.next_submit_id;
            self.next_submit_id += 1;
            self.pending.insert(
                submit_id,
                PendingSubmission {
                    payload: chunk,
                    urgent,
                    sent: None,
                    sends: 0,
                    chunk: (index as u32, count),
                },
            );
        }
        if self.member && !self.primary {
            self.abandon_unsent();
        }
        // The write-set is known by its last chunk's id, the one its delivery carries.
        submit_id
    }

    /// `gmcast.isolate` on or off: the transport cuts this node's links, and the node sends
    /// no submission meanwhile (a frame sent into the cut is lost; one never sent can be
    /// given up for certain, or sent once the links are back).
    pub fn set_isolated(&mut self, isolated: bool) {
        self.isolated = isolated;
    }

    /// Withdraws a submission that was never sent to the leader (flow control held it
    /// back); true if withdrawn, false if it is on its way to being ordered, or unknown.
    /// A brute-force aborted transaction uses this to give up without leaving a write-set
    /// behind that would still be ordered.
    pub fn cancel(&mut self, submit_id: u64) -> bool {
        let Some(last) = self.pending.get(&submit_id) else {
            return false;
        };
        let first = submit_id - u64::from(last.chunk.0);
        let unsent =
            (first..=submit_id).all(|id| self.pending.get(&id).is_some_and(|p| p.sent.is_none()));
        if unsent {
            for id in first..=submit_id {
                self.pending.remove(&id);
            }
        }
        unsent
    }

    /// Reports the node's queue of ordered-but-not-committed actions, for flow control.
    pub fn report_apply_queue(&mut self, queued: u64) {
        self.apply_queue_len = queued;
    }

    /// Reports the node's last committed seqno (its part of the commit cut).
    pub fn report_committed(&mut self, seqno: Seqno) {
        self.committed = self.committed.max(seqno);
    }

    /// Reports the oldest seqno this node's write-set cache holds (`UNDEFINED`: none), so
    /// that donor selection can prefer a member that can serve a joiner's IST.
    pub fn report_cached(&mut self, seqno: Seqno) {
        self.cached_from = seqno;
    }

    /// Announces a node state change to the group (JOINER, JOINED, SYNCED, DONOR, ...).
    pub fn set_local_state(&mut self, state: NodeState) {
        self.local_state = state;
    }

    /// Asks the group for state transfer (ordered; the chosen donor is told). Call again
    /// to retry, for example when no donor was available.
    pub fn request_state(&mut self, mut request: StateRequest) {
        self.continue_numbering();
        request.joiner = self.me.raft_id;
        self.next_state_request_id += 1;
        request.request_id = self.next_state_request_id;
        // Sent by `send_state_request` now and again until it is ordered: a request that
        // reached no leader (none elected, or it just died) must not leave the joiner
        // waiting forever.
        self.state_request = Some((request, None));
    }

    fn send_state_request(&mut self) {
        let (tick, every) = (self.tick, self.config.resend_ticks);
        let Some((request, last_sent)) = self.state_request.as_mut() else {
            return;
        };
        if !self.member || !is_due(*last_sent, tick, every) {
            return;
        }
        *last_sent = Some(tick);
        let entry = Control::StateRequest(request.clone());
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(entry));
        } else {
            self.send_to_leader(&WireMessage::Control(entry));
        }
    }

    /// Casts this node's verdict on `seqno` in a consistency vote: [`crate::vote::SUCCESS`] if it
    /// applied (or committed) the seqno, else [`crate::vote::error_code`] of its error. Resent
    /// until ordered; the decision comes as [`Delivery::VoteDecided`].
    pub fn vote(&mut self, seqno: Seqno, code: VoteCode) {
        self.votes_wanted.entry(seqno).or_insert(code);
        self.pacing.votes = None;
    }

    /// The votes to send now: those not yet ordered, at once when new, then every
    /// `resend_ticks`. A vote whose ballot is decided, or that counts already, is done.
    fn votes_due(&mut self) -> Vec<Control> {
        let me = self.me.raft_id;
        let votes = &self.state.votes;
        self.votes_wanted.retain(|seqno, _| {
            let counted = votes
                .open
                .get(seqno)
                .is_some_and(|ballot| ballot.votes.contains_key(&me));
            !counted && !votes.decided.contains_key(seqno)
        });
        if self.votes_wanted.is_empty()
            || !is_due(self.pacing.votes, self.tick, self.config.resend_ticks)
        {
            return Vec::new();
        }
        self.pacing.votes = Some(self.tick);
        self.votes_wanted
            .iter()
            .map(|(seqno, code)| Control::Vote(me, *seqno, *code))
            .collect()
    }

    /// Counts an ordered vote, and hands this node what it leads to.
    fn apply_vote(&mut self, member: u64, seqno: Seqno, code: VoteCode) {
        let events = match self.state.cast_vote(member, seqno, code) {
            Ok(events) => events,
            Err(refusal @ VoteRefusal::Decided(_)) => {
                tracing::debug!(member, %refusal, "vote not counted");
                return;
            }
            Err(refusal) => {
                tracing::warn!(member, %refusal, "vote not counted");
                return;
            }
        };
        for event in events {
            match event {
                VoteEvent::Opened {
                    seqno, by, voters, ..
                } => {
                    let me = self.me.raft_id;
                    if self.member && by != me && voters.contains(&me) {
                        let by = self.member_name(by);
                        self.deliveries
                            .push_back(Delivery::VoteRequested { seqno, by });
                    }
                }
                VoteEvent::Decided(decision) => self.deliver_decision(decision),
            }
        }
    }

    /// Hands a decided vote to this node if it voted.
    fn deliver_decision(&mut self, decision: VoteDecision) {
        let Some(mine) = decision.votes.get(&self.me.raft_id).copied() else {
            return;
        };
        let votes = decision
            .votes
            .iter()
            .map(|(id, code)| (self.member_name(*id), *code))
            .collect();
        self.votes_wanted.remove(&decision.seqno);
        if self.member {
            self.deliveries.push_back(Delivery::VoteDecided {
                seqno: decision.seqno,
                winner: decision.winner,
                mine,
                votes,
            });
        }
    }

    /// A member's name (a member that just left too), else its Raft id.
    fn member_name(&self, raft_id: u64) -> String {
        let departed = || self.departed.iter().rev().find(|d| d.raft_id == raft_id);
        self.state
            .members
            .get(&raft_id)
            .map(|m| &m.info)
            .or_else(departed)
            .map_or_else(|| raft_id.to_string(), |info| info.name.clone())
    }

    /// Tells `joiner` (Raft id) that this donor could not send the snapshot it was chosen
    /// for. Ordered, so it reaches the joiner wherever the leader is.
    pub fn transfer_failed(&mut self, joiner: u64) {
        let control = Control::TransferFailed(self.me.raft_id, joiner);
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(control));
        } else {
            self.send_to_leader(&WireMessage::Control(control));
        }
    }

    /// Starts a graceful leave: the group shrinks its quorum by this member.
    pub fn leave(&mut self) {
        if self.leaving.is_none() {
            self.leaving = Some(Leaving {
                last_request_tick: None,
                removal_seen_tick: None,
            });
        }
    }

    /// Takes new values of the options that may change while running (timeouts, flow control
    /// and `repl.max_ws_size`); the others keep their values. The caller validated `config`.
    pub fn reconfigure(&mut self, config: &GroupConfig) {
        self.config.suspect_timeout = config.suspect_timeout;
        self.config.inactive_timeout = config.inactive_timeout;
        self.config.fc_limit = config.fc_limit;
        self.config.fc_factor = config.fc_factor;
        self.config.max_ws_size = config.max_ws_size;
        self.config.ignore_split_brain = config.ignore_split_brain;
        tracing::info!(
            suspect = ?config.suspect_timeout,
            fc_limit = config.fc_limit,
            fc_factor = config.fc_factor,
            max_ws_size = config.max_ws_size,
            ignore_split_brain = config.ignore_split_brain,
            "group options changed"
        );
    }

    /// Asks for the point a causal read must wait for (Raft's read index, so the leader
    /// confirms it still leads before answering). The answer is a [`Delivery::Causal`]
    /// with this `id`, in delivery order. Unanswered asks are repeated; an ask made while
    /// the node is not in a primary component is answered once it is again, or never, so
    /// the caller keeps its own timeout.
    pub fn causal_read(&mut self, id: u64) {
        if self.closed {
            return;
        }
        self.causal_asked.insert(id, self.tick);
        self.raw.read_index(id.to_be_bytes().to_vec());
    }

    /// Runs Raft and the group logic; returns what to send and what to deliver.
    pub fn poll(&mut self, now: Nanos) -> (Vec<Outgoing>, Vec<Delivery>) {
        if !self.closed {
            self.advance_clock(now);
            self.drive_raft();
            self.after_raft();
            self.drive_raft();
            if std::mem::take(&mut self.rejoin_due) {
                self.rejoin();
            }
        }
        (
            std::mem::take(&mut self.outbox),
            self.deliveries.drain(..).collect(),
        )
    }

    /// Status figures.
    pub fn status(&self) -> GroupStatus {
        let mut flow = self.flow.clone();
        if let Some(since) = self.paused_since {
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
            last_delivered: self.last_delivered,
            paused: self.state.is_paused(),
            flow,
            pending_submissions: self.pending.len(),
            stop_requested: self.stop_wanted,
            log_entries: self.raw.store().len(),
            saved_membership: self.saved_membership(),
        }
    }

    /// True while this member leads the Raft group (orders the submissions).
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    fn advance_clock(&mut self, now: Nanos) {
        assert!(
            now >= self.now,
            "time went backwards: {now:?} after {:?}",
            self.now
        );
        self.now = now;
    }

    fn require_member(&self, from: u64) -> Result<(), ReceiveError> {
        if self.state.members.contains_key(&from) {
            Ok(())
        } else {
            Err(ReceiveError::NotInView { from })
        }
    }

    fn receive_raft(&mut self, from: u64, message: Message) -> Result<(), ReceiveError> {
        if message.to != self.me.raft_id {
            return Err(ReceiveError::WrongRecipient {
                to: message.to,
                me: self.me.raft_id,
            });
        }
        let conf = self.raw.store().conf_state();
        let in_conf = conf.voters.contains(&from) || conf.learners.contains(&from);
        // A node that is not a member yet takes Raft traffic from anyone: that is how the
        // leader brings it in. A member only listens to the current configuration.
        if self.member && !in_conf && !self.state.members.contains_key(&from) {
            if let Some(info) = self.departed.iter().find(|info| info.raft_id == from) {
                let address = info.address.clone();
                self.send(Some(from), address, &WireMessage::Removed(from));
            }
            return Err(ReceiveError::NotInView { from });
        }
        check::check_message(&message, &self.raw.raft, self.member)
            .map_err(|refusal| ReceiveError::RaftRefused { from, refusal })?;
        // Only members are timed: a joiner takes Raft traffic from anyone, and must not keep
        // a record per sender.
        if in_conf || self.state.members.contains_key(&from) {
            self.last_heard.insert(from, self.tick);
        }
        self.unheard.remove(&from);
        self.stops_lifted.remove(&from);
        let term = message.term;
        let result = self.raw.step(message);
        if from == self.raw.raft.leader_id && term >= self.raw.raft.term {
            self.leader_contact_tick = self.tick;
        }
        self.pin_election_timeout();
        result.map_err(|e| ReceiveError::Raft {
            from,
            reason: e.to_string(),
        })
    }

    fn receive_forward(
        &mut self,
        from: u64,
        submissions: Vec<Submission>,
    ) -> Result<(), ReceiveError> {
        self.require_member(from)?;
        let origin = self.state.members[&from].info.uuid;
        if submissions.iter().any(|s| s.origin != origin) {
            return Err(ReceiveError::ForeignSubmission { from });
        }
        let mut refused = None;
        for submission in submissions {
            match self.check_submission(&submission) {
                // A follower drops it: the origin resends to whoever leads once it notices.
                Ok(()) if self.is_leader() => self.batch.push(submission),
                Ok(()) => {}
                Err(reason) => {
                    tracing::warn!(
                        from,
                        submit_id = submission.submit_id,
                        reason,
                        "submission refused"
                    );
                    refused.get_or_insert(ReceiveError::BadSubmission {
                        from,
                        submit_id: submission.submit_id,
                        reason,
                    });
                }
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// Refuses a write-set over `repl.max_ws_size` (whole, or by its chunk count) and a
    /// chunk the origin could not have cut, before it is ordered and held for reassembly.
    fn check_submission(&self, submission: &Submission) -> Result<(), &'static str> {
        let (index, count) = submission.chunk;
        let limit = self.config.max_ws_size;
        if count <= 1 {
            return match submission.payload.len() as u64 <= limit {
                true => Ok(()),
                false => Err("larger than repl.max_ws_size"),
            };
        }
        let chunks_max = limit.div_ceil(CHUNK_BYTES as u64);
        if u64::from(count) > chunks_max {
            return Err("more chunks than repl.max_ws_size allows");
        }
        if index >= count || submission.payload.len() > CHUNK_BYTES {
            return Err("a chunk its origin could not have cut");
        }
        Ok(())
    }

    fn receive_join(
        &mut self,
        from: u64,
        info: MemberInfo,
        proof: Option<u64>,
    ) -> Result<(), ReceiveError> {
        if !self.member {
            return Ok(());
        }
        let raft_id = info.raft_id;
        let refused = move |reason| ReceiveError::JoinRefused { raft_id, reason };
        check_identity(&info).map_err(refused)?;
        // A joiner asks for itself; a member relays a joiner's request to the leader.
        if info.raft_id != from && !self.state.members.contains_key(&from) {
            return Err(refused("a non-member asks for another identity"));
        }
        if let Some(record) = self.state.members.get(&info.raft_id) {
            if record.info != info {
                return Err(refused("a member's id with other details"));
            }
            // A joiner that is already a member asks again only when it has not heard back:
            // our welcome (the members' addresses) got lost, and without it the joiner can
            // answer no Raft message. Any member repeats it, to the address on record.
            let address = record.info.address.clone();
            self.send_welcome(info.raft_id, address);
            return Ok(());
        }
        if !self.is_leader() {
            self.send_to_leader(&join_request(info, proof));
            return Ok(());
        }
        self.admit(info, proof).map_err(refused)
    }

    /// Leader only: queues the addition of a joiner, and the removal of a dead member it
    /// replaces; the reason when the join is refused (for now, or for good). The last step
    /// is the proof of address (see `admission`): a join without the right one is answered
    /// with the challenge, sent to the address it names.
    fn admit(&mut self, info: MemberInfo, proof: Option<u64>) -> Result<(), &'static str> {
        if self
            .state
            .members
            .values()
            .any(|m| m.info.uuid == info.uuid)
        {
            return Err("the UUID of a member");
        }
        let queued = self.conf_queue.iter().filter_map(|op| match op {
            ConfOp::Add(queued) => Some(queued.raft_id),
            ConfOp::Remove(_) => None,
        });
        let queued: Vec<u64> = queued.collect();
        if queued.contains(&info.raft_id) {
            self.send_welcome(info.raft_id, info.address.clone());
            return Ok(());
        }
        let raft = &self.raw.raft;
        if queued.len() >= JOINS_QUEUED_MAX || raft.pending_conf_index > raft.raft_log.applied {
            return Err("another membership change is in progress");
        }
        let replaced = self.replaced_by(&info)?;
        let unheard = self
            .unheard
            .iter()
            .any(|id| *id != self.me.raft_id && !replaced.contains(id));
        if unheard {
            return Err("a member admitted earlier has not been heard from yet");
        }
        let challenge = self.challenge_key.challenge(&info);
        if proof != Some(challenge) {
            self.send_welcome(info.raft_id, info.address.clone());
            let message = WireMessage::Challenge(challenge);
            self.send(Some(info.raft_id), info.address.clone(), &message);
            return Err("the joiner has not proven its address yet");
        }
        for old in replaced {
            if self.queue_removal(old) {
                tracing::info!(
                    member = old,
                    address = %info.address,
                    "a new process joins from this silent member's address: removing the old one"
                );
            }
        }
        self.remember_address(info.raft_id, info.address.clone());
        self.send_welcome(info.raft_id, info.address.clone());
        self.conf_queue.push_back(ConfOp::Add(info));
        Ok(())
    }

    /// The members a joiner replaces: those listening at its address. A new process at a
    /// member's address means that member's process is gone (a restart, a crash loop), and
    /// keeping it would grow the configuration by a dead member at every quick restart until
    /// the living ones no longer make a quorum. But only a member the leader has not heard
    /// from for [`REPLACE_SILENCE_ELECTIONS`] is gone: a join from a live member's address is
    /// refused, or anyone could evict a member by naming its address.
    fn replaced_by(&self, info: &MemberInfo) -> Result<Vec<u64>, &'static str> {
        let earlier: Vec<u64> = self
            .state
            .members
            .values()
            .filter(|m| m.info.address == info.address && m.info.raft_id != info.raft_id)
            .map(|m| m.info.raft_id)
            .collect();
        let live = earlier
            .iter()
            .copied()
            .filter(|id| *id == self.me.raft_id || !self.silent_for(*id, REPLACE_SILENCE_ELECTIONS))
            .collect::<Vec<_>>();
        if let Some(member) = live.first() {
            // A node restarted at once (kill -9, then start) asks before its earlier
            // incarnation falls silent long enough: routine, and asked again.
            tracing::info!(
                member,
                joiner = info.raft_id,
                address = %info.address,
                "join from the address of a live member refused"
            );
            return Err("a live member listens at this address");
        }
        Ok(earlier)
    }

    /// Leader only: true if member `id` has not been heard from for `elections` election
    /// timeouts (a member without a record was just added: its clock starts now).
    fn silent_for(&self, id: u64, elections: u64) -> bool {
        let silence = elections * self.config.election_ticks as u64;
        self.last_heard
            .get(&id)
            .is_some_and(|heard| self.tick.saturating_sub(*heard) > silence)
    }

    fn send_welcome(&mut self, raft_id: u64, address: String) {
        let welcome: Vec<MemberInfo> = self
            .state
            .members
            .values()
            .map(|m| m.info.clone())
            .collect();
        self.send(Some(raft_id), address, &WireMessage::Welcome(welcome));
    }

    /// A joining node learns where the members listen. Anyone can send a welcome (the
    /// sender is not authenticated), so what it may add is bounded: a plausible list that
    /// names its sender, kept among at most [`KNOWN_ADDRESSES_MAX`] addresses; a later
    /// welcome overwrites, so the leader's next answer repairs a forged one.
    fn receive_welcome(&mut self, from: u64, members: Vec<MemberInfo>) -> Result<(), ReceiveError> {
        if self.member {
            return Ok(());
        }
        let refused = |reason| Err(ReceiveError::BadWelcome { from, reason });
        if members.is_empty() || members.len() > WELCOME_MEMBERS_MAX {
            return refused("no members, or more than a welcome may list");
        }
        if !members.iter().any(|m| m.raft_id == from) {
            return refused("its sender is not listed");
        }
        if let Some(reason) = members.iter().find_map(|m| check_identity(m).err()) {
            return refused(reason);
        }
        for info in members {
            self.remember_address(info.raft_id, info.address);
        }
        Ok(())
    }

    /// Records where a non-member listens, forgetting another entry when the map is full.
    fn remember_address(&mut self, raft_id: u64, address: String) {
        let full = self.known_addresses.len() >= KNOWN_ADDRESSES_MAX;
        if full && !self.known_addresses.contains_key(&raft_id) {
            self.known_addresses.pop_first();
        }
        self.known_addresses.insert(raft_id, address);
    }

    fn address_of(&self, raft_id: u64) -> Option<String> {
        if raft_id == 0 {
            return None;
        }
        self.state
            .members
            .get(&raft_id)
            .map(|m| m.info.address.clone())
            .or_else(|| self.known_addresses.get(&raft_id).cloned())
            .or_else(|| {
                self.departed
                    .iter()
                    .find(|i| i.raft_id == raft_id)
                    .map(|i| i.address.clone())
            })
    }

    /// Queues a message for the node at `address`.
    fn send(&mut self, to_raft_id: Option<u64>, address: String, message: &WireMessage) {
        let bytes = wire::encode(self.me.raft_id, message);
        self.outbox.push(Outgoing {
            to_raft_id,
            address,
            bytes,
        });
    }

    /// Queues a message for the current leader; dropped if there is none (or its address is
    /// unknown): every caller repeats what matters until it sees the effect.
    fn send_to_leader(&mut self, message: &WireMessage) {
        let leader = self.raw.raft.leader_id;
        if let Some(address) = self.address_of(leader) {
            self.send(Some(leader), address, message);
        }
    }

    fn send_raft(&mut self, messages: Vec<Message>) {
        for message in messages {
            let to = message.to;
            if message.get_msg_type() == MessageType::MsgSnapshot {
                // The snapshot travels whole inside the message, so it is "sent" now. If the
                // network loses it, the follower's next rejection makes the leader send it
                // again; without this report the leader would wait for it forever.
                self.raw.report_snapshot(to, SnapshotStatus::Finish);
            }
            match self.address_of(to) {
                Some(address) => self.send(Some(to), address, &WireMessage::Raft(message)),
                None => tracing::debug!(to, "no address for Raft peer; message dropped"),
            }
        }
    }

    /// Pins the election timeout to a value from the seeded generator. raft-rs draws it from
    /// an unseeded thread RNG whenever it resets the timer; overwriting it right after every
    /// call keeps a run reproducible.
    fn pin_election_timeout(&mut self) {
        if self.raw.raft.election_elapsed == 0 {
            let low = self.config.election_ticks;
            let timeout = self.rng.gen_range(low..2 * low);
            self.raw.raft.set_randomized_election_timeout(timeout);
        }
    }

    fn drive_raft(&mut self) {
        if !self.raw.has_ready() {
            return;
        }
        let mut ready = self.raw.ready();
        self.send_raft(ready.take_messages());
        for read in ready.take_read_states() {
            let Ok(id) = <[u8; 8]>::try_from(read.request_ctx.as_slice()) else {
                continue;
            };
            let id = u64::from_be_bytes(id);
            // A repeated ask can be answered twice; the first answer counts.
            if self.causal_asked.remove(&id).is_some() {
                self.causal_ready.push((id, read.index));
            }
        }
        if !ready.snapshot().is_empty() {
            self.install_snapshot(ready.snapshot().clone());
        }
        let committed = ready.take_committed_entries();
        self.apply_entries(committed);
        if !ready.entries().is_empty() {
            self.watch_for_own_removal(ready.entries());
            self.raw.mut_store().append(ready.entries());
        }
        if let Some(hard_state) = ready.hs() {
            self.raw.mut_store().set_hard_state(hard_state.clone());
        }
        self.send_raft(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit);
        }
        self.send_raft(light.take_messages());
        let committed = light.take_committed_entries();
        self.apply_entries(committed);
        self.raw.advance_apply();
        self.answer_causal_reads();
        self.pin_election_timeout();
        self.maybe_compact();
    }

    /// Delivers the causal reads whose read index is applied: the seqnos of every entry up
    /// to it are assigned by now, so the last of them is the point to wait for.
    fn answer_causal_reads(&mut self) {
        if self.causal_ready.is_empty() {
            return;
        }
        let applied = self.raw.raft.raft_log.applied;
        let seqno = self.last_delivered;
        let mut answered = Vec::new();
        self.causal_ready.retain(|&(id, index)| {
            let done = index <= applied;
            if done {
                answered.push(id);
            }
            !done
        });
        for id in answered {
            self.deliveries.push_back(Delivery::Causal { id, seqno });
        }
    }

    /// Asks again for the causal reads Raft dropped (no leader, or a new leader that has not
    /// committed in its term yet).
    fn repeat_causal_reads(&mut self) {
        let tick = self.tick;
        let every = self.config.election_ticks as u64;
        let due: Vec<u64> = self
            .causal_asked
            .iter()
            .filter(|(_, &asked)| tick >= asked + every)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.causal_asked.insert(id, tick);
            self.raw.read_index(id.to_be_bytes().to_vec());
        }
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) {
        // raft-rs has taken the snapshot: the log must follow it whatever its content.
        self.raw.mut_store().install_snapshot(snapshot.clone());
        self.last_snapshot_index = snapshot.get_metadata().index;
        let state = match GroupState::decode(snapshot.get_data()) {
            Ok(state) if !self.member || state.last_seqno >= self.last_delivered => state,
            // Checked on receipt (`check_snapshot`), so only a bug gets here; a member cannot
            // go on with a state it cannot read, nor with one behind what it delivered.
            other => {
                tracing::error!(
                    error = ?other.err(),
                    "a Raft snapshot that cannot be installed: rejoining as a new member"
                );
                self.rejoin_due = true;
                return;
            }
        };
        let was_member = self.member;
        self.state = state;
        self.unheard.clear();
        let in_view = self.state.members.contains_key(&self.me.raft_id);
        if was_member && in_view && self.state.last_seqno > self.last_delivered {
            self.deliveries.push_back(Delivery::StateGap {
                last_delivered: self.last_delivered,
                resume_after: self.state.last_seqno,
            });
            self.last_delivered = self.state.last_seqno;
        } else if !was_member && in_view {
            // The view that added us is already inside the snapshot: we start from it.
            self.member = true;
            self.last_delivered = self.state.last_seqno;
            let view = self.view(true, false, self.state.last_seqno);
            self.deliver_view(view);
        } else if was_member && !in_view {
            self.lose_membership();
        }
        self.update_pause_clock();
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            match entry.get_entry_type() {
                EntryType::EntryNormal if entry.data.is_empty() => {}
                // Entries are checked on receipt (`check`), so only a bug gets past here; every
                // member skips the same entry, so the members stay identical.
                EntryType::EntryNormal => match LogEntry::decode(&entry.data) {
                    Ok(log_entry) => self.apply_log_entry(log_entry),
                    Err(error) => {
                        tracing::error!(index = entry.index, %error, "entry skipped");
                    }
                },
                EntryType::EntryConfChangeV2 => {
                    if self.apply_conf_change(&entry) {
                        self.take_snapshot(entry.index, entry.term);
                    }
                }
                EntryType::EntryConfChange => {
                    tracing::error!(index = entry.index, "version 1 conf change skipped");
                }
            }
        }
    }

    fn apply_log_entry(&mut self, log_entry: LogEntry) {
        match log_entry {
            LogEntry::Batch(submissions) => {
                for submission in submissions {
                    let origin = submission.origin;
                    let sent_id = submission.submit_id;
                    let local = origin == self.me.uuid;
                    let ordered = self.state.accept_submission(submission);
                    if local && self.state.was_ordered(origin, sent_id) {
                        // This chunk (or whole write-set) is in the order: stop resending it.
                        self.pending.remove(&sent_id);
                    }
                    let Some(ordered) = ordered else {
                        continue;
                    };
                    if self.member {
                        self.deliver(Delivery::WriteSet {
                            seqno: ordered.seqno,
                            origin,
                            submit_id: ordered.submit_id,
                            local,
                            safe_seqno: self.state.safe_seqno,
                            payload: ordered.payload,
                        });
                    }
                }
            }
            LogEntry::Control(Control::StateRequest(request)) => {
                if request.joiner == self.me.raft_id
                    && self
                        .state_request
                        .as_ref()
                        .is_some_and(|(pending, _)| pending.request_id <= request.request_id)
                {
                    self.state_request = None;
                }
                // A request ordered after its joiner left is not recorded: the record of a
                // departed member would never be cleared.
                let Some(joiner) = self.state.members.get(&request.joiner) else {
                    return;
                };
                let joiner = joiner.info.uuid;
                if !self.state.record_state_request(&request) {
                    return;
                }
                let donor = self.state.assign_donor(&request);
                if self.member {
                    let donor_is_me = donor == Ok(self.me.raft_id);
                    let donor_uuid = donor
                        .as_ref()
                        .ok()
                        .and_then(|id| self.state.members.get(id))
                        .map(|m| m.info.uuid);
                    self.deliveries.push_back(Delivery::StateRequest {
                        joiner,
                        request,
                        donor,
                        donor_uuid,
                        donor_is_me,
                    });
                }
            }
            LogEntry::Control(Control::Vote(member, seqno, code)) => {
                self.apply_vote(member, seqno, code);
            }
            LogEntry::Control(Control::TransferFailed(donor, joiner)) => {
                if joiner == self.me.raft_id && self.member {
                    let donor = self.member_name(donor);
                    self.deliveries
                        .push_back(Delivery::TransferFailed { donor });
                }
            }
            LogEntry::Control(control) => {
                let paused_before = self.state.paused_by.clone();
                self.state.apply_control(&control);
                if matches!(control, Control::FlowStop(_) | Control::FlowResume(_)) {
                    self.flow.recv += 1;
                }
                for started in self.state.paused_by.difference(&paused_before) {
                    let name = self.state.members[started].info.name.clone();
                    *self.flow.pauses_by.entry(name).or_default() += 1;
                }
                self.update_pause_clock();
            }
        }
    }

    /// Applies an ordered membership change; false if it was skipped. A change Trireme
    /// would not propose (checked on receipt, so only a bug gets here) or one raft-rs
    /// refuses (removing the last voter) is skipped alike on every member.
    fn apply_conf_change(&mut self, entry: &Entry) -> bool {
        let applied = check::decode_conf_change(entry).and_then(|(change, member_change)| {
            let conf_state = self
                .raw
                .apply_conf_change(&change)
                .map_err(|e| e.to_string())?;
            Ok((conf_state, member_change))
        });
        let (conf_state, member_change) = match applied {
            Ok(applied) => applied,
            Err(reason) => {
                tracing::error!(index = entry.index, reason, "membership change skipped");
                return false;
            }
        };
        self.raw.mut_store().set_conf_state(conf_state);
        let mut decisions = Vec::new();
        let (added_me, removed_me) = match member_change {
            MemberChange::Add(info) => {
                let added_me = info.raft_id == self.me.raft_id;
                self.add_member(info);
                (added_me, false)
            }
            MemberChange::Remove(id) => {
                let (removed_me, decided) = self.remove_member(id);
                decisions = decided;
                (false, removed_me)
            }
        };
        let seqno = self.state.next_seqno();
        self.state.view_id += 1;
        self.update_pause_clock();
        if added_me && !self.member {
            // Our own join view: delivery starts here, everything before it comes by state
            // transfer. (Usually a joiner first gets a snapshot that already lists it.)
            self.member = true;
            self.last_delivered = seqno.prev();
        }
        if self.member && !removed_me {
            let view = self.view(self.primary || self.is_leader(), true, seqno);
            self.deliver(Delivery::View(view));
        }
        for decision in decisions {
            self.deliver_decision(decision);
        }
        if removed_me {
            self.lose_membership();
        }
        true
    }

    /// Adds a member to the group state.
    fn add_member(&mut self, info: MemberInfo) {
        self.known_addresses.remove(&info.raft_id);
        if info.raft_id != self.me.raft_id && self.member {
            self.unheard.insert(info.raft_id);
        }
        self.state.add_member(info);
    }

    /// Removes a member from the group state; true if it is this node, with the votes its
    /// departure decided.
    fn remove_member(&mut self, raft_id: u64) -> (bool, Vec<VoteDecision>) {
        if let Some(record) = self.state.members.get(&raft_id) {
            self.departed.push_back(record.info.clone());
            if self.departed.len() > DEPARTED_REMEMBERED {
                self.departed.pop_front();
            }
        }
        let decided = self.state.remove_member(raft_id);
        self.last_heard.remove(&raft_id);
        self.unheard.remove(&raft_id);
        (raft_id == self.me.raft_id, decided)
    }

    fn watch_for_own_removal(&mut self, entries: &[Entry]) {
        let Some(leaving) = self.leaving.as_mut() else {
            return;
        };
        for entry in entries {
            if entry.get_entry_type() != EntryType::EntryConfChangeV2 {
                continue;
            }
            let mut change = ConfChangeV2::default();
            if change.merge_from_bytes(&entry.data).is_err() {
                continue;
            }
            let removes_me = change.get_changes().iter().any(|c| {
                c.get_change_type() == ConfChangeType::RemoveNode && c.node_id == self.me.raft_id
            });
            if removes_me && leaving.removal_seen_tick.is_none() {
                leaving.removal_seen_tick = Some(self.tick);
            }
        }
    }

    fn deliver(&mut self, delivery: Delivery) {
        if let Delivery::WriteSet { seqno, .. }
        | Delivery::View(View {
            seqno,
            ordered: true,
            ..
        }) = &delivery
        {
            assert_eq!(
                *seqno,
                self.last_delivered.next(),
                "seqno gap or repeat in delivery on member {}",
                self.me.raft_id
            );
            self.last_delivered = *seqno;
        }
        if let Delivery::View(view) = &delivery {
            self.current_view = Some(view.clone());
        }
        self.deliveries.push_back(delivery);
    }

    fn deliver_view(&mut self, view: View) {
        self.current_view = Some(view.clone());
        self.deliveries.push_back(Delivery::View(view));
    }

    fn view(&self, primary: bool, ordered: bool, seqno: Seqno) -> View {
        // Outside the primary component a member sees only who it still hears from, as in
        // Galera: a node cut off alone reports a cluster of one. An ordered view lists the
        // whole membership: it takes the same seqno on every member, and must be the same
        // action there, even on a member that applies it just before it notices that it is
        // back in contact.
        let members: Vec<ViewMember> = self
            .state
            .members_by_uuid()
            .into_iter()
            .filter(|m| primary || ordered || self.still_heard(m.info.raft_id))
            .map(|m| ViewMember {
                uuid: m.info.uuid,
                name: m.info.name.clone(),
                address: m.info.address.clone(),
                incoming: m.info.incoming.clone(),
                state: m.state,
            })
            .collect();
        let own_index = members.iter().position(|m| m.uuid == self.me.uuid);
        View {
            cluster: self.state.cluster,
            seqno,
            view_id: self.state.view_id,
            primary,
            ordered,
            members,
            own_index,
            membership: self.me.raft_id,
        }
    }

    fn lose_membership(&mut self) {
        let evicted = self.leaving.is_none() && !self.closed;
        self.member = false;
        self.primary = false;
        let view = View {
            cluster: self.state.cluster,
            seqno: self.last_delivered,
            view_id: self.state.view_id,
            primary: false,
            ordered: false,
            members: Vec::new(),
            own_index: None,
            membership: self.me.raft_id,
        };
        self.deliver_view(view);
        if self.leaving.is_some() {
            self.close();
        } else if evicted {
            // Removed without asking: the others stopped hearing us. Start over as a new
            // member once this Ready is handled; our data comes back by state transfer.
            tracing::info!(me = self.me.raft_id, "removed from the view: rejoining");
            self.rejoin_due = true;
        }
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.abandon_pending();
        self.closed = true;
        self.primary = false;
        self.deliveries.push_back(Delivery::Closed);
    }

    fn abandon_pending(&mut self) {
        let mut submit_ids: Vec<u64> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(id, p)| id + u64::from(p.chunk.1.saturating_sub(1) - p.chunk.0))
            .collect();
        submit_ids.dedup();
        if !submit_ids.is_empty() {
            self.deliveries
                .push_back(Delivery::Abandoned { submit_ids });
        }
    }

    /// Gives up the submissions no part of which left this node ([`Delivery::Abandoned`]):
    /// nobody else has them, so they are never ordered.
    fn abandon_unsent(&mut self) {
        let mut unsent: BTreeMap<u64, bool> = BTreeMap::new();
        for (id, pending) in &self.pending {
            let last = id + u64::from(pending.chunk.1.saturating_sub(1) - pending.chunk.0);
            *unsent.entry(last).or_insert(true) &= pending.sent.is_none();
        }
        let submit_ids: Vec<u64> = unsent
            .into_iter()
            .filter_map(|(last, unsent)| unsent.then_some(last))
            .collect();
        if submit_ids.is_empty() {
            return;
        }
        self.pending.retain(|id, pending| {
            let last = id + u64::from(pending.chunk.1.saturating_sub(1) - pending.chunk.0);
            !submit_ids.contains(&last)
        });
        self.deliveries
            .push_back(Delivery::Abandoned { submit_ids });
    }

    /// Starts over as a new member (a new Raft id, the same UUID) after an eviction.
    fn rejoin(&mut self) {
        if self.member {
            self.member = false;
            self.primary = false;
            let view = self.view(false, false, self.last_delivered);
            self.deliver_view(View {
                members: Vec::new(),
                own_index: None,
                ..view
            });
        }
        self.abandon_pending();
        let contact = self.me.contact();
        let mut seeds: Vec<String> = self
            .state
            .members
            .values()
            .map(|m| m.info.address.clone())
            .collect();
        seeds.extend(self.seeds.iter().cloned());
        seeds.sort();
        seeds.dedup();
        let rng = self.rng.clone();
        let mut fresh = GroupNode::join(self.config.clone(), &contact, seeds, rng, self.now);
        // A new Raft id, but the same member UUID: the server knows this node by it for as
        // long as it stays connected (wsrep-lib finds itself in a view by it), as a Galera
        // node keeps its UUID across a partition. The old membership is gone from the state
        // before the new one is admitted, so the UUID is never held twice.
        fresh.me.uuid = self.me.uuid;
        fresh.tick = self.tick;
        fresh.flow = std::mem::take(&mut self.flow);
        fresh.deliveries = std::mem::take(&mut self.deliveries);
        fresh.outbox = std::mem::take(&mut self.outbox);
        fresh.last_delivered = self.last_delivered;
        fresh.cached_from = self.cached_from;
        *self = fresh;
    }

    /// Everything that runs after Raft's output was handled.
    fn after_raft(&mut self) {
        self.track_leadership();
        self.update_primary();
        self.maybe_continue_alone();
        self.request_join();
        self.progress_leave();
        self.send_controls();
        self.send_state_request();
        self.send_submissions();
        self.repeat_causal_reads();
        if self.is_leader() {
            self.evict_silent_members();
            self.propose_conf_change();
            self.propose_batch();
        }
    }

    fn track_leadership(&mut self) {
        let leader = self.is_leader();
        if leader && !self.was_leader {
            // A new leader gives every member a full suspect timeout before judging it.
            let tick = self.tick;
            for id in self.state.members.keys() {
                self.last_heard.insert(*id, tick);
            }
        }
        if !leader && self.was_leader {
            self.batch.clear();
            self.conf_queue.clear();
        }
        self.was_leader = leader;
    }

    /// How long a member may go unheard and still count as in contact: a short hiccup must
    /// not flap the server between ready and not ready; a real partition outlasts it.
    fn contact_window(&self) -> u64 {
        (2 * self.config.election_ticks as u64).max(self.config.suspect_ticks() / 2)
    }

    /// Whether member `raft_id` is this node or was heard from within the contact window.
    /// Outside a partition followers hear only the leader, but a partitioned minority
    /// campaigns, and so hears its own side.
    fn still_heard(&self, raft_id: u64) -> bool {
        raft_id == self.me.raft_id
            || self
                .last_heard
                .get(&raft_id)
                .is_some_and(|heard| self.tick.saturating_sub(*heard) <= self.contact_window())
    }

    fn update_primary(&mut self) {
        // A follower stays primary for a while without leader contact, even across a
        // pre-vote round (which clears raft-rs's leader id).
        let window = self.contact_window();
        // A leader is in contact with itself: a leader that steps down (check-quorum under
        // load) gets the same window as any follower, counted from then, instead of going
        // non-primary at once for lack of a message from a leader it never needed.
        if self.is_leader() {
            self.leader_contact_tick = self.tick;
        }
        let contact =
            self.is_leader() || self.tick.saturating_sub(self.leader_contact_tick) <= window;
        let in_contact = self.member && contact;
        if in_contact || !self.member {
            self.non_primary_since = None;
        } else if self.non_primary_since.is_none() {
            self.non_primary_since = Some(self.tick);
        }
        // `pc.ignore_sb`: as in Galera, a primary component that lost its peers stays
        // primary until its view of this node alone forms (`maybe_continue_alone`), so
        // that writes in flight wait for it rather than fail on a non-primary view.
        let holding = self.config.ignore_split_brain
            && self.primary
            && self.member
            && self.leaving.is_none()
            && !self.closed
            && !self.rejoin_due;
        let primary = in_contact || holding;
        if primary == self.primary {
            if !primary && self.member {
                self.refresh_non_primary_view();
            }
            return;
        }
        self.primary = primary;
        if !primary {
            // Galera fails what waits for its order at a non-primary view. Here only what
            // never left this node is certain never to be ordered: that is given up now.
            // What was sent may still be ordered (the leader may have it), and is waited
            // for: it arrives in order, or the node falls behind and is readmitted.
            self.abandon_unsent();
        }
        let view = self.view(primary, false, self.last_delivered);
        self.deliver_view(view);
    }

    /// `pc.ignore_sb`: a member outside any primary component for a suspect timeout goes
    /// on alone (see [`GroupNode::continue_alone`]).
    fn maybe_continue_alone(&mut self) {
        let Some(since) = self.non_primary_since else {
            return;
        };
        let waited = self.tick.saturating_sub(since) >= self.config.suspect_ticks();
        if self.config.ignore_split_brain
            && waited
            && self.member
            && self.leaving.is_none()
            && !self.closed
            && !self.rejoin_due
        {
            self.continue_alone();
        }
    }

    /// Becomes a primary component of this member alone: a new Raft group, this member its
    /// only voter, that continues the same history from the last seqno delivered here. The
    /// members left behind are told they were removed when next they speak, and rejoin as
    /// new members by state transfer. With the other side doing the same, the cluster is
    /// split in two: what `pc.ignore_sb` accepts.
    fn continue_alone(&mut self) {
        // Galera's words (target `wsrep`: logged without the module path), which operators
        // and MariaDB's tests look for.
        tracing::warn!(
            target: "wsrep",
            "Ignoring possible split-brain (allowed by configuration) from view: {} (seqno {}); \
             going on as a primary component of this node alone (pc.ignore_sb)",
            self.state.view_id,
            self.last_delivered
        );
        let mut state = GroupState::genesis(
            self.state.cluster,
            self.last_delivered.next(),
            self.me.clone(),
        );
        state.view_id = self.state.view_id + 1;
        // What this member submitted and saw ordered must not be ordered again.
        if let Some(window) = self.state.dedup.get(&self.me.uuid) {
            state.dedup.insert(self.me.uuid, window.clone());
        }
        let mut alone = GroupNode::found(
            self.config.clone(),
            self.me.clone(),
            self.rng.clone(),
            state,
            self.now,
        );
        alone.departed = std::mem::take(&mut self.departed);
        for (id, record) in &self.state.members {
            if *id != self.me.raft_id {
                alone.departed.push_back(record.info.clone());
            }
        }
        while alone.departed.len() > DEPARTED_REMEMBERED {
            alone.departed.pop_front();
        }
        alone.tick = self.tick;
        alone.seeds = std::mem::take(&mut self.seeds);
        alone.known_addresses = std::mem::take(&mut self.known_addresses);
        alone.flow = std::mem::take(&mut self.flow);
        // What was delivered before goes first, then the new component's view.
        let founding = std::mem::take(&mut alone.deliveries);
        alone.deliveries = std::mem::take(&mut self.deliveries);
        alone.deliveries.extend(founding);
        alone.outbox = std::mem::take(&mut self.outbox);
        alone.isolated = self.isolated;
        alone.cached_from = self.cached_from;
        alone.committed = self.committed;
        alone.local_state = self.local_state;
        alone.apply_queue_len = self.apply_queue_len;
        alone.next_submit_id = self.next_submit_id;
        alone.next_state_request_id = self.next_state_request_id;
        // Unordered submissions go to the new leader, this member.
        alone.pending = std::mem::take(&mut self.pending);
        for pending in alone.pending.values_mut() {
            pending.sent = None;
        }
        // Causal reads asked meanwhile are answered by the new component, asked again at
        // once (a reader waits for the component, as in Galera, not for its timeout).
        let due = self.tick.saturating_sub(self.config.election_ticks as u64);
        alone.causal_asked = std::mem::take(&mut self.causal_asked)
            .into_keys()
            .map(|id| (id, due))
            .collect();
        *self = alone;
    }

    /// Outside the primary component, a new view whenever the set of members this node
    /// hears from changes.
    fn refresh_non_primary_view(&mut self) {
        let view = self.view(false, false, self.last_delivered);
        let same = self
            .current_view
            .as_ref()
            .is_some_and(|current| !current.primary && current.members == view.members);
        if !same {
            self.deliver_view(view);
        }
    }

    fn request_join(&mut self) {
        // An evicted member starts over with a new identity at the end of this poll: a join
        // in the old one's name would bring a member back that nobody will answer for.
        if self.member || self.closed || self.rejoin_due || self.returning_until.is_some() {
            return;
        }
        if !is_due(self.last_join_tick, self.tick, self.config.join_retry_ticks) {
            return;
        }
        self.last_join_tick = Some(self.tick);
        let request = join_request(self.me.clone(), self.join_proof);
        let bytes = wire::encode(self.me.raft_id, &request);
        for seed in &self.seeds {
            if *seed != self.me.address {
                self.outbox.push(Outgoing {
                    to_raft_id: None,
                    address: seed.clone(),
                    bytes: bytes.clone(),
                });
            }
        }
    }

    fn progress_leave(&mut self) {
        let Some(leaving) = self.leaving.as_ref() else {
            return;
        };
        if let Some(seen) = leaving.removal_seen_tick {
            if self.tick >= seen + self.config.leave_grace_ticks {
                self.close();
            }
            return;
        }
        let others: Vec<u64> = self
            .raw
            .store()
            .conf_state()
            .voters
            .iter()
            .copied()
            .filter(|id| *id != self.me.raft_id)
            .collect();
        if !self.member || others.is_empty() {
            self.close();
            return;
        }
        if !is_due(
            leaving.last_request_tick,
            self.tick,
            self.config.resend_ticks,
        ) {
            return;
        }
        if let Some(leaving) = self.leaving.as_mut() {
            leaving.last_request_tick = Some(self.tick);
        }
        if self.is_leader() {
            // Hand leadership over first: a leader that removes itself and stops may leave
            // the others unsure whether the removal was ordered.
            let progress = self.raw.raft.prs();
            let best = others
                .iter()
                .copied()
                .max_by_key(|id| progress.get(*id).map_or(0, |p| p.matched))
                .expect("others is not empty");
            self.raw.transfer_leader(best);
        } else {
            self.send_to_leader(&WireMessage::Leave);
        }
    }

    fn send_controls(&mut self) {
        if !self.member || !self.primary {
            return;
        }
        let may_pause = self.local_state.may_send_flow_control();
        let members = self.state.members.len();
        if may_pause
            && !self.stop_wanted
            && self.apply_queue_len > self.config.fc_stop_above(members)
        {
            self.stop_wanted = true;
            self.flow.sent += 1;
        } else if self.stop_wanted
            && (!may_pause || self.apply_queue_len <= self.config.fc_resume_at(members))
        {
            self.stop_wanted = false;
            self.flow.sent += 1;
        }
        let me = self.me.raft_id;
        let Some(record) = self.state.members.get(&me) else {
            return;
        };
        let (tick, resend) = (self.tick, self.config.resend_ticks);
        let mut wanted = Vec::new();
        // A changed wish goes out at once; the same wish is repeated only after
        // `resend_ticks`, in case the leader lost it. A resume that waited for the stop's
        // resend timer would pause the whole group for that long.
        if record.state != self.local_state && self.pacing.state.due(self.local_state, tick, resend)
        {
            wanted.push(Control::State(me, self.local_state));
        }
        let stopped = self.state.paused_by.contains(&me);
        if self.stop_wanted != stopped && self.pacing.flow.due(self.stop_wanted, tick, resend) {
            wanted.push(if self.stop_wanted {
                Control::FlowStop(me)
            } else {
                Control::FlowResume(me)
            });
        }
        let reported = self
            .state
            .committed
            .get(&me)
            .copied()
            .unwrap_or(Seqno::UNDEFINED);
        // The commit cut only drives purging, so progress reports are paced, not immediate.
        if self.committed > reported
            && self.committed <= self.state.last_seqno
            && is_due(self.pacing.committed, tick, COMMITTED_REPORT_TICKS)
        {
            self.pacing.committed = Some(tick);
            wanted.push(Control::Committed(me, self.committed));
        }
        let cached = self.state.cached_from.get(&me).copied();
        if cached != Some(self.cached_from)
            && is_due(self.pacing.cached, tick, COMMITTED_REPORT_TICKS)
        {
            self.pacing.cached = Some(tick);
            wanted.push(Control::Cached(me, self.cached_from));
        }
        wanted.extend(self.votes_due());
        for control in wanted {
            if self.is_leader() {
                self.propose_entry(&LogEntry::Control(control));
            } else {
                self.send_to_leader(&WireMessage::Control(control));
            }
        }
    }

    fn send_submissions(&mut self) {
        let leader = self.raw.raft.leader_id;
        // An isolated node's frames go nowhere: what it does not send stays unsent, which
        // is what lets it give the submission up for certain if it loses the component.
        if !self.member || leader == 0 || self.pending.is_empty() || self.isolated {
            return;
        }
        let paused = self.state.is_paused();
        let tick = self.tick;
        let resend_ticks = self.config.resend_ticks;
        let mut to_send = Vec::new();
        let mut bytes = 0;
        // The id of the submission looked at last, and whether it has been sent.
        let mut previous: Option<(u64, bool)> = None;
        for (submit_id, pending) in self.pending.iter_mut() {
            // A later chunk continues a write-set already on its way (its previous chunk was
            // sent, or is ordered and gone from here): flow control does not hold it back,
            // or the write-set would wait for an order a paused group does not give.
            let continues = pending.chunk.0 > 0
                && match previous {
                    Some((id, sent)) if id + 1 == *submit_id => sent,
                    _ => true,
                };
            let due = match pending.sent {
                // Flow control holds back what was never sent; resends still go.
                None => !paused || pending.urgent || continues,
                Some(_) => pending.resend_due(leader, tick, resend_ticks),
            };
            if due {
                if bytes >= SEND_BYTES_PER_POLL {
                    break;
                }
                bytes += pending.payload.len();
                let same_leader = pending.sent.is_some_and(|(_, sent_to)| sent_to == leader);
                pending.sends = if same_leader { pending.sends + 1 } else { 1 };
                pending.sent = Some((tick, leader));
                to_send.push(Submission {
                    origin: self.me.uuid,
                    submit_id: *submit_id,
                    payload: pending.payload.clone(),
                    chunk: pending.chunk,
                });
            }
            previous = Some((*submit_id, pending.sent.is_some()));
        }
        if to_send.is_empty() {
            return;
        }
        if leader == self.me.raft_id {
            self.batch.extend(to_send);
        } else {
            self.send_to_leader(&WireMessage::Forward(to_send));
        }
    }

    /// A silent member cannot resume what it stopped: once the leader has not heard from it
    /// for [`FLOW_STOP_SILENCE_ELECTIONS`] election timeouts, long before eviction, the
    /// leader lifts its flow-control stop. A member that still wants the stop says so again
    /// when it is heard (it repeats a wish the group state does not show).
    fn lift_silent_flow_stops(&mut self) {
        let silent: Vec<u64> = self
            .state
            .paused_by
            .iter()
            .copied()
            .filter(|id| *id != self.me.raft_id && !self.stops_lifted.contains(id))
            .filter(|id| self.silent_for(*id, FLOW_STOP_SILENCE_ELECTIONS))
            .collect();
        for id in silent {
            if self.propose_entry(&LogEntry::Control(Control::FlowResume(id))) {
                tracing::info!(
                    member = id,
                    "member silent with flow control stopped: lifting its stop"
                );
                self.stops_lifted.insert(id);
            }
        }
    }

    fn evict_silent_members(&mut self) {
        self.lift_silent_flow_stops();
        let suspect_ticks = self.config.suspect_ticks();
        let tick = self.tick;
        let mut silent = Vec::new();
        for id in self
            .state
            .members
            .keys()
            .copied()
            .filter(|id| *id != self.me.raft_id)
        {
            // A member the leader has no record of (just added) starts its clock now.
            let heard = *self.last_heard.entry(id).or_insert(tick);
            if tick.saturating_sub(heard) > suspect_ticks && self.others_hold_state(id) {
                silent.push(id);
            }
        }
        for id in silent {
            if self.queue_removal(id) {
                tracing::info!(
                    member = id,
                    "member silent past evs.suspect_timeout: evicting"
                );
            }
        }
    }

    /// Queues the removal of member `id` unless it is queued already; true if queued now.
    fn queue_removal(&mut self, id: u64) -> bool {
        let queued = self
            .conf_queue
            .iter()
            .any(|op| matches!(op, ConfOp::Remove(queued) if *queued == id));
        if !queued {
            self.conf_queue.push_back(ConfOp::Remove(id));
        }
        !queued
    }

    /// True if a member other than `id` holds the database state. The last such member is
    /// never evicted: members still waiting for a state transfer would be left with no
    /// donor, and the cluster's data with no holder. It stays a member, and catches up from
    /// the log once it is heard from again.
    fn others_hold_state(&self, id: u64) -> bool {
        self.state.members.iter().any(|(other, record)| {
            *other != id
                && matches!(
                    record.state,
                    NodeState::Synced | NodeState::Joined | NodeState::Donor
                )
        })
    }

    fn propose_conf_change(&mut self) {
        let raft = &self.raw.raft;
        if raft.pending_conf_index > raft.raft_log.applied {
            return;
        }
        while let Some(op) = self.conf_queue.pop_front() {
            let (change_type, node_id, context) = match &op {
                ConfOp::Add(info) if !self.state.members.contains_key(&info.raft_id) => (
                    ConfChangeType::AddNode,
                    info.raft_id,
                    wire::bincode_encode(info),
                ),
                ConfOp::Remove(id) if self.state.members.contains_key(id) => {
                    (ConfChangeType::RemoveNode, *id, Vec::new())
                }
                _ => continue,
            };
            let mut single = ConfChangeSingle::default();
            single.set_change_type(change_type);
            single.node_id = node_id;
            let mut change = ConfChangeV2::default();
            change.mut_changes().push(single);
            if self.raw.propose_conf_change(context, change).is_err() {
                self.conf_queue.push_front(op);
            }
            return;
        }
    }

    fn propose_batch(&mut self) {
        // Flow control holds write-sets back at their origins, before they are sent (as
        // Galera does): what a member already sent is ordered, so a sender never waits for
        // an order that a paused group would not give.
        if self.batch.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.batch);
        while !batch.is_empty() {
            let mut bytes = 0;
            let take = batch
                .iter()
                .take_while(|s| {
                    bytes += s.payload.len();
                    bytes <= self.config.batch_bytes_max
                })
                .count()
                .max(1);
            let rest = batch.split_off(take);
            if !self.propose_entry(&LogEntry::Batch(batch)) {
                // Raft refused (uncommitted limit, leadership transfer): origins resend.
                return;
            }
            batch = rest;
        }
    }

    fn propose_entry(&mut self, entry: &LogEntry) -> bool {
        self.raw.propose(Vec::new(), entry.encode()).is_ok()
    }

    fn update_pause_clock(&mut self) {
        match (self.state.is_paused(), self.paused_since) {
            (true, None) => self.paused_since = Some(self.now),
            (false, Some(since)) => {
                self.flow.paused_ns += self.now.since(since);
                self.paused_since = None;
            }
            _ => {}
        }
    }

    /// Snapshots the group state at `index`, unless chunks of a write-set are being
    /// reassembled: the snapshot would carry them (up to a whole write-set, past what one
    /// message may hold), so it waits until they are complete (`snapshot_due`).
    fn take_snapshot(&mut self, index: u64, term: u64) {
        if !self.state.partial.is_empty() {
            self.snapshot_due = true;
            return;
        }
        match self.state.try_encode() {
            Ok(data) => {
                self.raw.mut_store().record_snapshot(index, term, data);
                self.last_snapshot_index = index;
                self.snapshot_due = false;
            }
            Err(error) => {
                tracing::error!(%error, index, "group state snapshot not taken");
                self.snapshot_due = true;
            }
        }
    }

    fn maybe_compact(&mut self) {
        let applied = self.raw.raft.raft_log.applied;
        if self.snapshot_due
            || applied >= self.last_snapshot_index + self.config.snapshot_interval_entries
        {
            let term =
                raft::Storage::term(self.raw.store(), applied).expect("applied is in the log");
            self.take_snapshot(applied, term);
        }
        let keep_from = applied.saturating_sub(self.config.log_retain_entries);
        self.raw.mut_store().compact_to(keep_from);
    }
}

/// Ticks between two reports of this member's committed seqno.
const COMMITTED_REPORT_TICKS: u64 = 5;

/// When each kind of control message was last sent, so that a change goes out at once
/// and a repeat waits.
#[derive(Default)]
struct ControlPacing {
    state: LastSent<NodeState>,
    flow: LastSent<bool>,
    committed: Option<u64>,
    cached: Option<u64>,
    votes: Option<u64>,
}

/// The last value sent of one kind of control message, and the tick it went.
struct LastSent<T>(Option<(T, u64)>);

impl<T> Default for LastSent<T> {
    fn default() -> Self {
        LastSent(None)
    }
}

impl<T: PartialEq + Copy> LastSent<T> {
    /// True (and recorded as sent) if `value` differs from the last one sent, or the last
    /// send is `every_ticks` old.
    fn due(&mut self, value: T, tick: u64, every_ticks: u64) -> bool {
        let due = match self.0 {
            Some((last, at)) => last != value || tick >= at + every_ticks,
            None => true,
        };
        if due {
            self.0 = Some((value, tick));
        }
        due
    }
}

/// True when an action last done at `last` (never, if `None`) may be repeated at `tick`.
fn is_due(last: Option<u64>, tick: u64, every_ticks: u64) -> bool {
    last.is_none_or(|t| tick >= t + every_ticks)
}

/// A join request, with the proof of address when there is one.
fn join_request(info: MemberInfo, proof: Option<u64>) -> WireMessage {
    match proof {
        Some(proof) => WireMessage::ProvedJoin(info, proof),
        None => WireMessage::Join(info),
    }
}

/// Refuses an identity no genuine node presents: Raft id 0, the nil UUID, or a name or
/// address too long to be one.
fn check_identity(info: &MemberInfo) -> Result<(), &'static str> {
    let long = [&info.name, &info.address, &info.incoming]
        .iter()
        .any(|field| field.len() > MEMBER_FIELD_BYTES_MAX);
    if info.raft_id == 0 || info.uuid == Uuid::NIL || long {
        return Err("an identity no node presents");
    }
    Ok(())
}

/// A new membership's identity: fresh Raft id and UUID, the same contact details.
fn new_identity(rng: &mut SeededRng, contact: &Contact, now: Nanos) -> MemberInfo {
    MemberInfo {
        raft_id: rng.gen_range(1..u64::MAX),
        uuid: Uuid::time_ordered(now.0, rng),
        name: contact.name.clone(),
        address: contact.address.clone(),
        incoming: contact.incoming.clone(),
    }
}

fn raft_config(config: &GroupConfig, raft_id: u64, applied: u64) -> raft::Config {
    raft::Config {
        id: raft_id,
        election_tick: config.election_ticks,
        heartbeat_tick: config.heartbeat_ticks,
        min_election_tick: config.election_ticks,
        max_election_tick: 2 * config.election_ticks,
        applied,
        check_quorum: true,
        pre_vote: true,
        max_size_per_msg: 1 << 20,
        // Appends queued for one follower go out ahead of its heartbeats: a deep pipeline of
        // 1 MiB messages (a large write-set's chunks) would delay them past the election
        // timeout.
        max_inflight_msgs: 8,
        max_uncommitted_size: 256 << 20,
        ..Default::default()
    }
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::seeded_rng;

    #[test]
    fn a_changed_control_goes_at_once_and_a_repeat_waits() {
        let mut flow = LastSent::default();
        assert!(flow.due(true, 10, 50), "the first stop goes");
        assert!(
            !flow.due(true, 11, 50),
            "the same stop is not repeated at once"
        );
        // The resume must not wait for the stop's resend timer: that wait paused the
        // whole group for half a second at a time under sysbench.
        assert!(flow.due(false, 12, 50), "a resume goes at once");
        assert!(!flow.due(false, 61, 50));
        assert!(
            flow.due(false, 62, 50),
            "a lost resume is repeated after the timer"
        );
    }

    fn founder() -> GroupNode {
        let contact = Contact::new("founder", "founder:4567");
        GroupNode::bootstrap(GroupConfig::default(), &contact, seeded_rng(5), Nanos(0))
    }

    fn joiner(raft_id: u64) -> MemberInfo {
        MemberInfo {
            raft_id,
            uuid: Uuid([(raft_id % 250) as u8 + 1; 16]),
            name: format!("joiner{raft_id}"),
            address: format!("joiner{raft_id}:4567"),
            incoming: String::new(),
        }
    }

    fn conf_entry(
        index: u64,
        change_type: ConfChangeType,
        node_id: u64,
        context: Vec<u8>,
    ) -> Entry {
        let mut single = ConfChangeSingle::default();
        single.set_change_type(change_type);
        single.node_id = node_id;
        let mut change = ConfChangeV2::default();
        change.mut_changes().push(single);
        let mut entry = Entry::default();
        entry.set_entry_type(EntryType::EntryConfChangeV2);
        entry.index = index;
        entry.term = 1;
        entry.data = change.write_to_bytes().unwrap().into();
        entry.context = context.into();
        entry
    }

    #[test]
    fn ordered_entries_the_group_cannot_apply_are_skipped_without_a_panic() {
        let mut node = founder();
        let me = node.me.raft_id;
        let before = node.state.clone();
        let mut garbage = Entry::default();
        garbage.index = 2;
        garbage.data = vec![0xff; 12].into();
        let mut version_1 = Entry::default();
        version_1.set_entry_type(EntryType::EntryConfChange);
        version_1.index = 3;
        let mut unnamed = conf_entry(5, ConfChangeType::AddNode, 9, Vec::new());
        unnamed.context = b"not an identity".to_vec().into();
        let other = wire::bincode_encode(&joiner(10));
        node.apply_entries(vec![
            garbage,
            version_1,
            conf_entry(4, ConfChangeType::AddLearnerNode, 9, Vec::new()),
            unnamed,
            conf_entry(6, ConfChangeType::AddNode, 11, other),
            // raft-rs refuses to remove the last voter.
            conf_entry(7, ConfChangeType::RemoveNode, me, Vec::new()),
        ]);
        assert_eq!(node.state, before, "nothing was applied");
        assert_eq!(node.raw.raft.prs().conf().voters().ids().len(), 1);
        assert!(node.member && !node.closed);
    }

    #[test]
    fn joins_and_welcomes_from_the_network_grow_no_map_past_its_cap() {
        let mut leader = founder();
        leader.poll(Nanos(1));
        assert!(leader.is_leader());
        for raft_id in 100..400 {
            let bytes = wire::encode(raft_id, &WireMessage::Join(joiner(raft_id)));
            let result = leader.receive(Nanos(2), &bytes);
            if raft_id > 100 {
                assert!(
                    matches!(result, Err(ReceiveError::JoinRefused { .. })),
                    "{result:?}"
                );
            }
        }
        // Joiners that prove their address get in one at a time.
        for raft_id in [500, 501] {
            let info = joiner(raft_id);
            let proof = leader.challenge_key.challenge(&info);
            let bytes = wire::encode(raft_id, &WireMessage::ProvedJoin(info, proof));
            let result = leader.receive(Nanos(3), &bytes);
            assert_eq!(result.is_ok(), raft_id == 500, "{result:?}");
        }
        let adds = leader
            .conf_queue
            .iter()
            .filter(|op| matches!(op, ConfOp::Add(_)))
            .count();
        assert_eq!(adds, JOINS_QUEUED_MAX);
        assert!(leader.known_addresses.len() <= KNOWN_ADDRESSES_MAX);

        let contact = Contact::new("new", "new:4567");
        let mut newcomer = GroupNode::join(
            GroupConfig::default(),
            &contact,
            vec![],
            seeded_rng(6),
            Nanos(0),
        );
        for sender in 1..1_000u64 {
            let members = vec![joiner(sender), joiner(sender + 5_000)];
            let bytes = wire::encode(sender, &WireMessage::Welcome(members));
            assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
        }
        assert_eq!(newcomer.known_addresses.len(), KNOWN_ADDRESSES_MAX);
        let unlisted = wire::encode(7, &WireMessage::Welcome(vec![joiner(8)]));
        assert!(matches!(
            newcomer.receive(Nanos(1), &unlisted),
            Err(ReceiveError::BadWelcome { from: 7, .. })
        ));
        let crowd: Vec<MemberInfo> = (1..=WELCOME_MEMBERS_MAX as u64 + 1).map(joiner).collect();
        let crowded = wire::encode(1, &WireMessage::Welcome(crowd));
        assert!(matches!(
            newcomer.receive(Nanos(1), &crowded),
            Err(ReceiveError::BadWelcome { from: 1, .. })
        ));
    }

    #[test]
    fn a_joiner_keeps_no_record_per_stranger_that_sends_it_raft_messages() {
        let contact = Contact::new("new", "new:4567");
        let mut newcomer = GroupNode::join(
            GroupConfig::default(),
            &contact,
            vec![],
            seeded_rng(6),
            Nanos(0),
        );
        let me = newcomer.me.raft_id;
        for from in 1..500u64 {
            let mut message = Message::default();
            message.set_msg_type(MessageType::MsgHeartbeat);
            message.from = from;
            message.to = me;
            message.term = 1;
            let bytes = wire::encode(from, &WireMessage::Raft(message));
            assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
            newcomer.poll(Nanos(1));
        }
        assert!(newcomer.last_heard.is_empty());
        // The group's term is news to a node that is not a member yet, however high.
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgHeartbeat);
        (message.from, message.to, message.term) = (1, me, check::TERM_MAX);
        let bytes = wire::encode(1, &WireMessage::Raft(message));
        assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
    }
}
