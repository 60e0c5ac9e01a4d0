//! The thread that owns the `GroupNode`: events in, ticks, polls, frames and deliveries out.

use std::collections::HashMap;
use std::mem;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use base::{Nanos, NodeState, Seqno};
use bytes::Bytes;
use group::{wire, Delivery, GroupNode, Outgoing};

use crate::writer::{SendError, Writer};
use crate::{Shared, TransportOptions};

/// What the event loop is asked to do.
pub(crate) enum Event {
    /// One or more whole frames, back to back, from one connection.
    Frames(Vec<u8>),
    /// A write-set to order, numbered by the submitter.
    Submit {
        ticket: u64,
        payload: Vec<u8>,
        /// Not held back by flow control (see `GroupNode::submit_urgent`).
        urgent: bool,
    },
    /// Start a graceful leave.
    Leave,
    /// The user's apply queue crossed a flow-control trigger (its length is in the gauges).
    ApplyQueueCrossed,
    /// A node state change to announce.
    LocalState(NodeState),
    /// This donor could not send the joiner (Raft id) its snapshot.
    TransferFailed(u64),
    /// This node's verdict in a consistency vote.
    Vote(Seqno, group::vote::VoteCode),
    /// A request for state transfer to order.
    StateRequest(group::StateRequest),
    /// Ask where a causal read must wait.
    CausalRead(u64),
    /// New values of the runtime options.
    Reconfigure(Box<group::GroupConfig>),
    /// Cut this node off from every peer, or end that (`gmcast.isolate`).
    Isolate(bool),
    /// Found a primary component of this member alone (`pc.bootstrap` at runtime).
    ForceBootstrap,
    /// Withdraw a submission not yet sent; the answer says whether it was.
    Cancel {
        ticket: u64,
        reply: std::sync::mpsc::Sender<bool>,
    },
    /// Stop the loop.
    Shutdown,
}

/// Where the group's time starts: a monotonic instant, and the wall-clock time then.
pub(crate) struct GroupClock {
    pub(crate) started: Instant,
    pub(crate) epoch: Nanos,
}

/// Maps the node's submission numbers to the runner's.
///
/// The node numbers submissions from 1 for each membership: a member that was evicted and
/// rejoined starts over. The runner hands out its own numbers at submit time (without a
/// round trip to the loop), and this map translates deliveries back to them.
#[derive(Default)]
struct Tickets {
    /// The node's Raft id the current map belongs to.
    identity: u64,
    current: HashMap<u64, u64>,
    /// The map of the membership that just ended; its `Abandoned` delivery comes next.
    retired: Option<HashMap<u64, u64>>,
}

impl Tickets {
    fn watch_identity(&mut self, raft_id: u64) {
        if raft_id != self.identity {
            self.identity = raft_id;
            let old = mem::take(&mut self.current);
            if !old.is_empty() {
                self.retired = Some(old);
            }
        }
    }

    fn translate(&mut self, delivery: &mut Delivery) {
        match delivery {
            Delivery::WriteSet {
                local: true,
                submit_id,
                ..
            } => {
                if let Some(ticket) = self.current.remove(submit_id) {
                    *submit_id = ticket;
                }
            }
            Delivery::Abandoned { submit_ids } => {
                let Some(map) = self.retired.take() else {
                    // Submissions of the current identity given up (unsent ones when the
                    // node lost the primary component, all at a close); the others stay.
                    for id in submit_ids.iter_mut() {
                        if let Some(ticket) = self.current.remove(id) {
                            *id = ticket;
                        }
                    }
                    return;
                };
                for id in submit_ids.iter_mut() {
                    if let Some(ticket) = map.get(id) {
                        *id = *ticket;
                    }
                }
                // Whatever the node still had pending of the old identity is now forgotten.
                if map.len() > submit_ids.len() {
                    tracing::debug!(
                        unmatched = map.len() - submit_ids.len(),
                        "submissions neither ordered nor abandoned were forgotten"
                    );
                }
            }
            _ => {}
        }
    }
}

