//! A real 3-node MariaDB cluster driven through the `cli` library: create, replicate,
//! stop, restart from the saved state, replicate again, stop.
//!
//! The provider is Galera (`/usr/lib/galera/libgalera_smm.so`) unless
//! `GALERA_TEST_PROVIDER` names another library. Missing
//! MariaDB or provider is a failure, not a skip: run scripts/setup.sh.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::path::{Path, PathBuf};
use std::time::Instant;

use cli::{Cluster, UpOptions};

mod common;
use common::{assert_all_synced, new_cluster_dir, preflight, value, wait_consistent, NODES};

const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";

fn provider() -> PathBuf {
    std::env::var_os("GALERA_TEST_PROVIDER").map_or_else(|| PathBuf::from(GALERA), PathBuf::from)
}

#[test]
fn three_node_cluster_replicates_and_restarts() {
    preflight(&provider());
    let started = Instant::now();
    let (guard, base_port) = new_cluster_dir();

    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(NODES);
    opts.provider = Some(provider());
    opts.base_port = Some(base_port);
    let cluster = Cluster::up(&opts).unwrap_or_else(|e| panic!("cluster up: {e:#}"));
    assert_all_synced(&cluster);
    assert!(
        Cluster::up(&UpOptions::new(guard.path())).is_ok(),
        "up on a running cluster is a no-op"
    );

    // DDL on node 1, writes on nodes 2 and 3 (several transactions each).
    cluster
        .sql(
            1,
            "CREATE DATABASE trireme_test; CREATE TABLE trireme_test.t \
             (id INT PRIMARY KEY, node INT NOT NULL, v VARCHAR(64) NOT NULL)",
        )
        .unwrap();
    for (node, first) in [(2, 1), (3, 1001)] {
        for batch in 0..5 {
            let rows: Vec<String> = (0..10)
                .map(|i| {
                    let id = first + batch * 10 + i;
                    format!("({id}, {node}, 'row {id} from node{node}')")
                })
                .collect();
            let stmt = format!("INSERT INTO trireme_test.t VALUES {}", rows.join(","));
            cluster
                .sql(node, &stmt)
                .unwrap_or_else(|e| panic!("node{node}: {e:#}"));
        }
    }
    let checksum = wait_consistent(&cluster, 100);
    let committed = cluster.status()[0].last_committed().unwrap();

    // Clean stop: node 1 stops last and is marked safe to bootstrap.
    cluster.down().unwrap();
    assert!(
        (1..=NODES).all(|n| cluster.pid(n).is_none()),
        "every node stopped"
    );
    if provider() == Path::new(GALERA) {
        let g = cluster.grastate(1).unwrap().expect("node1 grastate.dat");
        assert!(g.safe_to_bootstrap, "node1 stopped last: {g:?}");
        assert!(
            g.position.seqno.0 >= committed,
            "saved seqno {} < committed {committed}",
            g.position.seqno.0
        );
    }

    // Restart from the directory alone: same data everywhere, replication works again.
    let cluster = Cluster::up(&UpOptions::new(guard.path()))
        .unwrap_or_else(|e| panic!("cluster restart: {e:#}"));
    assert_all_synced(&cluster);
    assert_eq!(
        wait_consistent(&cluster, 100),
        checksum,
        "data survived the restart"
    );
    cluster
        .sql(
            3,
            "INSERT INTO trireme_test.t VALUES (5000, 3, 'after restart')",
        )
        .unwrap();
    wait_consistent(&cluster, 101);
    assert_eq!(
        value(&cluster, 1, "SELECT v FROM trireme_test.t WHERE id = 5000"),
        "after restart"
    );

    cluster.down().unwrap();
    assert!(
        (1..=NODES).all(|n| cluster.pid(n).is_none()),
        "every node stopped"
    );
    eprintln!("cluster test took {:.1} s", started.elapsed().as_secs_f64());
    drop(guard);
}
