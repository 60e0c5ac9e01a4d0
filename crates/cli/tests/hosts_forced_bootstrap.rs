//! A forced bootstrap on real hosts: node 1 is cut off from the other two, which stay
//! primary and take a write; the DBA forces node 1 with `pc.bootstrap=YES` anyway and
//! writes there. When the link comes back, nodes 2 and 3 learn that their history went on
//! without node 1's, say so and leave; restarted, they come back by SST with node 1's data.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::time::Duration;

use base::Uuid;
use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines, preflight,
    trireme_provider, value, wait_for, ClusterGuard,
};

const TABLE: &str = "trireme_forced.t";

fn up_hosts(guard: &ClusterGuard) -> Cluster {
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(3);
    opts.provider = Some(provider);
    opts.hosts = Some(true);
    opts.sst_method = Some(SstMethod::Rsync);
    Cluster::up(&opts).expect("the cluster of hosts comes up")
}

fn status_is(cluster: &Cluster, node: usize, status: &str) -> bool {
    cluster.node_status(node).var("wsrep_cluster_status") == Some(status)
}

#[test]
fn a_forced_bootstrap_wins_and_the_majority_that_wrote_meanwhile_rejoins_by_sst() {
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard);
    let network = cluster.network().unwrap();
    cluster
        .sql(
            1,
            &format!(
                "CREATE DATABASE trireme_forced; \
                 CREATE TABLE {TABLE} (id INT PRIMARY KEY, side VARCHAR(16)) ENGINE=InnoDB; \
                 INSERT INTO {TABLE} VALUES (1, 'before')"
            ),
        )
        .unwrap();
    wait_for("node 3 has the first row", Duration::from_secs(30), || {
        cluster
            .sql(3, &format!("SELECT COUNT(*) FROM {TABLE}"))
            .is_ok_and(|out| out.trim() == "1")
    });

    network.cut(1).unwrap();
    wait_for("node 1 non-Primary", Duration::from_secs(20), || {
        status_is(&cluster, 1, "non-Primary")
    });
    wait_for(
        "nodes 2 and 3 primary as two",
        Duration::from_secs(20),
        || {
            [2, 3].iter().all(|&n| {
                status_is(&cluster, n, "Primary")
                    && cluster.node_status(n).cluster_size() == Some(2)
            })
        },
    );
    cluster
        .sql(2, &format!("INSERT INTO {TABLE} VALUES (2, 'majority')"))
        .expect("the majority takes writes");

    let logs_before: Vec<usize> = (1..=3).map(|n| log_line_count(&cluster, n)).collect();
    cluster
        .sql(1, "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'")
        .expect("the request is taken");
    wait_for("node 1 primary alone", Duration::from_secs(10), || {
        status_is(&cluster, 1, "Primary") && cluster.node_status(1).cluster_size() == Some(1)
    });
    wait_for("node 1 writable", Duration::from_secs(10), || {
        cluster
            .sql(1, &format!("INSERT INTO {TABLE} VALUES (3, 'forced')"))
            .is_ok()
    });
    let forced_log = new_log_lines(&cluster, 1, logs_before[0]);
    assert!(
        forced_log.contains("Forced bootstrap (pc.bootstrap=YES)"),
        "node 1 does not log the unsafe step:\n{forced_log}"
    );

    network.heal(1).unwrap();
    for node in [2, 3] {
        wait_for(
            "the majority's nodes leave",
            Duration::from_secs(30),
            || status_is(&cluster, node, "Disconnected"),
        );
        let said = new_log_lines(&cluster, node, logs_before[node - 1]);
        assert!(
            said.contains("was bootstrapped by force (pc.bootstrap)")
                && said.contains("restart this node to rejoin by a full state transfer"),
            "node {node} does not say why it left:\n{said}"
        );
        let saved = cluster.grastate(node).unwrap().expect("a grastate.dat");
        assert_eq!(
            saved.position.cluster,
            Uuid::NIL,
            "node {node} must take an SST"
        );
    }
    assert!(status_is(&cluster, 1, "Primary"), "node 1 stays primary");

    for node in [2, 3] {
        cluster.stop_node(node).unwrap();
        let before = log_line_count(&cluster, node);
        cluster.start_node(node).unwrap();
        let rejoin = new_log_lines(&cluster, node, before);
        assert!(
            rejoin.contains("rsync SST completed on joiner"),
            "node {node} did not come back by a snapshot:\n{rejoin}"
        );
    }
    cluster.wait_synced(1, Some(3)).unwrap();
    assert_equal_at_rest(&cluster, &[TABLE]);
    let rows = value(
        &cluster,
        2,
        &format!("SELECT GROUP_CONCAT(side ORDER BY id) FROM {TABLE}"),
    );
    assert_eq!(
        rows, "before,forced",
        "the forced side's data is the cluster's"
    );
    cluster.down().unwrap();
}
