//! State transfer requests through the total order: this joiner's request, resent until
//! ordered; a donor's report that the transfer failed.

use super::controls::is_due;
use super::GroupNode;
use crate::state::{Control, LogEntry, StateRequest};
use crate::wire::WireMessage;

/// This joiner's state transfer request and their numbering.
#[derive(Default)]
pub(super) struct StateRequesting {
    /// The request until it is ordered, and when it was last sent.
    pub(super) unordered: Option<(StateRequest, Option<u64>)>,
    /// The number of the last request made.
    pub(super) last_id: u64,
    /// The first request this process sent: an ordered request of this joiner below it is
    /// an earlier process's (one that came back as this member), not this one's.
    pub(super) first_id: Option<u64>,
}

impl GroupNode {
    /// Asks the group for state transfer (ordered; the chosen donor is told). Call again
    /// to retry, for example when no donor was available.
    pub fn request_state(&mut self, mut request: StateRequest) {
        self.continue_numbering();
        request.joiner = self.me.raft_id;
        self.requesting.last_id += 1;
        request.request_id = self.requesting.last_id;
        // Sent by `send_state_request` now and again until it is ordered: a request that
        // reached no leader (none elected, or it just died) must not leave the joiner
        // waiting forever.
        self.requesting.unordered = Some((request, None));
    }

    pub(super) fn send_state_request(&mut self) {
        let (tick, every) = (self.tick, self.config.resend_ticks);
        let Some((request, last_sent)) = self.requesting.unordered.as_mut() else {
            return;
        };
        if !self.member || !is_due(*last_sent, tick, every) {
            return;
        }
        if last_sent.is_none() {
            // Numbered once the group's record of this member is known: a process that came
            // back as the member it was numbers on from its earlier process (a request
            // numbered like an earlier one would be dropped as its resend).
            let recorded = self.state.state_requests.get(&self.me.raft_id).copied();
            if let Some(recorded) = recorded.filter(|last| *last >= request.request_id) {
                request.request_id = recorded + 1;
                self.requesting.last_id = request.request_id;
            }
            let first = self.requesting.first_id.get_or_insert(request.request_id);
            *first = (*first).min(request.request_id);
        }
        *last_sent = Some(tick);
        let entry = Control::StateRequest(request.clone());
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(entry));
        } else {
            self.send_to_leader(&WireMessage::Control(entry));
        }
    }

    /// Tells `joiner` (Raft id) that this donor could not send the snapshot it was chosen
    /// for. Ordered, so it reaches the joiner wherever the leader is.
    pub fn transfer_failed(&mut self, joiner: u64) {
        let control = Control::TransferFailed(self.me.raft_id, joiner);
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(control));
        } else {
            self.send_to_leader(&WireMessage::Control(control));
        }
    }

    /// A member's name (a member that just left too), else its Raft id.
    pub(super) fn member_name(&self, raft_id: u64) -> String {
        let departed = || {
            self.roster
                .departed
                .iter()
                .rev()
                .find(|d| d.raft_id == raft_id)
        };
        self.state
            .members
            .get(&raft_id)
            .map(|m| &m.info)
            .or_else(departed)
            .map_or_else(|| raft_id.to_string(), |info| info.name.clone())
    }
}
