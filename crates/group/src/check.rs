//! Checks of Raft messages from the network, made before raft-rs sees them.
//!
//! raft-rs trusts its peers. A heartbeat whose commit index is past the receiver's log, an
//! append whose entries skip indexes, a snapshot whose configuration raft-rs cannot restore,
//! a vote request without a term, or a message type only a local node generates ends in a
//! `fatal!` (a panic) inside `RawNode::step` or later, when the entry is applied. Every such
//! message is refused here with a [`RaftRefusal`], so that no byte sequence from the network
//! stops a member. Each rule names the raft-rs 0.7 path it keeps messages away from.
//!
//! These checks cannot tell a forged message from a genuine one that is well formed: an
//! envelope's sender id is not authenticated at this layer.

use std::collections::BTreeSet;

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState, Entry,
    EntryType, Message, MessageType, Snapshot,
};
use raft::{Raft, StateRole};

use crate::log::OrderLog;
use crate::state::{GroupState, LogEntry, MemberInfo};
use crate::wire;

/// The highest term accepted. raft-rs computes `term + 1` when it campaigns, which overflows
/// for a term near `u64::MAX`; no real group holds 2^62 elections.
pub const TERM_MAX: u64 = 1 << 62;

/// The highest log index an append may reach: raft-rs computes `index + 1` all over (the
/// offset after a snapshot, the next index to send), which overflows near `u64::MAX`.
pub const INDEX_MAX: u64 = 1 << 63;

/// The highest snapshot position accepted. A snapshot moves a member's log there at once,
/// and the group's with it once that member leads; below [`INDEX_MAX`] by 2^62 entries, it
/// leaves the group room to append forever, however high a forged one is.
pub const SNAPSHOT_INDEX_MAX: u64 = 1 << 62;

/// How far past its own term a member takes a message's term. Any message of a higher term
/// moves a member to it, so one forged with [`TERM_MAX`] would leave the group no term to
/// elect a leader in; in steps of this size a forger needs 2^42 messages to get there. With
/// pre-vote, the terms of members that can talk at all stay within a few of each other:
/// a million elections is days of nothing but elections. A node not yet a member takes any
/// term up to [`TERM_MAX`]: the group's term is news to it.
pub const TERM_JUMP_MAX: u64 = 1 << 20;

/// Bytes of a read-index context: a causal read's request id, a `u64`. Heartbeats echo the
/// context, so a longer one would only make a member send back what it was sent.
pub const READ_CONTEXT_BYTES: usize = 8;

/// Why a Raft message from the network was refused before raft-rs saw it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum RaftRefusal {
    /// A type only a local node generates (`MsgHup`, `MsgBeat`, `MsgUnreachable`,
    /// `MsgSnapStatus`, `MsgCheckQuorum`) or one Trireme never sends (`MsgPropose`,
    /// `MsgTransferLeader`: proposals travel as group messages, leadership is handed over
    /// only by the leader itself).
    #[error("{0:?} never comes from the network")]
    NotFromNetwork(MessageType),
    /// A term of 0 where raft-rs needs one (it takes such a message for a local one), a term
    /// where none belongs, or one too far ahead ([`TERM_MAX`], [`TERM_JUMP_MAX`]).
    #[error("term {term} does not belong in {msg_type:?}")]
    BadTerm {
        /// The message type.
        msg_type: MessageType,
        /// The term it carried.
        term: u64,
    },
    /// A heartbeat that would commit past the end of this member's log (raft-rs:
    /// `to_commit is out of range`).
    #[error("commit index {commit} is past the last log index {last_index}")]
    CommitPastLog {
        /// The commit index carried.
        commit: u64,
        /// This member's last log index.
        last_index: u64,
    },
    /// A response to the leader naming an index its log does not have.
    #[error("index {index} is past the leader's last log index {last_index}")]
    IndexPastLog {
        /// The index carried.
        index: u64,
        /// The leader's last log index.
        last_index: u64,
    },
    /// An append whose entries do not follow its anchor: indexes that skip or repeat,
    /// terms that go down or pass the message's term (raft-rs slices its log with them).
    #[error("malformed append: {0}")]
    BadAppend(String),
    /// An append that would replace an entry this member has committed (raft-rs: `entry
    /// conflict with committed entry`).
    #[error("entry {index} of term {term} conflicts with the committed entry of term {committed}")]
    ConflictsWithCommitted {
        /// The entry's index.
        index: u64,
        /// The entry's term.
        term: u64,
        /// The term of the committed entry at that index.
        committed: u64,
    },
    /// An entry whose content Trireme would not apply: data that does not decode, a version
    /// 1 conf change, or a conf change Trireme never proposes (joint changes).
    #[error("entry {index}: {reason}")]
    BadEntry {
        /// The entry's index.
        index: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A snapshot whose metadata is inconsistent or whose group state does not decode.
    #[error("bad snapshot: {0}")]
    BadSnapshot(String),
    /// A read-index message or heartbeat whose context is not one read request.
    #[error("{0:?} does not carry one read context of {READ_CONTEXT_BYTES} bytes")]
    BadReadContext(MessageType),
    /// A message only the current leader sends, from another member in this term.
    #[error("{0:?} from a member that is not the leader of this term")]
    NotFromLeader(MessageType),
    /// A message only a leader sends, from an earlier term: an old leader's late answer
    /// that crossed a leader change, which is routine.
    #[error("{msg_type:?} of term {term} arrived in term {current}")]
    FromEarlierTerm {
        /// The message's type.
        msg_type: MessageType,
        /// The term it was sent in.
        term: u64,
        /// This node's term.
        current: u64,
    },
    /// A response that asks the leader for a snapshot (Trireme never asks).
    #[error("response requests a snapshot at {0}")]
    RequestsSnapshot(u64),
}

