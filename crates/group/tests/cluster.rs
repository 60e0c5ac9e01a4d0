//! View, quorum, eviction, leave, flow-control and bad-input rules of the group layer, on a
//! tiny in-memory cluster with a perfect network that the tests cut links in by hand.

mod common;

use std::collections::BTreeSet;

use base::{Nanos, NodeState, Seqno};
use common::{address, assert_same_history, config, Cluster, LOG_RETAIN_BYTES, TICK_NS};
use group::{wire, Delivery, FlowTriggers, ReceiveError};

#[test]
fn three_nodes_form_one_primary_view_and_order_identically() {
    let mut cluster = Cluster::new(3);
    for round in 0..30u8 {
        for index in 0..3 {
            cluster.node(index).submit(vec![index as u8, round]);
        }
        cluster.step();
    }
    cluster.run_until(
        |c| {
            (0..3).all(|i| {
                c.ordered(i)
                    .values()
                    .filter(|v| v.starts_with("ws"))
                    .count()
                    == 90
            })
        },
        500,
    );
    assert_same_history(&cluster, &[0, 1, 2]);
    let view = cluster.last_view(2).unwrap();
    assert!(view.primary && view.members.len() == 3);
    let cluster_uuids: BTreeSet<_> = (0..3)
        .map(|i| cluster.last_view(i).unwrap().cluster)
        .collect();
    assert_eq!(cluster_uuids.len(), 1, "one cluster state UUID");
}

#[test]
fn a_minority_is_not_primary_and_the_majority_goes_on() {
    let mut cluster = Cluster::new(3);
    cluster.isolated.insert(2);
    cluster.run(60);
    assert!(
        !cluster.node(2).is_primary(),
        "an isolated third has no quorum"
    );
    assert!(cluster.node(0).is_primary() && cluster.node(1).is_primary());
    cluster.node(0).submit(b"during partition".to_vec());
    cluster.run(10);
    assert!(cluster
        .ordered(1)
        .values()
        .any(|v| v.contains("during partition") || v.starts_with("ws")));
    // Healing before the suspect timeout: the node catches up from the log, no eviction.
    cluster.isolated.clear();
    cluster.run(30);
    assert!(cluster.node(2).is_primary());
    assert_same_history(&cluster, &[0, 1, 2]);
    assert_eq!(cluster.last_view(2).unwrap().members.len(), 3);
}

