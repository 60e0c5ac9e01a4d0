//! Runs a [`group::GroupNode`] over real TCP: the I/O shell around the deterministic core.
//!
//! A [`GroupRunner`] owns one member and the threads that carry its traffic:
//! - one event-loop thread owns the `GroupNode`. It waits on a channel of events (frames from
//!   the reader threads, submissions, leave requests, shutdown), ticks the node every
//!   `tick_interval_ns` of the real clock, drains whatever else is queued so that one
//!   [`group::GroupNode::poll`] covers a whole batch of events, then hands the node's
//!   outgoing messages to the peers and its deliveries to the user's channel. A connected
//!   peer's frames are written by the loop itself when the socket takes them at once and
//!   nothing of its writer thread is pending (a thread switch saved per message); otherwise
//!   they go to that writer thread;
//! - one accept thread takes inbound connections, and one reader thread per connection cuts
//!   the byte stream into frames with [`group::wire::frame_len`] and forwards whole frames;
//!   a connection that sends something that is not a group frame is closed;
//! - one writer thread per destination address connects lazily, writes what the loop could
//!   not write at once (first the rest of a write the loop started), batches every frame queued
//!   for that peer into as few writes as possible, and on a connection or write failure drops
//!   what is queued (Raft retransmits) and tries again after a short back-off. A peer that
//!   leaves sent data unacknowledged for [`TransportOptions::peer_timeout`] counts as a
//!   failure too, so a link that was down does not hold the first messages after it is back.
//!
//! These threads run [`TransportOptions::thread_nice`] nice steps below the process's own
//! (`priority.rs`): in a server, its appliers and client threads come first.
//!
//! Every queue is bounded: the event channel (readers and submitters wait when it is full,
//! which pushes back through TCP), each writer's queue (frames beyond it are dropped with a
//! warning) and the delivery channel (the event loop waits for the user to catch up).
//!
//! The node's running figures (committed seqno, cache reach, apply queue) do not go through
//! the event channel: they are kept in atomics the loop reads before every poll, and only an
//! apply queue that crosses a flow-control trigger wakes it (`gauges.rs`).
//!
//! Submissions are cheap: [`RunnerHandle::submit`] numbers the write-set and queues it
//! without waiting for the event loop. The number it returns is the `submit_id` of the
//! matching [`Delivery::WriteSet`] (with `local: true`) or [`Delivery::Abandoned`].

// This crate is the I/O shell: it reads the real clock and spawns threads, which
// clippy.toml forbids in the deterministic core crates.
#![allow(clippy::disallowed_methods)]

mod event_loop;
mod gauges;
pub mod handshake;
mod net;
pub mod priority;
mod writer;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use base::{seeded_rng, Nanos, NodeState, Seqno};
use group::recovery::RestartState;
use group::{Contact, Delivery, GroupConfig, GroupNode, GroupStatus};

use crate::event_loop::{Event, EventLoop, GroupClock};
use crate::gauges::Gauges;
use crate::net::Connections;

/// How the member enters the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Found a new cluster with this member as its only member (`--wsrep-new-cluster`).
    Bootstrap,
    /// Found a new cluster that continues a saved history (its state UUID and seqno).
    BootstrapFrom(base::Gtid),
    /// Join an existing cluster through the members listening at `seeds` (`host:port`).
    Join {
        /// Addresses of members to ask for admission.
        seeds: Vec<String>,
        /// A data node's saved view and position, to restore the primary component after
        /// a full crash (`group::recovery`); `None` for a member without data.
        restart: Option<RestartState>,
    },
    /// Come back under the identity saved before a crash, in a component of two (see
    /// `group::restart`); join through `seeds` as a new member if nobody brings it back.
    ComeBack {
        /// The saved identity.
        saved: group::restart::SavedMembership,
        /// Addresses of members to ask for admission, should it come to that.
        seeds: Vec<String>,
        /// As for [`Role::Join`].
        restart: Option<RestartState>,
    },
}

