//! Membership changes, one at a time: members added and removed through Raft, a clean
//! leave, and the eviction of members silent for too long. (Roles that the weights move
//! change together, through a joint configuration: `weights.rs`.)

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use protobuf::Message as _;
use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType};

use super::controls::is_due;
use super::delivery::{Delivery, View};
use super::GroupNode;
use crate::check::MemberChange;
use crate::state::MemberInfo;
use crate::vote::VoteDecision;
use crate::wire::WireMessage;
use crate::{check, wire};

pub(super) enum ConfOp {
    Add(MemberInfo),
    Remove(u64),
}

pub(super) struct Leaving {
    last_request_tick: Option<u64>,
    removal_seen_tick: Option<u64>,
    /// While this member leads: the tick from which it may hand the lead over. One that
    /// became leader while leaving waits an election timeout first, for a member that
    /// handed it the lead to ask to leave too (see `asked_to_leave`).
    hand_over_from: Option<u64>,
}

/// What the leader tracks of the members, and members that just left.
#[derive(Default)]
pub(super) struct Roster {
    /// Leader only: membership changes to propose, one at a time.
    pub(super) conf_queue: VecDeque<ConfOp>,
    /// Tick of the last message from each peer: the leader times members by it, and a
    /// member outside the primary component lists those it still hears.
    pub(super) last_heard: BTreeMap<u64, u64>,
    /// Members added while this node was a member that it has not received a Raft message
    /// from since. As leader it admits no new joiner while one is left (other than one
    /// being replaced): joiners that never answer could otherwise outvote the members.
    pub(super) unheard: BTreeSet<u64>,
    /// Members that left recently, remembered to name them and to tell them so.
    pub(super) departed: VecDeque<MemberInfo>,
    /// Of those, the ones that were Raft learners (`weights.rs`): a leader reminds them
    /// ([`GroupNode::remind_departed`]), when it last did.
    pub(super) departed_learners: BTreeSet<u64>,
    last_reminder_tick: Option<u64>,
    /// Members that asked this node, as leader, to be removed: a leaving leader hands the
    /// lead to none of them. Two members that left at once handed it to each other for good.
    pub(super) asked_to_leave: BTreeSet<u64>,
}

/// How often a leader reminds the members it removed, in ticks: once a second.
const REMIND_DEPARTED_TICKS: u64 = 100;

/// Members that left recently are remembered this long (by count) to tell them so.
pub(super) const DEPARTED_REMEMBERED: usize = 16;

impl GroupNode {
    /// Applies an ordered membership change; false if it was skipped. A change Trireme
    /// would not propose (checked on receipt, so only a bug gets here) or one raft-rs
    /// refuses (removing the last voter) is skipped alike on every member.
    pub(super) fn apply_conf_change(&mut self, entry: &Entry) -> bool {
        let learners_before = self.raw.store().conf_state().learners.clone();
        let applied = check::decode_conf_change(entry).and_then(|(change, member_change)| {
            self.check_roles(&member_change)?;
            let conf_state = self
                .raw
                .apply_conf_change(&change)
                .map_err(|e| e.to_string())?;
            Ok((conf_state, member_change))
        });
        let (conf_state, member_change) = match applied {
            Ok(applied) => applied,
            Err(reason) => {
                tracing::error!(index = entry.index, reason, "membership change skipped");
                return false;
            }
        };
        self.raw.mut_store().set_conf_state(conf_state);
        let mut decisions = Vec::new();
        let (added_me, removed_me) = match member_change {
            // Members that become voters or learners (or the joint configuration that made
            // them so, left): the weights moved the quorum, the membership is the same, so
            // there is no new view. A member added again (no leader proposes that) changes
            // nothing either.
            MemberChange::Roles(_) | MemberChange::LeaveJoint => return true,
            MemberChange::Add(info) if self.state.members.contains_key(&info.raft_id) => {
                return true;
            }
            MemberChange::Add(info) => {
                let added_me = info.raft_id == self.me.raft_id;
                self.add_member(info);
                (added_me, false)
            }
            MemberChange::Remove(id) => {
                let paused_before = self.state.paused_by.clone();
                let (removed_me, decided) = self.remove_member(id);
                // A member that leaves takes its stop with it.
                self.note_pause_change(&paused_before);
                if learners_before.contains(&id) {
                    self.roster.departed_learners.insert(id);
                }
                decisions = decided;
                (false, removed_me)
            }
        };
        let seqno = self.state.next_seqno();
        self.state.view_id += 1;
        self.update_pause_clock();
        if added_me && !self.member {
            // Our own join view: delivery starts here, everything before it comes by state
            // transfer. (Usually a joiner first gets a snapshot that already lists it.)
            self.member = true;
            self.last_delivered = seqno.prev();
        }
        if self.member && !removed_me {
            let view = self.view(self.primary || self.is_leader(), true, seqno);
            self.deliver(Delivery::View(view));
        }
        for decision in decisions {
            self.deliver_decision(decision);
        }
        if removed_me {
            self.lose_membership();
        }
        true
    }

