//! This member's consistency votes: sent until seen in the order, and the decisions
//! delivered.

use base::Seqno;

use super::controls::is_due;
use super::delivery::Delivery;
use super::GroupNode;
use crate::state::Control;
use crate::vote::{VoteCode, VoteDecision, VoteEvent, VoteRefusal};

impl GroupNode {
    /// Casts this node's verdict on `seqno` in a consistency vote: [`crate::vote::SUCCESS`] if it
    /// applied (or committed) the seqno, else [`crate::vote::error_code`] of its error. Resent
    /// until ordered; the decision comes as [`Delivery::VoteDecided`].
    pub fn vote(&mut self, seqno: Seqno, code: VoteCode) {
        self.votes_wanted.entry(seqno).or_insert(code);
        self.pacing.votes = None;
    }

    /// The votes to send now: those not yet ordered, at once when new, then every
    /// `resend_ticks`. A vote whose ballot is decided, or that counts already, is done.
    pub(super) fn votes_due(&mut self) -> Vec<Control> {
        let me = self.me.raft_id;
        let votes = &self.state.votes;
        self.votes_wanted.retain(|seqno, _| {
            let counted = votes
                .open
                .get(seqno)
                .is_some_and(|ballot| ballot.votes.contains_key(&me));
            !counted && !votes.decided.contains_key(seqno)
        });
        if self.votes_wanted.is_empty()
            || !is_due(self.pacing.votes, self.tick, self.config.resend_ticks)
        {
            return Vec::new();
        }
        self.pacing.votes = Some(self.tick);
        self.votes_wanted
            .iter()
            .map(|(seqno, code)| Control::Vote(me, *seqno, *code))
            .collect()
    }

    /// Counts an ordered vote, and hands this node what it leads to.
    pub(super) fn apply_vote(&mut self, member: u64, seqno: Seqno, code: VoteCode) {
        let events = match self.state.cast_vote(member, seqno, code) {
            Ok(events) => events,
            Err(refusal @ VoteRefusal::Decided(_)) => {
                tracing::debug!(member, %refusal, "vote not counted");
                return;
            }
            Err(refusal) => {
                tracing::warn!(member, %refusal, "vote not counted");
                return;
            }
        };
        for event in events {
            match event {
                VoteEvent::Opened {
                    seqno, by, voters, ..
                } => {
                    let me = self.me.raft_id;
                    if self.member && by != me && voters.contains(&me) {
                        let by = self.member_name(by);
                        self.deliveries
                            .push_back(Delivery::VoteRequested { seqno, by });
                    }
                }
                VoteEvent::Decided(decision) => self.deliver_decision(decision),
            }
        }
    }

    /// Hands a decided vote to this node if it voted.
    pub(super) fn deliver_decision(&mut self, decision: VoteDecision) {
        let Some(mine) = decision.votes.get(&self.me.raft_id).copied() else {
            return;
        };
        let votes = decision
            .votes
            .iter()
            .map(|(id, code)| (self.member_name(*id), *code))
            .collect();
        self.votes_wanted.remove(&decision.seqno);
        if self.member {
            self.deliveries.push_back(Delivery::VoteDecided {
                seqno: decision.seqno,
                winner: decision.winner,
                mine,
                votes,
            });
        }
    }
}
