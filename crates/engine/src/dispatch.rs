//! The ordered stream: the group's deliveries in order, every write-set certified at its
//! seqno and handed to its waiting local transaction or to the appliers, and every ordered
//! action written to the cache.
//!
//! Certifying a large write-set takes a while, and a real node's other threads should not
//! wait for it: the write-set path is split in three ([`NodeEngine::begin_write_set`], a
//! [`CertJob`] that runs without the engine, [`NodeEngine::finish_write_set`]).
//! [`NodeEngine::on_delivery`] runs all three at once.

use base::{Nanos, Seqno};
use cert::{Certifier, Verdict};
use group::Delivery;
use writeset::{Bytes, DecodeError, WriteSet};

use crate::cache::ActionCache;
use crate::donor::Donation;
use crate::effects::{CacheWrite, Effect};
use crate::ist::{ActionKind, FAILED_CERT};
use crate::task::Task;
use crate::{LogLevel, NodeEngine};

/// From this size on, a write-set's data is decoded as a view of the ordered bytes instead
/// of a copy (a copy would first-touch as much fresh memory again); a small one is copied
/// out so that the ordered buffer goes right after caching.
const SHARED_DECODE_BYTES: usize = 1 << 20;

/// An ordered write-set to decode and certify, holding the node's certification index
/// while it runs (see the module docs).
pub struct CertJob {
    seqno: Seqno,
    local: bool,
    safe_seqno: Seqno,
    payload: Bytes,
    certifier: Certifier,
}

/// A [`CertJob`]'s result, for [`NodeEngine::finish_write_set`].
pub struct Certified {
    seqno: Seqno,
    local: bool,
    payload: Bytes,
    certifier: Certifier,
    outcome: Result<(WriteSet, Verdict), DecodeError>,
}

impl CertJob {
    /// Decodes the write-set and certifies it at its seqno.
    pub fn run(mut self) -> Certified {
        let decoded = if self.payload.len() >= SHARED_DECODE_BYTES {
            WriteSet::decode_shared(&self.payload)
        } else {
            WriteSet::decode(&self.payload)
        };
        let outcome = decoded.map(|write_set| {
            let cert = &mut self.certifier;
            cert.purge_to(self.safe_seqno.min(cert.position()));
            let verdict = cert.certify(self.seqno, &write_set);
            (write_set, verdict)
        });
        Certified {
            seqno: self.seqno,
            local: self.local,
            payload: self.payload,
            certifier: self.certifier,
            outcome,
        }
    }

    /// The seqno being certified.
    pub fn seqno(&self) -> Seqno {
        self.seqno
    }

    /// The write-set's encoded size.
    pub fn len(&self) -> usize {
        self.payload.len()
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }
}

impl NodeEngine {
    /// Takes one delivery of the group, in order. A write-set is certified here, in one
    /// piece; a real node splits that (see the module docs). `cache` is the node's
    /// write-set cache, which a donor's decision reads and pins.
    pub fn on_delivery(&mut self, now: Nanos, delivery: Delivery, cache: &mut ActionCache) {
        match delivery {
            Delivery::WriteSet {
                seqno,
                local,
                safe_seqno,
                payload,
                ..
            } => {
                if let Some(job) = self.begin_write_set(seqno, local, safe_seqno, payload.into()) {
                    let certified = job.run();
                    self.finish_write_set(certified);
                }
            }
            other => self.on_other_delivery(now, other, cache),
        }
    }

    /// Every delivery but a write-set (see [`NodeEngine::on_delivery`]).
    pub fn on_other_delivery(&mut self, now: Nanos, delivery: Delivery, cache: &mut ActionCache) {
        if let Delivery::Abandoned { submit_ids } = &delivery {
            self.withdraw_abandoned(submit_ids);
        }
        if self.votes.inconsistent && !matches!(delivery, Delivery::Closed) {
            // Leaving after a lost vote: nothing more reaches the server but the end.
            return;
        }
        if let Delivery::TransferFailed { donor } = &delivery {
            // Whatever else waits: the snapshot this node waits for will not come.
            self.on_transfer_failed(donor);
            return;
        }
        if !self.has_state() && !matches!(delivery, Delivery::View(_)) {
            self.hold_until_state(now, delivery);
            return;
        }
        match delivery {
            Delivery::View(view) => self.on_view(view, cache),
            Delivery::StateRequest {
                request,
                donor,
                donor_uuid,
                donor_is_me,
                joiner,
                safe_seqno,
            } => {
                self.note_own_request(now, joiner, &donor, donor_uuid);
                let donation = Donation {
                    donor,
                    donor_is_me,
                    safe_seqno,
                };
                self.on_state_request(joiner, request, donation, cache);
            }
            Delivery::Causal { id, seqno } => self.causal_answered(id, seqno),
            Delivery::VoteRequested { seqno, by } => self.on_vote_requested(seqno, &by),
            Delivery::VoteDecided {
                seqno,
                winner,
                mine,
                votes,
            } => self.on_vote_decided(seqno, winner, mine, &votes),
            Delivery::Closed => self.close_after_inconsistency(),
            Delivery::HistoryDiverged { message } => self.declare_inconsistent(&message),
            Delivery::StateGap { resume_after, .. } => self.on_state_gap(resume_after),
            Delivery::WriteSet { .. } | Delivery::TransferFailed { .. } => {
                unreachable!("handled above")
            }
            Delivery::Abandoned { .. } => {}
        }
    }

