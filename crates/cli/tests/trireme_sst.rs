//! The `trireme` SST method on real MariaDB servers: a node joins by a hot snapshot while
//! sysbench writes on another node (and the idle node is the donor); a donor killed half
//! way leaves the joiner's datadir untouched and the next attempt resumes; a corrupted piece
//! is detected and sent again; each preflight failure stops the joiner with its own message
//! before anything is touched.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines, preflight,
    trireme_provider,
};

/// Every trireme donor of this cluster corrupts its 3rd data piece once, after computing its
/// checksum (read by the donor's `wsrep_sst_trireme` from the server's environment).
const CORRUPT_PIECE: &str = "3";

/// The tables written in this test.
const TABLES: [&str; 3] = ["sst.t", "sbtest.sbtest1", "sbtest.sbtest2"];

/// Every file of a datadir with its size and modification time, except the provider's own
/// files (which the server rewrites at every start).
fn fingerprint(datadir: &Path) -> BTreeMap<String, (u64, i64, i64)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u64, i64, i64)>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                walk(root, &path, out);
                continue;
            }
            let name = path.strip_prefix(root).unwrap().display().to_string();
            if sst::swap::is_preserved(&name) {
                continue;
            }
            out.insert(name, (meta.len(), meta.mtime(), meta.mtime_nsec()));
        }
    }
    let mut out = BTreeMap::new();
    walk(datadir, datadir, &mut out);
    out
}

/// Appends `line` to the `[sst]` group (the last one) of a node's my.cnf; the SST program
/// reads it at its next run.
fn add_sst_setting(cluster: &Cluster, node: usize, line: &str) {
    let path = cluster.dir().join(format!("node{node}/my.cnf"));
    let mut text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("[sst]"), "my.cnf has an [sst] group");
    text.push_str(line);
    text.push('\n');
    fs::write(&path, text).unwrap();
}

fn remove_sst_setting(cluster: &Cluster, node: usize, line: &str) {
    let path = cluster.dir().join(format!("node{node}/my.cnf"));
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace(&format!("{line}\n"), "")).unwrap();
}

/// Stops node 3 and forgets its position, so that it must join by SST.
fn stop_and_forget(cluster: &Cluster) {
    cluster.stop_node(3).unwrap();
    fs::remove_file(cluster.dir().join("node3/data/grastate.dat")).unwrap();
}

