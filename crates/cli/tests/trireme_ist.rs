//! Incremental state transfer on real MariaDB servers: a node that was away rejoins by IST
//! from a donor's gcache; a frozen gcache keeps IST possible where a small one would not;
//! an IST stream cut in the middle is resumed; without the freeze the joiner falls back to
//! SST and the log says which seqno was missing where; a corrupted gcache file is recovered
//! on restart without harm. While the first IST runs under a sysbench load, headless
//! Chromium opens the joiner's status page: it shows three members, the transfer's
//! progress and a chart with points (its screenshot is kept in the target directory).

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cli::{Cluster, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines, preflight,
    trireme_provider, value, ClusterGuard,
};

/// The tests of this file run one at a time: each runs a 3-node cluster, and both would
/// otherwise pick the same free port range.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

fn status_var(cluster: &Cluster, node: usize, name: &str) -> String {
    let row = value(cluster, node, &format!("SHOW STATUS LIKE '{name}'"));
    row.split('\t').nth(1).unwrap_or_default().to_string()
}

/// Commits `count` write-sets on `node`, one autocommit INSERT each.
fn commit_write_sets(cluster: &Cluster, node: usize, count: u64) {
    cluster
        .sql(node, &format!("CALL ist.fill({count})"))
        .unwrap_or_else(|e| panic!("node{node}: fill {count}: {e:#}"));
}

fn create_schema(cluster: &Cluster) {
    cluster
        .sql(
            1,
            "CREATE DATABASE ist;\n\
             CREATE TABLE ist.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;\n\
             DELIMITER //\n\
             CREATE PROCEDURE ist.fill(n INT) BEGIN DECLARE i INT DEFAULT 0; \
               WHILE i < n DO INSERT INTO ist.t (v) VALUES (i); SET i = i + 1; END WHILE; END//\n\
             DELIMITER ;\n",
        )
        .unwrap();
}

/// A 3-node cluster with the IST test schema and 100 write-sets, running alone (the guard
/// holds [`ONE_CLUSTER_AT_A_TIME`]). `provider_options` go to every node; `fault_cut` is
/// put into the servers' environment as `TRIREME_FAULT_CUT_IST_AFTER`.
fn ist_cluster(
    provider_options: Option<&str>,
    fault_cut: Option<&str>,
) -> (MutexGuard<'static, ()>, ClusterGuard, Cluster) {
    let one = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let provider = trireme_provider();
    preflight(&provider);
    let (guard, base_port) = new_cluster_dir();
    let mut options = UpOptions::new(guard.path());
    options.provider = Some(provider);
    options.base_port = Some(base_port);
    options.provider_options = provider_options.map(str::to_owned);
    options.metrics = Some(true);
    if let Some(after) = fault_cut {
        std::env::set_var("TRIREME_FAULT_CUT_IST_AFTER", after);
    }
    let up = Cluster::up(&options);
    std::env::remove_var("TRIREME_FAULT_CUT_IST_AFTER");
    let cluster = up.unwrap_or_else(|e| panic!("cluster up: {e:#}"));
    create_schema(&cluster);
    commit_write_sets(&cluster, 1, 100);
    (one, guard, cluster)
}

/// sysbench `oltp_write_only` on node 1: one table of 1,000 rows, 2 threads.
fn sysbench(cluster: &Cluster, action: &str, extra: &[&str]) {
    cluster
        .sql(1, "CREATE DATABASE IF NOT EXISTS sbtest")
        .unwrap();
    let output = std::process::Command::new("timeout")
        .args(["120", "sysbench", "oltp_write_only", "--db-driver=mysql"])
        .args(["--mysql-user=root", "--mysql-db=sbtest", "--tables=1"])
        .args(["--table-size=1000", "--threads=2"])
        .arg(format!("--mysql-socket={}", cluster.socket(1).display()))
        .args(extra)
        .arg(action)
        .output()
        .expect("sysbench runs (scripts/install-deps.sh installs it)");
    assert!(output.status.success(), "sysbench {action}: {output:?}");
}

