//! One simulated node: its disk, which outlives crashes (the toy database, the saved state
//! and the write-set cache), and its process, which does not: the group member, the node
//! engine (the same `engine::NodeEngine` a real node runs) and what a database server does
//! around it (appliers, monitors, clients, state transfers).

use std::collections::{BTreeMap, BTreeSet};

use base::{FreezePurge, Gtid, Seqno, Uuid};
use engine::ist::Header;
use engine::memory_store::MemoryActionStore;
use engine::{ActionCache, MemoryStateStore, NodeEngine, ViewInfo};
use group::{GroupNode, StateRequest};
use order::Monitor;
use writeset::{Key, WriteSet};

use crate::kv::{KvDb, Op};

/// What a node keeps across crashes.
pub struct Disk {
    /// The database.
    pub db: KvDb,
    /// `grastate.dat` and the saved membership.
    pub state: MemoryStateStore,
    /// The gcache.
    pub cache: MemoryActionStore,
}

/// The apply and commit monitors of a server.
pub struct Monitors {
    /// Apply monitor.
    pub apply: Monitor,
    /// Commit monitor.
    pub commit: Monitor,
}

/// Where an ordered write-set's applier stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting to enter the apply monitor.
    WaitApply,
    /// Applying (an `ApplyDone` event is due).
    Applying,
    /// Applied: waiting for row locks held by local transactions.
    WaitLocks,
    /// Waiting for its commit turn.
    WaitCommit,
}

/// A task an applier of this node runs.
pub enum Running {
    /// An ordered write-set.
    Apply {
        /// Its seqno.
        seqno: Seqno,
        /// What it waits for.
        depends_on: Seqno,
        /// The write-set.
        write_set: WriteSet,
        /// It failed certification: only its seqno passes.
        failed: bool,
        /// Where it stands.
        phase: Phase,
    },
    /// A seqno that only passes the monitors.
    Skip {
        /// The seqno.
        seqno: Seqno,
        /// Where it stands.
        phase: Phase,
    },
    /// An ordered view.
    View {
        /// The view.
        view: ViewInfo,
        /// Where it stands.
        phase: Phase,
    },
    /// The state request, waiting for the snapshot.
    RequestState,
    /// Serving a joiner.
    Donate {
        /// The joiner's request.
        request: StateRequest,
        /// What must be committed first (for a snapshot).
        wait_for: Seqno,
        /// The joiner's own position, when the data goes by IST.
        bypass: Option<Gtid>,
    },
}

/// A snapshot the server sends a joiner after the donor's applier started it (as the
/// server's SST script runs beside it).
#[derive(Clone, Copy, Debug)]
pub struct Donation {
    /// The joiner's group member.
    pub joiner_raft_id: u64,
    /// The joiner's own position, when the data goes by IST.
    pub bypass: Option<Gtid>,
    /// Taken under a pause, as rsync takes one.
    pub under_pause: bool,
    /// The pause point, once paused.
    pub paused_at: Option<Seqno>,
}

/// Where a client transaction stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientPhase {
    /// Submitted; waiting for its verdict.
    Certifying {
        /// It already tried to withdraw after a brute-force abort.
        cancel_tried: bool,
    },
    /// Ordered at `seqno`: waiting at the pause gate, then acting on the verdict.
    Ordered {
        /// Its seqno.
        seqno: Seqno,
        /// Whether it passed, and what it waits for.
        depends_on: Option<Seqno>,
    },
    /// Waiting to enter the apply monitor.
    Entering {
        /// Its seqno.
        seqno: Seqno,
        /// What it waits for.
        depends_on: Seqno,
    },
    /// Waiting for its commit turn.
    Committing {
        /// Its seqno.
        seqno: Seqno,
    },
    /// Brute-force aborted after its verdict: replays at its seqno.
    Replaying {
        /// Its seqno.
        seqno: Seqno,
        /// It already holds its place in the apply monitor.
        entered: bool,
    },
}

/// What a client transaction is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// One write-set.
    Plain,
    /// A statement run in total order isolation.
    Toi,
    /// Replicated in fragments; this many are left after the current one.
    Streaming {
        /// Fragments still to send after this one.
        left: usize,
    },
}

/// A transaction of one of this node's clients.
#[derive(Clone, Debug)]
pub struct Client {
    /// The connection it runs on.
    pub conn_id: u64,
    /// What it is.
    pub kind: ClientKind,
    /// Every change it made so far (all fragments), acknowledged at its commit.
    pub ops: Vec<Op>,
    /// The current fragment's changes.
    pub fragment: Vec<Op>,
    /// Its certification keys.
    pub keys: Vec<Key>,
    /// Flags beyond the transaction's start and end (`PA_UNSAFE`).
    pub extra_flags: u32,
    /// The node's identity when it replicated its first fragment: a streaming transaction
    /// cannot go on under another.
    pub source: Uuid,
    /// Rows it holds locked until it ends.
    pub locks: BTreeSet<(String, String)>,
    /// Where it stands.
    pub phase: ClientPhase,
    /// The liveness probe of the end of the run.
    pub probe: bool,
}

