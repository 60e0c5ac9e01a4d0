//! Consistency votes through real group members: a member that failed to apply a seqno
//! votes with its error's digest, the others answer with success, and every voter learns the
//! same decision; a voter that leaves no longer holds a ballot open.

mod common;

use base::{NodeState, Seqno};
use common::Cluster;
use group::vote::{error_code, VoteCode, SUCCESS};
use group::Delivery;

/// The decisions slot `index` was handed: seqno, winner, its own verdict.
fn decisions(cluster: &Cluster, index: usize) -> Vec<(Seqno, VoteCode, VoteCode)> {
    cluster.delivered[index]
        .iter()
        .filter_map(|d| match d {
            Delivery::VoteDecided {
                seqno,
                winner,
                mine,
                ..
            } => Some((*seqno, *winner, *mine)),
            _ => None,
        })
        .collect()
}

fn requests(cluster: &Cluster, index: usize) -> Vec<Seqno> {
    cluster.delivered[index]
        .iter()
        .filter_map(|d| match d {
            Delivery::VoteRequested { seqno, .. } => Some(*seqno),
            _ => None,
        })
        .collect()
}

/// Three synced members with one write-set ordered; its seqno.
fn synced_three_with_a_write_set() -> (Cluster, Seqno) {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.node(0).submit(b"row".to_vec());
    cluster.run_until(|c| (0..3).all(|i| !c.ordered(i).is_empty()), 200);
    cluster.run(10);
    let seqno = *cluster.ordered(0).keys().last().unwrap();
    (cluster, seqno)
}

#[test]
fn the_odd_member_out_loses_and_everyone_learns_the_same_decision() {
    let (mut cluster, seqno) = synced_three_with_a_write_set();
    let failure = error_code(b"Table 't1' doesn't exist, Error_code: 1146;");
    cluster.node(2).vote(seqno, failure);
    cluster.run_until(
        |c| !requests(c, 0).is_empty() && !requests(c, 1).is_empty(),
        100,
    );
    assert!(requests(&cluster, 2).is_empty(), "the opener is not asked");
    assert!(
        decisions(&cluster, 0).is_empty(),
        "undecided until all voted"
    );
    cluster.node(0).vote(seqno, SUCCESS);
    cluster.node(1).vote(seqno, SUCCESS);
    cluster.run_until(|c| (0..3).all(|i| !decisions(c, i).is_empty()), 100);
    assert_eq!(decisions(&cluster, 0), vec![(seqno, SUCCESS, SUCCESS)]);
    assert_eq!(decisions(&cluster, 2), vec![(seqno, SUCCESS, failure)]);
    // Resends after the decision change nothing.
    cluster.node(2).vote(seqno, failure);
    cluster.run(20);
    assert_eq!(decisions(&cluster, 1).len(), 1);
}

#[test]
fn a_majority_that_failed_alike_wins_over_the_one_that_succeeded() {
    let (mut cluster, seqno) = synced_three_with_a_write_set();
    let failure = error_code(b"Duplicate entry '3' for key 'PRIMARY', Error_code: 1062;");
    cluster.node(1).vote(seqno, failure);
    cluster.node(2).vote(seqno, failure);
    cluster.node(0).vote(seqno, SUCCESS);
    cluster.run_until(|c| (0..3).all(|i| !decisions(c, i).is_empty()), 100);
    for index in 0..3 {
        assert_eq!(decisions(&cluster, index)[0].1, failure, "node {index}");
    }
    assert_eq!(decisions(&cluster, 0)[0].2, SUCCESS, "node 0 lost");
}

#[test]
fn a_voter_that_leaves_no_longer_holds_the_ballot_open() {
    let (mut cluster, seqno) = synced_three_with_a_write_set();
    let failure = error_code(b"some error");
    cluster.node(0).vote(seqno, failure);
    cluster.node(1).vote(seqno, SUCCESS);
    cluster.run(20);
    assert!(decisions(&cluster, 0).is_empty(), "node 2 has not voted");
    cluster.node(2).leave();
    cluster.run_until(|c| !decisions(c, 0).is_empty(), 300);
    // One failure against one success: success wins the tie.
    assert_eq!(decisions(&cluster, 0), vec![(seqno, SUCCESS, failure)]);
    assert_eq!(decisions(&cluster, 1), vec![(seqno, SUCCESS, SUCCESS)]);
}
