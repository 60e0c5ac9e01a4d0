//! Causal reads: Raft's read index asked of the leader, answered in delivery order once
//! this member applied that index.

use std::collections::BTreeMap;

use super::delivery::Delivery;
use super::GroupNode;

/// Causal reads of this member on their way to an answer.
#[derive(Default)]
pub(super) struct CausalReads {
    /// Asked of Raft and not answered yet: request id -> tick of the last ask.
    pub(super) asked: BTreeMap<u64, u64>,
    /// Whose read index is known: `(id, index)`, answered once that index is applied.
    pub(super) ready: Vec<(u64, u64)>,
}

impl GroupNode {
    /// Asks for the point a causal read must wait for (Raft's read index, so the leader
    /// confirms it still leads before answering). The answer is a [`Delivery::Causal`]
    /// with this `id`, in delivery order. Unanswered asks are repeated; an ask made while
    /// the node is not in a primary component is answered once it is again, or never, so
    /// the caller keeps its own timeout.
    pub fn causal_read(&mut self, id: u64) {
        if self.closed {
            return;
        }
        self.causal.asked.insert(id, self.tick);
        self.raw.read_index(id.to_be_bytes().to_vec());
    }

    /// Delivers the causal reads whose read index is applied: the seqnos of every entry up
    /// to it are assigned by now, so the last of them is the point to wait for.
    pub(super) fn answer_causal_reads(&mut self) {
        if self.causal.ready.is_empty() {
            return;
        }
        let applied = self.raw.raft.raft_log.applied;
        let seqno = self.last_delivered;
        let mut answered = Vec::new();
        self.causal.ready.retain(|&(id, index)| {
            let done = index <= applied;
            if done {
                answered.push(id);
            }
            !done
        });
        for id in answered {
            self.deliveries.push_back(Delivery::Causal { id, seqno });
        }
    }

    /// Asks again for the causal reads Raft dropped (no leader, or a new leader that has not
    /// committed in its term yet).
    pub(super) fn repeat_causal_reads(&mut self) {
        let tick = self.tick;
        let every = self.config.election_ticks as u64;
        let due: Vec<u64> = self
            .causal
            .asked
            .iter()
            .filter(|(_, &asked)| tick >= asked + every)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            base::mark!("group.causal_read_asked_again");
            self.causal.asked.insert(id, tick);
            self.raw.read_index(id.to_be_bytes().to_vec());
        }
    }
}
