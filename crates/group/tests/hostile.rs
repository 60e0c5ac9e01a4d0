//! What anyone who reaches the group port can send: forged joins, messages that claim
//! another sender, and Raft messages that would make raft-rs panic. Each is refused with a
//! specific error, nothing stops, and the group goes on ordering.

mod common;

use base::{Seqno, Uuid};
use common::{address, assert_same_history, Cluster};
use group::wire::{self, WireMessage};
use group::{Control, MemberInfo, RaftRefusal, ReceiveError, Submission};
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType,
    Snapshot,
};

fn leader(cluster: &mut Cluster) -> usize {
    (0..cluster.nodes.len())
        .find(|&i| cluster.nodes[i].as_ref().is_some_and(|n| n.is_leader()))
        .expect("a leader")
}

fn raft_id(cluster: &mut Cluster, index: usize) -> u64 {
    cluster.node(index).me().raft_id
}

fn raft_message(msg_type: MessageType, from: u64, to: u64, term: u64) -> Message {
    let mut message = Message::default();
    message.set_msg_type(msg_type);
    message.from = from;
    message.to = to;
    message.term = term;
    message
}

fn forged(message: Message) -> Vec<u8> {
    wire::encode(message.from, &WireMessage::Raft(message))
}

/// The refusal of a Raft message, or a test failure naming what happened instead.
fn refusal(result: Result<(), ReceiveError>) -> RaftRefusal {
    match result {
        Err(ReceiveError::RaftRefused { refusal, .. }) => refusal,
        other => panic!("expected a refused Raft message, got {other:?}"),
    }
}

fn intruder(raft_id: u64, address: String) -> MemberInfo {
    MemberInfo {
        raft_id,
        uuid: Uuid([0x42; 16]),
        name: "intruder".into(),
        address,
        incoming: String::new(),
    }
}

/// A write-set submitted on `from` is delivered on every running node.
fn assert_still_orders(cluster: &mut Cluster, from: usize, payload: &[u8]) {
    cluster.node(from).submit(payload.to_vec());
    let text = format!("ws:{payload:?}");
    cluster.run_until(
        |c| (0..c.nodes.len()).all(|i| c.ordered(i).values().any(|v| *v == text)),
        300,
    );
}

#[test]
fn a_join_from_a_live_member_s_address_is_refused_and_evicts_nobody() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let victim = (0..3).find(|&i| i != leader).unwrap();
    let follower = (0..3).find(|&i| i != leader && i != victim).unwrap();
    let victim_uuid = cluster.node(victim).me().uuid;
    let join = wire::encode(4242, &WireMessage::Join(intruder(4242, address(victim))));
    for _ in 0..3 {
        let result = cluster.inject(leader, &join);
        assert!(
            matches!(
                result,
                Err(ReceiveError::JoinRefused { raft_id: 4242, reason })
                    if reason.contains("live member")
            ),
            "{result:?}"
        );
        // Relayed by a follower, it reaches the leader and is refused there alike.
        assert_eq!(cluster.inject(follower, &join), Ok(()));
        cluster.run(40); // 4 election timeouts: the victim keeps answering
    }
    let view = cluster.last_view(leader).unwrap().clone();
    assert_eq!(view.members.len(), 3, "nobody was added or removed");
    assert!(view.members.iter().any(|m| m.uuid == victim_uuid));
    assert!(!view.members.iter().any(|m| m.name == "intruder"));
    assert_still_orders(&mut cluster, victim, b"victim still writes");
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn a_process_restarted_at_a_member_s_address_gets_in_before_the_suspect_timeout() {
    let mut cluster = Cluster::new(3);
    let old_uuid = cluster.node(2).me().uuid;
    cluster.nodes[2] = None;
    let new_uuid = cluster.restart(2);
    // Its first joins are refused while the leader may still think the old process lives.
    cluster.run(5);
    let view = cluster.last_view(0).unwrap();
    assert!(view.members.iter().any(|m| m.uuid == old_uuid));
    // Admitted after the silence limit (5 election timeouts, 50 ticks) and a join retry,
    // well before the 1 s suspect timeout (100 ticks) would have evicted the old process.
    cluster.run_until(
        |c| {
            c.last_view(0).is_some_and(|v| {
                v.primary
                    && v.members.len() == 3
                    && v.members.iter().any(|m| m.uuid == new_uuid)
                    && !v.members.iter().any(|m| m.uuid == old_uuid)
            })
        },
        90,
    );
    assert_still_orders(&mut cluster, 2, b"restarted");
    assert_same_history(&cluster, &[0, 1]);
}