pub(crate) struct EventLoop {
    node: GroupNode,
    clock: Instant,
    /// The group's time when `clock` started (see `GroupRunner::start_with_options`).
    epoch: Nanos,
    tick_interval: Duration,
    events: Receiver<Event>,
    deliveries: Option<SyncSender<Delivery>>,
    shared: Arc<Shared>,
    options: TransportOptions,
    writers: HashMap<String, Writer>,
    tickets: Tickets,
    /// Messages refused by the node, for rate-limited logging.
    refused: u64,
    /// Frames dropped because no writer could take them.
    unsent: u64,
    /// `gmcast.isolate`: no frame goes out or comes in, as if every link were cut.
    isolated: bool,
}

impl EventLoop {
    pub(crate) fn new(
        node: GroupNode,
        clock: GroupClock,
        tick_interval: Duration,
        events: Receiver<Event>,
        deliveries: SyncSender<Delivery>,
        shared: Arc<Shared>,
        options: TransportOptions,
    ) -> EventLoop {
        let tickets = Tickets {
            identity: node.me().raft_id,
            ..Tickets::default()
        };
        EventLoop {
            node,
            clock: clock.started,
            epoch: clock.epoch,
            tick_interval,
            events,
            deliveries: Some(deliveries),
            shared,
            options,
            writers: HashMap::new(),
            tickets,
            refused: 0,
            unsent: 0,
            isolated: false,
        }
    }

    fn now(&self) -> (Duration, Nanos) {
        let elapsed = self.clock.elapsed();
        let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        (elapsed, Nanos(self.epoch.0.saturating_add(elapsed_ns)))
    }

    /// When the member asked to be polled again before the next tick (the end of a
    /// flow-control grace), as time since the loop's start.
    fn member_deadline(&self) -> Option<Duration> {
        let at = self.node.flow_deadline()?;
        Some(Duration::from_nanos(at.0.saturating_sub(self.epoch.0)))
    }

