//! Security across real hosts: a 3-host cluster whose my.cnf sets Galera's `socket.ssl_*`
//! (a certificate chain with an intermediate CA), checked with the openssl tool and a tcpdump
//! capture of the bridge; strangers refused on both sides; certificates swapped under load.
//! And a plaintext cluster that keeps committing while its leader's group port is flooded
//! with garbage and forgeries.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use cli::garbage::Garbage;
use cli::net_load::{self, NetLoad};
use cli::{hosts, Cluster, Signal, SstMethod, Timeouts, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, make_certs, new_cluster_dir, new_log_lines, preflight,
    trireme_provider, wait_for, ClusterGuard,
};

/// The hosts' namespaces and bridge have fixed names: one cluster of hosts at a time.
static ONE_NETWORK_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_network() -> MutexGuard<'static, ()> {
    ONE_NETWORK_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The provider options of a node that uses the certificate `name` under CA `ca`.
fn tls_options(certs: &Path, name: &str, ca: &str) -> String {
    format!(
        "gcache.size=512M; socket.ssl_key={}; socket.ssl_cert={}; socket.ssl_ca={}",
        certs.join(format!("{name}.key")).display(),
        certs.join(format!("{name}.pem")).display(),
        certs.join(ca).display()
    )
}

fn up_tls_hosts(guard: &ClusterGuard, certs: &Path) -> Cluster {
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(3);
    opts.provider = Some(provider);
    opts.hosts = Some(true);
    opts.sst_method = Some(SstMethod::Trireme);
    opts.provider_options = Some(tls_options(certs, "node", "ca.pem"));
    Cluster::up(&opts).expect("the TLS cluster of hosts comes up")
}

/// A tcpdump of the hosts' bridge, with a filter, into a file.
struct Capture {
    child: Child,
    path: PathBuf,
}

impl Capture {
    fn start(path: PathBuf, filter: &str) -> Capture {
        let child = Command::new("tcpdump")
            .args(["-i", hosts::BRIDGE, "-U", "-s", "0", "-Z", "root", "-w"])
            .arg(&path)
            .arg(filter)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tcpdump (scripts/install-deps.sh installs it)");
        // tcpdump needs a moment to open the interface.
        thread::sleep(Duration::from_secs(1));
        Capture { child, path }
    }

    /// Stops tcpdump and returns the captured bytes.
    fn finish(mut self) -> Vec<u8> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let _ = self.child.wait();
        fs::read(&self.path).expect("the capture file")
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// What `openssl s_client` says about the group port of `node`.
fn s_client(certs: &Path, node: usize) -> String {
    let output = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("{}:4567", hosts::address(node)))
        .arg("-CAfile")
        .arg(certs.join("ca.pem"))
        .arg("-cert")
        .arg(certs.join("node.pem"))
        .arg("-key")
        .arg(certs.join("node.key"))
        .arg("-verify_return_error")
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Replaces `from` with `to` in node `node`'s my.cnf.
fn edit_cnf(cluster: &Cluster, node: usize, from: &str, to: &str) {
    let path = cluster.config().cnf_path(node);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "node{node}'s my.cnf has no {from:?}");
    fs::write(&path, text.replace(from, to)).unwrap();
}

/// Starts `node` (it must get in) and returns the lines its log gained meanwhile.
fn start_and_log(cluster: &Cluster, node: usize) -> String {
    let before = log_line_count(cluster, node);
    cluster.start_node(node).unwrap();
    new_log_lines(cluster, node, before)
}

/// Starts node 3 with a configuration the others must refuse; returns the new lines of
/// node 1's and node 3's logs once node 3 gave up or 20 s passed.
fn refused_start(cluster: &mut Cluster) -> (String, String) {
    let before = [1, 3].map(|n| log_line_count(cluster, n));
    let timeouts = cluster.timeouts();
    cluster.set_timeouts(Timeouts {
        node_start: Duration::from_secs(20),
        ..timeouts
    });
    let started = cluster.start_node(3);
    cluster.set_timeouts(timeouts);
    assert!(
        started.is_err(),
        "node3 joined with a configuration to refuse"
    );
    assert_eq!(
        cluster.node_status(1).cluster_size(),
        Some(2),
        "node1 let it in"
    );
    if cluster.pid(3).is_some() {
        cluster.kill(3, Signal::Kill).unwrap();
    }
    (
        new_log_lines(cluster, 1, before[0]),
        new_log_lines(cluster, 3, before[1]),
    )
}

const CANARY_USER: &str = "canary";
const CANARY_PASSWORD: &str = "canary-password";

