//! The member's own unit tests; the group's behaviour is tested in `tests/`.

use base::{seeded_rng, Uuid};
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, Entry, EntryType,
    Message, MessageType,
};

use super::admission::{JOINS_QUEUED_MAX, KNOWN_ADDRESSES_MAX, WELCOME_MEMBERS_MAX};
use super::controls::LastSent;
use super::membership::ConfOp;
use super::*;
use crate::check;
use crate::state::Contact;
use crate::wire::{self, WireMessage};

#[test]
fn a_changed_control_goes_at_once_and_a_repeat_waits() {
    let mut flow = LastSent::default();
    assert!(flow.due(true, 10, 50), "the first stop goes");
    assert!(
        !flow.due(true, 11, 50),
        "the same stop is not repeated at once"
    );
    // The resume must not wait for the stop's resend timer: that wait paused the
    // whole group for half a second at a time under sysbench.
    assert!(flow.due(false, 12, 50), "a resume goes at once");
    assert!(!flow.due(false, 61, 50));
    assert!(
        flow.due(false, 62, 50),
        "a lost resume is repeated after the timer"
    );
}

fn founder() -> GroupNode {
    let contact = Contact::new("founder", "founder:4567");
    GroupNode::bootstrap(GroupConfig::default(), &contact, seeded_rng(5), Nanos(0))
}

fn joiner(raft_id: u64) -> MemberInfo {
    MemberInfo {
        raft_id,
        uuid: Uuid([(raft_id % 250) as u8 + 1; 16]),
        name: format!("joiner{raft_id}"),
        address: format!("joiner{raft_id}:4567"),
        incoming: String::new(),
    }
}

fn conf_entry(index: u64, change_type: ConfChangeType, node_id: u64, context: Vec<u8>) -> Entry {
    let mut single = ConfChangeSingle::default();
    single.set_change_type(change_type);
    single.node_id = node_id;
    let mut change = ConfChangeV2::default();
    change.mut_changes().push(single);
    let mut entry = Entry::default();
    entry.set_entry_type(EntryType::EntryConfChangeV2);
    entry.index = index;
    entry.term = 1;
    entry.data = change.write_to_bytes().unwrap().into();
    entry.context = context.into();
    entry
}

#[test]
fn ordered_entries_the_group_cannot_apply_are_skipped_without_a_panic() {
    let mut node = founder();
    let me = node.me.raft_id;
    let before = node.state.clone();
    let mut garbage = Entry::default();
    garbage.index = 2;
    garbage.data = vec![0xff; 12].into();
    let mut version_1 = Entry::default();
    version_1.set_entry_type(EntryType::EntryConfChange);
    version_1.index = 3;
    let mut unnamed = conf_entry(5, ConfChangeType::AddNode, 9, Vec::new());
    unnamed.context = b"not an identity".to_vec().into();
    let other = wire::bincode_encode(&joiner(10));
    node.apply_entries(vec![
        garbage,
        version_1,
        conf_entry(4, ConfChangeType::AddLearnerNode, 9, Vec::new()),
        unnamed,
        conf_entry(6, ConfChangeType::AddNode, 11, other),
        // raft-rs refuses to remove the last voter.
        conf_entry(7, ConfChangeType::RemoveNode, me, Vec::new()),
    ]);
    assert_eq!(node.state, before, "nothing was applied");
    assert_eq!(node.raw.raft.prs().conf().voters().ids().len(), 1);
    assert!(node.member && !node.closed);
}

/// A joint configuration that raft-rs did not leave by itself (its leader changed between
/// entering it and applying it): the leader leaves it, and a member's removal waits until
/// then, for raft-rs would turn it into an empty entry.
#[test]
fn a_leader_leaves_a_joint_configuration_no_one_is_leaving() {
    let mut node = founder();
    node.poll(Nanos(1));
    assert!(node.is_leader());
    let me = node.me.raft_id;
    let mut single = ConfChangeSingle::default();
    single.set_change_type(ConfChangeType::AddNode);
    single.node_id = me;
    let mut change = ConfChangeV2::default();
    change.set_transition(ConfChangeTransition::Implicit);
    change.mut_changes().push(single);
    let joint = node.raw.raft.apply_conf_change(&change).unwrap();
    assert_eq!(joint.voters_outgoing, [me]);
    node.raw.mut_store().set_conf_state(joint);
    node.roster.conf_queue.push_back(ConfOp::Remove(77));
    assert!(node.conf_change_in_flight());
    let tick = node.config.tick_interval_ns;
    for step in 2..20 {
        node.poll(Nanos(step * tick));
    }
    let conf = node.raw.store().conf_state();
    assert!(conf.voters_outgoing.is_empty(), "still joint: {conf:?}");
    assert_eq!(conf.voters, [me]);
    assert!(!node.conf_change_in_flight());
    assert!(node.is_leader() && node.member);
}

