//! The replicated group state: what every member computes identically from the ordered log.
//!
//! This is the only place where Raft log entries turn into seqnos. A Raft index is not a
//! seqno: one entry may carry a batch of many write-sets, control entries carry none, and
//! duplicates are dropped without a seqno. A Raft snapshot carries this state (the group's
//! metadata), never database state: database state moves by IST/SST.

use std::collections::{BTreeMap, BTreeSet};

use base::{NodeState, Seqno, Uuid};
use serde::{Deserialize, Serialize};

use crate::vote::{self, ConsistencyVotes, VoteCode, VoteDecision, VoteEvent, VoteRefusal};
use crate::wire::{bincode_decode, bincode_encode, WireError};

/// Who a member is: fixed for the life of one membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    /// The member's Raft id (new for every membership).
    pub raft_id: u64,
    /// The member's UUID (new for every membership).
    pub uuid: Uuid,
    /// `wsrep_node_name`.
    pub name: String,
    /// The address its peers reach its group layer at (`wsrep_node_address` with the group
    /// port), which is not always where it listens (`gmcast.listen_addr` may be a wildcard).
    pub address: String,
    /// Where clients reach its database server (`wsrep_node_incoming_address`); empty when
    /// the member did not say.
    pub incoming: String,
}

impl MemberInfo {
    /// How this member presented itself, to present itself the same way again.
    pub fn contact(&self) -> Contact {
        Contact {
            name: self.name.clone(),
            address: self.address.clone(),
            incoming: self.incoming.clone(),
        }
    }
}

/// How a node presents itself to the group: what every membership of its process shares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contact {
    /// `wsrep_node_name`.
    pub name: String,
    /// The address its peers reach its group layer at.
    pub address: String,
    /// Where clients reach its database server (`wsrep_node_incoming_address`).
    pub incoming: String,
}

impl Contact {
    /// A contact with no client address (a group member without a database server).
    pub fn new(name: &str, address: &str) -> Contact {
        Contact {
            name: name.to_owned(),
            address: address.to_owned(),
            incoming: String::new(),
        }
    }
}

/// One write-set (opaque bytes to this layer) submitted for ordering.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    /// The submitting member's UUID.
    pub origin: Uuid,
    /// Per-origin number, from 1, used to deliver each submission exactly once.
    pub submit_id: u64,
    /// The encoded write-set. Encoded as one byte string, not element by element: it is
    /// copied through the codec four times on its way to every member.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    /// `(index, count)`: a large write-set travels and is ordered as `count` chunks with
    /// consecutive submit ids, and takes its seqno when the last of them is ordered; `(0,
    /// 1)` for a write-set in one piece.
    pub chunk: (u32, u32),
}

impl Submission {
    /// A write-set in one piece.
    pub fn whole(origin: Uuid, submit_id: u64, payload: Vec<u8>) -> Submission {
        Submission {
            origin,
            submit_id,
            payload,
            chunk: (0, 1),
        }
    }

    /// The submit id the whole write-set is known by: that of its last chunk (`None` past
    /// `u64::MAX`: a malformed chunk).
    pub fn write_set_id(&self) -> Option<u64> {
        let (index, count) = self.chunk;
        self.submit_id
            .checked_add(u64::from(count.saturating_sub(1).saturating_sub(index)))
    }
}

/// The most chunks one write-set may be cut into (at the 256 KiB chunk size, 64 GiB):
/// a bound on what a peer can make every member hold.
pub const MAX_CHUNKS: u32 = 1 << 18;

/// The most write-sets of one origin whose chunks may be in reassembly at once. An origin
/// sends its chunks in order, so it has one or two in progress; a chunk that would start one
/// more is not ordered (nor marked ordered) and its origin sends it again later. Bounds what
/// one member can make every member hold at this many times `repl.max_ws_size`.
pub const MAX_REASSEMBLIES_PER_ORIGIN: usize = 8;

/// The highest seqno a group state may hold: seqnos are counted up one at a time, and a
/// state from the network claiming more would overflow them.
pub const SEQNO_MAX: i64 = i64::MAX / 2;

/// A write-set whose chunks are being ordered: its chunks so far, by index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassembly {
    /// How many chunks make it whole.
    pub count: u32,
    /// The chunks ordered so far.
    pub parts: BTreeMap<u32, serde_bytes::ByteBuf>,
}

/// A submission that took a seqno.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedSubmission {
    /// Its seqno.
    pub seqno: Seqno,
    /// The origin's id for the whole write-set ([`Submission::write_set_id`]).
    pub submit_id: u64,
    /// The whole write-set.
    pub payload: Vec<u8>,
}

/// Ordered actions that change group state but take no seqno.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// The member's apply queue is over `gcs.fc_limit`: stop ordering write-sets.
    FlowStop(u64),
    /// The member's queue is back under the resume mark.
    FlowResume(u64),
    /// The member's node state changed (JOINER, JOINED, SYNCED, DONOR, ...).
    State(u64, NodeState),
    /// The member has committed everything up to this seqno (its part of the commit cut).
    Committed(u64, Seqno),
    /// The member asks for state transfer. Ordered, so every member picks the same donor.
    StateRequest(StateRequest),
    /// The oldest seqno the member's write-set cache (gcache) holds, `UNDEFINED` when it
    /// holds nothing: how far back it can serve IST. Donor selection prefers a member whose
    /// cache covers the joiner's gap.
    Cached(u64, Seqno),
    /// The member's verdict on a seqno in a consistency vote (`crate::vote`): success, or
    /// the digest of the error it failed with.
    Vote(u64, Seqno, VoteCode),
    /// The member (a donor) could not send the snapshot it was chosen for to this joiner
    /// (Raft id): the joiner will never receive it.
    TransferFailed(u64, u64),
}

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
        let donor = self.select_donor(request)?;
        let gap_cached = request.ist_from.is_defined()
            && self.cached_from.get(&donor).is_some_and(|from| {
                from.is_defined() && from.0 <= request.ist_from.0.saturating_add(1)
            });
        if !gap_cached {
            self.donating.insert(donor, request.joiner);
        }
        Ok(donor)
    }

    /// Ends the reservations a member's new state closes: a joiner that reached JOINED or
    /// SYNCED has its state; a donor that left DONOR is done.
    fn end_donations(&mut self, raft_id: u64, before: NodeState, now: NodeState) {
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

/// The payload of a normal Raft entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogEntry {
    /// Write-sets, each taking the next seqno unless it is a duplicate.
    Batch(Vec<Submission>),
    /// A control action.
    Control(Control),
}

