//! Streaming replication on real MariaDB servers: a 200,000-row DELETE replicated in
//! 1,000-row fragments commits, and rolls back, on every node; a certified fragment wins
//! against conflicting work on another node; an originator killed mid-transaction leaves no
//! trace on the survivors, nor on itself once it rejoined and a view changed; the write-set limits refuse a
//! transaction with the server's error text and leave the cluster untouched.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use cli::{Cluster, Signal, UpOptions};

mod common;
use common::{
    assert_nodes_equal_at_rest, new_cluster_dir, preflight, trireme_provider, value, NODES,
};

/// Rows in the test table: the 200,000-row transactions leave some behind.
const ROWS: u64 = 250_000;

/// The session settings of a streaming transaction with 1,000-row fragments.
const STREAM_ROWS_1000: &str =
    "SET SESSION wsrep_trx_fragment_unit = 'rows'; SET SESSION wsrep_trx_fragment_size = 1000;";

fn status_var(cluster: &Cluster, node: usize, name: &str) -> i64 {
    let row = value(cluster, node, &format!("SHOW STATUS LIKE '{name}'"));
    let number = row.split('\t').nth(1).unwrap_or_default();
    number
        .parse()
        .unwrap_or_else(|_| panic!("node{node}: {name} = {number:?} is not a number"))
}

fn fragments_stored(cluster: &Cluster, node: usize) -> u64 {
    value(
        cluster,
        node,
        "SELECT COUNT(*) FROM mysql.wsrep_streaming_log",
    )
    .parse()
    .unwrap()
}

/// The listed nodes are equal at rest in `table`, which has `rows` rows; returns the
/// checksum.
fn assert_equal_rows(cluster: &Cluster, nodes: &[usize], table: &str, rows: u64) -> String {
    let comparison = assert_nodes_equal_at_rest(cluster, nodes, &[table]);
    for &node in nodes {
        let count: u64 = value(cluster, node, &format!("SELECT COUNT(*) FROM {table}"))
            .parse()
            .unwrap();
        assert_eq!(count, rows, "rows of {table} on node{node}");
    }
    comparison.tables[0].checksums[0]
        .clone()
        .expect("the table exists")
}

/// [`assert_equal_rows`], and no listed node stores fragments or counts an open
/// streaming transaction.
fn assert_equal_and_clean(cluster: &Cluster, nodes: &[usize], table: &str, rows: u64) -> String {
    let checksum = assert_equal_rows(cluster, nodes, table, rows);
    for &node in nodes {
        // The streaming log is written by the appliers; wait for the last of them.
        let deadline = Instant::now() + Duration::from_secs(30);
        while fragments_stored(cluster, node) > 0 {
            assert!(
                Instant::now() < deadline,
                "node{node} still stores fragments of a finished transaction"
            );
            thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            status_var(cluster, node, "wsrep_streaming_transactions"),
            0,
            "node{node} still counts an open streaming transaction"
        );
    }
    checksum
}

/// Runs `statement` on `node` of the cluster in `dir` on a thread of its own; the result is
/// the client's output or its error text.
fn in_background(
    dir: PathBuf,
    node: usize,
    statement: String,
) -> thread::JoinHandle<Result<String, String>> {
    thread::spawn(move || {
        let cluster = Cluster::open(&dir).map_err(|e| format!("{e:#}"))?;
        cluster.sql(node, &statement).map_err(|e| format!("{e:#}"))
    })
}