#[test]
fn a_joiner_that_does_not_receive_at_its_address_never_gets_in() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    // Nobody listens at this address: the challenge sent there is lost, and no guess of it
    // (nor an old one) admits the joiner.
    let info = intruder(4343, "nowhere:1".into());
    let join = wire::encode(4343, &WireMessage::Join(info.clone()));
    let guess = wire::encode(4343, &WireMessage::ProvedJoin(info, 12345));
    for _ in 0..5 {
        for bytes in [&join, &guess] {
            assert!(matches!(
                cluster.inject(leader, bytes),
                Err(ReceiveError::JoinRefused { raft_id: 4343, reason }) if reason.contains("proven")
            ));
        }
        cluster.run(20);
    }
    let view = cluster.last_view(leader).unwrap();
    assert_eq!(view.members.len(), 3);
    assert!(!view.members.iter().any(|m| m.name == "intruder"));
    // A real joiner answers the challenge sent to its address and gets in.
    let index = cluster.add_joiner();
    cluster.run_until(|c| c.members_seen_by_all() == 4, 300);
    assert_still_orders(&mut cluster, index, b"a proven joiner");
}

#[test]
fn members_removed_by_forged_leaves_come_back_as_new_members() {
    // A leave is taken in a member's name (the sender is not authenticated): both
    // followers are removed. Each must start over under a new Raft id, never ask back in
    // under the old one (which would put a member nobody answers for in the quorum).
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let old: Vec<u64> = others
        .iter()
        .map(|&i| cluster.node(i).me().raft_id)
        .collect();
    for &index in &others {
        let leave = wire::encode(raft_id(&mut cluster, index), &WireMessage::Leave);
        assert_eq!(cluster.inject(leader, &leave), Ok(()));
        cluster.step();
    }
    cluster.run_until(
        |c| {
            c.members_seen_by_all() == 3
                && c.nodes[leader].as_ref().is_some_and(|node| {
                    !node.group_state().members.keys().any(|id| old.contains(id))
                })
        },
        400,
    );
    assert_still_orders(&mut cluster, others[0], b"back as new members");
}

#[test]
fn joins_that_claim_another_identity_are_refused() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let member = (0..3).find(|&i| i != leader).unwrap();
    let member_info = cluster.node(member).me().clone();
    // A non-member asking for someone else.
    let other = wire::encode(7, &WireMessage::Join(intruder(8, "elsewhere:1".into())));
    assert!(matches!(
        cluster.inject(leader, &other),
        Err(ReceiveError::JoinRefused { raft_id: 8, .. })
    ));
    // A member's id with another address (to be sent the member list, or to replace it).
    let mut stolen = member_info.clone();
    stolen.address = "elsewhere:1".into();
    let stolen = wire::encode(stolen.raft_id, &WireMessage::Join(stolen));
    assert!(matches!(
        cluster.inject(leader, &stolen),
        Err(ReceiveError::JoinRefused { reason, .. }) if reason.contains("member's id")
    ));
    // A new id with a member's UUID (to forward write-sets as that member).
    let mut twin = intruder(9, "elsewhere:2".into());
    twin.uuid = member_info.uuid;
    let twin = wire::encode(9, &WireMessage::Join(twin));
    assert!(matches!(
        cluster.inject(leader, &twin),
        Err(ReceiveError::JoinRefused { reason, .. }) if reason.contains("UUID")
    ));
    cluster.run(30);
    assert_eq!(cluster.last_view(leader).unwrap().members.len(), 3);
}

