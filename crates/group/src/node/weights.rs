//! `pc.weight` on a member: its weight ordered for the group, and the leader moving the
//! Raft configuration, in one joint change, to the voters the weights choose (the rule is
//! `crate::weights`; the members it does not count follow as Raft learners).

use std::collections::BTreeSet;

use raft::eraftpb::{ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2};

use super::GroupNode;
use crate::state::Control;
use crate::weights::{self, DEFAULT_WEIGHT};

impl GroupNode {
    /// The weight this member wants ordered, if any: its `pc.weight`; while it leaves,
    /// nothing, but 0 as the only voter, so that it hands its vote over before it goes (any
    /// other member leaves by a plain removal).
    pub(super) fn wanted_weight(&self) -> Option<u8> {
        if self.leaving.is_none() {
            Some(self.config.weight)
        } else if self.is_only_voter() && self.state.members.len() > 1 {
            Some(0)
        } else {
            None
        }
    }

    fn is_only_voter(&self) -> bool {
        let conf = self.raw.store().conf_state();
        conf.voters == [self.me.raft_id] && conf.voters_outgoing.is_empty()
    }

    /// An ordered weight: recorded, and what it does to the quorum said, on every member
    /// alike.
    pub(super) fn apply_weight(&mut self, member: u64, weight: u8) {
        let Some(before) = self.state.members.get(&member).map(|m| m.weight) else {
            return;
        };
        self.state.apply_control(&Control::Weight(member, weight));
        let record = &self.state.members[&member];
        if record.weight == before {
            return;
        }
        let weights = self.state.weights();
        let counted: Vec<String> = weights::voters(&weights)
            .iter()
            .map(|id| self.member_name(*id))
            .collect();
        let exact = weights::matches_galera(&weights);
        tracing::info!(
            target: "wsrep",
            "pc.weight of {} is now {} (was {before}): the primary component needs a majority \
             of {}{}",
            record.info.name,
            record.weight,
            counted.join(", "),
            if exact {
                ""
            } else {
                "; Galera would weigh this mix otherwise: Trireme honours a weight when one \
                 member outweighs all the others together, or when it is 0, and otherwise \
                 counts each member once"
            }
        );
    }

    /// This member's weight as ordered for the group, once the Raft voters are the ones the
    /// weights choose; nothing outside a primary component or while the voters still move.
    /// `SET GLOBAL wsrep_provider_options='pc.weight=…'` returns when this reads the new
    /// weight, as Galera's returns once the weight is installed: a test or a DBA that cuts a
    /// node off right after must find the quorum already moved.
    pub fn weight_in_force(&self) -> Option<u8> {
        if !self.member || !self.primary {
            return None;
        }
        let weight = self.state.members.get(&self.me.raft_id)?.weight;
        let chosen = weights::voters(&self.state.weights());
        let conf = self.raw.store().conf_state();
        let voters: BTreeSet<u64> = conf.voters.iter().copied().collect();
        (voters == chosen && conf.voters_outgoing.is_empty()).then_some(weight)
    }

    /// Whether a joiner, of the default weight until it says otherwise, joins as a voter.
    pub(super) fn joins_as_voter(&self, joiner: u64) -> bool {
        let mut weights = self.state.weights();
        weights.insert(joiner, DEFAULT_WEIGHT);
        weights::voters(&weights).contains(&joiner)
    }

    /// Leader: moves the Raft configuration to the voters the weights choose, when no other
    /// membership change is on its way. A leader that is not among them hands leadership to
    /// one that is. Every promotion and demotion goes in one joint change, which raft-rs
    /// leaves automatically: one at a time, a move from three voters to one passes through
    /// two, where the loss of either stops the group although both ends would go on.
    pub(super) fn reconcile_voters(&mut self) {
        if self.conf_change_in_flight() {
            self.leave_a_stranded_joint_configuration();
            return;
        }
        // Members joining or leaving go first.
        if !self.roster.conf_queue.is_empty() {
            return;
        }
        // The common case, on every poll of the leader: no weights set and no learners, so
        // every member is a voter already.
        let unweighted = self
            .state
            .members
            .values()
            .all(|m| m.weight == DEFAULT_WEIGHT);
        if unweighted && self.raw.store().conf_state().learners.is_empty() {
            return;
        }
        let chosen = weights::voters(&self.state.weights());
        let conf = self.raw.store().conf_state().clone();
        let me = self.me.raft_id;
        if !chosen.contains(&me) && self.hand_the_lead_to_a_chosen_voter(&chosen, &conf.voters) {
            return;
        }
        // A leader that is not chosen stays a voter until a chosen voter leads instead.
        let promote = chosen.iter().filter(|id| conf.learners.contains(id));
        let demote = conf
            .voters
            .iter()
            .filter(|id| !chosen.contains(id) && **id != me);
        let mut change = ConfChangeV2::default();
        for (change_type, id) in promote
            .map(|id| (ConfChangeType::AddNode, *id))
            .chain(demote.map(|id| (ConfChangeType::AddLearnerNode, *id)))
        {
            let mut single = ConfChangeSingle::default();
            single.set_change_type(change_type);
            single.node_id = id;
            change.mut_changes().push(single);
        }
        if change.get_changes().is_empty() {
            return;
        }
        base::mark!("group.voters_follow_the_weights");
        // Joint even for one change, left automatically: the transition is what tells a
        // change of roles from a member added (`check::decode_conf_change`).
        change.set_transition(ConfChangeTransition::Implicit);
        // Refused only while another change is pending, checked above; the next poll
        // tries again either way.
        let _ = self.raw.propose_conf_change(Vec::new(), change);
    }

    /// A leader the weights do not count hands leadership to the most caught-up voter they
    /// do; false when none of them is a voter yet.
    fn hand_the_lead_to_a_chosen_voter(&mut self, chosen: &BTreeSet<u64>, voters: &[u64]) -> bool {
        let progress = self.raw.raft.prs();
        let successor = chosen
            .iter()
            .copied()
            .filter(|id| voters.contains(id))
            .max_by_key(|id| progress.get(*id).map_or(0, |p| p.matched));
        let Some(successor) = successor else {
            return false;
        };
        if self.raw.raft.lead_transferee.is_none() {
            base::mark!("group.leadership_handed_to_a_weighted_voter");
            self.raw.transfer_leader(successor);
        }
        true
    }

    /// Leader: leaves a joint configuration that nothing else is leaving. raft-rs proposes
    /// the leave as its leader applies the entry that entered it, or a new leader its first
    /// entry; by raft-rs's own note, a change of leader in between can miss it, and the
    /// group would stay joint, admitting no member, for good.
    fn leave_a_stranded_joint_configuration(&mut self) {
        if self.raw.raft.has_pending_conf() || !self.in_joint_configuration() {
            return;
        }
        base::mark!("group.joint_configuration_left_by_a_later_leader");
        // An empty change with the automatic transition is the leave; refused only while
        // another change is pending, checked above.
        let _ = self
            .raw
            .propose_conf_change(Vec::new(), ConfChangeV2::default());
    }
}