impl LogEntry {
    /// Encodes the entry for the Raft log.
    pub fn encode(&self) -> Vec<u8> {
        bincode_encode(self)
    }

    /// Decodes an entry from the Raft log.
    pub fn decode(bytes: &[u8]) -> Result<LogEntry, WireError> {
        bincode_decode(bytes)
    }
}

/// A member as the replicated state knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// Identity.
    pub info: MemberInfo,
    /// Last node state the member announced.
    pub state: NodeState,
}

/// Remembers which submissions of one origin were ordered, so each is delivered once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupWindow {
    /// Every submit id at or below this was ordered.
    pub contiguous: u64,
    /// Ordered ids above `contiguous` (resends can arrive out of order).
    pub above: BTreeSet<u64>,
}

impl DedupWindow {
    /// Records `id`; false if it was ordered before (or is `u64::MAX`, which no origin uses).
    pub fn insert(&mut self, id: u64) -> bool {
        // The last id is never taken, so the record never reaches the end of the range.
        if id == u64::MAX || id <= self.contiguous || !self.above.insert(id) {
            return false;
        }
        while let Some(next) = self.contiguous.checked_add(1) {
            if !self.above.remove(&next) {
                break;
            }
            self.contiguous = next;
        }
        true
    }

    /// True if `id` was ordered.
    pub fn contains(&self, id: u64) -> bool {
        id <= self.contiguous || self.above.contains(&id)
    }
}

/// The state every member derives from the ordered log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupState {
    /// The cluster state UUID.
    pub cluster: Uuid,
    /// The last seqno handed out.
    pub last_seqno: Seqno,
    /// Count of primary views so far (wsrep's view id).
    pub view_id: u64,
    /// Members by Raft id.
    pub members: BTreeMap<u64, MemberRecord>,
    /// Per-origin delivery record.
    pub dedup: BTreeMap<Uuid, DedupWindow>,
    /// Members whose flow-control stop is in force.
    pub paused_by: BTreeSet<u64>,
    /// Last committed seqno each member reported.
    pub committed: BTreeMap<u64, Seqno>,
    /// The commit cut: every member that reported has committed up to here, so the
    /// certification index may forget older entries. Only grows.
    pub safe_seqno: Seqno,
    /// The oldest seqno each member reported its write-set cache to hold (for IST).
    pub cached_from: BTreeMap<u64, Seqno>,
    /// The last state request ordered for each member (its `request_id`).
    pub state_requests: BTreeMap<u64, u64>,
    /// The seqno of each member's latest write-set, by member UUID: who serves client
    /// writes, so that donor selection can spare those members.
    pub last_write: BTreeMap<Uuid, Seqno>,
    /// Write-sets whose chunks are being ordered, by origin and write-set id.
    pub partial: BTreeMap<(Uuid, u64), Reassembly>,
    /// Donors given a snapshot transfer (SST), by donor Raft id, with their joiner: from
    /// the moment the request is ordered, before the donor itself reports DONOR, so that
    /// joiners asking at the same moment are not all sent to one donor, which serves one
    /// snapshot at a time.
    pub donating: BTreeMap<u64, u64>,
    /// Consistency votes: open ballots and recent decisions.
    pub votes: ConsistencyVotes,
}

/// A member whose latest write-set is more than this many seqnos old serves no client
/// writes, as far as donor selection is concerned.
pub const CLIENT_WRITES_WINDOW: i64 = 1000;

impl GroupState {
    /// The state of a new cluster whose only member is `founder`.
    pub fn genesis(cluster: Uuid, first_seqno: Seqno, founder: MemberInfo) -> GroupState {
        let mut members = BTreeMap::new();
        let raft_id = founder.raft_id;
        members.insert(
            raft_id,
            MemberRecord {
                info: founder,
                state: NodeState::Synced,
            },
        );
        GroupState {
            cluster,
            last_seqno: first_seqno,
            view_id: 1,
            members,
            dedup: BTreeMap::new(),
            paused_by: BTreeSet::new(),
            committed: BTreeMap::new(),
            safe_seqno: Seqno::UNDEFINED,
            cached_from: BTreeMap::new(),
            state_requests: BTreeMap::new(),
            last_write: BTreeMap::new(),
            partial: BTreeMap::new(),
            donating: BTreeMap::new(),
            votes: ConsistencyVotes::default(),
        }
    }

    /// An empty state, before the first snapshot reaches a joining node.
    pub fn unknown() -> GroupState {
        GroupState {
            cluster: Uuid::NIL,
            last_seqno: Seqno::UNDEFINED,
            view_id: 0,
            members: BTreeMap::new(),
            dedup: BTreeMap::new(),
            paused_by: BTreeSet::new(),
            committed: BTreeMap::new(),
            safe_seqno: Seqno::UNDEFINED,
            cached_from: BTreeMap::new(),
            state_requests: BTreeMap::new(),
            last_write: BTreeMap::new(),
            partial: BTreeMap::new(),
            donating: BTreeMap::new(),
            votes: ConsistencyVotes::default(),
        }
    }

