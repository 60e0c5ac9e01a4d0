//! Clusters of real hosts: every node in a network namespace of its own, with a my.cnf
//! written as a DBA writes it for machines (no listen, node or receive address anywhere),
//! sysbench clients across the bridge, and faults on the network under that load.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use cli::net_load::{self, NetLoad};
use cli::{hosts, Cluster, Signal, SstMethod, UpOptions};

mod common;
use common::{
    assert_equal_at_rest, log_line_count, new_cluster_dir, new_log_lines, preflight,
    trireme_provider, wait_for, ClusterGuard,
};

/// The hosts' namespaces and bridge have fixed names: one cluster of hosts at a time.
static ONE_NETWORK_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_network() -> MutexGuard<'static, ()> {
    ONE_NETWORK_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn up_hosts(guard: &ClusterGuard, nodes: usize, sst: SstMethod) -> Cluster {
    up_hosts_with(guard, nodes, sst, false)
}

/// [`up_hosts`], with a `trireme-arbitrator` on host `nodes + 1` when `arbitrator`.
fn up_hosts_with(guard: &ClusterGuard, nodes: usize, sst: SstMethod, arbitrator: bool) -> Cluster {
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.arbitrator = Some(arbitrator);
    opts.nodes = Some(nodes);
    opts.provider = Some(provider);
    opts.hosts = Some(true);
    opts.sst_method = Some(sst);
    // Room for what the majority writes while a member is cut off, as a DBA sizes it.
    opts.provider_options = Some("gcache.size=512M".to_string());
    Cluster::up(&opts).expect("the cluster of hosts comes up")
}

fn load(hosts: Vec<usize>, time: Duration) -> NetLoad {
    NetLoad {
        tables: 4,
        table_size: 2_000,
        threads: 2 * hosts.len(),
        hosts,
        time,
    }
}

fn sbtest_tables() -> Vec<String> {
    (1..=4).map(|i| format!("sbtest.sbtest{i}")).collect()
}

fn assert_sbtest_equal(cluster: &Cluster) {
    let tables = sbtest_tables();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    assert_equal_at_rest(cluster, &tables);
}

/// Runs `load` in a thread; the join gives sysbench's report.
fn start_load(
    cluster: &Cluster,
    guard: &ClusterGuard,
    load: NetLoad,
) -> thread::JoinHandle<String> {
    let cluster = Cluster::open(cluster.dir()).unwrap();
    let output = guard.path().join("sysbench-run.out");
    thread::spawn(move || {
        let status = load.run(&cluster, &output).expect("sysbench runs");
        let report = std::fs::read_to_string(&output).unwrap_or_default();
        assert!(status.success(), "sysbench failed ({status}):\n{report}");
        report
    })
}

