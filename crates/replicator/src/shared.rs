//! What the node's threads share: the engine behind one lock ([`Inner`]), the condvar that
//! announces its changes and the local transactions' own ones for their verdicts, the
//! apply and commit monitors, the write-set cache, and how the engine's effects are
//! carried out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base::{Nanos, Seqno};
use engine::{ActionCache, CacheWrite, Effect, EngineConfig, NodeEngine, OutgoingTransfer};
use order::{BlockingMonitor, Policy, DEFAULT_WINDOW};
use transport::RunnerHandle;

use crate::app::{Application, LogLevel};
use crate::connection::{leave_group, FATAL_LEAVE_WAIT};
use crate::local_trx::DEFAULT_MAX_WRITE_SET_BYTES;
use crate::persisted::FileStateStore;
use crate::seqno_trace::{SeqnoTrace, Stage};
use crate::settings::Settings;
use crate::timings::PipelineTimings;
use crate::transfer;

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

/// The engine and the handle of the group member it talks to.
pub(crate) struct Inner {
    pub(crate) engine: NodeEngine,
    pub(crate) runner: Option<RunnerHandle>,
    /// The IST receiver waits on `Shared::ist_room` for the appliers' queue to shorten.
    pub(crate) ist_receiver_waiting: bool,
    /// The engine's count of queued tasks when the appliers were last woken for new ones.
    pub(crate) tasks_announced: u64,
}

/// Effects taken from the engine under the lock, to carry out without it.
#[must_use = "effects taken from the engine must be carried out"]
pub(crate) struct Pending {
    effects: Vec<Effect>,
    runner: Option<RunnerHandle>,
    /// Tasks the engine queued since the appliers were last woken for new ones.
    new_tasks: u64,
}

/// A local transaction waiting for its verdict (see `Shared::verdict_waiters`).
#[derive(Default)]
pub(crate) struct VerdictWaiter {
    /// Used with the engine's lock.
    pub(crate) wake: Condvar,
    /// Set under the engine's lock together with the verdict, by the certification.
    pub(crate) given: AtomicBool,
}

pub(crate) struct Shared {
    pub(crate) app: Arc<dyn Application>,
    pub(crate) settings: Settings,
    pub(crate) inner: Mutex<Inner>,
    /// Announces a change of the engine to the threads that wait on it (appliers, pause,
    /// joins, votes...), except the local transactions waiting for their verdict.
    pub(crate) changed: Condvar,
    /// Local transactions waiting for their verdict, by their submission's ticket: each
    /// on its own condvar (used with `inner`), woken when its write-set is certified and by
    /// the rare events of [`Shared::notify_everyone`], not by every commit and certified
    /// write-set (with many clients, each of those woke every one of them).
    pub(crate) verdict_waiters: Mutex<HashMap<u64, Arc<VerdictWaiter>>>,
    /// The IST receiver waits here (with `inner`) for room in the appliers' queue: woken by
    /// the applier that shortens it enough, and by [`Shared::notify_everyone`].
    pub(crate) ist_room: Condvar,
    /// Idle appliers wait here (with `inner`) for a task: woken one per task the engine
    /// queues (seen when its effects are drained), when a serial task ends, and by
    /// [`Shared::notify_everyone`]; not by every commit and certified write-set.
    pub(crate) work: Condvar,
    /// Tasks an idle applier found only at its periodic recheck (see
    /// `Replicator::tasks_found_late`).
    pub(crate) tasks_found_late: AtomicU64,
    /// Verdicts found after a wait their certification did not end (see
    /// `Replicator::verdicts_found_late`).
    pub(crate) verdicts_found_late: AtomicU64,
    pub(crate) monitors: Mutex<Option<Arc<Monitors>>>,
    /// `repl.causal_read_timeout`, which may change at runtime.
    pub(crate) causal_read_timeout: Mutex<Duration>,
    /// While paused: the point and since when commits after it wait (for the log line of
    /// `resume`, which tells how long the server held the node still).
    pub(crate) paused_since: Mutex<Option<(Seqno, Instant)>>,
    /// The write-set cache this node serves IST from.
    pub(crate) cache: Mutex<ActionCache>,
    /// `repl.max_ws_size`: the largest encoded write-set this node replicates.
    pub(crate) max_write_set_bytes: AtomicU64,
    /// `gmcast.isolate`: this node's group links are cut (kept across a reconnect).
    pub(crate) isolated: AtomicBool,
    /// A cache write failed (logged once, not per write-set).
    cache_failed: AtomicBool,
    /// Threads sending state transfer streams to joiners.
    pub(crate) senders: Mutex<Vec<JoinHandle<()>>>,
    /// Each seqno's way through this node, when profiling asks for it (`seqno_trace.rs`).
    pub(crate) seqno_trace: Option<SeqnoTrace>,
    /// How long each step of the pipeline takes, for the metrics endpoint.
    pub(crate) timings: PipelineTimings,
    /// The engine's clock starts here.
    started: Instant,
}