#[test]
fn messages_that_claim_this_member_or_another_are_refused() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let (leader_id, follower_id) = (
        raft_id(&mut cluster, leader),
        raft_id(&mut cluster, follower),
    );
    // A leave in the leader's own name would make it remove itself (the last voter of a
    // single-node group: a panic in raft-rs when applied).
    let leave = wire::encode(leader_id, &WireMessage::Leave);
    assert_eq!(
        cluster.inject(leader, &leave),
        Err(ReceiveError::ForgedSender { from: leader_id })
    );
    assert_eq!(
        cluster.inject(leader, &wire::encode(0, &WireMessage::Leave)),
        Err(ReceiveError::ForgedSender { from: 0 })
    );
    // A member's flow-control stop in another member's name is not ordered.
    let stop = wire::encode(
        follower_id,
        &WireMessage::Control(Control::FlowStop(leader_id)),
    );
    assert_eq!(
        cluster.inject(leader, &stop),
        Err(ReceiveError::ForeignControl { from: follower_id })
    );
    cluster.run(5);
    assert!(!cluster.node(leader).status().paused);
    // Write-sets forwarded by a non-member, or in another member's name.
    let write_set = |origin| Submission::whole(origin, 1, b"injected".to_vec());
    let stranger = wire::encode(31337, &WireMessage::Forward(vec![write_set(Uuid([3; 16]))]));
    assert_eq!(
        cluster.inject(leader, &stranger),
        Err(ReceiveError::NotInView { from: 31337 })
    );
    let leader_uuid = cluster.node(leader).me().uuid;
    let foreign = wire::encode(
        follower_id,
        &WireMessage::Forward(vec![write_set(leader_uuid)]),
    );
    assert_eq!(
        cluster.inject(leader, &foreign),
        Err(ReceiveError::ForeignSubmission { from: follower_id })
    );
    cluster.run(10);
    assert!(!(0..3).any(|i| cluster
        .ordered(i)
        .values()
        .any(|v| v.contains(&format!("{:?}", b"injected")))));
    assert_still_orders(&mut cluster, follower, b"after the forgeries");
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn raft_messages_raft_rs_would_panic_on_are_refused_by_name() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let (leader_id, follower_id) = (
        raft_id(&mut cluster, leader),
        raft_id(&mut cluster, follower),
    );
    let to_follower = |t, term| raft_message(t, leader_id, follower_id, term);
    // A term above the group's that still passes the term check, so that a forged message
    // reaches the check of its other fields.
    let high = current_term(&mut cluster, leader, follower) + 1;

    // The example: a heartbeat whose commit index is past the log.
    let mut heartbeat = to_follower(MessageType::MsgHeartbeat, high);
    heartbeat.commit = u64::MAX;
    assert!(matches!(
        refusal(cluster.inject(follower, &forged(heartbeat))),
        RaftRefusal::CommitPastLog {
            commit: u64::MAX,
            ..
        }
    ));
    // Term 0 makes raft-rs take it for a local message; a term near u64::MAX overflows, and
    // a member jumping to a term far ahead would leave the group none to elect a leader in.
    let jump = high + group::check::TERM_JUMP_MAX;
    for term in [0, jump, group::check::TERM_MAX + 1] {
        let vote = to_follower(MessageType::MsgRequestVote, term);
        assert!(matches!(
            refusal(cluster.inject(follower, &forged(vote))),
            RaftRefusal::BadTerm { .. }
        ));
    }
    // Types only a local node generates, or Trireme never sends.
    for t in [
        MessageType::MsgHup,
        MessageType::MsgBeat,
        MessageType::MsgUnreachable,
        MessageType::MsgSnapStatus,
        MessageType::MsgCheckQuorum,
        MessageType::MsgPropose,
        MessageType::MsgTransferLeader,
    ] {
        let message = raft_message(t, follower_id, leader_id, 0);
        assert_eq!(
            refusal(cluster.inject(leader, &forged(message))),
            RaftRefusal::NotFromNetwork(t)
        );
    }
    // A read index raft-rs would index without looking, one with a term a follower would
    // forward with it (a panic), and a leader's message from someone else.
    let read = raft_message(MessageType::MsgReadIndex, follower_id, leader_id, 0);
    assert_eq!(
        refusal(cluster.inject(leader, &forged(read))),
        RaftRefusal::BadReadContext(MessageType::MsgReadIndex)
    );
    let mut read = raft_message(MessageType::MsgReadIndex, leader_id, follower_id, 3);
    read.mut_entries().push(Entry::default());
    assert!(matches!(
        refusal(cluster.inject(follower, &forged(read))),
        RaftRefusal::BadTerm { term: 3, .. }
    ));
    let third = (0..3).find(|&i| i != leader && i != follower).unwrap();
    let third_id = raft_id(&mut cluster, third);
    let timeout = raft_message(MessageType::MsgTimeoutNow, third_id, follower_id, high);
    assert_eq!(
        refusal(cluster.inject(follower, &forged(timeout))),
        RaftRefusal::NotFromLeader(MessageType::MsgTimeoutNow)
    );
    // An old leader's read-index answer that crossed a leader change: refused, and routine
    // (not logged as a fault).
    let mut late = raft_message(
        MessageType::MsgReadIndexResp,
        third_id,
        follower_id,
        high - 2,
    );
    late.mut_entries().push(Entry {
        data: vec![0; group::check::READ_CONTEXT_BYTES].into(),
        ..Entry::default()
    });
    let result = cluster.inject(follower, &forged(late));
    assert!(result.as_ref().is_err_and(ReceiveError::is_routine));
    assert!(matches!(
        refusal(result),
        RaftRefusal::FromEarlierTerm {
            msg_type: MessageType::MsgReadIndexResp,
            ..
        }
    ));
    // Responses that name indexes past the leader's log, or ask for a snapshot.
    let mut response = raft_message(MessageType::MsgAppendResponse, follower_id, leader_id, 0);
    response.term = current_term(&mut cluster, leader, follower);
    response.index = u64::MAX;
    assert!(matches!(
        refusal(cluster.inject(leader, &forged(response.clone()))),
        RaftRefusal::IndexPastLog {
            index: u64::MAX,
            ..
        }
    ));
    response.index = 0;
    response.request_snapshot = 5;
    assert_eq!(
        refusal(cluster.inject(leader, &forged(response))),
        RaftRefusal::RequestsSnapshot(5)
    );
    assert_still_orders(&mut cluster, follower, b"after bad raft messages");
    assert_same_history(&cluster, &[0, 1, 2]);
}