    /// The group's log jumped past seqnos this node never saw: it catches up on them by IST
    /// at once, rather than when the next action arrives (on an idle cluster, none may).
    fn on_state_gap(&mut self, resume_after: Seqno) {
        let Some(position) = self.certifier.as_ref().map(Certifier::position) else {
            return;
        };
        if resume_after > position {
            base::mark!("engine.state_gap_caught_up_by_ist");
            let cluster = self.view.cluster;
            self.fall_behind(cluster, resume_after.next(), position, None);
        }
    }

    /// A delivery before this node holds the cluster's state: a joiner keeps it for when
    /// its state is in place (whom its own request went to cannot wait, though).
    fn hold_until_state(&mut self, now: Nanos, delivery: Delivery) {
        if self.joining.is_none() {
            return;
        }
        if let Delivery::StateRequest {
            joiner,
            donor,
            donor_uuid,
            donor_is_me,
            request,
            ..
        } = &delivery
        {
            let (joiner, donor, donor_uuid) = (*joiner, donor.clone(), *donor_uuid);
            self.note_own_request(now, joiner, &donor, donor_uuid);
            if *donor_is_me && joiner != self.view.own {
                let request = request.clone();
                self.refuse_without_state(&request);
            }
        }
        self.held.push(delivery);
    }

    /// The first step of an ordered write-set: `None` when it needs no certification here
    /// (held while joining, a repeat, or a jump this node catches up on by IST), else the
    /// job, which holds the certification index until [`NodeEngine::finish_write_set`].
    pub fn begin_write_set(
        &mut self,
        seqno: Seqno,
        local: bool,
        safe_seqno: Seqno,
        payload: Bytes,
    ) -> Option<CertJob> {
        if self.votes.inconsistent {
            return None;
        }
        if self.certifier.is_none() {
            assert!(self.certifying.is_none(), "one certification at a time");
            if self.joining.is_some() {
                self.held.push(Delivery::WriteSet {
                    seqno,
                    origin: base::Uuid::NIL,
                    submit_id: 0,
                    local,
                    safe_seqno,
                    payload: payload.to_vec(),
                });
            }
            return None;
        }
        self.last_safe_seqno = self.last_safe_seqno.max(safe_seqno);
        if seqno == self.in_server_upto {
            // The last of a run that arrived after the snapshot already held it: said once,
            // as applying them again would have overwritten later rows.
            let message = format!(
                "write-sets up to {seqno} were delivered after the state transfer that \
                 already holds them: certified, not applied again"
            );
            self.say(LogLevel::Info, message);
        }
        self.begin_certification(seqno, local, safe_seqno, payload)
    }

    /// Checks that `seqno` is the next one, and takes the index for its job.
    fn begin_certification(
        &mut self,
        seqno: Seqno,
        local: bool,
        safe_seqno: Seqno,
        payload: Bytes,
    ) -> Option<CertJob> {
        let position = self.certifier.as_ref()?.position();
        if seqno != position.next() {
            let message = format!(
                "write-set {seqno} ordered while this node stands at {position}: {}",
                if seqno <= position {
                    "a repeat, ignored"
                } else {
                    "catching up by IST"
                }
            );
            self.say(LogLevel::Error, message);
            if seqno > position {
                let cluster = self.view.cluster;
                self.fall_behind(cluster, seqno, position, None);
            }
            return None;
        }
        let certifier = self.certifier.take().expect("checked");
        self.certifying = Some(seqno);
        Some(CertJob {
            seqno,
            local,
            safe_seqno,
            payload,
            certifier,
        })
    }