fn sysbench(cluster: &Cluster, node: usize, command: &str, seconds: u64) -> Child {
    Command::new("sysbench")
        .args([
            "oltp_write_only",
            "--db-driver=mysql",
            "--mysql-user=root",
            "--mysql-db=sbtest",
            "--tables=2",
            "--table-size=2000",
            "--threads=2",
            "--mysql-ignore-errors=1213,1205,1180",
            &format!("--time={seconds}"),
            &format!("--mysql-socket={}", cluster.socket(node).display()),
            command,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sysbench runs (scripts/install-deps.sh installs it)")
}

/// Starts node 3 on another thread; the handle yields whether it became Synced.
fn start_in_background(dir: &Path) -> thread::JoinHandle<Result<(), String>> {
    let dir = dir.to_path_buf();
    thread::spawn(move || {
        let cluster = Cluster::open(&dir).map_err(|e| format!("{e:#}"))?;
        cluster.start_node(3).map_err(|e| format!("{e:#}"))
    })
}

/// Waits until node 3's joiner has received at least `fraction` of the snapshot.
fn wait_for_progress(cluster: &Cluster, fraction: f64) -> sst::progress::Progress {
    let path = sst::progress::progress_path(&cluster.dir().join("node3/data"));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(p) = sst::progress::Progress::read(&path) {
            if p.phase == "transfer"
                && p.bytes_total > 0
                && p.bytes_done as f64 >= fraction * p.bytes_total as f64
            {
                return p;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node 3's SST did not reach {:.0}% in 90 s",
            fraction * 100.0
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn trireme_sst_hot_resumable_checked_and_preflighted() {
    let provider = trireme_provider();
    preflight(&provider);
    cli::sst_script_dir().expect("wsrep_sst_trireme is built (scripts/test.sh builds it)");
    let (guard, base_port) = new_cluster_dir();
    let mut options = UpOptions::new(guard.path());
    options.provider = Some(provider);
    options.base_port = Some(base_port);
    options.sst_method = Some(SstMethod::Trireme);
    std::env::set_var(sst::donor::FAULT_CORRUPT_PIECE, CORRUPT_PIECE);
    let up = Cluster::up(&options);
    std::env::remove_var(sst::donor::FAULT_CORRUPT_PIECE);
    let cluster = up.unwrap_or_else(|e| panic!("cluster up with trireme SST: {e:#}"));
    assert!(
        cluster
            .error_log_tail(3, 400)
            .contains("wsrep_sst_trireme --role 'joiner'"),
        "node 3 joined through the trireme method"
    );

    // About 60 MB of rows, and sysbench's tables.
    cluster
        .sql(
            1,
            "CREATE DATABASE sst; CREATE DATABASE sbtest;\n\
             CREATE TABLE sst.t (id INT PRIMARY KEY, pad VARCHAR(400)) ENGINE=InnoDB;\n\
             INSERT INTO sst.t SELECT seq, REPEAT(MD5(seq), 10) FROM sst.seq_1_to_50000;\n\
             INSERT INTO sst.t SELECT seq, REPEAT(MD5(seq), 10) FROM sst.seq_50001_to_100000;\n\
             INSERT INTO sst.t SELECT seq, REPEAT(MD5(seq), 10) FROM sst.seq_100001_to_150000;",
        )
        .unwrap();
    let prepare = sysbench(&cluster, 1, "prepare", 60)
        .wait_with_output()
        .unwrap();
    assert!(prepare.status.success(), "sysbench prepare: {prepare:?}");

    // 1. Node 3 joins by SST while sysbench writes on node 1: node 2, which serves no
    //    client writes, is the donor; every piece is checked and a corrupted one resent.
    stop_and_forget(&cluster);
    let mut load = sysbench(&cluster, 1, "run", 120);
    thread::sleep(Duration::from_secs(3));
    let (before1, before2, before3) = (
        log_line_count(&cluster, 1),
        log_line_count(&cluster, 2),
        log_line_count(&cluster, 3),
    );
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 joins by trireme SST under load: {e:#}"));
    let _ = load.kill();
    let load = load.wait_with_output().unwrap();
    let joiner_log = new_log_lines(&cluster, 3, before3);
    let donor_log = new_log_lines(&cluster, 2, before2);
    assert!(
        joiner_log.contains("copied ") && joiner_log.contains("position "),
        "node 3 received and swapped in a snapshot:\n{joiner_log}"
    );
    assert!(
        donor_log.contains("sending a hot snapshot"),
        "node 2 (no client writes) was the donor:\n{donor_log}"
    );
    assert!(
        !new_log_lines(&cluster, 1, before1).contains("sending a hot snapshot"),
        "node 1, which serves sysbench, was not the donor"
    );
    assert!(
        joiner_log.contains("failed its CRC32C check") && donor_log.contains("sending it again"),
        "the corrupted piece was detected and sent again:\n{joiner_log}\n{donor_log}"
    );
    let load_out = String::from_utf8_lossy(&load.stdout);
    assert!(
        load_out.contains("transactions:") || load.status.code().is_none(),
        "sysbench ran during the transfer: {load_out}"
    );
    assert_equal_at_rest(&cluster, &TABLES);
    assert!(cluster.node_status(3).is_synced());
    assert!(
        cluster.node_status(2).is_synced(),
        "the donor is SYNCED again"
    );

    // 2. The donor is killed half way: the joiner's datadir stays as it was, the pieces it
    //    verified stay staged, and the next attempt does not receive them again.
    stop_and_forget(&cluster);
    for node in [1, 2] {
        add_sst_setting(&cluster, node, "rlimit=4M");
    }
    let datadir = cluster.dir().join("node3/data");
    let before = fingerprint(&datadir);
    let start = start_in_background(cluster.dir());
    let reached = wait_for_progress(&cluster, 0.3);
    let killed = Command::new("pkill")
        .args([
            "-KILL",
            "-f",
            &format!(
                "wsrep_sst_trireme --role donor .*{}",
                cluster.dir().display()
            ),
        ])
        .status()
        .unwrap();
    assert!(
        killed.success(),
        "the donor's SST process was found and killed"
    );
    let outcome = start.join().unwrap();
    assert!(outcome.is_err(), "node 3 cannot join without its snapshot");
    assert_eq!(
        fingerprint(&datadir),
        before,
        "the interrupted SST left node 3's datadir untouched"
    );
    let staging = sst::swap::staging_dir(&datadir);
    assert!(
        sst::swap::journal_path(&datadir).is_file() && staging.is_dir(),
        "verified pieces stay staged for the next attempt"
    );
    eprintln!(
        "killed the donor at {} of {} bytes",
        reached.bytes_done, reached.bytes_total
    );
    for node in [1, 2] {
        remove_sst_setting(&cluster, node, "rlimit=4M");
    }
    let before3 = log_line_count(&cluster, 3);
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("the second attempt completes: {e:#}"));
    let joiner_log = new_log_lines(&cluster, 3, before3);
    let resumed_pieces: u64 = joiner_log
        .split("resumed pieces")
        .next()
        .and_then(|head| head.rsplit(", ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the joiner reports resumed pieces:\n{joiner_log}"));
    assert!(
        joiner_log.contains("resuming: ") && resumed_pieces > 0,
        "the second attempt resumed from what the first verified:\n{joiner_log}"
    );
    assert!(
        !staging.exists(),
        "the staging directory is gone after the swap"
    );
    assert_equal_at_rest(&cluster, &TABLES);

    // 3. Preflight failures: each stops the joiner with its own message and touches nothing.
    let cnf = cluster.dir().join("node3/my.cnf");
    let original_cnf = fs::read_to_string(&cnf).unwrap();
    let cases: [(&str, &str); 4] = [
        ("port", "is already in use"),
        ("disk", "not enough disk for the snapshot"),
        ("tool", "is not usable"),
        ("credentials", "refused the SST credentials"),
    ];
    for (case, expected) in cases {
        stop_and_forget(&cluster);
        let before = fingerprint(&datadir);
        let mut blocker = None;
        match case {
            "port" => {
                // Another process holds the port node 3's my.cnf names for SST.
                let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
                let port = listener.local_addr().unwrap().port();
                let text = original_cnf.replace(
                    &format!(
                        "wsrep_sst_receive_address=127.0.0.1:{}",
                        cluster_sst_port(&original_cnf)
                    ),
                    &format!("wsrep_sst_receive_address=127.0.0.1:{port}"),
                );
                assert_ne!(text, original_cnf);
                fs::write(&cnf, text).unwrap();
                blocker = Some(listener);
            }
            "disk" => add_sst_setting(&cluster, 3, "reserve=1000000G"),
            "tool" => add_sst_setting(&cluster, 3, "mariabackup=/nonexistent/mariadb-backup"),
            _ => {
                for node in [1, 2] {
                    cluster
                        .sql(node, "SET GLOBAL wsrep_sst_auth = 'trireme_nobody:wrong'")
                        .unwrap();
                }
            }
        }
        let from = log_line_count(&cluster, 3);
        let started = Instant::now();
        let outcome = cluster.start_node(3);
        eprintln!(
            "preflight case {case}: node 3 stopped after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let log = new_log_lines(&cluster, 3, from);
        assert!(outcome.is_err(), "{case}: node 3 must not start");
        assert!(
            log.contains(expected),
            "{case}: node 3's log names the cause ({expected:?}):\n{log}"
        );
        assert_eq!(
            fingerprint(&datadir),
            before,
            "{case}: the datadir is untouched"
        );
        assert!(!staging.exists(), "{case}: nothing was staged");
        drop(blocker);
        match case {
            "port" => fs::write(&cnf, &original_cnf).unwrap(),
            "disk" => remove_sst_setting(&cluster, 3, "reserve=1000000G"),
            "tool" => remove_sst_setting(&cluster, 3, "mariabackup=/nonexistent/mariadb-backup"),
            "credentials" => {
                for node in [1, 2] {
                    cluster
                        .sql(node, "SET GLOBAL wsrep_sst_auth = 'root:'")
                        .unwrap();
                }
            }
            _ => {}
        }
    }
    cluster
        .start_node(3)
        .unwrap_or_else(|e| panic!("node 3 joins once the causes are fixed: {e:#}"));
    assert_equal_at_rest(&cluster, &TABLES);
    cluster.down().unwrap();
    drop(guard);
}

/// The SST port a my.cnf names.
fn cluster_sst_port(cnf: &str) -> u16 {
    cnf.lines()
        .find_map(|l| l.strip_prefix("wsrep_sst_receive_address=127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .expect("wsrep_sst_receive_address in my.cnf")
}