impl Shared {
    /// The shared state of a replicator that is not connected yet.
    pub(crate) fn new(app: Arc<dyn Application>, settings: Settings) -> Shared {
        let causal_read_timeout = settings.causal_read_timeout;
        let config = EngineConfig {
            node_name: settings.node_name.clone(),
            incoming_address: settings.incoming_address.clone(),
            strict_transitions: cfg!(debug_assertions),
        };
        let store = Box::new(FileStateStore::new(settings.state_dir.clone()));
        let engine = NodeEngine::new(config, store, Nanos(0));
        Shared {
            app,
            inner: Mutex::new(Inner {
                engine,
                runner: None,
                ist_receiver_waiting: false,
                tasks_announced: 0,
            }),
            changed: Condvar::new(),
            verdict_waiters: Mutex::new(HashMap::new()),
            ist_room: Condvar::new(),
            work: Condvar::new(),
            tasks_found_late: AtomicU64::new(0),
            verdicts_found_late: AtomicU64::new(0),
            monitors: Mutex::new(None),
            causal_read_timeout: Mutex::new(causal_read_timeout),
            paused_since: Mutex::new(None),
            isolated: AtomicBool::new(false),
            cache: Mutex::new(ActionCache::disabled()),
            max_write_set_bytes: AtomicU64::new(DEFAULT_MAX_WRITE_SET_BYTES),
            cache_failed: AtomicBool::new(false),
            senders: Mutex::new(Vec::new()),
            seqno_trace: SeqnoTrace::from_environment(&settings.node_name),
            timings: PipelineTimings::new(),
            started: Instant::now(),
            settings,
        }
    }

    /// Wakes every thread waiting for the engine, the local transactions waiting for their
    /// verdict included: for everything but the routine progress of the pipeline.
    pub(crate) fn notify_everyone(&self) {
        self.work.notify_all();
        self.notify_all_but_appliers();
    }

    /// Wakes every thread waiting for the engine but the idle appliers, which only new
    /// tasks concern (drained with the effects: see [`Shared::carry_out`]): for the
    /// engine's regular tick.
    pub(crate) fn notify_all_but_appliers(&self) {
        self.changed.notify_all();
        self.ist_room.notify_all();
        for waiter in lock(&self.verdict_waiters).values() {
            waiter.wake.notify_all();
        }
    }

    /// Marks, under the engine's lock, that the submission `ticket` has its verdict (its
    /// waiter can tell its own wake-up from any other), and returns that waiter, to wake
    /// once the lock is released.
    pub(crate) fn verdict_given(&self, _inner: &Inner, ticket: u64) -> Option<Arc<VerdictWaiter>> {
        let waiter = lock(&self.verdict_waiters).get(&ticket).cloned()?;
        waiter.given.store(true, Ordering::Relaxed);
        Some(waiter)
    }

    /// Notes that `seqno` reached `stage`, if the pipeline is being traced.
    pub(crate) fn trace(&self, seqno: Seqno, stage: Stage) {
        if let Some(trace) = &self.seqno_trace {
            trace.reached(seqno, stage);
        }
    }

    /// Notes that `seqno` reached `stage` at `at`, if the pipeline is being traced.
    pub(crate) fn trace_at(&self, seqno: Seqno, stage: Stage, at: std::time::Instant) {
        if let Some(trace) = &self.seqno_trace {
            trace.reached_at(seqno, stage, at);
        }
    }

    /// The engine's time: nanoseconds since this replicator was made.
    pub(crate) fn now(&self) -> Nanos {
        Nanos(self.started.elapsed().as_nanos() as u64)
    }

    /// Takes the engine's effects: the monitors' are done at once, under the lock, so that
    /// no applier runs a task before the monitors it needs exist; the rest are returned
    /// for [`Shared::carry_out`] once the lock is released.
    pub(crate) fn drain(&self, inner: &mut Inner) -> Pending {
        let mut effects = inner.engine.take_effects();
        effects.retain(|effect| match effect {
            Effect::ResetMonitors(position) => {
                *lock(&self.monitors) = Some(Arc::new(Monitors::at(*position)));
                false
            }
            Effect::MonitorsAt(position) => {
                monitors_continue_at(self, *position);
                false
            }
            _ => true,
        });
        let pushed = inner.engine.tasks().pushed();
        debug_assert!(pushed >= inner.tasks_announced, "the task count went back");
        let new_tasks = pushed.saturating_sub(inner.tasks_announced);
        inner.tasks_announced = pushed;
        if new_tasks > 0 {
            if let Some(runner) = inner.runner.as_ref() {
                // The queue grows here. An applier reports it only when it finishes a task,
                // and appliers that all wait (one held by a table lock, the rest in commit
                // order behind it) finish none: flow control must see it grow as it does.
                let _ = runner.report_apply_queue(inner.engine.tasks().len() as u64);
            }
        }
        Pending {
            effects,
            runner: inner.runner.clone(),
            new_tasks,
        }
    }

