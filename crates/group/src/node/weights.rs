//! `pc.weight` on a member: its weight ordered for the group, and the leader moving the
//! Raft configuration, one change at a time, to the voters the weights choose (the rule is
//! `crate::weights`; the members it does not count follow as Raft learners).

use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2};

use super::GroupNode;
use crate::state::Control;
use crate::weights::{self, DEFAULT_WEIGHT};
use crate::wire;

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
        self.raw.store().conf_state().voters == [self.me.raft_id]
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
        let voters: std::collections::BTreeSet<u64> = conf.voters.iter().copied().collect();
        (voters == chosen).then_some(weight)
    }

    /// Whether a joiner, of the default weight until it says otherwise, joins as a voter.
    pub(super) fn joins_as_voter(&self, joiner: u64) -> bool {
        let mut weights = self.state.weights();
        weights.insert(joiner, DEFAULT_WEIGHT);
        weights::voters(&weights).contains(&joiner)
    }

    /// Leader: one step toward the voters the weights choose, when no other membership change
    /// is on its way. A leader that is not among them hands leadership to one that is;
    /// promotions go before demotions, so the group never has fewer voters than it needs.
    pub(super) fn reconcile_voters(&mut self) {
        let raft = &self.raw.raft;
        if !self.roster.conf_queue.is_empty() || raft.pending_conf_index > raft.raft_log.applied {
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
        if !chosen.contains(&me) {
            let progress = self.raw.raft.prs();
            let successor = chosen
                .iter()
                .copied()
                .filter(|id| conf.voters.contains(id))
                .max_by_key(|id| progress.get(*id).map_or(0, |p| p.matched));
            if let Some(successor) = successor {
                if self.raw.raft.lead_transferee.is_none() {
                    base::mark!("group.leadership_handed_to_a_weighted_voter");
                    self.raw.transfer_leader(successor);
                }
                return;
            }
        }
        let promote = chosen.iter().find(|id| conf.learners.contains(id));
        let demote = conf
            .voters
            .iter()
            .find(|id| !chosen.contains(id) && **id != me);
        let (change_type, id) = match (promote, demote) {
            (Some(id), _) => (ConfChangeType::AddNode, *id),
            (None, Some(id)) => (ConfChangeType::AddLearnerNode, *id),
            (None, None) => return,
        };
        let Some(info) = self.state.members.get(&id).map(|m| m.info.clone()) else {
            return;
        };
        base::mark!("group.voters_follow_the_weights");
        let mut single = ConfChangeSingle::default();
        single.set_change_type(change_type);
        single.node_id = id;
        let mut change = ConfChangeV2::default();
        change.mut_changes().push(single);
        // Refused only while another change is pending, checked above; the next poll
        // tries again either way.
        let _ = self
            .raw
            .propose_conf_change(wire::bincode_encode(&info), change);
    }
}