/// Checks a Raft message from the network against this node's Raft state (`member`: whether
/// it is a member yet); `Ok` means raft-rs may step it.
pub(crate) fn check_message(
    m: &Message,
    raft: &Raft<OrderLog>,
    member: bool,
) -> Result<(), RaftRefusal> {
    let term_max = match member {
        true => raft.term.saturating_add(TERM_JUMP_MAX).min(TERM_MAX),
        false => TERM_MAX,
    };
    check_type_and_term(m, term_max)?;
    match m.get_msg_type() {
        MessageType::MsgAppend => check_append(m, raft),
        MessageType::MsgHeartbeat => check_heartbeat(m, raft),
        MessageType::MsgSnapshot => check_snapshot(m.get_snapshot(), m.term),
        MessageType::MsgAppendResponse | MessageType::MsgHeartbeatResponse => {
            check_response(m, raft)
        }
        MessageType::MsgReadIndex => check_read_context(m),
        MessageType::MsgReadIndexResp => {
            check_read_context(m)?;
            check_from_leader(m, raft)
        }
        MessageType::MsgTimeoutNow => check_from_leader(m, raft),
        // Votes and their answers: raft-rs compares their indexes and terms, and commits by
        // a vote only an entry whose term it holds.
        _ => Ok(()),
    }
}

fn check_type_and_term(m: &Message, term_max: u64) -> Result<(), RaftRefusal> {
    let msg_type = m.get_msg_type();
    let from_network = matches!(
        msg_type,
        MessageType::MsgAppend
            | MessageType::MsgAppendResponse
            | MessageType::MsgRequestVote
            | MessageType::MsgRequestVoteResponse
            | MessageType::MsgRequestPreVote
            | MessageType::MsgRequestPreVoteResponse
            | MessageType::MsgSnapshot
            | MessageType::MsgHeartbeat
            | MessageType::MsgHeartbeatResponse
            | MessageType::MsgTimeoutNow
            | MessageType::MsgReadIndex
            | MessageType::MsgReadIndexResp
    );
    if !from_network {
        return Err(RaftRefusal::NotFromNetwork(msg_type));
    }
    // raft-rs sends a read index without a term and everything else with one; a message
    // with term 0 skips its term checks, and a follower that forwards a read index with a
    // term panics (`term should not be set`).
    let term_ok = if msg_type == MessageType::MsgReadIndex {
        m.term == 0
    } else {
        (1..=term_max).contains(&m.term)
    };
    if !term_ok {
        return Err(RaftRefusal::BadTerm {
            msg_type,
            term: m.term,
        });
    }
    Ok(())
}

