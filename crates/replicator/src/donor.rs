//! A donor's side of state transfer: the request served (IST stream, SST by the server, or
//! a refusal), and the server's snapshot started and reported.

use std::sync::Arc;
use std::time::Duration;

use base::{Gtid, NodeState, Seqno, Uuid};
use group::{NoDonor, StateRequest};

use crate::app::{LogLevel, RecvContext};
use crate::applier::RecvEvent;
use crate::dispatcher::Dispatcher;
use crate::shared::lock;
use crate::{ist, transfer, Replicator};

/// `ECANCELED`: the code a transfer the donor's server refused to start fails with.
const ECANCELED: i32 = 125;

impl Replicator {
    /// Serves a joiner: once everything ordered before its request is committed, the node
    /// goes DONOR and the server starts the snapshot; `sst_sent` ends it.
    pub(crate) fn donate(
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
            inner.shift(NodeState::Donor, &*self.shared.app);
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
            inner.shift(NodeState::Joined, &*self.shared.app);
        }
        drop(inner);
        self.shared.changed.notify_all();
    }
}

impl Dispatcher {
    pub(crate) fn on_state_request(
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
}