    /// Encodes the state for a Raft snapshot.
    pub fn encode(&self) -> Vec<u8> {
        bincode_encode(self)
    }

    /// Encodes the state for a Raft snapshot; an error if it exceeds what a message may
    /// carry.
    pub fn try_encode(&self) -> Result<Vec<u8>, WireError> {
        crate::wire::bincode_try_encode(self)
    }

    /// Decodes the state from a Raft snapshot.
    pub fn decode(bytes: &[u8]) -> Result<GroupState, WireError> {
        bincode_decode(bytes)
    }

    /// Checks a state decoded from the network for what no genuine one holds and what
    /// would break its arithmetic later: seqnos outside `[UNDEFINED, SEQNO_MAX]` or past the
    /// last one handed out, members filed under another id or sharing a UUID, delivery
    /// records at the end of the id range, reassemblies over the limits.
    pub fn check(&self) -> Result<(), String> {
        let seqno_ok = |s: &Seqno| (Seqno::UNDEFINED.0..=self.last_seqno.0).contains(&s.0);
        if !(Seqno::UNDEFINED.0..=SEQNO_MAX).contains(&self.last_seqno.0)
            || self.view_id > u64::MAX / 2
        {
            return Err(format!(
                "last seqno {:?}, view id {}",
                self.last_seqno, self.view_id
            ));
        }
        let seqnos_ok = seqno_ok(&self.safe_seqno)
            && self.committed.values().all(seqno_ok)
            && self.last_write.values().all(seqno_ok)
            && self
                .cached_from
                .values()
                .all(|s| (Seqno::UNDEFINED.0..=SEQNO_MAX).contains(&s.0));
        if !seqnos_ok {
            return Err("a seqno past the last one handed out".into());
        }
        let uuids: BTreeSet<Uuid> = self.members.values().map(|m| m.info.uuid).collect();
        let filed_right = self
            .members
            .iter()
            .all(|(id, m)| *id != 0 && *id == m.info.raft_id);
        if !filed_right || uuids.len() != self.members.len() {
            return Err("members filed under another id, or sharing a UUID".into());
        }
        self.check_votes(&seqno_ok)?;
        let at_end = |w: &DedupWindow| w.contiguous == u64::MAX || w.above.contains(&u64::MAX);
        if self.dedup.values().any(at_end) {
            return Err("a delivery record at the end of the id range".into());
        }
        self.check_partial(&uuids)
    }

    /// Ballots on seqnos handed out, among members, within the bounds the tally keeps.
    fn check_votes(&self, seqno_ok: &dyn Fn(&Seqno) -> bool) -> Result<(), String> {
        let votes = &self.votes;
        let ballots_ok = votes.open.len() <= vote::MAX_OPEN_BALLOTS
            && votes.decided.len() <= vote::DECIDED_REMEMBERED
            && votes.open.keys().chain(votes.decided.keys()).all(seqno_ok)
            && votes.open.values().all(|ballot| {
                ballot.voters.iter().all(|id| self.members.contains_key(id))
                    && ballot.votes.keys().all(|id| ballot.voters.contains(id))
            });
        if ballots_ok {
            Ok(())
        } else {
            Err("consistency ballots out of bounds or naming non-members".into())
        }
    }

    fn check_partial(&self, member_uuids: &BTreeSet<Uuid>) -> Result<(), String> {
        for ((origin, _), reassembly) in &self.partial {
            let count = reassembly.count;
            let parts_ok = reassembly.parts.len() < count as usize
                && reassembly.parts.keys().all(|index| *index < count)
                && reassembly
                    .parts
                    .values()
                    .all(|p| p.len() <= crate::CHUNK_BYTES);
            if !member_uuids.contains(origin) || !(2..=MAX_CHUNKS).contains(&count) || !parts_ok {
                return Err(format!("a reassembly of {origin:?} out of bounds"));
            }
            if self.reassemblies_of(*origin) > MAX_REASSEMBLIES_PER_ORIGIN {
                return Err(format!("too many reassemblies of {origin:?}"));
            }
        }
        Ok(())
    }

    /// Hands out the next seqno.
    pub fn next_seqno(&mut self) -> Seqno {
        self.last_seqno = self.last_seqno.next();
        self.last_seqno
    }

    /// Orders one submission: its seqno, or `None` for a duplicate or a write-set from a
    /// node that is no longer a member (its transaction was already failed on its origin).
    pub fn order_submission(&mut self, submission: &Submission) -> Option<Seqno> {
        if !self
            .members
            .values()
            .any(|m| m.info.uuid == submission.origin)
        {
            return None;
        }
        let window = self.dedup.entry(submission.origin).or_default();
        if !window.insert(submission.submit_id) {
            return None;
        }
        let seqno = self.next_seqno();
        self.last_write.insert(submission.origin, seqno);
        Some(seqno)
    }

    /// Whether `origin`'s submission `submit_id` (a chunk or a whole write-set) was ordered.
    pub fn was_ordered(&self, origin: Uuid, submit_id: u64) -> bool {
        self.dedup
            .get(&origin)
            .is_some_and(|window| window.contains(submit_id))
    }

