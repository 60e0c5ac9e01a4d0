//! State requests as the group orders them, and the choice of their donor: Galera's rule
//! (`wsrep_sst_donor`), a candidate that holds the joiner's gap first, and a snapshot donor
//! reserved until its transfer is over.

use base::{NodeState, Seqno};
use serde::{Deserialize, Serialize};

use super::{GroupState, CLIENT_WRITES_WINDOW};

/// A joiner's request for state, as the group orders it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRequest {
    /// The joiner's Raft id.
    pub joiner: u64,
    /// Numbers the joiner's requests (set by [`crate::GroupNode::request_state`]): a request
    /// is resent until it is ordered, and a resend of one already ordered is dropped.
    pub request_id: u64,
    /// `wsrep_sst_donor`: preferred donor names, comma separated; a trailing comma means
    /// "or any other member".
    pub donor_names: String,
    /// The server's opaque SST request (method and address), passed to the donor as is.
    #[serde(with = "serde_bytes")]
    pub sst_request: Vec<u8>,
    /// The joiner's last committed position (for IST), `UNDEFINED` if it has none.
    pub ist_from: Seqno,
    /// Where the joiner receives IST (`ist.recv_addr`).
    pub ist_address: String,
}

impl std::fmt::Display for NoDonor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoDonor::NotYet => "every allowed donor is busy or not synced yet",
            NoDonor::Unreachable => "no member may serve it (see wsrep_sst_donor)",
        })
    }
}

impl GroupState {
    /// Chooses the donor of an ordered request ([`GroupState::select_donor`]) and, when it
    /// will give a snapshot, reserves it until the transfer is over (see
    /// [`GroupState::donating`]).
    pub fn assign_donor(&mut self, request: &StateRequest) -> Result<u64, NoDonor> {
        // A joiner asks again only once it expects nothing more from its earlier request (the
        // donor stayed silent, refused, or the joiner came back as the same member): what
        // that request reserved ends here. A donor that failed before the group saw it in
        // DONOR would otherwise stay reserved for this joiner, which could never have it.
        let before = self.donating.len();
        self.donating.retain(|_, joiner| *joiner != request.joiner);
        if self.donating.len() != before {
            base::mark!("group.joiner_asking_again_freed_its_donor");
        }
        let donor = self.select_donor(request)?;
        let gap_cached = request.ist_from.is_defined()
            && self.cached_from.get(&donor).is_some_and(|from| {
                from.is_defined() && from.0 <= request.ist_from.0.saturating_add(1)
            });
        // Only a snapshot is reserved: an IST-only request (a running server, which takes no
        // snapshot) is refused by a donor that lacks the gap, and a reservation for it would
        // never end.
        if !gap_cached && !request.sst_request.is_empty() {
            self.donating.insert(donor, request.joiner);
        }
        Ok(donor)
    }

    /// Ends the reservations a member's new state closes: a joiner that reached JOINED or
    /// SYNCED has its state; a donor that left DONOR is done.
    pub(super) fn end_donations(&mut self, raft_id: u64, before: NodeState, now: NodeState) {
        if matches!(now, NodeState::Joined | NodeState::Synced) {
            self.donating.retain(|_, joiner| *joiner != raft_id);
        }
        if before == NodeState::Donor && now != NodeState::Donor {
            self.donating.remove(&raft_id);
        }
    }

    /// Records an ordered state request; false if it is a resend of one already ordered
    /// (it must then not be served again).
    pub fn record_state_request(&mut self, request: &StateRequest) -> bool {
        let last = self.state_requests.get(&request.joiner).copied();
        if last.is_some_and(|id| id >= request.request_id) {
            return false;
        }
        self.state_requests
            .insert(request.joiner, request.request_id);
        true
    }
}

/// Why no donor could be chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoDonor {
    /// Listed members exist but none is SYNCED yet: try again later.
    NotYet,
    /// Nobody can serve: no listed name is a member and the list has no trailing comma, or
    /// no other member is SYNCED at all.
    Unreachable,
}

impl GroupState {
    /// Picks the donor for `request` the way Galera does: the first listed name that is
    /// SYNCED; with a trailing comma, or an empty list, any other SYNCED member. When the
    /// joiner asks for IST (`ist_from` defined), a candidate whose write-set cache reaches
    /// back to `ist_from + 1` comes first, in the same order of preference: a gap that some
    /// allowed donor still holds never falls back to SST.
    ///
    /// A snapshot (no candidate holds the gap) goes only to a candidate that is not giving
    /// one already: with none free, the answer is [`NoDonor::NotYet`] and the joiner asks
    /// again.
    pub fn select_donor(&self, request: &StateRequest) -> Result<u64, NoDonor> {
        let synced = |id: &u64| {
            *id != request.joiner
                && self
                    .members
                    .get(id)
                    .is_some_and(|m| m.state == NodeState::Synced)
        };
        let free = |id: &u64| synced(id) && !self.donating.contains_key(id);
        let names: Vec<&str> = request
            .donor_names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        let any_other = names.is_empty() || request.donor_names.trim_end().ends_with(',');
        let mut listed = Vec::new();
        for name in &names {
            let found = self
                .members
                .iter()
                .find(|(id, m)| **id != request.joiner && m.info.name == *name);
            if let Some((id, _)) = found {
                listed.push(*id);
            }
        }
        let mut candidates = listed.clone();
        if any_other {
            // Among the members nobody named, those serving no client writes come first:
            // a donor's snapshot competes with its clients for disk and CPU.
            let serves_clients = |id: &u64| {
                self.members.get(id).is_some_and(|m| {
                    self.last_write.get(&m.info.uuid).is_some_and(|s| {
                        s.is_defined()
                            && self.last_seqno.0.saturating_sub(s.0) < CLIENT_WRITES_WINDOW
                    })
                })
            };
            let mut others: Vec<u64> = self
                .members
                .keys()
                .filter(|id| !listed.contains(id))
                .copied()
                .collect();
            others.sort_by_key(serves_clients);
            candidates.extend(others);
        }
        if request.ist_from.is_defined() {
            let holds_gap = |id: &u64| {
                self.cached_from.get(id).is_some_and(|from| {
                    from.is_defined() && from.0 <= request.ist_from.0.saturating_add(1)
                })
            };
            if let Some(id) = candidates.iter().find(|id| synced(id) && holds_gap(id)) {
                return Ok(*id);
            }
        }
        if let Some(id) = candidates.iter().find(|id| free(id)) {
            return Ok(*id);
        }
        if any_other || !listed.is_empty() {
            Err(NoDonor::NotYet)
        } else {
            Err(NoDonor::Unreachable)
        }
    }
}
