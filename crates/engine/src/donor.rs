//! A donor's side of state transfer: the choice between IST, SST and a refusal, made at the
//! request's place in the order (so nothing can be purged between the decision and the
//! pin), the stream and the server's snapshot that serve it, and the snapshot's end.

use base::{Gtid, NodeState, Seqno, Uuid};
use group::{NoDonor, StateRequest};

use crate::cache::ActionCache;
use crate::effects::{Effect, OutgoingTransfer};
use crate::ist::{Header, Outcome};
use crate::task::Task;
use crate::{LogLevel, NodeEngine};

/// How a donor serves one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DonorPlan {
    /// Stream `first..=` the request's position from the cache, which `pin` keeps; with a
    /// server request, the server only confirms the joiner's own position (`bypass`).
    Ist {
        /// The first seqno the joiner lacks.
        first: Seqno,
        /// The cache pin.
        pin: u64,
    },
    /// The server sends a snapshot; `reason` says why IST was not possible.
    Sst {
        /// Why not IST.
        reason: String,
    },
    /// An IST-only request this node cannot serve.
    Refuse {
        /// Why.
        reason: String,
    },
}

/// Decides how to serve `request` with the order at `position` in history `cluster`: IST
/// when the cache holds the whole gap (pinned from here on), else a snapshot, or a refusal
/// for a joiner that can only take IST.
pub fn plan_donation(
    cache: &mut ActionCache,
    cluster: Uuid,
    request: &StateRequest,
    position: Seqno,
) -> DonorPlan {
    let ist_only = request.sst_request.is_empty();
    let not_possible = |reason: String| {
        if ist_only {
            DonorPlan::Refuse { reason }
        } else {
            DonorPlan::Sst { reason }
        }
    };
    if !request.ist_from.is_defined() {
        return not_possible("the joiner has no position of this cluster's history".into());
    }
    if request.ist_from > position {
        return not_possible(format!(
            "the joiner is at {} but this donor only at {position}",
            request.ist_from
        ));
    }
    let first = request.ist_from.next();
    if !cache.holds(cluster, first, position) {
        return not_possible(format!(
            "seqno {first} is missing on this donor: its gcache holds {} and the joiner needs \
             {first}..={position}",
            cache.describe()
        ));
    }
    let pin = cache.pin(first);
    DonorPlan::Ist { first, pin }
}

/// Who the group chose to serve a state request, and where the order was when it did.
pub(crate) struct Donation {
    /// The chosen donor's Raft id, or why none could be chosen.
    pub(crate) donor: Result<u64, NoDonor>,
    /// Whether this node is the chosen donor.
    pub(crate) donor_is_me: bool,
    /// The commit cut at the request's place in the order.
    pub(crate) safe_seqno: Seqno,
}

impl NodeEngine {
    /// A state request in the order: the joiner's donor serves it, and every member forgets
    /// what it kept for that joiner's absence once a donor has it.
    pub(crate) fn on_state_request(
        &mut self,
        joiner: Uuid,
        request: StateRequest,
        donation: Donation,
        cache: &mut ActionCache,
    ) {
        let Donation {
            donor,
            donor_is_me,
            safe_seqno,
        } = donation;
        let served = donor.is_ok();
        let joiner_name = self
            .view
            .view_members
            .iter()
            .find(|(id, _)| *id == joiner)
            .map(|(_, name)| name.clone());
        if joiner != self.view.own && donor_is_me {
            self.serve_state_request(request, safe_seqno, cache);
        }
        // The returning member's gap is in a donor's hands now (pinned there while it is
        // sent): the others need not keep it any longer.
        if let Some(name) = joiner_name.filter(|_| served) {
            if self.view.absent.remove(&name).is_some() {
                cache.set_absent_floor(self.view.absent.values().min().copied());
            }
        }
    }