/// The term the leader sends its heartbeats to `follower` with.
fn current_term(cluster: &mut Cluster, leader: usize, follower: usize) -> u64 {
    cluster.captured = Some(Vec::new());
    cluster.run(5);
    let captured = cluster.captured.take().unwrap();
    let (leader_id, follower_id) = (raft_id(cluster, leader), raft_id(cluster, follower));
    captured
        .iter()
        .filter_map(|bytes| match wire::decode(bytes) {
            Ok((from, WireMessage::Raft(m))) if from == leader_id && m.to == follower_id => {
                Some(m.term)
            }
            _ => None,
        })
        .next_back()
        .expect("the leader sends to its followers")
}

fn append_entry(index: u64, term: u64, entry_type: EntryType, data: Vec<u8>) -> Entry {
    let mut entry = Entry::default();
    entry.index = index;
    entry.term = term;
    entry.set_entry_type(entry_type);
    entry.data = data.into();
    entry
}

fn conf_change(change_type: ConfChangeType, node_id: u64) -> Vec<u8> {
    let mut single = ConfChangeSingle::default();
    single.set_change_type(change_type);
    single.node_id = node_id;
    let mut change = ConfChangeV2::default();
    change.mut_changes().push(single);
    change.write_to_bytes().unwrap()
}

