//! Stepping out of the cluster's pace: desync (no flow control from this node) and pause
//! (nothing after a point starts until resume, for FTWRL, BACKUP STAGE and rsync donors),
//! and the moment a JOINED node has caught up.

use base::{NodeState, Seqno};

use crate::task::Task;
use crate::{NodeEngine, SYNCED_QUEUE_MAX};

impl NodeEngine {
    /// Stops sending flow control (`wsrep_desync=ON`, FLUSH TABLES WITH READ LOCK).
    pub fn desync(&mut self) {
        self.desync_count += 1;
        if self.state == NodeState::Synced {
            self.shift(NodeState::Donor);
        }
    }

    /// Undoes one `desync`; back to SYNCED when the last one is undone.
    pub fn resync(&mut self) {
        self.desync_count = self.desync_count.saturating_sub(1);
        if self.desync_count == 0 && self.state == NodeState::Donor {
            // Galera's way back: JOINED, then SYNCED once caught up, which a node that only
            // stopped sending flow control is at once (else `tick` finishes it).
            self.shift(NodeState::Joined);
            if self.tasks.len() <= SYNCED_QUEUE_MAX {
                self.shift(NodeState::Synced);
            }
        }
    }

    /// Pauses at the highest seqno released so far or `committed`, whichever is later, and
    /// returns the point (see [`crate::pause::PauseGate`]). The caller then waits for
    /// [`NodeEngine::pause_reached`].
    pub fn pause(&mut self, committed: Seqno) -> Seqno {
        let point = self.pause.pause(committed);
        base::mark!("engine.paused");
        point
    }

    /// Whether everything up to the pause `point` is committed (`committed`) and nothing
    /// that takes a seqno runs.
    pub fn pause_reached(&self, point: Seqno, committed: Seqno) -> bool {
        !self.tasks.ordered_work_running() && committed >= point
    }

    /// Lifts the pause: what it held back runs.
    pub fn resume(&mut self) {
        self.pause.resume();
    }

    /// A JOINED node that has caught up becomes SYNCED and tells the server.
    pub(crate) fn maybe_synced(&mut self) {
        if self.state == NodeState::Joined
            && self.tasks.len() <= SYNCED_QUEUE_MAX
            && self.desync_count == 0
        {
            self.shift(NodeState::Synced);
            self.tasks.push(Task::Synced);
        }
    }
}