/// Polls `node`'s streaming log until it holds at least `at_least` fragments (at most 60
/// s); returns the largest count seen and the largest `wsrep_streaming_fragments`.
fn wait_for_fragments(cluster: &Cluster, node: usize, at_least: u64) -> (u64, i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stored = fragments_stored(cluster, node);
        let counted = status_var(cluster, node, "wsrep_streaming_fragments");
        if stored >= at_least {
            return (stored, counted);
        }
        assert!(
            Instant::now() < deadline,
            "node{node} stored only {stored} fragments after 60 s (waited for {at_least})"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

fn refill(cluster: &Cluster) {
    cluster
        .sql(
            1,
            &format!(
                "USE sr; INSERT IGNORE INTO t SELECT seq, seq % 97, RPAD(seq, 60, 'x') \
                 FROM seq_1_to_{ROWS}"
            ),
        )
        .unwrap();
}

fn error_text(result: Result<String, String>) -> String {
    match result {
        Ok(out) => panic!("the statement succeeded: {out}"),
        Err(error) => error,
    }
}

#[test]
fn streaming_transactions_commit_roll_back_win_conflicts_and_die_with_their_node() {
    let provider = trireme_provider();
    preflight(&provider);
    let (guard, base_port) = new_cluster_dir();
    let mut options = UpOptions::new(guard.path());
    options.provider = Some(provider);
    options.base_port = Some(base_port);
    let cluster = Cluster::up(&options).unwrap_or_else(|e| panic!("cluster up: {e:#}"));
    let dir = guard.path().to_path_buf();
    let all: Vec<usize> = (1..=NODES).collect();
    cluster
        .sql(
            1,
            "CREATE DATABASE sr; \
             CREATE TABLE sr.t (id INT PRIMARY KEY, k INT, c CHAR(60)) ENGINE=InnoDB; \
             CREATE TABLE sr.r (id INT PRIMARY KEY) ENGINE=InnoDB;",
        )
        .unwrap();
    refill(&cluster);
    let full = assert_equal_and_clean(&cluster, &all, "sr.t", ROWS);

    // 1. A 200,000-row DELETE in 1,000-row fragments commits. While it runs, node 2 holds
    //    its fragments; afterwards nobody does.
    let replicated_before = status_var(&cluster, 1, "wsrep_local_fragments_replicated");
    let started = Instant::now();
    let delete = in_background(
        dir.clone(),
        1,
        format!(
            "{STREAM_ROWS_1000} START TRANSACTION; DELETE FROM sr.t WHERE id <= 200000; \
             DO SLEEP(1); COMMIT;"
        ),
    );
    let (stored, counted) = wait_for_fragments(&cluster, 2, 5);
    delete
        .join()
        .unwrap()
        .expect("the streaming DELETE commits");
    eprintln!(
        "streaming DELETE of 200,000 rows committed in {:.1} s; node 2 held {stored} fragments \
         ({counted} counted by the provider) when looked at",
        started.elapsed().as_secs_f64()
    );
    assert!(counted >= 1, "node 2's provider counted the open fragments");
    let replicated =
        status_var(&cluster, 1, "wsrep_local_fragments_replicated") - replicated_before;
    assert!(
        replicated >= 199,
        "200,000 rows went as at least 199 fragments before the commit, not {replicated}"
    );
    assert_equal_and_clean(&cluster, &all, "sr.t", ROWS - 200_000);

    // 2. The same transaction rolled back: every node is back where it was.
    refill(&cluster);
    assert_eq!(assert_equal_and_clean(&cluster, &all, "sr.t", ROWS), full);
    let rollbacks_before = status_var(&cluster, 1, "wsrep_local_streaming_rollbacks");
    let delete = in_background(
        dir.clone(),
        1,
        format!(
            "{STREAM_ROWS_1000} START TRANSACTION; DELETE FROM sr.t WHERE id <= 200000; \
             DO SLEEP(1); ROLLBACK;"
        ),
    );
    wait_for_fragments(&cluster, 3, 5);
    delete
        .join()
        .unwrap()
        .expect("the streaming DELETE rolls back");
    assert_eq!(
        status_var(&cluster, 1, "wsrep_local_streaming_rollbacks") - rollbacks_before,
        1,
        "node 1 replicated one rollback fragment"
    );
    assert_eq!(assert_equal_and_clean(&cluster, &all, "sr.t", ROWS), full);

    // 3. A conflict with rows a certified fragment covers: the other node's work loses.
    //    Node 2 updates a row of the first fragment while the transaction is open: it
    //    waits for the streaming applier's lock and gives up.
    let delete = in_background(
        dir.clone(),
        1,
        format!(
            "{STREAM_ROWS_1000} START TRANSACTION; DELETE FROM sr.t WHERE id <= 5000; \
             DO SLEEP(8); COMMIT;"
        ),
    );
    wait_for_fragments(&cluster, 2, 1);
    let update = cluster
        .sql(
            2,
            "SET SESSION innodb_lock_wait_timeout = 2; UPDATE sr.t SET k = -1 WHERE id = 10",
        )
        .map_err(|e| format!("{e:#}"));
    let error = error_text(update);
    assert!(
        error.contains("ERROR 1205") || error.contains("ERROR 1213"),
        "node 2's update lost against the fragment: {error}"
    );
    delete
        .join()
        .unwrap()
        .expect("the streaming DELETE commits");
    let after_conflicts = assert_equal_and_clean(&cluster, &all, "sr.t", ROWS - 5_000);

    // 4. Limits. The server counts rows itself; the provider refuses a write-set larger
    //    than repl.max_ws_size (keys included) even when the server's estimate passed.
    cluster
        .sql(1, "SET GLOBAL wsrep_max_ws_rows = 1000")
        .unwrap();
    let error = error_text(
        cluster
            .sql(1, "USE sr; INSERT INTO r SELECT seq FROM seq_1_to_5000")
            .map_err(|e| format!("{e:#}")),
    );
    cluster.sql(1, "SET GLOBAL wsrep_max_ws_rows = 0").unwrap();
    assert!(
        error.contains("ERROR 1180") && error.contains("wsrep_max_ws_rows exceeded"),
        "the server's text for too many rows: {error}"
    );
    assert_equal_and_clean(&cluster, &all, "sr.r", 0);
    let refused_before = status_var(&cluster, 1, "wsrep_local_size_exceeded");
    cluster
        .sql(1, "SET GLOBAL wsrep_max_ws_size = 20000")
        .unwrap();
    let too_big = cluster
        .sql(1, "USE sr; INSERT INTO r SELECT seq FROM seq_1_to_1000")
        .map_err(|e| format!("{e:#}"));
    // Within the limit in 500-row fragments (about 13 kB each).
    let streamed = cluster.sql(
        1,
        "USE sr; SET SESSION wsrep_trx_fragment_unit = 'rows'; \
         SET SESSION wsrep_trx_fragment_size = 500; INSERT INTO r SELECT seq FROM seq_1_to_3000",
    );
    cluster
        .sql(1, "SET GLOBAL wsrep_max_ws_size = 2147483647")
        .unwrap();
    let error = error_text(too_big);
    assert!(
        error.contains("Maximum writeset size exceeded"),
        "the server's text for an oversized write-set: {error}"
    );
    assert_eq!(
        status_var(&cluster, 1, "wsrep_local_size_exceeded") - refused_before,
        1,
        "the provider refused the write-set itself"
    );
    streamed.expect("the same rows in fragments within the limit commit");
    assert_equal_and_clean(&cluster, &all, "sr.r", 3_000);

    // 5. The originator dies mid-transaction: the survivors roll it back and agree. The
    //    restarted node agrees too; its server drops the fragments it had stored of its own
    //    dead transaction at the next primary view change (as with Galera, whose joiner gets
    //    a view in order; ours does not deliver the joining view to the server).
    let doomed = in_background(
        dir.clone(),
        1,
        format!(
            "{STREAM_ROWS_1000} START TRANSACTION; DELETE FROM sr.t WHERE id <= 100000; \
             DO SLEEP(60); COMMIT;"
        ),
    );
    wait_for_fragments(&cluster, 2, 10);
    cluster.kill(1, Signal::Kill).unwrap();
    let _ = doomed.join();
    let deadline = Instant::now() + Duration::from_secs(60);
    while status_var(&cluster, 2, "wsrep_cluster_size") != 2
        || status_var(&cluster, 3, "wsrep_cluster_size") != 2
    {
        assert!(
            Instant::now() < deadline,
            "the survivors never formed a 2-node primary component"
        );
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        assert_equal_and_clean(&cluster, &[2, 3], "sr.t", ROWS - 5_000),
        after_conflicts
    );
    cluster
        .start_node(1)
        .unwrap_or_else(|e| panic!("node 1 rejoins: {e:#}"));
    assert_eq!(
        assert_equal_rows(&cluster, &all, "sr.t", ROWS - 5_000),
        after_conflicts,
        "node 1 rejoined with the survivors' data"
    );
    cluster.stop_node(3).unwrap();
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 restarts: {e:#}"));
    assert_eq!(
        assert_equal_and_clean(&cluster, &all, "sr.t", ROWS - 5_000),
        after_conflicts
    );
    cluster.down().unwrap();
    drop(guard);
}
