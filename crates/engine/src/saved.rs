//! What the node keeps on disk between runs, written at the moments that matter: the saved
//! position (`grastate.dat`) and the identity it comes back under after a crash.

use base::grastate::SavedState;
use base::{Gtid, NodeState, Seqno, Uuid};
use group::restart::SavedMembership;

use crate::{LogLevel, NodeEngine};

impl NodeEngine {
    /// Writes the saved position; a failure is logged, not fatal.
    pub(crate) fn save_state(&mut self, state: SavedState) {
        if let Err(error) = self.store.save(&state) {
            let message = format!("cannot write {}: {error}", self.store.location());
            self.say(LogLevel::Warning, message);
        }
    }

    /// The saved position, if the node keeps a readable one.
    pub fn saved_state(&self) -> Result<Option<SavedState>, String> {
        self.store.load()
    }

    /// Where the saved position is kept, for messages.
    pub fn saved_state_location(&self) -> String {
        self.store.location()
    }

    /// Marks the saved state "running in history `cluster`" (seqno -1): after a crash the
    /// position is recovered from the storage engine, and the uuid says which history it
    /// is in. `sole_member`: this node is the whole primary component, so that after a
    /// crash it may found the cluster again (`safe_to_bootstrap: 1`, as Galera writes it).
    /// A position cleared by a lost consistency vote stays cleared.
    pub(crate) fn save_running_state(&mut self, cluster: Uuid, sole_member: bool) {
        if self.votes.inconsistent {
            return;
        }
        self.save_state(SavedState {
            position: Gtid {
                cluster,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: sole_member,
        });
    }

    /// Keeps `safe_to_bootstrap` true exactly while this node is the whole primary
    /// component: the last member standing may found the cluster again after a crash, and
    /// no other may.
    pub(crate) fn note_sole_member(&mut self, cluster: Uuid, sole: bool) {
        if sole != self.saved_sole_member {
            self.saved_sole_member = sole;
            self.save_running_state(cluster, sole);
        }
    }

    /// Saves the position this node leaves with, `committed` being the last seqno it
    /// committed. It is safe to bootstrap from if it was the last member of the primary
    /// component. An inconsistent node's cleared position stays cleared: it must come back
    /// by SST.
    pub fn save_final_state(&mut self, last_member: bool, committed: Seqno) {
        let complete = matches!(
            self.state,
            NodeState::Synced | NodeState::Donor | NodeState::Joined | NodeState::Closed
        ) && self.joining.is_none();
        let cluster = self.view.cluster;
        if cluster == Uuid::NIL || self.votes.inconsistent {
            return;
        }
        let seqno = if complete {
            committed
        } else {
            Seqno::UNDEFINED
        };
        self.save_state(SavedState {
            position: Gtid { cluster, seqno },
            safe_to_bootstrap: last_member && seqno.is_defined(),
        });
    }

    /// Clears the saved position: this node's data is not the cluster's, and the next
    /// start must take a full snapshot whatever the server recovers.
    pub(crate) fn clear_saved_state(&mut self) {
        self.save_state(SavedState {
            position: Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: false,
        });
        self.forget_membership();
        self.forget_last_view();
    }

    /// The identity saved to come back under after a crash, if any.
    pub fn saved_membership(&self) -> Option<SavedMembership> {
        self.store.load_membership()
    }

    /// Forgets the identity saved to come back after a crash: the node left (cleanly, or
    /// because its data differs) and must not come back as the member it was.
    pub fn forget_membership(&mut self) {
        if let Err(error) = self.store.forget_membership() {
            let message = format!("cannot forget the saved membership: {error}");
            self.say(LogLevel::Warning, message);
        }
        self.saved_membership = None;
    }

    /// Keeps the identity this node comes back under after a crash in step with the
    /// primary component (`group`: what the group member would save now, while `primary`):
    /// saved while it is one of two, removed when the component has another size. Out of the
    /// primary component it stays as it was: that is when it is needed.
    pub fn keep_membership(&mut self, primary: bool, group: Option<SavedMembership>) {
        if !primary || group == self.saved_membership {
            return;
        }
        let saved = match &group {
            Some(membership) => self.store.save_membership(membership),
            None => self.store.forget_membership(),
        };
        if let Err(error) = saved {
            let message = format!("cannot keep the saved membership: {error}");
            self.say(LogLevel::Warning, message);
        }
        self.saved_membership = group;
    }
}
