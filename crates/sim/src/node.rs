//! One simulated node: the group member plus what a database server does around it
//! (certification, the apply and commit monitors, state transfer, clients).

use std::collections::{BTreeMap, VecDeque};

use base::{NodeState, Seqno};
use cert::{CertConfig, Certifier, Verdict};
use group::{GroupNode, View};
use order::{Monitor, Policy, DEFAULT_WINDOW};
use writeset::WriteSet;

use crate::kv::{KvDb, Op};

/// An ordered action waiting to be certified.
#[derive(Clone, Debug)]
pub enum Ordered {
    /// A write-set.
    WriteSet {
        /// Its seqno.
        seqno: Seqno,
        /// The decoded write-set.
        write_set: WriteSet,
        /// The commit cut that came with it.
        safe_seqno: Seqno,
        /// The submission number, if this node submitted it.
        local_submit: Option<u64>,
    },
    /// An ordered view change (takes a seqno, applies nothing).
    View {
        /// Its seqno.
        seqno: Seqno,
    },
}

impl Ordered {
    /// The seqno of the action.
    pub fn seqno(&self) -> Seqno {
        match self {
            Ordered::WriteSet { seqno, .. } | Ordered::View { seqno } => *seqno,
        }
    }
}

/// Where an action is between certification and commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Certified, waiting for the apply monitor.
    Waiting,
    /// Inside the apply monitor.
    Applying,
    /// Applied (or nothing to apply), waiting for its commit turn.
    Applied,
}

/// A certified action on its way to commit.
#[derive(Clone, Debug)]
pub struct PipelineEntry {
    /// The changes, for a write-set that passed.
    pub ops: Option<Vec<Op>>,
    /// The certification verdict (`None` for a view).
    pub verdict: Option<Verdict>,
    /// Submission number if local.
    pub local_submit: Option<u64>,
    /// Progress.
    pub stage: Stage,
}

/// What a joiner receives from its donor.
#[derive(Clone, Debug)]
pub struct TransferPayload {
    /// The donor's database at its last committed seqno.
    pub db: KvDb,
    /// The donor's certification index.
    pub cert: Certifier,
    /// Verdicts of write-sets the donor certified but had not committed.
    pub verdicts: BTreeMap<Seqno, Verdict>,
}

/// A transfer this node is serving.
#[derive(Clone, Copy, Debug)]
pub struct Donation {
    /// The joiner's slot.
    pub joiner: usize,
    /// The joiner's incarnation, so a restarted joiner ignores a stale transfer.
    pub joiner_incarnation: u64,
    /// The seqno the joiner's state must reach.
    pub join_seqno: Seqno,
}

/// A transfer this node waits for.
#[derive(Clone, Copy, Debug)]
pub struct PendingTransfer {
    /// The seqno its state must reach.
    pub join_seqno: Seqno,
    /// When it asked (microseconds), to retry with another donor.
    pub requested_at_us: Option<u64>,
}

/// A simulated database server with its provider.
pub struct SimNode {
    /// Slot number (stable across restarts).
    pub slot: usize,
    /// Counts restarts; events for an older incarnation are ignored.
    pub incarnation: u64,
    /// False while crashed.
    pub alive: bool,
    /// The group member (a new one per incarnation).
    pub group: Option<GroupNode>,
    /// The node's data; survives crashes.
    pub db: KvDb,
    /// The node state machine.
    pub state: NodeState,
    /// The membership (the group member's Raft id, new after every eviction and restart)
    /// for which `db` + `cert` are a valid continuation of the ordered stream.
    pub state_member: Option<u64>,
    /// Certification index (present while the node has state).
    pub cert: Option<Certifier>,
    /// Delivered, not yet certified.
    pub queue: VecDeque<Ordered>,
    /// Verdicts received with a state transfer.
    pub transferred_verdicts: BTreeMap<Seqno, Verdict>,
    /// Certified, not yet committed.
    pub pipeline: BTreeMap<Seqno, PipelineEntry>,
    /// Apply monitor.
    pub apply_monitor: Monitor,
    /// Commit monitor.
    pub commit_monitor: Monitor,
    /// Appliers busy now.
    pub appliers_busy: usize,
    /// Transactions submitted by this node's clients and not finished: submit id -> ops.
    pub clients: BTreeMap<u64, Vec<Op>>,
    /// The transfer this node waits for, if any.
    pub pending_transfer: Option<PendingTransfer>,
    /// The transfer this node serves, if any.
    pub donation: Option<Donation>,
    /// The last view delivered.
    pub view: Option<View>,
    /// Until this time (simulated microseconds) its applies are slow (a slow disk).
    pub slow_until_us: u64,
}

