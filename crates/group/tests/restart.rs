//! A member of a component of two that was killed comes back under its saved identity: the
//! survivor, non-primary alone, elects itself with the returning member's vote, and the two
//! form the primary component again, as Galera's `pc.recovery` re-forms it. With three
//! members no identity is saved (a restarted process joins as a new member).

mod common;

use base::{seeded_rng, Nanos};
use common::{address, config, Cluster};
use group::{Contact, Delivery, GroupNode, StateRequest};

fn state_request() -> StateRequest {
    StateRequest {
        joiner: 0,
        request_id: 0,
        donor_names: String::new(),
        sst_request: b"rsync".to_vec(),
        ist_from: base::Seqno(3),
        ist_address: "node1:4568".into(),
    }
}

fn state_requests_seen(cluster: &Cluster, index: usize) -> usize {
    cluster.delivered[index]
        .iter()
        .filter(|d| matches!(d, Delivery::StateRequest { .. }))
        .count()
}

#[test]
fn a_killed_member_of_two_comes_back_and_the_component_is_primary_again() {
    let mut cluster = Cluster::new(2);
    cluster.node(0).submit(b"before".to_vec());
    // The first process of node 1 submits and asks for state: numbers the returning process
    // must not reuse.
    cluster.node(1).submit(b"first life".to_vec());
    cluster.node(1).request_state(state_request());
    cluster.run(20);
    assert_eq!(state_requests_seen(&cluster, 0), 1);
    let saved = cluster
        .node(1)
        .saved_membership()
        .expect("a member of two saves its identity");
    assert_eq!(saved.peer.0, cluster.node(0).me().raft_id);
    assert_eq!(saved.peer.1, address(0));
    // kill -9: the process and its Raft log are gone.
    cluster.nodes[1] = None;
    cluster.run_until(|c| c.last_view(0).is_some_and(|v| !v.primary), 400);
    assert!(
        cluster.node(0).saved_membership().is_none(),
        "non-primary: nothing to save"
    );
    let restarted = GroupNode::come_back(
        config(),
        &Contact::new("node1", &address(1)),
        &saved,
        vec![address(0)],
        seeded_rng(99),
        Nanos(cluster.now),
    );
    cluster.nodes[1] = Some(restarted);
    cluster.delivered[1].clear();
    cluster.run_until(|c| c.members_seen_by_all() == 2, 600);
    let view = cluster.last_view(1).unwrap();
    assert!(view.primary);
    assert_eq!(
        view.members[view.own_index.unwrap()].uuid,
        saved.uuid,
        "the same member came back"
    );
    // It lost its log: its own state comes by state transfer, and ordering goes on.
    cluster.node(1).request_state(state_request());
    cluster.run_until(|c| state_requests_seen(c, 0) == 2, 100);
    cluster.node(1).submit(b"after".to_vec());
    cluster.run_until(
        |c| c.ordered(0).values().any(|v| v.contains("97, 102, 116")),
        200,
    );
    assert!(cluster.delivered[1]
        .iter()
        .any(|d| matches!(d, Delivery::WriteSet { payload, .. } if payload == b"after")));
}

#[test]
fn nobody_to_come_back_to_means_joining_as_a_new_member() {
    let mut cluster = Cluster::new(2);
    let saved = cluster.node(1).saved_membership().unwrap();
    let survivor_uuid = cluster.node(0).me().uuid;
    // Both die; only node 1 restarts, under its saved identity, with a fresh node 0 founded
    // elsewhere that never knew it.
    cluster.nodes[0] = Some(GroupNode::bootstrap(
        config(),
        &Contact::new("node0", &address(0)),
        seeded_rng(5),
        Nanos(cluster.now),
    ));
    cluster.delivered[0].clear();
    cluster.nodes[1] = Some(GroupNode::come_back(
        config(),
        &Contact::new("node1", &address(1)),
        &saved,
        vec![address(0)],
        seeded_rng(98),
        Nanos(cluster.now),
    ));
    cluster.delivered[1].clear();
    cluster.run_until(|c| c.members_seen_by_all() == 2, 2_000);
    let view = cluster.last_view(1).unwrap();
    let me = view.members[view.own_index.unwrap()].uuid;
    assert_ne!(me, saved.uuid, "a new member, under a new identity");
    assert_ne!(cluster.node(0).me().uuid, survivor_uuid);
}

#[test]
fn a_member_of_three_saves_no_identity() {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        assert!(cluster.node(index).saved_membership().is_none());
    }
}
