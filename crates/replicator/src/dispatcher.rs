//! The dispatcher thread: takes the group's deliveries in order, certifies every write-set,
//! hands verdicts to local transactions and queues the rest for the appliers, and writes
//! every ordered action to the gcache.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base::{NodeState, Seqno, Uuid};
use cert::{Certifier, Verdict};
use group::{Delivery, View};
use writeset::{Bytes, WriteSet};

use crate::app::{view_info, LogLevel};
use crate::applier::{RecvEvent, LARGE_WRITE_SET_BYTES};
use crate::persisted::membership_file_of;
use crate::shared::{lock, Shared};
use crate::{ist, view_record, vote};

/// From this size on, a write-set's data is decoded as a view of the ordered bytes instead
/// of a copy.
const SHARED_DECODE_BYTES: usize = 1 << 20;

/// A JOINED node with at most this many actions queued has caught up and turns SYNCED
/// (Galera's default `gcs.fc_limit`: from here on its queue is flow control's business).
pub(crate) const SYNCED_QUEUE_MAX: usize = 16;

/// Abandoned submission tickets kept for waiters that have not looked yet. A waiter looks
/// as soon as it is woken, so a few suffice; the bound only keeps tickets nobody waits for
/// (their transactions ended another way) from piling up.
pub(crate) const ABANDONED_REMEMBERED: usize = 1024;

/// Everything the dispatcher thread owns.
pub(crate) struct Dispatcher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) bootstrap: bool,
    pub(crate) certifier: Option<Certifier>,
    /// While joining: deliveries held until the state transfer is in place.
    pub(crate) held: Vec<Delivery>,
    /// Threads sending state transfer streams to joiners.
    pub(crate) senders: Vec<JoinHandle<()>>,
    /// A cache write failed (logged once, not per write-set).
    cache_failed: bool,
    /// The oldest cached seqno last reported to the group.
    cached_reported: Seqno,
    /// The commit cut the last write-set carried: every member had committed up to here.
    pub(crate) last_safe_seqno: Seqno,
    /// Members of the last primary view, by name, and by identity.
    pub(crate) view_names: Vec<String>,
    pub(crate) view_members: Vec<(Uuid, String)>,
    /// Members that left the primary view, by name, and the first seqno each may lack.
    pub(crate) absent: BTreeMap<String, Seqno>,
    /// The group membership (see `group::View::membership`) the certification state was
    /// built in (at bootstrap, or at the end of a state transfer).
    pub(crate) member_of: Option<u64>,
    /// The membership of the last view.
    pub(crate) membership: u64,
    /// Everything up to here is in the server already (its snapshot, or IST queued after
    /// it): a seqno delivered late is certified but not applied again.
    pub(crate) in_server_upto: Seqno,
    /// Whether `grastate.dat` says this node is the only member of the primary component.
    pub(crate) saved_sole_member: bool,
    /// The member identity last saved to come back after a crash (`membership_file`).
    pub(crate) saved_membership: Option<group::restart::SavedMembership>,
}

/// The dispatcher: takes deliveries in order, certifies, routes.
pub(crate) fn dispatch(shared: &Arc<Shared>, deliveries: &Receiver<Delivery>, bootstrap: bool) {
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
    pub(crate) fn handle(&mut self, delivery: Delivery) {
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

    /// Certifies an ordered write-set; applies it unless `applied_upto` already covers it.
    pub(crate) fn on_write_set(
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

    /// Fails every local transaction still waiting for its write-set's verdict: this node
    /// left the order (its unordered submissions were abandoned, or it must catch up by
    /// IST). Such a verdict never comes here; a write-set the others did order comes back
    /// in the IST as a remote one. Waiting on would keep the transaction's row locks, which
    /// the IST appliers need: a deadlock. The server rolls it back, the client gets an
    /// error.
    pub(crate) fn withdraw_waiting(&self) {
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
    pub(crate) fn withdraw_abandoned(&self, tickets: &[u64]) {
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
    pub(crate) fn member_name(&self, uuid: Uuid) -> String {
        self.view_members
            .iter()
            .find(|(id, _)| *id == uuid)
            .map_or_else(|| uuid.to_string(), |(_, name)| name.clone())
    }

    /// Passes an ordered view through certification and into the cache.
    pub(crate) fn view_in_order(&mut self, view: &View) {
        if let Some(cert) = self.certifier.as_mut() {
            cert.skip(view.seqno);
        }
        self.cache_view(view);
    }

    /// Caches an ordered view: a primary one with what a joiner's server needs to hear of it
    /// (`view_record`: IST hands it over at its seqno, as Galera's does), any other as a
    /// seqno that carries nothing.
    pub(crate) fn cache_view(&mut self, view: &View) {
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
            inner.shift(NodeState::Synced, &*self.shared.app);
            inner.queue.push_back(RecvEvent::Synced);
        }
    }
}