#[test]
fn appends_and_snapshots_raft_rs_or_the_group_could_not_take_are_refused() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let (leader_id, follower_id) = (
        raft_id(&mut cluster, leader),
        raft_id(&mut cluster, follower),
    );
    let term = current_term(&mut cluster, leader, follower);
    let append = |index, log_term, entries: Vec<Entry>| {
        let mut m = raft_message(MessageType::MsgAppend, leader_id, follower_id, term);
        m.index = index;
        m.log_term = log_term;
        m.set_entries(entries.into());
        forged(m)
    };
    let normal = |index| append_entry(index, term, EntryType::EntryNormal, Vec::new());
    let cases = [
        // A gap between the anchor and the first entry.
        (append(1, 1, vec![normal(5)]), "gap"),
        // An anchor of term 0 past the log would "match" and commit past its end.
        (append(1 << 40, 0, vec![]), "term 0"),
        (
            append(
                1 << 40,
                term,
                vec![append_entry(1 << 40, term, EntryType::EntryNormal, vec![])],
            ),
            "repeat",
        ),
    ];
    for (bytes, what) in cases {
        assert!(
            matches!(
                refusal(cluster.inject(follower, &bytes)),
                RaftRefusal::BadAppend(_)
            ),
            "{what}"
        );
    }
    // Entries Trireme would not apply: a learner, a version 1 conf change, undecodable data.
    let high = 1 << 40;
    let learner = conf_change(ConfChangeType::AddLearnerNode, 77);
    for entry in [
        append_entry(high + 1, term, EntryType::EntryConfChangeV2, learner),
        append_entry(high + 1, term, EntryType::EntryConfChange, vec![1]),
        append_entry(high + 1, term, EntryType::EntryNormal, vec![0xff; 9]),
    ] {
        let mut m = raft_message(MessageType::MsgAppend, leader_id, follower_id, term);
        m.index = high;
        m.log_term = term;
        m.mut_entries().push(entry);
        assert!(matches!(
            refusal(cluster.inject(follower, &forged(m))),
            RaftRefusal::BadEntry { index, .. } if index == high + 1
        ));
    }
    // Snapshots raft-rs could not restore or the group could not install.
    let snapshot = |index, snapshot_term, voters: Vec<u64>, data: Vec<u8>| {
        let mut s = Snapshot::default();
        s.mut_metadata().index = index;
        s.mut_metadata().term = snapshot_term;
        s.mut_metadata().mut_conf_state().voters = voters;
        s.data = data.into();
        let mut m = raft_message(MessageType::MsgSnapshot, leader_id, follower_id, term);
        m.set_snapshot(s);
        forged(m)
    };
    let voters = vec![leader_id, follower_id];
    let state = cluster.node(follower).group_state().encode();
    for bytes in [
        snapshot(high, term, voters.clone(), b"not a group state".to_vec()),
        snapshot(high, 0, voters.clone(), state.clone()),
        snapshot(high, term, vec![follower_id, 0], state.clone()),
        snapshot(high, term, voters, state),
    ] {
        assert!(matches!(
            refusal(cluster.inject(follower, &bytes)),
            RaftRefusal::BadSnapshot(_)
        ));
    }
    assert_still_orders(&mut cluster, follower, b"after bad appends");
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn an_append_that_rewrites_committed_entries_is_refused() {
    let mut cluster = Cluster::new(3);
    let leader = leader(&mut cluster);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let follower_id = raft_id(&mut cluster, follower);
    cluster.captured = Some(Vec::new());
    cluster.node(leader).submit(b"committed soon".to_vec());
    cluster.run(5);
    let captured = cluster.captured.take().unwrap();
    let original = captured
        .iter()
        .filter_map(|bytes| match wire::decode(bytes) {
            Ok((_, WireMessage::Raft(m)))
                if m.get_msg_type() == MessageType::MsgAppend
                    && m.to == follower_id
                    && !m.entries.is_empty() =>
            {
                Some(m)
            }
            _ => None,
        })
        .next_back()
        .expect("the leader appended to the follower");
    // The same entries with another (still plausible) term, once they are committed.
    let mut rewrite = original.clone();
    rewrite.term += 1;
    for entry in rewrite.mut_entries().iter_mut() {
        entry.term += 1;
    }
    let entry = &original.entries[0];
    assert!(matches!(
        refusal(cluster.inject(follower, &forged(rewrite))),
        RaftRefusal::ConflictsWithCommitted { index, term, committed }
            if index == entry.index && term == entry.term + 1 && committed == entry.term
    ));
    assert_still_orders(&mut cluster, follower, b"after the rewrite");
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn a_write_set_over_max_ws_size_is_refused_by_the_leader() {
    let mut cluster = Cluster::new(3);
    let mut small = common::config();
    small.max_ws_size = 2 * group::CHUNK_BYTES as u64;
    for index in 0..3 {
        cluster.node(index).reconfigure(&small);
    }
    let leader = leader(&mut cluster);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let follower_id = raft_id(&mut cluster, follower);
    let origin = cluster.node(follower).me().uuid;
    let chunk = |submit_id, chunk| Submission {
        origin,
        submit_id,
        payload: vec![7; 16].into(),
        chunk,
    };
    for (submission, reason) in [
        (chunk(1 << 30, (0, 3)), "more chunks"),
        (chunk(1 << 30, (4, 2)), "could not have cut"),
        // Only the last chunk may be shorter than `CHUNK_BYTES`.
        (chunk(1 << 30, (0, 2)), "could not have cut"),
        (
            Submission::whole(origin, 1 << 30, vec![0; 2 * group::CHUNK_BYTES + 1]),
            "larger than",
        ),
    ] {
        let bytes = wire::encode(follower_id, &WireMessage::Forward(vec![submission]));
        assert!(matches!(
            cluster.inject(leader, &bytes),
            Err(ReceiveError::BadSubmission { reason: r, .. }) if r.contains(reason)
        ));
    }
    let large = vec![1; 2 * group::CHUNK_BYTES + 1];
    cluster.node(follower).submit(large.clone());
    cluster.run(30);
    assert!(
        !(0..3).any(|i| cluster.delivered[i]
            .iter()
            .any(|d| matches!(d, group::Delivery::WriteSet { payload, .. } if *payload == large))),
        "a write-set of three chunks is never ordered"
    );
    assert_still_orders(&mut cluster, leader, b"small ones still are");
    assert!(cluster.node(leader).group_state().last_seqno > Seqno(1));
}