fn namespaces_left() -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("tri"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `node` is Synced in a cluster of `size`.
fn synced_in(cluster: &Cluster, node: usize, size: usize) -> bool {
    let status = cluster.node_status(node);
    status.is_synced() && status.cluster_size() == Some(size)
}

fn formed_from_a_dba_my_cnf(nodes: usize) {
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard, nodes, SstMethod::Rsync);
    for node in 1..=nodes {
        let cnf = std::fs::read_to_string(cluster.config().cnf_path(node)).unwrap();
        for absent in [
            "wsrep_node_address",
            "gmcast.listen_addr",
            "ist.recv_addr",
            "wsrep_sst_receive_address",
            "wsrep_node_incoming_address",
            "bind-address",
        ] {
            assert!(
                !cnf.contains(absent),
                "node{node}'s my.cnf sets {absent}:\n{cnf}"
            );
        }
    }
    let expected: Vec<String> = (1..=nodes)
        .map(|n| format!("{}:3306", hosts::address(n)))
        .collect();
    for node in 1..=nodes {
        let status = cluster.node_status(node);
        assert_eq!(status.cluster_size(), Some(nodes), "node{node}");
        let incoming = cluster
            .sql(
                node,
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = 'WSREP_INCOMING_ADDRESSES'",
            )
            .unwrap();
        let mut listed: Vec<&str> = incoming.trim().split(',').collect();
        listed.sort_unstable();
        assert_eq!(listed, expected, "node{node}'s wsrep_incoming_addresses");
        let log = cluster.error_log_tail(node, usize::MAX);
        let advertised = format!(
            "peers reach this node at {}:4567 (group) and {}:4568 (IST)",
            hosts::address(node),
            hosts::address(node)
        );
        assert!(
            log.contains(&advertised),
            "node{node} does not say {advertised:?}"
        );
    }
    let load = load((1..=nodes).collect(), Duration::from_secs(15));
    load.prepare(&cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();
    let report = start_load(&cluster, &guard, load).join().unwrap();
    let committed = net_load::total_transactions(&report).unwrap_or(0);
    assert!(committed > 100, "sysbench committed {committed}:\n{report}");
    assert_sbtest_equal(&cluster);
    cluster.down().unwrap();
    assert_eq!(namespaces_left(), "", "namespaces left after down");
}

/// The DBA's my.cnf, on 3 hosts and on 5: the cluster forms, every member lists the
/// others' client addresses, sysbench writes to every host across the bridge, and the
/// tables end equal. `down` leaves no namespace behind.
#[test]
fn a_dba_my_cnf_forms_a_cluster_across_three_and_five_hosts() {
    let _network = one_network();
    formed_from_a_dba_my_cnf(3);
    formed_from_a_dba_my_cnf(5);
}

/// Host 3 is cut off for 25 s while sysbench writes to hosts 1 and 2: the majority never
/// has a second without commits; host 3 says non-Primary with a cluster of one and
/// refuses queries; after the heal it comes back by IST on its own, and the tables end
/// equal.
#[test]
fn a_cut_host_goes_non_primary_and_rejoins_by_ist_while_the_majority_writes() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard, 3, SstMethod::Rsync);
    let network = cluster.network().unwrap();
    let load = load(vec![1, 2], Duration::from_secs(45));
    load.prepare(&cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();
    let log_before = log_line_count(&cluster, 3);
    let running = start_load(&cluster, &guard, load);
    thread::sleep(Duration::from_secs(8));
    network.cut(3).unwrap();
    let cut = Instant::now();
    let took = wait_for("node3 non-Primary", Duration::from_secs(20), || {
        cluster.node_status(3).var("wsrep_cluster_status") == Some("non-Primary")
    });
    eprintln!("node3 went non-Primary {took:?} after the cut");
    wait_for(
        "node3 reports a cluster of one",
        Duration::from_secs(10),
        || cluster.node_status(3).cluster_size() == Some(1),
    );
    let status = cluster.node_status(3);
    assert_eq!(status.var("wsrep_ready"), Some("OFF"));
    let refused = cluster
        .sql(3, "SELECT COUNT(*) FROM sbtest.sbtest1")
        .expect_err("a non-Primary node refuses queries");
    assert!(format!("{refused:#}").contains("1047"), "{refused:#}");
    wait_for(
        "node1 and node2 see a cluster of two",
        Duration::from_secs(20),
        || {
            [1, 2]
                .iter()
                .all(|&n| cluster.node_status(n).cluster_size() == Some(2))
        },
    );
    thread::sleep(Duration::from_secs(25).saturating_sub(cut.elapsed()));
    network.heal(3).unwrap();
    let back = wait_for(
        "node3 Synced in a cluster of three",
        Duration::from_secs(90),
        || synced_in(&cluster, 3, 3),
    );
    eprintln!("node3 was Synced {back:?} after the heal");
    let report = running.join().unwrap();
    let tps = net_load::per_second_tps(&report);
    assert!(
        tps.len() >= 40,
        "sysbench reported {} seconds:\n{report}",
        tps.len()
    );
    // The first and last seconds of a run may be partial.
    let zero = net_load::longest_zero_run(&tps[1..tps.len() - 1]);
    assert_eq!(zero, 0, "the majority had {zero} s at 0 tps:\n{report}");
    let rejoin = new_log_lines(&cluster, 3, log_before);
    assert!(
        rejoin.contains("Receiving IST: "),
        "node3 did not rejoin by IST:\n{rejoin}"
    );
    assert!(
        !rejoin.contains("Running: 'wsrep_sst"),
        "node3 took an SST:\n{rejoin}"
    );
    assert_sbtest_equal(&cluster);
}

