//! The replicator: one database node's replication, behind a safe API shaped like wsrep.
//!
//! It composes the group layer (run over TCP by `transport`), certification (`cert`) and the
//! apply and commit monitors (`order`), and talks to the database server only through the
//! [`Application`] trait. The C ABI crate (`provider`) is a thin translation of wsrep calls
//! onto [`Replicator`] and of [`Application`] calls onto MariaDB's callbacks, so everything
//! here is testable without MariaDB.
//!
//! Threads: one dispatcher thread takes the group's deliveries in order, certifies every
//! write-set (the local monitor: certification runs in seqno order, on one thread), hands
//! local verdicts to the client threads waiting in [`Replicator::certify`] and queues
//! everything else for the server's applier threads, which sit in [`Replicator::recv`].
//!
//! A joiner gets its data by the server's SST and its certification index from the donor
//! (see ARCHITECTURE.md). A causal read (`sync_wait` without a target) asks the Raft leader
//! for its read index and waits until this node has committed up to it. Not here yet: IST
//! from a gcache, streaming replication.

// This crate runs the node: it starts the dispatcher thread and waits with real timeouts.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base::{Gtid, KeyType, NodeState, Seqno, Uuid};
use cert::{CertConfig, Certifier, Verdict};
use group::{Contact, Delivery, GroupConfig, NoDonor, StateRequest, View};
use order::{BlockingMonitor, Policy, DEFAULT_WINDOW};
use transport::{GroupRunner, Role, RunnerHandle, TransportOptions};
use writeset::{flags, Bytes, Key, WriteSet, WriteSetView};

mod addresses;
mod cache;
mod ist;
mod membership_file;
mod pause;
mod saved_state;
mod stats;
mod transfer;
mod view_record;
mod vote;

pub use addresses::{AddressError, NodeAddresses, Reachable};
pub use cache::CacheReach;
pub use gcache::{FreezePurge, GcacheConfig};
pub use ist::IstError;
use pause::PauseGate;
pub use saved_state::{SavedState, SavedStateError};
use stats::Window;

/// A commit that waits this long for its turn is reported in the error log, with what is
/// known about the seqno it waits for.
const STALL_REPORT_AFTER: Duration = Duration::from_secs(10);

/// Galera's default `repl.max_ws_size` (2 GiB - 1), until the provider sets its own.
pub const DEFAULT_MAX_WRITE_SET_BYTES: u64 = (1 << 31) - 1;

/// Write-sets at least this large are logged with how long this node took over them: a
/// DBA looking for a stall finds the transaction that caused it.
const LARGE_WRITE_SET_BYTES: usize = 16 << 20;
/// From this size on, a write-set's data is decoded as a view of the ordered bytes instead
/// of a copy.
const SHARED_DECODE_BYTES: usize = 1 << 20;

/// The application protocol version MariaDB 10.11 needs in views.
pub const PROTOCOL_VERSION: i32 = 4;

/// An applier thread's context, passed back to the application untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvContext(pub usize);

/// A member as the application sees it in a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberOut {
    /// The member's UUID.
    pub uuid: Uuid,
    /// `wsrep_node_name`.
    pub name: String,
    /// Where clients reach it (`wsrep_node_incoming_address`).
    pub incoming: String,
}

/// A view as the application sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    /// Cluster state UUID and the seqno of this view (last delivered for a non-primary one).
    pub state_id: Gtid,
    /// Configuration number (-1 when not primary).
    pub view_id: i64,
    /// True for a primary component.
    pub primary: bool,
    /// The members.
    pub members: Vec<MemberOut>,
    /// This node's index in `members`, -1 if absent (the final view).
    pub my_index: i32,
    /// The application protocol (always [`PROTOCOL_VERSION`]).
    pub proto_ver: i32,
}

/// The identity and ordering of an ordered write-set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Cluster UUID and seqno (seqno `UNDEFINED` when it was never ordered).
    pub gtid: Gtid,
    /// The originating node.
    pub source: Uuid,
    /// The originator's transaction id.
    pub trx_id: u64,
    /// The originator's connection id.
    pub conn_id: u64,
    /// What it must wait for.
    pub depends_on: Seqno,
}

/// A write-set handed to the application to apply.
#[derive(Debug)]
pub struct ApplyAction<'a> {
    /// Identity and ordering.
    pub meta: Meta,
    /// wsrep flags, plus ROLLBACK for a write-set that failed certification.
    pub flags: u32,
    /// The row data.
    pub data: &'a [u8],
}

/// What the replicator needs from the database server. Every call may block.
pub trait Application: Send + Sync {
    /// The node joined a primary component (first view).
    fn connected(&self, view: &ViewInfo) -> bool;
    /// A view change, on an applier thread.
    fn view(&self, recv: RecvContext, view: &ViewInfo) -> bool;
    /// Applies one write-set; the application calls `commit_order_enter/leave` inside.
    fn apply(&self, recv: RecvContext, action: &ApplyAction<'_>, exit_loop: &mut bool) -> bool;
    /// The node caught up with the cluster.
    fn synced(&self);
    /// The server's state transfer request (method and address), or `None` on failure.
    fn sst_request(&self) -> Option<Vec<u8>>;
    /// This node was chosen as donor: start sending a snapshot at `state` (or, with
    /// `bypass`, only the position). The server later calls `sst_sent`.
    fn sst_donate(&self, recv: RecvContext, request: &[u8], state: Gtid, bypass: bool) -> bool;
    /// A log line for the server's error log.
    fn log(&self, level: LogLevel, message: &str);
    /// The node cannot go on (its state transfer failed): stop the server, as Galera
    /// does. The default only logs, for embedders that stop on their own.
    fn fatal(&self, message: &str) {
        self.log(LogLevel::Error, message);
    }
}

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// The node cannot go on.
    Error,
    /// Something the operator should look at.
    Warning,
    /// Normal operation.
    Info,
}

/// Fault injection for tests: a thread whose name is this variable's value panics as it
/// starts, to show that a dead provider thread takes the server down loudly.
const FAULT_PANIC_THREAD: &str = "TRIREME_FAULT_PANIC_THREAD";

/// Panics if [`FAULT_PANIC_THREAD`] names the current thread.
fn panic_if_injected() {
    let current = std::thread::current();
    if current.name().is_some()
        && std::env::var(FAULT_PANIC_THREAD).ok().as_deref() == current.name()
    {
        panic!("injected panic ({FAULT_PANIC_THREAD} is set)");
    }
}

/// Settings the replicator starts with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `wsrep_node_name`.
    pub node_name: String,
    /// Where clients reach this node, for the members list.
    pub incoming_address: String,
    /// Where the group layer listens and where peers, donors and clients reach this node.
    pub addresses: NodeAddresses,
    /// Group-layer settings (timeouts, flow control).
    pub group: GroupConfig,
    /// Seed of the group member's random choices.
    pub seed: u64,
    /// How long `sync_wait` waits when the caller gives no timeout.
    pub causal_read_timeout: Duration,
    /// Where `grastate.dat` is kept (`base_dir`); `None` keeps no saved state.
    pub state_dir: Option<std::path::PathBuf>,
    /// The server's own position at start (MariaDB recovers it from its storage engine).
    /// A bootstrap continues this history; a joiner asks for IST from it.
    pub history: Option<Gtid>,
    /// The write-set cache (`gcache.*`); `None` keeps none, so this node serves no IST.
    pub gcache: Option<GcacheConfig>,
    /// TLS for group traffic and IST (`socket.ssl_*`); `None`: plaintext.
    pub tls: Option<Arc<tls::TlsContext>>,
}

/// Why a call could not be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReplicatorError {
    /// `connect` was called on a connected replicator.
    #[error("already connected: disconnect first")]
    AlreadyConnected,
    /// The node is not part of a primary component (or not connected at all).
    #[error("not connected to a primary component")]
    NotConnected,
    /// The server failed to receive its snapshot: the node cannot go on without state
    /// (Galera stops the server here too).
    #[error(
        "state transfer failed (code {rcode}): this node cannot continue without the \
         cluster's state; fix the cause named above and restart it"
    )]
    StateTransferFailed {
        /// The server's error code (a negative errno).
        rcode: i32,
    },
    /// A `gcomm://` address that does not parse.
    #[error("{}", describe_bad_cluster_address(.0))]
    BadClusterAddress(String),
    /// This node's own addresses cannot be decided.
    #[error("{0}")]
    Address(#[from] AddressError),
    /// The group transport could not start.
    #[error("cannot start the group transport on {address}: {reason}")]
    Transport {
        /// The listen address.
        address: SocketAddr,
        /// The OS error.
        reason: String,
    },
    /// Waiting timed out.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The TLS files could not be (re)loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// The transaction is unknown.
    #[error("unknown transaction {0}")]
    UnknownTransaction(u64),
    /// Option values that do not fit together.
    #[error("invalid options: {0}")]
    Options(String),
    /// A bootstrap from a node that was not the last to leave the cluster: another node may
    /// hold newer data.
    #[error(
        "It may not be safe to bootstrap the cluster from this node: it was not the last one \
         to leave and may not have all the data. To force it, set safe_to_bootstrap: 1 in {0}"
    )]
    UnsafeBootstrap(String),
    /// The saved state could not be read.
    #[error("{0}")]
    SavedState(String),
    /// A causal read on a joiner that waits for a snapshot: it holds none of the cluster's
    /// history to read from, and would wait for its own transfer.
    #[error(
        "this node has no state of the cluster's history yet (it waits for a snapshot): it \
         cannot serve a causal read"
    )]
    NoStateYet,
    /// A consistency vote found this node's data different from the cluster's: it left.
    #[error("{0}")]
    Inconsistent(String),
}

/// How `certify` (or `to_execute_start`) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertifyOutcome {
    /// Ordered and certified: go on to commit.
    Committable(Meta),
    /// Ordered, failed certification: roll back; the seqno must still pass commit order.
    Failed(Meta),
    /// Never ordered (aborted before, or nothing to replicate).
    NotOrdered,
    /// Ordered and certified, but brute-force aborted meanwhile: replay.
    BfAborted(Meta),
    /// Larger than `repl.max_ws_size`: refused before anything left this node.
    SizeExceeded {
        /// The encoded write-set's size in bytes.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
}

/// How a wait at the pause gate ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GatePassage {
    /// Not held (any more): the seqno is recorded as started.
    Passed,
    /// The local transaction waiting there was brute-force aborted by an earlier seqno.
    Aborted,
    /// The node is closing.
    Closing,
}

/// A local transaction was brute-force aborted while it waited at this seqno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("brute-force aborted while waiting to commit {0}")]
pub struct BfAborted(pub Seqno);

/// How `abort_certification` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortOutcome {
    /// The victim will abort (or was unknown).
    Aborted,
    /// The victim is ordered before the aborter and goes on; the aborter must wait for it.
    NotAllowed(Seqno),
}

struct LocalTrx {
    conn_id: u64,
    keys: Vec<Key>,
    data: Vec<u8>,
    flags: u32,
    /// Seqno and verdict, once ordered.
    outcome: Option<(Seqno, Verdict)>,
    /// Set by a brute-force abort from this seqno.
    aborted_by: Option<Seqno>,
    /// True once handed to the group: its ordered write-set belongs to this record.
    submitted: bool,
    /// True once its seqno left commit order.
    commit_done: bool,
    /// The server rolled it back after fragments had been replicated (`rollback`).
    rolled_back: bool,
    /// The `last_seen` of the write-set last submitted: certification needs the index
    /// from here on.
    last_seen: Seqno,
}

impl LocalTrx {
    /// After `release`, does this transaction go on with another fragment? Only after a
    /// fragment that passed, left commit order and neither ended nor rolled back the
    /// transaction (wsrep-lib releases the handle after every fragment).
    fn continues_after_release(&self) -> bool {
        let fragment = self.flags & (flags::TRX_END | flags::ROLLBACK | flags::ISOLATION) == 0;
        let passed = matches!(self.outcome, Some((_, Verdict::Pass { .. })));
        fragment && passed && self.commit_done && !self.rolled_back
    }

    /// Clears what the last fragment carried, so that the next one replicates only its own
    /// keys and rows. A brute-force abort stays: the next certify must fail.
    fn start_next_fragment(&mut self) {
        self.keys.clear();
        self.data.clear();
        self.outcome = None;
        self.submitted = false;
        self.commit_done = false;
    }
}

enum RecvEvent {
    Connected(ViewInfo),
    View {
        view: ViewInfo,
        ordered: bool,
    },
    Apply {
        seqno: Seqno,
        depends_on: Seqno,
        write_set: WriteSet,
        failed: bool,
    },
    /// A seqno with nothing to apply (a view or an undecodable write-set received by IST):
    /// it only passes the monitors.
    Skip {
        seqno: Seqno,
    },
    Synced,
    /// Ask the server for its state transfer request and send it to the group.
    RequestState,
    /// Serve a joiner: with `bypass`, the server only confirms the joiner's own position
    /// (the data goes by IST); otherwise it sends a snapshot once everything ordered before
    /// the request is committed.
    Donate {
        request: StateRequest,
        wait_for: Seqno,
        bypass: Option<Gtid>,
    },
}

/// How long `disconnect` waits for the group to let this member go.
const DISCONNECT_LEAVE_WAIT: Duration = Duration::from_secs(5);
/// How long a fatal stop waits for the same: shorter, as the server is failing anyway.
const FATAL_LEAVE_WAIT: Duration = Duration::from_secs(3);
const _: () = assert!(FATAL_LEAVE_WAIT.as_secs() <= DISCONNECT_LEAVE_WAIT.as_secs());

/// Requests without a donor (one a second) before the joiner warns that it still has none.
const DONORLESS_REQUESTS_BEFORE_WARNING: u32 = 30;

/// A joiner's progress through state transfer.
struct Joining {
    join_seqno: Seqno,
    /// The position the server reported in `sst_received` (for an IST-only rejoin, the
    /// position this node already had).
    received: Option<Gtid>,
    /// What arrived from the donor so far.
    transfer: transfer::TransferProgress,
    /// The server's snapshot is in place: further requests ask for IST only.
    ist_only: bool,
    /// When the last IST-only request went out (its donor must connect in time).
    ist_requested_at: Option<Instant>,
    /// No donor was free: ask again at this time.
    retry_at: Option<Instant>,
    /// Requests in a row that found no donor.
    donorless: u32,
    request_again: bool,
    /// For a node readmitted after an eviction: the primary view to give the server once
    /// it caught up.
    rejoin_view: Option<ViewInfo>,
    /// IST handed the server a primary view this node is a member of (the one that admitted
    /// it): `rejoin_view` would repeat it, and two consecutive primary views with the same
    /// members make the server roll back every streaming transaction.
    member_view_queued: bool,
    /// No member can serve the gap any more: stop asking (see `try_finish_join`).
    gave_up: bool,
    /// The donor the group chose for the last request (its UUID in views).
    donor: Option<Uuid>,
}

impl Joining {
    /// The server already holds everything up to `position` of `cluster`'s history (its
    /// own state, no snapshot to wait for): only IST, from there on, is asked for.
    fn continue_own_state(&mut self, cluster: Uuid, position: Seqno) {
        self.received = Some(Gtid {
            cluster,
            seqno: position,
        });
        self.ist_only = true;
        self.transfer.queued_upto = position;
    }

    /// Everything up to here is in the server or queued for its appliers: the server's
    /// snapshot, then whatever IST queued after it. A further IST starts after it.
    fn in_place_upto(&self) -> Seqno {
        self.received
            .map_or(Seqno::UNDEFINED, |r| r.seqno)
            .max(self.transfer.queued_upto)
    }

    /// With the snapshot and the donor's index in place: `(state, continues_after)` when
    /// the server's state ends before the index position or before the first seqno this
    /// node was delivered, so that the seqnos in between would be missing.
    fn missing_before_delivery(&self) -> Option<(Seqno, Seqno)> {
        let state = self.in_place_upto();
        let index_at = self
            .transfer
            .index
            .as_ref()
            .map(|(position, _)| *position)?;
        let continues_after = index_at.max(self.join_seqno.prev());
        (state < continues_after).then_some((state, continues_after))
    }

