//! What the node's threads share: the state behind one lock ([`Inner`]), the condvar that
//! announces its changes, the apply and commit monitors, and the counters.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use base::{Gtid, NodeState, Seqno, Uuid};
use order::{BlockingMonitor, Policy, DEFAULT_WINDOW};
use transport::RunnerHandle;

use crate::addresses::Reachable;
use crate::app::{Application, LogLevel, MemberOut, ViewInfo, PROTOCOL_VERSION};
use crate::applier::RecvEvent;
use crate::averages::Window;
use crate::joining::Joining;
use crate::local_trx::{LocalTrx, DEFAULT_MAX_WRITE_SET_BYTES};
use crate::pause::PauseGate;
use crate::settings::Settings;
use crate::{cache, vote};

pub(crate) struct Monitors {
    pub(crate) apply: BlockingMonitor,
    pub(crate) commit: BlockingMonitor,
}

impl Monitors {
    /// Monitors where everything up to `last_left` is done.
    pub(crate) fn at(last_left: Seqno) -> Monitors {
        Monitors {
            apply: BlockingMonitor::new("apply", Policy::Apply, last_left, DEFAULT_WINDOW),
            commit: BlockingMonitor::new("commit", Policy::Commit, last_left, DEFAULT_WINDOW),
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) replicated: u64,
    pub(crate) replicated_bytes: u64,
    pub(crate) received: u64,
    pub(crate) received_bytes: u64,
    pub(crate) cert_failures: u64,
    pub(crate) bf_aborts: u64,
    pub(crate) replays: u64,
    pub(crate) commits: u64,
    pub(crate) causal_reads: u64,
    pub(crate) repl_keys: u64,
    pub(crate) repl_keys_bytes: u64,
    pub(crate) repl_data_bytes: u64,
    pub(crate) apply_waits: u64,
    /// Streaming fragments this node replicated (commit fragments excluded).
    pub(crate) fragments_replicated: u64,
    /// Streaming rollbacks this node replicated.
    pub(crate) streaming_rollbacks: u64,
    /// Write-sets refused for `repl.max_ws_size`.
    pub(crate) size_exceeded: u64,
}

pub(crate) struct Inner {
    pub(crate) connected: bool,
    /// Counts `connect` calls: threads of an earlier connection see it change and end.
    pub(crate) connection: u64,
    pub(crate) closing: bool,
    /// `disconnect` has begun: the group member's thread is stopped on purpose.
    pub(crate) leaving: bool,
    pub(crate) runner: Option<RunnerHandle>,
    pub(crate) state: NodeState,
    pub(crate) cluster: Uuid,
    pub(crate) own: Uuid,
    pub(crate) members: Vec<MemberOut>,
    pub(crate) view_id: i64,
    pub(crate) primary: bool,
    pub(crate) last_ordered: Seqno,
    pub(crate) trxs: HashMap<u64, LocalTrx>,
    pub(crate) toi_by_conn: HashMap<u64, Seqno>,
    pub(crate) queue: VecDeque<RecvEvent>,
    pub(crate) serial_running: bool,
    /// The serial event running takes a seqno (an ordered view): `pause` waits for it.
    pub(crate) ordered_serial_running: bool,
    pub(crate) applying_now: usize,
    /// What `pause` lets finish and what it holds back.
    pub(crate) pause: PauseGate,
    pub(crate) desync_count: u64,
    pub(crate) entered_apply: HashSet<Seqno>,
    pub(crate) counters: Counters,
    pub(crate) donor_names: String,
    pub(crate) joining: Option<Joining>,
    /// Causal reads waiting for the group's answer: request id -> the seqno to wait for.
    pub(crate) causal: HashMap<u64, Option<Seqno>>,
    /// Tickets of submissions the group gave up, until their waiters find them (see
    /// `Dispatcher::withdraw_abandoned`); at most [`ABANDONED_REMEMBERED`].
    pub(crate) abandoned: VecDeque<u64>,
    pub(crate) next_causal_id: u64,
    /// Averages since the last `stats_reset`.
    pub(crate) window: Window,
    /// Whether this node was the last member when it left (for the saved state).
    pub(crate) last_member_on_leave: Option<bool>,
    pub(crate) cert_index_size: usize,
    /// Streaming transactions open in the cluster, as this node's certification index
    /// tracks them, and their certified fragments.
    pub(crate) open_streams: (usize, u64),
    /// Where the server stood when it connected (see `Replicator::start_position`).
    pub(crate) start_position: Option<Gtid>,
    /// This node's addresses as decided at `connect`.
    pub(crate) reachable: Option<Reachable>,
    /// The consistency votes this node takes part in.
    pub(crate) votes: vote::VoteBook,
    /// The joiner (Raft id) this node is sending a snapshot to, to tell if it fails.
    pub(crate) donating_to: Option<u64>,
}

impl Inner {
    /// The state of a node that never connected.
    pub(crate) fn disconnected() -> Inner {
        Inner {
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
        }
    }