    /// Orders one submission, whole or a chunk: the write-set with its seqno once it is
    /// complete; `None` for a chunk that leaves it incomplete, a duplicate, a malformed
    /// chunk, or a submission from a node that is no longer a member.
    pub fn accept_submission(&mut self, submission: Submission) -> Option<OrderedSubmission> {
        let (index, count) = submission.chunk;
        if count <= 1 {
            let seqno = self.order_submission(&submission)?;
            return Some(OrderedSubmission {
                seqno,
                submit_id: submission.submit_id,
                payload: submission.payload,
            });
        }
        let origin = submission.origin;
        let is_member = self.members.values().any(|m| m.info.uuid == origin);
        let write_set_id = submission.write_set_id()?;
        if !is_member
            || index >= count
            || count > MAX_CHUNKS
            || submission.payload.len() > crate::CHUNK_BYTES
        {
            return None;
        }
        let key = (origin, write_set_id);
        if !self.partial.contains_key(&key)
            && self.reassemblies_of(origin) >= MAX_REASSEMBLIES_PER_ORIGIN
        {
            // Not marked ordered: the origin sends it again once one of its write-sets is
            // complete (every member decides alike, from the same ordered state).
            return None;
        }
        if !self
            .dedup
            .entry(origin)
            .or_default()
            .insert(submission.submit_id)
        {
            return None;
        }
        let reassembly = self.partial.entry(key).or_insert_with(|| Reassembly {
            count,
            parts: BTreeMap::new(),
        });
        if reassembly.count != count {
            // Chunks that disagree on the count: every member sees the same, so every
            // member drops this one alike.
            return None;
        }
        reassembly
            .parts
            .insert(index, serde_bytes::ByteBuf::from(submission.payload));
        if reassembly.parts.len() < count as usize {
            return None;
        }
        let parts = self.partial.remove(&key).expect("just completed").parts;
        let mut payload = Vec::with_capacity(parts.values().map(|p| p.len()).sum());
        for part in parts.into_values() {
            payload.extend_from_slice(&part);
        }
        let seqno = self.next_seqno();
        self.last_write.insert(origin, seqno);
        Some(OrderedSubmission {
            seqno,
            submit_id: key.1,
            payload,
        })
    }

    /// Write-sets of `origin` whose chunks are being reassembled.
    fn reassemblies_of(&self, origin: Uuid) -> usize {
        self.partial.range((origin, 0)..=(origin, u64::MAX)).count()
    }

    /// Applies a control action. Flow control from a member in DONOR/DESYNCED (or any state
    /// that must not pause the cluster) is ignored.
    pub fn apply_control(&mut self, control: &Control) {
        match *control {
            Control::FlowStop(raft_id) => {
                let may_pause = self
                    .members
                    .get(&raft_id)
                    .is_some_and(|m| m.state.may_send_flow_control());
                if may_pause {
                    self.paused_by.insert(raft_id);
                }
            }
            Control::FlowResume(raft_id) => {
                self.paused_by.remove(&raft_id);
            }
            Control::State(raft_id, state) => {
                if let Some(member) = self.members.get_mut(&raft_id) {
                    let before = member.state;
                    member.state = state;
                    if !state.may_send_flow_control() {
                        self.paused_by.remove(&raft_id);
                    }
                    self.end_donations(raft_id, before, state);
                }
            }
            // Ordered by the node itself: they lead to deliveries.
            Control::StateRequest(_) | Control::Vote(..) | Control::TransferFailed(..) => {}
            Control::Cached(raft_id, seqno) => {
                // The same bounds as [`GroupState::check`]: a value a snapshot could not
                // carry would keep every later joiner out.
                let in_range = (Seqno::UNDEFINED.0..=SEQNO_MAX).contains(&seqno.0);
                if self.members.contains_key(&raft_id) && in_range {
                    self.cached_from.insert(raft_id, seqno);
                }
            }
            Control::Committed(raft_id, seqno) => {
                if self.members.contains_key(&raft_id)
                    && (Seqno::UNDEFINED..=self.last_seqno).contains(&seqno)
                {
                    let entry = self.committed.entry(raft_id).or_insert(seqno);
                    *entry = (*entry).max(seqno);
                    self.update_safe_seqno();
                }
            }
        }
    }

    fn update_safe_seqno(&mut self) {
        if let Some(lowest) = self.committed.values().min() {
            self.safe_seqno = self.safe_seqno.max(*lowest);
        }
    }

    /// Adds a member (a view change).
    pub fn add_member(&mut self, info: MemberInfo) {
        let raft_id = info.raft_id;
        self.members.insert(
            raft_id,
            MemberRecord {
                info,
                state: NodeState::Primary,
            },
        );
    }

    /// The members by UUID: member UUIDs sort by the time they were made (see
    /// `Uuid::time_ordered`), so this is the order they started in, and the order in which
    /// MariaDB lists a view it restores from its own tables.
    pub fn members_by_uuid(&self) -> Vec<&MemberRecord> {
        let mut members: Vec<&MemberRecord> = self.members.values().collect();
        members.sort_by_key(|m| m.info.uuid);
        members
    }