    fn new(join_seqno: Seqno) -> Joining {
        Joining {
            join_seqno,
            received: None,
            transfer: transfer::TransferProgress::default(),
            ist_only: false,
            ist_requested_at: None,
            retry_at: None,
            donorless: 0,
            request_again: false,
            rejoin_view: None,
            member_view_queued: false,
            gave_up: false,
            donor: None,
        }
    }
}

impl RecvEvent {
    /// Serial events run alone: nothing else is applying while they run.
    fn is_serial(&self) -> bool {
        !matches!(self, RecvEvent::Apply { .. } | RecvEvent::Skip { .. })
    }

    /// The seqno the event takes in the server, for events that take one: these are what
    /// `pause` holds back after its point (see [`PauseGate`]).
    fn ordered_seqno(&self) -> Option<Seqno> {
        match self {
            RecvEvent::Apply { seqno, .. } | RecvEvent::Skip { seqno } => Some(*seqno),
            RecvEvent::View {
                view,
                ordered: true,
            } => Some(view.state_id.seqno),
            _ => None,
        }
    }
}

struct Monitors {
    apply: BlockingMonitor,
    commit: BlockingMonitor,
}

impl Monitors {
    /// Monitors where everything up to `last_left` is done.
    fn at(last_left: Seqno) -> Monitors {
        Monitors {
            apply: BlockingMonitor::new("apply", Policy::Apply, last_left, DEFAULT_WINDOW),
            commit: BlockingMonitor::new("commit", Policy::Commit, last_left, DEFAULT_WINDOW),
        }
    }
}

#[derive(Default)]
struct Counters {
    replicated: u64,
    replicated_bytes: u64,
    received: u64,
    received_bytes: u64,
    cert_failures: u64,
    bf_aborts: u64,
    replays: u64,
    commits: u64,
    causal_reads: u64,
    repl_keys: u64,
    repl_keys_bytes: u64,
    repl_data_bytes: u64,
    apply_waits: u64,
    /// Streaming fragments this node replicated (commit fragments excluded).
    fragments_replicated: u64,
    /// Streaming rollbacks this node replicated.
    streaming_rollbacks: u64,
    /// Write-sets refused for `repl.max_ws_size`.
    size_exceeded: u64,
}

struct Inner {
    connected: bool,
    /// Counts `connect` calls: threads of an earlier connection see it change and end.
    connection: u64,
    closing: bool,
    /// `disconnect` has begun: the group member's thread is stopped on purpose.
    leaving: bool,
    runner: Option<RunnerHandle>,
    state: NodeState,
    cluster: Uuid,
    own: Uuid,
    members: Vec<MemberOut>,
    view_id: i64,
    primary: bool,
    last_ordered: Seqno,
    trxs: HashMap<u64, LocalTrx>,
    toi_by_conn: HashMap<u64, Seqno>,
    queue: VecDeque<RecvEvent>,
    serial_running: bool,
    /// The serial event running takes a seqno (an ordered view): `pause` waits for it.
    ordered_serial_running: bool,
    applying_now: usize,
    /// What `pause` lets finish and what it holds back.
    pause: PauseGate,
    desync_count: u64,
    entered_apply: HashSet<Seqno>,
    counters: Counters,
    donor_names: String,
    joining: Option<Joining>,
    /// Causal reads waiting for the group's answer: request id -> the seqno to wait for.
    causal: HashMap<u64, Option<Seqno>>,
    /// Tickets of submissions the group gave up, until their waiters find them (see
    /// `Dispatcher::withdraw_abandoned`); at most [`ABANDONED_REMEMBERED`].
    abandoned: VecDeque<u64>,
    next_causal_id: u64,
    /// Averages since the last `stats_reset`.
    window: Window,
    /// Whether this node was the last member when it left (for the saved state).
    last_member_on_leave: Option<bool>,
    cert_index_size: usize,
    /// Streaming transactions open in the cluster, as this node's certification index
    /// tracks them, and their certified fragments.
    open_streams: (usize, u64),
    /// Where the server stood when it connected (see `Replicator::start_position`).
    start_position: Option<Gtid>,
    /// This node's addresses as decided at `connect`.
    reachable: Option<Reachable>,
    /// The consistency votes this node takes part in.
    votes: vote::VoteBook,
    /// The joiner (Raft id) this node is sending a snapshot to, to tell if it fails.
    donating_to: Option<u64>,
}

impl Inner {
    /// Hands the server the final view of a disconnected node (no members) and marks the
    /// connection closed: the appliers return once they have passed it on.
    fn close_with_final_view(&mut self) {
        let final_view = ViewInfo {
            state_id: Gtid {
                cluster: self.cluster,
                seqno: self.last_ordered,
            },
            view_id: -1,
            primary: false,
            members: Vec::new(),
            my_index: -1,
            proto_ver: PROTOCOL_VERSION,
        };
        self.queue.push_back(RecvEvent::View {
            view: final_view,
            ordered: false,
        });
        self.closing = true;
        self.connected = false;
        self.primary = false;
        self.state = NodeState::Closed;
    }

    /// What this node reports as committed for the commit cut, below which every member
    /// purges its certification index: no more than `committed`, and no more than the
    /// `last_seen` of any local write-set still waiting for its order. A large write-set
    /// takes long to order; had the cut passed its `last_seen` meanwhile, it would fail
    /// certification as too old although nothing conflicted with it.
    fn purge_floor(&self, committed: Seqno) -> Seqno {
        self.trxs
            .values()
            .filter(|t| t.submitted && t.outcome.is_none())
            .map(|t| t.last_seen)
            .fold(committed, Seqno::min)
    }

    /// Local write-sets sent to the group and not ordered yet (Galera's send queue).
    fn write_sets_in_flight(&self) -> usize {
        self.trxs
            .values()
            .filter(|t| t.submitted && t.outcome.is_none())
            .count()
    }
}

struct Shared {
    app: Arc<dyn Application>,
    settings: Settings,
    inner: Mutex<Inner>,
    changed: Condvar,
    monitors: Mutex<Option<Arc<Monitors>>>,
    /// `repl.causal_read_timeout`, which may change at runtime.
    causal_read_timeout: Mutex<Duration>,
    /// The write-set cache this node serves IST from.
    cache: Mutex<cache::ActionCache>,
    /// `repl.max_ws_size`: the largest encoded write-set this node replicates.
    max_write_set_bytes: AtomicU64,
    /// `gmcast.isolate`: this node's group links are cut (kept across a reconnect).
    isolated: AtomicBool,
}

/// One node's replication.
pub struct Replicator {
    shared: Arc<Shared>,
    runner: Mutex<Option<GroupRunner>>,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
    /// Other threads of this replicator (the index receiver), joined at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The thread that receives state transfer streams for the current connection.
    ist_receiver: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The group port of a `gcomm://` member written without one (Galera's).
pub const DEFAULT_GROUP_PORT: u16 = 4567;

/// Why a cluster address is refused, opening with Galera's words for the same case (its
/// "Invalid backend URI" and "Backend not supported"), which operators and MariaDB's
/// tests look for.
fn describe_bad_cluster_address(url: &str) -> String {
    const EXPECTED: &str = "expected gcomm://host:port[,host:port...]";
    match url.trim().split_once("://") {
        None => format!("Invalid backend URI: {url} ({EXPECTED})"),
        Some((scheme, _)) if scheme != "gcomm" => {
            format!("Backend not supported: {scheme} (in {url:?}; {EXPECTED})")
        }
        Some(_) => format!("bad cluster address {url:?}: {EXPECTED}"),
    }
}

/// Parses `gcomm://host[:port],[v6][:port],...` into peer addresses (empty for `gcomm://`).
pub fn parse_cluster_address(url: &str) -> Result<Vec<String>, ReplicatorError> {
    let bad = || ReplicatorError::BadClusterAddress(url.to_owned());
    let rest = url.trim().strip_prefix("gcomm://").ok_or_else(bad)?;
    let rest = rest.split('?').next().unwrap_or_default();
    let mut peers = Vec::new();
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, port) = addresses::split_host_port(part, DEFAULT_GROUP_PORT).ok_or_else(bad)?;
        peers.push(addresses::host_port(&host, port));
    }
    Ok(peers)
}

impl Replicator {
    /// A replicator that is not connected yet.
    pub fn new(app: Arc<dyn Application>, settings: Settings) -> Replicator {
        let causal_read_timeout = settings.causal_read_timeout;
        let inner = Inner {
            connected: false,
            connection: 0,
            closing: false,
            leaving: false,
            runner: None,
            state: NodeState::Closed,
            cluster: Uuid::NIL,
            own: Uuid::NIL,
            members: Vec::new(),
            view_id: -1,
            primary: false,
            last_ordered: Seqno::UNDEFINED,
            trxs: HashMap::new(),
            toi_by_conn: HashMap::new(),
            queue: VecDeque::new(),
            serial_running: false,
            ordered_serial_running: false,
            applying_now: 0,
            pause: PauseGate::default(),
            desync_count: 0,
            entered_apply: HashSet::new(),
            counters: Counters::default(),
            donor_names: String::new(),
            joining: None,
            causal: HashMap::new(),
            abandoned: VecDeque::new(),
            next_causal_id: 0,
            window: Window::new(0),
            last_member_on_leave: None,
            cert_index_size: 0,
            open_streams: (0, 0),
            start_position: None,
            reachable: None,
            votes: vote::VoteBook::default(),
            donating_to: None,
        };
        Replicator {
            shared: Arc::new(Shared {
                app,
                settings,
                inner: Mutex::new(inner),
                changed: Condvar::new(),
                monitors: Mutex::new(None),
                causal_read_timeout: Mutex::new(causal_read_timeout),
                isolated: AtomicBool::new(false),
                cache: Mutex::new(cache::ActionCache::disabled()),
                max_write_set_bytes: AtomicU64::new(DEFAULT_MAX_WRITE_SET_BYTES),
            }),
            runner: Mutex::new(None),
            dispatcher: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            ist_receiver: Mutex::new(None),
        }
    }

    /// Re-reads the TLS files (`socket.ssl_reload`): connections made from now on use
    /// them. An error leaves the current files in use.
    pub fn reload_tls(&self) -> Result<(), ReplicatorError> {
        let Some(context) = &self.shared.settings.tls else {
            return Err(ReplicatorError::Tls(
                "TLS is off (socket.ssl_key and socket.ssl_cert are not set)".to_owned(),
            ));
        };
        context
            .reload()
            .map_err(|error| ReplicatorError::Tls(error.to_string()))?;
        self.shared.app.log(
            LogLevel::Info,
            &format!("TLS files reloaded: now {}", context.subject()),
        );
        Ok(())
    }

    /// Joins (or, with `bootstrap`, founds) the cluster `cluster_name` at `cluster_url`.
    /// `donor_names` is `wsrep_sst_donor`.
    pub fn connect(
        &self,
        cluster_name: &str,
        cluster_url: &str,
        donor_names: &str,
        bootstrap: bool,
    ) -> Result<(), ReplicatorError> {
        let peers = parse_cluster_address(cluster_url)?;
        let bootstrap = bootstrap || peers.is_empty();
        {
            let mut inner = lock(&self.shared.inner);
            if inner.connected {
                return Err(ReplicatorError::AlreadyConnected);
            }
            inner.connected = true;
            inner.connection += 1;
            inner.closing = false;
            inner.leaving = false;
            inner.state = NodeState::Open;
            inner.donor_names = donor_names.to_owned();
        }
        // A connection that ended without `disconnect` (this node left the cluster after
        // losing a consistency vote) still holds its group port.
        self.stop_group_threads();
        let reachable = match self.decide_addresses(&peers) {
            Ok(reachable) => reachable,
            Err(error) => {
                lock(&self.shared.inner).connected = false;
                return Err(error);
            }
        };
        let start_position = self.start_position();
        {
            let mut inner = lock(&self.shared.inner);
            inner.start_position = start_position;
            // A lost vote of an earlier connection made the position above empty; this
            // connection starts with no votes (its state comes by a full snapshot).
            inner.votes = vote::VoteBook::default();
        }
        self.open_cache(start_position);
        // Every node listens for state transfer streams: a founder, too, may fall out of
        // the primary component and come back through IST.
        let address = reachable.ist_bind;
        // The previous connection's receiver holds the port until it sees this one begin
        // (a server that reconnects at once, after `SET GLOBAL wsrep_cluster_address`).
        if let Some(previous) = lock(&self.ist_receiver).take() {
            let _ = previous.join();
        }
        match TcpListener::bind(address) {
            Ok(listener) => {
                let shared = Arc::clone(&self.shared);
                let connection = lock(&self.shared.inner).connection;
                let thread = std::thread::Builder::new()
                    .name("trireme-ist-recv".into())
                    .spawn(move || transfer::receive_transfers(shared, listener, connection))
                    .expect("spawning the state transfer receiver");
                *lock(&self.ist_receiver) = Some(thread);
            }
            Err(error) if !bootstrap => {
                lock(&self.shared.inner).connected = false;
                return Err(ReplicatorError::Transport {
                    address,
                    reason: error.to_string(),
                });
            }
            Err(error) => {
                let message = format!(
                    "cannot listen for IST on {address} ({error}): this node cannot catch up \
                     by IST if it ever falls out of the cluster"
                );
                self.shared.app.log(LogLevel::Warning, &message);
            }
        }
        let role = match self.founding_role(bootstrap, peers) {
            Ok(role) => role,
            Err(error) => {
                lock(&self.shared.inner).connected = false;
                return Err(error);
            }
        };
        let settings = &self.shared.settings;
        let contact = Contact {
            name: settings.node_name.clone(),
            address: reachable.group,
            incoming: settings.incoming_address.clone(),
        };
        let transport = TransportOptions {
            cluster_name: cluster_name.to_owned(),
            tls: settings.tls.clone(),
            ..TransportOptions::default()
        };
        let started = GroupRunner::start_with_options(
            settings.group.clone(),
            role,
            contact,
            reachable.group_bind,
            settings.seed,
            transport,
        );
        let mut runner = match started {
            Ok(runner) => runner,
            Err(error) => {
                lock(&self.shared.inner).connected = false;
                return Err(ReplicatorError::Transport {
                    address: reachable.group_bind,
                    reason: error.to_string(),
                });
            }
        };
        let deliveries = runner
            .take_deliveries()
            .expect("a new runner has its deliveries");
        {
            let mut inner = lock(&self.shared.inner);
            inner.runner = Some(runner.handle());
            inner.own = runner.status().uuid;
            if self.shared.isolated.load(Ordering::Acquire) {
                let _ = runner.handle().isolate(true);
            }
        }
        *lock(&self.runner) = Some(runner);
        // While the server runs, the saved seqno is stale after the first commit: -1 says
        // "recover the position from the storage engine" to whoever reads it after a crash.
        save_running_state(
            &self.shared,
            start_position.map_or(Uuid::NIL, |position| position.cluster),
            false,
        );
        let shared = Arc::clone(&self.shared);
        let dispatcher = std::thread::Builder::new()
            .name("trireme-dispatch".into())
            .spawn(move || {
                panic_if_injected();
                dispatch(&shared, &deliveries, bootstrap)
            })
            .expect("spawning the dispatcher thread");
        *lock(&self.dispatcher) = Some(dispatcher);
        Ok(())
    }

    /// Decides where peers and donors reach this node (see [`NodeAddresses`]), says so in
    /// the log, and keeps it for the state requests.
    fn decide_addresses(&self, peers: &[String]) -> Result<Reachable, ReplicatorError> {
        let reachable = self.shared.settings.addresses.resolve(peers)?;
        let message = format!(
            "peers reach this node at {} (group) and {} (IST)",
            reachable.group, reachable.ist
        );
        self.shared.app.log(LogLevel::Info, &message);
        lock(&self.shared.inner).reachable = Some(reachable.clone());
        Ok(reachable)
    }