/// The group member a runner starts in `role`.
fn member_for(
    role: Role,
    config: GroupConfig,
    contact: &Contact,
    rng: base::SeededRng,
    epoch: Nanos,
) -> GroupNode {
    // A founder holds data (the server's own); only a joiner may hold none (the arbitrator).
    let founder = Some(RestartState::default());
    let (mut node, restart) = match role {
        Role::Bootstrap => (GroupNode::bootstrap(config, contact, rng, epoch), founder),
        Role::BootstrapFrom(history) => (
            GroupNode::bootstrap_from(config, contact, Some(history), rng, epoch),
            founder,
        ),
        Role::Join { seeds, restart } => {
            (GroupNode::join(config, contact, seeds, rng, epoch), restart)
        }
        Role::ComeBack {
            saved,
            seeds,
            restart,
        } => (
            GroupNode::come_back(config, contact, &saved, seeds, rng, epoch),
            restart,
        ),
    };
    if let Some(state) = restart {
        node.hold_data(state);
    }
    node
}

/// Settings of the transport itself (queue bounds, timeouts).
#[derive(Clone, Debug)]
pub struct TransportOptions {
    /// Events (frame batches, submissions, requests) queued for the event loop before
    /// readers and submitters wait.
    pub event_queue: usize,
    /// Deliveries queued for the user before the event loop waits for the user.
    pub delivery_queue: usize,
    /// Frames queued for one peer; beyond this, frames for that peer are dropped.
    pub writer_queue_frames: usize,
    /// Inbound connections accepted at once; more are closed on arrival.
    pub max_connections: usize,
    /// Destination addresses with a writer at once; frames for more are dropped.
    pub max_peers: usize,
    /// Timeout of one connection attempt.
    pub connect_timeout: Duration,
    /// Wait after a failed connection attempt or write before connecting again.
    pub reconnect_backoff: Duration,
    /// Longest a peer may leave sent bytes unacknowledged before its connection counts as
    /// dead (`TCP_USER_TIMEOUT`, Galera's `gmcast.peer_timeout`). Without it a link that
    /// went down keeps the old connection retransmitting with a growing back-off, and the
    /// first messages after the link comes back wait seconds for the next retry.
    pub peer_timeout: Duration,
    /// A writer with nothing to send for this long closes its connection and ends.
    pub writer_idle_timeout: Duration,
    /// Most events handled between two polls of the node.
    pub max_events_per_poll: usize,
    /// Write buffer of one writer, in bytes.
    pub write_buffer: usize,
    /// `wsrep_cluster_name`: peers of another cluster are refused at the handshake.
    pub cluster_name: String,
    /// TLS for every connection (`socket.ssl_*`); `None`: plaintext.
    pub tls: Option<Arc<tls::TlsContext>>,
    /// Longest a new connection may take for TLS and the member handshake.
    pub handshake_timeout: Duration,
    /// An inbound connection silent for this long is closed (a peer that vanished without
    /// a FIN, or one that never sends). Longer than `writer_idle_timeout`, after which a
    /// peer closes a connection it has no use for.
    pub idle_timeout: Duration,
    /// Connections from one address (an IPv6 /64) still in their handshake; more are closed
    /// on arrival, so that one misbehaving source cannot hold every connection slot.
    pub max_pending_per_source: usize,
    /// Connections from one address (an IPv6 /64) at once, handshake done or not. A member
    /// needs one per peer that writes to it.
    pub max_connections_per_source: usize,
    /// Wait after a peer refused this member (another cluster, TLS) before trying again.
    pub refused_backoff: Duration,
    /// Nice steps the transport's threads run below the process's own threads (see
    /// [`priority`]); 0 leaves them at the process's priority.
    pub thread_nice: u8,
}