#[test]
fn joins_and_welcomes_from_the_network_grow_no_map_past_its_cap() {
    let mut leader = founder();
    leader.poll(Nanos(1));
    assert!(leader.is_leader());
    for raft_id in 100..400 {
        let bytes = wire::encode(raft_id, &WireMessage::Join(joiner(raft_id)));
        let result = leader.receive(Nanos(2), &bytes);
        if raft_id > 100 {
            assert!(
                matches!(result, Err(ReceiveError::JoinRefused { .. })),
                "{result:?}"
            );
        }
    }
    // Joiners that prove their address get in one at a time.
    for raft_id in [500, 501] {
        let info = joiner(raft_id);
        let proof = leader.admission.challenge_key.challenge(&info);
        let bytes = wire::encode(raft_id, &WireMessage::ProvedJoin(info, proof));
        let result = leader.receive(Nanos(3), &bytes);
        assert_eq!(result.is_ok(), raft_id == 500, "{result:?}");
    }
    let adds = leader
        .roster
        .conf_queue
        .iter()
        .filter(|op| matches!(op, ConfOp::Add(_)))
        .count();
    assert_eq!(adds, JOINS_QUEUED_MAX);
    assert!(leader.admission.known_addresses.len() <= KNOWN_ADDRESSES_MAX);

    let contact = Contact::new("new", "new:4567");
    let mut newcomer = GroupNode::join(
        GroupConfig::default(),
        &contact,
        vec![],
        seeded_rng(6),
        Nanos(0),
    );
    for sender in 1..1_000u64 {
        let members = vec![joiner(sender), joiner(sender + 5_000)];
        let bytes = wire::encode(sender, &WireMessage::Welcome(members));
        assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
    }
    assert_eq!(
        newcomer.admission.known_addresses.len(),
        KNOWN_ADDRESSES_MAX
    );
    let unlisted = wire::encode(7, &WireMessage::Welcome(vec![joiner(8)]));
    assert!(matches!(
        newcomer.receive(Nanos(1), &unlisted),
        Err(ReceiveError::BadWelcome { from: 7, .. })
    ));
    let crowd: Vec<MemberInfo> = (1..=WELCOME_MEMBERS_MAX as u64 + 1).map(joiner).collect();
    let crowded = wire::encode(1, &WireMessage::Welcome(crowd));
    assert!(matches!(
        newcomer.receive(Nanos(1), &crowded),
        Err(ReceiveError::BadWelcome { from: 1, .. })
    ));
}

#[test]
fn a_joiner_keeps_no_record_per_stranger_that_sends_it_raft_messages() {
    let contact = Contact::new("new", "new:4567");
    let mut newcomer = GroupNode::join(
        GroupConfig::default(),
        &contact,
        vec![],
        seeded_rng(6),
        Nanos(0),
    );
    let me = newcomer.me.raft_id;
    for from in 1..500u64 {
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgHeartbeat);
        message.from = from;
        message.to = me;
        message.term = 1;
        let bytes = wire::encode(from, &WireMessage::Raft(message));
        assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
        newcomer.poll(Nanos(1));
    }
    assert!(newcomer.roster.last_heard.is_empty());
    // The group's term is news to a node that is not a member yet, however high.
    let mut message = Message::default();
    message.set_msg_type(MessageType::MsgHeartbeat);
    (message.from, message.to, message.term) = (1, me, check::TERM_MAX);
    let bytes = wire::encode(1, &WireMessage::Raft(message));
    assert_eq!(newcomer.receive(Nanos(1), &bytes), Ok(()));
}
