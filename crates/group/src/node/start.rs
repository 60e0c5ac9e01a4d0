//! How a member starts: founding a group, joining one, or coming back under a saved
//! identity after a crash; and the Raft configuration it runs with.

use std::collections::{BTreeMap, VecDeque};

use base::{Nanos, NodeState, SeededRng, Seqno, Uuid};
use raft::eraftpb::Snapshot;
use raft::RawNode;
use rand::Rng;

use super::admission::Admission;
use super::admission::MEMBER_FIELD_BYTES_MAX;
use super::causal::CausalReads;
use super::controls::ControlPacing;
use super::delivery::View;
use super::flow::FlowControl;
use super::forced::Forcing;
use super::membership::Roster;
use super::raft_driver::Snapshots;
use super::recovery::Recovering;
use super::state_requests::StateRequesting;
use super::submit::Submissions;
use super::GroupNode;
use crate::admission::ChallengeKey;
use crate::config::GroupConfig;
use crate::log::OrderLog;
use crate::restart;
use crate::restart::SavedMembership;
use crate::state::{Contact, GroupState, MemberInfo};
use crate::wire::WireMessage;

impl GroupNode {
    /// Founds a new cluster with this node as its only member (`--wsrep-new-cluster`).
    pub fn bootstrap(
        config: GroupConfig,
        contact: &Contact,
        rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        GroupNode::bootstrap_from(config, contact, None, rng, now)
    }

    /// Founds a cluster that continues the history `history` (the founder's saved
    /// position): same cluster state UUID, and the first view takes the next seqno. Without
    /// a history, a new UUID and seqno 1.
    pub fn bootstrap_from(
        config: GroupConfig,
        contact: &Contact,
        history: Option<base::Gtid>,
        mut rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = new_identity(&mut rng, contact, now);
        let (cluster, first_seqno) = match history {
            Some(gtid) if gtid.cluster != Uuid::NIL && gtid.seqno.is_defined() => {
                (gtid.cluster, gtid.seqno.next())
            }
            _ => (Uuid::random(&mut rng), Seqno(1)),
        };
        let state = GroupState::genesis(cluster, first_seqno, me.clone());
        let mut node = GroupNode::found(config, me, rng, state, now, true);
        node.local_state = NodeState::Synced;
        node
    }

    /// A primary component of `me` alone, continuing `state` (whose only member is `me`): a
    /// new Raft group with `me` its only voter and leader, its founding view delivered.
    /// `founding` says whether this member's state starts here (a bootstrap, a restore
    /// after a crash), rather than carrying on what it holds (`pc.ignore_sb`).
    pub(super) fn found(
        config: GroupConfig,
        me: MemberInfo,
        rng: SeededRng,
        state: GroupState,
        now: Nanos,
        founding: bool,
    ) -> GroupNode {
        let mut snapshot = Snapshot::default();
        snapshot.set_data(state.encode().into());
        let metadata = snapshot.mut_metadata();
        metadata.index = 1;
        metadata.term = 1;
        metadata.mut_conf_state().voters = vec![me.raft_id];
        let mut node = GroupNode::new(config, me, rng, OrderLog::from_snapshot(snapshot), 1, now);
        node.state = state;
        node.member = true;
        node.last_delivered = node.state.last_seqno;
        node.snapshots.last_index = 1;
        let view = View {
            founding,
            ..node.view(true, true, node.state.last_seqno)
        };
        node.deliver_view(view);
        node.primary = true;
        node.raw
            .campaign()
            .expect("a single-voter group elects itself");
        node.pin_election_timeout();
        node
    }

    /// A node that joins an existing cluster through the members listening at `seeds`.
    pub fn join(
        config: GroupConfig,
        contact: &Contact,
        seeds: Vec<String>,
        mut rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = new_identity(&mut rng, contact, now);
        let mut node = GroupNode::new(config, me, rng, OrderLog::default(), 0, now);
        node.admission.seeds = seeds;
        node
    }