/// MariaDB's default `wsrep_cluster_name`.
pub const DEFAULT_CLUSTER_NAME: &str = "my_wsrep_cluster";

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            event_queue: 16_384,
            delivery_queue: 16_384,
            writer_queue_frames: 65_536,
            max_connections: 256,
            max_peers: 256,
            connect_timeout: Duration::from_secs(1),
            reconnect_backoff: Duration::from_millis(50),
            peer_timeout: Duration::from_secs(3),
            writer_idle_timeout: Duration::from_secs(60),
            max_events_per_poll: 4_096,
            write_buffer: 256 << 10,
            cluster_name: DEFAULT_CLUSTER_NAME.to_owned(),
            tls: None,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(90),
            max_pending_per_source: 16,
            max_connections_per_source: 64,
            refused_backoff: Duration::from_secs(1),
            thread_nice: 0,
        }
    }
}

/// The runner was shut down (or its event loop ended): the request was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the group runner has stopped")
    }
}

impl std::error::Error for Stopped {}

/// State shared between the runner's threads.
pub(crate) struct Shared {
    /// Set once shutdown starts: nothing new is started, waits give up.
    pub(crate) stopping: AtomicBool,
    /// The node's status as of the last poll that changed something.
    pub(crate) status: Mutex<GroupStatus>,
    /// Its running figures, reported without waking the loop.
    pub(crate) gauges: Gauges,
}

impl Shared {
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    pub(crate) fn status(&self) -> MutexGuard<'_, GroupStatus> {
        lock(&self.status)
    }
}

/// Nanoseconds since the UNIX epoch (0 on a clock set before it).
fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Locks a mutex, ignoring poisoning (every critical section here leaves valid state).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cheap, cloneable handle to a running member: submit, leave, report, read status.
/// It may be used from any thread; it stays valid (and reports [`Stopped`]) after shutdown.
#[derive(Clone)]
pub struct RunnerHandle {
    events: SyncSender<Event>,
    next_ticket: Arc<AtomicU64>,
    shared: Arc<Shared>,
}

impl RunnerHandle {
    /// Queues a write-set for ordering and returns its `submit_id` at once.
    ///
    /// Waits only if the event loop's queue is full.
    pub fn submit(&self, payload: Vec<u8>) -> Result<u64, Stopped> {
        self.submit_with(payload, false)
    }

    /// Queues a write-set that flow control does not hold back (a streaming rollback).
    pub fn submit_urgent(&self, payload: Vec<u8>) -> Result<u64, Stopped> {
        self.submit_with(payload, true)
    }