    /// Counts a member's ordered vote (see `crate::vote`). A ballot it opens is put to the
    /// members that hold data now: SYNCED, JOINED or DONOR.
    pub fn cast_vote(
        &mut self,
        member: u64,
        seqno: Seqno,
        code: VoteCode,
    ) -> Result<Vec<VoteEvent>, VoteRefusal> {
        if !self.members.contains_key(&member) {
            return Err(VoteRefusal::NotAVoter(seqno));
        }
        let holders = self
            .members
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.state,
                    NodeState::Synced | NodeState::Joined | NodeState::Donor
                )
            })
            .map(|(id, _)| *id)
            .collect();
        self.votes
            .cast(seqno, member, code, holders, self.last_seqno)
    }

    /// Removes a member (a view change): its flow-control stop and delivery record go too,
    /// and it leaves the open ballots, which may decide them.
    #[must_use]
    pub fn remove_member(&mut self, raft_id: u64) -> Vec<VoteDecision> {
        if let Some(record) = self.members.remove(&raft_id) {
            let uuid = record.info.uuid;
            self.dedup.remove(&uuid);
            self.last_write.remove(&uuid);
            // Its unfinished write-sets will never be completed.
            self.partial.retain(|(origin, _), _| *origin != uuid);
        }
        self.paused_by.remove(&raft_id);
        self.committed.remove(&raft_id);
        self.cached_from.remove(&raft_id);
        self.state_requests.remove(&raft_id);
        self.donating
            .retain(|donor, joiner| *donor != raft_id && *joiner != raft_id);
        self.update_safe_seqno();
        self.votes.forget_voter(raft_id)
    }

    /// True while any member's flow-control stop is in force.
    pub fn is_paused(&self) -> bool {
        !self.paused_by.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(raft_id: u64) -> MemberInfo {
        MemberInfo {
            incoming: String::new(),
            raft_id,
            uuid: Uuid([raft_id as u8; 16]),
            name: format!("n{raft_id}"),
            address: format!("a{raft_id}"),
        }
    }

    #[test]
    fn dedup_window_accepts_each_id_once_in_any_order() {
        let mut window = DedupWindow::default();
        assert!(window.insert(2));
        assert!(window.insert(1));
        assert_eq!(window.contiguous, 2);
        assert!(!window.insert(1));
        assert!(!window.insert(2));
        assert!(window.insert(4));
        assert!(!window.insert(4));
        assert!(window.contains(4) && !window.contains(3));
        assert!(window.insert(3));
        assert_eq!((window.contiguous, window.above.len()), (4, 0));
    }

    #[test]
    fn seqnos_are_consecutive_and_duplicates_take_none() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        let submission = |id| Submission::whole(Uuid([1; 16]), id, vec![]);
        assert_eq!(state.order_submission(&submission(1)), Some(Seqno(2)));
        assert_eq!(state.order_submission(&submission(1)), None);
        assert_eq!(state.order_submission(&submission(2)), Some(Seqno(3)));
        let stranger = Submission::whole(Uuid([8; 16]), 1, vec![]);
        assert_eq!(state.order_submission(&stranger), None);
        assert_eq!(state.last_seqno, Seqno(3));
    }

    #[test]
    fn chunks_take_one_seqno_when_the_last_arrives_in_any_order() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        state.add_member(info(2));
        let chunk = |origin: u8, id: u64, index: u32, byte: u8| Submission {
            origin: Uuid([origin; 16]),
            submit_id: id,
            payload: vec![byte; 3],
            chunk: (index, 3),
        };
        // Write-set 12 of member 1 in chunks 10, 11, 12; the middle one comes last (it was
        // resent), with a whole write-set of member 2 and a duplicate in between.
        assert_eq!(state.accept_submission(chunk(1, 10, 0, b'a')), None);
        assert_eq!(state.accept_submission(chunk(1, 12, 2, b'c')), None);
        let other = state.accept_submission(Submission::whole(Uuid([2; 16]), 1, vec![7]));
        assert_eq!(other.map(|o| o.seqno), Some(Seqno(2)));
        assert_eq!(state.accept_submission(chunk(1, 10, 0, b'a')), None);
        assert!(state.was_ordered(Uuid([1; 16]), 10));
        assert!(!state.was_ordered(Uuid([1; 16]), 11));
        assert_eq!(
            state.accept_submission(chunk(1, 11, 1, b'b')),
            Some(OrderedSubmission {
                seqno: Seqno(3),
                submit_id: 12,
                payload: b"aaabbbccc".to_vec(),
            })
        );
        assert!(state.partial.is_empty());
        // A malformed chunk takes nothing; an unfinished write-set goes with its member.
        let mut bad = chunk(1, 20, 3, b'x');
        assert_eq!(state.accept_submission(bad.clone()), None);
        bad.chunk = (0, 3);
        assert_eq!(state.accept_submission(bad), None);
        assert_eq!(state.partial.len(), 1);
        let _ = state.remove_member(1);
        assert!(state.partial.is_empty());
        assert_eq!(state.last_seqno, Seqno(3));
    }

    #[test]
    fn reassembly_is_bounded_per_origin_and_per_chunk() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        let origin = Uuid([1; 16]);
        // The first chunk of write-set `n` (two chunks, ids 10n + 10 and 10n + 11).
        let first = |n: u64| Submission {
            origin,
            submit_id: 10 * n + 10,
            payload: vec![n as u8],
            chunk: (0, 2),
        };
        for n in 0..MAX_REASSEMBLIES_PER_ORIGIN as u64 {
            assert_eq!(state.accept_submission(first(n)), None);
        }
        let over = MAX_REASSEMBLIES_PER_ORIGIN as u64;
        assert_eq!(state.accept_submission(first(over)), None);
        assert!(
            !state.was_ordered(origin, 10 * over + 10),
            "a refused chunk is not marked ordered: its origin sends it again"
        );
        assert_eq!(state.partial.len(), MAX_REASSEMBLIES_PER_ORIGIN);
        // Another origin is not held back, and a finished write-set makes room.
        let other = Submission::whole(Uuid([2; 16]), 1, vec![]);
        state.add_member(info(2));
        assert!(state.accept_submission(other).is_some());
        let second = Submission {
            submit_id: 11,
            payload: vec![0],
            chunk: (1, 2),
            ..first(0)
        };
        assert!(state.accept_submission(second).is_some());
        assert_eq!(state.accept_submission(first(over)), None);
        assert!(state.was_ordered(origin, 10 * over + 10));
        // A chunk larger than a chunk is cut, or ids past the end of the range, take nothing.
        let mut fat = first(100);
        fat.payload = vec![0; crate::CHUNK_BYTES + 1];
        let mut last = first(101);
        last.submit_id = u64::MAX;
        for bad in [fat, last] {
            let id = bad.submit_id;
            assert_eq!(state.accept_submission(bad), None);
            assert!(!state.was_ordered(origin, id));
        }
        assert_eq!(state.check(), Ok(()));
    }

    #[test]
    fn a_state_from_the_network_that_would_overflow_later_is_refused() {
        let good = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        assert_eq!(good.check(), Ok(()));
        let mut bad = Vec::new();
        let mut state = good.clone();
        state.last_seqno = Seqno(i64::MAX);
        bad.push(state);
        let mut state = good.clone();
        state.committed.insert(1, Seqno(5));
        bad.push(state);
        let mut state = good.clone();
        state.view_id = u64::MAX;
        bad.push(state);
        let mut state = good.clone();
        state.members.insert(2, state.members[&1].clone());
        bad.push(state);
        let mut state = good.clone();
        state.dedup.insert(
            Uuid([1; 16]),
            DedupWindow {
                contiguous: u64::MAX,
                ..DedupWindow::default()
            },
        );
        bad.push(state);
        let mut state = good.clone();
        let parts = BTreeMap::from([(7, serde_bytes::ByteBuf::from(vec![1]))]);
        state
            .partial
            .insert((Uuid([1; 16]), 3), Reassembly { count: 2, parts });
        bad.push(state);
        for state in bad {
            assert!(state.check().is_err(), "{state:?}");
        }
        // A member cannot put a value in the state that its snapshot would fail on.
        let mut state = good;
        state.apply_control(&Control::Cached(1, Seqno(i64::MAX)));
        state.apply_control(&Control::Committed(1, Seqno(-7)));
        assert_eq!(state.check(), Ok(()));
        assert!(state.cached_from.is_empty() && state.committed.is_empty());
    }

    #[test]
    fn a_donor_never_pauses_the_group() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        state.add_member(info(2));
        state.apply_control(&Control::State(2, NodeState::Synced));
        state.apply_control(&Control::FlowStop(2));
        assert!(state.is_paused());
        state.apply_control(&Control::State(2, NodeState::Donor));
        assert!(!state.is_paused(), "going DONOR lifts the member's stop");
        state.apply_control(&Control::FlowStop(2));
        assert!(!state.is_paused(), "a donor's stop is ignored");
        state.apply_control(&Control::State(2, NodeState::Joined));
        state.apply_control(&Control::FlowStop(2));
        let _ = state.remove_member(2);
        assert!(!state.is_paused(), "a departed member's stop is lifted");
    }

    #[test]
    fn the_commit_cut_is_the_lowest_report_and_only_grows() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        state.add_member(info(2));
        state.last_seqno = Seqno(100);
        state.apply_control(&Control::Committed(1, Seqno(50)));
        assert_eq!(state.safe_seqno, Seqno(50));
        state.apply_control(&Control::Committed(2, Seqno(20)));
        assert_eq!(state.safe_seqno, Seqno(50), "the cut never goes back");
        state.apply_control(&Control::Committed(1, Seqno(90)));
        state.apply_control(&Control::Committed(2, Seqno(70)));
        assert_eq!(state.safe_seqno, Seqno(70));
        state.apply_control(&Control::Committed(2, Seqno(500)));
        assert_eq!(
            state.safe_seqno,
            Seqno(70),
            "a report beyond the ordered position is ignored"
        );
        let _ = state.remove_member(2);
        assert_eq!(state.safe_seqno, Seqno(90));
    }

    #[test]
    fn donor_selection_follows_the_list_and_the_trailing_comma() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        for id in 2..=4 {
            state.add_member(info(id));
        }
        state.apply_control(&Control::State(3, NodeState::Synced));
        let request = |names: &str| StateRequest {
            joiner: 4,
            request_id: 1,
            donor_names: names.into(),
            sst_request: vec![],
            ist_from: Seqno::UNDEFINED,
            ist_address: String::new(),
        };
        assert_eq!(state.select_donor(&request("n3")), Ok(3));
        assert_eq!(
            state.select_donor(&request("n2,n3")),
            Ok(3),
            "n2 is not synced yet"
        );
        assert_eq!(state.select_donor(&request("n2")), Err(NoDonor::NotYet));
        assert_eq!(
            state.select_donor(&request("n2,")),
            Ok(1),
            "trailing comma: anyone"
        );
        assert_eq!(state.select_donor(&request("")), Ok(1));
        assert_eq!(
            state.select_donor(&request("nobody")),
            Err(NoDonor::Unreachable)
        );
        assert_eq!(
            state.select_donor(&request("n4")),
            Err(NoDonor::Unreachable),
            "not itself"
        );
    }

    #[test]
    fn joiners_asking_together_get_a_snapshot_donor_each_or_wait_for_one() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        for id in 2..=4 {
            state.add_member(info(id));
        }
        state.apply_control(&Control::State(2, NodeState::Synced));
        let request = |joiner: u64, ist_from: i64| StateRequest {
            joiner,
            request_id: 1,
            donor_names: String::new(),
            sst_request: vec![],
            ist_from: Seqno(ist_from),
            ist_address: String::new(),
        };
        // Two snapshots at once: one donor each, before either donor reports DONOR.
        let first = state.assign_donor(&request(3, -1)).unwrap();
        let second = state.assign_donor(&request(4, -1)).unwrap();
        assert_ne!(first, second);
        assert_eq!(state.donating.len(), 2);
        // A third joiner waits for a free donor; IST from a reserved donor is still fine.
        state.add_member(info(5));
        assert_eq!(state.assign_donor(&request(5, -1)), Err(NoDonor::NotYet));
        state.apply_control(&Control::Cached(first, Seqno(10)));
        assert_eq!(state.assign_donor(&request(5, 20)), Ok(first));
        assert_eq!(state.donating.len(), 2, "an IST reserves nothing");
        // The donor's transfer ends (DONOR, then SYNCED): it is free again.
        state.apply_control(&Control::State(first, NodeState::Donor));
        assert_eq!(state.assign_donor(&request(5, -1)), Err(NoDonor::NotYet));
        state.apply_control(&Control::State(first, NodeState::Synced));
        assert_eq!(state.assign_donor(&request(5, -1)), Ok(first));
        // A joiner that has its state, or leaves, frees its donor too.
        state.apply_control(&Control::State(4, NodeState::Joined));
        let _ = state.remove_member(5);
        assert!(state.donating.is_empty(), "{:?}", state.donating);
    }

    #[test]
    fn donor_selection_prefers_a_member_whose_cache_holds_the_gap() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        for id in 2..=4 {
            state.add_member(info(id));
            state.apply_control(&Control::State(id, NodeState::Synced));
        }
        state.apply_control(&Control::Cached(1, Seqno(500)));
        state.apply_control(&Control::Cached(2, Seqno(90)));
        state.apply_control(&Control::Cached(3, Seqno(101)));
        let request = |names: &str, ist_from: i64| StateRequest {
            joiner: 4,
            request_id: 1,
            donor_names: names.into(),
            sst_request: vec![],
            ist_from: Seqno(ist_from),
            ist_address: String::new(),
        };
        assert_eq!(
            state.select_donor(&request("", 100)),
            Ok(2),
            "1 lacks the gap"
        );
        assert_eq!(
            state.select_donor(&request("n3,", 100)),
            Ok(3),
            "the listed donor first when it holds the gap (101 is the first seqno needed)"
        );
        assert_eq!(
            state.select_donor(&request("n1,", 99)),
            Ok(2),
            "a listed donor without the gap yields to any other that has it"
        );
        assert_eq!(
            state.select_donor(&request("n1", 99)),
            Ok(1),
            "without the trailing comma only n1 may serve: SST from it"
        );
        assert_eq!(
            state.select_donor(&request("", 10)),
            Ok(1),
            "nobody holds the gap: SST from the first synced member"
        );
        assert_eq!(state.select_donor(&request("", -1)), Ok(1), "no IST asked");
        let _ = state.remove_member(2);
        assert!(
            !state.cached_from.contains_key(&2),
            "a leaver's cache is forgotten"
        );
    }

    #[test]
    fn the_donor_is_a_member_without_client_writes_unless_one_is_named() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        for id in [2, 3] {
            state.add_member(info(id));
            state.members.get_mut(&id).unwrap().state = NodeState::Synced;
        }
        let write = |state: &mut GroupState, id: u8, n: u64| {
            state.order_submission(&Submission::whole(Uuid([id; 16]), n, vec![]))
        };
        for n in 1..=10 {
            write(&mut state, 1, n).unwrap();
            write(&mut state, 2, n).unwrap();
        }
        let request = |names: &str| StateRequest {
            joiner: 4,
            request_id: 1,
            donor_names: names.to_string(),
            sst_request: vec![],
            ist_from: Seqno::UNDEFINED,
            ist_address: String::new(),
        };
        assert_eq!(
            state.select_donor(&request("")),
            Ok(3),
            "n3 serves no writes"
        );
        assert_eq!(
            state.select_donor(&request("n1,")),
            Ok(1),
            "a named donor comes first"
        );
        for n in 11..=(10 + CLIENT_WRITES_WINDOW as u64) {
            write(&mut state, 3, n).unwrap();
        }
        assert_eq!(
            state.select_donor(&request("")),
            Ok(1),
            "n1 and n2 wrote nothing for a window's worth of seqnos; n3 now serves writes"
        );
        let _ = state.remove_member(3);
        assert!(
            !state.last_write.contains_key(&Uuid([3; 16])),
            "a leaver is forgotten"
        );
    }

    #[test]
    fn a_resent_state_request_is_served_once() {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        state.add_member(info(2));
        let request = |request_id| StateRequest {
            joiner: 2,
            request_id,
            donor_names: String::new(),
            sst_request: vec![],
            ist_from: Seqno::UNDEFINED,
            ist_address: String::new(),
        };
        assert!(state.record_state_request(&request(1)));
        assert!(!state.record_state_request(&request(1)), "a resend");
        assert!(state.record_state_request(&request(2)), "a new request");
        assert!(
            !state.record_state_request(&request(1)),
            "an old resend, late"
        );
        let _ = state.remove_member(2);
        assert!(
            state.record_state_request(&request(1)),
            "a new membership starts over"
        );
    }

    #[test]
    fn state_and_entries_round_trip() {
        let state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
        assert_eq!(GroupState::decode(&state.encode()), Ok(state));
        let entry = LogEntry::Control(Control::State(3, NodeState::Joined));
        assert_eq!(LogEntry::decode(&entry.encode()), Ok(entry));
        assert!(LogEntry::decode(&[0xff, 0xff, 0xff]).is_err());
    }

    mod fuzz {
        use super::*;
        use fuzzing::Damage;
        use proptest::prelude::*;
        use proptest::sample::Index;

        /// Cases per target: a case decodes a few hundred bytes and runs a few dozen
        /// operations, about ten microseconds, so this takes about a second.
        const FUZZ_CASES: u32 = 100_000;

        /// A state with something in every field: members in every node state, delivery
        /// records, a reassembly, reports, requests and a donation.
        fn rich_state() -> GroupState {
            let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(40), info(1));
            for id in 2..=4 {
                state.add_member(info(id));
            }
            state.apply_control(&Control::State(2, NodeState::Synced));
            state.apply_control(&Control::State(3, NodeState::Joiner));
            state.apply_control(&Control::FlowStop(2));
            state.apply_control(&Control::Committed(2, Seqno(30)));
            state.apply_control(&Control::Cached(2, Seqno(5)));
            for id in 1..5 {
                state.accept_submission(Submission::whole(Uuid([1; 16]), id, vec![id as u8]));
            }
            state.accept_submission(Submission::whole(Uuid([2; 16]), 7, vec![7]));
            state.accept_submission(Submission {
                origin: Uuid([2; 16]),
                submit_id: 9,
                payload: vec![1, 2, 3],
                chunk: (0, 3),
            });
            let request = StateRequest {
                joiner: 3,
                request_id: 1,
                donor_names: "n2,".into(),
                sst_request: b"rsync".to_vec(),
                ist_from: Seqno(3),
                ist_address: "n3:4568".into(),
            };
            state.record_state_request(&request);
            let _ = state.assign_donor(&request);
            state
        }

        /// Every operation the ordered log can apply, with extreme values; afterwards the
        /// state must still pass its own check (what a member applies, a joiner accepts).
        fn exercise(state: &mut GroupState) -> Result<(), TestCaseError> {
            let ids: Vec<u64> = state.members.keys().copied().collect();
            let uuids: Vec<Uuid> = state.members.values().map(|m| m.info.uuid).collect();
            let extremes = [
                Seqno(i64::MIN),
                Seqno::UNDEFINED,
                Seqno(i64::MAX),
                state.last_seqno,
            ];
            for (id, seqno) in ids.iter().flat_map(|id| extremes.map(|s| (*id, s))) {
                for control in [
                    Control::Committed(id, seqno),
                    Control::Cached(id, seqno),
                    Control::FlowStop(id),
                    Control::State(id, NodeState::Donor),
                ] {
                    state.apply_control(&control);
                }
                let request = StateRequest {
                    joiner: id,
                    request_id: u64::MAX,
                    donor_names: ",".into(),
                    sst_request: vec![],
                    ist_from: seqno,
                    ist_address: String::new(),
                };
                if state.record_state_request(&request) {
                    let _ = state.assign_donor(&request);
                }
            }
            for (uuid, id) in uuids
                .iter()
                .flat_map(|u| [0, 1, u64::MAX - 1, u64::MAX].map(|i| (*u, i)))
            {
                if state.last_seqno.0 + 2 >= SEQNO_MAX {
                    break;
                }
                state.accept_submission(Submission::whole(uuid, id, vec![1]));
                let chunk = (MAX_CHUNKS - 1, MAX_CHUNKS);
                state.accept_submission(Submission {
                    origin: uuid,
                    submit_id: id,
                    payload: vec![2],
                    chunk,
                });
            }
            prop_assert_eq!(state.check(), Ok(()));
            let decoded = GroupState::decode(&state.encode());
            prop_assert_eq!(decoded, Ok(state.clone()));
            for id in ids {
                let _ = state.remove_member(id);
            }
            prop_assert_eq!(state.check(), Ok(()));
            Ok(())
        }

        fn mutated(mut bytes: Vec<u8>, edits: &[Damage], cut: Option<Index>) -> Vec<u8> {
            fuzzing::apply(&mut bytes, edits);
            if let Some(at) = cut {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            bytes
        }

        proptest! {
            #![proptest_config(fuzzing::config(FUZZ_CASES))]

            /// Arbitrary bytes, and a real state with bytes overwritten (length prefixes
            /// among them) and cut: decoding never panics, and a state that passes its
            /// check survives every operation and still passes it.
            #[test]
            fn fuzz_group_state_decode(
                arbitrary in proptest::collection::vec(any::<u8>(), 0..300),
                real in any::<bool>(),
                edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
                cut in proptest::option::of(any::<Index>()),
            ) {
                let bytes = if real {
                    mutated(rich_state().encode(), &edits, cut)
                } else {
                    arbitrary
                };
                if let Ok(mut state) = GroupState::decode(&bytes) {
                    if state.check().is_ok() {
                        exercise(&mut state)?;
                    }
                }
            }

            /// Arbitrary and mangled log entries: decoding never panics, and applying what
            /// decodes keeps a good state good.
            #[test]
            fn fuzz_log_entry_decode(
                arbitrary in proptest::collection::vec(any::<u8>(), 0..200),
                sample in 0..3usize,
                edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
                cut in proptest::option::of(any::<Index>()),
            ) {
                let samples = [
                    LogEntry::Batch(vec![
                        Submission::whole(Uuid([1; 16]), 9, vec![1, 2]),
                        Submission { origin: Uuid([2; 16]), submit_id: 11, payload: vec![3], chunk: (2, 3) },
                    ]),
                    LogEntry::Control(Control::Committed(2, Seqno(35))),
                    LogEntry::Control(Control::StateRequest(StateRequest {
                        joiner: 4,
                        request_id: 2,
                        donor_names: String::new(),
                        sst_request: vec![1],
                        ist_from: Seqno(20),
                        ist_address: String::new(),
                    })),
                ];
                let bytes = if edits.is_empty() && cut.is_none() {
                    arbitrary
                } else {
                    mutated(samples[sample].encode(), &edits, cut)
                };
                let Ok(entry) = LogEntry::decode(&bytes) else {
                    return Ok(());
                };
                let mut state = rich_state();
                match entry {
                    LogEntry::Batch(submissions) => {
                        for submission in submissions {
                            state.accept_submission(submission);
                        }
                    }
                    LogEntry::Control(Control::StateRequest(request)) => {
                        if state.record_state_request(&request) {
                            let _ = state.assign_donor(&request);
                        }
                    }
                    LogEntry::Control(control) => state.apply_control(&control),
                }
                prop_assert_eq!(state.check(), Ok(()));
            }
        }
    }
}
