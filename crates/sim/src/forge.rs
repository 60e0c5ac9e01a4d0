//! Forged messages: what anyone who reaches a group port could send, built from what an
//! eavesdropper knows (members' Raft ids, UUIDs, addresses and terms). The run mixes them
//! into the fault phase, and checks that every one a member must refuse is refused.
//!
//! Forgeries a member cannot tell from genuine messages (a well-formed message in a
//! member's name: the sender is not authenticated at the group layer) are left out, except
//! joins and welcomes, which are checked by their effect: the safety and liveness checks.

use base::{SeededRng, Uuid};
use group::wire::{self, WireMessage};
use group::{Control, MemberInfo, Submission};
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType,
};
use rand::seq::SliceRandom;
use rand::Rng;

/// How far ahead of its target's term a forged Raft message claims to be: enough to stay
/// ahead of the elections while it travels, well within what a member accepts, so that
/// it is refused for what it carries, not for its term.
const TERM_AHEAD: u64 = 1_000;

/// A log index no member of a simulated run reaches.
const FAR_INDEX: u64 = 1 << 40;

/// What the forger knows of a running node.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its slot.
    pub slot: usize,
    /// Its Raft id.
    pub raft_id: u64,
    /// Its UUID.
    pub uuid: Uuid,
    /// Its Raft term.
    pub term: u64,
    /// Where it listens.
    pub address: String,
}

/// A forged message, ready to deliver.
#[derive(Clone, Debug)]
pub struct Forged {
    /// The slot it goes to.
    pub to: usize,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// True if the receiver must refuse it.
    pub must_refuse: bool,
    /// What it is, for a failure message.
    pub what: &'static str,
}

/// One forged message against `targets` (two at least), or `None` with fewer.
pub fn forge(rng: &mut SeededRng, targets: &[Target]) -> Option<Forged> {
    let mut shuffled: Vec<&Target> = targets.iter().collect();
    shuffled.shuffle(rng);
    let [to, claimed, ..] = shuffled[..] else {
        return None;
    };
    let refused = |what, bytes| (what, bytes, true);
    let (what, bytes, must_refuse) = match rng.gen_range(0..10) {
        0 => refused(
            "heartbeat committing past the log",
            huge_commit(to, claimed),
        ),
        1 => refused(
            "Raft message only a local node makes",
            local_only(rng, to, claimed),
        ),
        2 => refused("snapshot that does not decode", bad_snapshot(to, claimed)),
        3 => refused("append adding a learner", learner_append(to, claimed)),
        4 => refused("message in the receiver's own name", own_name(to)),
        5 => refused(
            "flow-control stop for another member",
            foreign_stop(claimed, to),
        ),
        6 => refused("write-set from a non-member", stranger_forward(rng)),
        7 => refused(
            "write-set in another member's name",
            foreign_forward(claimed, to),
        ),
        // A follower relays it (and says so); the leader refuses it, and would send the
        // challenge to the member's address, so it never gets in.
        8 => (
            "join from a member's address",
            address_join(rng, claimed),
            false,
        ),
        // Taken by a node that is joining: the next genuine welcome repairs it.
        _ => (
            "welcome naming a member elsewhere",
            poisoned_welcome(rng, claimed),
            false,
        ),
    };
    Some(Forged {
        to: to.slot,
        bytes,
        must_refuse,
        what,
    })
}

fn raft(msg_type: MessageType, to: &Target, claimed: &Target) -> Message {
    let mut message = Message::default();
    message.set_msg_type(msg_type);
    message.from = claimed.raft_id;
    message.to = to.raft_id;
    message.term = to.term + TERM_AHEAD;
    message
}

fn encode(message: Message) -> Vec<u8> {
    wire::encode(message.from, &WireMessage::Raft(message))
}

fn huge_commit(to: &Target, claimed: &Target) -> Vec<u8> {
    let mut message = raft(MessageType::MsgHeartbeat, to, claimed);
    message.commit = u64::MAX;
    encode(message)
}

