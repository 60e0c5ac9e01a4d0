//! `pc.weight`: a member that outweighs the others keeps the primary component alone, the
//! others never do without it; weights back at 1 make every member count once again; a
//! member the others depend on hands its vote over before it leaves.

mod common;

use base::NodeState;
use common::{config, Cluster};

/// A cluster of `size` members, all SYNCED (so that a member may be evicted: the group
/// never evicts the last holder of the data).
fn synced_cluster(size: usize) -> Cluster {
    let mut cluster = Cluster::new(size);
    for index in 0..size {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    cluster
}

/// Sets slot `index`'s `pc.weight` as `SET GLOBAL wsrep_provider_options` does.
fn set_weight(cluster: &mut Cluster, index: usize, weight: u8) {
    let mut changed = config();
    changed.weight = weight;
    cluster.node(index).reconfigure(&changed);
}

fn weight_seen(cluster: &mut Cluster, index: usize) -> u32 {
    cluster.node(index).status().cluster_weight
}

fn primary_of(cluster: &Cluster, index: usize, size: usize) -> bool {
    cluster
        .last_view(index)
        .is_some_and(|v| v.primary && v.members.len() == size)
}

fn ordered_on(cluster: &Cluster, index: usize, payload: &[u8]) -> bool {
    let digest = format!("ws:{payload:?}");
    cluster.ordered(index).values().any(|v| *v == digest)
}

/// MariaDB's `galera_3nodes.galera_pc_weight`, in the group layer.
#[test]
fn a_member_that_outweighs_the_others_keeps_the_primary_component_alone() {
    let mut cluster = synced_cluster(3);
    assert_eq!(weight_seen(&mut cluster, 1), 3);
    // Node 1 is not the leader: leadership moves to it, then the others stop counting.
    set_weight(&mut cluster, 1, 3);
    cluster.run_until(
        |c| {
            (0..3).all(|i| c.nodes[i].as_ref().unwrap().status().cluster_weight == 5)
                && c.nodes[1].as_ref().unwrap().is_leader()
        },
        500,
    );
    cluster.run(50);
    cluster.isolated.insert(1);
    cluster.run_until(|c| primary_of(c, 1, 1), 600);
    assert_eq!(weight_seen(&mut cluster, 1), 3);
    cluster.node(1).submit(b"alone".to_vec());
    cluster.run_until(|c| ordered_on(c, 1, b"alone"), 50);
    cluster.run(300);
    for index in [0, 2] {
        assert!(
            !cluster.node(index).is_primary(),
            "node {index} is primary without the member that outweighs it"
        );
        assert_eq!(
            weight_seen(&mut cluster, index),
            0,
            "Galera says 0 there too"
        );
        // Learners, which send nothing unasked, still find each other: a non-primary
        // component of two, as Galera reports it.
        let view = cluster.last_view(index).expect("a view");
        assert!(!view.primary);
        assert_eq!(view.members.len(), 2, "node {index} sees {view:?}");
    }
    // Back to 1 while alone, then the links: everyone rejoins, and every member counts
    // once again, so a cut of node 1 now leaves the other two primary.
    set_weight(&mut cluster, 1, 1);
    cluster.run_until(
        |c| c.nodes[1].as_ref().unwrap().status().cluster_weight == 1,
        100,
    );
    cluster.isolated.clear();
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    assert_eq!(weight_seen(&mut cluster, 0), 3);
    cluster.run(50);
    cluster.isolated.insert(1);
    cluster.run_until(|c| primary_of(c, 0, 2) && primary_of(c, 2, 2), 600);
    cluster.node(0).submit(b"the majority again".to_vec());
    cluster.run_until(|c| ordered_on(c, 2, b"the majority again"), 50);
}

/// Two nodes, the first of weight 2 (`galera_sr_kill_slave`, `MDEV-38201`): the second
/// dies, and the first goes on alone.
#[test]
fn of_two_nodes_the_heavier_goes_on_when_the_other_dies() {
    let mut cluster = synced_cluster(2);
    set_weight(&mut cluster, 0, 2);
    cluster.run_until(
        |c| c.nodes[1].as_ref().unwrap().status().cluster_weight == 3,
        300,
    );
    cluster.run(50);
    cluster.nodes[1] = None;
    cluster.node(0).submit(b"while the other is down".to_vec());
    cluster.run_until(|c| ordered_on(c, 0, b"while the other is down"), 100);
    cluster.run_until(|c| primary_of(c, 0, 1), 600);
}

/// MariaDB's `galera.galera_shutdown_nonprim`: `SET GLOBAL` of the weight returns once the
/// member's status shows it in force, and the other member is cut off at once, with no grace
/// period. The heavier member stays primary alone, whether it led (the voters move in the tick
/// the weight is ordered) or not (leadership must come to it first). (This network carries
/// every message of a tick within it, so the window between the weight ordered and the voters
/// moved is shut here; the MTR test, on real links, is the one that found it open.)
#[test]
fn once_a_weight_is_in_force_a_cut_right_after_finds_the_quorum_moved() {
    for heavy in [0, 1] {
        let mut cluster = synced_cluster(2);
        assert!(
            cluster.node(0).is_leader(),
            "slot 0 founded the group and leads it"
        );
        assert_eq!(cluster.node(heavy).status().weight_in_force, Some(1));
        set_weight(&mut cluster, heavy, 2);
        assert_eq!(
            cluster.node(heavy).status().weight_in_force,
            Some(1),
            "in force before the group ordered it"
        );
        cluster.run_until(
            |c| c.nodes[heavy].as_ref().unwrap().status().weight_in_force == Some(2),
            300,
        );
        let light = 1 - heavy;
        cluster.isolated.insert(light);
        cluster.run_until(|c| primary_of(c, heavy, 1), 600);
        cluster.node(heavy).submit(b"alone".to_vec());
        cluster.run_until(|c| ordered_on(c, heavy, b"alone"), 100);
        assert!(!cluster.node(light).is_primary());
        assert_eq!(cluster.node(light).status().weight_in_force, None);
    }
}

/// With equal weights, the same cut leaves the heavier side waiting: two halves of one.
#[test]
fn of_two_equal_nodes_neither_goes_on_alone() {
    let mut cluster = synced_cluster(2);
    cluster.nodes[1] = None;
    cluster.node(0).submit(b"never alone".to_vec());
    cluster.run(400);
    assert!(!ordered_on(&cluster, 0, b"never alone"));
    assert!(!cluster.node(0).is_primary());
}

/// A member of weight 0 never counts: with one of the other two cut off, the last one is
/// half of what counts, and waits.
#[test]
fn a_member_of_weight_zero_never_makes_a_majority() {
    let mut cluster = synced_cluster(3);
    set_weight(&mut cluster, 2, 0);
    cluster.run_until(
        |c| c.nodes[0].as_ref().unwrap().status().cluster_weight == 2,
        300,
    );
    cluster.run(50);
    let leader = (0..2).find(|i| cluster.node(*i).is_leader()).unwrap();
    let other = 1 - leader;
    cluster.isolated.insert(leader);
    cluster.run(400);
    assert!(!cluster.node(other).is_primary());
    assert!(!cluster.node(2).is_primary());
}

/// The only voter leaving cleanly hands its vote over first: the others stay primary.
#[test]
fn the_member_the_others_depend_on_hands_its_vote_over_before_it_leaves() {
    let mut cluster = synced_cluster(3);
    set_weight(&mut cluster, 0, 3);
    cluster.run_until(
        |c| c.nodes[2].as_ref().unwrap().status().cluster_weight == 5,
        300,
    );
    cluster.run(50);
    cluster.node(0).leave();
    cluster.run_until(|c| primary_of(c, 1, 2) && primary_of(c, 2, 2), 1_000);
    cluster.node(2).submit(b"after it left".to_vec());
    cluster.run_until(|c| ordered_on(c, 1, b"after it left"), 100);
    assert_eq!(weight_seen(&mut cluster, 1), 2);
}

/// A member that comes to outweigh the other two while one of them is down: the voters move
/// from three to that one member in a single joint change, which it and the live voter
/// commit. One change at a time, the move stopped halfway whenever the live voter was demoted
/// first, leaving two voters of which one was down. Both of the others are tried as the one
/// down.
#[test]
fn the_voters_move_to_a_heavier_member_while_another_is_down() {
    for down_rank in 0..2 {
        let mut cluster = synced_cluster(3);
        let heavy = (0..3).find(|&i| cluster.node(i).is_leader()).unwrap();
        let heavy_id = cluster.node(heavy).me().raft_id;
        let down = (0..3).filter(|&i| i != heavy).nth(down_rank).unwrap();
        let live = 3 - heavy - down;
        cluster.nodes[down] = None;
        set_weight(&mut cluster, heavy, 3);
        cluster.run_until(
            |c| c.nodes[heavy].as_ref().unwrap().voters() == [heavy_id],
            300,
        );
        cluster.run_until(
            |c| c.nodes[heavy].as_ref().unwrap().status().weight_in_force == Some(3),
            100,
        );
        cluster.node(heavy).submit(b"voted by one".to_vec());
        cluster.run_until(|c| ordered_on(c, live, b"voted by one"), 100);
        // The member now counts alone: cut off from the live one, it still orders.
        cluster.isolated.insert(heavy);
        cluster.node(heavy).submit(b"alone".to_vec());
        cluster.run_until(|c| ordered_on(c, heavy, b"alone"), 300);
    }
}