/// The Raft leader is cut off while sysbench writes to the other two hosts: they elect a
/// new leader and resume within 2 s; the old leader comes back by itself.
#[test]
fn the_majority_resumes_within_two_seconds_when_the_leader_is_cut_off() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard, 3, SstMethod::Rsync);
    let network = cluster.network().unwrap();
    let leader = (1..=3)
        .find(|&n| cluster.node_status(n).is_raft_leader())
        .expect("one node says it is the Raft leader");
    let others: Vec<usize> = (1..=3).filter(|&n| n != leader).collect();
    let load = load(others.clone(), Duration::from_secs(30));
    load.prepare(
        &cluster,
        others[0],
        &guard.path().join("sysbench-prepare.out"),
    )
    .unwrap();
    let running = start_load(&cluster, &guard, load);
    thread::sleep(Duration::from_secs(8));
    network.cut(leader).unwrap();
    wait_for("a new leader", Duration::from_secs(20), || {
        others
            .iter()
            .any(|&n| cluster.node_status(n).is_raft_leader())
    });
    thread::sleep(Duration::from_secs(10));
    network.heal(leader).unwrap();
    let report = running.join().unwrap();
    let tps = net_load::per_second_tps(&report);
    let zero = net_load::longest_zero_run(&tps[1..tps.len().saturating_sub(1)]);
    eprintln!("longest zero-tps gap with the leader (node{leader}) cut off: {zero} s");
    assert!(zero <= 2, "the majority had {zero} s at 0 tps:\n{report}");
    wait_for(
        "the old leader Synced again",
        Duration::from_secs(90),
        || synced_in(&cluster, leader, 3),
    );
    assert_sbtest_equal(&cluster);
}

/// Two hosts, one frozen by SIGSTOP: the survivor has no majority, says non-Primary with a
/// cluster of one; after SIGCONT both are Primary again and equal.
#[test]
fn a_two_host_cluster_with_one_host_frozen_reports_a_cluster_of_one() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard, 2, SstMethod::Rsync);
    let load = load(vec![1], Duration::from_secs(5));
    load.prepare(&cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();
    cluster.kill(2, Signal::Stop).unwrap();
    wait_for(
        "node1 non-Primary with size 1",
        Duration::from_secs(30),
        || {
            let status = cluster.node_status(1);
            status.var("wsrep_cluster_status") == Some("non-Primary")
                && status.cluster_size() == Some(1)
        },
    );
    cluster.kill(2, Signal::Cont).unwrap();
    wait_for(
        "both Primary and Synced again",
        Duration::from_secs(90),
        || (1..=2).all(|n| synced_in(&cluster, n, 2)),
    );
    start_load(&cluster, &guard, load).join().unwrap();
    assert_sbtest_equal(&cluster);
}