    /// Where this server stands at start: the position the server passed at `init`, else
    /// the one saved at the last clean leave (MariaDB passes none when the snapshot comes
    /// before the storage engines start, as with rsync; Galera then reads its grastate.dat
    /// too).
    ///
    /// A saved state with no history UUID was cleared when this node lost a consistency
    /// vote: its data, whatever the server recovered, is not the cluster's, so it has no
    /// position and joins by a full snapshot (Galera's rule: the server's position counts
    /// only in the history `grastate.dat` names).
    fn start_position(&self) -> Option<Gtid> {
        let settings = &self.shared.settings;
        let known = |gtid: &Gtid| gtid.cluster != Uuid::NIL && gtid.seqno.is_defined();
        let saved = self.saved_state();
        if self.position_cleared(saved.as_ref()) {
            let message = "this node's saved state was cleared after an inconsistency: it \
                           takes no position of its own and joins by a full state transfer";
            self.shared.app.log(LogLevel::Info, message);
            return None;
        }
        settings
            .history
            .filter(known)
            .or_else(|| saved.map(|s| s.position).filter(known))
    }

    /// The saved state (`grastate.dat`), if the node keeps a readable one.
    fn saved_state(&self) -> Option<SavedState> {
        let dir = self.shared.settings.state_dir.as_ref()?;
        SavedState::load(dir).ok().flatten()
    }

    /// True when this node's position was cleared by a lost consistency vote (in this
    /// process, or `saved` with no history UUID before it).
    fn position_cleared(&self, saved: Option<&SavedState>) -> bool {
        lock(&self.shared.inner).votes.inconsistent
            || saved.is_some_and(|s| s.position.cluster == Uuid::NIL)
    }

    /// Opens the write-set cache for the server's own history (it is started over if the
    /// node lands in another one).
    fn open_cache(&self, start_position: Option<Gtid>) {
        let settings = &self.shared.settings;
        let Some(config) = settings.gcache.as_ref() else {
            return;
        };
        let history = start_position.map_or(Uuid::NIL, |h| h.cluster);
        let app = &self.shared.app;
        let opened = cache::ActionCache::open(config, history, |message| {
            app.log(LogLevel::Info, &message);
        });
        let mut cache = lock(&self.shared.cache);
        let freeze = cache.freeze_purge();
        *cache = opened;
        if let Err(error) = cache.set_freeze_purge(freeze) {
            let message = format!("cannot apply gcache.freeze_purge_at_seqno={freeze}: {error}");
            app.log(LogLevel::Warning, &message);
        }
    }

    /// `gcache.freeze_purge_at_seqno`: `-1`, a seqno or `now`.
    pub fn set_freeze_purge(&self, freeze: FreezePurge) -> Result<(), ReplicatorError> {
        lock(&self.shared.cache)
            .set_freeze_purge(freeze)
            .map_err(|error| ReplicatorError::Options(error.to_string()))
    }

    /// The effective `gcache.freeze_purge_at_seqno` (`now` resolved to a seqno).
    pub fn freeze_purge(&self) -> FreezePurge {
        lock(&self.shared.cache).freeze_purge()
    }

    /// What the write-set cache holds: how far back this node can serve IST.
    pub fn cache_reach(&self) -> CacheReach {
        lock(&self.shared.cache).reach()
    }

    /// How to start the group: join through `peers`, or found a cluster. Founding is
    /// refused, as in Galera, when the saved state says another node left after this one;
    /// it continues the server's history when the server has one.
    fn founding_role(&self, bootstrap: bool, peers: Vec<String>) -> Result<Role, ReplicatorError> {
        if !bootstrap {
            return Ok(self.joining_role(peers));
        }
        let settings = &self.shared.settings;
        let saved = match &settings.state_dir {
            Some(dir) => SavedState::load(dir)
                .map_err(|error| ReplicatorError::SavedState(error.to_string()))?,
            None => None,
        };
        if let Some(saved) = saved {
            if saved.position.cluster != Uuid::NIL && !saved.safe_to_bootstrap {
                let path = settings
                    .state_dir
                    .as_ref()
                    .map(|dir| dir.join(saved_state::FILE_NAME).display().to_string())
                    .unwrap_or_default();
                return Err(ReplicatorError::UnsafeBootstrap(path));
            }
        }
        let known = |gtid: &Gtid| gtid.cluster != Uuid::NIL && gtid.seqno.is_defined();
        let history = settings
            .history
            .filter(known)
            .or_else(|| saved.map(|s| s.position).filter(known));
        Ok(match history {
            Some(history) => {
                let message = format!("founding a cluster that continues history {history}");
                self.shared.app.log(LogLevel::Info, &message);
                Role::BootstrapFrom(history)
            }
            None => Role::Bootstrap,
        })
    }

    fn save_state(&self, state: SavedState) {
        save_state(&self.shared, state);
    }

    /// Joins through `peers`, or, after a crash in a component of two, comes back as the
    /// member it was (see `group::restart`). Not after a lost consistency vote, whose node
    /// must come back by a full snapshot as a new member.
    fn joining_role(&self, peers: Vec<String>) -> Role {
        let cleared = self.position_cleared(self.saved_state().as_ref());
        match membership_file_of(&self.shared).filter(|_| !cleared) {
            Some(saved) => {
                let message = format!(
                    "coming back as the member this node was before it stopped (raft id {}), \
                     in the component of two it shared with {}",
                    saved.raft_id, saved.peer.1
                );
                self.shared.app.log(LogLevel::Info, &message);
                Role::ComeBack {
                    saved,
                    seeds: peers,
                }
            }
            None => Role::Join { seeds: peers },
        }
    }

    /// Saves the position this node leaves with. It is safe to bootstrap from if it was
    /// the last member of the primary component.
    fn save_final_state(&self, last_member: bool) {
        let inner = lock(&self.shared.inner);
        let complete = matches!(
            inner.state,
            NodeState::Synced | NodeState::Donor | NodeState::Joined | NodeState::Closed
        ) && inner.joining.is_none();
        let cluster = inner.cluster;
        let inconsistent = inner.votes.inconsistent;
        drop(inner);
        // An inconsistent node's cleared position stays cleared: it must come back by SST.
        if cluster == Uuid::NIL || inconsistent {
            return;
        }
        let seqno = if complete {
            self.last_committed_locked()
        } else {
            Seqno::UNDEFINED
        };
        self.save_state(SavedState {
            position: Gtid { cluster, seqno },
            safe_to_bootstrap: last_member && seqno.is_defined(),
        });
    }

    /// Stops the server for good, as Galera's abort does: it leaves the group first, so
    /// that the others do not count a node that will never answer again (two of two would
    /// otherwise lose their quorum to a joiner that died), then hands over to the server.
    fn fatal(&self, message: &str) {
        self.leave_group(FATAL_LEAVE_WAIT);
        self.shared.app.fatal(message);
    }

    /// Asks the group to remove this member and waits, up to `wait`, until it is out of
    /// the primary component.
    fn leave_group(&self, wait: Duration) {
        leave_group(&self.shared, wait);
    }

    /// Stops the group member and the dispatcher of the last connection, if they run.
    fn stop_group_threads(&self) {
        if let Some(mut runner) = lock(&self.runner).take() {
            runner.shutdown();
        }
        if let Some(dispatcher) = lock(&self.dispatcher).take() {
            let _ = dispatcher.join();
        }
    }

    /// Leaves the cluster: every `recv` returns after the final view.
    pub fn disconnect(&self) {
        let last_member = {
            let mut inner = lock(&self.shared.inner);
            let last = inner.connected && inner.primary && inner.members.len() <= 1;
            if inner.connected {
                inner.last_member_on_leave = Some(last);
                inner.leaving = true;
            }
            last
        };
        self.leave_group(DISCONNECT_LEAVE_WAIT);
        self.stop_group_threads();
        // Left cleanly: the next start joins as a new member.
        forget_membership(&self.shared);
        let mut inner = lock(&self.shared.inner);
        if inner.connected {
            inner.close_with_final_view();
            inner.runner = None;
            drop(inner);
            self.save_final_state(last_member);
        }
        self.shared.changed.notify_all();
    }