    /// Hands the server the final view of a disconnected node (no members) and marks the
    /// connection closed: the appliers return once they have passed it on.
    pub(crate) fn close_with_final_view(&mut self, app: &dyn Application) {
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
        self.shift(NodeState::Closed, app);
    }

    /// What this node reports as committed for the commit cut, below which every member
    /// purges its certification index: no more than `committed`, and no more than the
    /// `last_seen` of any local write-set still waiting for its order. A large write-set
    /// takes long to order; had the cut passed its `last_seen` meanwhile, it would fail
    /// certification as too old although nothing conflicted with it.
    pub(crate) fn purge_floor(&self, committed: Seqno) -> Seqno {
        self.trxs
            .values()
            .filter(|t| t.submitted && t.outcome.is_none())
            .map(|t| t.last_seen)
            .fold(committed, Seqno::min)
    }

    /// Local write-sets sent to the group and not ordered yet (Galera's send queue).
    pub(crate) fn write_sets_in_flight(&self) -> usize {
        self.trxs
            .values()
            .filter(|t| t.submitted && t.outcome.is_none())
            .count()
    }
}

pub(crate) struct Shared {
    pub(crate) app: Arc<dyn Application>,
    pub(crate) settings: Settings,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) changed: Condvar,
    pub(crate) monitors: Mutex<Option<Arc<Monitors>>>,
    /// `repl.causal_read_timeout`, which may change at runtime.
    pub(crate) causal_read_timeout: Mutex<Duration>,
    /// The write-set cache this node serves IST from.
    pub(crate) cache: Mutex<cache::ActionCache>,
    /// `repl.max_ws_size`: the largest encoded write-set this node replicates.
    pub(crate) max_write_set_bytes: AtomicU64,
    /// `gmcast.isolate`: this node's group links are cut (kept across a reconnect).
    pub(crate) isolated: AtomicBool,
}

impl Shared {
    /// The shared state of a replicator that is not connected yet.
    pub(crate) fn new(app: Arc<dyn Application>, settings: Settings) -> Shared {
        let causal_read_timeout = settings.causal_read_timeout;
        Shared {
            app,
            settings,
            inner: Mutex::new(Inner::disconnected()),
            changed: Condvar::new(),
            monitors: Mutex::new(None),
            causal_read_timeout: Mutex::new(causal_read_timeout),
            isolated: AtomicBool::new(false),
            cache: Mutex::new(cache::ActionCache::disabled()),
            max_write_set_bytes: AtomicU64::new(DEFAULT_MAX_WRITE_SET_BYTES),
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Inner {
    /// Moves the node to `to` through the transition table (`NodeState::ALLOWED`), logs
    /// it as Galera does (`Shifting SYNCED -> DONOR/DESYNCED (TO: 12)`), and tells the group
    /// of a state it counts (the data states). Staying in a state is no transition.
    ///
    /// An illegal transition means this node's idea of its own state is wrong: it fails
    /// every test (debug builds); a server in production logs it and goes on in `to`
    /// rather than stop.
    pub(crate) fn shift(&mut self, to: NodeState, app: &dyn Application) {
        let from = self.state;
        if from == to {
            return;
        }
        if let Err(illegal) = self.state.transition(to) {
            if cfg!(debug_assertions) {
                panic!("{illegal}");
            }
            app.log(
                LogLevel::Error,
                &format!("{illegal}: a bug in Trireme's idea of this node's state"),
            );
            self.state = to;
        }
        let message = format!("Shifting {from} -> {to} (TO: {})", self.last_ordered);
        app.log(LogLevel::Info, &message);
        let counted_by_group =
            !matches!(to, NodeState::Closed | NodeState::Open | NodeState::Primary);
        if let Some(runner) = self.runner.as_ref().filter(|_| counted_by_group) {
            let _ = runner.set_local_state(to);
        }
    }
}

/// Makes the monitors continue from `position`, where the node's state now stands: new
/// ones on a first join, and on a join in the same process (the server connected again)
/// whose snapshot moved the state past them: the seqnos it jumped over pass through no
/// monitor, and a causal read would wait for them forever. Monitors at or past `position`
/// stay (IST may have applied beyond the snapshot already).
pub(crate) fn monitors_continue_at(shared: &Shared, position: Seqno) {
    let mut monitors = lock(&shared.monitors);
    let behind = monitors
        .as_ref()
        .is_none_or(|m| m.apply.last_left() < position);
    if behind {
        *monitors = Some(Arc::new(Monitors::at(position)));
    }
}