    /// Comes back under a saved identity after this member's process died, a voter of a
    /// configuration of two (see `crate::restart` for why only then): it answers the
    /// survivor's election, which brings it back with the group state, and joins as a new
    /// member if nobody does so in time.
    pub fn come_back(
        config: GroupConfig,
        contact: &Contact,
        saved: &SavedMembership,
        seeds: Vec<String>,
        rng: SeededRng,
        now: Nanos,
    ) -> GroupNode {
        let me = MemberInfo {
            raft_id: saved.raft_id,
            uuid: saved.uuid,
            name: contact.name.clone(),
            address: contact.address.clone(),
            incoming: contact.incoming.clone(),
        };
        let mut log = OrderLog::default();
        let mut conf = raft::eraftpb::ConfState::default();
        conf.voters = vec![saved.raft_id, saved.peer.0];
        assert_eq!(conf.voters.len(), restart::COME_BACK_VOTERS);
        log.set_conf_state(conf);
        let wait = restart::COME_BACK_TICKS_PER_SUSPECT * config.suspect_ticks();
        let mut node = GroupNode::new(config, me, rng, log, 0, now);
        node.admission.seeds = seeds;
        node.admission
            .known_addresses
            .insert(saved.peer.0, saved.peer.1.clone());
        node.admission.returning_until = Some(wait);
        // Its state requests are numbered after any its earlier process made, which may still
        // be in the log it catches up on (and would be taken for this process's, or make this
        // one's look like a resend): from its start time, in milliseconds.
        node.requesting.last_id = now.0 / 1_000_000;
        tracing::info!(
            raft_id = saved.raft_id,
            peer = saved.peer.1,
            "restarted after a crash: waiting to be brought back into the component of two"
        );
        node
    }

    /// What this member would save to come back as itself after a crash: while it is in a
    /// primary component of two voters.
    pub fn saved_membership(&self) -> Option<SavedMembership> {
        let conf = self.raw.store().conf_state();
        let two = conf.voters.len() == restart::COME_BACK_VOTERS
            && conf.learners.is_empty()
            && conf.voters_outgoing.is_empty();
        if !self.member || !self.primary || !two || !conf.voters.contains(&self.me.raft_id) {
            return None;
        }
        let peer = *conf.voters.iter().find(|id| **id != self.me.raft_id)?;
        let address = self.address_of(peer)?;
        Some(SavedMembership {
            raft_id: self.me.raft_id,
            uuid: self.me.uuid,
            peer: (peer, address),
        })
    }

    /// A returning member ticks no election (it must not found an empty group); once
    /// brought back it is an ordinary member, and if nobody brings it back in time it joins
    /// as a new one.
    pub(super) fn tick_returning(&mut self) -> bool {
        let Some(until) = self.admission.returning_until else {
            return false;
        };
        if self.member {
            self.admission.returning_until = None;
            return false;
        }
        if self.tick >= until {
            tracing::info!("nobody brought this restarted member back: joining as a new member");
            let contact = self.me.contact();
            let mut seeds = self.admission.seeds.clone();
            seeds.extend(self.admission.known_addresses.values().cloned());
            seeds.sort();
            seeds.dedup();
            let mut fresh = GroupNode::join(
                self.config.clone(),
                &contact,
                seeds,
                self.rng.clone(),
                self.now,
            );
            fresh.tick = self.tick;
            fresh.deliveries = std::mem::take(&mut self.deliveries);
            fresh.outbox = std::mem::take(&mut self.outbox);
            fresh.recovery = std::mem::take(&mut self.recovery);
            *self = fresh;
            return false;
        }
        true
    }

    /// Numbers submissions and state requests on from what the group recorded of this
    /// member: a member brought back after a crash (`come_back`) would otherwise reuse the
    /// numbers of its earlier process, which the group takes for resends and drops. A no-op
    /// for any other member, whose counters are ahead of the record.
    pub(super) fn continue_numbering(&mut self) {
        if let Some(window) = self.state.dedup.get(&self.me.uuid) {
            let last = window
                .above
                .last()
                .copied()
                .unwrap_or(0)
                .max(window.contiguous);
            self.submissions.next_id = self.submissions.next_id.max(last + 1);
        }
        if let Some(last) = self.state.state_requests.get(&self.me.raft_id) {
            self.requesting.last_id = self.requesting.last_id.max(*last);
        }
    }