fn check_heartbeat(m: &Message, raft: &Raft<OrderLog>) -> Result<(), RaftRefusal> {
    if m.context.len() > READ_CONTEXT_BYTES {
        return Err(RaftRefusal::BadReadContext(m.get_msg_type()));
    }
    // A heartbeat of a lower term is answered without being applied. Otherwise raft-rs
    // commits to its commit index; a genuine leader never sends one past what it knows
    // this member holds.
    let last_index = raft.raft_log.last_index();
    if m.term >= raft.term && m.commit > last_index {
        return Err(RaftRefusal::CommitPastLog {
            commit: m.commit,
            last_index,
        });
    }
    Ok(())
}

fn check_append(m: &Message, raft: &Raft<OrderLog>) -> Result<(), RaftRefusal> {
    check_entry_sequence(m)?;
    if m.term < raft.term {
        // Answered with this member's term and never appended.
        return Ok(());
    }
    let log = &raft.raft_log;
    // raft-rs reads the term of an index past its log as 0, so an anchor of term 0 there
    // "matches", and it then appends and commits past its own end.
    if m.log_term == 0 && m.index > log.last_index() {
        return Err(RaftRefusal::BadAppend(format!(
            "anchor of term 0 at index {} past the last index {}",
            m.index,
            log.last_index()
        )));
    }
    for entry in m.entries.iter().take_while(|e| e.index <= log.committed) {
        let committed = log.term(entry.index).unwrap_or(0);
        if committed != 0 && committed != entry.term {
            return Err(RaftRefusal::ConflictsWithCommitted {
                index: entry.index,
                term: entry.term,
                committed,
            });
        }
    }
    m.entries.iter().try_for_each(check_entry)
}

/// Entries must continue the anchor `(m.index, m.log_term)` one index at a time, with terms
/// that never go down and never pass the message's own term.
fn check_entry_sequence(m: &Message) -> Result<(), RaftRefusal> {
    if m.log_term > m.term {
        return Err(RaftRefusal::BadAppend(format!(
            "anchor term {} above the message term {}",
            m.log_term, m.term
        )));
    }
    let last = m.index.saturating_add(m.entries.len() as u64);
    if last > INDEX_MAX {
        return Err(RaftRefusal::BadAppend(format!(
            "index {last} past {INDEX_MAX}"
        )));
    }
    let mut previous_term = m.log_term.max(1);
    for (position, entry) in m.entries.iter().enumerate() {
        let expected = m.index + position as u64 + 1;
        if entry.index != expected {
            return Err(RaftRefusal::BadAppend(format!(
                "entry {} at position {position} after anchor {}",
                entry.index, m.index
            )));
        }
        if entry.term < previous_term || entry.term > m.term {
            return Err(RaftRefusal::BadAppend(format!(
                "entry {} of term {} outside [{previous_term}, {}]",
                entry.index, entry.term, m.term
            )));
        }
        previous_term = entry.term;
    }
    Ok(())
}

/// An entry Trireme can apply: empty, a [`LogEntry`], or a conf change it would propose.
fn check_entry(entry: &Entry) -> Result<(), RaftRefusal> {
    let reason = match entry.get_entry_type() {
        EntryType::EntryNormal if entry.data.is_empty() => return Ok(()),
        EntryType::EntryNormal if LogEntry::decodes(&entry.data) => return Ok(()),
        EntryType::EntryNormal => match LogEntry::decode(&entry.data) {
            // The reason, from the full decode (only for an entry that is refused).
            Ok(_) => "an entry that decodes only in full".into(),
            Err(error) => error.to_string(),
        },
        EntryType::EntryConfChangeV2 => match decode_conf_change(entry) {
            Ok(_) => return Ok(()),
            Err(reason) => reason,
        },
        EntryType::EntryConfChange => "a version 1 conf change (Trireme proposes version 2)".into(),
    };
    Err(RaftRefusal::BadEntry {
        index: entry.index,
        reason,
    })
}

/// A membership change as Trireme proposes it: one node added (a new member, as a voter or
/// a learner, with its identity), or removed; the roles of members moved together by their
/// weights, through a joint configuration (see `crate::weights`); or the end of that joint
/// configuration, which raft-rs proposes by itself.
#[derive(Debug)]
pub(crate) enum MemberChange {
    /// A node made a voter or a learner, and who it is.
    Add(MemberInfo),
    /// The Raft id of a member to remove.
    Remove(u64),
    /// Members made voters or learners at once (Raft ids), entering a joint configuration
    /// that raft-rs leaves automatically.
    Roles(Vec<u64>),
    /// The automatic end of a joint configuration.
    LeaveJoint,
}

