//! New members: a joiner's request with its address proven, the leader's admission (or a
//! member replaced by its own restart), the welcome with the group's addresses, and a
//! member evicted that asks to come back.

use std::collections::BTreeMap;

use super::controls::is_due;
use super::delivery::{Outgoing, View};
use super::membership::ConfOp;
use super::receive::ReceiveError;
use super::start::{check_identity, join_request};
use super::GroupNode;
use crate::admission::ChallengeKey;
use crate::state::MemberInfo;
use crate::wire;
use crate::wire::WireMessage;

/// Joiners the leader queues at once. Joins are admitted one at a time anyway (one
/// membership change in flight), and a joiner asks again until it is in.
pub(super) const JOINS_QUEUED_MAX: usize = 1;

/// The most members a welcome may list.
pub(super) const WELCOME_MEMBERS_MAX: usize = 128;

/// The most addresses of non-members a node remembers (from welcomes and joins).
pub(super) const KNOWN_ADDRESSES_MAX: usize = 2 * WELCOME_MEMBERS_MAX;

/// The longest name or address a member may present, in bytes.
pub(super) const MEMBER_FIELD_BYTES_MAX: usize = 1024;

/// Election timeouts the leader must not have heard from a member before a new process
/// joining from that member's address replaces it (at the default 100 ms election timeout,
/// half a second). A restarted process waits that long; a forged join while the member
/// lives is refused.
const REPLACE_SILENCE_ELECTIONS: u64 = 5;

/// The join handshake: this node's own way in, and the leader's proof of joiners' addresses.
pub(super) struct Admission {
    /// The addresses this node joins through.
    pub(super) seeds: Vec<String>,
    /// Addresses of nodes that are not (or not yet) in the group's members.
    pub(super) known_addresses: BTreeMap<u64, String>,
    /// When this joiner last asked to join.
    pub(super) last_join_tick: Option<u64>,
    /// Joining only: the last challenge received, sent back with the next join request.
    pub(super) join_proof: Option<u64>,
    /// Leader only: the key of the challenges that prove a joiner's address.
    pub(super) challenge_key: ChallengeKey,
    /// Until this tick a member restarted under its saved identity waits to be brought
    /// back without campaigning (see [`GroupNode::come_back`]).
    pub(super) returning_until: Option<u64>,
}

impl Admission {
    pub(super) fn new(challenge_key: ChallengeKey) -> Admission {
        Admission {
            seeds: Vec::new(),
            known_addresses: BTreeMap::new(),
            last_join_tick: None,
            join_proof: None,
            challenge_key,
            returning_until: None,
        }
    }
}

impl GroupNode {
    pub(super) fn receive_join(
        &mut self,
        from: u64,
        info: MemberInfo,
        proof: Option<u64>,
    ) -> Result<(), ReceiveError> {
        if !self.member {
            return Ok(());
        }
        let raft_id = info.raft_id;
        let refused = move |reason| ReceiveError::JoinRefused { raft_id, reason };
        check_identity(&info).map_err(refused)?;
        // A joiner asks for itself; a member relays a joiner's request to the leader.
        if info.raft_id != from && !self.state.members.contains_key(&from) {
            return Err(refused("a non-member asks for another identity"));
        }
        if let Some(record) = self.state.members.get(&info.raft_id) {
            if record.info != info {
                return Err(refused("a member's id with other details"));
            }
            // A joiner that is already a member asks again only when it has not heard back:
            // our welcome (the members' addresses) got lost, and without it the joiner can
            // answer no Raft message. Any member repeats it, to the address on record.
            let address = record.info.address.clone();
            self.send_welcome(info.raft_id, address);
            return Ok(());
        }
        if !self.is_leader() {
            self.send_to_leader(&join_request(info, proof));
            return Ok(());
        }
        self.admit(info, proof).map_err(refused)
    }

