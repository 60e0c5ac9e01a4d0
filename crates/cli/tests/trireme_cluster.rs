//! Real MariaDB on Trireme: three `mariadbd` processes load `libtrireme.so` (built next to
//! this test), form a cluster, and the test checks what a Galera user relies on:
//! - every node lists every member with its client address, in `wsrep_incoming_addresses`
//!   and in the member list handed to `wsrep_notify_cmd`;
//! - the provider's threads run 5 nice steps below the server's (`gcomm.thread_nice`), and
//!   the server's own threads keep its priority;
//! - DDL and DML on every node reach the others, with equal `CHECKSUM TABLE`;
//! - at rest, each node's metrics endpoint serves every numeric `wsrep_` value `SHOW STATUS`
//!   shows, with the same value, and its page data the three members; `trireme status`
//!   reads the cluster from node 1's endpoint and node 2's SQL port;
//! - `cert.log_conflicts`, turned on at runtime on node 2, logs the table and key of each
//!   conflict of a conflict-heavy sysbench run, and node 2's page and metrics name the table;
//! - a row changed on one node alone is named by the comparison at rest (its key, and the
//!   row as each node has it);
//! - two nodes updating the same row at once: exactly one commits, the other client gets
//!   a deadlock error (1213), and the nodes stay equal;
//! - a local transaction holding a row lock is brute-force aborted by a replicated write,
//!   and the cluster does not stall;
//! - a causal read (`wsrep_sync_wait=1`) on node 2 sees a large write committed on node 1
//!   just before, while node 2 is still applying it;
//! - sysbench write-only spread over the three nodes ends with no error but deadlocks, and
//!   equal checksums; meanwhile node 3's appliers, held for a while by `FLUSH TABLES ...
//!   WITH READ LOCK` on one table, make it pause the cluster, and within 2 s node 1 names it
//!   in `wsrep_flow_control_paused_by`, on its page and in its metrics, and both nodes'
//!   logs name it; at rest, `FLUSH STATUS` zeroes the stops counted, as on Galera;
//! - `SET GLOBAL wsrep_provider_options` changes flow control at runtime and refuses a
//!   bad value;
//! - node 3 stops cleanly, the other two keep committing, and node 3 rejoins;
//! - a node killed with SIGKILL is evicted while the others keep committing, and rejoins;
//! - a malformed provider option, or a TLS file that does not exist, stops mariadbd from
//!   starting with a message naming it, without a crash;
//! - a provider thread that panics takes its server down at once, with a log line naming
//!   the thread, and the others keep committing;
//! - the whole cluster stops cleanly (each node saving its position in `grastate.dat`,
//!   the last one safe to bootstrap) and comes back from its directory alone, continuing
//!   the same history.
//!
//! Missing MariaDB or a missing provider library is a failure: run scripts/setup.sh (the
//! library is built by `cargo build -p provider`, which scripts/test.sh does first).

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::thread;
use std::time::{Duration, Instant};

use cli::{Cluster, RestOptions, Signal, UpOptions};

mod common;
use common::{
    assert_all_synced, assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines,
    preflight, trireme_provider, value, wait_consistent, wait_for, NODES,
};

fn insert_rows(cluster: &Cluster, node: usize, first: u32, count: u32) {
    let rows: Vec<String> = (first..first + count)
        .map(|id| format!("({id}, {node}, 'row {id} from node{node}')"))
        .collect();
    let statement = format!(
        "INSERT INTO trireme_test.t (id, node, v) VALUES {}",
        rows.join(",")
    );
    cluster
        .sql(node, &statement)
        .unwrap_or_else(|e| panic!("node{node}: {e:#}"));
}