fn local_only(rng: &mut SeededRng, to: &Target, claimed: &Target) -> Vec<u8> {
    let kinds = [
        MessageType::MsgHup,
        MessageType::MsgBeat,
        MessageType::MsgCheckQuorum,
        MessageType::MsgSnapStatus,
        MessageType::MsgUnreachable,
        MessageType::MsgPropose,
        MessageType::MsgTransferLeader,
    ];
    let kind = *kinds.choose(rng).expect("not empty");
    encode(raft(kind, to, claimed))
}

fn bad_snapshot(to: &Target, claimed: &Target) -> Vec<u8> {
    let mut message = raft(MessageType::MsgSnapshot, to, claimed);
    let term = message.term;
    let snapshot = message.mut_snapshot();
    snapshot.mut_metadata().index = FAR_INDEX;
    snapshot.mut_metadata().term = term;
    snapshot.mut_metadata().mut_conf_state().voters = vec![to.raft_id, claimed.raft_id];
    snapshot.data = b"not a group state".to_vec().into();
    encode(message)
}

fn learner_append(to: &Target, claimed: &Target) -> Vec<u8> {
    let mut message = raft(MessageType::MsgAppend, to, claimed);
    (message.index, message.log_term) = (FAR_INDEX, message.term);
    let mut single = ConfChangeSingle::default();
    single.set_change_type(ConfChangeType::AddLearnerNode);
    single.node_id = claimed.raft_id;
    let mut change = ConfChangeV2::default();
    change.mut_changes().push(single);
    let mut entry = Entry::default();
    entry.set_entry_type(EntryType::EntryConfChangeV2);
    (entry.index, entry.term) = (FAR_INDEX + 1, message.term);
    entry.data = change.write_to_bytes().expect("encodes").into();
    message.mut_entries().push(entry);
    encode(message)
}

fn own_name(to: &Target) -> Vec<u8> {
    wire::encode(to.raft_id, &WireMessage::Leave)
}

fn foreign_stop(claimed: &Target, victim: &Target) -> Vec<u8> {
    let stop = Control::FlowStop(victim.raft_id);
    wire::encode(claimed.raft_id, &WireMessage::Control(stop))
}

fn stranger_forward(rng: &mut SeededRng) -> Vec<u8> {
    let stranger: u64 = rng.gen();
    let origin = Uuid::random(rng);
    let write_set = Submission::whole(origin, 1, b"forged write-set".to_vec());
    wire::encode(stranger, &WireMessage::Forward(vec![write_set]))
}

fn foreign_forward(claimed: &Target, victim: &Target) -> Vec<u8> {
    let write_set = Submission::whole(victim.uuid, 1 << 30, b"forged write-set".to_vec());
    wire::encode(claimed.raft_id, &WireMessage::Forward(vec![write_set]))
}

fn stranger(rng: &mut SeededRng, address: &str) -> MemberInfo {
    MemberInfo {
        raft_id: rng.gen_range(1..u64::MAX),
        uuid: Uuid::random(rng),
        name: "forger".into(),
        address: address.into(),
        incoming: String::new(),
    }
}

fn address_join(rng: &mut SeededRng, victim: &Target) -> Vec<u8> {
    let forger = stranger(rng, &victim.address);
    wire::encode(forger.raft_id, &WireMessage::Join(forger))
}

fn poisoned_welcome(rng: &mut SeededRng, member: &Target) -> Vec<u8> {
    let forger = stranger(rng, "nowhere");
    let mut misplaced = stranger(rng, "nowhere");
    misplaced.raft_id = member.raft_id;
    let from = forger.raft_id;
    wire::encode(from, &WireMessage::Welcome(vec![forger, misplaced]))
}

/// A copy of a frame damaged in transit: one bit flipped, or cut short.
pub fn corrupt(rng: &mut SeededRng, bytes: &[u8]) -> Vec<u8> {
    let mut damaged = bytes.to_vec();
    if damaged.is_empty() {
        return damaged;
    }
    if rng.gen_bool(0.5) {
        let at = rng.gen_range(0..damaged.len());
        damaged[at] ^= 1 << rng.gen_range(0..8);
    } else {
        damaged.truncate(rng.gen_range(0..damaged.len()));
    }
    damaged
}