/// Joiners started at the same moment, as an orchestrator starts its pods: on 3 and on 5
/// hosts, by rsync and by trireme SST, every one gets its state and is Synced.
#[test]
fn joiners_started_together_all_get_their_state() {
    let _network = one_network();
    for (nodes, sst) in [
        (3, SstMethod::Rsync),
        (3, SstMethod::Trireme),
        (5, SstMethod::Rsync),
        (5, SstMethod::Trireme),
    ] {
        let (guard, _) = new_cluster_dir();
        let provider = trireme_provider();
        preflight(&provider);
        let mut opts = UpOptions::new(guard.path());
        opts.nodes = Some(nodes);
        opts.provider = Some(provider);
        opts.hosts = Some(true);
        opts.sst_method = Some(sst);
        opts.joiners_together = true;
        let started = Instant::now();
        let cluster = Cluster::up(&opts)
            .unwrap_or_else(|e| panic!("{nodes} hosts, {sst} SST, joiners together: {e:#}"));
        eprintln!(
            "{nodes} hosts, {sst} SST, joiners together: all Synced {:?} after the start",
            started.elapsed()
        );
        for node in 1..=nodes {
            let status = cluster.node_status(node);
            assert!(status.is_synced(), "node{node}");
            assert_eq!(status.cluster_size(), Some(nodes), "node{node}");
        }
        cluster.sql(1, "CREATE DATABASE together; CREATE TABLE together.t (id INT PRIMARY KEY); INSERT INTO together.t VALUES (1), (2)").unwrap();
        assert_equal_at_rest(&cluster, &["together.t"]);
        cluster.down().unwrap();
    }
}

/// IPv6: members in `gcomm://` as bracketed literals, with and without a port, and an IPv6
/// node address; the group listens on both stacks, IST and SST go over IPv6, and every
/// member lists the others' IPv6 client addresses.
#[test]
fn an_ipv6_cluster_forms_and_replicates() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts(&guard, 3, SstMethod::Rsync);
    cluster.down().unwrap();
    // The same cluster restarted with IPv6 addresses only.
    for node in 1..=3 {
        let path = cluster.config().cnf_path(node);
        let cnf = std::fs::read_to_string(&path).unwrap();
        let v6 = hosts::address_v6(node);
        let cnf = cnf
            .lines()
            .map(|line| {
                if line.starts_with("wsrep_cluster_address=") {
                    "wsrep_cluster_address=gcomm://[fd00:213::1]:4567,[fd00:213::2],[fd00:213::3]"
                        .to_string()
                } else if line.starts_with("wsrep_node_name=") {
                    format!("{line}\nwsrep_node_address=[{v6}]")
                } else {
                    line.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&path, cnf).unwrap();
    }
    let cluster = up_hosts(&guard, 3, SstMethod::Rsync);
    cluster
        .sql(
            2,
            "CREATE DATABASE v6; CREATE TABLE v6.t (id INT PRIMARY KEY); \
             INSERT INTO v6.t VALUES (1), (2), (3)",
        )
        .unwrap();
    assert_equal_at_rest(&cluster, &["v6.t"]);
    let incoming = cluster
        .sql(
            1,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'WSREP_INCOMING_ADDRESSES'",
        )
        .unwrap();
    for node in 1..=3 {
        let expected = format!("[{}]:3306", hosts::address_v6(node));
        assert!(incoming.contains(&expected), "{incoming} lacks {expected}");
    }
    let log = cluster.error_log_tail(2, usize::MAX);
    assert!(
        log.contains("peers reach this node at [fd00:213::2]:4567 (group)"),
        "node2 does not advertise its IPv6 address"
    );
}

/// A member of a cluster of two data hosts and an arbitrator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    Data(usize),
    Arbitrator,
}

/// The Raft leader: a data node that says so, else the arbitrator (which has no status to
/// ask), once both data nodes agree that nobody else leads.
fn leader_of_two_and_arbitrator(cluster: &Cluster) -> Member {
    match (1..=2).find(|&n| cluster.node_status(n).is_raft_leader()) {
        Some(node) => Member::Data(node),
        None => Member::Arbitrator,
    }
}

/// Crashes `victim` (SIGKILL) 8 s into 24 s of sysbench on data node `writer`, and returns
/// the longest run of seconds at 0 tps the writer's clients saw.
fn crash_under_load(
    cluster: &Cluster,
    guard: &ClusterGuard,
    victim: Member,
    writer: usize,
) -> usize {
    let running = start_load(cluster, guard, load(vec![writer], Duration::from_secs(24)));
    thread::sleep(Duration::from_secs(8));
    match victim {
        Member::Data(node) => cluster.kill(node, Signal::Kill).unwrap(),
        Member::Arbitrator => cluster.kill_arbitrator(Signal::Kill).unwrap(),
    }
    wait_for(
        "the writer in a primary component of two",
        Duration::from_secs(20),
        || synced_in(cluster, writer, 2),
    );
    let report = running.join().unwrap();
    let tps = net_load::per_second_tps(&report);
    assert!(
        tps.len() >= 20,
        "sysbench reported {} seconds:\n{report}",
        tps.len()
    );
    net_load::longest_zero_run(&tps[1..tps.len() - 1])
}

