//! Outside the primary component, members say to one another that they are there, so that
//! each one's non-primary view lists the members it can reach, as Galera's does. Voters cut
//! off hear their own side anyway, as they campaign; learners (`weights.rs`) send nothing
//! unasked, and without this each would see a component of one.

use super::controls::is_due;
use super::GroupNode;
use crate::wire::WireMessage;

/// Announcements a member outside the primary component sends within one contact window.
const ANNOUNCEMENTS_PER_WINDOW: u64 = 3;

impl GroupNode {
    /// How often a member outside the primary component announces itself: a few times
    /// within the window in which a member counts as still heard, so that one lost
    /// announcement does not drop it from the others' views.
    fn presence_ticks(&self) -> u64 {
        let every = (self.contact_window() / ANNOUNCEMENTS_PER_WINDOW).max(1);
        debug_assert!(every < self.contact_window() || self.contact_window() <= 1);
        every
    }

    /// Outside the primary component, tells every other member this one is there.
    pub(super) fn announce_presence(&mut self) {
        if !self.member || self.primary || self.closed || self.leaving.is_some() {
            self.presence_tick = None;
            return;
        }
        if !is_due(self.presence_tick, self.tick, self.presence_ticks()) {
            return;
        }
        self.presence_tick = Some(self.tick);
        let others: Vec<(u64, String)> = self
            .state
            .members
            .values()
            .filter(|m| m.info.raft_id != self.me.raft_id)
            .map(|m| (m.info.raft_id, m.info.address.clone()))
            .collect();
        for (raft_id, address) in others {
            self.send(
                Some(raft_id),
                address,
                &WireMessage::Presence { reply: false },
            );
        }
    }

    /// A member outside the primary component announced itself: counted as heard while this
    /// one is outside too. Inside it, only Raft traffic counts, so that a member the leader
    /// cannot reach is still evicted however loudly it announces itself. Every member answers
    /// an announcement, so that of two members cut off together, each lists the other as
    /// soon as it is outside, whichever noticed first, rather than a component of one until
    /// the other's next announcement. An answer is never answered: no echo. One from a
    /// member this one saw removed is answered with the removal.
    pub(super) fn receive_presence(&mut self, from: u64, reply: bool) {
        if !self.member {
            return;
        }
        let Some(address) = self
            .state
            .members
            .get(&from)
            .map(|m| m.info.address.clone())
        else {
            // A learner removed while cut off announces itself to the members it knew; the
            // leader's reminders reach it only from a leader that saw it removed, and the
            // one now may have joined since. Any member that saw it tells it.
            self.tell_if_departed(from);
            return;
        };
        if !self.primary {
            self.roster.last_heard.insert(from, self.tick);
        }
        if !reply {
            self.send(Some(from), address, &WireMessage::Presence { reply: true });
        }
    }
}