    pub(crate) fn run(mut self) {
        let mut next_tick = self.tick_interval;
        loop {
            // A deadline already past would only spin the loop: the poll that passed it has
            // acted on it.
            let elapsed = self.clock.elapsed();
            let wake_at = self
                .member_deadline()
                .filter(|at| *at > elapsed)
                .map_or(next_tick, |at| at.min(next_tick));
            let wait = wake_at.saturating_sub(elapsed);
            let mut stop = false;
            match self.events.recv_timeout(wait) {
                Ok(event) => {
                    let (_, now) = self.now();
                    stop = self.handle(event, now);
                    let mut handled = 1;
                    while !stop && handled < self.options.max_events_per_poll {
                        match self.events.try_recv() {
                            Ok(event) => stop = self.handle(event, now),
                            Err(_) => break,
                        }
                        handled += 1;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            if stop {
                break;
            }
            self.shared.gauges.report_to(&mut self.node);
            let (elapsed, now) = self.now();
            let ticked = elapsed >= next_tick;
            if ticked {
                self.node.tick(now);
                next_tick += self.tick_interval;
                if next_tick <= elapsed {
                    // Overloaded: skip the missed ticks rather than fire them in a burst.
                    next_tick = elapsed + self.tick_interval;
                }
            }
            let (outgoing, deliveries) = self.node.poll(now);
            self.shared.gauges.set_triggers(self.node.flow_triggers());
            self.shared
                .gauges
                .set_waiting_to_send(self.node.write_sets_waiting_to_send());
            self.tickets.watch_identity(self.node.me().raft_id);
            self.send(outgoing);
            // Write-sets come by the thousand a second; building the status (member rows,
            // counters, names) for each poll that hands one out cost more than its readers
            // need. They read it at most one tick old; any other delivery (a view, a state
            // transfer, the end) refreshes it at once.
            let news = deliveries
                .iter()
                .any(|delivery| !matches!(delivery, Delivery::WriteSet { .. }));
            for mut delivery in deliveries {
                self.tickets.translate(&mut delivery);
                self.hand_over(delivery);
            }
            // A rejoin's `Abandoned` comes in the first poll after it, or not at all.
            self.tickets.retired = None;
            if ticked || news {
                *self.shared.status() = self.node.status();
            }
        }
        *self.shared.status() = self.node.status();
        self.stop_writers();
    }

    /// Handles one event; true to stop the loop.
    fn handle(&mut self, event: Event, now: Nanos) -> bool {
        match event {
            Event::Frames(bytes) => self.receive_frames(Bytes::from(bytes), now),
            Event::Submit {
                ticket,
                payload,
                urgent,
            } => {
                let submit_id = if urgent {
                    self.node.submit_urgent(payload)
                } else {
                    self.node.submit(payload)
                };
                self.tickets.current.insert(submit_id, ticket);
            }
            Event::Leave => self.node.leave(),
            // The gauges are handed over before every tick and poll.
            Event::ApplyQueueCrossed => {}
            Event::LocalState(state) => self.node.set_local_state(state),
            Event::Vote(seqno, code) => self.node.vote(seqno, code),
            Event::TransferFailed(joiner) => self.node.transfer_failed(joiner),
            Event::StateRequest(request) => self.node.request_state(request),
            Event::CausalRead(id) => self.node.causal_read(id),
            Event::Reconfigure(config) => self.node.reconfigure(&config),
            Event::Isolate(isolated) => self.isolate(isolated),
            Event::ForceBootstrap => {
                // The group logs what it did, and why not when it did nothing.
                let _ = self.node.force_bootstrap();
            }
            Event::Cancel { ticket, reply } => {
                let submit_id = self
                    .tickets
                    .current
                    .iter()
                    .find_map(|(id, t)| (*t == ticket).then_some(*id));
                let cancelled = submit_id.is_some_and(|id| self.node.cancel(id));
                if let (true, Some(id)) = (cancelled, submit_id) {
                    self.tickets.current.remove(&id);
                }
                let _ = reply.send(cancelled);
            }
            Event::Shutdown => return true,
        }
        false
    }

    /// Isolation acts on frames, not sockets: the peers' connections may come and go, but
    /// nothing crosses them, so the group sees a partition and reacts as it would to one.
    /// This node's own connections are closed, so that their peers' readers notice at once.
    fn isolate(&mut self, isolated: bool) {
        if isolated != self.isolated {
            tracing::info!(
                isolated,
                "gmcast.isolate: this node's group links are {}",
                if isolated { "cut" } else { "restored" }
            );
        }
        self.isolated = isolated;
        self.node.set_isolated(isolated);
        if isolated {
            self.stop_writers();
        }
    }

    /// Hands each frame of `bytes` to the member as a view of the buffer the reader filled:
    /// the Raft entries it carries are not copied again.
    fn receive_frames(&mut self, bytes: Bytes, now: Nanos) {
        if self.isolated {
            return;
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let len = match wire::frame_len(&rest) {
                Ok(Some(len)) if len <= rest.len() => len,
                other => {
                    // Readers forward whole frames only; this is a bug, not a peer's fault.
                    tracing::error!(
                        ?other,
                        left = rest.len(),
                        "a partial frame reached the loop"
                    );
                    return;
                }
            };
            let frame = rest.split_to(len);
            if let Err(error) = self.node.receive_shared(now, &frame) {
                if error.is_routine() {
                    tracing::debug!(%error, "message refused");
                } else {
                    self.refused += 1;
                    if self.refused <= 100 || self.refused.is_power_of_two() {
                        tracing::warn!(%error, refused = self.refused, "message refused");
                    }
                }
            }
            // An eviction makes the node start over with a new identity.
            self.tickets.watch_identity(self.node.me().raft_id);
        }
    }

    /// Groups the outgoing frames by destination and hands each group to its writer.
    fn send(&mut self, outgoing: Vec<Outgoing>) {
        if outgoing.is_empty() || self.isolated {
            return;
        }
        let mut by_address: Vec<(String, Vec<u8>, usize)> = Vec::new();
        for message in outgoing {
            match by_address
                .iter_mut()
                .find(|(address, _, _)| *address == message.address)
            {
                Some((_, bytes, frames)) => {
                    bytes.extend_from_slice(&message.bytes);
                    *frames += 1;
                }
                None => by_address.push((message.address, message.bytes, 1)),
            }
        }
        for (address, bytes, frames) in by_address {
            self.send_to(address, bytes, frames);
        }
    }

    fn send_to(&mut self, address: String, bytes: Vec<u8>, frames: usize) {
        let bytes = match self.writers.get(&address) {
            None => bytes,
            Some(writer) => match writer.send(bytes, frames) {
                Ok(()) => return,
                Err(SendError::Full) => {
                    self.count_unsent(&address, frames, "peer queue full");
                    return;
                }
                Err(SendError::Gone(bytes)) => bytes,
            },
        };
        // The writer, if there was one, ended (idle): start a new one.
        if let Some(writer) = self.writers.remove(&address) {
            writer.stop();
        }
        if self.writers.len() >= self.options.max_peers {
            let finished: Vec<String> = self
                .writers
                .iter()
                .filter(|(_, w)| w.is_finished())
                .map(|(a, _)| a.clone())
                .collect();
            for address in finished {
                if let Some(writer) = self.writers.remove(&address) {
                    writer.stop();
                }
            }
            if self.writers.len() >= self.options.max_peers {
                self.count_unsent(&address, frames, "too many peers");
                return;
            }
        }
        match Writer::start(address.clone(), Arc::clone(&self.shared), &self.options) {
            Ok(writer) => {
                if writer.send(bytes, frames).is_err() {
                    self.count_unsent(&address, frames, "new writer refused frames");
                }
                self.writers.insert(address, writer);
            }
            Err(error) => {
                tracing::warn!(%error, %address, "could not start a writer thread");
                self.count_unsent(&address, frames, "no writer");
            }
        }
    }

    fn count_unsent(&mut self, address: &str, frames: usize, why: &str) {
        self.unsent += frames as u64;
        if self.unsent <= 100 || self.unsent.is_power_of_two() {
            tracing::warn!(address, frames, total = self.unsent, why, "frames dropped");
        }
    }

    /// Passes a delivery to the user, waiting while the channel is full (unless stopping).
    fn hand_over(&mut self, delivery: Delivery) {
        let Some(channel) = self.deliveries.as_ref() else {
            return;
        };
        let mut item = delivery;
        let mut waited = false;
        loop {
            match channel.try_send(item) {
                Ok(()) => return,
                Err(TrySendError::Disconnected(_)) => {
                    // Nobody listens any more: keep running the member, drop deliveries.
                    self.deliveries = None;
                    return;
                }
                Err(TrySendError::Full(back)) => {
                    if self.shared.stopping() {
                        return;
                    }
                    if !waited {
                        waited = true;
                        tracing::warn!("delivery channel full: waiting for the user");
                    }
                    item = back;
                    thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }

    fn stop_writers(&mut self) {
        let writers: Vec<Writer> = self.writers.drain().map(|(_, w)| w).collect();
        for writer in &writers {
            writer.close_connection();
        }
        for writer in writers {
            writer.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::{Seqno, Uuid};

    fn local_write_set(submit_id: u64) -> Delivery {
        Delivery::WriteSet {
            seqno: Seqno(5),
            origin: Uuid::NIL,
            submit_id,
            local: true,
            safe_seqno: Seqno::UNDEFINED,
            payload: Vec::new(),
        }
    }

    #[test]
    fn abandoning_some_submissions_keeps_the_others_tickets() {
        let mut tickets = Tickets::default();
        tickets.current.insert(1, 5);
        tickets.current.insert(2, 6);
        let mut abandoned = Delivery::Abandoned {
            submit_ids: vec![2],
        };
        tickets.translate(&mut abandoned);
        assert_eq!(
            abandoned,
            Delivery::Abandoned {
                submit_ids: vec![6]
            }
        );
        let mut delivery = local_write_set(1);
        tickets.translate(&mut delivery);
        assert_eq!(delivery, local_write_set(5));
        assert!(tickets.current.is_empty());
    }

    #[test]
    fn tickets_follow_the_node_across_a_rejoin() {
        let mut tickets = Tickets {
            identity: 7,
            ..Tickets::default()
        };
        // Two submitters raced: ticket 2 reached the loop first.
        tickets.current.insert(1, 2);
        tickets.current.insert(2, 1);
        let mut delivery = local_write_set(1);
        tickets.translate(&mut delivery);
        assert_eq!(delivery, local_write_set(2));

        // Evicted and rejoined: the node numbers from 1 again.
        tickets.watch_identity(8);
        tickets.current.insert(1, 3);
        let mut abandoned = Delivery::Abandoned {
            submit_ids: vec![2],
        };
        tickets.translate(&mut abandoned);
        assert_eq!(
            abandoned,
            Delivery::Abandoned {
                submit_ids: vec![1]
            }
        );
        tickets.retired = None;
        let mut delivery = local_write_set(1);
        tickets.translate(&mut delivery);
        assert_eq!(delivery, local_write_set(3));
        assert!(tickets.current.is_empty());
    }
}
