//! Consistency voting on real MariaDB: a row deleted on node 3 alone (`wsrep_on=OFF`), then
//! updated cluster-wide. Node 3 fails to apply the update, the members vote, and node 3,
//! alone in its verdict, leaves the cluster with Galera's words in its log and its saved
//! position cleared; its server stays up. Nodes 1 and 2 go on, equal. Restarted, node 3
//! comes back by a full snapshot and all three are equal.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::time::Duration;

use base::Uuid;
use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, assert_nodes_equal_at_rest, log_line_count, new_cluster_dir,
    new_log_lines, preflight, trireme_provider, value, wait_for,
};

const TABLE: &str = "trireme_vote.t";

fn rows(cluster: &Cluster, node: usize) -> String {
    value(cluster, node, &format!("SELECT COUNT(*) FROM {TABLE}"))
}

#[test]
fn a_node_that_alone_fails_to_apply_leaves_and_the_majority_goes_on() {
    let (guard, base_port) = new_cluster_dir();
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(3);
    opts.base_port = Some(base_port);
    opts.provider = Some(provider);
    opts.sst_method = Some(SstMethod::Rsync);
    let cluster = Cluster::up(&opts).expect("three nodes come up");
    cluster
        .sql(
            1,
            &format!(
                "CREATE DATABASE trireme_vote; \
                 CREATE TABLE {TABLE} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
                 INSERT INTO {TABLE} VALUES (1, 1), (2, 2)"
            ),
        )
        .unwrap();
    wait_for("node 3 has both rows", Duration::from_secs(30), || {
        cluster
            .sql(3, &format!("SELECT COUNT(*) FROM {TABLE}"))
            .is_ok_and(|out| out.trim() == "2")
    });
    let log_before = log_line_count(&cluster, 3);

    cluster
        .sql(
            3,
            &format!("SET SESSION wsrep_on=OFF; DELETE FROM {TABLE} WHERE id = 1"),
        )
        .unwrap();
    cluster
        .sql(1, &format!("UPDATE {TABLE} SET v = 10 WHERE id = 1"))
        .expect("the update commits where the row exists");

    wait_for("node 3 disconnected", Duration::from_secs(60), || {
        cluster.node_status(3).var("wsrep_cluster_status") == Some("Disconnected")
    });
    let since = new_log_lines(&cluster, 3, log_before);
    assert!(
        since.contains("Inconsistency detected: Inconsistent by consensus on"),
        "node 3 does not say why it left:\n{since}"
    );
    assert!(cluster.pid(3).is_some(), "node 3's server stays up");
    let saved = cluster
        .grastate(3)
        .unwrap()
        .expect("node 3 has a grastate.dat");
    assert_eq!(
        saved.position.cluster,
        Uuid::NIL,
        "node 3's saved position is cleared, so that it comes back by a snapshot"
    );
    for node in [1, 2] {
        wait_for(
            "a primary component of two",
            Duration::from_secs(30),
            || {
                let status = cluster.node_status(node);
                status.cluster_size() == Some(2)
                    && status.var("wsrep_cluster_status") == Some("Primary")
            },
        );
    }
    cluster
        .sql(2, &format!("INSERT INTO {TABLE} VALUES (3, 3)"))
        .expect("the majority takes writes");
    assert_nodes_equal_at_rest(&cluster, &[1, 2], &[TABLE]);
    assert_eq!(rows(&cluster, 1), "3");

    cluster.stop_node(3).unwrap();
    let log_before = log_line_count(&cluster, 3);
    cluster.start_node(3).unwrap();
    let rejoin = new_log_lines(&cluster, 3, log_before);
    assert!(
        rejoin.contains("rsync SST completed on joiner"),
        "node 3 did not come back by a snapshot:\n{rejoin}"
    );
    assert_equal_at_rest(&cluster, &[TABLE]);
    assert_eq!(
        value(&cluster, 3, &format!("SELECT v FROM {TABLE} WHERE id = 1")),
        "10"
    );
}