    /// Leader only: queues the addition of a joiner, and the removal of a dead member it
    /// replaces; the reason when the join is refused (for now, or for good). The last step
    /// is the proof of address (see `admission`): a join without the right one is answered
    /// with the challenge, sent to the address it names.
    fn admit(&mut self, info: MemberInfo, proof: Option<u64>) -> Result<(), &'static str> {
        if self
            .state
            .members
            .values()
            .any(|m| m.info.uuid == info.uuid)
        {
            return Err("the UUID of a member");
        }
        let queued = self.roster.conf_queue.iter().filter_map(|op| match op {
            ConfOp::Add(queued) => Some(queued.raft_id),
            ConfOp::Remove(_) => None,
        });
        let queued: Vec<u64> = queued.collect();
        if queued.contains(&info.raft_id) {
            self.send_welcome(info.raft_id, info.address.clone());
            return Ok(());
        }
        if queued.len() >= JOINS_QUEUED_MAX || self.raw.raft.has_pending_conf() {
            return Err("another membership change is in progress");
        }
        let replaced = self.replaced_by(&info)?;
        let unheard = self
            .roster
            .unheard
            .iter()
            .any(|id| *id != self.me.raft_id && !replaced.contains(id));
        if unheard {
            base::mark!("group.join_put_off_for_an_unheard_member");
            return Err("a member admitted earlier has not been heard from yet");
        }
        let challenge = self.admission.challenge_key.challenge(&info);
        if proof != Some(challenge) {
            self.send_welcome(info.raft_id, info.address.clone());
            let message = WireMessage::Challenge(challenge);
            self.send(Some(info.raft_id), info.address.clone(), &message);
            return Err("the joiner has not proven its address yet");
        }
        for old in replaced {
            if self.queue_removal(old) {
                tracing::info!(
                    member = old,
                    address = %info.address,
                    "a new process joins from this silent member's address: removing the old one"
                );
            }
        }
        self.remember_address(info.raft_id, info.address.clone());
        self.send_welcome(info.raft_id, info.address.clone());
        self.roster.conf_queue.push_back(ConfOp::Add(info));
        Ok(())
    }

    /// The members a joiner replaces: those listening at its address. A new process at a
    /// member's address means that member's process is gone (a restart, a crash loop), and
    /// keeping it would grow the configuration by a dead member at every quick restart until
    /// the living ones no longer make a quorum. But only a member the leader has not heard
    /// from for [`REPLACE_SILENCE_ELECTIONS`] is gone: a join from a live member's address is
    /// refused, or anyone could evict a member by naming its address.
    fn replaced_by(&self, info: &MemberInfo) -> Result<Vec<u64>, &'static str> {
        let earlier: Vec<u64> = self
            .state
            .members
            .values()
            .filter(|m| m.info.address == info.address && m.info.raft_id != info.raft_id)
            .map(|m| m.info.raft_id)
            .collect();
        let live = earlier
            .iter()
            .copied()
            .filter(|id| *id == self.me.raft_id || !self.silent_for(*id, REPLACE_SILENCE_ELECTIONS))
            .collect::<Vec<_>>();
        if let Some(member) = live.first() {
            // A node restarted at once (kill -9, then start) asks before its earlier
            // incarnation falls silent long enough: routine, and asked again.
            tracing::info!(
                member,
                joiner = info.raft_id,
                address = %info.address,
                "join from the address of a live member refused"
            );
            return Err("a live member listens at this address");
        }
        if !earlier.is_empty() {
            base::mark!("group.member_replaced_by_its_restart");
        }
        Ok(earlier)
    }

    /// Leader only: true if member `id` has not been heard from for `elections` election
    /// timeouts (a member without a record was just added: its clock starts now).
    pub(super) fn silent_for(&self, id: u64, elections: u64) -> bool {
        let silence = elections * self.config.election_ticks as u64;
        self.roster
            .last_heard
            .get(&id)
            .is_some_and(|heard| self.tick.saturating_sub(*heard) > silence)
    }

    fn send_welcome(&mut self, raft_id: u64, address: String) {
        let welcome: Vec<MemberInfo> = self
            .state
            .members
            .values()
            .map(|m| m.info.clone())
            .collect();
        self.send(Some(raft_id), address, &WireMessage::Welcome(welcome));
    }

    /// A joining node learns where the members listen. Anyone can send a welcome (the
    /// sender is not authenticated), so what it may add is bounded: a plausible list that
    /// names its sender, kept among at most [`KNOWN_ADDRESSES_MAX`] addresses; a later
    /// welcome overwrites, so the leader's next answer repairs a forged one.
    pub(super) fn receive_welcome(
        &mut self,
        from: u64,
        members: Vec<MemberInfo>,
    ) -> Result<(), ReceiveError> {
        if self.member {
            return Ok(());
        }
        let refused = |reason| Err(ReceiveError::BadWelcome { from, reason });
        if members.is_empty() || members.len() > WELCOME_MEMBERS_MAX {
            return refused("no members, or more than a welcome may list");
        }
        if !members.iter().any(|m| m.raft_id == from) {
            return refused("its sender is not listed");
        }
        if let Some(reason) = members.iter().find_map(|m| check_identity(m).err()) {
            return refused(reason);
        }
        for info in members {
            self.remember_address(info.raft_id, info.address);
        }
        Ok(())
    }

    /// Records where a non-member listens, forgetting another entry when the map is full.
    fn remember_address(&mut self, raft_id: u64, address: String) {
        let full = self.admission.known_addresses.len() >= KNOWN_ADDRESSES_MAX;
        if full && !self.admission.known_addresses.contains_key(&raft_id) {
            self.admission.known_addresses.pop_first();
        }
        self.admission.known_addresses.insert(raft_id, address);
    }

    pub(super) fn address_of(&self, raft_id: u64) -> Option<String> {
        if raft_id == 0 {
            return None;
        }
        self.state
            .members
            .get(&raft_id)
            .map(|m| m.info.address.clone())
            .or_else(|| self.admission.known_addresses.get(&raft_id).cloned())
            .or_else(|| {
                self.roster
                    .departed
                    .iter()
                    .find(|i| i.raft_id == raft_id)
                    .map(|i| i.address.clone())
            })
    }

    pub(super) fn request_join(&mut self) {
        // An evicted member starts over with a new identity at the end of this poll: a join
        // in the old one's name would bring a member back that nobody will answer for.
        if self.member || self.closed || self.rejoin_due || self.admission.returning_until.is_some()
        {
            return;
        }
        if !is_due(
            self.admission.last_join_tick,
            self.tick,
            self.config.join_retry_ticks,
        ) {
            return;
        }
        self.admission.last_join_tick = Some(self.tick);
        let request = join_request(self.me.clone(), self.admission.join_proof);
        let bytes = wire::encode(self.me.raft_id, &request);
        for seed in &self.admission.seeds {
            if *seed != self.me.address {
                self.outbox.push(Outgoing {
                    to_raft_id: None,
                    address: seed.clone(),
                    bytes: bytes.clone(),
                });
            }
        }
    }

    /// Starts over as a new member (a new Raft id, the same UUID) after an eviction.
    pub(super) fn rejoin(&mut self) {
        base::mark!("group.evicted_member_rejoins");
        if self.member {
            self.member = false;
            self.primary = false;
            let view = self.view(false, false, self.last_delivered);
            self.deliver_view(View {
                members: Vec::new(),
                own_index: None,
                ..view
            });
        }
        self.abandon_pending();
        let contact = self.me.contact();
        let seeds = match self.forcing.rejoin_through.take() {
            Some(founder) => vec![founder],
            None => {
                let mut seeds: Vec<String> = self
                    .state
                    .members
                    .values()
                    .map(|m| m.info.address.clone())
                    .collect();
                seeds.extend(self.admission.seeds.iter().cloned());
                seeds.sort();
                seeds.dedup();
                seeds
            }
        };
        let rng = self.rng.clone();
        let mut fresh = GroupNode::join(self.config.clone(), &contact, seeds, rng, self.now);
        // A new Raft id, but the same member UUID: the server knows this node by it for as
        // long as it stays connected (wsrep-lib finds itself in a view by it), as a Galera
        // node keeps its UUID across a partition. The old membership is gone from the state
        // before the new one is admitted, so the UUID is never held twice.
        fresh.me.uuid = self.me.uuid;
        fresh.tick = self.tick;
        fresh.flow.counters = std::mem::take(&mut self.flow.counters);
        fresh.deliveries = std::mem::take(&mut self.deliveries);
        fresh.outbox = std::mem::take(&mut self.outbox);
        fresh.last_delivered = self.last_delivered;
        fresh.cached_from = self.cached_from;
        fresh.recovery = std::mem::take(&mut self.recovery);
        if fresh.recovery.own.is_none() {
            // A member without data (the arbitrator) keeps the state it announced: nobody
            // asks it to catch up.
            fresh.local_state = self.local_state;
        }
        *self = fresh;
    }
}