    /// Stops everything and waits for the threads. Safe to call more than once.
    pub fn shutdown(&self) {
        self.disconnect();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut inner = lock(&self.shared.inner);
        while !inner.queue.is_empty() && Instant::now() < deadline {
            let (guard, _) = self
                .shared
                .changed
                .wait_timeout(inner, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
        let last_member = inner.last_member_on_leave.take();
        drop(inner);
        for thread in lock(&self.threads).drain(..) {
            let _ = thread.join();
        }
        if let Some(receiver) = lock(&self.ist_receiver).take() {
            let _ = receiver.join();
        }
        // The appliers have finished: save the final committed position.
        if let Some(last_member) = last_member {
            self.save_final_state(last_member);
        }
    }

    /// Sends the server's state transfer request to the group, then holds this applier
    /// (and so the order of events) until the server reports the snapshot in place.
    fn request_state(&self) -> bool {
        let shared = &self.shared;
        let Some(sst_request) = shared.app.sst_request() else {
            // Galera's first words, which DBAs and the test suites look for.
            self.fatal(
                "Will never receive state. Need to abort. The server could not prepare a \
                 state transfer (see its error above): this node cannot join without one; fix \
                 the cause and restart it",
            );
            return false;
        };
        // IST can continue the server's own position if it is in this cluster's history.
        let (cluster, start_position) = {
            let inner = lock(&shared.inner);
            (inner.cluster, inner.start_position)
        };
        let ist_from = start_position
            .filter(|h| h.cluster == cluster && h.seqno.is_defined())
            .map_or(Seqno::UNDEFINED, |h| h.seqno);
        if ist_from.is_defined() {
            let message = format!("asking for state from {ist_from} (IST if a donor holds it)");
            shared.app.log(LogLevel::Info, &message);
        }
        if sst_request.is_empty() && !self.take_own_state(cluster, ist_from) {
            return false;
        }
        transfer::send_state_request(shared, sst_request.clone(), ist_from);
        let mut inner = lock(&shared.inner);
        loop {
            let Some(joining) = inner.joining.as_mut() else {
                return true;
            };
            if joining.received.is_some() {
                return true;
            }
            if std::mem::take(&mut joining.request_again) {
                drop(inner);
                transfer::send_state_request(shared, sst_request.clone(), ist_from);
                inner = lock(&shared.inner);
                continue;
            }
            if inner.closing || !inner.connected {
                return true;
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
    }

    /// A server that is already running (connected again at runtime, after `SET GLOBAL
    /// wsrep_cluster_address`) asks for no snapshot: its own state is the snapshot, and
    /// only IST can bring the rest. False, after a fatal error, when this node has no
    /// position in the cluster's history to continue by IST.
    fn take_own_state(&self, cluster: Uuid, position: Seqno) -> bool {
        if !position.is_defined() {
            self.fatal(
                "the running server asked for no snapshot (its SST method cannot run on a \
                 live server) and this node has no position in this cluster's history to \
                 continue by IST; restart it to join by SST",
            );
            return false;
        }
        let mut inner = lock(&self.shared.inner);
        // The server turns JOINED on a primary view at or past the position it connected
        // at; with no snapshot to report, that view is given once IST caught up.
        let my_index = inner
            .members
            .iter()
            .position(|m| m.uuid == inner.own)
            .map_or(-1, |i| i as i32);
        let view = ViewInfo {
            state_id: Gtid {
                cluster,
                seqno: inner.joining.as_ref().map_or(position, |j| j.join_seqno),
            },
            view_id: inner.view_id,
            primary: true,
            members: inner.members.clone(),
            my_index,
            proto_ver: PROTOCOL_VERSION,
        };
        if let Some(joining) = inner.joining.as_mut() {
            joining.continue_own_state(cluster, position);
            joining.rejoin_view = Some(view);
        }
        true
    }

    /// Serves a joiner: once everything ordered before its request is committed, the node
    /// goes DONOR and the server starts the snapshot; `sst_sent` ends it.
    fn donate(
        &self,
        ctx: RecvContext,
        request: &StateRequest,
        wait_for: Seqno,
        bypass: Option<Gtid>,
    ) -> bool {
        if bypass.is_none() {
            let monitors = self.monitors();
            while !monitors
                .apply
                .wait_left(wait_for, Duration::from_millis(200))
            {
                if lock(&self.shared.inner).closing {
                    return true;
                }
            }
        }
        {
            let mut inner = lock(&self.shared.inner);
            inner.state = NodeState::Donor;
            set_group_state(&inner, NodeState::Donor);
        }
        let (state, started) = match bypass {
            Some(joiner_position) => {
                let started =
                    self.shared
                        .app
                        .sst_donate(ctx, &request.sst_request, joiner_position, true);
                (joiner_position, started)
            }
            None => {
                let state = self.last_committed();
                let started = self
                    .shared
                    .app
                    .sst_donate(ctx, &request.sst_request, state, false);
                (state, started)
            }
        };
        if !started {
            // The server refused to start the transfer (a request it finds unsafe, say; it
            // logged why): this node is a donor no more, and the joiner, which would wait for
            // a snapshot that never comes, is told.
            self.sst_sent(state, -ECANCELED);
        }
        true
    }

    /// The donor's server finished (or failed) sending its snapshot.
    pub fn sst_sent(&self, state: Gtid, rcode: i32) {
        let joiner = lock(&self.shared.inner).donating_to.take();
        if rcode != 0 {
            // Galera's words, which DBAs and the test suites look for.
            let message = format!("State transfer to the joiner failed: {rcode} (at {state})");
            self.shared.app.log(LogLevel::Warning, &message);
            // The joiner would wait for a snapshot that never comes: it is told, and stops.
            let runner = lock(&self.shared.inner).runner.clone();
            if let (Some(joiner), Some(runner)) = (joiner, runner) {
                let _ = runner.transfer_failed(joiner);
            }
        }
        let mut inner = lock(&self.shared.inner);
        if inner.state == NodeState::Donor && inner.desync_count == 0 {
            inner.state = NodeState::Joined;
            set_group_state(&inner, NodeState::Joined);
        }
        drop(inner);
        self.shared.changed.notify_all();
    }

    /// The joiner's server has its snapshot, at `state`.
    pub fn sst_received(&self, state: Gtid, rcode: i32) -> Result<(), ReplicatorError> {
        let mut inner = lock(&self.shared.inner);
        let cluster = inner.cluster;
        let Some(joining) = inner.joining.as_mut() else {
            return Err(ReplicatorError::NotConnected);
        };
        if rcode != 0 && !joining.ist_only {
            // The server's snapshot script failed: no state will come from it, and asking
            // again cannot restart the server's receiving side.
            drop(inner);
            let error = ReplicatorError::StateTransferFailed { rcode };
            self.fatal(&error.to_string());
            return Err(error);
        }
        if rcode != 0 || state.cluster != cluster || !state.seqno.is_defined() {
            drop(inner);
            let message = format!(
                "state transfer failed (code {rcode}, position {state}, cluster {cluster}); \
                 asking again"
            );
            self.shared.app.log(LogLevel::Error, &message);
            return Err(ReplicatorError::NotConnected);
        }
        joining.received = Some(state);
        drop(inner);
        self.shared.changed.notify_all();
        Ok(())
    }

    /// An applier thread's loop: runs ordered actions until the node closes.
    pub fn recv(&self, ctx: RecvContext) -> Result<(), ReplicatorError> {
        let shared = &self.shared;
        loop {
            let event = {
                let mut inner = lock(&shared.inner);
                loop {
                    if let Some(front) = inner.queue.front() {
                        let held = front
                            .ordered_seqno()
                            .is_some_and(|seqno| inner.pause.holds(seqno));
                        let free = if front.is_serial() {
                            inner.applying_now == 0 && !inner.serial_running && !held
                        } else {
                            !inner.serial_running && !held
                        };
                        if free {
                            break;
                        }
                    } else if inner.votes.inconsistent && !inner.connected {
                        return Err(ReplicatorError::Inconsistent(
                            "this node left the cluster: its data is inconsistent".into(),
                        ));
                    } else if inner.closing || !inner.connected {
                        return Err(ReplicatorError::NotConnected);
                    }
                    inner = shared
                        .changed
                        .wait(inner)
                        .unwrap_or_else(|p| p.into_inner());
                }
                let event = inner.queue.pop_front().expect("front exists");
                if let Some(seqno) = event.ordered_seqno() {
                    inner.pause.started(seqno);
                }
                if event.is_serial() {
                    inner.serial_running = true;
                    inner.ordered_serial_running = event.ordered_seqno().is_some();
                } else {
                    inner.applying_now += 1;
                }
                event
            };
            let serial = event.is_serial();
            let mut exit_loop = false;
            let ok = self.run_event(ctx, event, &mut exit_loop);
            {
                let mut inner = lock(&shared.inner);
                if serial {
                    inner.serial_running = false;
                    inner.ordered_serial_running = false;
                } else {
                    inner.applying_now -= 1;
                }
            }
            shared.changed.notify_all();
            self.report_progress();
            if !ok {
                // After a lost consistency vote the server fails the seqno it voted on;
                // this applier stays to hand it the final view of a disconnected node.
                if lock(&shared.inner).votes.inconsistent {
                    continue;
                }
                shared.app.log(
                    LogLevel::Error,
                    "the server failed to apply an ordered action",
                );
                return Err(ReplicatorError::NotConnected);
            }
            if exit_loop {
                return Ok(());
            }
        }
    }

    fn run_event(&self, ctx: RecvContext, event: RecvEvent, exit_loop: &mut bool) -> bool {
        let app = &self.shared.app;
        match event {
            RecvEvent::Connected(view) => app.connected(&view),
            RecvEvent::Synced => {
                app.synced();
                true
            }
            RecvEvent::RequestState => self.request_state(),
            RecvEvent::Donate {
                request,
                wait_for,
                bypass,
            } => self.donate(ctx, &request, wait_for, bypass),
            RecvEvent::Skip { seqno } => {
                let monitors = self.monitors();
                monitors.apply.enter_regardless(seqno, seqno.prev());
                monitors.commit.enter_regardless(seqno, seqno.prev());
                monitors.commit.leave(seqno);
                monitors.apply.leave(seqno);
                true
            }
            RecvEvent::View { view, ordered } => {
                if !ordered {
                    return app.view(ctx, &view);
                }
                let monitors = self.monitors();
                let seqno = view.state_id.seqno;
                monitors.apply.enter_regardless(seqno, seqno.prev());
                monitors.commit.enter_regardless(seqno, seqno.prev());
                let ok = app.view(ctx, &view);
                monitors.commit.leave(seqno);
                monitors.apply.leave(seqno);
                ok
            }
            RecvEvent::Apply {
                seqno,
                depends_on,
                write_set,
                failed,
            } => {
                let monitors = self.monitors();
                let last_applied = monitors.apply.last_left();
                {
                    let mut inner = lock(&self.shared.inner);
                    let window = &mut inner.window;
                    window
                        .apply_window
                        .record(seqno.0.saturating_sub(last_applied.0).max(0) as u64);
                    window
                        .apply_out_of_order_entry
                        .record(seqno > last_applied.next());
                    if depends_on > last_applied {
                        inner.counters.apply_waits += 1;
                    }
                }
                monitors.apply.enter_regardless(seqno, depends_on);
                let cluster = {
                    let mut inner = lock(&self.shared.inner);
                    inner.entered_apply.insert(seqno);
                    inner.cluster
                };
                let action = ApplyAction {
                    meta: Meta {
                        gtid: Gtid { cluster, seqno },
                        source: write_set.source,
                        trx_id: write_set.trx_id,
                        conn_id: write_set.conn_id,
                        depends_on,
                    },
                    flags: if failed {
                        write_set.flags | flags::ROLLBACK
                    } else {
                        write_set.flags
                    },
                    data: &write_set.data,
                };
                let applying = Instant::now();
                let ok = app.apply(ctx, &action, exit_loop);
                if write_set.data.len() >= LARGE_WRITE_SET_BYTES {
                    let message = format!(
                        "large write-set {seqno}: applied and committed in {:.1?}",
                        applying.elapsed()
                    );
                    self.shared.app.log(LogLevel::Info, &message);
                }
                // The application leaves commit order inside apply; make sure the apply
                // monitor is left even if it did not.
                if lock(&self.shared.inner).entered_apply.remove(&seqno) {
                    monitors.apply.leave(seqno);
                }
                ok
            }
        }
    }

    fn monitors(&self) -> Arc<Monitors> {
        lock(&self.shared.monitors)
            .clone()
            .expect("monitors exist once a view was delivered")
    }

    fn report_progress(&self) {
        let committed = self.last_committed().seqno;
        let inner = lock(&self.shared.inner);
        if let Some(runner) = inner.runner.as_ref() {
            let _ = runner.report_committed(inner.purge_floor(committed));
            let _ = runner.report_apply_queue(inner.queue.len() as u64);
        }
    }

    /// Adds a key to a local transaction (created on first use).
    pub fn append_key(&self, trx_id: u64, parts: Vec<Vec<u8>>, key_type: KeyType) {
        let mut inner = lock(&self.shared.inner);
        let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
        trx.keys.push(Key { parts, key_type });
    }

    /// Appends row data to a local transaction (pieces are joined in order).
    pub fn append_data(&self, trx_id: u64, data: &[u8]) {
        let mut inner = lock(&self.shared.inner);
        let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
        trx.data.extend_from_slice(data);
    }

    /// Replicates and certifies a local transaction.
    pub fn certify(&self, conn_id: u64, trx_id: u64, trx_flags: u32) -> CertifyOutcome {
        self.replicate(conn_id, trx_id, trx_flags, false)
    }

    fn replicate(&self, conn_id: u64, trx_id: u64, trx_flags: u32, toi: bool) -> CertifyOutcome {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let ready = inner.primary && matches!(inner.state, NodeState::Synced | NodeState::Donor);
        let own = inner.own;
        let last_seen = self.last_committed_locked();
        let Some(trx) = inner.trxs.get_mut(&trx_id) else {
            return CertifyOutcome::NotOrdered;
        };
        if trx.aborted_by.is_some() || !ready {
            return CertifyOutcome::NotOrdered;
        }
        trx.conn_id = conn_id;
        trx.flags = trx_flags;
        trx.last_seen = last_seen;
        // Encoded from the record, which keeps keys and data: a BF-aborted transaction is
        // replayed from it.
        let write_set = WriteSetView {
            source: own,
            conn_id,
            trx_id,
            last_seen,
            flags: trx_flags,
            keys: &trx.keys,
            data: &trx.data,
        };
        let bytes = write_set.to_bytes();
        let limit = shared.max_write_set_bytes.load(Ordering::Relaxed);
        if bytes.len() as u64 > limit {
            let size = bytes.len() as u64;
            inner.counters.size_exceeded += 1;
            drop(inner);
            let message = format!(
                "transaction {trx_id}: write-set of {size} bytes exceeds repl.max_ws_size = \
                 {limit}; nothing was replicated (raise wsrep_max_ws_size, or replicate it in \
                 fragments with wsrep_trx_fragment_size)"
            );
            shared.app.log(LogLevel::Warning, &message);
            return CertifyOutcome::SizeExceeded { size, limit };
        }
        let key_bytes: usize = write_set
            .keys
            .iter()
            .flat_map(|key| key.parts.iter())
            .map(Vec::len)
            .sum();
        let (key_count, data_len) = (write_set.keys.len(), write_set.data.len());
        trx.submitted = true;
        let counters = &mut inner.counters;
        counters.replicated += 1;
        counters.replicated_bytes += bytes.len() as u64;
        counters.repl_keys += key_count as u64;
        counters.repl_keys_bytes += key_bytes as u64;
        counters.repl_data_bytes += data_len as u64;
        let in_flight = inner.write_sets_in_flight();
        inner.window.send_queue.record(in_flight as u64);
        let Some(runner) = inner.runner.clone() else {
            return CertifyOutcome::NotOrdered;
        };
        // Never block on the transport while holding the state lock: the dispatcher needs
        // it to hand out verdicts.
        drop(inner);
        let sent_at = Instant::now();
        let Ok(ticket) = runner.submit(bytes) else {
            return CertifyOutcome::NotOrdered;
        };
        let mut inner = lock(&shared.inner);
        let mut cancel_tried = false;
        // Wait for the dispatcher to order and certify it.
        let outcome = loop {
            let trx = inner
                .trxs
                .get(&trx_id)
                .expect("a waiting trx stays registered");
            if let Some(outcome) = trx.outcome {
                inner.window.replication_latency.record(sent_at.elapsed());
                break Some(outcome);
            }
            // Withdrawn: this node fell out of the order (see `withdraw_waiting`).
            if inner.closing || !inner.connected || !trx.submitted {
                break None;
            }
            // Given up by the group before it left this node (see `withdraw_abandoned`).
            if let Some(at) = inner.abandoned.iter().position(|t| *t == ticket) {
                inner.abandoned.remove(at);
                if let Some(trx) = inner.trxs.get_mut(&trx_id) {
                    trx.submitted = false;
                }
                break None;
            }
            if trx.aborted_by.is_some() && !cancel_tried {
                // Brute-force aborted while flow control may hold the write-set back: an
                // applier is waiting for this transaction's locks, so give up now if the
                // write-set never left. If it did leave, it will be ordered (nothing holds
                // sent write-sets) and the transaction is replayed.
                cancel_tried = true;
                drop(inner);
                let cancelled = runner.cancel(ticket).unwrap_or(false);
                inner = lock(&shared.inner);
                if cancelled {
                    if let Some(trx) = inner.trxs.get_mut(&trx_id) {
                        trx.submitted = false;
                    }
                    break None;
                }
                continue;
            }
            inner = shared
                .changed
                .wait(inner)
                .unwrap_or_else(|p| p.into_inner());
        };
        let Some((seqno, verdict)) = outcome else {
            return CertifyOutcome::NotOrdered;
        };
        // Ordered after the pause point: the server is reading its data as of that point,
        // so this transaction commits (or reports its failure) only after `resume`.
        let (guard, gate) = self.pass_pause_gate(inner, seqno, Some(trx_id));
        inner = guard;
        if gate == GatePassage::Closing {
            return CertifyOutcome::NotOrdered;
        }
        let cluster = inner.cluster;
        let own = inner.own;
        let aborted_by = inner.trxs.get(&trx_id).and_then(|t| t.aborted_by);
        drop(inner);
        let meta = |depends_on| Meta {
            gtid: Gtid { cluster, seqno },
            source: own,
            trx_id,
            conn_id,
            depends_on,
        };
        let monitors = self.monitors();
        match verdict {
            Verdict::Fail(_) => {
                monitors.apply.self_cancel(seqno);
                lock(&shared.inner).counters.cert_failures += 1;
                CertifyOutcome::Failed(meta(Seqno::UNDEFINED))
            }
            Verdict::Pass { depends_on } => {
                if aborted_by.is_some_and(|bf| bf < seqno) {
                    return CertifyOutcome::BfAborted(meta(depends_on));
                }
                let depends_on = if toi { seqno.prev() } else { depends_on };
                if monitors.apply.enter(seqno, depends_on).is_err() {
                    return CertifyOutcome::BfAborted(meta(depends_on));
                }
                lock(&shared.inner).entered_apply.insert(seqno);
                if toi {
                    monitors.commit.enter_regardless(seqno, seqno.prev());
                    lock(&shared.inner).toi_by_conn.insert(conn_id, seqno);
                }
                CertifyOutcome::Committable(meta(depends_on))
            }
        }
    }

    /// Waits for the seqno's turn to commit. `Err` if the transaction was BF-aborted.
    pub fn commit_order_enter(&self, seqno: Seqno) -> Result<(), BfAborted> {
        let monitors = self.monitors();
        let last_committed = monitors.commit.last_left();
        lock(&self.shared.inner)
            .window
            .commit_window
            .record(seqno.0.saturating_sub(last_committed.0).max(0) as u64);
        loop {
            match monitors
                .commit
                .enter_timeout(seqno, seqno.prev(), STALL_REPORT_AFTER)
            {
                Ok(()) => return Ok(()),
                Err(order::EnterError::Interrupted(_)) => return Err(BfAborted(seqno)),
                Err(order::EnterError::TimedOut { .. }) => {
                    let blocker = monitors.commit.last_left().next();
                    let message = format!(
                        "commit of {seqno} has waited {STALL_REPORT_AFTER:?} for {blocker}: {}",
                        self.describe(blocker)
                    );
                    self.shared.app.log(LogLevel::Warning, &message);
                }
            }
        }
    }

    /// What this node knows about `seqno`, for stall reports.
    fn describe(&self, seqno: Seqno) -> String {
        let inner = lock(&self.shared.inner);
        let local = inner.trxs.iter().find_map(|(id, trx)| {
            trx.outcome
                .filter(|(s, _)| *s == seqno)
                .map(|(_, verdict)| {
                    format!(
                        "local transaction {id} ({verdict:?}, aborted by {:?})",
                        trx.aborted_by
                    )
                })
        });
        let queued = inner.queue.iter().position(|event| {
            matches!(event, RecvEvent::Apply { seqno: s, .. } if *s == seqno)
                || matches!(event, RecvEvent::View { view, .. } if view.state_id.seqno == seqno)
        });
        let applying = inner.entered_apply.contains(&seqno);
        format!(
            "{}; queued for appliers at {queued:?}; in the apply monitor: {applying}; \
             appliers busy {}, serial event running {}, paused at {:?}",
            local.unwrap_or_else(|| "no local transaction".into()),
            inner.applying_now,
            inner.serial_running,
            inner.pause.point()
        )
    }

    /// Waits while `pause` holds `seqno` back, then records it as started. A local
    /// transaction (`trx_id`) that is brute-force aborted meanwhile stops waiting: it has
    /// not started, and it replays (through this gate again) or rolls back.
    fn pass_pause_gate<'a>(
        &self,
        mut inner: MutexGuard<'a, Inner>,
        seqno: Seqno,
        trx_id: Option<u64>,
    ) -> (MutexGuard<'a, Inner>, GatePassage) {
        loop {
            if !inner.pause.holds(seqno) {
                inner.pause.started(seqno);
                return (inner, GatePassage::Passed);
            }
            if inner.closing || !inner.connected {
                return (inner, GatePassage::Closing);
            }
            // Only an abort by an earlier seqno counts: a later one could not run anyway.
            let aborted = trx_id
                .and_then(|id| inner.trxs.get(&id))
                .and_then(|trx| trx.aborted_by)
                .is_some_and(|bf| bf < seqno);
            if aborted {
                return (inner, GatePassage::Aborted);
            }
            inner = self
                .shared
                .changed
                .wait(inner)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Lets the next seqno commit; the seqno counts as committed. `failure` is the server's
    /// error when it failed to apply the seqno: the members vote on it first (see
    /// `vote.rs`), and an error says this node lost the vote and is leaving the cluster.
    pub fn commit_order_leave(
        &self,
        seqno: Seqno,
        failure: Option<&[u8]>,
    ) -> Result<(), ReplicatorError> {
        let voted = match failure {
            Some(error) if !error.is_empty() => self.vote_on_failure(seqno, error),
            _ => Ok(()),
        };
        self.leave_commit_order(seqno);
        voted
    }

    fn leave_commit_order(&self, seqno: Seqno) {
        let monitors = self.monitors();
        monitors.commit.leave(seqno);
        let mut inner = lock(&self.shared.inner);
        let local = match inner
            .trxs
            .values_mut()
            .find(|t| t.outcome.is_some_and(|(s, _)| s == seqno))
        {
            Some(trx) => {
                trx.commit_done = true;
                true
            }
            None => false,
        };
        // A remote write-set leaves the apply monitor when its apply callback returns (in
        // `run_event`), after the server's whole commit: with the binary log on, the
        // server leaves commit order before the storage engine's commit is visible, and a
        // causal read (`sync_wait`, which waits on the apply monitor) must not count the
        // seqno done before a reader can see it.
        let entered = local && inner.entered_apply.remove(&seqno);
        if entered {
            let out_of_order = monitors.apply.last_left().next() != seqno;
            inner.window.apply_out_of_order_leave.record(out_of_order);
        }
        inner.counters.commits += 1;
        drop(inner);
        if entered {
            monitors.apply.leave(seqno);
        }
        self.shared.changed.notify_all();
    }

    /// Forgets a finished local transaction. An ordered seqno it never took through commit
    /// order (a rollback the server did not order) is consumed here: a seqno left behind
    /// would stop every later commit.
    ///
    /// After a streaming fragment the transaction stays: wsrep-lib releases the handle after
    /// every fragment and goes on with the same transaction id.
    pub fn release(&self, trx_id: u64) {
        let mut inner = lock(&self.shared.inner);
        if let Some(trx) = inner
            .trxs
            .get_mut(&trx_id)
            .filter(|t| t.continues_after_release())
        {
            trx.start_next_fragment();
            inner.counters.fragments_replicated += 1;
            return;
        }
        let Some(trx) = inner.trxs.remove(&trx_id) else {
            return;
        };
        let Some((seqno, verdict)) = trx.outcome.filter(|_| !trx.commit_done) else {
            return;
        };
        let held_apply = inner.entered_apply.remove(&seqno);
        drop(inner);
        let Some(monitors) = lock(&self.shared.monitors).clone() else {
            return;
        };
        if !monitors.commit.is_left(seqno) {
            monitors.commit.self_cancel(seqno);
        }
        if held_apply {
            monitors.apply.leave(seqno);
        } else if verdict.is_pass() && !monitors.apply.is_left(seqno) {
            monitors.apply.self_cancel(seqno);
        }
        // The server rolled it back after it was ordered (a brute-force abort, a streaming
        // rollback): its seqno is passed over in both monitors above, so nothing waits on
        // it. A note, as in Galera, where this is routine.
        self.shared.app.log(
            LogLevel::Info,
            &format!("transaction {trx_id} released without committing its seqno {seqno}"),
        );
        self.shared.changed.notify_all();
    }

    /// Rolls back streaming transaction `trx_id` everywhere: orders a rollback write-set
    /// (`ROLLBACK|PA_UNSAFE`, carrying `data`) that every node, this one included, delivers
    /// to its appliers. It does not wait for the order, and flow control does not hold it.
    /// `Err` if it could not be sent; wsrep-lib then sends it again later.
    pub fn rollback(&self, trx_id: u64, data: &[u8]) -> Result<(), ReplicatorError> {
        let mut inner = lock(&self.shared.inner);
        if !inner.primary || !inner.connected {
            return Err(ReplicatorError::NotConnected);
        }
        let conn_id = match inner.trxs.get_mut(&trx_id) {
            Some(trx) => {
                trx.rolled_back = true;
                trx.conn_id
            }
            None => 0,
        };
        let write_set = WriteSet {
            source: inner.own,
            conn_id,
            trx_id,
            last_seen: self.last_committed_locked(),
            flags: flags::ROLLBACK | flags::PA_UNSAFE,
            keys: Vec::new(),
            data: Bytes::copy_from_slice(data),
        };
        let Some(runner) = inner.runner.clone() else {
            return Err(ReplicatorError::NotConnected);
        };
        inner.counters.streaming_rollbacks += 1;
        drop(inner);
        runner
            .submit_urgent(write_set.to_bytes())
            .map(|_| ())
            .map_err(|_| ReplicatorError::NotConnected)
    }

    /// Sets `repl.max_ws_size`: write-sets larger than this are refused
    /// ([`CertifyOutcome::SizeExceeded`]).
    pub fn set_max_write_set_bytes(&self, limit: u64) {
        self.shared
            .max_write_set_bytes
            .store(limit, Ordering::Relaxed);
    }

    /// Re-applies a BF-aborted local transaction on the caller's thread.
    pub fn replay(&self, trx_id: u64, ctx: RecvContext) -> Result<(), ReplicatorError> {
        let (seqno, depends_on, trx_flags, data, conn_id, cluster, own, holds_slot) = {
            let inner = lock(&self.shared.inner);
            let trx = inner
                .trxs
                .get(&trx_id)
                .ok_or(ReplicatorError::UnknownTransaction(trx_id))?;
            let Some((seqno, Verdict::Pass { depends_on })) = trx.outcome else {
                return Err(ReplicatorError::UnknownTransaction(trx_id));
            };
            // A victim aborted after certification already holds its apply slot; one aborted
            // while waiting for it does not.
            let holds_slot = inner.entered_apply.contains(&seqno);
            let (cluster, own) = (inner.cluster, inner.own);
            let (trx_flags, data, conn_id) = (trx.flags, trx.data.clone(), trx.conn_id);
            // A victim held by `pause` replays only after `resume`.
            let (inner, passage) = self.pass_pause_gate(inner, seqno, None);
            drop(inner);
            if passage == GatePassage::Closing {
                return Err(ReplicatorError::NotConnected);
            }
            (
                seqno, depends_on, trx_flags, data, conn_id, cluster, own, holds_slot,
            )
        };
        let monitors = self.monitors();
        if !holds_slot {
            monitors.apply.enter_regardless(seqno, depends_on);
            lock(&self.shared.inner).entered_apply.insert(seqno);
        }
        let action = ApplyAction {
            meta: Meta {
                gtid: Gtid { cluster, seqno },
                source: own,
                trx_id,
                conn_id,
                depends_on,
            },
            flags: trx_flags,
            data: &data,
        };
        let mut exit_loop = false;
        let ok = self.shared.app.apply(ctx, &action, &mut exit_loop);
        if lock(&self.shared.inner).entered_apply.remove(&seqno) {
            monitors.apply.leave(seqno);
        }
        lock(&self.shared.inner).counters.replays += 1;
        if ok {
            Ok(())
        } else {
            Err(ReplicatorError::NotConnected)
        }
    }

    /// Brute-force aborts local transaction `victim` on behalf of the write-set at `bf_seqno`.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> AbortOutcome {
        let mut inner = lock(&self.shared.inner);
        let Some(trx) = inner.trxs.get_mut(&victim) else {
            return AbortOutcome::Aborted;
        };
        if let Some((seqno, _)) = trx.outcome {
            if seqno < bf_seqno {
                return AbortOutcome::NotAllowed(seqno);
            }
            trx.aborted_by = Some(bf_seqno);
            inner.counters.bf_aborts += 1;
            drop(inner);
            if let Some(monitors) = lock(&self.shared.monitors).clone() {
                // Interrupt exactly the wait the victim is in (or will be in next). An
                // interrupt left on the commit monitor for a victim stopped at the apply
                // monitor would later abort its own replay.
                if !monitors.apply.interrupt(seqno) {
                    monitors.commit.interrupt(seqno);
                }
            }
            // Or the victim waits at the pause gate.
            self.shared.changed.notify_all();
            return AbortOutcome::Aborted;
        }
        trx.aborted_by = Some(bf_seqno);
        inner.counters.bf_aborts += 1;
        drop(inner);
        // Wake a victim waiting in `certify`.
        self.shared.changed.notify_all();
        AbortOutcome::Aborted
    }

    /// Starts a total-order-isolation statement: returns once everything before it has
    /// committed, holding commit order until [`Replicator::to_execute_end`].
    pub fn to_execute_start(
        &self,
        conn_id: u64,
        keys: Vec<Vec<Vec<u8>>>,
        data: &[u8],
        trx_flags: u32,
    ) -> CertifyOutcome {
        let trx_id = u64::MAX - conn_id;
        {
            let mut inner = lock(&self.shared.inner);
            let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
            trx.keys = keys
                .into_iter()
                .map(|parts| Key {
                    parts,
                    key_type: KeyType::Exclusive,
                })
                .collect();
            trx.data = data.to_vec();
        }
        let outcome = self.replicate(conn_id, trx_id, trx_flags | flags::ISOLATION, true);
        if !matches!(outcome, CertifyOutcome::Committable(_)) {
            self.release(trx_id);
        }
        outcome
    }

    /// Ends a total-order-isolation statement; `failure` is the server's error if the
    /// statement failed here (voted on, as in `commit_order_leave`).
    pub fn to_execute_end(
        &self,
        conn_id: u64,
        failure: Option<&[u8]>,
    ) -> Result<(), ReplicatorError> {
        let seqno = lock(&self.shared.inner).toi_by_conn.remove(&conn_id);
        let outcome = match seqno {
            Some(seqno) => self.commit_order_leave(seqno, failure),
            None => Ok(()),
        };
        self.release(u64::MAX - conn_id);
        outcome
    }

    fn last_committed_locked(&self) -> Seqno {
        lock(&self.shared.monitors)
            .as_ref()
            .map_or(Seqno::UNDEFINED, |m| m.apply.last_left())
    }

    /// The highest seqno applied and committed with everything before it.
    pub fn last_committed(&self) -> Gtid {
        let cluster = lock(&self.shared.inner).cluster;
        Gtid {
            cluster,
            seqno: self.last_committed_locked(),
        }
    }

    /// Waits until `upto` is committed here; without `upto`, a causal read: waits until
    /// everything the group had ordered when it was called (anywhere in the cluster) is
    /// committed here.
    pub fn sync_wait(
        &self,
        upto: Option<Seqno>,
        timeout: Option<Duration>,
    ) -> Result<Gtid, ReplicatorError> {
        let timeout = timeout.unwrap_or_else(|| *lock(&self.shared.causal_read_timeout));
        let deadline = Instant::now() + timeout;
        {
            // As Galera's (a history UUID mismatch): fail at once rather than wait out the
            // timeout, since the snapshot may itself wait for this reader (a mysqldump SST
            // asks the joiner's variables).
            let inner = lock(&self.shared.inner);
            let own_history = inner
                .start_position
                .is_some_and(|p| p.cluster == inner.cluster);
            if inner.joining.is_some() && !own_history {
                return Err(ReplicatorError::NoStateYet);
            }
        }
        let target = match upto {
            Some(seqno) => seqno,
            None => self.causal_point(deadline, timeout)?,
        };
        let Some(monitors) = lock(&self.shared.monitors).clone() else {
            return Err(ReplicatorError::NotConnected);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if monitors.apply.wait_left(target, left) {
            Ok(self.last_committed())
        } else {
            Err(ReplicatorError::Timeout(timeout))
        }
    }

    /// Asks the group (through the Raft leader) for the last seqno it has ordered.
    fn causal_point(&self, deadline: Instant, timeout: Duration) -> Result<Seqno, ReplicatorError> {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let Some(runner) = inner.runner.clone().filter(|_| inner.primary) else {
            return Err(ReplicatorError::NotConnected);
        };
        inner.next_causal_id += 1;
        let id = inner.next_causal_id;
        inner.causal.insert(id, None);
        inner.counters.causal_reads += 1;
        drop(inner);
        if runner.causal_read(id).is_err() {
            lock(&shared.inner).causal.remove(&id);
            return Err(ReplicatorError::NotConnected);
        }
        let mut inner = lock(&shared.inner);
        loop {
            if let Some(Some(seqno)) = inner.causal.get(&id) {
                let seqno = *seqno;
                inner.causal.remove(&id);
                return Ok(seqno);
            }
            let now = Instant::now();
            if inner.closing || !inner.connected || now >= deadline {
                inner.causal.remove(&id);
                return Err(if now >= deadline {
                    ReplicatorError::Timeout(timeout)
                } else {
                    ReplicatorError::NotConnected
                });
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, deadline - now)
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
    }

    /// Stops sending flow control (`wsrep_desync=ON`, FLUSH TABLES WITH READ LOCK).
    pub fn desync(&self) {
        let mut inner = lock(&self.shared.inner);
        inner.desync_count += 1;
        if inner.state == NodeState::Synced {
            inner.state = NodeState::Donor;
            if let Some(runner) = inner.runner.as_ref() {
                let _ = runner.set_local_state(NodeState::Donor);
            }
        }
    }

    /// Undoes one `desync`; back to SYNCED when the last one is undone.
    pub fn resync(&self) {
        let mut inner = lock(&self.shared.inner);
        inner.desync_count = inner.desync_count.saturating_sub(1);
        if inner.desync_count == 0 && inner.state == NodeState::Donor {
            inner.state = NodeState::Synced;
            if let Some(runner) = inner.runner.as_ref() {
                let _ = runner.set_local_state(NodeState::Synced);
            }
        }
    }

    /// Pauses the node for a server that reads its own data as one state (FLUSH TABLES
    /// WITH READ LOCK, BACKUP STAGE, an rsync donor). Returns the pause point once every
    /// seqno up to it is committed and nothing is applying; nothing after it starts (no
    /// applier, local commit, replay or TOI) until [`Replicator::resume`].
    ///
    /// It waits as long as that takes, reporting every [`STALL_REPORT_AFTER`] what it waits
    /// for; it fails only when the node closes (the server then sees -1). A node already
    /// paused returns its point.
    pub fn pause(&self) -> Result<Seqno, ReplicatorError> {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let committed = self.last_committed_locked();
        let point = inner.pause.pause(committed);
        let started = Instant::now();
        let mut report_at = started + STALL_REPORT_AFTER;
        loop {
            if inner.closing || !inner.connected {
                inner.pause.resume();
                drop(inner);
                shared.changed.notify_all();
                return Err(ReplicatorError::NotConnected);
            }
            let running = inner.applying_now > 0 || inner.ordered_serial_running;
            if !running && self.last_committed_locked() >= point {
                break;
            }
            if Instant::now() >= report_at {
                report_at += STALL_REPORT_AFTER;
                let blocker = self.last_committed_locked().next();
                drop(inner);
                let message = format!(
                    "pause at {point} has waited {:.0?} for {blocker} to commit: {}",
                    started.elapsed(),
                    self.describe(blocker)
                );
                shared.app.log(LogLevel::Warning, &message);
                inner = lock(&shared.inner);
                continue;
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
        drop(inner);
        let message = format!(
            "paused at {point} (waited {:.1?} for earlier seqnos to commit)",
            started.elapsed()
        );
        shared.app.log(LogLevel::Info, &message);
        Ok(point)
    }

    /// Lifts [`Replicator::pause`]: what it held back runs.
    pub fn resume(&self) {
        lock(&self.shared.inner).pause.resume();
        self.shared.changed.notify_all();
    }

    /// Applies `SET GLOBAL wsrep_provider_options` changes to the running node: the group's
    /// timeouts and flow control, and the causal read timeout.
    pub fn reconfigure(
        &self,
        group: GroupConfig,
        causal_read_timeout: Duration,
    ) -> Result<(), ReplicatorError> {
        group
            .validate()
            .map_err(|error| ReplicatorError::Options(error.to_string()))?;
        *lock(&self.shared.causal_read_timeout) = causal_read_timeout;
        if let Some(runner) = lock(&self.shared.inner).runner.as_ref() {
            let _ = runner.reconfigure(group);
        }
        Ok(())
    }

    /// Cuts this node off from the group, or restores its links (`gmcast.isolate`, which
    /// MariaDB's tests and DBAs use to partition a node without touching the network).
    pub fn isolate(&self, isolated: bool) {
        self.shared.isolated.store(isolated, Ordering::Release);
        if let Some(runner) = lock(&self.shared.inner).runner.as_ref() {
            let _ = runner.isolate(isolated);
        }
    }

    /// Starts the averages over (`stats_reset`, run by `FLUSH STATUS`).
    pub fn reset_stats(&self) {
        let paused_ns = lock(&self.runner)
            .as_ref()
            .map_or(0, |r| r.status().flow.paused_ns);
        lock(&self.shared.inner).window = Window::new(paused_ns);
    }

    /// Status variables as (name without the `wsrep_` prefix, value).
    pub fn stats(&self) -> Vec<(&'static str, String)> {
        let committed = self.last_committed();
        let runner_status = lock(&self.runner).as_ref().map(|r| r.status());
        let inner = lock(&self.shared.inner);
        let c = &inner.counters;
        let flow = runner_status
            .as_ref()
            .map(|s| s.flow.clone())
            .unwrap_or_default();
        let incoming: Vec<&str> = inner.members.iter().map(|m| m.incoming.as_str()).collect();
        // Outside the primary component Galera's node is back to Initialized; its own state
        // returns with the primary component.
        let shown_state = if inner.primary || inner.state == NodeState::Closed {
            inner.state
        } else {
            NodeState::Open
        };
        let w = &inner.window;
        let float = |value: f64| format!("{value:.6}");
        let reach = lock(&self.shared.cache).reach();
        let in_flight = inner.write_sets_in_flight();
        let open_connections = inner
            .trxs
            .values()
            .map(|t| t.conn_id)
            .chain(inner.toi_by_conn.keys().copied())
            .collect::<HashSet<u64>>()
            .len();
        let (paused, stop_requested) = runner_status
            .as_ref()
            .map_or((false, false), |s| (s.paused, s.stop_requested));
        vec![
            ("local_state_uuid", inner.cluster.to_string()),
            ("protocol_version", "10".into()),
            ("last_committed", committed.seqno.0.to_string()),
            ("replicated", c.replicated.to_string()),
            ("replicated_bytes", c.replicated_bytes.to_string()),
            ("received", c.received.to_string()),
            ("received_bytes", c.received_bytes.to_string()),
            ("local_commits", c.commits.to_string()),
            ("local_cert_failures", c.cert_failures.to_string()),
            ("local_replays", c.replays.to_string()),
            ("causal_reads", c.causal_reads.to_string()),
            ("local_bf_aborts", c.bf_aborts.to_string()),
            ("repl_keys", c.repl_keys.to_string()),
            ("repl_keys_bytes", c.repl_keys_bytes.to_string()),
            ("repl_data_bytes", c.repl_data_bytes.to_string()),
            (
                "repl_other_bytes",
                c.replicated_bytes
                    .saturating_sub(c.repl_keys_bytes + c.repl_data_bytes)
                    .to_string(),
            ),
            ("local_send_queue", in_flight.to_string()),
            ("local_send_queue_max", w.send_queue.max().to_string()),
            ("local_send_queue_min", w.send_queue.min().to_string()),
            ("local_send_queue_avg", float(w.send_queue.mean())),
            ("local_recv_queue", inner.queue.len().to_string()),
            ("local_recv_queue_max", w.recv_queue.max().to_string()),
            ("local_recv_queue_min", w.recv_queue.min().to_string()),
            ("local_recv_queue_avg", float(w.recv_queue.mean())),
            // No write-set cache yet: nothing can be served by IST.
            ("local_cached_downto", reach.from.0.to_string()),
            (
                "ist_reach_seqnos",
                if reach.from.is_defined() {
                    (reach.to.0 - reach.from.0 + 1).to_string()
                } else {
                    "0".into()
                },
            ),
            ("ist_reach_seconds", float(reach.seconds)),
            ("gcache_disk_bytes", reach.disk_bytes.to_string()),
            ("flow_control_paused_ns", flow.paused_ns.to_string()),
            (
                "flow_control_paused",
                float(w.paused_fraction(flow.paused_ns)),
            ),
            ("flow_control_sent", flow.sent.to_string()),
            ("flow_control_recv", flow.recv.to_string()),
            ("flow_control_active", paused.to_string()),
            ("flow_control_requested", stop_requested.to_string()),
            ("cert_deps_distance", float(w.deps_distance.mean())),
            ("apply_oooe", float(w.apply_out_of_order_entry.fraction())),
            ("apply_oool", float(w.apply_out_of_order_leave.fraction())),
            ("apply_window", float(w.apply_window.mean())),
            ("apply_waits", c.apply_waits.to_string()),
            // Commits are strictly in seqno order.
            ("commit_oooe", float(0.0)),
            ("commit_oool", float(0.0)),
            ("commit_window", float(w.commit_window.mean())),
            ("cert_index_size", inner.cert_index_size.to_string()),
            ("cert_interval", float(w.cert_interval.mean())),
            ("open_transactions", inner.trxs.len().to_string()),
            ("streaming_transactions", inner.open_streams.0.to_string()),
            ("streaming_fragments", inner.open_streams.1.to_string()),
            (
                "local_fragments_replicated",
                c.fragments_replicated.to_string(),
            ),
            (
                "local_streaming_rollbacks",
                c.streaming_rollbacks.to_string(),
            ),
            ("local_size_exceeded", c.size_exceeded.to_string()),
            ("open_connections", open_connections.to_string()),
            ("evs_delayed", String::new()),
            ("evs_evict_list", String::new()),
            ("evs_repl_latency", w.replication_latency.render()),
            (
                "evs_state",
                if inner.members.is_empty() {
                    "GATHER"
                } else {
                    "OPERATIONAL"
                }
                .into(),
            ),
            ("gmcast_segment", "0".into()),
            ("protocol_application", PROTOCOL_VERSION.to_string()),
            ("protocol_replicator", "10".into()),
            ("protocol_gcs", "1".into()),
            ("desync_count", inner.desync_count.to_string()),
            (
                "raft_leader",
                u8::from(runner_status.as_ref().is_some_and(|s| s.leader)).to_string(),
            ),
            ("local_state", shown_state.wsrep_member_status().to_string()),
            ("local_state_comment", shown_state.comment().into()),
            ("cluster_weight", inner.members.len().to_string()),
            ("gcomm_uuid", inner.own.to_string()),
            ("incoming_addresses", incoming.join(",")),
            ("cluster_conf_id", inner.view_id.to_string()),
            ("cluster_size", inner.members.len().to_string()),
            ("cluster_state_uuid", inner.cluster.to_string()),
            (
                "cluster_status",
                if inner.primary {
                    "Primary"
                } else {
                    "non-Primary"
                }
                .into(),
            ),
            (
                "ready",
                if inner.state == NodeState::Synced {
                    "ON"
                } else {
                    "OFF"
                }
                .into(),
            ),
        ]
    }
}

fn new_trx() -> LocalTrx {
    LocalTrx {
        conn_id: 0,
        keys: Vec::new(),
        data: Vec::new(),
        flags: 0,
        outcome: None,
        aborted_by: None,
        submitted: false,
        commit_done: false,
        rolled_back: false,
        last_seen: Seqno::UNDEFINED,
    }
}

fn view_info(view: &View) -> ViewInfo {
    let members = view
        .members
        .iter()
        .map(|m| MemberOut {
            uuid: m.uuid,
            name: m.name.clone(),
            incoming: m.incoming.clone(),
        })
        .collect();
    ViewInfo {
        state_id: Gtid {
            cluster: view.cluster,
            seqno: view.seqno,
        },
        view_id: if view.primary {
            view.view_id as i64
        } else {
            -1
        },
        primary: view.primary,
        members,
        my_index: view.own_index.map_or(-1, |i| i as i32),
        proto_ver: PROTOCOL_VERSION,
    }
}

/// Everything the dispatcher thread owns.
struct Dispatcher {
    shared: Arc<Shared>,
    bootstrap: bool,
    certifier: Option<Certifier>,
    /// While joining: deliveries held until the state transfer is in place.
    held: Vec<Delivery>,
    /// Threads sending state transfer streams to joiners.
    senders: Vec<JoinHandle<()>>,
    /// A cache write failed (logged once, not per write-set).
    cache_failed: bool,
    /// The oldest cached seqno last reported to the group.
    cached_reported: Seqno,
    /// The commit cut the last write-set carried: every member had committed up to here.
    last_safe_seqno: Seqno,
    /// Members of the last primary view, by name, and by identity.
    view_names: Vec<String>,
    view_members: Vec<(Uuid, String)>,
    /// Members that left the primary view, by name, and the first seqno each may lack.
    absent: BTreeMap<String, Seqno>,
    /// The group membership (see `group::View::membership`) the certification state was
    /// built in (at bootstrap, or at the end of a state transfer).
    member_of: Option<u64>,
    /// The membership of the last view.
    membership: u64,
    /// Everything up to here is in the server already (its snapshot, or IST queued after
    /// it): a seqno delivered late is certified but not applied again.
    in_server_upto: Seqno,
    /// Whether `grastate.dat` says this node is the only member of the primary component.
    saved_sole_member: bool,
    /// The member identity last saved to come back after a crash (`membership_file`).
    saved_membership: Option<group::restart::SavedMembership>,
}

/// The dispatcher: takes deliveries in order, certifies, routes.
fn dispatch(shared: &Arc<Shared>, deliveries: &Receiver<Delivery>, bootstrap: bool) {
    let mut dispatcher = Dispatcher {
        shared: Arc::clone(shared),
        bootstrap,
        certifier: None,
        held: Vec::new(),
        senders: Vec::new(),
        cache_failed: false,
        cached_reported: Seqno::UNDEFINED,
        last_safe_seqno: Seqno::UNDEFINED,
        view_names: Vec::new(),
        view_members: Vec::new(),
        absent: BTreeMap::new(),
        member_of: None,
        membership: 0,
        in_server_upto: Seqno::UNDEFINED,
        saved_sole_member: false,
        saved_membership: membership_file_of(shared),
    };
    let mut left_the_group = false;
    loop {
        match deliveries.recv_timeout(Duration::from_millis(50)) {
            Ok(delivery) => {
                left_the_group |= matches!(delivery, Delivery::Closed);
                dispatcher.handle(delivery);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        dispatcher.try_finish_join();
        dispatcher.maybe_synced();
        let committed = lock(&shared.monitors)
            .as_ref()
            .map_or(Seqno::UNDEFINED, |m| m.apply.last_left());
        dispatcher.answer_vote_requests(committed);
        dispatcher.save_membership();
        shared.changed.notify_all();
    }
    for sender in dispatcher.senders.drain(..) {
        let _ = sender.join();
    }
    // Deliveries end after the member left the group (`Closed`) or `disconnect` stopped
    // it, unless the group member's thread died. A node that looks synced but takes no
    // part in the order would leave every commit waiting for certification forever: stop
    // instead, with the cause in the log.
    let stopped_on_purpose = {
        let inner = lock(&shared.inner);
        inner.closing || inner.leaving
    };
    if !left_the_group && !stopped_on_purpose {
        shared.app.fatal(
            "the group communication thread stopped unexpectedly (its error is logged above); \
             this node can no longer replicate and stops",
        );
    }
}

impl Dispatcher {
    fn handle(&mut self, delivery: Delivery) {
        if let Delivery::Abandoned { submit_ids } = &delivery {
            self.withdraw_abandoned(submit_ids);
        }
        if lock(&self.shared.inner).votes.inconsistent && !matches!(delivery, Delivery::Closed) {
            // Leaving after a lost vote: nothing more reaches the server but the end.
            return;
        }
        if let Delivery::TransferFailed { donor } = &delivery {
            // Whatever else waits: the snapshot this node waits for will not come.
            self.on_transfer_failed(donor);
            return;
        }
        if self.certifier.is_none() && !matches!(delivery, Delivery::View(_)) {
            if lock(&self.shared.inner).joining.is_some() {
                // Whom our own request went to, or that it must be asked again, cannot wait
                // for the state it asks for.
                if let Delivery::StateRequest {
                    joiner,
                    donor,
                    donor_uuid,
                    ..
                } = &delivery
                {
                    self.note_own_request(*joiner, donor, *donor_uuid);
                }
                self.held.push(delivery);
            }
            return;
        }
        match delivery {
            Delivery::View(view) => self.on_view(view),
            Delivery::WriteSet {
                seqno,
                local,
                safe_seqno,
                payload,
                ..
            } => {
                self.last_safe_seqno = self.last_safe_seqno.max(safe_seqno);
                let in_server = self.in_server_upto;
                if seqno == in_server {
                    // The last of a run that arrived after the snapshot already held it:
                    // said once, as applying them again would have overwritten later rows.
                    let message = format!(
                        "write-sets up to {seqno} were delivered after the state transfer that \
                         already holds them: certified, not applied again"
                    );
                    self.shared.app.log(LogLevel::Info, &message);
                }
                self.on_write_set(seqno, local, safe_seqno, payload.into(), in_server);
            }
            Delivery::StateRequest {
                request,
                donor,
                donor_uuid,
                donor_is_me,
                joiner,
            } => {
                self.note_own_request(joiner, &donor, donor_uuid);
                self.on_state_request(joiner, request, donor, donor_is_me);
            }
            Delivery::Causal { id, seqno } => {
                if let Some(answer) = lock(&self.shared.inner).causal.get_mut(&id) {
                    *answer = Some(seqno);
                }
            }
            Delivery::VoteRequested { seqno, by } => self.on_vote_requested(seqno, &by),
            Delivery::VoteDecided {
                seqno,
                winner,
                mine,
                votes,
            } => self.on_vote_decided(seqno, winner, mine, &votes),
            Delivery::Closed => vote::close_after_inconsistency(&self.shared),
            Delivery::TransferFailed { .. } => unreachable!("handled above"),
            Delivery::Abandoned { .. } | Delivery::StateGap { .. } => {}
        }
    }

    /// Keeps, within the gcache's disk budget, what members that left the primary view
    /// need to come back by IST: everything after the commit cut when they left (they had
    /// committed at least that far). A member that is back (by name) needs it until its
    /// state request is served (see `on_state_request`).
    fn track_absent_members(&mut self, view: &View) {
        if !view.primary || view.own_index.is_none() {
            return;
        }
        let names: Vec<String> = view.members.iter().map(|m| m.name.clone()).collect();
        let own = &self.shared.settings.node_name;
        for gone in self
            .view_names
            .iter()
            .filter(|n| !names.contains(n) && *n != own)
        {
            if !self.absent.contains_key(gone) {
                let from = self.last_safe_seqno.next();
                let message = if lock(&self.shared.cache).keeps_for_absent_members() {
                    format!(
                        "{gone} left the primary view: keeping seqnos from {from} in the \
                         gcache (within gcache.max_disk_bytes) so that it can rejoin by IST"
                    )
                } else {
                    format!(
                        "{gone} left the primary view: it can rejoin by IST while some member's \
                         gcache still holds seqno {from} (gcache.size bounds that; set \
                         gcache.max_disk_bytes to keep more for absent members)"
                    )
                };
                self.shared.app.log(LogLevel::Info, &message);
                self.absent.insert(gone.clone(), from);
            }
        }
        self.view_names = names;
        self.view_members = view
            .members
            .iter()
            .map(|m| (m.uuid, m.name.clone()))
            .collect();
        let floor = self.absent.values().min().copied();
        lock(&self.shared.cache).set_absent_floor(floor);
    }

    fn on_view(&mut self, view: View) {
        self.membership = view.membership;
        self.track_absent_members(&view);
        let mut info = view_info(&view);
        let own_uuid = view
            .own_index
            .and_then(|i| view.members.get(i))
            .map(|m| m.uuid);
        let mut inner = lock(&self.shared.inner);
        if !view.primary && view.own_index.is_none() {
            // Out of the group (left, or evicted and rejoining): the server must see a
            // component of this node alone, as Galera shows it. A view with no members is
            // the final one, which only `disconnect` delivers.
            let settings = &self.shared.settings;
            info.members = vec![MemberOut {
                uuid: inner.own,
                name: settings.node_name.clone(),
                incoming: settings.incoming_address.clone(),
            }];
            info.my_index = 0;
        }
        // The identity this node has in the group now (it changes when the group admits
        // it again); state requests and local write-sets are recognised by it.
        if let Some(uuid) = own_uuid {
            inner.own = uuid;
        }
        inner.cluster = view.cluster;
        inner.members = info.members.clone();
        inner.view_id = info.view_id;
        let was_primary = inner.primary;
        inner.primary = view.primary && view.own_index.is_some();
        if was_primary && !inner.primary {
            // Out of the primary component the node is desynced in any case; a `wsrep_desync`
            // from before does not carry over to its return (Galera clears it the same way).
            inner.desync_count = 0;
        }
        if view.ordered {
            inner.last_ordered = view.seqno;
        }
        if let Some(joining) = inner.joining.as_mut() {
            let donor_gone = joining
                .donor
                .is_some_and(|donor| view.primary && !view.members.iter().any(|m| m.uuid == donor));
            let transfer_done = joining.transfer.done && joining.received.is_some();
            if donor_gone && !transfer_done {
                // The donor died (or left) before our state arrived: the transfer will never
                // finish. Ask again; the group picks another donor.
                joining.donor = None;
                joining.request_again = true;
                drop(inner);
                self.shared.app.log(
                    LogLevel::Warning,
                    "our donor left the cluster before the state transfer finished; asking again",
                );
                inner = lock(&self.shared.inner);
            }
        }
        if self.certifier.is_none() {
            if !inner.primary || inner.joining.is_some() {
                if inner.joining.is_some() && view.ordered {
                    drop(inner);
                    self.held.push(Delivery::View(view));
                }
                return;
            }
            inner.queue.push_back(RecvEvent::Connected(info.clone()));
            if self.bootstrap {
                self.certifier = Some(Certifier::starting_at(CertConfig::default(), view.seqno));
                self.member_of = Some(view.membership);
                *lock(&self.shared.monitors) = Some(Arc::new(Monitors::at(view.seqno.prev())));
                inner.state = NodeState::Synced;
                inner.queue.push_back(RecvEvent::View {
                    view: info,
                    ordered: true,
                });
                inner.queue.push_back(RecvEvent::Synced);
                drop(inner);
                save_running_state(&self.shared, view.cluster, true);
                self.saved_sole_member = true;
                self.cache_view(&view);
            } else {
                // Everything up to the join view comes by state transfer; what is ordered
                // from here on is held until the transfer is in place.
                inner.state = NodeState::Joiner;
                set_group_state(&inner, NodeState::Joiner);
                inner.joining = Some(Joining::new(view.seqno));
                inner.queue.push_back(RecvEvent::RequestState);
            }
            return;
        }
        let position = self
            .certifier
            .as_ref()
            .map_or(Seqno::UNDEFINED, Certifier::position);
        // Another membership in a view means the group admitted this node again as a new
        // member (after an eviction) since its certification state was built.
        let readmitted = own_uuid.is_some() && Some(view.membership) != self.member_of;
        if inner.primary && (readmitted || (view.ordered && view.seqno > position.next())) {
            // Readmitted as a new member after an eviction: the cluster ordered seqnos this
            // node never saw. Everything up to `position` is here; the rest comes by IST.
            // The server hears of the new membership now and of the primary view once the
            // node caught up.
            inner.queue.push_back(RecvEvent::Connected(info.clone()));
            drop(inner);
            self.fall_behind(view.cluster, view.seqno, position, Some(info));
            if view.ordered {
                self.held.push(Delivery::View(view));
            }
            return;
        }
        if view.ordered && view.seqno <= self.in_server_upto {
            // Delivered after a snapshot that already holds it: the server has moved past
            // this seqno, which only passes certification and the cache.
            drop(inner);
            self.view_in_order(&view);
            return;
        }
        let ordered = view.ordered && view.primary;
        let mut closed_streams = 0;
        if let Some(cert) = self.certifier.as_mut().filter(|_| view.primary) {
            // The servers roll back the streaming transactions of members that are gone.
            let members: Vec<Uuid> = view.members.iter().map(|m| m.uuid).collect();
            closed_streams = cert.close_streams_absent_from(&members);
            inner.open_streams = cert.open_streams();
        }
        inner.queue.push_back(RecvEvent::View {
            view: info,
            ordered,
        });
        if inner.primary && !was_primary && inner.state == NodeState::Synced {
            inner.queue.push_back(RecvEvent::Synced);
        }
        drop(inner);
        if closed_streams > 0 {
            let message = format!(
                "{closed_streams} streaming transaction(s) of members that left the primary \
                 component end here; the server rolls them back"
            );
            self.shared.app.log(LogLevel::Info, &message);
        }
        if ordered {
            self.note_sole_member(view.cluster, view.members.len() == 1);
        }
        if view.ordered {
            self.view_in_order(&view);
        }
    }

    /// This joiner's donor could not send its snapshot: it will never arrive, and the
    /// server's receiving side cannot be restarted in place. Stops, as Galera's joiner does,
    /// after leaving the group (a joiner that died must not keep its vote).
    fn on_transfer_failed(&mut self, donor: &str) {
        let waiting = lock(&self.shared.inner)
            .joining
            .as_ref()
            .is_some_and(|joining| joining.received.is_none());
        if !waiting {
            return;
        }
        let message = format!(
            "Will never receive state. Need to abort. The state transfer from {donor} \
             failed on the donor (see its error log)."
        );
        leave_group(&self.shared, FATAL_LEAVE_WAIT);
        self.shared.app.fatal(&message);
    }

    /// Keeps the identity this node comes back under after a crash (`membership_file`) in
    /// step with the primary component: saved while it is one of two, removed when the
    /// component has another size. Out of the primary component it stays as it was: that is
    /// when it is needed.
    fn save_membership(&mut self) {
        let Some(dir) = self.shared.settings.state_dir.clone() else {
            return;
        };
        let Some(runner) = lock(&self.shared.inner).runner.clone() else {
            return;
        };
        let status = runner.status();
        if !status.primary || status.saved_membership == self.saved_membership {
            return;
        }
        let saved = match &status.saved_membership {
            Some(membership) => membership_file::store(&dir, membership),
            None => membership_file::forget(&dir),
        };
        match saved {
            Ok(()) => self.saved_membership = status.saved_membership,
            Err(error) => {
                let message = format!("cannot keep {}: {error}", membership_file::FILE_NAME);
                self.shared.app.log(LogLevel::Warning, &message);
                self.saved_membership = status.saved_membership;
            }
        }
    }

    /// Keeps `safe_to_bootstrap` in `grastate.dat` true exactly while this node is the whole
    /// primary component: the last member standing may found the cluster again after a
    /// crash, and no other may.
    fn note_sole_member(&mut self, cluster: Uuid, sole: bool) {
        if sole != self.saved_sole_member {
            self.saved_sole_member = sole;
            save_running_state(&self.shared, cluster, sole);
        }
    }

    /// The order jumped past this node: stop certifying, hold what comes, and catch up by
    /// IST from `position` (what this server already has).
    fn fall_behind(
        &mut self,
        cluster: Uuid,
        join_seqno: Seqno,
        position: Seqno,
        view: Option<ViewInfo>,
    ) {
        self.certifier = None;
        self.withdraw_waiting();
        transfer::start_rejoin(&self.shared, cluster, join_seqno, position);
        if let Some(joining) = lock(&self.shared.inner).joining.as_mut() {
            joining.rejoin_view = view;
        }
    }

    /// Certifies an ordered write-set; applies it unless `applied_upto` already covers it.
    fn on_write_set(
        &mut self,
        seqno: Seqno,
        local: bool,
        safe_seqno: Seqno,
        payload: Bytes,
        applied_upto: Seqno,
    ) {
        let Some(cert) = self.certifier.as_mut() else {
            return;
        };
        let position = cert.position();
        if seqno != position.next() {
            let message = format!(
                "write-set {seqno} ordered while this node stands at {position}: {}",
                if seqno <= position {
                    "a repeat, ignored"
                } else {
                    "catching up by IST"
                }
            );
            self.shared.app.log(LogLevel::Error, &message);
            if seqno > position {
                let cluster = lock(&self.shared.inner).cluster;
                self.fall_behind(cluster, seqno, position, None);
            }
            return;
        }
        let started = Instant::now();
        // A large write-set's data stays in the ordered bytes (a copy would first-touch as
        // much fresh memory again); a small one is copied out so that the ordered buffer
        // goes right after caching, as before.
        let decoded = if payload.len() >= SHARED_DECODE_BYTES {
            WriteSet::decode_shared(&payload)
        } else {
            WriteSet::decode(&payload)
        };
        let write_set = match decoded {
            Ok(write_set) => write_set,
            Err(error) => {
                // Every node sees the same bytes, so every node skips it alike.
                let message = format!("ordered write-set {seqno} does not decode: {error}");
                self.shared.app.log(LogLevel::Error, &message);
                self.skip_in_order(seqno);
                if seqno > applied_upto {
                    // The seqno still passes the monitors, or every later commit would wait
                    // for it.
                    lock(&self.shared.inner)
                        .queue
                        .push_back(RecvEvent::Skip { seqno });
                }
                return;
            }
        };
        cert.purge_to(safe_seqno.min(cert.position()));
        let verdict = cert.certify(seqno, &write_set);
        let certified = started.elapsed();
        let cached_verdict = verdict.depends_on().map_or(ist::FAILED_CERT, |d| d.0);
        let (source, key_count) = (write_set.source, write_set.keys.len());
        self.hand_out(
            seqno,
            local,
            verdict,
            write_set,
            payload.len(),
            applied_upto,
        );
        // The appliers (or the local transaction waiting for its verdict) may go on while
        // this thread writes the cache: for a large write-set that takes a while, and
        // nothing needs a seqno cached before it is applied.
        self.shared.changed.notify_all();
        let caching = Instant::now();
        self.cache_action(seqno, ist::ActionKind::WriteSet, cached_verdict, &payload);
        if payload.len() >= LARGE_WRITE_SET_BYTES {
            let message = format!(
                "large write-set {seqno} from {source}: {} MB, {key_count} keys; decoded and \
                 certified in {certified:.1?}, cached in {:.1?}",
                payload.len() >> 20,
                caching.elapsed()
            );
            self.shared.app.log(LogLevel::Info, &message);
        }
    }

    /// Records a certified write-set and hands it to its waiting local transaction or to
    /// the appliers.
    fn hand_out(
        &mut self,
        seqno: Seqno,
        local: bool,
        verdict: Verdict,
        write_set: WriteSet,
        payload_len: usize,
        applied_upto: Seqno,
    ) {
        let (index_size, open_streams) = self
            .certifier
            .as_ref()
            .map_or((0, (0, 0)), |c| (c.index_len(), c.open_streams()));
        let mut inner = lock(&self.shared.inner);
        inner.last_ordered = inner.last_ordered.max(seqno);
        inner.cert_index_size = index_size;
        inner.open_streams = open_streams;
        let interval = seqno
            .0
            .saturating_sub(write_set.last_seen.0.min(seqno.0 - 1));
        inner.window.cert_interval.record(interval.max(0) as u64);
        if let Some(depends_on) = verdict.depends_on() {
            inner
                .window
                .deps_distance
                .record(seqno.0.saturating_sub(depends_on.0).max(0) as u64);
        }
        if seqno <= applied_upto {
            return;
        }
        // A streaming rollback has no waiter: its transaction's own certify waits are over.
        let waiting = inner
            .trxs
            .get_mut(&write_set.trx_id)
            .filter(|trx| local && trx.submitted && trx.outcome.is_none())
            .filter(|_| !write_set.is_rollback());
        match waiting {
            Some(trx) => trx.outcome = Some((seqno, verdict)),
            None if local && write_set.is_rollback() => {
                inner.queue.push_back(RecvEvent::Apply {
                    seqno,
                    depends_on: verdict.depends_on().unwrap_or(seqno.prev()),
                    write_set,
                    failed: !verdict.is_pass(),
                });
            }
            None if local => {
                // Our own write-set with nobody waiting for it (the transaction gave up):
                // it was ordered all the same, so it is applied like any other.
                let known = inner
                    .trxs
                    .get(&write_set.trx_id)
                    .map(|t| (t.submitted, t.outcome));
                drop(inner);
                let message = format!(
                    "own write-set {seqno} of transaction {} arrived with no waiter ({known:?}); \
                     applying it",
                    write_set.trx_id
                );
                self.shared.app.log(LogLevel::Warning, &message);
                inner = lock(&self.shared.inner);
                inner.queue.push_back(RecvEvent::Apply {
                    seqno,
                    depends_on: verdict.depends_on().unwrap_or(seqno.prev()),
                    write_set,
                    failed: !verdict.is_pass(),
                });
            }
            None => {
                inner.counters.received += 1;
                inner.counters.received_bytes += payload_len as u64;
                let (depends_on, failed) = match verdict {
                    Verdict::Pass { depends_on } => (depends_on, false),
                    Verdict::Fail(_) => (seqno.prev(), true),
                };
                inner.queue.push_back(RecvEvent::Apply {
                    seqno,
                    depends_on,
                    write_set,
                    failed,
                });
                let queued = inner.queue.len() as u64;
                inner.window.recv_queue.record(queued);
            }
        }
    }

    /// A joiner's side of its own ordered request: the donor it went to (watched until
    /// the transfer is done), or none free yet, and then it asks again in a second.
    fn note_own_request(
        &self,
        joiner: Uuid,
        donor: &Result<u64, NoDonor>,
        donor_uuid: Option<Uuid>,
    ) {
        let mut inner = lock(&self.shared.inner);
        let own_request = joiner == inner.own;
        let Some(joining) = inner.joining.as_mut().filter(|_| own_request) else {
            return;
        };
        let (level, message) = match donor {
            Ok(_) => {
                joining.donor = donor_uuid;
                let name = donor_uuid.map_or_else(|| "?".to_owned(), |u| self.member_name(u));
                let message = format!("our state transfer request is ordered: donor {name}");
                (LogLevel::Info, message)
            }
            Err(reason) => {
                joining.retry_at = Some(Instant::now() + Duration::from_secs(1));
                joining.donorless += 1;
                let message =
                    format!("no donor for our state transfer yet: {reason}; asking again in 1 s");
                // A donor busy for a moment (another joiner's snapshot) is routine; one
                // missing for long is worth a warning, repeated at the same pace.
                let long = joining.donorless % DONORLESS_REQUESTS_BEFORE_WARNING == 0;
                (
                    if long {
                        LogLevel::Warning
                    } else {
                        LogLevel::Info
                    },
                    message,
                )
            }
        };
        drop(inner);
        self.shared.app.log(level, &message);
    }

    /// Fails every local transaction still waiting for its write-set's verdict: this node
    /// left the order (its unordered submissions were abandoned, or it must catch up by
    /// IST). Such a verdict never comes here; a write-set the others did order comes back
    /// in the IST as a remote one. Waiting on would keep the transaction's row locks, which
    /// the IST appliers need: a deadlock. The server rolls it back, the client gets an
    /// error.
    fn withdraw_waiting(&self) {
        let mut inner = lock(&self.shared.inner);
        let mut withdrawn = 0;
        for trx in inner.trxs.values_mut() {
            if trx.submitted && trx.outcome.is_none() {
                trx.submitted = false;
                withdrawn += 1;
            }
        }
        drop(inner);
        if withdrawn > 0 {
            self.shared.changed.notify_all();
            let message = format!(
                "{withdrawn} local transaction(s) waiting for their order are rolled back: \
                 this node left the primary component (their write-sets, if the others \
                 ordered them, come back by IST)"
            );
            self.shared.app.log(LogLevel::Warning, &message);
        }
    }

    /// The group gave these submissions up (they never left this node, which lost the
    /// primary component, or it is rejoining or closing): their transactions fail. Each
    /// waiter finds its ticket here, even one that has not started waiting yet.
    fn withdraw_abandoned(&self, tickets: &[u64]) {
        let mut inner = lock(&self.shared.inner);
        for ticket in tickets {
            if inner.abandoned.len() == ABANDONED_REMEMBERED {
                inner.abandoned.pop_front();
            }
            inner.abandoned.push_back(*ticket);
        }
        drop(inner);
        self.shared.changed.notify_all();
        let message = format!(
            "the group gave up {} local write-set(s) not ordered here (this node is out of \
             the primary component, rejoining or closing): their transactions fail",
            tickets.len()
        );
        // A note: the server reports each failed transaction itself, as with Galera.
        self.shared.app.log(LogLevel::Info, &message);
    }

    /// The name of the member `uuid` in the latest primary view.
    fn member_name(&self, uuid: Uuid) -> String {
        self.view_members
            .iter()
            .find(|(id, _)| *id == uuid)
            .map_or_else(|| uuid.to_string(), |(_, name)| name.clone())
    }

    fn on_state_request(
        &mut self,
        joiner: Uuid,
        request: StateRequest,
        donor: Result<u64, NoDonor>,
        donor_is_me: bool,
    ) {
        let served = donor.is_ok();
        let joiner_name = self
            .view_members
            .iter()
            .find(|(id, _)| *id == joiner)
            .map(|(_, name)| name.clone());
        self.serve_state_request(joiner, request, donor_is_me);
        // The returning member's gap is in a donor's hands now (pinned there while it is
        // sent): the others need not keep it any longer.
        if let Some(name) = joiner_name.filter(|_| served) {
            if self.absent.remove(&name).is_some() {
                let floor = self.absent.values().min().copied();
                lock(&self.shared.cache).set_absent_floor(floor);
            }
        }
    }

    fn serve_state_request(&mut self, joiner: Uuid, request: StateRequest, donor_is_me: bool) {
        let inner = lock(&self.shared.inner);
        if joiner == inner.own {
            return;
        }
        if !donor_is_me {
            return;
        }
        let Some(cert) = self.certifier.as_ref() else {
            return;
        };
        // The joiner continues certification from exactly this point of the order.
        let position = cert.position();
        let index = cert.encode();
        let cluster = inner.cluster;
        drop(inner);
        let plan = transfer::plan_donation(&self.shared, cluster, &request, position);
        let (outcome, first, reason, pin) = match plan {
            transfer::DonorPlan::Ist { first, pin } => {
                let message = format!(
                    "serving IST of seqnos {first}..={position} to {}",
                    request.ist_address
                );
                self.shared.app.log(LogLevel::Info, &message);
                (ist::Outcome::Ist, first, String::new(), Some(pin))
            }
            transfer::DonorPlan::Sst { reason } => {
                if request.ist_from.is_defined() {
                    let message = format!("IST not possible, sending SST: {reason}");
                    self.shared.app.log(LogLevel::Warning, &message);
                }
                (ist::Outcome::Sst, position.next(), reason, None)
            }
            transfer::DonorPlan::Refuse { reason } => {
                let message = format!("cannot serve an IST-only request: {reason}");
                self.shared.app.log(LogLevel::Warning, &message);
                (ist::Outcome::Refused, position.next(), reason, None)
            }
        };
        if !request.sst_request.is_empty() {
            let bypass = (outcome == ist::Outcome::Ist).then_some(Gtid {
                cluster,
                seqno: request.ist_from,
            });
            let mut inner = lock(&self.shared.inner);
            inner.donating_to = Some(request.joiner);
            inner.queue.push_back(RecvEvent::Donate {
                request: request.clone(),
                wait_for: position,
                bypass,
            });
        }
        let header = ist::Header {
            cluster,
            outcome,
            first,
            last: position,
            reason,
            index,
        };
        let address = request.ist_address.clone();
        let shared = Arc::clone(&self.shared);
        let sender = std::thread::Builder::new()
            .name("trireme-ist-send".into())
            .spawn(
                move || match transfer::send_stream(&shared, &address, header, pin) {
                    Ok(count) if count > 0 => {
                        let message = format!("IST to {address} sent: {count} write-sets");
                        shared.app.log(LogLevel::Info, &message);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        let message = format!("state transfer stream to {address} failed: {error}");
                        shared.app.log(LogLevel::Error, &message);
                    }
                },
            );
        match sender {
            Ok(sender) => self.senders.push(sender),
            Err(_) => {
                if let Some(pin) = pin {
                    lock(&self.shared.cache).unpin(pin);
                }
            }
        }
    }

    /// Once the server has its snapshot and the donor's index arrived, resumes delivery.
    fn try_finish_join(&mut self) {
        let (received, index, queued_upto, rejoin_view, join_seqno) = {
            let mut inner = lock(&self.shared.inner);
            let Some(joining) = inner.joining.as_mut() else {
                return;
            };
            if let Some(retry_at) = joining.retry_at {
                if Instant::now() >= retry_at {
                    joining.retry_at = None;
                    joining.request_again = true;
                }
            }
            if joining.gave_up {
                return;
            }
            if joining.transfer.failed.is_some()
                && joining.ist_only
                && joining.transfer.refusals >= transfer::REFUSALS_BEFORE_GIVING_UP
            {
                joining.gave_up = true;
                let from = joining.in_place_upto().next();
                let message = format!(
                    "no member holds seqno {from} and after in its gcache any more \
                     ({} donors in a row refused): this node cannot catch up by IST and stays \
                     JOINER; restart the server to get a full state transfer (SST)",
                    joining.transfer.refusals
                );
                drop(inner);
                self.shared.app.log(LogLevel::Error, &message);
                return;
            }
            if let Some(reason) = joining.transfer.failed.take() {
                // What was queued stays queued (it is intact and in order); ask again for
                // the rest, from another donor if the group picks one.
                let message = format!("state transfer incomplete ({reason}); asking again");
                joining.transfer.index = None;
                joining.transfer.done = false;
                joining.transfer.by_sst = false;
                joining.retry_at = Some(Instant::now() + Duration::from_secs(1));
                drop(inner);
                self.shared.app.log(LogLevel::Warning, &message);
                return;
            }
            let stream_overdue = joining.ist_only
                && joining.transfer.index.is_none()
                && joining
                    .ist_requested_at
                    .is_some_and(|at| at.elapsed() > transfer::IST_START_TIMEOUT);
            if stream_overdue {
                let message = format!(
                    "no donor stream {} s after asking for IST; asking again",
                    transfer::IST_START_TIMEOUT.as_secs()
                );
                joining.request_again = true;
                joining.ist_requested_at = None;
                self.shared.app.log(LogLevel::Warning, &message);
            }
            if joining.received.is_some() && std::mem::take(&mut joining.request_again) {
                // The server's snapshot is in place: only IST can bring the rest.
                joining.ist_only = true;
                joining.ist_requested_at = Some(Instant::now());
                let from = joining.in_place_upto();
                drop(inner);
                transfer::send_state_request(&self.shared, Vec::new(), from);
                return;
            }
            let ready = joining.received.is_some()
                && joining.transfer.index.is_some()
                && joining.transfer.done;
            if !ready {
                return;
            }
            if let Some(gap) = joining.missing_before_delivery() {
                // The snapshot ends before the donor's index (or before this node's first
                // delivery): the seqnos in between are nowhere here. Continuing would leave
                // a hole in the data; IST brings them (with an index to match).
                let message = format!(
                    "the server's state ends at {} but delivery goes on after {}: asking for \
                     IST of the seqnos in between",
                    gap.0, gap.1
                );
                joining.transfer.index = None;
                joining.transfer.done = false;
                joining.transfer.by_sst = false;
                joining.request_again = true;
                drop(inner);
                self.shared.app.log(LogLevel::Warning, &message);
                return;
            }
            let index = joining.transfer.index.take().expect("checked");
            (
                joining.received.expect("checked"),
                index,
                joining.transfer.queued_upto,
                joining
                    .rejoin_view
                    .take()
                    .filter(|_| !joining.member_view_queued),
                joining.join_seqno,
            )
        };
        let (position, cert) = index;
        let applied_upto = received.seqno.max(queued_upto);
        assert!(
            applied_upto >= position && applied_upto >= join_seqno.prev(),
            "a join finished with a hole: state up to {applied_upto}, index at {position}, \
             joined at {join_seqno}"
        );
        self.in_server_upto = applied_upto;
        self.certifier = Some(cert);
        self.member_of = Some(self.membership);
        monitors_continue_at(&self.shared, received.seqno);
        if let Some(view) = rejoin_view {
            lock(&self.shared.inner).queue.push_back(RecvEvent::View {
                view,
                ordered: false,
            });
        }
        for delivery in std::mem::take(&mut self.held) {
            match delivery {
                Delivery::WriteSet {
                    seqno,
                    local,
                    safe_seqno,
                    payload,
                    ..
                } if seqno > position => {
                    self.on_write_set(seqno, local, safe_seqno, payload.into(), applied_upto);
                }
                Delivery::View(view) if view.ordered && view.seqno > position => {
                    self.view_in_order(&view);
                    if view.seqno > applied_upto {
                        let info = view_info(&view);
                        let ordered = view.primary;
                        lock(&self.shared.inner).queue.push_back(RecvEvent::View {
                            view: info,
                            ordered,
                        });
                    }
                }
                _ => {}
            }
        }
        let mut inner = lock(&self.shared.inner);
        inner.joining = None;
        inner.state = NodeState::Joined;
        set_group_state(&inner, NodeState::Joined);
        let cluster = inner.cluster;
        drop(inner);
        save_running_state(&self.shared, cluster, false);
        self.saved_sole_member = false;
    }

    /// Passes an ordered view through certification and into the cache.
    fn view_in_order(&mut self, view: &View) {
        if let Some(cert) = self.certifier.as_mut() {
            cert.skip(view.seqno);
        }
        self.cache_view(view);
    }

    /// Caches an ordered view: a primary one with what a joiner's server needs to hear of it
    /// (`view_record`: IST hands it over at its seqno, as Galera's does), any other as a
    /// seqno that carries nothing.
    fn cache_view(&mut self, view: &View) {
        let seqno = view.seqno;
        if view.primary {
            let body = view_record::encode(&view_info(view));
            self.cache_action(seqno, ist::ActionKind::View, seqno.0 - 1, &body);
        } else {
            self.cache_action(seqno, ist::ActionKind::Skip, seqno.0 - 1, &[]);
        }
    }

    /// Passes a seqno that carries nothing to certify (an undecodable write-set) through
    /// certification and into the cache, so that both stay gapless.
    fn skip_in_order(&mut self, seqno: Seqno) {
        if let Some(cert) = self.certifier.as_mut() {
            cert.skip(seqno);
        }
        self.cache_action(seqno, ist::ActionKind::Skip, seqno.0 - 1, &[]);
    }

    /// Stores an ordered action in the write-set cache, for IST.
    fn cache_action(
        &mut self,
        seqno: Seqno,
        kind: ist::ActionKind,
        depends_on: i64,
        payload: &[u8],
    ) {
        let cluster = lock(&self.shared.inner).cluster;
        let (result, from) = {
            let mut cache = lock(&self.shared.cache);
            let result = cache.record(cluster, seqno, kind, depends_on, payload);
            (result, cache.reach_from())
        };
        if let Err(error) = result {
            if !self.cache_failed {
                self.cache_failed = true;
                let message = format!("cannot store seqno {seqno} in the gcache: {error}");
                self.shared.app.log(LogLevel::Warning, &message);
            }
        }
        if from != self.cached_reported {
            self.cached_reported = from;
            if let Some(runner) = lock(&self.shared.inner).runner.as_ref() {
                let _ = runner.report_cached(from);
            }
        }
    }

    /// A JOINED node that has caught up becomes SYNCED and tells the server.
    fn maybe_synced(&mut self) {
        let mut inner = lock(&self.shared.inner);
        if inner.state == NodeState::Joined
            && inner.queue.len() <= SYNCED_QUEUE_MAX
            && inner.desync_count == 0
        {
            inner.state = NodeState::Synced;
            set_group_state(&inner, NodeState::Synced);
            inner.queue.push_back(RecvEvent::Synced);
        }
    }
}

/// `ECANCELED`: the code a transfer the donor's server refused to start fails with.
const ECANCELED: i32 = 125;

/// Leaves the group and waits (at most `wait`) until this node is out of the primary
/// component.
fn leave_group(shared: &Shared, wait: Duration) {
    let Some(runner) = lock(&shared.inner).runner.clone() else {
        return;
    };
    if runner.leave().is_err() {
        return;
    }
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline && runner.status().primary {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The identity saved in the node's state directory, if any.
fn membership_file_of(shared: &Shared) -> Option<group::restart::SavedMembership> {
    membership_file::load(shared.settings.state_dir.as_ref()?)
}

/// Forgets the identity saved to come back after a crash: the node left (cleanly, or
/// because its data differs) and must not come back as the member it was.
fn forget_membership(shared: &Shared) {
    if let Some(dir) = &shared.settings.state_dir {
        if let Err(error) = membership_file::forget(dir) {
            let message = format!("cannot remove {}: {error}", membership_file::FILE_NAME);
            shared.app.log(LogLevel::Warning, &message);
        }
    }
}

/// Makes the monitors continue from `position`, where the node's state now stands: new
/// ones on a first join, and on a join in the same process (the server connected again)
/// whose snapshot moved the state past them: the seqnos it jumped over pass through no
/// monitor, and a causal read would wait for them forever. Monitors at or past `position`
/// stay (IST may have applied beyond the snapshot already).
fn monitors_continue_at(shared: &Shared, position: Seqno) {
    let mut monitors = lock(&shared.monitors);
    let behind = monitors
        .as_ref()
        .is_none_or(|m| m.apply.last_left() < position);
    if behind {
        *monitors = Some(Arc::new(Monitors::at(position)));
    }
}

/// Writes `grastate.dat` (when the node keeps one); a failure is logged, not fatal.
fn save_state(shared: &Shared, state: SavedState) {
    let Some(dir) = &shared.settings.state_dir else {
        return;
    };
    if let Err(error) = state.store(dir) {
        let message = format!(
            "cannot write {}: {error}",
            dir.join(saved_state::FILE_NAME).display()
        );
        shared.app.log(LogLevel::Warning, &message);
    }
}

/// Marks the saved state "running in history `cluster`" (seqno -1): after a crash the
/// position is recovered from the storage engine, and the uuid says which history it is in.
/// `sole_member`: this node is the whole primary component, so that after a crash it may
/// found the cluster again (`safe_to_bootstrap: 1`, as Galera writes it). A position
/// cleared by a lost consistency vote stays cleared.
fn save_running_state(shared: &Shared, cluster: Uuid, sole_member: bool) {
    if lock(&shared.inner).votes.inconsistent {
        return;
    }
    save_state(
        shared,
        SavedState {
            position: Gtid {
                cluster,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: sole_member,
        },
    );
}

/// A JOINED node with at most this many actions queued has caught up and turns SYNCED
/// (Galera's default `gcs.fc_limit`: from here on its queue is flow control's business).
const SYNCED_QUEUE_MAX: usize = 16;

/// Abandoned submission tickets kept for waiters that have not looked yet. A waiter looks
/// as soon as it is woken, so a few suffice; the bound only keeps tickets nobody waits for
/// (their transactions ended another way) from piling up.
const ABANDONED_REMEMBERED: usize = 1024;

fn set_group_state(inner: &Inner, state: NodeState) {
    if let Some(runner) = inner.runner.as_ref() {
        let _ = runner.set_local_state(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A joiner whose first delivery was `join`, with the server's state at `received`,
    /// IST queued up to `queued` and the donor's index at `index`.
    fn joining(join: i64, received: i64, queued: i64, index: i64) -> Joining {
        let mut joining = Joining::new(Seqno(join));
        joining.received = Some(Gtid {
            cluster: Uuid::NIL,
            seqno: Seqno(received),
        });
        joining.transfer.queued_upto = Seqno(queued);
        let cert = Certifier::starting_at(CertConfig::default(), Seqno(index));
        joining.transfer.index = Some((Seqno(index), cert));
        joining
    }

    #[test]
    fn a_join_never_continues_past_a_hole() {
        // The snapshot ends before the donor's index: 11 and 12 are nowhere.
        assert_eq!(
            joining(5, 10, -1, 12).missing_before_delivery(),
            Some((Seqno(10), Seqno(12)))
        );
        // At or past the index: the held deliveries continue it.
        assert_eq!(joining(5, 12, -1, 12).missing_before_delivery(), None);
        assert_eq!(joining(5, 15, -1, 12).missing_before_delivery(), None);
        // IST queued the rest after the snapshot.
        assert_eq!(joining(5, 10, 14, 14).missing_before_delivery(), None);
        // Deliveries start at 20: the state must reach 19 whatever the index says.
        assert_eq!(
            joining(20, 15, -1, 12).missing_before_delivery(),
            Some((Seqno(15), Seqno(19)))
        );
    }

    #[test]
    fn cluster_addresses_parse_like_galera() {
        assert_eq!(parse_cluster_address("gcomm://"), Ok(vec![]));
        assert_eq!(
            parse_cluster_address("gcomm://127.0.0.1:4567,127.0.0.1:4568"),
            Ok(vec![
                "127.0.0.1:4567".to_owned(),
                "127.0.0.1:4568".to_owned()
            ])
        );
        assert_eq!(
            parse_cluster_address("gcomm://host"),
            Ok(vec!["host:4567".to_owned()])
        );
        assert_eq!(
            parse_cluster_address("gcomm://h:1?pc.wait_prim=no"),
            Ok(vec!["h:1".to_owned()])
        );
        assert!(parse_cluster_address("http://x").is_err());
        assert!(parse_cluster_address("gcomm://h:notaport").is_err());
    }
}