/// Headless Chromium's rendering of `url` after `budget_ms` of the page's own time:
/// `--dump-dom` for the document, or `--screenshot=PATH` for a picture.
fn chromium(url: &str, profile: &Path, action: &str, budget_ms: u32) -> String {
    let output = std::process::Command::new("timeout")
        .args(["60", "chromium", "--headless", "--disable-gpu"])
        // As root Chromium runs only without its sandbox; the page is our own.
        .args(["--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(action)
        .arg(url)
        .output()
        .expect("chromium runs (scripts/install-deps.sh installs it)");
    assert!(output.status.success(), "chromium {action}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Once `node`'s IST is under way, Chromium opens its status page: three members, the
/// transfer's progress, and a transactions chart with points. The screenshot goes to
/// the target directory's `status-page-during-ist.png`.
fn the_page_shows_the_transfer(cluster: &Cluster, node: usize) {
    let address = cluster.config().metrics_address(node).expect("--metrics");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // The IST under way, and the node's own samples enough for a chart (one a second
        // since the provider started: an IST that begins at once would have too few).
        let page = cli::endpoint::status_json(&address);
        if page.is_ok_and(|page| {
            page["transfer"]["from"].is_i64()
                && page["samples"].as_array().is_some_and(|s| s.len() >= 3)
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} showed no IST in 120 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{address}/");
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page-during-ist.png");
    let profiles = [
        cluster.dir().join("chromium-dom"),
        cluster.dir().join("chromium-shot"),
    ];
    let shot = format!("--screenshot={}", screenshot.display());
    let (dom, _) = std::thread::scope(|scope| {
        let picture = scope.spawn(|| chromium(&url, &profiles[1], &shot, 2500));
        let dom = chromium(&url, &profiles[0], "--dump-dom", 2500);
        (dom, picture.join().unwrap())
    });
    assert_eq!(
        dom.matches("<tr data-member=").count(),
        3,
        "three members:\n{dom}"
    );
    assert!(
        dom.contains("id=\"transfer-progress\"") && dom.contains("IST from seqno"),
        "the transfer's progress is shown:\n{dom}"
    );
    let points: usize = dom
        .split("id=\"chart-tps\"")
        .nth(1)
        .and_then(|rest| rest.split("data-points=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(points >= 2, "the tps chart has {points} points:\n{dom}");
    let png = std::fs::read(&screenshot).unwrap_or_else(|e| panic!("{screenshot:?}: {e}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot"
    );
    eprintln!("status page during IST: {}", screenshot.display());
}

#[test]
fn a_node_rejoins_by_ist_and_survives_a_corrupt_gcache() {
    let (_one, guard, cluster) = ist_cluster(None, None);

    // 50,000 write-sets while node 3 is down: it comes back by IST, under a sysbench load,
    // and its status page shows the transfer meanwhile.
    cluster.stop_node(3).unwrap();
    let started = Instant::now();
    commit_write_sets(&cluster, 1, 50_000);
    eprintln!(
        "50,000 write-sets in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let before = log_line_count(&cluster, 3);
    sysbench(&cluster, "prepare", &[]);
    std::thread::scope(|scope| {
        let load = scope.spawn(|| sysbench(&cluster, "run", &["--time=20"]));
        let rejoin = scope.spawn(|| cluster.start_node(3));
        the_page_shows_the_transfer(&cluster, 3);
        rejoin
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("node 3 rejoins: {e:#}"));
        load.join().unwrap();
    });
    let log = new_log_lines(&cluster, 3, before);
    assert!(
        log.contains("Receiving IST: ") && log.contains("complete:"),
        "node 3 rejoined by IST:\n{log}"
    );
    assert!(
        !log.contains("state transfer by SST"),
        "node 3 did not fall back to SST:\n{log}"
    );
    assert_equal_at_rest(&cluster, &["ist.t"]);
    assert_eq!(
        status_var(&cluster, 3, "wsrep_last_committed"),
        status_var(&cluster, 1, "wsrep_last_committed")
    );
    let cached_from: i64 = status_var(&cluster, 1, "wsrep_local_cached_downto")
        .parse()
        .unwrap();
    assert!(
        cached_from > 0,
        "the donor reports how far back its gcache reaches"
    );

    // A damaged gcache on node 2: bytes flipped inside, the tail cut off. It restarts,
    // recovers what is intact, and rejoins.
    cluster.stop_node(2).unwrap();
    let cache_path = cluster.dir().join("node2/data/galera.cache");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&cache_path)
        .unwrap_or_else(|e| panic!("{}: {e}", cache_path.display()));
    for offset in [1 << 20, (1 << 20) + 4096, 2 << 20] {
        file.write_at(&[0x5a; 64], offset).unwrap();
    }
    file.set_len(6 << 20).unwrap();
    drop(file);
    commit_write_sets(&cluster, 1, 2_000);
    let before = log_line_count(&cluster, 2);
    cluster
        .start_node(2)
        .unwrap_or_else(|e| panic!("node 2 restarts with a damaged gcache: {e:#}"));
    let log = new_log_lines(&cluster, 2, before);
    assert!(
        log.contains("gcache recovered") && log.contains("discarded"),
        "node 2 says what it recovered and what it threw away:\n{log}"
    );
    assert!(!log.contains("got signal"), "no crash:\n{log}");
    assert_equal_at_rest(&cluster, &["ist.t"]);
    assert!(cluster.node_status(2).is_synced());
    cluster.down().unwrap();
    drop(guard);
}

#[test]
fn a_frozen_gcache_keeps_ist_possible_and_without_it_the_sst_says_why() {
    // About 4,000 small write-sets fit in the ring. Every server of this cluster breaks off
    // the first IST it sends after 1,000 records, as a donor dying mid-stream would (the
    // variable is read by the donor only).
    let (_one, guard, cluster) =
        ist_cluster(Some("gcache.size=1M; gcache.page_size=1M"), Some("1000"));

    // Freeze node 1's cache before node 3 goes away; node 2's is not frozen, so the group
    // must pick node 1 as the donor that holds the gap.
    cluster
        .sql(
            1,
            "SET GLOBAL wsrep_provider_options = 'gcache.freeze_purge_at_seqno = now'",
        )
        .unwrap();
    let options_text = value(&cluster, 1, "SELECT @@wsrep_provider_options");
    let frozen_at = options_text
        .split(';')
        .find_map(|entry| entry.trim().strip_prefix("gcache.freeze_purge_at_seqno = "))
        .unwrap_or_else(|| panic!("the freeze reads back: {options_text}"))
        .trim()
        .to_string();
    assert!(
        frozen_at.parse::<i64>().is_ok_and(|s| s > 0),
        "`now` reads back as the seqno it froze at, not {frozen_at:?}"
    );
    cluster.stop_node(3).unwrap();
    commit_write_sets(&cluster, 1, 15_000);
    let frozen_bytes: u64 = status_var(&cluster, 1, "wsrep_gcache_disk_bytes")
        .parse()
        .unwrap();
    assert!(
        frozen_bytes > 1 << 20,
        "the frozen cache spilled to pages ({frozen_bytes} bytes)"
    );
    let before = log_line_count(&cluster, 3);
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 rejoins: {e:#}"));
    let log = new_log_lines(&cluster, 3, before);
    assert!(
        log.contains("Receiving IST: ") && !log.contains("state transfer by SST"),
        "with the freeze, node 3 rejoined by IST:\n{log}"
    );
    assert!(
        log.contains("failed: IST stream truncated") && log.contains("asking again"),
        "the stream cut after 1,000 records was noticed and IST asked for again:\n{log}"
    );
    assert_equal_at_rest(&cluster, &["ist.t"]);

    // Thawing releases the space at the next write-sets.
    cluster
        .sql(
            1,
            "SET GLOBAL wsrep_provider_options = 'gcache.freeze_purge_at_seqno = -1'",
        )
        .unwrap();
    commit_write_sets(&cluster, 1, 100);
    let deadline = Instant::now() + Duration::from_secs(20);
    let released = loop {
        let bytes: u64 = status_var(&cluster, 1, "wsrep_gcache_disk_bytes")
            .parse()
            .unwrap();
        if bytes < frozen_bytes || Instant::now() > deadline {
            break bytes;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        released < frozen_bytes,
        "thawing released the pages: {released} bytes, frozen {frozen_bytes}"
    );

    // Without the freeze the gap is gone from every cache: SST, and the log says why.
    cluster.stop_node(3).unwrap();
    commit_write_sets(&cluster, 1, 15_000);
    let before = log_line_count(&cluster, 3);
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 rejoins by SST: {e:#}"));
    let log = new_log_lines(&cluster, 3, before);
    assert!(
        log.contains("state transfer by SST") && log.contains("is missing on this donor"),
        "node 3 fell back to SST and says which seqno was missing where:\n{log}"
    );
    assert_equal_at_rest(&cluster, &["ist.t"]);
    cluster.down().unwrap();
    drop(guard);
}

#[test]
fn within_its_disk_budget_the_gcache_keeps_what_an_absent_member_needs() {
    // The ring holds about 4,000 small write-sets; the budget many times that.
    let (_one, guard, cluster) = ist_cluster(
        Some("gcache.size=1M; gcache.page_size=1M; gcache.max_disk_bytes=64M"),
        None,
    );
    cluster.stop_node(3).unwrap();
    commit_write_sets(&cluster, 1, 15_000);
    let donor_log = cluster.error_log_tail(1, 400);
    assert!(
        donor_log.contains("node3 left the primary view: keeping seqnos from"),
        "the donors note that they keep node 3's gap:\n{donor_log}"
    );
    let before = log_line_count(&cluster, 3);
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 rejoins: {e:#}"));
    let log = new_log_lines(&cluster, 3, before);
    assert!(
        log.contains("Receiving IST: ") && !log.contains("state transfer by SST"),
        "with no freeze, the absent node 3 still rejoined by IST:\n{log}"
    );
    assert_equal_at_rest(&cluster, &["ist.t"]);
    cluster.down().unwrap();
    drop(guard);
}