    /// A change of roles names members only: a node becomes a voter or a learner without
    /// its identity only once it was added with it.
    fn check_roles(&self, change: &MemberChange) -> Result<(), String> {
        let MemberChange::Roles(ids) = change else {
            return Ok(());
        };
        match ids.iter().find(|id| !self.state.members.contains_key(id)) {
            Some(stranger) => Err(format!(
                "a change of roles of node {stranger}, not a member"
            )),
            None => Ok(()),
        }
    }

    /// Adds a member to the group state.
    fn add_member(&mut self, info: MemberInfo) {
        self.admission.known_addresses.remove(&info.raft_id);
        if info.raft_id != self.me.raft_id && self.member {
            self.roster.unheard.insert(info.raft_id);
        }
        self.state.add_member(info);
    }

    /// Removes a member from the group state; true if it is this node, with the votes its
    /// departure decided.
    fn remove_member(&mut self, raft_id: u64) -> (bool, Vec<VoteDecision>) {
        if let Some(record) = self.state.members.get(&raft_id) {
            self.roster.departed.push_back(record.info.clone());
            if self.roster.departed.len() > DEPARTED_REMEMBERED {
                self.roster.departed.pop_front();
            }
        }
        let departed = &self.roster.departed;
        self.roster
            .departed_learners
            .retain(|id| departed.iter().any(|info| info.raft_id == *id));
        let decided = self.state.remove_member(raft_id);
        self.roster.asked_to_leave.remove(&raft_id);
        self.roster.last_heard.remove(&raft_id);
        self.roster.unheard.remove(&raft_id);
        (raft_id == self.me.raft_id, decided)
    }

    pub(super) fn watch_for_own_removal(&mut self, entries: &[Entry]) {
        let Some(leaving) = self.leaving.as_mut() else {
            return;
        };
        for entry in entries {
            if entry.get_entry_type() != EntryType::EntryConfChangeV2 {
                continue;
            }
            let mut change = ConfChangeV2::default();
            if change.merge_from_bytes(&entry.data).is_err() {
                continue;
            }
            let removes_me = change.get_changes().iter().any(|c| {
                c.get_change_type() == ConfChangeType::RemoveNode && c.node_id == self.me.raft_id
            });
            if removes_me && leaving.removal_seen_tick.is_none() {
                leaving.removal_seen_tick = Some(self.tick);
            }
        }
    }

    /// Starts a graceful leave: the group shrinks its quorum by this member.
    pub fn leave(&mut self) {
        if self.leaving.is_none() {
            let hand_over_from = self.is_leader().then_some(self.tick);
            self.leaving = Some(Leaving {
                last_request_tick: None,
                removal_seen_tick: None,
                hand_over_from,
            });
        }
    }

    /// Follows the lead while leaving: a member that lost it asks the new leader at once; one
    /// that gained it hands it over only after an election timeout.
    fn leaving_lead_changes(&mut self) {
        let (leader, tick) = (self.is_leader(), self.tick);
        let wait = self.config.election_ticks as u64;
        let Some(leaving) = self.leaving.as_mut() else {
            return;
        };
        match (leader, leaving.hand_over_from) {
            (true, None) => leaving.hand_over_from = Some(tick + wait),
            (false, Some(_)) => {
                leaving.hand_over_from = None;
                leaving.last_request_tick = None;
            }
            _ => {}
        }
    }