impl SimNode {
    /// A node slot before its first start.
    pub fn new(slot: usize) -> SimNode {
        SimNode {
            slot,
            incarnation: 0,
            alive: false,
            group: None,
            db: KvDb::default(),
            state: NodeState::Closed,
            state_member: None,
            cert: None,
            queue: VecDeque::new(),
            transferred_verdicts: BTreeMap::new(),
            pipeline: BTreeMap::new(),
            apply_monitor: Monitor::new("apply", Policy::Apply, Seqno::ZERO, DEFAULT_WINDOW),
            commit_monitor: Monitor::new("commit", Policy::Commit, Seqno::ZERO, DEFAULT_WINDOW),
            appliers_busy: 0,
            clients: BTreeMap::new(),
            pending_transfer: None,
            donation: None,
            view: None,
            slow_until_us: 0,
        }
    }

    /// The slot's address on the simulated network.
    pub fn address(slot: usize) -> String {
        format!("node{slot}")
    }

    /// The group member; only called while alive.
    pub fn group(&mut self) -> &mut GroupNode {
        self.group.as_mut().expect("a live node has a group member")
    }

    /// Moves to `to`, a loud failure if the transition table refuses.
    pub fn transition(&mut self, to: NodeState) {
        if self.state == to {
            return;
        }
        if let Err(illegal) = self.state.transition(to) {
            panic!("node {}: {illegal}", self.slot);
        }
        if let Some(group) = self.group.as_mut() {
            group.set_local_state(to);
        }
    }

    /// Forgets everything a crash loses; the database stays.
    pub fn crash(&mut self) {
        self.alive = false;
        self.group = None;
        self.state = NodeState::Closed;
        self.drop_volatile_state();
        self.clients.clear();
        self.donation = None;
        self.view = None;
    }

    /// Drops certification and queues: the node no longer has a valid position.
    pub fn drop_volatile_state(&mut self) {
        self.state_member = None;
        self.cert = None;
        self.queue.clear();
        self.transferred_verdicts.clear();
        self.pipeline.clear();
        self.appliers_busy = 0;
        self.pending_transfer = None;
    }

    /// Takes the state a donor sent: database, certification index, pending verdicts.
    pub fn install_transfer(&mut self, payload: TransferPayload, member: u64) {
        let position = payload.db.committed;
        self.db = payload.db;
        self.cert = Some(payload.cert);
        self.transferred_verdicts = payload.verdicts;
        self.pipeline.clear();
        self.appliers_busy = 0;
        self.apply_monitor = Monitor::new("apply", Policy::Apply, position, DEFAULT_WINDOW);
        self.commit_monitor = Monitor::new("commit", Policy::Commit, position, DEFAULT_WINDOW);
        self.state_member = Some(member);
        self.pending_transfer = None;
    }

    /// Starts a node that founds the cluster: its (empty) state is valid from the genesis view.
    pub fn start_founder(&mut self, genesis: Seqno, member: u64) {
        self.db = KvDb {
            committed: genesis,
            ..KvDb::default()
        };
        self.cert = Some(Certifier::starting_at(CertConfig::default(), genesis));
        self.apply_monitor = Monitor::new("apply", Policy::Apply, genesis, DEFAULT_WINDOW);
        self.commit_monitor = Monitor::new("commit", Policy::Commit, genesis, DEFAULT_WINDOW);
        self.state_member = Some(member);
    }

    /// Actions delivered or certified but not committed: the flow-control queue.
    pub fn backlog(&self) -> usize {
        self.queue.len() + self.pipeline.len()
    }

    /// True if the database and certification index continue the current membership.
    pub fn has_state(&self) -> bool {
        let member = self.group.as_ref().map(|g| g.me().raft_id);
        self.state_member.is_some() && self.state_member == member
    }
}