    pub(super) fn new(
        config: GroupConfig,
        me: MemberInfo,
        mut rng: SeededRng,
        log: OrderLog,
        applied: u64,
        now: Nanos,
    ) -> GroupNode {
        config
            .validate()
            .expect("group configuration was validated by the caller");
        let raw = RawNode::new(
            &raft_config(&config, me.raft_id, applied),
            log,
            &discard_logger(),
        )
        .expect("valid Raft configuration");
        let state = GroupState::unknown();
        let challenge_key = ChallengeKey([rng.gen(), rng.gen()]);
        let mut node = GroupNode {
            config,
            raw,
            me,
            rng,
            state,
            member: false,
            tick: 0,
            now,
            last_delivered: Seqno::UNDEFINED,
            deliveries: VecDeque::new(),
            outbox: Vec::new(),
            admission: Admission::new(challenge_key),
            roster: Roster::default(),
            submissions: Submissions::default(),
            was_leader: false,
            leader_contact_tick: 0,
            primary: false,
            non_primary_since: None,
            presence_tick: None,
            isolated: false,
            current_view: None,
            local_state: NodeState::Open,
            committed: Seqno::UNDEFINED,
            cached_from: Seqno::UNDEFINED,
            requesting: StateRequesting::default(),
            votes_wanted: BTreeMap::new(),
            pacing: ControlPacing::default(),
            flow: FlowControl::default(),
            leaving: None,
            closed: false,
            rejoin_due: false,
            snapshots: Snapshots {
                last_index: applied,
                due: false,
            },
            causal: CausalReads::default(),
            recovery: Recovering::default(),
            forcing: Forcing::default(),
        };
        node.pin_election_timeout();
        node
    }
}

fn raft_config(config: &GroupConfig, raft_id: u64, applied: u64) -> raft::Config {
    raft::Config {
        id: raft_id,
        election_tick: config.election_ticks,
        heartbeat_tick: config.heartbeat_ticks,
        min_election_tick: config.election_ticks,
        max_election_tick: 2 * config.election_ticks,
        applied,
        check_quorum: true,
        pre_vote: true,
        max_size_per_msg: 1 << 20,
        // Appends queued for one follower go out ahead of its heartbeats: a deep pipeline of
        // 1 MiB messages (a large write-set's chunks) would delay them past the election
        // timeout.
        max_inflight_msgs: 8,
        max_uncommitted_size: 256 << 20,
        ..Default::default()
    }
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

/// A new membership's identity: fresh Raft id and UUID, the same contact details.
fn new_identity(rng: &mut SeededRng, contact: &Contact, now: Nanos) -> MemberInfo {
    MemberInfo {
        raft_id: rng.gen_range(1..u64::MAX),
        uuid: Uuid::time_ordered(now.0, rng),
        name: contact.name.clone(),
        address: contact.address.clone(),
        incoming: contact.incoming.clone(),
    }
}

/// Refuses an identity no genuine node presents: Raft id 0, the nil UUID, or a name or
/// address too long to be one.
pub(super) fn check_identity(info: &MemberInfo) -> Result<(), &'static str> {
    let long = [&info.name, &info.address, &info.incoming]
        .iter()
        .any(|field| field.len() > MEMBER_FIELD_BYTES_MAX);
    if info.raft_id == 0 || info.uuid == Uuid::NIL || long {
        return Err("an identity no node presents");
    }
    Ok(())
}

/// A join request, with the proof of address when there is one.
pub(super) fn join_request(info: MemberInfo, proof: Option<u64>) -> WireMessage {
    match proof {
        Some(proof) => WireMessage::ProvedJoin(info, proof),
        None => WireMessage::Join(info),
    }
}
