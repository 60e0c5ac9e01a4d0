//! Joining and leaving: `connect` starts the group member, the dispatcher and the state
//! transfer receiver; `disconnect` and `shutdown` stop them and save the final position.

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base::grastate::SavedState;
use base::{Gtid, Uuid};
use engine::ConnectionStart;
use group::recovery::RestartState;
use group::{Contact, Delivery};
use transport::{priority, GroupRunner, Role, TransportOptions};

use crate::addresses::Reachable;
use crate::app::LogLevel;
use crate::dispatcher::dispatch;
use crate::error::ReplicatorError;
use crate::settings::parse_cluster_address;
use crate::shared::{lock, Shared};
use crate::{cache, transfer, Replicator};

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

/// How long `disconnect` waits for the group to let this member go.
const DISCONNECT_LEAVE_WAIT: Duration = Duration::from_secs(5);

/// How long a fatal stop waits for the same: shorter, as the server is failing anyway.
pub(crate) const FATAL_LEAVE_WAIT: Duration = Duration::from_secs(3);

const _: () = assert!(FATAL_LEAVE_WAIT.as_secs() <= DISCONNECT_LEAVE_WAIT.as_secs());

/// Leaves the group and waits (at most `wait`) until this node is out of the primary
/// component.
pub(crate) fn leave_group(shared: &Shared, wait: Duration) {
    let Some(runner) = lock(&shared.inner).runner.clone() else {
        return;
    };
    if runner.leave().is_err() {
        return;
    }
    runner.await_status(wait, Duration::from_millis(20), |status| !status.primary);
}

