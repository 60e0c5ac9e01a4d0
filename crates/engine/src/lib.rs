//! The node engine: one database node's replication decisions as a deterministic state
//! machine, driven by a real node (`replicator`, with threads, condvars, files and TCP) and
//! by the simulator alike.
//!
//! [`NodeEngine`] holds the node's state; what it does is split by role into files, each an
//! `impl NodeEngine` block over its part of the state:
//! - the ordered stream: deliveries in order, certification and hand-out (`dispatch.rs`),
//!   views, the primary component and absent members (`views.rs`);
//! - the appliers' queue and the pause point (`task.rs`, `pause.rs`, `desync.rs`);
//! - local transactions from their first key to their release: submission, verdict,
//!   streaming fragments, brute-force aborts, replay, commit order and TOI (`local_trx.rs`,
//!   `commit.rs`);
//! - state transfer: the join's progress and decisions (`joining.rs`, `joiner.rs`), what a
//!   joiner receives (`transfer_in.rs`), the donor's IST/SST choice (`donor.rs`), and the
//!   stream's format (`ist.rs`, `view_record.rs`);
//! - the write-set cache's retention (`cache.rs`), the saved state (`saved.rs`), causal
//!   reads (`causal.rs`), consistency votes (`votes.rs`) and the counters (`stats.rs`).
//!
//! Nothing here does I/O, reads a clock or spawns a thread: time arrives as [`Nanos`],
//! storage is behind [`StateStore`] and [`ActionStore`], and what the engine wants done
//! leaves it as [`Effect`]s. Callers that wait (a client for its verdict, an applier for
//! work) ask the engine again whenever it changed; the engine never blocks.

mod appliers;
pub mod averages;
pub mod cache;
mod causal;
mod commit;
pub mod conflicts;
mod desync;
mod dispatch;
mod donor;
pub mod effects;
pub mod ist;
mod joiner;
pub mod joining;
mod last_view;
mod lifecycle;
mod local_trx;
pub mod memory_store;
mod outcome;
pub mod pause;
mod saved;
pub mod server_view;
mod stats;
pub mod storage;
pub mod task;
mod transfer_in;
pub mod view_record;
mod views;
mod votes;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use base::{Gtid, Nanos, NodeState, Seqno, Uuid};
use cert::Certifier;
use group::restart::SavedMembership;
use group::Delivery;

pub use appliers::NextTask;
pub use cache::{ActionCache, ActionStore, CacheReach};
pub use causal::CausalRefusal;
pub use commit::{ReleaseOutcome, ReplayPlan, VerdictAction};
pub use dispatch::{CertJob, Certified};
pub use donor::{plan_donation, DonorPlan};
pub use effects::{CacheWrite, Effect, LogLevel, OutgoingTransfer};
pub use joiner::{RequestWait, SnapshotRefusal};
pub use joining::{Joining, TransferStanding};
pub use lifecycle::{AlreadyConnected, ConnectionStart};
pub use local_trx::{GatePassage, LocalTrx, VerdictPoll};
pub use outcome::{AbortOutcome, BfAborted, CertifyOutcome, SubmitRefusal};
pub use server_view::{MemberOut, Meta, ViewInfo, PROTOCOL_VERSION};
pub use stats::{Counters, NodeStats};
pub use storage::{MemoryStateStore, StateStore};
pub use task::{Task, TaskQueue};
pub use transfer_in::{SnapshotWait, StreamNext};
pub use votes::{VoteBook, VoteWait};

/// [`base::SYNCED_QUEUE_MAX`] as a task count: a JOINED node with at most this many tasks
/// queued turns SYNCED (the group's catch-up limits lead it there).
pub const SYNCED_QUEUE_MAX: usize = base::SYNCED_QUEUE_MAX as usize;

/// Abandoned submission tickets kept for waiters that have not looked yet. A waiter looks
/// as soon as it is woken, so a few suffice; the bound only keeps tickets nobody waits for
/// (their transactions ended another way) from piling up.
pub const ABANDONED_REMEMBERED: usize = 1024;

/// What the engine starts with.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `wsrep_node_name`.
    pub node_name: String,
    /// Where clients reach this node, for the members list.
    pub incoming_address: String,
    /// An illegal state transition fails loudly (tests and the simulator); a server in
    /// production logs it and goes on in the new state rather than stop.
    pub strict_transitions: bool,
}

/// Where the node stands in the cluster's views.
#[derive(Debug)]
pub(crate) struct Membership {
    /// The history (cluster state UUID).
    pub(crate) cluster: Uuid,
    /// This node's identity in the group now (it changes when the group admits it again).
    pub(crate) own: Uuid,
    /// The members of the last view, as the server sees them.
    pub(crate) members: Vec<MemberOut>,
    /// The configuration number of the last view (-1 outside a primary component).
    pub(crate) view_id: i64,
    /// In a primary component now.
    pub(crate) primary: bool,
    /// The highest seqno ordered here (delivered in order).
    pub(crate) last_ordered: Seqno,
    /// The group membership (see `group::View::membership`) of the last view.
    pub(crate) membership: u64,
    /// The membership the certification state was built in (at bootstrap, or at the end of
    /// a state transfer): another one in a view means the node was admitted again.
    pub(crate) member_of: Option<u64>,
    /// Members of the last primary view, by name, and by identity.
    pub(crate) view_names: Vec<String>,
    pub(crate) view_members: Vec<(Uuid, String)>,
    /// Members that left the primary view, by name, and the first seqno each may lack.
    pub(crate) absent: BTreeMap<String, Seqno>,
}

