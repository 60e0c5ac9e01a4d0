//! A real 3-node MariaDB cluster driven through the `cli` library: create, replicate,
//! stop, restart from the saved state, replicate again, stop.
//!
//! The provider is Galera (`/usr/lib/galera/libgalera_smm.so`) unless
//! `TRIREME_TEST_PROVIDER` names another library (Trireme's, once it exists). Missing
//! MariaDB or provider is a failure, not a skip: run scripts/setup.sh.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use cli::{find_free_base_port, Cluster, UpOptions, MARIADBD};

const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";
const NODES: usize = 3;

fn provider() -> PathBuf {
    std::env::var_os("TRIREME_TEST_PROVIDER").map_or_else(|| PathBuf::from(GALERA), PathBuf::from)
}

/// Stops whatever still runs in the cluster directory, then removes it, even when the test
/// fails half-way.
struct ClusterGuard {
    dir: tempfile::TempDir,
}

impl ClusterGuard {
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if let Ok(cluster) = Cluster::open(self.path()) {
            if let Err(e) = cluster.down() {
                eprintln!("cleanup: {e:#}");
            }
        }
    }
}

fn preflight() {
    let provider = provider();
    assert!(
        Path::new(MARIADBD).is_file(),
        "{MARIADBD} is missing: run scripts/setup.sh to install MariaDB 10.11 and Galera 4"
    );
    assert!(
        provider.is_file(),
        "the provider {} is missing: run scripts/setup.sh to install MariaDB 10.11 and Galera 4",
        provider.display()
    );
    cli::check_mariadb_installed().expect("MariaDB tools missing: run scripts/setup.sh");
}

/// The single value a query returns.
fn value(cluster: &Cluster, node: usize, stmt: &str) -> String {
    cluster
        .sql(node, stmt)
        .unwrap_or_else(|e| panic!("node{node}: {stmt}: {e:#}"))
        .trim()
        .to_string()
}

/// `(row count, CHECKSUM TABLE)` of the test table on `node`.
fn table_state(cluster: &Cluster, node: usize) -> (u64, String) {
    let count = value(cluster, node, "SELECT COUNT(*) FROM trireme_test.t")
        .parse()
        .unwrap();
    let checksum = value(cluster, node, "CHECKSUM TABLE trireme_test.t");
    let checksum = checksum
        .split('\t')
        .nth(1)
        .expect("table<TAB>checksum")
        .to_string();
    (count, checksum)
}

/// Waits (at most 60 s: replication applies asynchronously on the other nodes) until every
/// node has `rows` rows and all checksums agree; returns the checksum.
fn wait_consistent(cluster: &Cluster, rows: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let states: Vec<(u64, String)> = (1..=NODES).map(|n| table_state(cluster, n)).collect();
        if states.iter().all(|s| *s == states[0]) && states[0].0 == rows {
            return states[0].1.clone();
        }
        assert!(
            Instant::now() < deadline,
            "nodes disagree after 60 s: {states:?}"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

fn assert_all_synced(cluster: &Cluster) {
    let status = cluster.status();
    let table = cli::format_status_table(&status);
    eprintln!("{table}");
    for node in &status {
        assert!(node.is_synced(), "node{} not synced:\n{table}", node.node);
        assert_eq!(
            node.cluster_size(),
            Some(NODES),
            "node{} size:\n{table}",
            node.node
        );
        assert_eq!(node.var("wsrep_cluster_status"), Some("Primary"));
    }
}

#[test]
fn three_node_cluster_replicates_and_restarts() {
    preflight();
    let started = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("trireme-test-")
        .tempdir()
        .unwrap();
    let guard = ClusterGuard { dir };
    let start = 17000 + u16::try_from(std::process::id() % 15).unwrap() * 1000;
    let base_port = find_free_base_port(NODES, start)
        .or_else(|| find_free_base_port(NODES, 17000))
        .expect("no free port range below 32768");

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
            g.seqno >= committed,
            "saved seqno {} < committed {committed}",
            g.seqno
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