/// Decodes a conf change entry into what raft-rs applies and what Trireme does with it; an
/// error for anything Trireme never proposes.
pub(crate) fn decode_conf_change(entry: &Entry) -> Result<(ConfChangeV2, MemberChange), String> {
    let mut change = ConfChangeV2::default();
    change
        .merge_from_bytes(&entry.data)
        .map_err(|e| format!("conf change does not decode: {e}"))?;
    // A member added or removed is one plain change; roles that the weights move go through
    // a joint configuration, entered with the implicit transition and left automatically by
    // an empty change. The explicit transition would leave the joint configuration to
    // Trireme, which never proposes that.
    let member_change = match (change.get_transition(), change.get_changes()) {
        (ConfChangeTransition::Auto, []) => MemberChange::LeaveJoint,
        (ConfChangeTransition::Auto, [single]) => decode_single_change(single, &entry.context)?,
        (ConfChangeTransition::Implicit, roles @ [_, ..]) => {
            MemberChange::Roles(decode_role_changes(roles, &entry.context)?)
        }
        (transition, changes) => {
            return Err(format!(
                "a conf change Trireme never proposes: {} changes, {transition:?} transition",
                changes.len()
            ))
        }
    };
    Ok((change, member_change))
}

/// One node added with its identity, or removed.
fn decode_single_change(single: &ConfChangeSingle, context: &[u8]) -> Result<MemberChange, String> {
    if single.node_id == 0 {
        return Err("a conf change of node 0".into());
    }
    match single.get_change_type() {
        ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => {
            let info: MemberInfo = wire::bincode_decode(context)
                .map_err(|e| format!("an added node without its identity: {e}"))?;
            if info.raft_id != single.node_id {
                return Err(format!(
                    "node {} added with the identity of {}",
                    single.node_id, info.raft_id
                ));
            }
            Ok(MemberChange::Add(info))
        }
        ConfChangeType::RemoveNode => Ok(MemberChange::Remove(single.node_id)),
    }
}

/// Distinct nodes made voters or learners, with no identity (they are members already: the
/// member applying it checks that): the Raft ids.
fn decode_role_changes(roles: &[ConfChangeSingle], context: &[u8]) -> Result<Vec<u64>, String> {
    if !context.is_empty() {
        return Err("a change of roles with a context".into());
    }
    let mut ids = BTreeSet::new();
    for single in roles {
        if single.get_change_type() == ConfChangeType::RemoveNode {
            return Err(format!(
                "a change of roles that removes node {}",
                single.node_id
            ));
        }
        if single.node_id == 0 {
            return Err("a change of roles of node 0".into());
        }
        if !ids.insert(single.node_id) {
            return Err(format!(
                "a change of roles naming node {} twice",
                single.node_id
            ));
        }
    }
    Ok(ids.into_iter().collect())
}