/// The life of one connection: `connect` to `disconnect` (or a fatal stop).
#[derive(Debug, Default)]
pub(crate) struct Lifecycle {
    pub(crate) connected: bool,
    /// Counts `connect` calls: threads of an earlier connection see it change and end.
    pub(crate) connection: u64,
    pub(crate) closing: bool,
    /// `disconnect` has begun: the group member is stopped on purpose.
    pub(crate) leaving: bool,
    /// This connection founds the cluster.
    pub(crate) bootstrap: bool,
    /// Whether this node was the last member when it left (for the saved state).
    pub(crate) last_member_on_leave: Option<bool>,
}

/// One node's replication decisions (see the crate docs).
pub struct NodeEngine {
    config: EngineConfig,
    store: Box<dyn StateStore>,
    pub(crate) life: Lifecycle,
    pub(crate) state: NodeState,
    pub(crate) view: Membership,
    /// Present while the node holds the cluster's state and follows the order.
    pub(crate) certifier: Option<Certifier>,
    /// A certification running outside the engine (see [`CertJob`]) holds the certifier.
    pub(crate) certifying: Option<Seqno>,
    /// While joining: deliveries held until the state transfer is in place.
    pub(crate) held: Vec<Delivery>,
    /// Everything up to here is in the server already (its snapshot, or IST queued after
    /// it): a seqno delivered late is certified but not applied again.
    pub(crate) in_server_upto: Seqno,
    /// The commit cut the last write-set carried: every member had committed up to here.
    pub(crate) last_safe_seqno: Seqno,
    pub(crate) joining: Option<Joining>,
    pub(crate) tasks: TaskQueue,
    pub(crate) pause: pause::PauseGate,
    pub(crate) desync_count: u64,
    pub(crate) trxs: HashMap<u64, LocalTrx>,
    pub(crate) toi_by_conn: HashMap<u64, Seqno>,
    /// Seqnos inside the apply monitor that the engine must see leave it.
    pub(crate) entered_apply: HashSet<Seqno>,
    /// Tickets of submissions the group gave up, until their waiters find them; at most
    /// [`ABANDONED_REMEMBERED`].
    pub(crate) abandoned: VecDeque<u64>,
    /// Causal reads waiting for the group's answer: request id -> the seqno to wait for.
    pub(crate) causal: HashMap<u64, Option<Seqno>>,
    pub(crate) next_causal_id: u64,
    pub(crate) votes: VoteBook,
    /// The joiner (Raft id) this node is sending a snapshot to, to tell if it fails.
    pub(crate) donating_to: Option<u64>,
    /// Where the server stood when it connected.
    pub(crate) start_position: Option<Gtid>,
    /// `wsrep_sst_donor`.
    pub(crate) donor_names: String,
    /// Where this node receives state transfer streams, for its requests.
    pub(crate) ist_address: String,
    /// Whether the saved state says this node is the only member of the primary component.
    pub(crate) saved_sole_member: bool,
    /// The identity last saved to come back under after a crash.
    pub(crate) saved_membership: Option<SavedMembership>,
    /// The last primary view, saved for a restore after a full crash (`last_view.rs`).
    pub(crate) last_view: last_view::LastViewKeeping,
    pub(crate) stats: NodeStats,
    /// `cert.log_conflicts`: each certification conflict is logged (`conflicts.rs`).
    pub(crate) log_conflicts: bool,
    /// The latest time the driver gave.
    pub(crate) now: Nanos,
    effects: Vec<Effect>,
}

impl NodeEngine {
    /// The engine of a node that never connected, keeping its saved state in `store`.
    pub fn new(config: EngineConfig, store: Box<dyn StateStore>, now: Nanos) -> NodeEngine {
        let saved_membership = store.load_membership();
        NodeEngine {
            config,
            store,
            life: Lifecycle::default(),
            state: NodeState::Closed,
            view: Membership {
                cluster: Uuid::NIL,
                own: Uuid::NIL,
                members: Vec::new(),
                view_id: -1,
                primary: false,
                last_ordered: Seqno::UNDEFINED,
                membership: 0,
                member_of: None,
                view_names: Vec::new(),
                view_members: Vec::new(),
                absent: BTreeMap::new(),
            },
            certifier: None,
            certifying: None,
            held: Vec::new(),
            in_server_upto: Seqno::UNDEFINED,
            last_safe_seqno: Seqno::UNDEFINED,
            joining: None,
            tasks: TaskQueue::default(),
            pause: pause::PauseGate::default(),
            desync_count: 0,
            trxs: HashMap::new(),
            toi_by_conn: HashMap::new(),
            entered_apply: HashSet::new(),
            abandoned: VecDeque::new(),
            causal: HashMap::new(),
            next_causal_id: 0,
            votes: VoteBook::default(),
            donating_to: None,
            start_position: None,
            donor_names: String::new(),
            ist_address: String::new(),
            saved_sole_member: false,
            saved_membership,
            last_view: Default::default(),
            stats: NodeStats::new(now),
            log_conflicts: false,
            now,
            effects: Vec::new(),
        }
    }