/// Runs the same conflicting transaction on two nodes at once.
fn concurrent(cluster: &Cluster, statements: [(usize, String); 2]) -> Vec<Result<String, String>> {
    thread::scope(|scope| {
        let handles: Vec<_> = statements
            .iter()
            .map(|(node, statement)| {
                scope.spawn(move || cluster.sql(*node, statement).map_err(|e| format!("{e:#}")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// sysbench `oltp_write_only`, 8 tables of 10,000 rows, 8 threads, 30 s, with connections
/// spread over the three nodes' sockets; `meanwhile` runs while it does.
fn sysbench_spread_over_all_nodes(
    cluster: &Cluster,
    dir: &std::path::Path,
    meanwhile: impl FnOnce() + Send,
) {
    cluster.sql(1, "CREATE DATABASE sbtest").unwrap();
    let sockets: Vec<String> = (1..=NODES)
        .map(|n| cluster.socket(n).display().to_string())
        .collect();
    let common = [
        "oltp_write_only",
        "--db-driver=mysql",
        "--mysql-user=root",
        "--mysql-db=sbtest",
        "--tables=8",
        "--table-size=10000",
        "--threads=8",
    ];
    let prepare = std::process::Command::new("sysbench")
        .args(common)
        .arg(format!("--mysql-socket={}", sockets[0]))
        .arg("prepare")
        .output()
        .expect("sysbench runs (scripts/install-deps.sh installs it)");
    assert!(prepare.status.success(), "sysbench prepare: {prepare:?}");
    let run = thread::scope(|scope| {
        let load = scope.spawn(|| {
            std::process::Command::new("timeout")
                .arg("120")
                .arg("sysbench")
                .args(common)
                .arg(format!("--mysql-socket={}", sockets.join(",")))
                .args(["--time=30", "--mysql-ignore-errors=1213", "run"])
                .output()
                .unwrap()
        });
        meanwhile();
        load.join().unwrap()
    });
    let report = String::from_utf8_lossy(&run.stdout);
    std::fs::write(dir.join("sysbench.txt"), report.as_bytes()).unwrap();
    assert!(
        run.status.success(),
        "sysbench failed (an error other than a deadlock?):\n{report}"
    );
    assert!(report.contains("transactions:"), "{report}");
    let tables: Vec<String> = (1..=8).map(|t| format!("sbtest.sbtest{t}")).collect();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    assert_equal_at_rest(cluster, &tables);
}

/// Conflicts named: `cert.log_conflicts` turned on at runtime on node 2 only, then sysbench
/// updates 4 rows from all three nodes for 5 s. Node 2's log names the table and key of
/// each conflict (node 1's, with the option off, none), and both its page and its metrics
/// name the table.
fn conflicts_are_named(cluster: &Cluster) {
    cluster
        .sql(
            2,
            "SET GLOBAL wsrep_provider_options = 'cert.log_conflicts = yes'",
        )
        .unwrap();
    cluster.sql(1, "CREATE DATABASE conflicts").unwrap();
    let logs_before = [log_line_count(cluster, 1), log_line_count(cluster, 2)];
    let sockets: Vec<String> = (1..=NODES)
        .map(|n| cluster.socket(n).display().to_string())
        .collect();
    let common = [
        "oltp_update_index",
        "--db-driver=mysql",
        "--mysql-user=root",
        "--mysql-db=conflicts",
        "--tables=1",
        "--table-size=4",
        "--threads=6",
    ];
    let sysbench = |socket: &str, action: &[&str]| {
        std::process::Command::new("timeout")
            .args(["60", "sysbench"])
            .args(common)
            .arg(format!("--mysql-socket={socket}"))
            .args(action)
            .output()
            .expect("sysbench runs")
    };
    let prepared = sysbench(&sockets[0], &["prepare"]);
    assert!(prepared.status.success(), "sysbench prepare: {prepared:?}");
    let run = sysbench(
        &sockets.join(","),
        &["--time=5", "--mysql-ignore-errors=1213", "run"],
    );
    assert!(run.status.success(), "sysbench run: {run:?}");
    assert_equal_at_rest(cluster, &["conflicts.sbtest1"]);
    let named = new_log_lines(cluster, 2, logs_before[1]);
    assert!(
        named
            .lines()
            .any(|line| line.contains("certification conflict: write-set")
                && line.contains("on table conflicts.sbtest1 key (")),
        "node 2's log names the conflicting table and key:\n{named}"
    );
    let unasked = new_log_lines(cluster, 1, logs_before[0]);
    assert!(
        !unasked.contains("certification conflict"),
        "node 1 (cert.log_conflicts off) logs none:\n{unasked}"
    );
    let endpoint = cluster.config().metrics_address(2).expect("--metrics");
    let page = cli::endpoint::status_json(&endpoint).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(page["conflicts"][0]["table"], "conflicts.sbtest1", "{page}");
    let counted = cli::endpoint::scrape(&endpoint).unwrap().labelled(
        "trireme_cert_conflicts_total",
        "table",
        "conflicts.sbtest1",
    );
    assert!(counted.is_some_and(|n| n >= 1.0), "{counted:?}");
}

/// The flow-control stop's cause, named: under load, node 3's appliers are held by a read
/// lock on a table a write from node 1 then changes (they wait for it, as Galera's do),
/// its queue passes the limit and it stops the group. Node 1 must name node 3 in
/// `wsrep_flow_control_paused_by` within 2 s of that write,
/// and both nodes' logs must name it (a pause of 100 ms and more is logged, when it reaches
/// that, with the holder's queue against the limit on the holder, and when it ends).
fn a_held_node_is_named_as_the_pause(cluster: &Cluster) {
    // sysbench connects and warms up first (the pauses of its first seconds are logged
    // too, and take the log's turn; see below).
    thread::sleep(Duration::from_secs(8));
    let paused_by = || {
        value(
            cluster,
            1,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'WSREP_FLOW_CONTROL_PAUSED_BY'",
        )
    };
    let endpoint = cluster.config().metrics_address(1).expect("--metrics");
    let page_names_node3 = || {
        cli::endpoint::status_json(&endpoint)
            .is_ok_and(|page| page["flow"]["paused_by"] == serde_json::json!(["node3"]))
    };
    let metrics_name_node3 = || {
        cli::endpoint::scrape(&endpoint).is_ok_and(|scrape| {
            scrape.labelled("trireme_member_pausing", "member", "node3") == Some(1.0)
        })
    };
    // A table only the appliers write on node 3: a read lock on a table its own clients
    // write would wait for their transactions, which wait for the pause the lock causes.
    cluster
        .sql(1, "CREATE TABLE sbtest.fc_probe (id INT PRIMARY KEY)")
        .unwrap();
    wait_for(
        "node 3 has the probe table",
        Duration::from_secs(10),
        || {
            value(
                cluster,
                3,
                "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME = 'fc_probe'",
            ) == "1"
        },
    );
    let logs_before = [log_line_count(cluster, 1), log_line_count(cluster, 3)];
    let took = thread::scope(|scope| {
        let holder = scope.spawn(|| {
            cluster.sql(
                3,
                "FLUSH TABLES sbtest.fc_probe WITH READ LOCK; DO SLEEP(6); UNLOCK TABLES",
            )
        });
        wait_for("node 3 holds the read lock", Duration::from_secs(5), || {
            value(
                cluster,
                3,
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE 'DO SLEEP%'",
            ) == "1"
        });
        // Node 3's applier of this insert waits for the lock, the ones after it for their
        // commit turn: its queue grows with everything sysbench commits.
        cluster
            .sql(1, "INSERT INTO sbtest.fc_probe VALUES (1)")
            .unwrap();
        let took = wait_for(
            "node 1 names node3 as the pause, in its status, its page and its metrics",
            Duration::from_secs(5),
            || paused_by() == "node3" && page_names_node3() && metrics_name_node3(),
        );
        holder
            .join()
            .unwrap()
            .expect("node 3 holds the read lock, then lets go");
        took
    });
    assert!(
        took <= Duration::from_secs(2),
        "node 1 named node3 only after {took:?}"
    );
    wait_for("the pause ends", Duration::from_secs(30), || {
        paused_by().is_empty()
    });
    // The server log takes one line per place in the code per 5 s: of the two lines of
    // this pause, one goes out even if a long pause just before took the other's turn.
    for (node, skip) in [(1, logs_before[0]), (3, logs_before[1])] {
        let said = new_log_lines(cluster, node, skip);
        assert!(
            said.lines()
                .any(|line| line.contains("flow control: replication")
                    && line.contains("paused")
                    && line.contains("by node3")),
            "node {node}'s log does not name node3 as the pause:\n{said}"
        );
    }
}

/// The nice value of thread `task` of process `pid`, and the thread's name.
fn thread_nice_and_name(pid: u32, task: &str) -> (i32, String) {
    let dir = format!("/proc/{pid}/task/{task}");
    let name = std::fs::read_to_string(format!("{dir}/comm")).unwrap();
    let stat = std::fs::read_to_string(format!("{dir}/stat")).unwrap();
    // The name, in parentheses, may hold spaces: the fields after it are plain. Nice is
    // field 19 of the line, the 17th after the name.
    let after_name = &stat[stat.rfind(')').expect("a stat line names its thread") + 2..];
    let nice = after_name.split(' ').nth(16).unwrap().parse().unwrap();
    (nice, name.trim_end().to_owned())
}

/// The provider's threads (`trireme-*`) run `gcomm.thread_nice` (default 5) nice steps
/// below the server's, and every thread of the server keeps the server's priority.
fn provider_threads_run_below_the_server(cluster: &Cluster, node: usize) {
    let pid = cluster.pid(node).expect("the node runs");
    let (server_nice, _) = thread_nice_and_name(pid, &pid.to_string());
    let step = i32::from(transport::priority::PROVIDER_THREAD_NICE_DEFAULT);
    let mut provider_threads = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = entry.unwrap().file_name().into_string().unwrap();
        let (nice, name) = thread_nice_and_name(pid, &task);
        if name.starts_with("trireme-") {
            provider_threads.push(name.clone());
            assert_eq!(nice, server_nice + step, "node {node}'s thread {name}");
        } else {
            assert_eq!(nice, server_nice, "node {node}'s server thread {name}");
        }
    }
    // Thread names read back cut to 15 bytes ("trireme-dispatc").
    let expected_threads = [
        "trireme-loop",
        "trireme-accept",
        "trireme-dispatc",
        "trireme-read",
        "trireme-ist-rec",
        "trireme-metrics",
    ];
    for expected in expected_threads {
        assert!(
            provider_threads
                .iter()
                .any(|name| name.starts_with(expected)),
            "node {node} has no {expected}* thread: {provider_threads:?}"
        );
    }
}

/// At rest after the held node paused the cluster: node 3 counts the stops it sent and
/// node 1 the stops it received, and `FLUSH STATUS` zeroes both, as on Galera (a DBA
/// flushes, then watches how many come).
fn flush_status_zeroes_the_flow_control_counts(cluster: &Cluster) {
    let status = |node: usize, name: &str| -> u64 {
        let text = value(
            cluster,
            node,
            &format!(
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = '{name}'"
            ),
        );
        text.parse()
            .unwrap_or_else(|_| panic!("node {node}'s {name} is {text:?}"))
    };
    let counts = [
        (3, "WSREP_FLOW_CONTROL_SENT"),
        (1, "WSREP_FLOW_CONTROL_RECV"),
    ];
    for (node, name) in counts {
        assert!(status(node, name) >= 1, "node {node} counted no {name}");
    }
    for node in [1, 3] {
        cluster.sql(node, "FLUSH STATUS").unwrap();
    }
    for (node, name) in counts {
        assert_eq!(
            status(node, name),
            0,
            "node {node}'s {name} after FLUSH STATUS"
        );
    }
    assert_eq!(status(3, "WSREP_APPLY_WAITS"), 0, "after FLUSH STATUS");
}

/// A `wsrep_notify_cmd` for every node that appends its arguments to a file it returns
/// (both in `dir`, outside the cluster's directory).
fn notify_command(dir: &std::path::Path, options: &mut UpOptions) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.join("notify.sh");
    let notified = dir.join("notify.log");
    let text = format!("#!/bin/sh\necho \"$*\" >> {}\n", notified.display());
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The servers run as another user: they must be able to append.
    std::fs::write(&notified, "").unwrap();
    std::fs::set_permissions(&notified, std::fs::Permissions::from_mode(0o666)).unwrap();
    options.server_options = Some(format!("wsrep_notify_cmd={}", script.display()));
    notified
}

/// What ProxySQL, MaxScale and notify scripts read names every member with the address its
/// clients use: `wsrep_incoming_addresses` on each node, and the member list handed to
/// `wsrep_notify_cmd` (`uuid/name/address` each).
fn every_member_is_listed_as_the_ecosystem_reads_it(cluster: &Cluster, notified: &std::path::Path) {
    let mut expected: Vec<String> = (1..=NODES)
        .map(|n| format!("node{n}/127.0.0.1:{}", cluster.config().ports(n).sql))
        .collect();
    expected.sort();
    let addresses: Vec<String> = expected
        .iter()
        .map(|e| e.split_once('/').unwrap().1.to_owned())
        .collect();
    for node in 1..=NODES {
        let shown = value(cluster, node, "SHOW STATUS LIKE 'wsrep_incoming_addresses'");
        let mut listed: Vec<&str> = shown.split('\t').nth(1).unwrap_or("").split(',').collect();
        listed.sort_unstable();
        assert_eq!(listed, addresses, "node{node}'s wsrep_incoming_addresses");
    }
    let members_of = |line: &str| -> Vec<String> {
        let list = line.split("--members ").nth(1).unwrap_or("");
        let list = list.split_whitespace().next().unwrap_or("");
        let mut members: Vec<String> = list
            .split(',')
            .filter_map(|m| m.split_once('/').map(|(_, rest)| rest.to_owned()))
            .collect();
        members.sort();
        members
    };
    wait_for(
        "a notification lists the three members",
        Duration::from_secs(10),
        || {
            let text = std::fs::read_to_string(notified).unwrap_or_default();
            text.lines().any(|line| members_of(line) == expected)
        },
    );
}

/// Values `SHOW STATUS` takes from the server itself, not from the provider: not served.
const SERVER_OWN_STATUS: [&str; 5] = [
    "wsrep_applier_thread_count",
    "wsrep_rollbacker_thread_count",
    "wsrep_thread_count",
    "wsrep_local_bf_aborts",
    "wsrep_provider_version",
];
/// Values that move with the clock alone, even at rest.
const CLOCK_DRIVEN_STATUS: [&str; 2] = ["wsrep_ist_reach_seconds", "wsrep_flow_control_paused"];

/// At rest, the node's `/metrics` serves every numeric `wsrep_` value `SHOW STATUS` shows
/// (but the server's own), with the same value, and its `/status.json` the same members.
fn the_endpoint_agrees_with_show_status(cluster: &Cluster, node: usize) {
    let address = cluster.config().metrics_address(node).expect("--metrics");
    let shown = value(cluster, node, "SHOW STATUS LIKE 'wsrep%'");
    let scrape = cli::endpoint::scrape(&address).unwrap_or_else(|e| panic!("{e:#}"));
    let mut compared = 0;
    for line in shown.lines() {
        let (name, text) = line.split_once('\t').unwrap_or((line, ""));
        let Ok(number) = text.parse::<f64>() else {
            continue;
        };
        if SERVER_OWN_STATUS.contains(&name) {
            continue;
        }
        let served = scrape
            .value(name)
            .unwrap_or_else(|| panic!("node {node}: {name} = {text} is not served at /metrics"));
        // The server shows a double with 6 significant digits.
        if !CLOCK_DRIVEN_STATUS.contains(&name) {
            assert!(
                (served - number).abs() <= 1e-5 * number.abs().max(1.0),
                "node {node}: {name} is {text} in SHOW STATUS, {served} at /metrics"
            );
        }
        compared += 1;
    }
    assert!(
        compared >= 50,
        "only {compared} numeric values compared:\n{shown}"
    );
    let page = cli::endpoint::status_json(&address).unwrap_or_else(|e| panic!("{e:#}"));
    let names: Vec<&str> = page["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, ["node1", "node2", "node3"], "{page}");
    assert_eq!(page["state"], "Synced", "{page}");
}

/// `trireme status` for a cluster it did not start: node 1 read by its endpoint, node 2 over
/// SQL, node 3 known only from node 1's member list.
fn trireme_status_reads_any_cluster(cluster: &Cluster) {
    use cli::remote_status::{format_remote_table, read, NodeAddress};
    let config = cluster.config();
    let reader = cli::endpoint::Reader::plain();
    let rows = read(
        &[
            NodeAddress::Metrics(config.metrics_address(1).expect("--metrics")),
            NodeAddress::Sql {
                address: format!("127.0.0.1:{}", config.ports(2).sql),
                user: "root".into(),
                password: String::new(),
            },
        ],
        &reader,
    );
    let table = format_remote_table(&rows);
    let names: Vec<&str> = rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(names, ["node1", "node2", "node3"], "{table}");
    for row in &rows {
        assert_eq!(row.error, None, "{table}");
        assert_eq!(row.vars["wsrep_local_state_comment"], "Synced", "{table}");
    }
    assert_eq!(rows[0].vars["wsrep_cluster_size"], "3", "{table}");
    assert_eq!(rows[1].vars["wsrep_cluster_size"], "3", "{table}");
    assert_eq!(rows[2].source, "(member list)", "{table}");
}

/// A write big enough that node 2 needs a while to apply it, then at once a read on node 2
/// with `wsrep_sync_wait=1`: it must wait and see the write.
fn causal_reads_see_the_latest_commit(cluster: &Cluster) {
    cluster
        .sql(
            1,
            "CREATE TABLE trireme_test.causal (id INT PRIMARY KEY, v INT NOT NULL)",
        )
        .unwrap();
    let causal_reads = || -> u64 {
        value(cluster, 2, "SHOW STATUS LIKE 'wsrep_causal_reads'")
            .split('\t')
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("wsrep_causal_reads is reported")
    };
    let before = causal_reads();
    for round in 1..=3u32 {
        let rows = 50_000 * round;
        cluster
            .sql(
                1,
                &format!(
                    "INSERT INTO trireme_test.causal SELECT seq, {round} \
                     FROM trireme_test.seq_1_to_{rows} ON DUPLICATE KEY UPDATE v = {round}"
                ),
            )
            .unwrap();
        let seen = value(
            cluster,
            2,
            &format!(
                "SET SESSION wsrep_sync_wait = 1; \
                 SELECT COUNT(*) FROM trireme_test.causal WHERE v = {round}"
            ),
        );
        assert_eq!(
            seen,
            rows.to_string(),
            "round {round}: the causal read on node 2 missed node 1's commit"
        );
    }
    let after = causal_reads();
    assert!(
        after >= before + 3,
        "causal reads counted: {before} -> {after}"
    );
    cluster.sql(1, "DROP TABLE trireme_test.causal").unwrap();
}

#[test]
fn a_three_node_cluster_on_trireme() {
    let provider = trireme_provider();
    preflight(&provider);
    let started = Instant::now();
    let (guard, base_port) = new_cluster_dir();
    let mut options = UpOptions::new(guard.path());
    options.nodes = Some(NODES);
    options.provider = Some(provider.clone());
    options.base_port = Some(base_port);
    options.metrics = Some(true);
    let notify_dir = tempfile::Builder::new()
        .prefix("trireme-notify-")
        .tempdir()
        .unwrap();
    let notified = notify_command(notify_dir.path(), &mut options);
    let cluster = Cluster::up(&options).unwrap_or_else(|e| panic!("cluster up: {e:#}"));
    assert_all_synced(&cluster);
    every_member_is_listed_as_the_ecosystem_reads_it(&cluster, &notified);
    provider_threads_run_below_the_server(&cluster, 2);
    assert_eq!(
        value(&cluster, 1, "SELECT @@wsrep_provider"),
        provider.display().to_string()
    );
    assert_eq!(
        value(&cluster, 2, "SHOW STATUS LIKE 'wsrep_provider_name'"),
        "wsrep_provider_name\tTrireme"
    );

    // DDL on node 1, DML on every node.
    cluster
        .sql(
            1,
            "CREATE DATABASE trireme_test; CREATE TABLE trireme_test.t \
             (id INT PRIMARY KEY, node INT NOT NULL, v VARCHAR(64) NOT NULL)",
        )
        .unwrap();
    for (node, first) in [(1, 1), (2, 1001), (3, 2001)] {
        for batch in 0..4 {
            insert_rows(&cluster, node, first + batch * 10, 10);
        }
    }
    cluster
        .sql(
            2,
            "UPDATE trireme_test.t SET v = CONCAT(v, '!') WHERE node = 3",
        )
        .unwrap();
    cluster
        .sql(
            3,
            "ALTER TABLE trireme_test.t ADD COLUMN n INT NOT NULL DEFAULT 0",
        )
        .unwrap();
    wait_consistent(&cluster, 120);

    // A row changed on node 3 alone (replication off for the session) is found by its key.
    let original = value(&cluster, 1, "SELECT v FROM trireme_test.t WHERE id = 2005");
    let set_v_on_node3 = |v: &str| {
        cluster
            .sql(
                3,
                &format!(
                    "SET SESSION wsrep_on = 0; \
                     UPDATE trireme_test.t SET v = '{v}' WHERE id = 2005"
                ),
            )
            .unwrap()
    };
    set_v_on_node3("diverged");
    let comparison = cluster
        .compare_at_rest(
            &[1, 2, 3],
            Some(&["trireme_test.t".to_string()]),
            RestOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    let report = comparison.report();
    assert!(!comparison.equal(), "{report}");
    assert!(
        report.contains("id=2005: node1 (") && report.contains("node3 ('2005', '3', 'diverged'"),
        "the report names the differing row:\n{report}"
    );
    set_v_on_node3(&original);
    wait_consistent(&cluster, 120);

    // Two nodes update the same row at once: first committer wins.
    let conflict = |node: usize| {
        (
            node,
            format!(
                "BEGIN; UPDATE trireme_test.t SET n = n + {node} WHERE id = 1; \
                 SELECT SLEEP(1); COMMIT;"
            ),
        )
    };
    let results = concurrent(&cluster, [conflict(1), conflict(2)]);
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(
        failures.len(),
        1,
        "exactly one of the two commits: {results:?}"
    );
    assert!(
        failures[0].contains("1213"),
        "the loser gets ER_LOCK_DEADLOCK: {}",
        failures[0]
    );
    wait_consistent(&cluster, 120);
    for node in [1, 3] {
        the_endpoint_agrees_with_show_status(&cluster, node);
    }
    trireme_status_reads_any_cluster(&cluster);
    conflicts_are_named(&cluster);
    let n = value(&cluster, 3, "SELECT n FROM trireme_test.t WHERE id = 1");
    assert!(n == "1" || n == "2", "one update landed: n = {n}");

    // A local transaction on node 2 holds a row lock; a write from node 1 to that row
    // brute-force aborts it instead of waiting behind it.
    let writer_started = Instant::now();
    let results = thread::scope(|scope| {
        let holder = scope.spawn(|| {
            cluster
                .sql(
                    2,
                    "BEGIN; UPDATE trireme_test.t SET n = 100 WHERE id = 2; \
                     SELECT SLEEP(4); COMMIT;",
                )
                .map_err(|e| format!("{e:#}"))
        });
        thread::sleep(Duration::from_millis(500));
        let writer = cluster
            .sql(1, "UPDATE trireme_test.t SET n = 7 WHERE id = 2")
            .map_err(|e| format!("{e:#}"));
        let writer_took = writer_started.elapsed();
        (holder.join().unwrap(), writer, writer_took)
    });
    let (holder, writer, writer_took) = results;
    assert!(writer.is_ok(), "the replicated write commits: {writer:?}");
    assert!(
        writer_took < Duration::from_secs(3),
        "the writer did not wait behind the lock"
    );
    assert!(
        holder.is_err(),
        "the lock holder on node 2 was aborted: {holder:?}"
    );
    wait_consistent(&cluster, 120);
    assert_eq!(
        value(&cluster, 2, "SELECT n FROM trireme_test.t WHERE id = 2"),
        "7"
    );

    causal_reads_see_the_latest_commit(&cluster);

    // Provider options change at runtime; a bad value is refused and changes nothing.
    cluster
        .sql(
            1,
            "SET GLOBAL wsrep_provider_options = 'gcs.fc_limit = 64; gcs.fc_factor = 0.8'",
        )
        .unwrap();
    let listing = value(&cluster, 1, "SELECT @@wsrep_provider_options");
    assert!(
        listing.contains("gcs.fc_limit = 64;") && listing.contains("gcs.fc_factor = 0.8;"),
        "{listing}"
    );
    let refused = cluster.sql(
        1,
        "SET GLOBAL wsrep_provider_options = 'gcs.fc_limit = lots'",
    );
    assert!(refused.is_err(), "a bad value is refused: {refused:?}");
    let listing = value(&cluster, 1, "SELECT @@wsrep_provider_options");
    assert!(listing.contains("gcs.fc_limit = 64;"), "{listing}");

    // sysbench write-only, spread over all three nodes: no error but deadlocks, and the
    // nodes end equal; meanwhile node 3, held, pauses the cluster and is named for it.
    sysbench_spread_over_all_nodes(&cluster, guard.path(), || {
        a_held_node_is_named_as_the_pause(&cluster)
    });
    flush_status_zeroes_the_flow_control_counts(&cluster);

    // Node 3 stops cleanly: the two others keep committing; node 3 comes back.
    cluster.stop_node(3).unwrap();
    assert!(cluster.pid(3).is_none(), "node 3 stopped");
    assert_eq!(cluster.node_status(1).cluster_size(), Some(2));
    insert_rows(&cluster, 1, 4000, 5);
    insert_rows(&cluster, 2, 4005, 5);
    let log_before = log_line_count(&cluster, 3);
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("restart node3 after a clean stop: {e:#}"));
    assert_all_synced(&cluster);
    // Its catch-up as JOINED began with what was queued, and ended SYNCED.
    let said = new_log_lines(&cluster, 3, log_before);
    assert!(
        said.contains("JOINED with ") && said.contains("SYNCED after "),
        "node 3's log does not show its catch-up:\n{said}"
    );
    wait_consistent(&cluster, 130);

    // SIGKILL node 3: the others evict it and keep committing; it rejoins by SST.
    cluster.kill(3, Signal::Kill).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next_id = 5000;
    loop {
        insert_rows(&cluster, 1, next_id, 1);
        next_id += 1;
        let size = cluster.node_status(1).cluster_size();
        if size == Some(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 3 was not evicted within 60 s"
        );
        thread::sleep(Duration::from_millis(250));
    }
    insert_rows(&cluster, 2, next_id, 5);
    next_id += 5;
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("restart node3: {e:#}"));
    assert_all_synced(&cluster);
    let rows = 130 + u64::from(next_id - 5000);
    wait_consistent(&cluster, rows);

    // A bad provider option at start: mariadbd refuses to start with a message naming the
    // option, and does not crash; with the option fixed, the node rejoins.
    cluster.stop_node(3).unwrap();
    let cnf = cluster.config().cnf_path(3);
    let good = std::fs::read_to_string(&cnf).unwrap();
    let bad = good.replace("gcache.size=64M", "gcache.size=64M; gcs.fc_limit=lots");
    assert_ne!(
        good,
        bad,
        "the option string was found in {}",
        cnf.display()
    );
    std::fs::write(&cnf, &bad).unwrap();
    let refused = cluster.start_node(3);
    assert!(refused.is_err(), "node 3 started with a bad option");
    let log = cluster.error_log_tail(3, 200);
    assert!(
        log.contains("gcs.fc_limit") && log.contains("lots"),
        "the error names the option and the value:\n{log}"
    );
    assert!(
        !log.contains("got signal"),
        "mariadbd crashed instead of refusing:\n{log}"
    );
    // A TLS key file that does not exist: the same refusal, naming the option and file.
    let missing_key = good.replace(
        "gcache.size=64M",
        "gcache.size=64M; socket.ssl_key=/nonexistent/node.key; socket.ssl_cert=/nonexistent/node.pem",
    );
    std::fs::write(&cnf, &missing_key).unwrap();
    assert!(
        cluster.start_node(3).is_err(),
        "node 3 started without its TLS files"
    );
    let log = cluster.error_log_tail(3, 200);
    assert!(
        log.contains("socket.ssl_cert") && log.contains("/nonexistent/node.pem"),
        "the error names the TLS option and file:\n{log}"
    );
    std::fs::write(&cnf, &good).unwrap();

    // A provider thread that dies takes its server down at once, with a log line that names
    // the thread; the others keep committing.
    std::env::set_var("TRIREME_FAULT_PANIC_THREAD", "trireme-dispatch");
    let died = cluster.start_node(3);
    std::env::remove_var("TRIREME_FAULT_PANIC_THREAD");
    assert!(died.is_err(), "node 3 ran on with a dead dispatcher");
    assert!(cluster.pid(3).is_none(), "node 3's server is still there");
    let log = cluster.error_log_tail(3, 200);
    assert!(
        log.contains("a Trireme thread panicked") && log.contains("trireme-dispatch"),
        "the server did not say which thread died:\n{log}"
    );
    insert_rows(&cluster, 1, next_id, 5);
    let rows = rows + 5;

    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 with its option fixed: {e:#}"));
    assert_all_synced(&cluster);
    wait_consistent(&cluster, rows);

    // A clean stop of everything, then back from the directory alone, in the same
    // history: grastate.dat tells which node left last and at what seqno.
    let history = value(&cluster, 1, "SHOW STATUS LIKE 'wsrep_cluster_state_uuid'");
    let committed = cluster.node_status(1).last_committed().unwrap();
    cluster.down().unwrap();
    assert!(
        (1..=NODES).all(|n| cluster.pid(n).is_none()),
        "every node stopped"
    );
    let saved: Vec<_> = (1..=NODES)
        .map(|n| cluster.grastate(n).unwrap().expect("grastate.dat written"))
        .collect();
    assert!(
        saved.iter().all(|g| g.position.seqno.0 >= committed
            && history.ends_with(&g.position.cluster.to_string())),
        "every node saved its position in the history: {saved:?}"
    );
    assert_eq!(
        saved.iter().filter(|g| g.safe_to_bootstrap).count(),
        1,
        "exactly the last node to leave is safe to bootstrap: {saved:?}"
    );
    let cluster = Cluster::up(&UpOptions::new(guard.path()))
        .unwrap_or_else(|e| panic!("cluster restart: {e:#}"));
    assert_all_synced(&cluster);
    wait_consistent(&cluster, rows);
    assert_eq!(
        value(&cluster, 2, "SHOW STATUS LIKE 'wsrep_cluster_state_uuid'"),
        history,
        "the restarted cluster continues the same history"
    );
    assert!(cluster.node_status(2).last_committed().unwrap() > committed);
    insert_rows(&cluster, 3, 9000, 1);
    wait_consistent(&cluster, rows + 1);
    cluster.down().unwrap();
    eprintln!(
        "Trireme cluster test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(guard);
}
