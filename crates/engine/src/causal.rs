//! Causal reads (`wsrep_sync_wait`): this node asks the group for the last seqno it has
//! ordered, then waits until that is committed here. The engine keeps the questions in
//! flight and their answers; the waiting is the caller's.

use base::Seqno;

use crate::NodeEngine;

/// Why a causal read cannot be asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CausalRefusal {
    /// A joiner still waiting for its snapshot holds none of the cluster's history (as
    /// Galera's history mismatch, it fails at once: the snapshot may itself wait for this
    /// reader).
    NoStateYet,
    /// Not in a primary component.
    NotPrimary,
}

impl NodeEngine {
    /// Whether a read may wait for this node's state: not while it waits for a snapshot of
    /// a history that is not its own.
    pub fn may_read(&self) -> Result<(), CausalRefusal> {
        let own_history = self
            .start_position
            .is_some_and(|p| p.cluster == self.view.cluster);
        if self.joining.is_some() && !own_history {
            return Err(CausalRefusal::NoStateYet);
        }
        Ok(())
    }

    /// Opens a causal read: the id to ask the group under.
    pub fn begin_causal_read(&mut self) -> Result<u64, CausalRefusal> {
        if !self.view.primary || !self.life.connected {
            return Err(CausalRefusal::NotPrimary);
        }
        self.next_causal_id += 1;
        let id = self.next_causal_id;
        self.causal.insert(id, None);
        self.stats.counters.causal_reads += 1;
        Ok(id)
    }

    /// The group's answer to causal read `id`, once it came (the read is then closed).
    pub fn causal_answer(&mut self, id: u64) -> Option<Seqno> {
        let answer = (*self.causal.get(&id)?)?;
        self.causal.remove(&id);
        Some(answer)
    }

    /// Gives up causal read `id` (it timed out, or the group could not be asked).
    pub fn end_causal_read(&mut self, id: u64) {
        self.causal.remove(&id);
    }

    /// The group answered causal read `id`: wait for `seqno`.
    pub(crate) fn causal_answered(&mut self, id: u64, seqno: Seqno) {
        if let Some(answer) = self.causal.get_mut(&id) {
            *answer = Some(seqno);
        }
    }
}
