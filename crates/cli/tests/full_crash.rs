//! A full crash on real MariaDB: every node SIGKILLed at once, then started again as an init
//! system would (each with the position `--wsrep-recover` finds, none told to bootstrap, no
//! file edited). The provider restores the primary component by itself from the last
//! primary view each node saved; a member that never comes back holds the restore, and the
//! log says which one.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::sync::Mutex;
use std::time::Duration;

use cli::crash_drill::{self, DrillOptions};
use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{
    assert_all_synced, log_line_count, new_cluster_dir, new_log_lines, preflight, trireme_provider,
    value, wait_for,
};

/// The tests of this file run one at a time: each runs a 3-node cluster, and both would
/// otherwise pick the same free port range.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

fn options(dir: &std::path::Path, base_port: u16) -> UpOptions {
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(dir);
    opts.nodes = Some(3);
    opts.base_port = Some(base_port);
    opts.provider = Some(provider);
    opts.sst_method = Some(SstMethod::Rsync);
    opts
}

#[test]
fn ten_full_crashes_under_bank_transfers_lose_nothing_and_leave_the_nodes_equal() {
    let _one = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let (guard, base_port) = new_cluster_dir();
    let up = options(guard.path(), base_port);
    let drill = DrillOptions {
        rounds: 10,
        load: Duration::from_secs(3),
        clients_per_node: 2,
        seed: 7,
    };
    let report = crash_drill::run(&up, &drill, &mut |line| eprintln!("drill: {line}"))
        .expect("the drill runs");
    eprint!("{}", report.summary());
    assert!(report.problems.is_empty(), "{}", report.summary());
    assert_eq!(report.back_after.len(), 10, "every round came back");
    assert!(report.acknowledged > 0);
    let cluster = Cluster::open(guard.path()).unwrap();
    assert_all_synced(&cluster);
    // Nobody was told to bootstrap but node 1 when the cluster was created; each restore
    // was the provider's own decision, by one founder.
    let count = |needle: &str| -> usize {
        (1..=3)
            .map(|node| {
                std::fs::read_to_string(cluster.config().error_log(node))
                    .unwrap()
                    .matches(needle)
                    .count()
            })
            .sum()
    };
    assert_eq!(count("Connecting with bootstrap option: 1"), 1);
    assert_eq!(count("Connecting with bootstrap option: 0"), 2 + 10 * 3);
    assert_eq!(
        count("Restoring the primary component after a full crash"),
        10,
        "one founder per crash"
    );
}

#[test]
fn a_restore_waits_for_the_member_that_is_missing_and_names_it() {
    let _one = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let (guard, base_port) = new_cluster_dir();
    let up = options(guard.path(), base_port);
    let cluster = Cluster::up(&up).expect("three nodes come up");
    cluster
        .sql(
            1,
            "CREATE DATABASE crash; CREATE TABLE crash.t (id INT PRIMARY KEY) ENGINE=InnoDB; \
             INSERT INTO crash.t VALUES (1), (2), (3)",
        )
        .unwrap();
    wait_for("node 3 has the rows", Duration::from_secs(30), || {
        cluster
            .sql(3, "SELECT COUNT(*) FROM crash.t")
            .is_ok_and(|out| out.trim() == "3")
    });
    let before: Vec<usize> = (1..=3).map(|node| log_line_count(&cluster, node)).collect();
    assert_eq!(cluster.kill_all().unwrap(), vec![1, 2, 3]);

    cluster.start_after_crash(&[1, 2]).unwrap();
    let missing = format!("127.0.0.1:{}", cluster.config().ports(3).group);
    let said = |node: usize| new_log_lines(&cluster, node, before[node - 1]);
    wait_for(
        "nodes 1 and 2 say whom they wait for",
        Duration::from_secs(60),
        || {
            [1, 2]
                .iter()
                .all(|node| said(*node).contains(&format!("waiting for {missing} to start")))
        },
    );
    // Held, not founded: neither node is ready, and neither started a component.
    std::thread::sleep(Duration::from_secs(3));
    for node in [1, 2] {
        let log = said(node);
        assert!(
            !log.contains("Restoring the primary component"),
            "node{node} founded a component without node 3:\n{log}"
        );
        assert!(log.contains("If a member is lost for good"), "{log}");
        assert!(cluster.pid(node).is_some(), "node{node} keeps running");
    }

    cluster.start_after_crash(&[3]).unwrap();
    wait_for(
        "all three Synced together",
        Duration::from_secs(120),
        || {
            (1..=3).all(|node| {
                let status = cluster.node_status(node);
                status.is_synced() && status.cluster_size() == Some(3)
            })
        },
    );
    for node in 1..=3 {
        assert_eq!(value(&cluster, node, "SELECT COUNT(*) FROM crash.t"), "3");
    }
}

#[test]
fn an_arbitrator_that_outlives_its_two_data_nodes_joins_the_component_they_restore() {
    let _one = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let (guard, base_port) = new_cluster_dir();
    let mut up = options(guard.path(), base_port);
    up.nodes = Some(2);
    up.arbitrator = Some(true);
    let cluster = Cluster::up(&up).expect("two nodes and their arbitrator come up");
    let arbitrator = cluster.arbitrator_pid().expect("the arbitrator runs");
    // The crash comes once the data nodes saved a last primary view with the arbitrator in
    // it (each saves it once it committed up to that view).
    let arbitrator_port = cluster
        .config()
        .ports(cluster.config().arbitrator_member())
        .group;
    let arbitrator_address = format!("127.0.0.1:{arbitrator_port}");
    wait_for(
        "the saved views list the arbitrator",
        Duration::from_secs(30),
        || {
            (1..=2).all(|node| {
                let path = cluster.config().saved_view_path(node);
                std::fs::read_to_string(path).is_ok_and(|view| view.contains(&arbitrator_address))
            })
        },
    );
    assert_eq!(cluster.kill_all().unwrap(), vec![1, 2]);

    // The arbitrator, still running in the old group, holds nothing up; once both data
    // nodes restored the component, it starts over and joins it.
    cluster.start_after_crash(&[1, 2]).unwrap();
    wait_for(
        "two data nodes and the arbitrator",
        Duration::from_secs(120),
        || {
            (1..=2).all(|node| {
                let status = cluster.node_status(node);
                status.is_synced() && status.cluster_size() == Some(3)
            })
        },
    );
    assert_eq!(
        cluster.arbitrator_pid(),
        Some(arbitrator),
        "the same process"
    );
    let log = std::fs::read_to_string(cluster.config().arbitrator_log()).unwrap();
    assert!(
        log.contains("starting over as a new member"),
        "the arbitrator does not say why it joined again:\n{log}"
    );
}
