//! A forced bootstrap at runtime (`pc.bootstrap=YES`): a member outside the primary
//! component founds one of its own; once the others can hear it, they give way, joining it
//! when they hold nothing past the fork, and told their data diverged when they do.

mod common;

use base::{NodeState, Seqno};
use common::{assert_same_history, Cluster};
use group::forced::ForcedFork;
use group::recovery::RestartState;
use group::wire::{self, WireMessage};
use group::{Delivery, ForcedBootstrap, ReceiveError};

/// A cluster of `size` data nodes, all SYNCED.
fn data_cluster(size: usize) -> Cluster {
    let mut cluster = Cluster::new(size);
    for index in 0..size {
        let node = cluster.node(index);
        node.hold_data(RestartState::default());
        node.set_local_state(NodeState::Synced);
    }
    cluster.run(10);
    cluster
}

fn diverged(cluster: &Cluster, index: usize) -> Vec<&str> {
    cluster.delivered[index]
        .iter()
        .filter_map(|d| match d {
            Delivery::HistoryDiverged { message } => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

fn primary_of(cluster: &Cluster, index: usize, size: usize) -> bool {
    cluster
        .last_view(index)
        .is_some_and(|v| v.primary && v.members.len() == size)
}

/// Three members; node 0 cut off, the other two a primary component that orders one more
/// write-set, then node 0 forced to found its own (still cut off).
fn forced_after_the_majority_went_on() -> (Cluster, ForcedFork) {
    let mut cluster = data_cluster(3);
    cluster.isolated.insert(0);
    cluster.run_until(
        |c| primary_of(c, 1, 2) && !c.nodes[0].as_ref().unwrap().is_primary(),
        600,
    );
    cluster.node(1).submit(b"only on the majority".to_vec());
    cluster.run(20);
    let ForcedBootstrap::Founded(fork) = cluster.node(0).force_bootstrap() else {
        panic!("node 0 is not primary: it may be forced");
    };
    (cluster, fork)
}

/// MariaDB's `galera_3nodes.galera_pc_bootstrap`: every member cut off from the others, so
/// none is primary; node 1 is forced; when the links come back, the other two join it by
/// IST (they hold nothing past the fork) and all three agree on the history.
#[test]
fn a_forced_member_founds_and_the_others_join_it_when_they_hold_nothing_past_the_fork() {
    let mut cluster = data_cluster(3);
    cluster.node(0).submit(b"before".to_vec());
    cluster.run(20);
    let history = cluster.last_view(0).unwrap().cluster;
    // As `gmcast.isolate=1` on each: the node knows, and its links are cut.
    cluster.isolated.extend([0, 1, 2]);
    for index in 0..3 {
        cluster.node(index).set_isolated(true);
    }
    cluster.run_until(
        |c| (0..3).all(|i| !c.nodes[i].as_ref().unwrap().is_primary()),
        400,
    );
    let forced = cluster.node(1).force_bootstrap();
    let ForcedBootstrap::Founded(fork) = forced else {
        panic!("{forced:?}");
    };
    assert_eq!(fork.founder, cluster.node(1).me().raft_id);
    cluster.run(2);
    let founded = cluster.last_view(1).unwrap().clone();
    assert!(founded.primary && founded.members.len() == 1);
    assert_eq!(founded.cluster, history, "the same history goes on");
    assert_eq!(founded.seqno, fork.fork_after.next());
    assert!(
        !founded.founding,
        "it carries on what it holds: no new state"
    );
    assert_eq!(
        cluster.node(1).force_bootstrap(),
        ForcedBootstrap::AlreadyPrimary
    );
    // Still isolated, it orders what it is given: it is its own leader.
    cluster.node(1).submit(b"after the fork".to_vec());
    cluster.run_until(
        |c| {
            c.ordered(1)
                .values()
                .any(|v| v.contains(&format!("{:?}", b"after the fork")))
        },
        20,
    );
    cluster.isolated.clear();
    for index in 0..3 {
        cluster.node(index).set_isolated(false);
    }
    cluster.run_until(|c| c.members_seen_by_all() == 3, 3_000);
    for index in [0, 2] {
        assert!(diverged(&cluster, index).is_empty(), "node {index}");
    }
    let joined_at = cluster.ordered(1).keys().last().copied().unwrap();
    cluster.node(0).submit(b"all three again".to_vec());
    cluster.run_until(
        |c| (0..3).all(|i| c.ordered(i).keys().last().is_some_and(|s| *s > joined_at)),
        200,
    );
    // The others' histories: what they had before the fork, then (from their join on)
    // what the forced component ordered.
    let after_join = |index: usize| -> Vec<(Seqno, String)> {
        cluster
            .ordered(index)
            .into_iter()
            .filter(|(seqno, _)| *seqno > joined_at)
            .collect()
    };
    assert_eq!(after_join(0), after_join(1));
    assert_eq!(after_join(2), after_join(1));
}

/// The case: node 0 cut off from a majority that stays primary and orders more; the
/// DBA forces node 0 anyway. When the link comes back, the majority's members learn that
/// their data went past the fork, and are told so (the engine then leaves, and the server
/// needs a full state transfer); node 0 stays primary.
#[test]
fn members_of_a_majority_that_went_on_are_told_their_history_diverged() {
    let (mut cluster, fork) = forced_after_the_majority_went_on();
    cluster.node(0).submit(b"only on the forced side".to_vec());
    cluster.run(20);
    cluster.isolated.clear();
    cluster.run_until(
        |c| !diverged(c, 1).is_empty() && !diverged(c, 2).is_empty(),
        400,
    );
    let said = diverged(&cluster, 1);
    assert_eq!(
        said.len(),
        1,
        "said once, though the notices keep coming: {said:?}"
    );
    assert!(
        said[0].contains(&format!("after seqno {}", fork.fork_after))
            && said[0].contains("restart this node to rejoin by a full state transfer"),
        "{}",
        said[0]
    );
    cluster.run(300);
    assert_eq!(diverged(&cluster, 1).len(), 1);
    assert!(
        primary_of(&cluster, 0, 1),
        "the forced component is untouched"
    );
    assert_same_history(&cluster, &[0]);
}

/// A member that may not be forced says why, and stays as it was.
#[test]
fn a_member_without_data_or_state_is_not_forced() {
    let mut cluster = Cluster::new(2);
    cluster.isolated.insert(1);
    cluster.run_until(|c| !c.nodes[0].as_ref().unwrap().is_primary(), 400);
    // No data: the arbitrator's case.
    assert!(matches!(
        cluster.node(0).force_bootstrap(),
        ForcedBootstrap::Refused(reason) if reason.contains("no data")
    ));
    cluster.node(0).hold_data(RestartState::default());
    cluster.node(0).set_local_state(NodeState::Joiner);
    assert!(matches!(
        cluster.node(0).force_bootstrap(),
        ForcedBootstrap::Refused(reason) if reason.contains("state transfer")
    ));
    cluster.run(50);
    assert!(!cluster.node(0).is_primary());
}

/// A notice only counts from the founder it names, about this history, from a peer this
/// node knew: a stranger cannot make members leave their component.
#[test]
fn a_forged_notice_is_refused_and_changes_nothing() {
    let mut cluster = data_cluster(2);
    let history = cluster.last_view(0).unwrap().cluster;
    let member = cluster.node(1).me().raft_id;
    let notice = |from: u64, founder: u64, cluster_uuid| {
        let fork = ForcedFork {
            fork_after: Seqno(1),
            founder,
        };
        wire::encode(
            from,
            &WireMessage::Superseded {
                cluster: cluster_uuid,
                fork,
            },
        )
    };
    let cases = [
        (notice(4242, 4242, history), "never a peer"),
        (
            notice(member, 4242, history),
            "does not come from its founder",
        ),
        (
            notice(member, member, base::Uuid([9; 16])),
            "another history",
        ),
    ];
    for (bytes, why) in cases {
        match cluster.inject(0, &bytes) {
            Err(ReceiveError::BadNotice(reason)) => assert!(reason.contains(why), "{reason}"),
            other => panic!("{why}: {other:?}"),
        }
    }
    cluster.run(200);
    assert!(primary_of(&cluster, 0, 2) && primary_of(&cluster, 1, 2));
    assert!(diverged(&cluster, 0).is_empty());
}

/// A member left outside any primary component, still listing the founder among its
/// members, and holding a write-set past the fork: the founder's answer to its Raft traffic
/// tells it its history diverged before telling it it was removed, so it never rejoins by
/// IST with data the forced component does not have.
#[test]
fn a_member_that_went_past_the_fork_never_rejoins_through_the_founders_removal_notice() {
    let mut cluster = data_cluster(3);
    let founder = cluster.node(0).me().raft_id;
    cluster.isolated.insert(0);
    // Ordered by the other two before they evict node 0.
    cluster.node(1).submit(b"past the fork".to_vec());
    cluster.run_until(
        |c| {
            c.ordered(2)
                .values()
                .any(|v| v.contains(&format!("{:?}", b"past the fork")))
        },
        50,
    );
    cluster.isolated.extend([1, 2]);
    cluster.run_until(
        |c| (0..3).all(|i| !c.nodes[i].as_ref().unwrap().is_primary()),
        400,
    );
    assert!(
        cluster.node(1).status().members == 3,
        "node 0 is still listed by node 1, which runs no eviction outside the component"
    );
    assert!(matches!(
        cluster.node(0).force_bootstrap(),
        ForcedBootstrap::Founded(_)
    ));
    cluster.run(5);
    cluster.isolated.clear();
    cluster.run_until(
        |c| !diverged(c, 1).is_empty() && !diverged(c, 2).is_empty(),
        400,
    );
    cluster.run(300);
    for index in [1, 2] {
        let view = cluster.last_view(index).unwrap();
        assert!(
            !(view.primary && view.members.iter().any(|m| m.name == "node0")),
            "node {index} joined the forced component with diverged data: {view:?}"
        );
    }
    assert_eq!(cluster.node(0).me().raft_id, founder);
    assert!(primary_of(&cluster, 0, 1));
}

/// The members of a majority told their history diverged leave (the node engine makes
/// them, on `HistoryDiverged`), both of them, however soon after the forced founder's
/// eviction the links come back (the hosts test heals within a second of it).
#[test]
fn the_members_told_their_history_diverged_all_leave() {
    for heal_after in [0, 1, 3, 10, 30] {
        let (mut cluster, _) = forced_after_the_majority_went_on();
        cluster.run(heal_after);
        cluster.isolated.clear();
        let mut left = [false; 3];
        let mut ticks = 0;
        while ![1, 2].iter().all(|i| cluster.node(*i).is_closed()) {
            assert!(
                ticks < 3000,
                "heal after {heal_after}: not both out in 3000 ticks (left: {left:?})"
            );
            for i in [1, 2] {
                if !left[i] && !diverged(&cluster, i).is_empty() {
                    left[i] = true;
                    cluster.node(i).leave();
                }
            }
            cluster.run(1);
            ticks += 1;
        }
    }
}