    pub(super) fn progress_leave(&mut self) {
        self.leaving_lead_changes();
        let Some(leaving) = self.leaving.as_ref() else {
            return;
        };
        if let Some(seen) = leaving.removal_seen_tick {
            if self.tick >= seen + self.config.leave_grace_ticks {
                self.finish_leave();
            }
            return;
        }
        let others: Vec<u64> = self
            .raw
            .store()
            .conf_state()
            .voters
            .iter()
            .copied()
            .filter(|id| *id != self.me.raft_id)
            .collect();
        if !self.member || (others.is_empty() && self.state.members.len() <= 1) {
            self.finish_leave();
            return;
        }
        if others.is_empty() {
            // The only voter, with members that follow it (their weights did not count):
            // its weight, 0 while it leaves, hands the vote over first (`weights.rs`).
            base::mark!("group.only_voter_hands_its_vote_over_before_leaving");
            return;
        }
        // A leader that may not hand the lead over yet does not spend its turn: it tries
        // again as soon as it may, not a resend period later.
        let may_hand_over = leaving.hand_over_from.is_some_and(|from| self.tick >= from);
        if self.is_leader() && !may_hand_over {
            return;
        }
        // Nor does a follower that does not know the leader yet (just after the lead went
        // to another member, until its first heartbeat): a request sent now would go
        // nowhere, and the next turn comes only a resend period later, after the new leader,
        // leaving too and not knowing this member asked, may have handed the lead back.
        if !self.is_leader() && self.raw.raft.leader_id == raft::INVALID_ID {
            return;
        }
        if !is_due(
            leaving.last_request_tick,
            self.tick,
            self.config.resend_ticks,
        ) {
            return;
        }
        if let Some(leaving) = self.leaving.as_mut() {
            leaving.last_request_tick = Some(self.tick);
        }
        if self.is_leader() {
            self.hand_the_lead_over(&others);
        } else {
            // Once per resend period at most: enough to tell a leave that hangs from one
            // that goes, in the server's log.
            tracing::info!(
                leader = self.raw.raft.leader_id,
                voters = ?others,
                "leaving: asking the leader to remove this member"
            );
            self.send_to_leader(&WireMessage::Leave);
        }
    }

    /// A leaving leader hands the lead over first: one that removes itself and stops may
    /// leave the others unsure whether the removal was ordered. It goes to the most
    /// caught-up voter that stays; when every other voter asked to leave too, this leader
    /// keeps the lead and removes them first (their removals are queued), then goes alone.
    fn hand_the_lead_over(&mut self, others: &[u64]) {
        let progress = self.raw.raft.prs();
        let best = others
            .iter()
            .copied()
            .filter(|id| !self.roster.asked_to_leave.contains(id))
            .max_by_key(|id| progress.get(*id).map_or(0, |p| p.matched));
        tracing::info!(
            to = ?best,
            voters = ?others,
            asked_to_leave = ?self.roster.asked_to_leave,
            "leaving: this leader hands the lead over (or, to none, removes the others first)"
        );
        match best {
            Some(best) => self.raw.transfer_leader(best),
            None => base::mark!("group.leaving_leader_removes_the_other_leavers_first"),
        }
    }

    /// The end of a clean leave: the node closes, or, when it left to give way to a
    /// forced component (`forced.rs`), starts over as a new member of that one.
    fn finish_leave(&mut self) {
        if self.forcing.rejoin_through.is_some() {
            self.leaving = None;
            self.rejoin_due = true;
        } else {
            self.close();
        }
    }

    /// Tells member `raft_id`, at `address`, that it is no longer one. The founder of a
    /// forced component says so first: a member it left behind must learn whether its
    /// history diverged before it rejoins (`forced.rs`).
    pub(super) fn tell_removed(&mut self, raft_id: u64, address: String) {
        if let Some(fork) = self.state.forced {
            if fork.founder == self.me.raft_id {
                let cluster = self.state.cluster;
                let notice = WireMessage::Superseded { cluster, fork };
                self.send(Some(raft_id), address.clone(), &notice);
            }
        }
        self.send(Some(raft_id), address, &WireMessage::Removed(raft_id));
    }

    /// Tells `from`, if it is a member this one saw removed, that it was.
    pub(super) fn tell_if_departed(&mut self, from: u64) {
        let departed = self
            .roster
            .departed
            .iter()
            .find(|info| info.raft_id == from);
        if let Some(address) = departed.map(|info| info.address.clone()) {
            self.tell_removed(from, address);
        }
    }

    /// Leader: reminds the learners it removed (`weights.rs`), once a second, that they were.
    /// A voter cut off campaigns, and hears it in answer; a learner sends nothing that would
    /// draw the answer, and would wait outside the primary component for good.
    pub(super) fn remind_departed(&mut self) {
        if !is_due(
            self.roster.last_reminder_tick,
            self.tick,
            REMIND_DEPARTED_TICKS,
        ) {
            return;
        }
        self.roster.last_reminder_tick = Some(self.tick);
        let departed: Vec<(u64, String)> = self
            .roster
            .departed
            .iter()
            .filter(|info| self.roster.departed_learners.contains(&info.raft_id))
            .map(|info| (info.raft_id, info.address.clone()))
            .collect();
        for (raft_id, address) in departed {
            self.tell_removed(raft_id, address);
        }
    }