/// An IST stream received before the server's snapshot is in place.
pub struct IncomingStream {
    /// The donor, for log lines.
    pub peer: String,
    /// The stream's header.
    pub header: Header,
    /// The records and the end frame, unread.
    pub rest: Vec<u8>,
}

/// A FLUSH TABLES WITH READ LOCK this node's server holds for a while.
#[derive(Clone, Copy, Debug)]
pub struct PauseHold {
    /// The pause point.
    pub point: Seqno,
    /// Reached: everything up to the point is committed.
    pub reached: bool,
    /// Released at this time once reached (simulated microseconds).
    pub until_us: u64,
}

/// One process of a node: it ends with a crash.
pub struct Process {
    /// Counts the node's processes; events for an older one are ignored.
    pub incarnation: u64,
    /// The group member.
    pub group: GroupNode,
    /// The node engine.
    pub engine: NodeEngine,
    /// The write-set cache over the disk's store.
    pub cache: ActionCache,
    /// The monitors, once the engine made them.
    pub monitors: Option<Monitors>,
    /// Tasks the appliers run, by applier number.
    pub running: BTreeMap<u64, Running>,
    /// Numbers appliers.
    pub next_applier: u64,
    /// Client transactions in flight, by transaction id.
    pub clients: BTreeMap<u64, Client>,
    /// An IST stream waiting for the snapshot.
    pub incoming: Option<IncomingStream>,
    /// A pause the server holds.
    pub pause: Option<PauseHold>,
    /// Snapshots the server is sending.
    pub donations: Vec<Donation>,
    /// The cache's oldest seqno as last reported to the group.
    pub cached_reported: Seqno,
    /// Causal reads in flight: the engine's id -> the checker's.
    pub causal: BTreeMap<u64, u64>,
    /// The gcache freeze this process set, if any.
    pub freeze: FreezePurge,
    /// A fatal error stops the server: it leaves the group first (until this time at most,
    /// simulated microseconds), as a real node does, then it is gone.
    pub stopping_by: Option<u64>,
    /// Disconnected at runtime (`SET GLOBAL wsrep_cluster_address`): the group member is
    /// stopped until the server connects again.
    pub group_stopped: bool,
    /// Connected again at runtime: a running server asks for no snapshot.
    pub reconnected: bool,
}

impl Process {
    /// Parallel appliers busy now.
    pub fn parallel_running(&self) -> usize {
        self.running
            .values()
            .filter(|r| matches!(r, Running::Apply { .. } | Running::Skip { .. }))
            .count()
    }

    /// Work not finished: tasks queued or running, and clients in flight.
    pub fn backlog(&self) -> usize {
        self.engine.tasks().len() + self.running.len() + self.clients.len()
    }

    /// What this process has committed (the apply monitor's last seqno).
    pub fn committed(&self) -> Seqno {
        self.monitors
            .as_ref()
            .map_or(Seqno::UNDEFINED, |m| m.apply.last_left())
    }
}

/// A simulated database server with its provider.
pub struct SimNode {
    /// Slot number (stable across restarts).
    pub slot: usize,
    /// Counts processes.
    pub incarnation: u64,
    /// What survives a crash.
    pub disk: Disk,
    /// The running process, if any.
    pub process: Option<Process>,
    /// Until this time (simulated microseconds) its applies are slow (a slow disk).
    pub slow_until_us: u64,
}

impl SimNode {
    /// A node slot before its first start, with a gcache of `cache_records`.
    pub fn new(slot: usize, cache_records: usize, disk_budget: bool) -> SimNode {
        SimNode {
            slot,
            incarnation: 0,
            disk: Disk {
                db: KvDb::default(),
                state: MemoryStateStore::default(),
                cache: MemoryActionStore::new(cache_records, disk_budget),
            },
            process: None,
            slow_until_us: 0,
        }
    }

    /// The slot's address on the simulated network.
    pub fn address(slot: usize) -> String {
        format!("node{slot}")
    }

    /// Where the slot receives state transfer streams.
    pub fn ist_address(slot: usize) -> String {
        format!("node{slot}/ist")
    }

    /// The slot an address (group or IST) belongs to.
    pub fn slot_of(address: &str, slots: usize) -> Option<usize> {
        let name = address.strip_suffix("/ist").unwrap_or(address);
        (0..slots).find(|slot| SimNode::address(*slot) == name)
    }

    /// True while a process runs.
    pub fn alive(&self) -> bool {
        self.process.is_some()
    }

    /// The running process; only called while alive.
    pub fn process(&mut self) -> &mut Process {
        self.process.as_mut().expect("a live node has a process")
    }

    /// The process, if `incarnation` is the running one.
    pub fn process_of(&mut self, incarnation: u64) -> Option<&mut Process> {
        self.process
            .as_mut()
            .filter(|p| p.incarnation == incarnation)
    }
}
