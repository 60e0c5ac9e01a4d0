//! The DBA's quorum controls on real hosts (every node in a network namespace of its own):
//! `pc.weight`, and a forced bootstrap with `pc.bootstrap=YES`.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use base::Uuid;
use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines, preflight,
    trireme_provider, value, wait_for, ClusterGuard,
};

const TABLE: &str = "trireme_forced.t";

/// The hosts' namespaces and bridge have fixed names: one cluster of hosts at a time.
static ONE_NETWORK_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_network() -> MutexGuard<'static, ()> {
    ONE_NETWORK_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

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

/// A cluster of 3 hosts whose node 1 created the test table and then ran `then`.
fn up_with_table(guard: &ClusterGuard, then: &str) -> Cluster {
    let cluster = up_hosts(guard);
    cluster
        .sql(
            1,
            &format!(
                "CREATE DATABASE trireme_forced; \
                 CREATE TABLE {TABLE} (id INT PRIMARY KEY, side VARCHAR(16)) ENGINE=InnoDB; \
                 {then}"
            ),
        )
        .unwrap();
    cluster
}

fn status_is(cluster: &Cluster, node: usize, status: &str) -> bool {
    cluster.node_status(node).var("wsrep_cluster_status") == Some(status)
}

fn cluster_weight(cluster: &Cluster, node: usize) -> Option<String> {
    cluster
        .node_status(node)
        .var("wsrep_cluster_weight")
        .map(str::to_owned)
}

/// MariaDB's `galera_pc_weight` across hosts: node 1 of 3 weighs 3, so when its link is
/// cut it keeps the primary component alone and takes writes, while nodes 2 and 3 go
/// non-primary; back at weight 1, the links restored, all three are one component again
/// with node 1's writes.
#[test]
fn a_node_that_outweighs_the_others_keeps_quorum_alone_when_cut_off() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_with_table(&guard, "SET GLOBAL wsrep_provider_options = 'pc.weight=3'");
    let network = cluster.network().unwrap();
    wait_for(
        "every node weighs the cluster 5",
        Duration::from_secs(20),
        || (1..=3).all(|n| cluster_weight(&cluster, n).as_deref() == Some("5")),
    );

    network.cut(1).unwrap();
    wait_for("nodes 2 and 3 non-Primary", Duration::from_secs(30), || {
        [2, 3]
            .iter()
            .all(|&n| status_is(&cluster, n, "non-Primary"))
    });
    for node in [2, 3] {
        assert_eq!(cluster_weight(&cluster, node).as_deref(), Some("0"));
    }
    wait_for("node 1 primary alone", Duration::from_secs(30), || {
        status_is(&cluster, 1, "Primary") && cluster.node_status(1).cluster_size() == Some(1)
    });
    assert_eq!(cluster_weight(&cluster, 1).as_deref(), Some("3"));
    cluster
        .sql(1, &format!("INSERT INTO {TABLE} VALUES (1, 'alone')"))
        .expect("node 1 alone takes writes");
    for node in [2, 3] {
        let refused = cluster
            .sql(node, &format!("SELECT COUNT(*) FROM {TABLE}"))
            .expect_err("a non-Primary node refuses queries");
        assert!(format!("{refused:#}").contains("1047"), "{refused:#}");
    }

    cluster
        .sql(1, "SET GLOBAL wsrep_provider_options = 'pc.weight=1'")
        .unwrap();
    network.heal(1).unwrap();
    for node in 1..=3 {
        cluster.wait_synced(node, Some(3)).unwrap();
    }
    wait_for(
        "every node weighs the cluster 3",
        Duration::from_secs(20),
        || (1..=3).all(|n| cluster_weight(&cluster, n).as_deref() == Some("3")),
    );
    assert_equal_at_rest(&cluster, &[TABLE]);
    assert_eq!(
        value(
            &cluster,
            3,
            &format!("SELECT side FROM {TABLE} WHERE id = 1")
        ),
        "alone"
    );
    cluster.down().unwrap();
}

/// A forced bootstrap: node 1 is cut off from the other two, which stay primary and take
/// a write; the DBA forces node 1 with `pc.bootstrap=YES` anyway and writes there. When the
/// link comes back, nodes 2 and 3 learn that their history went on without node 1's, say so
/// and leave; restarted, they come back by SST with node 1's data.
#[test]
fn a_forced_bootstrap_wins_and_the_majority_that_wrote_meanwhile_rejoins_by_sst() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_with_table(&guard, &format!("INSERT INTO {TABLE} VALUES (1, 'before')"));
    let network = cluster.network().unwrap();
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