/// A follower cut off for less than the contact window, while the leader orders more than
/// its log's byte budget: the leader keeps the entries for the follower, which catches up
/// from the log, with no state gap. (The leader went by raft-rs's `recent_active`, which
/// each check of the quorum clears, and cut the log past the follower at the next check.)
#[test]
fn a_follower_back_within_the_contact_window_catches_up_from_the_log() {
    let mut cluster = Cluster::new(3);
    cluster.run(40);
    let follower = (0..3)
        .find(|&i| !cluster.node(i).is_leader())
        .expect("a follower");
    let leader = (0..3).find(|&i| cluster.node(i).is_leader()).unwrap();
    const WRITE_SETS: usize = 40;
    const PAYLOAD_BYTES: usize = 8 << 10;
    assert!((WRITE_SETS * PAYLOAD_BYTES) as u64 > 4 * LOG_RETAIN_BYTES);
    let payload = |n: usize| vec![n as u8; PAYLOAD_BYTES];
    cluster.isolated.insert(follower);
    for n in 0..WRITE_SETS {
        cluster.node(leader).submit(payload(n));
        cluster.run(1);
    }
    let log_bytes = cluster.node(leader).status().log_bytes;
    assert!(log_bytes > 4 * LOG_RETAIN_BYTES, "{log_bytes} bytes kept");
    cluster.isolated.clear();
    let last = format!("ws:{:?}", payload(WRITE_SETS - 1));
    cluster.run_until(|c| c.ordered(follower).values().any(|v| *v == last), 100);
    let gaps = cluster.delivered[follower]
        .iter()
        .filter(|d| matches!(d, Delivery::StateGap { .. }))
        .count();
    assert_eq!(gaps, 0, "the follower was sent a snapshot");
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn a_member_cut_off_gives_up_only_what_never_left_it() {
    let mut cluster = Cluster::new(3);
    cluster.run(40);
    let follower = (0..3)
        .find(|&i| !cluster.node(i).is_leader())
        .expect("a follower");
    // A cut the node does not know of: what it sends may reach the leader, so it is kept.
    cluster.isolated.insert(follower);
    let sent = cluster
        .node(follower)
        .submit(b"sent into an unknown cut".to_vec());
    cluster.run(2);
    // `gmcast.isolate`: the node knows its frames go nowhere, and sends nothing more.
    cluster.node(follower).set_isolated(true);
    let held = cluster
        .node(follower)
        .submit(b"held while isolated".to_vec());
    cluster.run_until(
        |c| c.last_view(follower).is_some_and(|view| !view.primary),
        200,
    );
    let after = cluster
        .node(follower)
        .submit(b"submitted while non-primary".to_vec());
    cluster.run(2);
    let abandoned: Vec<u64> = cluster.delivered[follower]
        .iter()
        .filter_map(|d| match d {
            Delivery::Abandoned { submit_ids } => Some(submit_ids.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        abandoned,
        vec![held, after],
        "only what never left, each once"
    );
    assert!(!abandoned.contains(&sent));
    // Back before its eviction: the kept one is resent and ordered, the others never.
    cluster.node(follower).set_isolated(false);
    cluster.isolated.clear();
    cluster.run(60);
    assert!(cluster.node(follower).is_primary());
    let ordered = |payload: &[u8]| {
        (0..3)
            .map(|i| {
                cluster.delivered[i]
                    .iter()
                    .filter(|d| matches!(d, Delivery::WriteSet { payload: p, .. } if p == payload))
                    .count()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(ordered(b"sent into an unknown cut"), vec![1, 1, 1]);
    assert_eq!(ordered(b"held while isolated"), vec![0, 0, 0]);
    assert_eq!(ordered(b"submitted while non-primary"), vec![0, 0, 0]);
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn a_leader_that_steps_down_briefly_stays_primary() {
    let mut cluster = Cluster::new(3);
    cluster.run(40);
    let leader = (0..3)
        .find(|&i| cluster.node(i).is_leader())
        .expect("a leader");
    // Cut off for longer than check-quorum lets a leader stay leader, shorter than the
    // window a member keeps being primary without a leader.
    cluster.isolated.insert(leader);
    cluster.run(35);
    assert!(!cluster.node(leader).is_leader(), "it stepped down");
    assert!(
        cluster.node(leader).is_primary(),
        "a hiccup of the leader must not make its server unready at once"
    );
    cluster.isolated.clear();
    cluster.run(40);
    assert!((0..3).all(|i| cluster.node(i).is_primary()));
    assert!(
        !cluster.delivered[leader].iter().any(
            |d| matches!(d, Delivery::View(view) if !view.primary && view.own_index.is_some())
        ),
        "the old leader never delivered a non-primary view"
    );
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn two_of_three_lost_leaves_no_primary() {
    let mut cluster = Cluster::new(3);
    cluster.isolated.insert(1);
    cluster.isolated.insert(2);
    cluster.run(80);
    assert!(
        !cluster.node(0).is_primary(),
        "one of three holds no quorum"
    );
    let view = cluster.last_view(0).unwrap();
    assert!(!view.primary);
}

#[test]
fn a_silent_member_is_evicted_after_the_suspect_timeout() {
    let mut cluster = Cluster::new(3);
    cluster.nodes[2] = None;
    cluster.run_until(
        |c| {
            c.last_view(0)
                .is_some_and(|v| v.members.len() == 2 && v.ordered)
        },
        400,
    );
    assert!(cluster.node(0).is_primary());
    assert_same_history(&cluster, &[0, 1]);
}

/// The two holders of the data fall silent together, while the members that lead are all
/// still waiting for a state transfer: one holder is evicted, the other kept, so that the
/// component keeps a donor to wait for. (Evicting both in one pass left a component of
/// joiners only, and the holders, rejoining, joiners too.)
#[test]
fn of_holders_silent_together_the_last_one_is_never_evicted() {
    let mut cluster = Cluster::new(5);
    assert!(cluster.node(0).is_leader());
    cluster.node(0).set_local_state(NodeState::Joiner);
    for holder in [1, 2] {
        cluster.node(holder).set_local_state(NodeState::Synced);
    }
    cluster.run(20);
    cluster.isolated.extend([1, 2]);
    cluster.run_until(
        |c| {
            c.last_view(0)
                .is_some_and(|v| v.primary && v.members.len() == 4)
        },
        400,
    );
    cluster.run(400);
    let view = cluster.last_view(0).unwrap().clone();
    assert_eq!(view.members.len(), 4);
    let kept: Vec<usize> = [1, 2]
        .into_iter()
        .filter(|&holder| {
            let uuid = cluster.node(holder).me().uuid;
            view.members.iter().any(|m| m.uuid == uuid)
        })
        .collect();
    assert_eq!(kept.len(), 1, "exactly one holder stays a member: {view:?}");
    // The holder kept comes back as the member it was, and goes on from the log.
    cluster.isolated.clear();
    let payload = b"after the holders return";
    let digest = format!("ws:{:?}", &payload[..]);
    cluster.node(0).submit(payload.to_vec());
    cluster.run_until(|c| c.ordered(kept[0]).values().any(|v| *v == digest), 600);
    assert_same_history(&cluster, &[0, 3, 4, kept[0]]);
}

/// A member outside the primary component hears that it was removed from a member admitted
/// after it lost contact, whose Raft id it never saw (a learner cut off hears it from no one
/// else): it starts over as a new member. A member of the primary component told the same
/// stays what it is.
#[test]
fn a_removal_notice_from_a_member_admitted_since_is_heeded_outside_the_primary() {
    let mut cluster = Cluster::new(3);
    cluster.isolated.insert(2);
    cluster.run_until(|c| !c.nodes[2].as_ref().unwrap().is_primary(), 400);
    let stranger = 0xfeed_5eed;
    for (index, rejoins) in [(2, true), (0, false)] {
        let before = cluster.node(index).me().raft_id;
        let notice = wire::encode(stranger, &wire::WireMessage::Removed(before));
        assert!(cluster.inject(index, &notice).is_ok());
        cluster.run(1);
        let after = cluster.node(index).me().raft_id;
        assert_eq!(after != before, rejoins, "node {index}");
    }
}

/// A member removed while cut off announces itself (as a learner does, sending no Raft
/// traffic) to a member that saw it removed, not the leader: that member tells it, and it
/// starts over as a new member. (Only the leader reminded removed learners, and a leader
/// admitted since had never seen them.)
#[test]
fn a_removed_member_that_announces_itself_is_told_by_any_member() {
    let mut cluster = Cluster::new(3);
    let leader = (0..3).find(|&i| cluster.node(i).is_leader()).unwrap();
    let removed = (0..3).find(|&i| i != leader).unwrap();
    let teller = 3 - leader - removed;
    cluster.isolated.insert(removed);
    cluster.run_until(
        |c| {
            c.last_view(teller)
                .is_some_and(|v| v.primary && v.members.len() == 2)
        },
        400,
    );
    let old_id = cluster.node(removed).me().raft_id;
    assert!(!cluster.node(removed).is_primary());
    cluster.isolated.clear();
    let presence = wire::encode(old_id, &wire::WireMessage::Presence { reply: false });
    let _ = cluster.inject(teller, &presence);
    assert_ne!(cluster.node(removed).me().raft_id, old_id);
}

#[test]
fn graceful_leaves_shrink_three_to_one() {
    let mut cluster = Cluster::new(3);
    for leaver in [0, 1] {
        cluster.node(leaver).leave();
        cluster.run_until(|c| c.nodes[leaver].as_ref().unwrap().is_closed(), 600);
        cluster.nodes[leaver] = None;
        cluster.run(40);
    }
    assert!(cluster.node(2).is_primary(), "the last node stays primary");
    assert_eq!(cluster.last_view(2).unwrap().members.len(), 1);
    cluster.node(2).submit(b"alone".to_vec());
    cluster.run(10);
    assert!(cluster.ordered(2).values().any(|v| v.starts_with("ws")));
}

#[test]
fn a_restarted_member_comes_back_as_a_new_member() {
    let mut cluster = Cluster::new(3);
    let old_uuid = cluster.node(2).me().uuid;
    cluster.nodes[2] = None;
    cluster.run_until(
        |c| c.last_view(0).is_some_and(|v| v.members.len() == 2),
        400,
    );
    cluster.restart(2);
    cluster.run_until(|c| c.members_seen_by_all() == 3, 400);
    let view = cluster.last_view(2).unwrap();
    let own = &view.members[view.own_index.unwrap()];
    assert_ne!(own.uuid, old_uuid);
    // Its first view starts it at the join point: what came before arrives by state transfer.
    let first_view = cluster.delivered[2].iter().find_map(|d| match d {
        Delivery::View(view) => Some(view.clone()),
        _ => None,
    });
    assert!(first_view.unwrap().seqno > Seqno(1));
    cluster.node(0).submit(b"after rejoin".to_vec());
    cluster.run(10);
    assert_same_history(&cluster, &[0, 1, 2]);
    assert!(cluster.ordered(2).values().any(|v| v.starts_with("ws")));
}

#[test]
fn quick_restarts_from_one_address_do_not_cost_the_quorum() {
    let mut cluster = Cluster::new(3);
    // Node 2 crashes again as soon as each new incarnation is admitted, long before the
    // suspect timeout could evict the dead ones (a joiner in a crash loop). Were the dead
    // incarnations kept, two of them would outvote the two living members.
    for round in 0..3 {
        cluster.nodes[2] = None;
        let uuid = cluster.restart(2);
        cluster.run_until(
            |c| {
                c.last_view(0)
                    .is_some_and(|v| v.primary && v.members.iter().any(|m| m.uuid == uuid))
            },
            400,
        );
        let members = cluster.last_view(0).unwrap().members.len();
        assert_eq!(
            members, 3,
            "round {round}: the dead incarnation was removed"
        );
    }
    cluster.node(0).submit(b"after the restarts".to_vec());
    cluster.run(10);
    assert_same_history(&cluster, &[0, 1]);
    assert!(cluster.node(0).is_primary());
}

#[test]
fn a_silent_member_s_flow_control_stop_is_lifted_long_before_its_eviction() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    let leader = (0..3).find(|&i| cluster.node(i).status().leader).unwrap();
    let stopper = (0..3).find(|&i| i != leader).unwrap();
    cluster.node(stopper).report_apply_queue(10);
    cluster.run(10);
    assert!(cluster.node(leader).status().paused);
    // Cut off with its stop in force: it can never send the resume.
    cluster.isolated.insert(stopper);
    cluster.run(70); // 0.7 s: past 5 election timeouts, before the 1 s suspect timeout
    let status = cluster.node(leader).status();
    assert!(!status.paused, "the silent member's stop is lifted");
    assert_eq!(status.members, 3, "and it is not evicted yet");
    // Heard again and still behind, it stops the group again.
    cluster.isolated.clear();
    cluster.run(40);
    assert!(cluster.node(leader).status().paused, "its stop is back");
}

#[test]
fn flow_triggers_are_the_queue_lengths_that_change_the_member_s_wish() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    let limits = config();
    let (stop_above, resume_at) = (limits.fc_stop_above(3), limits.fc_resume_at(3));
    assert_eq!(
        cluster.node(1).flow_triggers(),
        FlowTriggers {
            stop_above: Some(stop_above),
            resume_at_or_below: None
        },
        "no stop wanted: only a longer queue matters"
    );
    cluster.node(1).report_apply_queue(stop_above + 1);
    cluster.run(10);
    assert!(cluster.node(0).status().paused);
    assert_eq!(
        cluster.node(1).flow_triggers(),
        FlowTriggers {
            stop_above: None,
            resume_at_or_below: Some(resume_at)
        },
        "stopped: only a queue short enough to resume matters"
    );
    cluster.node(1).report_apply_queue(resume_at);
    cluster.run(10);
    assert!(!cluster.node(0).status().paused);
    assert_eq!(cluster.node(1).flow_triggers().stop_above, Some(stop_above));
}

/// A queue that drained before its stop was ordered: the resume goes right behind the stop,
/// so the group is paused for no time at all instead of for the round the resume would
/// take once the stop was ordered.
#[test]
fn a_resume_follows_a_stop_still_on_its_way_without_waiting_for_it_to_be_ordered() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    let leader = (0..3).find(|&i| cluster.node(i).is_leader()).unwrap();
    let stopper = (0..3).find(|&i| i != leader).unwrap();
    let now = Nanos(cluster.now);
    cluster.node(stopper).report_apply_queue(100);
    let (stop, _) = cluster.node(stopper).poll(now);
    assert!(!stop.is_empty(), "the stop goes out");
    cluster.node(stopper).report_apply_queue(0);
    let (resume, _) = cluster.node(stopper).poll(now);
    assert_eq!(
        resume.len(),
        1,
        "the resume goes before the stop is ordered"
    );
    for message in stop.iter().chain(&resume) {
        let to = (0..3).find(|&i| address(i) == message.address).unwrap();
        let _ = cluster.inject(to, &message.bytes);
    }
    let name = format!("node{stopper}");
    for index in 0..3 {
        let status = cluster.node(index).status();
        assert_eq!(status.flow.pauses_by.get(&name), Some(&1), "node {index}");
        assert!(!status.paused, "node {index}: resumed");
        assert_eq!(status.flow.paused_ns, 0, "node {index}: paused for no time");
    }
    cluster.run(10);
    let status = cluster.node(stopper).status();
    assert_eq!(status.flow.sent, 1, "one stop, as Galera counts them");
    assert!(!status.stop_requested);
    assert!(
        !cluster.node(leader).status().paused,
        "and no repeat stops it again"
    );
}

#[test]
fn a_member_that_may_not_pause_the_group_has_no_flow_trigger_until_it_may() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.node(1).set_local_state(NodeState::Joiner);
    cluster.run(10);
    cluster.node(1).report_apply_queue(4096);
    cluster.run(10);
    assert!(
        !cluster.node(0).status().paused,
        "a joiner never pauses the group"
    );
    assert_eq!(
        cluster.node(1).flow_triggers(),
        FlowTriggers {
            stop_above: None,
            resume_at_or_below: None
        },
        "no queue length changes a joiner's wish"
    );
    cluster.node(1).set_local_state(NodeState::Synced);
    cluster.run(10);
    assert!(
        cluster.node(0).status().paused,
        "synced with its queue still long, it stops the group at its next poll"
    );
}

#[test]
fn a_member_does_not_stop_a_group_another_member_holds_stopped() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    cluster.node(1).report_apply_queue(100);
    cluster.run(10);
    assert!(cluster.node(0).status().paused, "node 1 stopped the group");
    for index in 0..3 {
        assert_eq!(
            cluster.node(index).status().paused_by,
            ["node1"],
            "node {index}"
        );
    }
    cluster.node(2).report_apply_queue(100);
    cluster.run(10);
    let status = cluster.node(2).status();
    assert!(
        !status.stop_requested,
        "no second stop while node 1 holds it"
    );
    assert_eq!(status.flow.sent, 0);
    assert_eq!(
        cluster.node(2).flow_triggers(),
        FlowTriggers {
            stop_above: None,
            resume_at_or_below: None
        },
        "no queue length matters while another member holds the group"
    );
    // Node 1 resumes while node 2 is still behind: node 2 stops the group in its turn.
    cluster.node(1).report_apply_queue(0);
    cluster.run(10);
    assert!(cluster.node(2).status().stop_requested);
    assert!(cluster.node(0).status().paused, "paused again, for node 2");
    assert_eq!(cluster.node(0).status().paused_by, ["node2"]);
    assert_eq!(cluster.node(0).status().flow.pauses_by.len(), 2);
}

#[test]
fn flow_control_pauses_ordering_and_donors_never_pause() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    cluster.node(1).report_apply_queue(10);
    cluster.run(10);
    assert!(
        cluster.node(0).status().paused,
        "a queue over gcs.fc_limit pauses the group"
    );
    let before = cluster.ordered(0).len();
    cluster.node(0).submit(b"held".to_vec());
    cluster.run(10);
    assert_eq!(
        cluster.ordered(0).len(),
        before,
        "nothing is ordered while paused"
    );
    assert_eq!(
        cluster.node(0).write_sets_waiting_to_send(),
        1,
        "the held write-set is in the send queue"
    );
    // A streaming rollback is not held: other nodes keep its transaction's locks until it
    // arrives.
    cluster.node(2).submit_urgent(b"rollback".to_vec());
    cluster.run(10);
    assert_eq!(
        cluster.ordered(0).len(),
        before + 1,
        "an urgent write-set is ordered while paused"
    );
    cluster.node(1).report_apply_queue(4);
    cluster.run(10);
    assert!(!cluster.node(0).status().paused);
    assert!(cluster.node(0).status().paused_by.is_empty());
    assert_eq!(
        cluster.ordered(0).len(),
        before + 2,
        "the held write-set is ordered on resume"
    );
    assert_eq!(
        cluster.node(0).write_sets_waiting_to_send(),
        0,
        "sent on resume"
    );
    let status = cluster.node(1).status();
    assert_eq!(
        status.flow.sent, 1,
        "one stop sent (the resume is not counted, as in Galera)"
    );
    assert_eq!(status.flow.recv, 1, "one stop ordered");
    assert!(status.flow.paused_ns >= 10 * TICK_NS);
    assert_eq!(
        cluster.node(0).status().flow.pauses_by.get("node1"),
        Some(&1)
    );
    let lengths = &status.flow.pause_lengths;
    assert_eq!(lengths.count, 1, "the one pause is counted when it ends");
    assert_eq!(lengths.sum_ns, status.flow.paused_ns);
    let bucket = group::PAUSE_BUCKET_BOUNDS_NS
        .iter()
        .position(|bound| lengths.sum_ns <= *bound)
        .unwrap();
    assert_eq!(lengths.within[bucket], 1, "{lengths:?}");
    assert_eq!(lengths.within.iter().sum::<u64>(), 1);

    // gcs.fc_limit raised at runtime: the same queue no longer pauses anyone.
    let mut relaxed = config();
    relaxed.apply_option("gcs.fc_limit", "100").unwrap();
    cluster.node(1).reconfigure(&relaxed);
    cluster.node(1).report_apply_queue(10);
    cluster.run(10);
    assert!(
        !cluster.node(0).status().paused,
        "a queue under the new limit does not pause"
    );
    assert_eq!(
        cluster.node(1).status().flow.sent,
        1,
        "no new stop was sent"
    );

    cluster.node(2).set_local_state(NodeState::Donor);
    cluster.run(5);
    cluster.node(2).report_apply_queue(1_000);
    cluster.run(10);
    assert!(
        !cluster.node(0).status().paused,
        "a donor never pauses the cluster"
    );
}

#[test]
fn bad_input_is_refused_with_a_specific_error_and_nothing_is_lost() {
    let mut cluster = Cluster::new(3);
    let now = Nanos(cluster.now);
    let node = cluster.node(0);
    assert!(matches!(
        node.receive(now, b"garbage"),
        Err(ReceiveError::Wire(_))
    ));
    let mut valid = wire::encode(7, &wire::WireMessage::Leave);
    assert_eq!(
        node.receive(now, &valid[..valid.len() - 3]),
        Err(ReceiveError::Wire(wire::WireError::Truncated {
            needed: valid.len(),
            got: valid.len() - 3
        }))
    );
    valid[4] = 99;
    assert_eq!(
        node.receive(now, &valid),
        Err(ReceiveError::Wire(wire::WireError::UnknownVersion(99)))
    );
    let stranger = wire::encode(424242, &wire::WireMessage::Leave);
    assert_eq!(
        node.receive(now, &stranger),
        Err(ReceiveError::NotInView { from: 424242 })
    );
    let mut raft_message = raft::eraftpb::Message::default();
    raft_message.from = 424242;
    raft_message.to = node.me().raft_id;
    raft_message.term = 99;
    let forged = wire::encode(424242, &wire::WireMessage::Raft(raft_message));
    assert_eq!(
        node.receive(now, &forged),
        Err(ReceiveError::NotInView { from: 424242 })
    );
    // The node carries on and still orders.
    cluster.node(1).submit(b"after garbage".to_vec());
    cluster.run(10);
    assert!(cluster.node(0).is_primary());
    assert_same_history(&cluster, &[0, 1, 2]);
    assert!(cluster.ordered(0).values().any(|v| v.starts_with("ws")));
}

/// A large write-set goes out a few chunks at a time, each batch once the one before is
/// ordered, so that write-sets sent after it, from any member, need not wait behind all
/// of its chunks in the leader's log.
#[test]
fn a_large_write_set_keeps_few_chunks_in_flight_and_small_ones_pass_it() {
    let mut cluster = Cluster::new(3);
    cluster.run(10);
    let window = 8 * group::CHUNK_BYTES;
    let large = vec![7u8; 40 * group::CHUNK_BYTES];
    cluster.node(1).submit(large.clone());
    // The origin's first poll, before the network carries anything: one window's worth.
    let now = Nanos(cluster.now);
    let (outgoing, deliveries) = cluster.node(1).poll(now);
    cluster.delivered[1].extend(deliveries);
    assert_eq!(cluster.node(1).status().chunk_bytes_in_flight, window);
    let sent: usize = outgoing.iter().map(|o| o.bytes.len()).sum();
    assert!(
        (window..window + group::CHUNK_BYTES).contains(&sent),
        "{sent} bytes sent for a window of {window}"
    );
    cluster.node(2).submit(b"small".to_vec());
    cluster.node(1).submit(b"small of the origin".to_vec());
    for message in outgoing {
        let to = (0..3).find(|i| address(*i) == message.address).unwrap();
        cluster.inject(to, &message.bytes).unwrap();
    }
    for _ in 0..400 {
        if cluster.node(1).status().pending_submissions == 0 {
            break;
        }
        cluster.step();
        let in_flight = cluster.node(1).status().chunk_bytes_in_flight;
        assert!(in_flight <= window, "{in_flight} bytes of chunks in flight");
    }
    cluster.run(10);
    assert_same_history(&cluster, &[0, 1, 2]);
    let seqno_of = |wanted: &[u8]| {
        cluster.delivered[0]
            .iter()
            .find_map(|d| match d {
                Delivery::WriteSet { seqno, payload, .. } if payload == wanted => Some(*seqno),
                _ => None,
            })
            .expect("ordered")
    };
    let large_at = seqno_of(&large);
    assert!(
        seqno_of(b"small") < large_at,
        "a small write-set passed the large one"
    );
    assert!(
        seqno_of(b"small of the origin") < large_at,
        "so did one of the large one's own origin"
    );
}

/// Forty entries of 16 KiB are ten times the test members' byte budget: every member keeps
/// its log within it (and the slack of one snapshot interval's bytes), and orders the same.
#[test]
fn the_order_log_keeps_to_its_byte_budget() {
    let mut cluster = Cluster::new(3);
    cluster.run(10);
    let mut most = 0;
    for n in 0..200u32 {
        let mut payload = vec![(n % 251) as u8; 16 << 10];
        payload[..4].copy_from_slice(&n.to_le_bytes());
        cluster.node(1 + n as usize % 2).submit(payload);
        cluster.step();
        for index in 0..3 {
            most = most.max(cluster.node(index).status().log_bytes);
        }
    }
    cluster.run(30);
    assert!(
        most <= 2 * LOG_RETAIN_BYTES,
        "a member held {most} bytes of log for a budget of {LOG_RETAIN_BYTES}"
    );
    assert!(
        most > LOG_RETAIN_BYTES / 2,
        "the load never came near the budget: {most} bytes"
    );
    let ordered = cluster.delivered[0]
        .iter()
        .filter(|d| matches!(d, Delivery::WriteSet { payload, .. } if payload.len() == 16 << 10))
        .count();
    assert_eq!(ordered, 200);
    assert_same_history(&cluster, &[0, 1, 2]);
}

#[test]
fn a_large_write_set_is_ordered_in_chunks_and_delivered_whole_once() {
    let mut cluster = Cluster::new(3);
    cluster.run(10);
    let large: Vec<u8> = (0..(3 * group::CHUNK_BYTES + 17))
        .map(|i| (i % 251) as u8)
        .collect();
    let id = cluster.node(1).submit(large.clone());
    cluster.node(2).submit(b"small".to_vec());
    cluster.run(30);
    assert_same_history(&cluster, &[0, 1, 2]);
    let whole: Vec<(Seqno, u64)> = cluster.delivered[1]
        .iter()
        .filter_map(|d| match d {
            Delivery::WriteSet {
                seqno,
                submit_id,
                local: true,
                payload,
                ..
            } if *payload == large => Some((*seqno, *submit_id)),
            _ => None,
        })
        .collect();
    assert_eq!(whole.len(), 1, "delivered once, whole, to its origin");
    assert_eq!(whole[0].1, id, "under the id submit returned");
    for index in [0, 2] {
        let copies = cluster.delivered[index]
            .iter()
            .filter(|d| matches!(d, Delivery::WriteSet { payload, .. } if *payload == large))
            .count();
        assert_eq!(copies, 1, "node {index} has it once");
    }
    assert_eq!(cluster.node(1).status().pending_submissions, 0);

    // Under flow control an unsent chunked write-set is withdrawn as a whole.
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    cluster.node(0).report_apply_queue(1_000);
    cluster.run(10);
    assert!(cluster.node(1).status().paused);
    let held = cluster.node(1).submit(large.clone());
    assert!(cluster.node(1).cancel(held), "no chunk of it was sent");
    assert_eq!(cluster.node(1).status().pending_submissions, 0);
}

/// `pc.ignore_sb`: the node that allows a split brain goes on alone once it has been cut
/// off for the suspect timeout, continuing the same history; the other side, without it,
/// stays non-primary, and once the link is back learns it was left behind and rejoins as a
/// new member (a new Raft id, the same UUID).
#[test]
fn ignoring_split_brain_goes_on_alone_and_the_other_side_rejoins() {
    let mut cluster = Cluster::new(2);
    let mut allowing = common::config();
    allowing.ignore_split_brain = true;
    cluster.node(0).reconfigure(&allowing);
    cluster.node(0).submit(b"before".to_vec());
    cluster.run(20);
    let cluster_uuid = cluster.last_view(0).unwrap().cluster;
    cluster.isolated.insert(1);
    let cut_off_at = cluster.delivered[0].len();
    // Submitted as the link goes: ordered once the node goes on alone.
    cluster.node(0).submit(b"in flight".to_vec());
    // A causal read asked as the link goes is answered by the lone component.
    cluster.node(0).causal_read(77);
    let write_sets = |c: &Cluster| {
        c.ordered(0)
            .values()
            .filter(|v| v.starts_with("ws"))
            .count()
    };
    let before = write_sets(&cluster);
    cluster.run_until(
        |c| {
            c.last_view(0)
                .is_some_and(|v| v.primary && v.members.len() == 1)
        },
        400,
    );
    let alone = cluster.last_view(0).unwrap().clone();
    assert!(alone.ordered, "the new component's view takes a seqno");
    cluster.run_until(
        |c| {
            c.delivered[0]
                .iter()
                .any(|d| matches!(d, Delivery::Causal { id: 77, .. }))
        },
        50,
    );
    assert!(
        cluster.delivered[0][cut_off_at..]
            .iter()
            .all(|d| !matches!(d, Delivery::View(v) if !v.primary)),
        "as in Galera, the component stays primary until its view alone forms: writes in \
         flight wait instead of failing"
    );
    assert_eq!(alone.cluster, cluster_uuid, "the same history goes on");
    assert!(
        !cluster.node(1).is_primary(),
        "the side without pc.ignore_sb waits"
    );
    cluster.node(0).submit(b"during".to_vec());
    cluster.run(10);
    let ordered_alone = cluster.ordered(0);
    assert_eq!(
        write_sets(&cluster),
        before + 2,
        "the write-set in flight and the one after were ordered"
    );
    assert!(
        ordered_alone
            .range(alone.seqno.next()..)
            .any(|(_, v)| v.starts_with("ws")),
        "the lone component orders write-sets: {ordered_alone:?}"
    );
    let old_uuid = cluster.node(1).me().uuid;
    let old_membership = cluster.node(1).me().raft_id;
    cluster.isolated.clear();
    cluster.run_until(|c| c.members_seen_by_all() == 2, 600);
    let view = cluster.last_view(1).unwrap();
    assert!(view.primary && view.members.len() == 2);
    assert_eq!(
        view.members[view.own_index.unwrap()].uuid,
        old_uuid,
        "a node keeps its UUID across a partition, as in Galera"
    );
    assert_ne!(
        view.membership, old_membership,
        "its views tell the new membership from the old"
    );
}

/// Without `pc.ignore_sb` a lone half of two never becomes primary on its own.
#[test]
fn without_ignoring_split_brain_a_lone_half_waits() {
    let mut cluster = Cluster::new(2);
    cluster.isolated.insert(1);
    cluster.run(400);
    assert!(!cluster.node(0).is_primary() && !cluster.node(1).is_primary());
}

#[test]
fn a_donor_that_cannot_send_tells_its_joiner_through_the_order() {
    let mut cluster = Cluster::new(3);
    let joiner = cluster.node(2).me().raft_id;
    cluster.node(1).transfer_failed(joiner);
    cluster.run(20);
    let told = |index: usize| {
        cluster.delivered[index]
            .iter()
            .filter(|d| matches!(d, Delivery::TransferFailed { donor } if donor == "node1"))
            .count()
    };
    assert_eq!(told(2), 1, "the joiner is told, once");
    assert_eq!(told(0) + told(1), 0, "nobody else is");
}

/// Two data members and an arbitrator (`trireme-arbitrator`: a member that announces
/// PRIMARY, never asks for state and reports nothing): the views show it as such, it never
/// pauses the group, and the group keeps ordering when any one of the three is lost.
#[test]
fn an_arbitrator_keeps_the_quorum_of_two_data_members() {
    let arbitrator = 2;
    for lost in [0, 1, arbitrator] {
        let mut cluster = Cluster::new(3);
        for data in [0, 1] {
            cluster.node(data).set_local_state(NodeState::Synced);
        }
        cluster.node(arbitrator).set_local_state(NodeState::Primary);
        cluster.run(10);
        let view = cluster.last_view(0).unwrap();
        let states: Vec<NodeState> = view.members.iter().map(|m| m.state).collect();
        assert_eq!(
            states.iter().filter(|s| **s == NodeState::Primary).count(),
            1,
            "the arbitrator shows as PRIMARY among SYNCED members: {states:?}"
        );
        cluster.node(arbitrator).report_apply_queue(1_000);
        cluster.run(10);
        assert!(
            !cluster.node(0).status().paused,
            "the arbitrator pauses nothing"
        );

        cluster.nodes[lost] = None;
        let writer = if lost == 0 { 1 } else { 0 };
        let written = |c: &Cluster| {
            c.ordered(writer)
                .values()
                .filter(|v| v.starts_with("ws"))
                .count()
        };
        let before = written(&cluster);
        cluster.node(writer).submit(vec![lost as u8]);
        cluster.run_until(|c| written(c) == before + 1, 400);
        assert!(
            cluster.node(writer).is_primary(),
            "lost {lost}: still primary"
        );
        let survivors: Vec<usize> = (0..3).filter(|&i| i != lost).collect();
        assert_same_history(&cluster, &survivors);
    }
}

/// `pc.ignore_quorum`: a member cut off from the other two of three goes on alone after a
/// suspect timeout, as with `pc.ignore_sb`, and the majority goes on too (a split brain the
/// DBA asked for).
#[test]
fn ignoring_quorum_a_member_cut_off_from_the_majority_goes_on_alone() {
    let mut cluster = Cluster::new(3);
    let mut ignoring = common::config();
    ignoring.ignore_quorum = true;
    cluster.node(2).reconfigure(&ignoring);
    cluster.run(20);
    cluster.isolated.insert(2);
    cluster.run_until(
        |c| {
            c.last_view(2)
                .is_some_and(|v| v.primary && v.members.len() == 1)
        },
        400,
    );
    assert!(cluster.node(0).is_primary() && cluster.node(1).is_primary());
    let mut strict = Cluster::new(3);
    strict.isolated.insert(2);
    strict.run(400);
    assert!(
        !strict.node(2).is_primary(),
        "without it, a lone third waits"
    );
}

#[test]
fn two_members_leaving_at_the_same_moment_both_get_out() {
    for leader_leaves_first in [true, false] {
        let mut cluster = Cluster::new(3);
        cluster.node(0).leave();
        cluster.run_until(|c| c.nodes[0].as_ref().unwrap().is_closed(), 600);
        cluster.nodes[0] = None;
        cluster.run(40);
        let leader = (1..3).find(|&n| cluster.node(n).is_leader()).unwrap();
        let other = 3 - leader;
        // Both decide to go in the same tick (a forced component both gave way to): neither
        // may hand the lead to the other one for ever.
        let order = if leader_leaves_first {
            [leader, other]
        } else {
            [other, leader]
        };
        for node in order {
            cluster.node(node).leave();
        }
        cluster.run_until(
            |c| {
                c.nodes[1..]
                    .iter()
                    .all(|n| n.as_ref().is_some_and(|n| n.is_closed()))
            },
            2000,
        );
    }
}