/// Starts a killed data node again and checks that it came back by IST.
fn rejoin_by_ist(cluster: &Cluster, node: usize) {
    let log_before = log_line_count(cluster, node);
    cluster.start_node(node).unwrap();
    wait_for(
        "the restarted node Synced among three members",
        Duration::from_secs(60),
        || synced_in(cluster, node, 3),
    );
    let rejoin = new_log_lines(cluster, node, log_before);
    assert!(
        rejoin.contains("Receiving IST: "),
        "node{node} did not rejoin by IST:\n{rejoin}"
    );
    // A restarted server always runs its SST script; the donor's bypasses the snapshot.
    assert!(
        rejoin.contains("rsync IST completed on joiner") && !rejoin.contains("SST completed"),
        "node{node} took an SST:\n{rejoin}"
    );
}

/// Two data hosts and a `trireme-arbitrator` on a third, garbd's usual place: SIGKILL of a
/// data node that does not lead the group costs its peer's clients no second at 0 tps, and
/// of the leader (data node or arbitrator) at most 2; a killed data node rejoins by IST;
/// with the arbitrator gone, the two data nodes stay primary and writable.
#[test]
fn two_data_hosts_and_an_arbitrator_keep_quorum_through_any_one_crash() {
    let _network = one_network();
    let (guard, _) = new_cluster_dir();
    let cluster = up_hosts_with(&guard, 2, SstMethod::Rsync, true);
    assert!(
        synced_in(&cluster, 1, 3),
        "the arbitrator counts as a member"
    );
    let prepare = load(vec![1], Duration::from_secs(1));
    prepare
        .prepare(&cluster, 1, &guard.path().join("sysbench-prepare.out"))
        .unwrap();

    let follower = match leader_of_two_and_arbitrator(&cluster) {
        Member::Data(1) => 2,
        _ => 1,
    };
    let writer = 3 - follower;
    let zero = crash_under_load(&cluster, &guard, Member::Data(follower), writer);
    eprintln!("data node {follower} (not the leader) killed: {zero} s at 0 tps on node{writer}");
    assert_eq!(
        zero, 0,
        "a follower's crash stopped node{writer}'s commits for {zero} s"
    );
    rejoin_by_ist(&cluster, follower);

    let leader = leader_of_two_and_arbitrator(&cluster);
    let writer = match leader {
        Member::Data(node) => 3 - node,
        Member::Arbitrator => 1,
    };
    let zero = crash_under_load(&cluster, &guard, leader, writer);
    eprintln!("the leader ({leader:?}) killed: {zero} s at 0 tps on node{writer}");
    assert!(
        zero <= 2,
        "the leader's crash stopped node{writer}'s commits for {zero} s"
    );
    match leader {
        Member::Data(node) => {
            rejoin_by_ist(&cluster, node);
            cluster.kill_arbitrator(Signal::Kill).unwrap();
        }
        Member::Arbitrator => {}
    }
    wait_for(
        "both data nodes primary without the arbitrator",
        Duration::from_secs(20),
        || (1..=2).all(|n| synced_in(&cluster, n, 2)),
    );
    for node in 1..=2 {
        cluster
            .sql(
                node,
                &format!(
                    "INSERT INTO sbtest.sbtest1 (k, c, pad) VALUES ({node}, 'after', 'arbitrator')"
                ),
            )
            .unwrap_or_else(|e| panic!("node{node} refuses a write without the arbitrator: {e:#}"));
    }
    assert_sbtest_equal(&cluster);
}
