//! The replicated group state: what every member computes identically from the ordered log.
//!
//! This is the only place where Raft log entries turn into seqnos. A Raft index is not a
//! seqno: one entry may carry a batch of many write-sets, control entries carry none, and
//! duplicates are dropped without a seqno. A Raft snapshot carries this state (the group's
//! metadata), never database state: database state moves by IST/SST.

use std::collections::{BTreeMap, BTreeSet};

use base::{NodeState, Seqno, Uuid};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::forced::ForcedFork;
use crate::vote::{self, ConsistencyVotes, VoteCode, VoteDecision, VoteEvent, VoteRefusal};
use crate::weights::DEFAULT_WEIGHT;
use crate::wire::{bincode_decode, bincode_encode, WireError};

mod donors;
mod payload_serde;
mod reassembly;

pub use donors::{NoDonor, StateRequest};
pub use reassembly::{ChunkRefused, Reassembly};

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
    /// The encoded write-set, or this chunk of it: often a view of a larger buffer (the
    /// origin's whole write-set, a received Raft entry) rather than a copy.
    #[serde(with = "payload_serde")]
    pub payload: Bytes,
    /// `(index, count)`: a large write-set travels and is ordered as `count` chunks with
    /// consecutive submit ids, and takes its seqno when the last of them is ordered; `(0,
    /// 1)` for a write-set in one piece.
    pub chunk: (u32, u32),
}

impl Submission {
    /// A write-set in one piece.
    pub fn whole(origin: Uuid, submit_id: u64, payload: impl Into<Bytes>) -> Submission {
        Submission {
            origin,
            submit_id,
            payload: payload.into(),
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
    /// The member's `pc.weight` (see `crate::weights`).
    Weight(u64, u8),
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

    /// Decodes an entry of the Raft log whose write-sets stay where they are: each
    /// submission's payload is a view of `data`, not a copy. Applying a large write-set's
    /// chunk then copies it once, into its place in the write-set, where decoding it into
    /// a buffer of its own and copying that again cost the kernel a fresh page for every
    /// 4 KiB of both.
    pub fn decode_shared(data: &Bytes) -> Result<LogEntry, WireError> {
        Ok(match bincode_decode::<LogEntryShape<'_>>(data)? {
            LogEntryShape::Batch(shapes) => LogEntry::Batch(
                shapes
                    .into_iter()
                    .map(|shape| Submission {
                        origin: shape.origin,
                        submit_id: shape.submit_id,
                        payload: data.slice_ref(shape.payload),
                        chunk: shape.chunk,
                    })
                    .collect(),
            ),
            LogEntryShape::Control(control) => LogEntry::Control(control),
        })
    }

    /// Whether `bytes` decode as an entry (as [`LogEntry::decode`] would), without copying
    /// the write-sets they carry: a follower checks every entry as it arrives, before it
    /// applies it.
    pub fn decodes(bytes: &[u8]) -> bool {
        bincode_decode::<LogEntryShape<'_>>(bytes).is_ok()
    }
}

/// [`LogEntry`]'s encoding, read with the write-sets borrowed (see
/// [`LogEntry::decode_shared`]). Its variants and fields mirror `LogEntry`'s and
/// `Submission`'s one for one, in order: bincode reads by position.
#[derive(Deserialize)]
enum LogEntryShape<'a> {
    Batch(#[serde(borrow)] Vec<SubmissionShape<'a>>),
    Control(Control),
}

/// [`Submission`]'s encoding, its payload borrowed.
#[derive(Deserialize)]
struct SubmissionShape<'a> {
    origin: Uuid,
    submit_id: u64,
    payload: &'a [u8],
    chunk: (u32, u32),
}

/// A member as the replicated state knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// Identity.
    pub info: MemberInfo,
    /// Last node state the member announced.
    pub state: NodeState,
    /// Its `pc.weight`, as last ordered (see `crate::weights`).
    pub weight: u8,
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
    /// The forced bootstrap this component was founded by, if it was (see `forced`).
    pub forced: Option<ForcedFork>,
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
                weight: DEFAULT_WEIGHT,
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
            forced: None,
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
            forced: None,
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
            // Each chunk was checked as it was taken (`Reassembly::take`), in a snapshot too.
            let count = reassembly.count();
            let parts_ok = reassembly.received() < count as usize;
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
                // A view of a received entry is copied out (once): kept as a view, it would
                // hold the whole entry for as long as the write-set lives.
                payload: Vec::from(submission.payload),
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
        let reassembly = self
            .partial
            .entry(key)
            .or_insert_with(|| Reassembly::new(count));
        if reassembly.count() != count {
            // Chunks that disagree on the count: every member sees the same, so every
            // member drops this one alike.
            return None;
        }
        if let Err(refused) = reassembly.take(index, &submission.payload) {
            // Checked on receipt (`check_submission`): only a member that slipped one past
            // gets here, and every member drops it alike.
            tracing::warn!(%refused, ?origin, "a chunk of a large write-set dropped");
            return None;
        }
        if !reassembly.is_complete() {
            return None;
        }
        let payload = self
            .partial
            .remove(&key)
            .expect("just completed")
            .into_write_set();
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
                    base::mark!("group.flow_control_paused_the_group");
                    self.paused_by.insert(raft_id);
                } else {
                    base::mark!("group.flow_stop_of_a_member_not_synced_ignored");
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
            Control::Weight(raft_id, weight) => {
                if let Some(member) = self.members.get_mut(&raft_id) {
                    member.weight = weight;
                }
            }
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
                weight: DEFAULT_WEIGHT,
            },
        );
    }

    /// Each member's weight, by Raft id.
    pub fn weights(&self) -> BTreeMap<u64, u8> {
        self.members
            .iter()
            .map(|(id, member)| (*id, member.weight))
            .collect()
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
mod tests;