    /// Runs `f` on the engine, then carries out what it decided.
    pub(crate) fn with_engine<R>(self: &Arc<Self>, f: impl FnOnce(&mut NodeEngine) -> R) -> R {
        let (result, pending) = {
            let mut inner = lock(&self.inner);
            let result = f(&mut inner.engine);
            (result, self.drain(&mut inner))
        };
        self.carry_out(pending);
        result
    }

    /// Carries out effects taken with [`Shared::drain`], in order.
    pub(crate) fn carry_out(self: &Arc<Self>, pending: Pending) {
        let Pending {
            effects,
            runner,
            new_tasks,
        } = pending;
        // The appliers start on new tasks while the effects (cache writes) are carried out.
        match new_tasks {
            0 => {}
            1 => self.work.notify_one(),
            _ => self.work.notify_all(),
        }
        let mut cached = false;
        for effect in effects {
            cached |= matches!(effect, Effect::Cache(_));
            self.carry_out_one(effect, runner.as_ref());
        }
        if cached {
            // The gcache gathers small records; one write for the batch (an IST receiver's
            // batch is up to 64 write-sets) instead of one per record. Flushing before this
            // thread goes on keeps a process crash from losing more than it did before.
            self.flush_cache();
        }
    }

    fn carry_out_one(self: &Arc<Self>, effect: Effect, runner: Option<&RunnerHandle>) {
        match effect {
            Effect::Log(level, message) => self.app.log(level, &message),
            Effect::AnnounceState(state) => {
                if let Some(runner) = runner {
                    let _ = runner.set_local_state(state);
                }
            }
            Effect::Cache(write) => self.cache_write(&write, runner),
            Effect::RequestState(request) => {
                if let Some(runner) = runner {
                    let _ = runner.request_state(request);
                }
            }
            Effect::SendTransfer(transfer) => self.send_transfer(transfer),
            Effect::Vote { seqno, code } => {
                if let Some(runner) = runner {
                    let _ = runner.vote(seqno, code);
                }
            }
            Effect::TransferFailed { joiner } => {
                if let Some(runner) = runner {
                    let _ = runner.transfer_failed(joiner);
                }
            }
            Effect::Leave => {
                if let Some(runner) = runner {
                    let _ = runner.leave();
                }
            }
            Effect::Fatal(message) => {
                // As Galera's abort: leave the group first, so that the others do not count
                // a node that will never answer again (two of two would otherwise lose their
                // quorum to a joiner that died), then hand over to the server.
                leave_group(self, FATAL_LEAVE_WAIT);
                self.app.fatal(&message);
            }
            Effect::ResetMonitors(_) | Effect::MonitorsAt(_) => {
                unreachable!("done in drain")
            }
        }
    }

    /// Stores an ordered action in the cache, and tells the group how far back it reaches.
    fn cache_write(&self, write: &CacheWrite, runner: Option<&RunnerHandle>) {
        let (result, from) = {
            let mut cache = lock(&self.cache);
            let result = cache.record(
                write.history,
                write.seqno,
                write.kind,
                write.depends_on,
                &write.payload,
            );
            (result, cache.reach_from())
        };
        if let Err(error) = result {
            if !self.cache_failed.swap(true, Ordering::Relaxed) {
                let message = format!("cannot store seqno {} in the gcache: {error}", write.seqno);
                self.app.log(LogLevel::Warning, &message);
            }
        }
        // A store into the group member's gauges: cheap enough for every write-set.
        if let Some(runner) = runner {
            let _ = runner.report_cached(from);
        }
    }

    /// Writes the records the gcache gathered to its file.
    fn flush_cache(&self) {
        let result = lock(&self.cache).flush();
        if let Err(error) = result {
            if !self.cache_failed.swap(true, Ordering::Relaxed) {
                let message = format!("cannot write the newest seqnos to the gcache: {error}");
                self.app.log(LogLevel::Warning, &message);
            }
        }
    }

    /// Starts the thread that sends a state transfer stream to a joiner.
    fn send_transfer(self: &Arc<Self>, transfer: OutgoingTransfer) {
        let sender = transfer::spawn_sender(Arc::clone(self), transfer);
        if let Some(sender) = sender {
            lock(&self.senders).push(sender);
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