/// Inserts a row holding `canary` on node 1 as a client across the bridge does, in the
/// clear (the server has no TLS for clients here).
fn insert_across_the_bridge(canary: &str, id: u32) {
    let output = Command::new("mariadb")
        .args(["--protocol=TCP", "--skip-ssl", "-h"])
        .arg(hosts::address(1).to_string())
        .args(["-P", "3306", "-u", CANARY_USER])
        .arg(format!("-p{CANARY_PASSWORD}"))
        .arg("-e")
        .arg(format!(
            "INSERT INTO secret.t VALUES ({id}, REPEAT('{canary}', 20))"
        ))
        .output()
        .expect("the mariadb client");
    assert!(
        output.status.success(),
        "insert across the bridge: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The whole TLS story on one cluster of hosts (one cluster is ~1 min to set up).
#[test]
fn a_tls_cluster_of_hosts_encrypts_everything_and_refuses_strangers() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    // Beside the cluster's directory (which must start empty), readable by the server's
    // unprivileged user.
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = certs_dir.path().to_owned();
    make_certs(&certs);
    fs::set_permissions(&certs, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cluster = up_tls_hosts(&guard, &certs);
    for node in 1..=3 {
        assert!(
            cluster
                .error_log_tail(node, usize::MAX)
                .contains("TLS ready"),
            "node{node} does not say it runs TLS"
        );
    }
    let verified = s_client(&certs, 1);
    assert!(
        verified.contains("Verify return code: 0 (ok)"),
        "{verified}"
    );
    assert!(verified.contains("CN = node"), "{verified}");

    canary_never_crosses_the_bridge_in_clear(&mut cluster, guard.path(), &certs);
    strangers_are_refused_on_both_sides(&mut cluster, &certs);
    certificates_swap_under_load(&cluster, &guard, &certs);
}

/// A canary row written on node 1 reaches every node by replication, by IST, by trireme
/// SST and by MariaDB's rsync SST under its own TLS (stunnel), and never appears in the capture of the group, IST and SST ports. The SQL
/// port's capture, where the client sends it in clear, shows that the search finds it.
fn canary_never_crosses_the_bridge_in_clear(cluster: &mut Cluster, dir: &Path, certs: &Path) {
    let replication = Capture::start(dir.join("replication.pcap"), "tcp and not port 3306");
    let clients = Capture::start(dir.join("clients.pcap"), "tcp port 3306");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let canary = format!("canary-{}-{nanos}", std::process::id());
    cluster
        .sql(
            1,
            &format!(
                "CREATE DATABASE secret; CREATE TABLE secret.t (id INT PRIMARY KEY, v TEXT); \
                 CREATE USER '{CANARY_USER}'@'%' IDENTIFIED BY '{CANARY_PASSWORD}'; \
                 GRANT ALL ON secret.* TO '{CANARY_USER}'@'%'"
            ),
        )
        .unwrap();
    let insert = |id: u32| insert_across_the_bridge(&canary, id);
    insert(1);
    assert_equal_at_rest(cluster, &["secret.t"]);

    cluster.stop_node(3).unwrap();
    insert(2);
    let rejoin = start_and_log(cluster, 3);
    assert!(
        rejoin.contains("Receiving IST: "),
        "node3 did not rejoin by IST"
    );

    cluster.stop_node(2).unwrap();
    fs::remove_file(cluster.config().grastate_path(2)).unwrap();
    insert(3);
    let rejoin = start_and_log(cluster, 2);
    assert!(
        rejoin.contains("wsrep_sst_trireme"),
        "node2 did not rejoin by trireme SST"
    );
    assert_equal_at_rest(cluster, &["secret.t"]);

    // MariaDB's own rsync method, under its own TLS ([sst] tkey/tcert/tca: stunnel).
    for node in 1..=3 {
        let path = cluster.config().cnf_path(node);
        let mut text = fs::read_to_string(&path).unwrap();
        assert!(
            text.trim_end().ends_with("[sst]"),
            "[sst] is the last group"
        );
        for (key, file) in [
            ("tkey", "node.key"),
            ("tcert", "node.pem"),
            ("tca", "ca.pem"),
        ] {
            text.push_str(&format!("{key}={}\n", certs.join(file).display()));
        }
        fs::write(&path, text).unwrap();
    }
    cluster.stop_node(2).unwrap();
    edit_cnf(
        cluster,
        2,
        "wsrep_sst_method=trireme",
        "wsrep_sst_method=rsync",
    );
    fs::remove_file(cluster.config().grastate_path(2)).unwrap();
    insert(4);
    let rejoin = start_and_log(cluster, 2);
    assert!(
        rejoin.contains("wsrep_sst_rsync"),
        "node2 did not rejoin by rsync SST"
    );
    assert_equal_at_rest(cluster, &["secret.t"]);

    let replicated = replication.finish();
    let seen_by_clients = clients.finish();
    assert!(
        replicated.len() > 1 << 20,
        "the capture of replication, IST and SST holds only {} bytes",
        replicated.len()
    );
    assert!(
        contains(&seen_by_clients, canary.as_bytes()),
        "the search does not find the canary even in the clients' plaintext SQL"
    );
    assert!(
        !contains(&replicated, canary.as_bytes()),
        "the canary crossed the bridge in clear on a group, IST or SST port"
    );
}

/// Node 3 restarted with a certificate from another CA, then with another cluster name:
/// neither gets in, and both sides' logs say why. Restored, it rejoins.
fn strangers_are_refused_on_both_sides(cluster: &mut Cluster, certs: &Path) {
    cluster.stop_node(3).unwrap();
    let ours = tls_options(certs, "node", "ca.pem");
    // The stranger trusts both CAs (so that it is this cluster that refuses it, not the
    // other way round): its own certificate comes from the other one.
    let bundle = [certs.join("rogue-ca.pem"), certs.join("ca.pem")]
        .map(|path| fs::read_to_string(path).unwrap())
        .concat();
    fs::write(certs.join("rogue-bundle.pem"), bundle).unwrap();
    let rogue = tls_options(certs, "rogue", "rogue-bundle.pem");
    edit_cnf(cluster, 3, &ours, &rogue);
    let (node1, node3) = refused_start(cluster);
    assert!(
        node1.contains("refused a peer's TLS certificate") && node1.contains("rogue node"),
        "node1 does not name the refused certificate:\n{node1}"
    );
    assert!(
        node3.contains("refused this node's certificate"),
        "node3 does not say why it was refused:\n{node3}"
    );
    edit_cnf(cluster, 3, &rogue, &ours);

    edit_cnf(
        cluster,
        3,
        "wsrep_cluster_name=trireme",
        "wsrep_cluster_name=elsewhere",
    );
    let (node1, node3) = refused_start(cluster);
    for (node, log) in [(1, &node1), (3, &node3)] {
        assert!(
            log.contains("\"elsewhere\"") && log.contains("\"trireme\""),
            "node{node} does not name both clusters:\n{log}"
        );
    }
    edit_cnf(
        cluster,
        3,
        "wsrep_cluster_name=elsewhere",
        "wsrep_cluster_name=trireme",
    );
    cluster.start_node(3).unwrap();
}

/// Under sysbench on hosts 1 and 2, every node's certificate files are replaced by another
/// certificate of the same CA and `socket.ssl_reload=1` is set: new connections present
/// it, the load never stops, and a node restarted afterwards joins with it.
fn certificates_swap_under_load(cluster: &Cluster, guard: &ClusterGuard, certs: &Path) {
    let load = NetLoad {
        tables: 2,
        table_size: 2_000,
        threads: 4,
        hosts: vec![1, 2],
        time: Duration::from_secs(20),
    };
    load.prepare(cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();
    let output = guard.path().join("sysbench-run.out");
    let running = {
        let cluster = Cluster::open(cluster.dir()).unwrap();
        let output = output.clone();
        thread::spawn(move || load.run(&cluster, &output).expect("sysbench runs"))
    };
    thread::sleep(Duration::from_secs(5));
    fs::copy(certs.join("node-b.key"), certs.join("node.key")).unwrap();
    fs::copy(certs.join("node-b.pem"), certs.join("node.pem")).unwrap();
    for node in 1..=3 {
        cluster
            .sql(
                node,
                "SET GLOBAL wsrep_provider_options='socket.ssl_reload=1'",
            )
            .unwrap();
        assert!(
            cluster
                .error_log_tail(node, 50)
                .contains("TLS files reloaded"),
            "node{node} did not reload"
        );
    }
    let presented = s_client(certs, 2);
    assert!(presented.contains("CN = node-b"), "{presented}");
    let status = running.join().unwrap();
    let report = fs::read_to_string(&output).unwrap_or_default();
    assert!(status.success(), "sysbench failed:\n{report}");
    let tps = net_load::per_second_tps(&report);
    let zero = net_load::longest_zero_run(&tps[1..tps.len().saturating_sub(1)]);
    assert_eq!(
        zero, 0,
        "the load stopped for {zero} s during the swap:\n{report}"
    );
    cluster.stop_node(3).unwrap();
    cluster.start_node(3).unwrap();
    wait_for("node3 Synced in 3", Duration::from_secs(60), || {
        let status = cluster.node_status(3);
        status.is_synced() && status.cluster_size() == Some(3)
    });
    assert_equal_at_rest(cluster, &["sbtest.sbtest1", "sbtest.sbtest2"]);
}

/// Resident memory of a process, in bytes.
fn resident_bytes(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Most a node's memory may grow while it is flooded.
const FLOOD_GROWTH_MAX: u64 = 256 << 20;

/// 200 connections to the Raft leader's group port, from the client address, send random
/// bytes, length fields announcing 64 MiB frames, nothing at all, and forgeries from a
/// member that does not exist (heartbeats with an absurd commit index, appends, Joins that
/// claim another member's address, flow-control stops, write-sets). Meanwhile sysbench
/// writes to every host: no second without commits, every node stays Synced in a cluster
/// of three, and no node's memory grows by 256 MiB.
#[test]
fn a_flooded_group_port_stops_nothing() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(3);
    opts.provider = Some(provider);
    opts.hosts = Some(true);
    opts.sst_method = Some(SstMethod::Rsync);
    let cluster = Cluster::up(&opts).expect("the cluster of hosts comes up");
    let leader = (1..=3)
        .find(|&n| cluster.node_status(n).is_raft_leader())
        .expect("a Raft leader");
    let victim = if leader == 1 { 2 } else { 1 };
    let load = NetLoad {
        tables: 2,
        table_size: 2_000,
        threads: 6,
        hosts: vec![1, 2, 3],
        time: Duration::from_secs(40),
    };
    load.prepare(&cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();
    let output = guard.path().join("sysbench-run.out");
    let running = {
        let cluster = Cluster::open(cluster.dir()).unwrap();
        let output = output.clone();
        thread::spawn(move || load.run(&cluster, &output).expect("sysbench runs"))
    };
    thread::sleep(Duration::from_secs(5));
    let pids: Vec<u32> = (1..=3).map(|n| cluster.pid(n).expect("running")).collect();
    let baseline: Vec<u64> = pids.iter().map(|&pid| resident_bytes(pid)).collect();
    let flood = Garbage {
        connections: 200,
        duration: Duration::from_secs(25),
        seed: u64::from(std::process::id()),
        cluster_name: "trireme".to_owned(),
        victim_address: format!("{}:4567", hosts::address(victim)),
    };
    let target = format!("{}:4567", hosts::address(leader)).parse().unwrap();
    let flooding = thread::spawn(move || flood.run(target));
    let mut peak = baseline.clone();
    let mut unsynced = Vec::new();
    while !flooding.is_finished() {
        for (node, pid) in pids.iter().enumerate() {
            peak[node] = peak[node].max(resident_bytes(*pid));
            let status = cluster.node_status(node + 1);
            if !(status.is_synced() && status.cluster_size() == Some(3)) {
                unsynced.push(node + 1);
            }
        }
        thread::sleep(Duration::from_secs(1));
    }
    let report = flooding.join().unwrap();
    eprintln!("flood: {report:?}");
    assert!(
        report.connections >= 200 && report.forgeries > 1_000,
        "{report:?}"
    );
    assert!(
        unsynced.is_empty(),
        "nodes not Synced in 3 during the flood: {unsynced:?}"
    );
    for node in 0..3 {
        let growth = peak[node].saturating_sub(baseline[node]);
        eprintln!(
            "node{}: memory grew by {} MiB under the flood",
            node + 1,
            growth >> 20
        );
        assert!(
            growth < FLOOD_GROWTH_MAX,
            "node{} grew by {} MiB",
            node + 1,
            growth >> 20
        );
    }
    let status = running.join().unwrap();
    let sysbench = fs::read_to_string(&output).unwrap_or_default();
    assert!(status.success(), "sysbench failed:\n{sysbench}");
    let tps = net_load::per_second_tps(&sysbench);
    let zero = net_load::longest_zero_run(&tps[1..tps.len().saturating_sub(1)]);
    assert_eq!(
        zero, 0,
        "the cluster stopped committing for {zero} s:\n{sysbench}"
    );
    assert!(
        cluster
            .error_log_tail(leader, usize::MAX)
            .contains("refused a group connection"),
        "the leader does not log the refusals"
    );
    assert_equal_at_rest(&cluster, &["sbtest.sbtest1", "sbtest.sbtest2"]);
}