    /// What the engine decided since the last call, in order, for the driver to carry out.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Whether effects wait to be taken.
    pub fn has_effects(&self) -> bool {
        !self.effects.is_empty()
    }

    pub(crate) fn emit(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// A line for the server's log.
    pub(crate) fn say(&mut self, level: LogLevel, message: impl Into<String>) {
        self.effects.push(Effect::Log(level, message.into()));
    }

    /// The engine's settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Moves the node to `to` through the transition table (`NodeState::ALLOWED`), logs
    /// it as Galera does (`Shifting SYNCED -> DONOR/DESYNCED (TO: 12)`), and tells the group
    /// of a state it counts (the data states). Staying in a state is no transition.
    ///
    /// An illegal transition means this node's idea of its own state is wrong: it fails
    /// loudly with [`EngineConfig::strict_transitions`]; otherwise it is logged and the node
    /// goes on in `to` rather than stop.
    pub(crate) fn shift(&mut self, to: NodeState) {
        let from = self.state;
        if from == to {
            return;
        }
        if let Err(illegal) = self.state.transition(to) {
            if self.config.strict_transitions {
                panic!("{illegal}");
            }
            let message = format!("{illegal}: a bug in Trireme's idea of this node's state");
            self.say(LogLevel::Error, message);
            self.state = to;
        }
        let message = format!("Shifting {from} -> {to} (TO: {})", self.view.last_ordered);
        self.say(LogLevel::Info, message);
        let counted_by_group =
            !matches!(to, NodeState::Closed | NodeState::Open | NodeState::Primary);
        if counted_by_group && self.life.connected {
            self.emit(Effect::AnnounceState(to));
        }
    }

    /// The node's state.
    pub fn state(&self) -> NodeState {
        self.state
    }

    /// The history this node's state belongs to.
    pub fn cluster(&self) -> Uuid {
        self.view.cluster
    }

    /// This node's identity in the group now.
    pub fn own(&self) -> Uuid {
        self.view.own
    }

    /// In a primary component now.
    pub fn primary(&self) -> bool {
        self.view.primary
    }

    /// The members of the last view.
    pub fn members(&self) -> &[MemberOut] {
        &self.view.members
    }

    /// The configuration number of the last view.
    pub fn view_id(&self) -> i64 {
        self.view.view_id
    }

    /// The highest seqno ordered here.
    pub fn last_ordered(&self) -> Seqno {
        self.view.last_ordered
    }

    /// Connected (between `connect` and the final view).
    pub fn connected(&self) -> bool {
        self.life.connected
    }

    /// Closing: the final view is on its way to the server.
    pub fn closing(&self) -> bool {
        self.life.closing
    }

    /// `disconnect` has begun.
    pub fn leaving(&self) -> bool {
        self.life.leaving
    }

    /// The current connection's number (see [`NodeEngine::begin_connection`]).
    pub fn connection(&self) -> u64 {
        self.life.connection
    }

    /// Out of business: closing or not connected. Every wait ends on it.
    pub fn stopped(&self) -> bool {
        self.life.closing || !self.life.connected
    }

    /// The applier queue.
    pub fn tasks(&self) -> &TaskQueue {
        &self.tasks
    }

    /// Whether a join (state transfer) is under way.
    pub fn joining(&self) -> Option<&Joining> {
        self.joining.as_ref()
    }

    /// Where the server stood when it connected.
    pub fn start_position(&self) -> Option<Gtid> {
        self.start_position
    }

    /// The votes this node takes part in.
    pub fn votes(&self) -> &VoteBook {
        &self.votes
    }

    /// Whether the node holds the cluster's state and certifies the order.
    pub fn has_state(&self) -> bool {
        self.certifier.is_some() || self.certifying.is_some()
    }

    /// The certification index, when the node has one (and no certification is running
    /// outside the engine).
    pub fn certifier(&self) -> Option<&Certifier> {
        self.certifier.as_ref()
    }

    /// `wsrep_desync` and FLUSH TABLES WITH READ LOCK in force.
    pub fn desync_count(&self) -> u64 {
        self.desync_count
    }

    /// The pause point while paused.
    pub fn pause_point(&self) -> Option<Seqno> {
        self.pause.point()
    }
}

#[cfg(test)]
mod tests;