    fn submit_with(&self, payload: Vec<u8>, urgent: bool) -> Result<u64, Stopped> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.send(Event::Submit {
            ticket,
            payload,
            urgent,
        })?;
        Ok(ticket)
    }

    /// Withdraws a submission that flow control still holds back (never sent): true if it
    /// will never be ordered, false if it may still be.
    pub fn cancel(&self, ticket: u64) -> Result<bool, Stopped> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.send(Event::Cancel { ticket, reply })?;
        answer.recv().map_err(|_| Stopped)
    }

    /// Starts a graceful leave; [`Delivery::Closed`] follows when it is done.
    pub fn leave(&self) -> Result<(), Stopped> {
        self.send(Event::Leave)
    }

    /// Reports the length of the local queue of ordered-but-not-committed write-sets, for
    /// flow control (`gcs.fc_limit`). Wakes the member only when the length crosses a
    /// flow-control trigger (see `gauges.rs`); otherwise it reads it at its next poll.
    pub fn report_apply_queue(&self, queued: u64) -> Result<(), Stopped> {
        self.running()?;
        if self.shared.gauges.set_apply_queue(queued) {
            self.send(Event::ApplyQueueCrossed)?;
        }
        Ok(())
    }

    /// Reports the last seqno this node committed (its part of the commit cut, which the
    /// write-sets' `safe_seqno` carries). The member reads it at its next poll.
    pub fn report_committed(&self, seqno: Seqno) -> Result<(), Stopped> {
        self.running()?;
        self.shared.gauges.set_committed(seqno);
        Ok(())
    }

    /// Reports the oldest seqno this node's write-set cache holds (`UNDEFINED`: none), so
    /// that donor selection can prefer a member that can serve IST. The member reads it at
    /// its next poll.
    pub fn report_cached(&self, seqno: Seqno) -> Result<(), Stopped> {
        self.running()?;
        self.shared.gauges.set_cached_from(seqno);
        Ok(())
    }

    /// Announces a node state change to the group.
    pub fn set_local_state(&self, state: NodeState) -> Result<(), Stopped> {
        self.send(Event::LocalState(state))
    }

    /// Tells a joiner its snapshot will never come; see `GroupNode::transfer_failed`.
    pub fn transfer_failed(&self, joiner: u64) -> Result<(), Stopped> {
        self.send(Event::TransferFailed(joiner))
    }

    /// Casts this node's verdict in a consistency vote; see `GroupNode::vote`.
    pub fn vote(&self, seqno: Seqno, code: group::vote::VoteCode) -> Result<(), Stopped> {
        self.send(Event::Vote(seqno, code))
    }

    /// Asks the group for state transfer; the donor is chosen in the total order.
    pub fn request_state(&self, request: group::StateRequest) -> Result<(), Stopped> {
        self.send(Event::StateRequest(request))
    }

    /// Applies runtime option changes; see `GroupNode::reconfigure`.
    pub fn reconfigure(&self, config: group::GroupConfig) -> Result<(), Stopped> {
        self.send(Event::Reconfigure(Box::new(config)))
    }

    /// Cuts this member off from every peer, or restores its links (`gmcast.isolate`).
    pub fn isolate(&self, isolated: bool) -> Result<(), Stopped> {
        self.send(Event::Isolate(isolated))
    }

    /// `pc.bootstrap=YES` at runtime; see `GroupNode::force_bootstrap`.
    pub fn force_bootstrap(&self) -> Result<(), Stopped> {
        self.send(Event::ForceBootstrap)
    }

    /// Asks where a causal read must wait; answered by a `Delivery::Causal` with `id`.
    pub fn causal_read(&self, id: u64) -> Result<(), Stopped> {
        self.send(Event::CausalRead(id))
    }

    /// The member's status as of the event loop's last poll (at most one tick old).
    pub fn status(&self) -> GroupStatus {
        self.shared.status().clone()
    }

    /// From the same status, only whether the member is in a primary component and what to
    /// save to come back as it after a crash: what a tick after every delivery needs,
    /// without copying the member rows and counters of the whole status each time.
    pub fn primary_and_saved_membership(&self) -> (bool, Option<group::restart::SavedMembership>) {
        let status = self.shared.status();
        (status.primary, status.saved_membership.clone())
    }

    /// Local write-sets submitted and not yet wholly sent to the leader, as of the event
    /// loop's last poll: Galera's send queue (flow control holds them, mostly).
    pub fn write_sets_waiting_to_send(&self) -> u64 {
        self.shared.gauges.waiting_to_send()
    }

    /// Reads the status every `poll` until `done` holds (true) or `wait` has passed (false).
    pub fn await_status(
        &self,
        wait: Duration,
        poll: Duration,
        done: impl Fn(&GroupStatus) -> bool,
    ) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if done(&self.status()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(poll);
        }
    }

    fn send(&self, event: Event) -> Result<(), Stopped> {
        self.running()?;
        self.events.send(event).map_err(|_| Stopped)
    }

    /// `Err` once the runner is shutting down: nothing new is taken.
    fn running(&self) -> Result<(), Stopped> {
        if self.shared.stopping() {
            return Err(Stopped);
        }
        Ok(())
    }
}

/// One group member running over TCP. Dropping it shuts it down.
pub struct GroupRunner {
    handle: RunnerHandle,
    name: String,
    local_addr: SocketAddr,
    deliveries: Option<Receiver<Delivery>>,
    connections: Arc<Connections>,
    loop_thread: Option<JoinHandle<()>>,
    accept_thread: Option<JoinHandle<()>>,
    stopped: bool,
}

impl GroupRunner {
    /// Starts a member listening at `listen_addr` (port 0 picks a free port; the member
    /// advertises the address actually bound, see [`GroupRunner::local_addr`]).
    pub fn start(
        config: GroupConfig,
        role: Role,
        name: &str,
        listen_addr: SocketAddr,
        seed: u64,
    ) -> io::Result<GroupRunner> {
        GroupRunner::start_with_options(
            config,
            role,
            Contact::new(name, ""),
            listen_addr,
            seed,
            TransportOptions::default(),
        )
    }

