//! Flow control's grace: a queue over the stop limit asks for a pause only once it has stayed
//! over for `FLOW_STOP_GRACE_NS`, or at once when it grows past one more limit.

mod common;

use base::{Nanos, NodeState};
use common::{address, Cluster};
use group::FLOW_STOP_GRACE_NS;

/// The test members' `gcs.fc_limit` of 4, scaled for 3 members (as `GroupConfig` does).
const STOP_ABOVE: u64 = 7;

/// A queue past this asks for the pause without the grace: one more limit.
const AT_ONCE_ABOVE: u64 = 2 * STOP_ABOVE;

/// A 3-member group, all SYNCED; returns it and a member that is not the leader.
fn synced() -> (Cluster, usize) {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    let leader = (0..3).find(|&i| cluster.node(i).is_leader()).unwrap();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    (cluster, follower)
}

/// Moves the cluster's clock to `now`, polls member `index` then and hands what it sends to
/// the members it is for.
fn poll_and_send(cluster: &mut Cluster, index: usize, now: u64) {
    cluster.now = now;
    let (outgoing, _) = cluster.node(index).poll(Nanos(now));
    for message in outgoing {
        let to = (0..3).find(|&i| address(i) == message.address).unwrap();
        let _ = cluster.inject(to, &message.bytes);
    }
}

#[test]
fn a_queue_over_the_limit_for_less_than_the_grace_pauses_no_one() {
    let (mut cluster, member) = synced();
    let start = cluster.now;
    cluster.node(member).report_apply_queue(STOP_ABOVE + 1);
    poll_and_send(&mut cluster, member, start);
    assert!(
        !cluster.node(member).status().stop_requested,
        "in its grace"
    );
    assert_eq!(
        cluster.node(member).flow_deadline(),
        Some(Nanos(start + FLOW_STOP_GRACE_NS)),
        "the member wants a poll when the grace ends"
    );
    assert_eq!(
        cluster.node(member).flow_triggers().stop_above,
        Some(AT_ONCE_ABOVE),
        "meanwhile only growth past the at-once level must wake it"
    );
    cluster.node(member).report_apply_queue(STOP_ABOVE);
    poll_and_send(&mut cluster, member, start + FLOW_STOP_GRACE_NS - 1);
    assert_eq!(
        cluster.node(member).flow_deadline(),
        None,
        "the grace ended"
    );
    cluster.node(member).report_apply_queue(STOP_ABOVE + 1);
    poll_and_send(&mut cluster, member, start + FLOW_STOP_GRACE_NS);
    assert!(
        !cluster.node(member).status().stop_requested,
        "over again: a new grace, not the rest of the old one"
    );
    cluster.node(member).report_apply_queue(0);
    cluster.run(10);
    for index in 0..3 {
        let status = cluster.node(index).status();
        assert!(!status.paused, "node {index}");
        assert_eq!(status.flow.paused_ns, 0, "node {index}: never paused");
    }
    assert_eq!(cluster.node(member).status().flow.sent, 0, "no stop sent");
}

#[test]
fn a_queue_that_stays_over_the_limit_through_the_grace_pauses_the_group() {
    let (mut cluster, member) = synced();
    let start = cluster.now;
    cluster.node(member).report_apply_queue(STOP_ABOVE + 1);
    poll_and_send(&mut cluster, member, start);
    poll_and_send(&mut cluster, member, start + FLOW_STOP_GRACE_NS - 1);
    assert!(!cluster.node(member).status().stop_requested);
    poll_and_send(&mut cluster, member, start + FLOW_STOP_GRACE_NS);
    assert!(
        cluster.node(member).status().stop_requested,
        "over the limit for the whole grace"
    );
    assert_eq!(cluster.node(member).flow_deadline(), None);
    cluster.run(1);
    assert!(cluster.node(0).status().paused, "the group is paused");
    assert_eq!(cluster.node(member).status().flow.sent, 1);
}

#[test]
fn a_queue_past_one_more_limit_pauses_the_group_at_once() {
    let (mut cluster, member) = synced();
    let start = cluster.now;
    cluster.node(member).report_apply_queue(AT_ONCE_ABOVE);
    poll_and_send(&mut cluster, member, start);
    assert!(
        !cluster.node(member).status().stop_requested,
        "at the at-once level itself, the grace still runs"
    );
    cluster.node(member).report_apply_queue(AT_ONCE_ABOVE + 1);
    poll_and_send(&mut cluster, member, start + 1);
    assert!(
        cluster.node(member).status().stop_requested,
        "past it, no grace"
    );
    cluster.run(1);
    assert!(cluster.node(0).status().paused);
}

#[test]
fn no_grace_runs_while_another_member_holds_the_group_stopped() {
    let (mut cluster, member) = synced();
    let other = (0..3).find(|&i| i != member).unwrap();
    let start = cluster.now;
    cluster.node(member).report_apply_queue(STOP_ABOVE + 1);
    poll_and_send(&mut cluster, member, start);
    assert!(
        cluster.node(member).flow_deadline().is_some(),
        "in its grace"
    );
    cluster.node(other).report_apply_queue(AT_ONCE_ABOVE + 1);
    poll_and_send(&mut cluster, other, start + 1);
    poll_and_send(&mut cluster, member, start + 2);
    assert!(
        cluster.node(member).status().paused,
        "the other's stop holds"
    );
    assert_eq!(
        cluster.node(member).flow_deadline(),
        None,
        "no stop could follow the grace now, so no poll is due"
    );
    poll_and_send(&mut cluster, member, start + FLOW_STOP_GRACE_NS);
    assert!(!cluster.node(member).status().stop_requested);
    cluster.node(other).report_apply_queue(0);
    let status = |c: &Cluster, i: usize| c.nodes[i].as_ref().unwrap().status();
    cluster.run_until(|c| !status(c, member).paused, 5);
    // Still over the limit once the other resumed: its own grace, then its stop.
    cluster.run_until(|c| status(c, member).stop_requested, 3);
}
