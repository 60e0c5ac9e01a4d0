//! A full crash: every member's process dies at once, and each starts again with the last
//! primary view it saved and the position its server recovered. The most advanced member
//! founds the primary component again, from its own position; the others join it. While a
//! member of the view is missing, nobody founds anything.

mod common;

use base::{seeded_rng, Gtid, Nanos, Seqno};
use common::{address, config, Cluster};
use group::recovery::{LastPrimaryView, RestartState};
use group::wire::{self, WireMessage};
use group::{Contact, Delivery, GroupNode, View};

/// Every slot's saved view, from the last primary view it delivered.
fn saved_views(cluster: &Cluster, size: usize) -> Vec<LastPrimaryView> {
    (0..size)
        .map(|index| {
            let saved = cluster.delivered[index].iter().rev().find_map(|d| match d {
                Delivery::View(view) => LastPrimaryView::from_view(view),
                _ => None,
            });
            saved.expect("a primary view")
        })
        .collect()
}

/// Starts slot `index` again as a data node with `view` and `position`.
fn restart_with(cluster: &mut Cluster, index: usize, view: &LastPrimaryView, position: Seqno) {
    let mut node = GroupNode::join(
        config(),
        &Contact::new(&format!("node{index}"), &address(index)),
        view.members.clone(),
        seeded_rng(500 + index as u64),
        Nanos(cluster.now),
    );
    node.hold_data(RestartState {
        last_view: Some(view.clone()),
        position: Some(Gtid {
            cluster: view.cluster,
            seqno: position,
        }),
    });
    cluster.nodes[index] = Some(node);
    cluster.delivered[index].clear();
}

fn primary_views(cluster: &Cluster, index: usize) -> Vec<&View> {
    cluster.delivered[index]
        .iter()
        .filter_map(|d| match d {
            Delivery::View(view) if view.primary => Some(view),
            _ => None,
        })
        .collect()
}

#[test]
fn after_a_full_crash_the_most_advanced_member_founds_and_the_others_join_it() {
    let mut cluster = Cluster::new(3);
    cluster.node(0).submit(b"before the crash".to_vec());
    cluster.run(30);
    let views = saved_views(&cluster, 3);
    let last = cluster.ordered(0).keys().last().copied().unwrap();
    assert!(views.iter().all(|v| v.members == views[0].members));
    // The servers recovered different positions: node 2 committed the most.
    let positions = [last, Seqno(last.0 + 3), Seqno(last.0 + 5)];
    for index in 0..3 {
        cluster.nodes[index] = None;
    }
    for index in 0..3 {
        restart_with(&mut cluster, index, &views[index], positions[index]);
    }
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    let founding = primary_views(&cluster, 2)[0].clone();
    assert!(founding.founding, "node 2 founded the component");
    assert_eq!(founding.members.len(), 1);
    assert_eq!(
        founding.cluster, views[2].cluster,
        "the same history goes on"
    );
    assert_eq!(
        founding.seqno,
        Seqno(last.0 + 6),
        "right after node 2's position"
    );
    assert!(founding.view_id > views[2].view_id);
    for index in [0, 1] {
        let first = primary_views(&cluster, index)[0];
        assert!(!first.founding, "node {index} joined");
    }
    // Ordering goes on in the restored component.
    cluster.node(0).submit(b"after".to_vec());
    cluster.run_until(
        |c| (0..3).all(|i| c.ordered(i).values().any(|v| v.contains("97, 102, 116"))),
        300,
    );
}

#[test]
fn while_a_member_of_the_last_view_is_missing_nobody_founds() {
    let mut cluster = Cluster::new(3);
    let views = saved_views(&cluster, 3);
    let last = cluster.ordered(0).keys().last().copied().unwrap();
    for index in 0..3 {
        cluster.nodes[index] = None;
    }
    restart_with(&mut cluster, 0, &views[0], last);
    restart_with(&mut cluster, 1, &views[1], last);
    cluster.run(600);
    for index in [0, 1] {
        assert!(
            primary_views(&cluster, index).is_empty(),
            "node {index} must not form a component without node 2"
        );
    }
    // Node 2 comes back later: the component is restored then.
    restart_with(&mut cluster, 2, &views[2], last);
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    let founders = (0..3)
        .filter(|i| primary_views(&cluster, *i)[0].founding)
        .collect::<Vec<_>>();
    assert_eq!(founders, vec![0], "a tie goes to the smallest address");
}

#[test]
fn a_restarted_member_joins_a_live_component_instead_of_restoring() {
    let mut cluster = Cluster::new(3);
    let views = saved_views(&cluster, 3);
    let last = cluster.ordered(0).keys().last().copied().unwrap();
    cluster.nodes[2] = None;
    // Far ahead by its own account: still it joins the live component, founding nothing.
    restart_with(&mut cluster, 2, &views[2], Seqno(last.0 + 100));
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    assert!(primary_views(&cluster, 2).iter().all(|v| !v.founding));
    assert_eq!(cluster.node(0).status().members, 3);
}

#[test]
fn an_arbitrator_left_in_the_old_group_starts_over_and_joins_the_restored_one() {
    let mut cluster = Cluster::new(3);
    // Nodes 0 and 1 hold data; node 2 holds none: the arbitrator.
    for index in [0, 1] {
        cluster.node(index).hold_data(RestartState::default());
    }
    let views = saved_views(&cluster, 3);
    let last = cluster.ordered(0).keys().last().copied().unwrap();
    let stranded_as = cluster.node(2).me().raft_id;
    cluster.nodes[0] = None;
    cluster.nodes[1] = None;
    cluster.run_until(|c| c.last_view(2).is_some_and(|v| !v.primary), 400);
    // The data nodes are back before the arbitrator has been out of the primary component
    // for a suspect timeout; once it has, it asks them where they stand.
    restart_with(&mut cluster, 0, &views[0], last);
    restart_with(&mut cluster, 1, &views[1], Seqno(last.0 + 2));
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    assert_ne!(
        cluster.node(2).me().raft_id,
        stranded_as,
        "the arbitrator joined the restored component as a new member"
    );
    assert!(
        primary_views(&cluster, 1)[0].founding,
        "node 1 was the most advanced"
    );
}

#[test]
fn a_forged_probe_does_not_make_a_cut_off_arbitrator_leave_its_group() {
    let mut cluster = Cluster::new(3);
    for index in [0, 1] {
        cluster.node(index).hold_data(RestartState::default());
    }
    let stranded_as = cluster.node(2).me().raft_id;
    // Cut off, not crashed: its group lives on without it.
    cluster.isolated.insert(2);
    cluster.run_until(|c| c.last_view(2).is_some_and(|v| !v.primary), 400);
    cluster.run(150);
    // It probes the members of its group, and none can answer through the cut; nor does a
    // forged probe in a member's name prove anything.
    let probe = WireMessage::Probe {
        reply_to: address(0),
        challenge: 1,
    };
    let _ = cluster.inject(2, &wire::encode(777, &probe));
    cluster.run(300);
    assert_eq!(
        cluster.node(2).me().raft_id,
        stranded_as,
        "it stayed a member"
    );
}