    /// Starts a member that listens at `listen_addr` and presents itself as `contact`. An
    /// empty `contact.address` advertises the address actually bound, which peers can only
    /// reach if it is not a wildcard.
    pub fn start_with_options(
        config: GroupConfig,
        role: Role,
        mut contact: Contact,
        listen_addr: SocketAddr,
        seed: u64,
        options: TransportOptions,
    ) -> io::Result<GroupRunner> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        check_options(&options)?;
        let listener = TcpListener::bind(listen_addr)?;
        let local_addr = listener.local_addr()?;
        if contact.address.is_empty() {
            contact.address = local_addr.to_string();
        }
        let name = contact.name.clone();
        let name = name.as_str();

        let clock = Instant::now();
        // The group's time is wall-clock time (nanoseconds since the UNIX epoch at start, then
        // advanced by the monotonic clock): member UUIDs are made from it and must sort by
        // start time across nodes, as Galera's do.
        let epoch = Nanos(unix_nanos());
        let tick_interval = Duration::from_nanos(config.tick_interval_ns);
        let rng = seeded_rng(seed);
        let node = member_for(role, config, &contact, rng, epoch);
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            status: Mutex::new(node.status()),
            gauges: Gauges::new(),
        });
        let (events_tx, events_rx) = mpsc::sync_channel(options.event_queue);
        let (deliveries_tx, deliveries_rx) = mpsc::sync_channel(options.delivery_queue);
        let connections = Arc::new(Connections::default());

        let event_loop = EventLoop::new(
            node,
            GroupClock {
                started: clock,
                epoch,
            },
            tick_interval,
            events_rx,
            deliveries_tx,
            Arc::clone(&shared),
            options.clone(),
        );
        let nice = options.thread_nice;
        let loop_thread = thread::Builder::new()
            .name(format!("trireme-loop-{name}"))
            .spawn(move || {
                priority::lower_this_thread(nice);
                event_loop.run()
            })?;

        let mut runner = GroupRunner {
            handle: RunnerHandle {
                events: events_tx.clone(),
                next_ticket: Arc::new(AtomicU64::new(1)),
                shared: Arc::clone(&shared),
            },
            name: name.to_owned(),
            local_addr,
            deliveries: Some(deliveries_rx),
            connections: Arc::clone(&connections),
            loop_thread: Some(loop_thread),
            accept_thread: None,
            stopped: false,
        };
        // On failure from here on, dropping `runner` stops the event loop.
        let accept_thread = thread::Builder::new()
            .name(format!("trireme-accept-{name}"))
            .spawn(move || {
                priority::lower_this_thread(options.thread_nice);
                net::accept_loop(listener, events_tx, connections, shared, options)
            })?;
        runner.accept_thread = Some(accept_thread);
        tracing::info!(name, %local_addr, advertised = %contact.address, "group member started");
        Ok(runner)
    }

    /// The address the member listens at (port 0 resolved); peers may know it by another.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The member's name (`wsrep_node_name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A cloneable handle for submitting from other threads.
    pub fn handle(&self) -> RunnerHandle {
        self.handle.clone()
    }

    /// Takes the channel of deliveries (write-sets, views, ...), in order. Only the first
    /// call returns it. The user must keep draining it (or drop it): when it is full, the
    /// event loop waits, and the member stops taking part in the group meanwhile.
    pub fn take_deliveries(&mut self) -> Option<Receiver<Delivery>> {
        self.deliveries.take()
    }

    /// Queues a write-set for ordering; see [`RunnerHandle::submit`].
    pub fn submit(&self, payload: Vec<u8>) -> Result<u64, Stopped> {
        self.handle.submit(payload)
    }

    /// Queues a write-set flow control does not hold; see [`RunnerHandle::submit_urgent`].
    pub fn submit_urgent(&self, payload: Vec<u8>) -> Result<u64, Stopped> {
        self.handle.submit_urgent(payload)
    }

    /// Starts a graceful leave; see [`RunnerHandle::leave`].
    pub fn leave(&self) -> Result<(), Stopped> {
        self.handle.leave()
    }

    /// Reports the apply queue length; see [`RunnerHandle::report_apply_queue`].
    pub fn report_apply_queue(&self, queued: u64) -> Result<(), Stopped> {
        self.handle.report_apply_queue(queued)
    }

    /// Reports the last committed seqno; see [`RunnerHandle::report_committed`].
    pub fn report_committed(&self, seqno: Seqno) -> Result<(), Stopped> {
        self.handle.report_committed(seqno)
    }

    /// Announces a node state change; see [`RunnerHandle::set_local_state`].
    pub fn set_local_state(&self, state: NodeState) -> Result<(), Stopped> {
        self.handle.set_local_state(state)
    }

    /// Asks for state transfer; see [`RunnerHandle::request_state`].
    pub fn request_state(&self, request: group::StateRequest) -> Result<(), Stopped> {
        self.handle.request_state(request)
    }

    /// The member's status; see [`RunnerHandle::status`].
    pub fn status(&self) -> GroupStatus {
        self.handle.status()
    }

    /// The member's send queue; see [`RunnerHandle::write_sets_waiting_to_send`].
    pub fn write_sets_waiting_to_send(&self) -> u64 {
        self.handle.write_sets_waiting_to_send()
    }

    /// Stops every thread of the member and waits for them. Idempotent.
    pub fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.handle.shared.stopping.store(true, Ordering::Release);
        // The event loop: it stops writers (and their connections) before it ends.
        if let Some(thread) = self.loop_thread.take() {
            // Fails only if the loop already ended.
            let _ = self.handle.events.send(Event::Shutdown);
            if thread.join().is_err() {
                tracing::error!(name = %self.name, "the event loop panicked");
            }
        }
        // The acceptor: wake it from accept() with a connection of our own.
        if let Some(thread) = self.accept_thread.take() {
            let mut wake = self.local_addr;
            match wake.ip() {
                ip if ip.is_unspecified() && ip.is_ipv4() => {
                    wake.set_ip(Ipv4Addr::LOCALHOST.into())
                }
                ip if ip.is_unspecified() => wake.set_ip(Ipv6Addr::LOCALHOST.into()),
                _ => {}
            }
            match TcpStream::connect_timeout(&wake, Duration::from_secs(1)) {
                Ok(_) => {
                    if thread.join().is_err() {
                        tracing::error!(name = %self.name, "the accept thread panicked");
                    }
                }
                Err(error) => {
                    // Leave it detached rather than hang: it ends with the process.
                    tracing::error!(name = %self.name, %error, "could not wake the accept thread");
                }
            }
        }
        // The readers: shut their sockets down so that their reads return.
        for thread in self.connections.close_all() {
            if thread.join().is_err() {
                tracing::error!(name = %self.name, "a reader thread panicked");
            }
        }
        tracing::info!(name = %self.name, "group member stopped");
    }
}

/// Refuses option combinations the transport cannot run with.
fn check_options(options: &TransportOptions) -> io::Result<()> {
    let invalid = |message: String| Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    if options.event_queue == 0 || options.delivery_queue == 0 {
        return invalid("event_queue and delivery_queue must be positive".into());
    }
    if options.cluster_name.len() > handshake::CLUSTER_NAME_MAX {
        return invalid(format!(
            "the cluster name is {} bytes long; at most {} are allowed",
            options.cluster_name.len(),
            handshake::CLUSTER_NAME_MAX
        ));
    }
    if options.idle_timeout <= options.writer_idle_timeout {
        return invalid("idle_timeout must exceed writer_idle_timeout".into());
    }
    if options.max_pending_per_source == 0
        || options.max_pending_per_source > options.max_connections_per_source
        || options.max_connections_per_source > options.max_connections
    {
        return invalid(
            "need 1 <= max_pending_per_source <= max_connections_per_source <= max_connections"
                .into(),
        );
    }
    Ok(())
}

impl Drop for GroupRunner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