impl Replicator {
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
        self.shared
            .with_engine(|engine| engine.begin_connection(donor_names))
            .map_err(|_| ReplicatorError::AlreadyConnected)?;
        let started = self.start_connection(cluster_name, peers, bootstrap);
        if started.is_err() {
            lock(&self.shared.inner).engine.connection_failed();
        }
        started
    }

    /// Starts this connection's threads: the state transfer receiver, the group member and
    /// the dispatcher. On an error the caller marks the node disconnected.
    fn start_connection(
        &self,
        cluster_name: &str,
        peers: Vec<String>,
        bootstrap: bool,
    ) -> Result<(), ReplicatorError> {
        // A connection that ended without `disconnect` (this node left the cluster after
        // losing a consistency vote) still holds its group port.
        self.stop_group_threads();
        let reachable = self.decide_addresses(&peers)?;
        let start_position = self.start_position();
        self.open_cache(start_position);
        self.start_transfer_receiver(&reachable, bootstrap)?;
        let role = self.founding_role(bootstrap, peers, start_position)?;
        let deliveries = self.start_group(cluster_name, role, &reachable)?;
        // The saved state says "running" from here on (the engine saves it): after the
        // founding role was read from it.
        self.shared.with_engine(|engine| {
            engine.start_connection(ConnectionStart {
                bootstrap,
                start_position,
                ist_address: reachable.ist.clone(),
            })
        });
        let shared = Arc::clone(&self.shared);
        let dispatcher = std::thread::Builder::new()
            .name("trireme-dispatch".into())
            .spawn(move || {
                priority::lower_this_thread(shared.settings.thread_nice);
                panic_if_injected();
                dispatch(&shared, &deliveries)
            })
            .expect("spawning the dispatcher thread");
        *lock(&self.dispatcher) = Some(dispatcher);
        Ok(())
    }

    /// Listens for state transfer streams. Every node does: a founder, too, may fall out of
    /// the primary component and come back through IST. Only a founder may go on without.
    fn start_transfer_receiver(
        &self,
        reachable: &Reachable,
        bootstrap: bool,
    ) -> Result<(), ReplicatorError> {
        let address = reachable.ist_bind;
        // The previous connection's receiver holds the port until it sees this one begin
        // (a server that reconnects at once, after `SET GLOBAL wsrep_cluster_address`).
        if let Some(previous) = lock(&self.ist_receiver).take() {
            let _ = previous.join();
        }
        match TcpListener::bind(address) {
            Ok(listener) => {
                let shared = Arc::clone(&self.shared);
                let connection = lock(&self.shared.inner).engine.connection();
                let thread = std::thread::Builder::new()
                    .name("trireme-ist-recv".into())
                    .spawn(move || {
                        priority::lower_this_thread(shared.settings.thread_nice);
                        transfer::receive_transfers(shared, listener, connection)
                    })
                    .expect("spawning the state transfer receiver");
                *lock(&self.ist_receiver) = Some(thread);
                Ok(())
            }
            Err(error) if !bootstrap => Err(ReplicatorError::Transport {
                address,
                reason: error.to_string(),
            }),
            Err(error) => {
                let message = format!(
                    "cannot listen for IST on {address} ({error}): this node cannot catch up \
                     by IST if it ever falls out of the cluster"
                );
                self.shared.app.log(LogLevel::Warning, &message);
                Ok(())
            }
        }
    }

    /// Starts the group member in `role`; returns its deliveries, for the dispatcher.
    fn start_group(
        &self,
        cluster_name: &str,
        role: Role,
        reachable: &Reachable,
    ) -> Result<Receiver<Delivery>, ReplicatorError> {
        let settings = &self.shared.settings;
        let contact = Contact {
            name: settings.node_name.clone(),
            address: reachable.group.clone(),
            incoming: settings.incoming_address.clone(),
        };
        let transport = TransportOptions {
            cluster_name: cluster_name.to_owned(),
            tls: settings.tls.clone(),
            thread_nice: settings.thread_nice,
            ..TransportOptions::default()
        };
        let mut runner = GroupRunner::start_with_options(
            settings.group.clone(),
            role,
            contact,
            reachable.group_bind,
            settings.seed,
            transport,
        )
        .map_err(|error| ReplicatorError::Transport {
            address: reachable.group_bind,
            reason: error.to_string(),
        })?;
        let deliveries = runner
            .take_deliveries()
            .expect("a new runner has its deliveries");
        {
            let mut inner = lock(&self.shared.inner);
            inner.runner = Some(runner.handle());
            inner.engine.group_started(runner.status().uuid);
            if self.shared.isolated.load(Ordering::Acquire) {
                let _ = runner.handle().isolate(true);
            }
        }
        *lock(&self.runner) = Some(runner);
        Ok(deliveries)
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
    pub(crate) fn start_position(&self) -> Option<Gtid> {
        let settings = &self.shared.settings;
        let known = |gtid: &Gtid| gtid.cluster != Uuid::NIL && gtid.seqno.is_defined();
        let saved = self.saved_state();
        if self.position_cleared() {
            let message = "this node's saved state was cleared after an inconsistency: it \
                           takes no position of its own and joins by a full state transfer";
            self.shared.app.log(LogLevel::Info, message);
            return None;
        }
        // A server that already committed in this process (connected again at runtime, after
        // `SET GLOBAL wsrep_cluster_address`) stands where its monitors stand: the position
        // it passed at `init` and the one saved at the last disconnect may both be behind
        // what its appliers went on to commit.
        let running = {
            let cluster = lock(&self.shared.inner).engine.cluster();
            let committed = self.last_committed_locked();
            let running = lock(&self.shared.monitors).is_some();
            running.then_some(Gtid {
                cluster,
                seqno: committed,
            })
        };
        running
            .filter(known)
            .or(settings.history.filter(known))
            .or_else(|| saved.map(|s| s.position).filter(known))
    }

    /// The saved state (`grastate.dat`), if the node keeps a readable one.
    pub(crate) fn saved_state(&self) -> Option<SavedState> {
        lock(&self.shared.inner).engine.saved_state().ok().flatten()
    }

    /// True when this node's position was cleared by a lost consistency vote (in this
    /// process, or saved with no history UUID before it).
    fn position_cleared(&self) -> bool {
        lock(&self.shared.inner).engine.position_cleared()
    }

    /// Opens the write-set cache for the server's own history (it is started over if the
    /// node lands in another one), without what is past the server's position.
    fn open_cache(&self, start_position: Option<Gtid>) {
        let settings = &self.shared.settings;
        let Some(config) = settings.gcache.as_ref() else {
            return;
        };
        let history = start_position.map_or(Uuid::NIL, |h| h.cluster);
        let app = &self.shared.app;
        let opened = cache::open(config, history, |message| {
            app.log(LogLevel::Info, &message);
        });
        let mut cache = lock(&self.shared.cache);
        let freeze = cache.freeze_purge();
        *cache = opened;
        if let Err(error) = cache.set_freeze_purge(freeze) {
            let message = format!("cannot apply gcache.freeze_purge_at_seqno={freeze}: {error}");
            app.log(LogLevel::Warning, &message);
        }
        if let Some(position) = start_position {
            if let Err(error) = cache.drop_past(position) {
                let message = format!("gcache: cannot drop what is past {position}: {error}");
                app.log(LogLevel::Warning, &message);
            }
        }
    }

    /// How to start the group: join through `peers`, or found a cluster. Founding is
    /// refused, as in Galera, when the saved state says another node left after this one;
    /// it continues the server's history when the server has one.
    fn founding_role(
        &self,
        bootstrap: bool,
        peers: Vec<String>,
        start_position: Option<Gtid>,
    ) -> Result<Role, ReplicatorError> {
        if !bootstrap {
            return Ok(self.joining_role(peers, start_position));
        }
        let settings = &self.shared.settings;
        let (saved, location) = {
            let inner = lock(&self.shared.inner);
            let saved = inner.engine.saved_state();
            (saved, inner.engine.saved_state_location())
        };
        let saved = saved.map_err(ReplicatorError::SavedState)?;
        if let Some(saved) = saved.as_ref() {
            if saved.position.cluster != Uuid::NIL && !saved.safe_to_bootstrap {
                return Err(ReplicatorError::UnsafeBootstrap(location));
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

    /// Joins through `peers`, or, after a crash in a component of two, comes back as the
    /// member it was (see `group::restart`). Not after a lost consistency vote, whose node
    /// must come back by a full snapshot as a new member. Either way it brings its last
    /// primary view and position, to restore the primary component after a full crash
    /// (`group::recovery`).
    fn joining_role(&self, peers: Vec<String>, start_position: Option<Gtid>) -> Role {
        let (cleared, saved, last_view) = {
            let mut inner = lock(&self.shared.inner);
            (
                inner.engine.position_cleared(),
                inner.engine.saved_membership(),
                inner.engine.saved_last_view(),
            )
        };
        let restart = Some(RestartState {
            last_view: last_view.filter(|_| !cleared),
            position: start_position,
        });
        match saved.filter(|_| !cleared) {
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
                    restart,
                }
            }
            None => Role::Join {
                seeds: peers,
                restart,
            },
        }
    }

    /// Saves the position this node leaves with. It is safe to bootstrap from if it was
    /// the last member of the primary component.
    fn save_final_state(&self, last_member: bool) {
        let committed = self.last_committed_locked();
        self.shared
            .with_engine(|engine| engine.save_final_state(last_member, committed));
    }

    /// Asks the group to remove this member and waits, up to `wait`, until it is out of
    /// the primary component.
    pub(crate) fn leave_group(&self, wait: Duration) {
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
        let last_member = self.shared.with_engine(|engine| engine.begin_disconnect());
        self.leave_group(DISCONNECT_LEAVE_WAIT);
        self.stop_group_threads();
        // Left cleanly: the next start joins as a new member, and restores nothing by itself
        // (as Galera removes gvwstate.dat at a clean leave).
        self.shared.with_engine(|engine| {
            engine.forget_membership();
            engine.forget_last_view();
        });
        let (closed, pending) = {
            let mut inner = lock(&self.shared.inner);
            let connected = inner.engine.connected();
            if connected {
                inner.engine.close_with_final_view();
            }
            let pending = self.shared.drain(&mut inner);
            if connected {
                inner.runner = None;
            }
            (connected, pending)
        };
        self.shared.carry_out(pending);
        if closed {
            self.save_final_state(last_member);
        }
        self.shared.notify_everyone();
        self.write_seqno_trace();
    }

    /// Writes the pipeline's per-seqno timeline, if it was traced.
    fn write_seqno_trace(&self) {
        let Some(trace) = &self.shared.seqno_trace else {
            return;
        };
        let (level, message) = match trace.write() {
            Ok(path) => (
                LogLevel::Info,
                format!("seqno trace written to {}", path.display()),
            ),
            Err(error) => (LogLevel::Warning, format!("seqno trace: {error}")),
        };
        self.shared.app.log(level, &message);
    }

    /// Stops everything and waits for the threads. Safe to call more than once.
    pub fn shutdown(&self) {
        self.disconnect();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut inner = lock(&self.shared.inner);
        while !inner.engine.tasks().is_empty() && Instant::now() < deadline {
            let (guard, _) = self
                .shared
                .changed
                .wait_timeout(inner, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
        let last_member = inner.engine.take_last_member_on_leave();
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
}
