//! Helpers shared by the real-MariaDB cluster tests.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use cli::{find_free_base_port, Cluster, Comparison, RestOptions, MARIADBD};

/// Nodes in every test cluster.
pub(crate) const NODES: usize = 3;

/// Stops whatever still runs in the cluster directory, then removes it, even when the test
/// fails half-way.
pub(crate) struct ClusterGuard {
    pub(crate) dir: tempfile::TempDir,
}

impl ClusterGuard {
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if thread::panicking() {
            // The directory goes with the guard: keep what explains the failure in the
            // test's output.
            let logs = (1..=9)
                .flat_map(|node| {
                    [
                        format!("node{node}/error.log"),
                        format!("node{node}/mariadbd.out"),
                    ]
                })
                .chain(["arbitrator/arbitrator.log".to_owned()]);
            for name in logs {
                let log = self.path().join(&name);
                let Ok(text) = std::fs::read_to_string(&log) else {
                    continue;
                };
                if let Some(keep) = std::env::var_os("TRIREME_TEST_KEEP_LOGS") {
                    // For a failure reproduced by hand: the whole log, not its tail.
                    let kept = Path::new(&keep).join(name.replace('/', "-"));
                    let _ = std::fs::write(kept, &text);
                }
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(60)..];
                eprintln!("---- last {} lines of {} ----", tail.len(), log.display());
                for line in tail {
                    eprintln!("{line}");
                }
            }
        }
        if let Ok(cluster) = Cluster::open(self.path()) {
            if let Err(e) = cluster.down() {
                eprintln!("cleanup: {e:#}");
            }
        }
    }
}

/// The Trireme provider under test: `TRIREME_TEST_PROVIDER`, else `libtrireme.so` next to
/// the test binary.
pub(crate) fn trireme_provider() -> PathBuf {
    std::env::var_os("TRIREME_TEST_PROVIDER").map_or_else(
        || cli::default_provider().expect("libtrireme.so next to the test binary"),
        PathBuf::from,
    )
}

pub(crate) fn preflight(provider: &Path) {
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
pub(crate) fn value(cluster: &Cluster, node: usize, stmt: &str) -> String {
    cluster
        .sql(node, stmt)
        .unwrap_or_else(|e| panic!("node{node}: {stmt}: {e:#}"))
        .trim()
        .to_string()
}

/// `(row count, CHECKSUM TABLE)` of the test table on `node`.
pub(crate) fn table_state(cluster: &Cluster, node: usize) -> (u64, String) {
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

/// How long the cluster tests wait for rest before a comparison.
const REST: RestOptions = RestOptions {
    settle: Duration::from_secs(1),
    timeout: Duration::from_secs(120),
};

/// Compares `tables` on every node at rest (all Synced at one unchanging seqno, then
/// CHECKSUM TABLE); a difference fails the test with the first differing rows.
pub(crate) fn assert_equal_at_rest(cluster: &Cluster, tables: &[&str]) -> Comparison {
    let nodes: Vec<usize> = (1..=cluster.nodes()).collect();
    assert_nodes_equal_at_rest(cluster, &nodes, tables)
}

/// [`assert_equal_at_rest`] for some of the nodes (the others may be down).
pub(crate) fn assert_nodes_equal_at_rest(
    cluster: &Cluster,
    nodes: &[usize],
    tables: &[&str],
) -> Comparison {
    let tables: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    let comparison = cluster
        .compare_at_rest(nodes, Some(&tables), REST)
        .unwrap_or_else(|e| panic!("no comparison at rest: {e:#}"));
    assert!(comparison.equal(), "{}", comparison.report());
    comparison
}

/// Waits for rest, then checks that every node has `rows` rows in the test table and the
/// same checksum; returns the checksum.
pub(crate) fn wait_consistent(cluster: &Cluster, rows: u64) -> String {
    let comparison = assert_equal_at_rest(cluster, &["trireme_test.t"]);
    for node in 1..=NODES {
        assert_eq!(table_state(cluster, node).0, rows, "rows on node{node}");
    }
    comparison.tables[0].checksums[0]
        .clone()
        .expect("the table exists")
}

pub(crate) fn assert_all_synced(cluster: &Cluster) {
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

/// A fresh cluster directory and a free port range.
pub(crate) fn new_cluster_dir() -> (ClusterGuard, u16) {
    let dir = tempfile::Builder::new()
        .prefix("trireme-test-")
        .tempdir()
        .unwrap();
    let start = 17000 + u16::try_from(std::process::id() % 15).unwrap() * 1000;
    let base_port = find_free_base_port(NODES, start)
        .or_else(|| find_free_base_port(NODES, 17000))
        .expect("no free port range below 32768");
    (ClusterGuard { dir }, base_port)
}

/// Polls `done` every 200 ms until it holds, failing the test after `limit`; returns how
/// long it took.
pub(crate) fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(200));
    }
    start.elapsed()
}

/// Makes the test certificates in `dir` with the real openssl tool
/// (`scripts/make-test-certs.sh` says which).
pub(crate) fn make_certs(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-test-certs.sh");
    let status = std::process::Command::new(script)
        .arg(dir)
        .status()
        .expect("make-test-certs.sh");
    assert!(status.success(), "make-test-certs.sh failed");
}

/// How many lines `node`'s error log has now, to read what it adds with [`new_log_lines`].
pub(crate) fn log_line_count(cluster: &Cluster, node: usize) -> usize {
    cluster.error_log_tail(node, usize::MAX).lines().count()
}

/// The lines of `node`'s error log after the first `skip`.
pub(crate) fn new_log_lines(cluster: &Cluster, node: usize, skip: usize) -> String {
    let log = cluster.error_log_tail(node, usize::MAX);
    log.lines().skip(skip).collect::<Vec<_>>().join("\n")
}