/// A snapshot raft-rs can restore and Trireme can install: a position in
/// `[1, SNAPSHOT_INDEX_MAX]` of a term no newer than the message's, a configuration raft-rs
/// restores exactly (it panics on one it cannot, see [`conf_state_restores`]), and a
/// consistent group state listing exactly its nodes.
pub(crate) fn check_snapshot(snapshot: &Snapshot, message_term: u64) -> Result<(), RaftRefusal> {
    let bad = |reason: String| Err(RaftRefusal::BadSnapshot(reason));
    let metadata = snapshot.get_metadata();
    let index_ok = (1..=SNAPSHOT_INDEX_MAX).contains(&metadata.index);
    if !index_ok || metadata.term == 0 || metadata.term > message_term {
        return bad(format!(
            "position (index {}, term {}) in a message of term {message_term}",
            metadata.index, metadata.term
        ));
    }
    let conf = metadata.get_conf_state();
    if let Err(reason) = conf_state_restores(conf) {
        return bad(format!("configuration {conf:?}: {reason}"));
    }
    let nodes: BTreeSet<u64> = conf
        .voters
        .iter()
        .chain(&conf.learners)
        .chain(&conf.voters_outgoing)
        .copied()
        .collect();
    let state = match GroupState::decode(snapshot.get_data()) {
        Ok(state) => state,
        Err(error) => return bad(format!("group state: {error}")),
    };
    if let Err(reason) = state.check() {
        return bad(format!("group state: {reason}"));
    }
    if !state.members.keys().copied().eq(nodes.iter().copied()) {
        return bad(format!(
            "members {:?} are not the nodes {nodes:?} of the configuration",
            state.members.keys().collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Whether raft-rs restores `conf` exactly: at least one voter, and every list of distinct
/// nodes other than 0. A learner is no voter, incoming or outgoing. A joint configuration
/// (outgoing voters) is one Trireme enters, left automatically; its learners to be
/// (`learners_next`) are outgoing voters only. A plain one has neither.
fn conf_state_restores(conf: &ConfState) -> Result<(), String> {
    let set = |ids: &[u64], what: &str| {
        let set: BTreeSet<u64> = ids.iter().copied().collect();
        if set.len() != ids.len() || set.contains(&0) {
            return Err(format!("{what} repeat a node or name node 0"));
        }
        Ok(set)
    };
    let voters = set(&conf.voters, "voters")?;
    let learners = set(&conf.learners, "learners")?;
    let outgoing = set(&conf.voters_outgoing, "outgoing voters")?;
    let learners_next = set(&conf.learners_next, "learners to be")?;
    if voters.is_empty() {
        return Err("no voter".into());
    }
    if !learners.is_disjoint(&voters) || !learners.is_disjoint(&outgoing) {
        return Err("a learner is also a voter".into());
    }
    if outgoing.is_empty() {
        if !learners_next.is_empty() || conf.auto_leave {
            return Err("a plain configuration with parts of a joint one".into());
        }
        return Ok(());
    }
    if !conf.auto_leave {
        return Err("a joint configuration not left automatically".into());
    }
    if !learners_next.is_subset(&outgoing)
        || !learners_next.is_disjoint(&voters)
        || !learners_next.is_disjoint(&learners)
    {
        return Err("a learner to be that is not only an outgoing voter".into());
    }
    Ok(())
}

fn check_response(m: &Message, raft: &Raft<OrderLog>) -> Result<(), RaftRefusal> {
    if m.get_msg_type() == MessageType::MsgHeartbeatResponse && m.context.len() > READ_CONTEXT_BYTES
    {
        return Err(RaftRefusal::BadReadContext(m.get_msg_type()));
    }
    if m.request_snapshot != 0 {
        return Err(RaftRefusal::RequestsSnapshot(m.request_snapshot));
    }
    // Only a leader of the same term acts on a response. A genuine one names indexes the
    // leader sent (or committed), never past its log: raft-rs would count such an index as
    // replicated, and computes `index + 1` with it.
    if raft.state != StateRole::Leader || m.term != raft.term {
        return Ok(());
    }
    let last_index = raft.raft_log.last_index();
    for index in [m.index, m.reject_hint, m.commit] {
        if index > last_index {
            return Err(RaftRefusal::IndexPastLog { index, last_index });
        }
    }
    Ok(())
}

fn check_read_context(m: &Message) -> Result<(), RaftRefusal> {
    // raft-rs indexes `entries[0]` of a read index without looking.
    match m.get_entries() {
        [entry] if entry.data.len() == READ_CONTEXT_BYTES => Ok(()),
        _ => Err(RaftRefusal::BadReadContext(m.get_msg_type())),
    }
}

fn check_from_leader(m: &Message, raft: &Raft<OrderLog>) -> Result<(), RaftRefusal> {
    if m.term < raft.term {
        Err(RaftRefusal::FromEarlierTerm {
            msg_type: m.get_msg_type(),
            term: m.term,
            current: raft.term,
        })
    } else if m.from == raft.leader_id && m.term == raft.term {
        Ok(())
    } else {
        Err(RaftRefusal::NotFromLeader(m.get_msg_type()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::Uuid;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use raft::storage::MemStorage;
    use raft::Config;

    /// Cases: a case decodes an entry of a few dozen bytes, a few microseconds.
    const FUZZ_CASES: u32 = 100_000;

    fn conf_entry(change_type: ConfChangeType, node_id: u64) -> Entry {
        let mut single = ConfChangeSingle::default();
        single.set_change_type(change_type);
        single.node_id = node_id;
        let mut change = ConfChangeV2::default();
        change.mut_changes().push(single);
        let mut entry = Entry::default();
        entry.set_entry_type(EntryType::EntryConfChangeV2);
        entry.index = 12;
        entry.term = 2;
        entry.data = change.write_to_bytes().unwrap().into();
        let info = MemberInfo {
            raft_id: node_id,
            uuid: Uuid([3; 16]),
            name: "n".into(),
            address: "n:4567".into(),
            incoming: String::new(),
        };
        if change_type != ConfChangeType::RemoveNode {
            entry.context = wire::bincode_encode(&info).into();
        }
        entry
    }

    #[test]
    fn only_the_changes_trireme_proposes_decode() {
        assert!(decode_conf_change(&conf_entry(ConfChangeType::AddNode, 5)).is_ok());
        assert!(decode_conf_change(&conf_entry(ConfChangeType::RemoveNode, 5)).is_ok());
        // A learner: a member the weights do not count (`crate::weights`).
        assert!(decode_conf_change(&conf_entry(ConfChangeType::AddLearnerNode, 5)).is_ok());
        let mut twin = conf_entry(ConfChangeType::AddNode, 5);
        twin.context = conf_entry(ConfChangeType::AddNode, 6).context;
        assert!(decode_conf_change(&twin).is_err());
    }

    fn roles_entry(transition: ConfChangeTransition, changes: &[(ConfChangeType, u64)]) -> Entry {
        let mut change = ConfChangeV2::default();
        change.set_transition(transition);
        for (change_type, node_id) in changes {
            let mut single = ConfChangeSingle::default();
            single.set_change_type(*change_type);
            single.node_id = *node_id;
            change.mut_changes().push(single);
        }
        let mut entry = conf_entry(ConfChangeType::RemoveNode, 5);
        entry.data = change.write_to_bytes().unwrap().into();
        entry
    }

    fn raft_of(conf: ConfState) -> raft::Result<Raft<MemStorage>> {
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        Raft::new(
            &Config::new(1),
            MemStorage::new_with_conf_state(conf),
            &logger,
        )
    }

    /// Roles go through a joint configuration: entered with the implicit transition, left by
    /// an empty change; anything else with several changes, or the explicit transition, is
    /// not Trireme's.
    #[test]
    fn a_change_of_roles_is_joint_and_left_automatically() {
        use ConfChangeTransition::{Auto, Explicit, Implicit};
        use ConfChangeType::{AddLearnerNode as Learner, AddNode as Voter, RemoveNode as Remove};
        let roles =
            |transition, changes: &[_]| decode_conf_change(&roles_entry(transition, changes));
        assert!(matches!(
            roles(Implicit, &[(Learner, 6), (Learner, 5)]),
            Ok((_, MemberChange::Roles(ids))) if ids == [5, 6]
        ));
        assert!(matches!(
            roles(Implicit, &[(Voter, 5)]),
            Ok((_, MemberChange::Roles(ids))) if ids == [5]
        ));
        assert!(matches!(
            roles(Auto, &[]),
            Ok((_, MemberChange::LeaveJoint))
        ));
        for refused in [
            roles(Explicit, &[(Voter, 5), (Learner, 6)]),
            roles(Auto, &[(Voter, 5), (Voter, 6)]),
            roles(Implicit, &[]),
            roles(Implicit, &[(Remove, 5), (Voter, 6)]),
            roles(Implicit, &[(Voter, 5), (Learner, 5)]),
            roles(Implicit, &[(Voter, 0)]),
        ] {
            assert!(refused.is_err(), "{refused:?}");
        }
        let mut with_context = roles_entry(Implicit, &[(Voter, 5)]);
        with_context.context = vec![1].into();
        assert!(decode_conf_change(&with_context).is_err());
    }

    /// Three voters to one in a single change: raft-rs enters the joint configuration, which
    /// a snapshot may carry, and the empty change leaves it with the two as learners.
    #[test]
    fn three_voters_become_one_through_a_joint_configuration_a_snapshot_can_carry() {
        use ConfChangeType::AddLearnerNode as Learner;
        let mut raft = raft_of(ConfState::from((vec![1, 2, 3], vec![]))).unwrap();
        let demote = roles_entry(
            ConfChangeTransition::Implicit,
            &[(Learner, 2), (Learner, 3)],
        );
        let (change, _) = decode_conf_change(&demote).unwrap();
        let mut joint = raft.apply_conf_change(&change).unwrap();
        joint.voters_outgoing.sort_unstable();
        joint.learners_next.sort_unstable();
        assert_eq!(joint.voters, [1]);
        assert_eq!(joint.voters_outgoing, [1, 2, 3]);
        assert_eq!(joint.learners_next, [2, 3]);
        assert!(joint.auto_leave);
        assert_eq!(conf_state_restores(&joint), Ok(()));
        assert!(raft_of(joint.clone()).is_ok());
        let (leave, _) = decode_conf_change(&roles_entry(ConfChangeTransition::Auto, &[])).unwrap();
        let mut plain = raft.apply_conf_change(&leave).unwrap();
        plain.learners.sort_unstable();
        assert_eq!(
            (plain.voters.as_slice(), plain.learners.as_slice()),
            ([1].as_slice(), [2, 3].as_slice())
        );
        assert_eq!(conf_state_restores(&plain), Ok(()));
        let mut stuck = joint;
        stuck.auto_leave = false;
        assert!(conf_state_restores(&stuck).is_err());
    }

    fn some_ids() -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(0u64..6, 0..4)
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Configurations of a few nodes, plain and joint, well formed or not: one the check
        /// lets through, raft-rs restores exactly (a mismatch would panic inside it).
        #[test]
        fn fuzz_conf_state_restores(
            voters in some_ids(),
            learners in some_ids(),
            voters_outgoing in some_ids(),
            learners_next in some_ids(),
            auto_leave in any::<bool>(),
        ) {
            let mut conf = ConfState::from((voters, learners));
            conf.voters_outgoing = voters_outgoing;
            conf.learners_next = learners_next;
            conf.auto_leave = auto_leave;
            if conf_state_restores(&conf).is_ok() {
                prop_assert!(raft_of(conf).is_ok());
            }
        }

        /// Arbitrary and mangled conf change entries: decoding never panics, and what
        /// decodes is a change Trireme proposes: one plain change, with the identity of the
        /// node it adds; distinct members' roles, entering a joint configuration; or its leave.
        #[test]
        fn fuzz_conf_change_decode(
            original in prop_oneof![
                Just(conf_entry(ConfChangeType::AddNode, 5)),
                Just(conf_entry(ConfChangeType::RemoveNode, 5)),
                Just(conf_entry(ConfChangeType::AddLearnerNode, 5)),
                Just(roles_entry(ConfChangeTransition::Implicit, &[
                    (ConfChangeType::AddLearnerNode, 5),
                    (ConfChangeType::AddNode, 6),
                ])),
                Just(roles_entry(ConfChangeTransition::Auto, &[])),
            ],
            in_data in any::<bool>(),
            edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
            cut in proptest::option::of(any::<Index>()),
        ) {
            let mut entry = original;
            let mut bytes = if in_data { entry.data.to_vec() } else { entry.context.to_vec() };
            fuzzing::apply(&mut bytes, &edits);
            if let Some(at) = cut {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            if in_data {
                entry.data = bytes.into();
            } else {
                entry.context = bytes.into();
            }
            let checked = check_entry(&entry);
            if let Ok((change, member_change)) = decode_conf_change(&entry) {
                prop_assert_eq!(checked, Ok(()));
                let changes = change.get_changes();
                let named: BTreeSet<u64> = changes.iter().map(|c| c.node_id).collect();
                let implicit = change.get_transition() == ConfChangeTransition::Implicit;
                match member_change {
                    MemberChange::Add(info) => {
                        prop_assert!(changes.len() == 1 && !implicit);
                        prop_assert_eq!(info.raft_id, changes[0].node_id);
                    }
                    MemberChange::Remove(id) => {
                        prop_assert!(changes.len() == 1 && !implicit);
                        prop_assert_eq!(id, changes[0].node_id);
                    }
                    MemberChange::Roles(ids) => {
                        prop_assert!(implicit && !ids.is_empty() && !named.contains(&0));
                        prop_assert!(ids.iter().copied().eq(named.iter().copied()));
                        prop_assert_eq!(ids.len(), changes.len());
                    }
                    MemberChange::LeaveJoint => prop_assert!(changes.is_empty() && !implicit),
                }
            } else {
                prop_assert!(checked.is_err());
            }
        }
    }
}