    pub(super) fn evict_silent_members(&mut self) {
        self.lift_silent_flow_stops();
        let suspect_ticks = self.config.suspect_ticks();
        let tick = self.tick;
        // Removals already queued count as done: several holders of the data that fall
        // silent at once are each evicted only while another holder stays.
        let mut evicted: BTreeSet<u64> = self
            .roster
            .conf_queue
            .iter()
            .filter_map(|op| match op {
                ConfOp::Remove(id) => Some(*id),
                ConfOp::Add(_) => None,
            })
            .collect();
        let others: Vec<u64> = self
            .state
            .members
            .keys()
            .copied()
            .filter(|id| *id != self.me.raft_id)
            .collect();
        for id in others {
            // A member the leader has no record of (just added) starts its clock now.
            let heard = *self.roster.last_heard.entry(id).or_insert(tick);
            if tick.saturating_sub(heard) <= suspect_ticks || evicted.contains(&id) {
                continue;
            }
            evicted.insert(id);
            if !self.holders_remain_without(&evicted) {
                base::mark!("group.last_holder_of_the_data_kept_though_silent");
                evicted.remove(&id);
            } else if self.queue_removal(id) {
                base::mark!("group.silent_member_evicted");
                tracing::info!(
                    member = id,
                    "member silent past evs.suspect_timeout: evicting"
                );
            }
        }
    }

    /// Queues the removal of member `id` unless it is queued already; true if queued now.
    pub(super) fn queue_removal(&mut self, id: u64) -> bool {
        let queued = self
            .roster
            .conf_queue
            .iter()
            .any(|op| matches!(op, ConfOp::Remove(queued) if *queued == id));
        if !queued {
            self.roster.conf_queue.push_back(ConfOp::Remove(id));
        }
        !queued
    }

    /// Whether a membership change is on its way: proposed and not applied, or a joint
    /// configuration not left yet. raft-rs turns a change proposed meanwhile into an empty
    /// entry, so it would be lost.
    pub(super) fn conf_change_in_flight(&self) -> bool {
        self.raw.raft.has_pending_conf() || self.in_joint_configuration()
    }

    /// Whether the Raft configuration is joint (it has outgoing voters): entered by a change
    /// of roles (`weights.rs`) and not left yet.
    pub(super) fn in_joint_configuration(&self) -> bool {
        !self.raw.store().conf_state().voters_outgoing.is_empty()
    }

    pub(super) fn propose_conf_change(&mut self) {
        if self.conf_change_in_flight() {
            return;
        }
        while let Some(op) = self.roster.conf_queue.pop_front() {
            let (change_type, node_id, context) = match &op {
                ConfOp::Add(info) if !self.state.members.contains_key(&info.raft_id) => {
                    let change_type = if self.joins_as_voter(info.raft_id) {
                        ConfChangeType::AddNode
                    } else {
                        ConfChangeType::AddLearnerNode
                    };
                    (change_type, info.raft_id, wire::bincode_encode(info))
                }
                ConfOp::Remove(id) if self.state.members.contains_key(id) => {
                    (ConfChangeType::RemoveNode, *id, Vec::new())
                }
                _ => continue,
            };
            let mut single = ConfChangeSingle::default();
            single.set_change_type(change_type);
            single.node_id = node_id;
            let mut change = ConfChangeV2::default();
            change.mut_changes().push(single);
            if self.raw.propose_conf_change(context, change).is_err() {
                self.roster.conf_queue.push_front(op);
            }
            return;
        }
    }

    pub(super) fn lose_membership(&mut self) {
        let evicted = self.leaving.is_none() && !self.closed;
        self.member = false;
        self.primary = false;
        let view = View {
            cluster: self.state.cluster,
            seqno: self.last_delivered,
            view_id: self.state.view_id,
            primary: false,
            ordered: false,
            members: Vec::new(),
            own_index: None,
            membership: self.me.raft_id,
            founding: false,
        };
        self.deliver_view(view);
        if self.leaving.is_some() {
            self.finish_leave();
        } else if evicted {
            // Removed without asking: the others stopped hearing us. Start over as a new
            // member once this Ready is handled; our data comes back by state transfer.
            tracing::info!(me = self.me.raft_id, "removed from the view: rejoining");
            self.rejoin_due = true;
        }
    }
}