    /// The last step of an ordered write-set: the index is back, the verdict is handed out
    /// and the action cached.
    pub fn finish_write_set(&mut self, certified: Certified) {
        let Certified {
            seqno,
            local,
            payload,
            certifier,
            outcome,
        } = certified;
        assert_eq!(
            self.certifying.take(),
            Some(seqno),
            "the job this engine gave"
        );
        self.certifier = Some(certifier);
        let applied_upto = self.in_server_upto;
        let (write_set, verdict) = match outcome {
            Ok(certified) => certified,
            Err(error) => {
                // Every node sees the same bytes, so every node skips it alike.
                let message = format!("ordered write-set {seqno} does not decode: {error}");
                self.say(LogLevel::Error, message);
                self.skip_in_order(seqno);
                if seqno > applied_upto {
                    // The seqno still passes the monitors, or every later commit would wait
                    // for it.
                    self.tasks.push(Task::Skip { seqno });
                }
                return;
            }
        };
        self.note_conflict(seqno, &write_set, &verdict);
        let cached_verdict = verdict.depends_on().map_or(FAILED_CERT, |d| d.0);
        let payload_len = payload.len();
        self.hand_out(seqno, local, verdict, write_set, payload_len, applied_upto);
        self.cache_action(seqno, ActionKind::WriteSet, cached_verdict, payload);
    }

    /// Certifies a write-set at once (one the join held): applied unless the server's
    /// state already holds it.
    pub(crate) fn certify_now(
        &mut self,
        seqno: Seqno,
        local: bool,
        safe_seqno: Seqno,
        payload: Bytes,
    ) {
        if let Some(job) = self.begin_certification(seqno, local, safe_seqno, payload) {
            let certified = job.run();
            self.finish_write_set(certified);
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
        if let Some(cert) = self.certifier.as_ref() {
            self.stats.cert_index_size = cert.index_len();
            self.stats.open_streams = cert.open_streams();
        }
        self.view.last_ordered = self.view.last_ordered.max(seqno);
        let interval = seqno
            .0
            .saturating_sub(write_set.last_seen.0.min(seqno.0 - 1));
        self.stats
            .window
            .cert_interval
            .record(interval.max(0) as u64);
        if let Some(depends_on) = verdict.depends_on() {
            self.stats
                .window
                .deps_distance
                .record(seqno.0.saturating_sub(depends_on.0).max(0) as u64);
        }
        if seqno <= applied_upto {
            return;
        }
        // A streaming rollback has no waiter: its transaction's own certify waits are over.
        let waiting = self
            .trxs
            .get_mut(&write_set.trx_id)
            .filter(|trx| local && trx.submitted && trx.outcome.is_none())
            .filter(|_| !write_set.is_rollback());
        if let Some(trx) = waiting {
            trx.outcome = Some((seqno, verdict));
            return;
        }
        if local && !write_set.is_rollback() {
            // Our own write-set with nobody waiting for it (the transaction gave up): it
            // was ordered all the same, so it is applied like any other.
            let known = self
                .trxs
                .get(&write_set.trx_id)
                .map(|t| (t.submitted, t.outcome));
            let message = format!(
                "own write-set {seqno} of transaction {} arrived with no waiter ({known:?}); \
                 applying it",
                write_set.trx_id
            );
            self.say(LogLevel::Warning, message);
        }
        if !local {
            self.stats.counters.received += 1;
            self.stats.counters.received_bytes += payload_len as u64;
        }
        let (depends_on, failed) = match verdict {
            Verdict::Pass { depends_on } => (depends_on, false),
            Verdict::Fail(_) => (seqno.prev(), true),
        };
        if !local {
            // Galera samples the length each arriving action finds, itself not counted.
            let found = self.tasks.len() as u64;
            self.stats.window.recv_queue.record(found);
        }
        self.tasks.push(Task::Apply {
            seqno,
            depends_on,
            write_set,
            failed,
        });
    }

    /// Passes a seqno that carries nothing to certify (an undecodable write-set) through
    /// certification and into the cache, so that both stay gapless.
    fn skip_in_order(&mut self, seqno: Seqno) {
        if let Some(cert) = self.certifier.as_mut() {
            cert.skip(seqno);
        }
        self.cache_action(seqno, ActionKind::Skip, seqno.0 - 1, Bytes::new());
    }

    /// Stores an ordered action in the write-set cache, for IST.
    pub(crate) fn cache_action(
        &mut self,
        seqno: Seqno,
        kind: ActionKind,
        depends_on: i64,
        payload: Bytes,
    ) {
        let history = self.view.cluster;
        self.emit(Effect::Cache(CacheWrite {
            history,
            seqno,
            kind,
            depends_on,
            payload,
        }));
    }
}