    fn serve_state_request(
        &mut self,
        request: StateRequest,
        safe_seqno: Seqno,
        cache: &mut ActionCache,
    ) {
        let Some(cert) = self.certifier.as_mut() else {
            self.refuse_without_state(&request);
            return;
        };
        // The index is purged only as write-sets are certified, so after a bulk load and a
        // quiet spell it still holds every key of the load, although every member reported
        // them committed since: both sides would spend seconds of CPU on it beside the
        // transfer. Every later write-set carries this commit cut or a later one, and each
        // member purges to it before certifying, so purging early changes no verdict.
        cert.purge_to(safe_seqno.min(cert.position()));
        // The joiner continues certification from exactly this point of the order.
        let position = cert.position();
        let index = cert.encode();
        let cluster = self.view.cluster;
        let plan = plan_donation(cache, cluster, &request, position);
        let (outcome, first, reason, pin) = match plan {
            DonorPlan::Ist { first, pin } => {
                let message = format!(
                    "serving IST of seqnos {first}..={position} to {}",
                    request.ist_address
                );
                self.say(LogLevel::Info, message);
                (Outcome::Ist, first, String::new(), Some(pin))
            }
            DonorPlan::Sst { reason } => {
                if request.ist_from.is_defined() {
                    base::mark!("engine.ist_not_possible_sst_instead");
                    let message = format!("IST not possible, sending SST: {reason}");
                    self.say(LogLevel::Warning, message);
                }
                (Outcome::Sst, position.next(), reason, None)
            }
            DonorPlan::Refuse { reason } => {
                base::mark!("engine.ist_only_request_refused");
                let message = format!("cannot serve an IST-only request: {reason}");
                self.say(LogLevel::Warning, message);
                (Outcome::Refused, position.next(), reason, None)
            }
        };
        if !request.sst_request.is_empty() {
            let bypass = (outcome == Outcome::Ist).then_some(Gtid {
                cluster,
                seqno: request.ist_from,
            });
            self.donating_to = Some(request.joiner);
            self.tasks.push(Task::Donate {
                request: request.clone(),
                wait_for: position,
                bypass,
            });
        }
        let header = Header {
            cluster,
            outcome,
            first,
            last: position,
            reason,
            index,
        };
        self.emit(Effect::SendTransfer(OutgoingTransfer {
            address: request.ist_address.clone(),
            header,
            pin,
        }));
    }

    /// This node was chosen as donor while it holds no state of its own (it fell behind or
    /// is joining again since the group chose it): it tells the joiner at once, which asks
    /// again, rather than leave it waiting for a transfer that never starts.
    pub(crate) fn refuse_without_state(&mut self, request: &StateRequest) {
        base::mark!("engine.donor_without_state_refused");
        let reason = "the chosen donor has no state to send (it is catching up itself)";
        let message = format!(
            "cannot serve the state request of {}: {reason}",
            request.ist_address
        );
        self.say(LogLevel::Warning, message);
        let header = Header {
            cluster: self.view.cluster,
            outcome: Outcome::Refused,
            first: Seqno::ZERO,
            last: Seqno::UNDEFINED,
            reason: reason.to_owned(),
            index: Vec::new(),
        };
        self.emit(Effect::SendTransfer(OutgoingTransfer {
            address: request.ist_address.clone(),
            header,
            pin: None,
        }));
    }

    /// The node's data is the group's up to its position (SYNCED, JOINED or DONOR), so it
    /// can serve a state transfer.
    pub fn holds_state(&self) -> bool {
        matches!(
            self.state,
            NodeState::Synced | NodeState::Joined | NodeState::Donor
        )
    }

    /// The applier running [`Task::Donate`] is ready to start the server's side: the node
    /// goes DONOR (for a snapshot the driver first waited until everything up to the
    /// request's position was committed), and true is returned. False when the node lost
    /// its state after the request was ordered (the order jumped past it and it is a joiner
    /// itself): it has nothing consistent to send, so the joiner is told at once instead.
    pub fn donation_starts(&mut self, request: &StateRequest) -> bool {
        if !self.holds_state() {
            base::mark!("engine.donor_that_fell_behind_refuses");
            self.donating_to = None;
            self.refuse_without_state(request);
            return false;
        }
        self.shift(NodeState::Donor);
        true
    }

    /// The donor's server finished (or failed, `rcode` not 0) sending its snapshot of
    /// `state`. A failure is told to the joiner, which would wait for a snapshot that never
    /// comes.
    pub fn sst_sent(&mut self, state: Gtid, rcode: i32) {
        let joiner = self.donating_to.take();
        if rcode != 0 {
            // Galera's words, which DBAs and the test suites look for.
            let message = format!("State transfer to the joiner failed: {rcode} (at {state})");
            self.say(LogLevel::Warning, message);
            if let Some(joiner) = joiner {
                self.emit(Effect::TransferFailed { joiner });
            }
        }
        if self.state == NodeState::Donor && self.desync_count == 0 {
            self.shift(NodeState::Joined);
        }
    }
}
