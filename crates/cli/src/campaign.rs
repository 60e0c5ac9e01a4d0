//! The fault campaign: bank transfers from clients on every host of a `--hosts` cluster
//! while a nemesis kills, freezes, cuts off and restarts nodes, one fault at a time, for a
//! bounded time; then the checker of [`crate::bank`] and a comparison of the nodes at rest.
//!
//! The schedule comes from a seed alone, so the same seed gives Trireme and Galera the same
//! faults in the same order, on the same hosts, for the same durations. Only "the leader"
//! is resolved when its turn comes: the node that says it is the Raft leader, or the first
//! node for a provider without one.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::bank::{self, BankClient, History};
use crate::compare::RestOptions;
use crate::{hosts, Cluster, Signal, SstMethod, UpOptions};

/// Quiet time before each fault, so that each one starts from a whole cluster.
const CALM: Duration = Duration::from_secs(5);
/// Longest a cluster may take to be whole again (every node Synced) after a fault.
const RECOVERY: Duration = Duration::from_secs(180);
/// How the comparison at the end waits for rest.
const REST: RestOptions = RestOptions {
    settle: Duration::from_secs(2),
    timeout: Duration::from_secs(180),
};
/// Faults drawn per schedule: more than any bounded campaign gets through.
const SCHEDULE_LENGTH: usize = 1000;

/// What the nemesis does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL, then a restart after the hold.
    Kill,
    /// SIGSTOP, then SIGCONT after the hold.
    Freeze,
    /// The host's link cut for the hold.
    CutHost,
    /// The leader's link cut for the hold.
    CutLeader,
    /// A clean stop and a start.
    Restart,
}

/// One fault of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// The node it happens to (ignored for [`FaultKind::CutLeader`]).
    pub node: usize,
    /// How long it lasts.
    pub hold: Duration,
}

/// The faults for `seed` on a cluster of `nodes`.
pub fn schedule(seed: u64, nodes: usize) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..SCHEDULE_LENGTH)
        .map(|_| {
            let kind = match rng.gen_range(0..5) {
                0 => FaultKind::Kill,
                1 => FaultKind::Freeze,
                2 => FaultKind::CutHost,
                3 => FaultKind::CutLeader,
                _ => FaultKind::Restart,
            };
            let hold_seconds = match kind {
                FaultKind::Kill => rng.gen_range(5..=10),
                FaultKind::Freeze => rng.gen_range(5..=15),
                FaultKind::CutHost | FaultKind::CutLeader => rng.gen_range(10..=20),
                FaultKind::Restart => 0,
            };
            Fault {
                kind,
                node: rng.gen_range(1..=nodes),
                hold: Duration::from_secs(hold_seconds),
            }
        })
        .collect()
}

/// How a campaign runs.
#[derive(Debug, Clone)]
pub struct CampaignOptions {
    /// The cluster directory (created; removed after a campaign without problems).
    pub dir: PathBuf,
    /// The wsrep provider.
    pub provider: PathBuf,
    /// Hosts in the cluster.
    pub nodes: usize,
    /// Seed of the schedule and of the clients.
    pub seed: u64,
    /// How long faults are injected (the last one may run past it).
    pub duration: Duration,
    /// Bank clients per host.
    pub clients_per_host: usize,
}

/// What a campaign found.
#[derive(Debug, Clone, Default)]
pub struct CampaignReport {
    /// The provider's file name.
    pub provider: String,
    /// The seed.
    pub seed: u64,
    /// Transfers acknowledged to clients.
    pub acknowledged: usize,
    /// Transfers attempted.
    pub attempted: usize,
    /// Transfers whose COMMIT failed without an answer.
    pub uncertain: usize,
    /// The faults injected, as they happened.
    pub faults: Vec<String>,
    /// Everything found wrong (empty: the campaign passed).
    pub problems: Vec<String>,
    /// The longest run of whole seconds with no acknowledged transfer anywhere.
    pub longest_silence: u64,
    /// How long the load ran.
    pub load_seconds: u64,
    /// The clients' failed statements by cause (server error code, or the connection).
    pub errors: std::collections::BTreeMap<String, u64>,
}

impl CampaignReport {
    /// A few lines for people.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "{} seed {}: {} transfers acknowledged ({} attempted, {} uncertain) in {} s; \
             {} faults; longest stretch without a commit: {} s; {} problem(s)",
            self.provider,
            self.seed,
            self.acknowledged,
            self.attempted,
            self.uncertain,
            self.load_seconds,
            self.faults.len(),
            self.longest_silence,
            self.problems.len()
        );
        let errors: Vec<String> = self
            .errors
            .iter()
            .map(|(cause, count)| format!("{cause} x{count}"))
            .collect();
        let _ = writeln!(text, "  client errors: {}", errors.join(", "));
        for fault in &self.faults {
            let _ = writeln!(text, "  fault: {fault}");
        }
        for problem in &self.problems {
            let _ = writeln!(text, "  PROBLEM: {problem}");
        }
        text
    }
}

/// Runs a campaign; `log` hears of each step. An error means the campaign could not run;
/// what it found wrong is in the report.
pub fn run(opts: &CampaignOptions, log: &mut dyn FnMut(&str)) -> Result<CampaignReport> {
    if opts.dir.exists() {
        anyhow::bail!(
            "{} exists: a campaign starts from a new cluster; choose another --dir",
            opts.dir.display()
        );
    }
    let mut up = UpOptions::new(&opts.dir);
    up.nodes = Some(opts.nodes);
    up.provider = Some(opts.provider.clone());
    up.hosts = Some(true);
    up.sst_method = Some(SstMethod::Rsync);
    up.provider_options = Some("gcache.size=512M".to_string());
    let cluster = Cluster::up(&up).context("the campaign's cluster did not come up")?;
    bank::create(&cluster, 1)?;
    let mut report = CampaignReport {
        provider: opts
            .provider
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        seed: opts.seed,
        ..CampaignReport::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let clients = start_clients(opts, &cluster, &stop, epoch);
    inject_faults(opts, &cluster, &mut report, log);
    stop.store(true, Ordering::Relaxed);
    report.load_seconds = epoch.elapsed().as_secs();
    let records = clients
        .into_iter()
        .map(|client| client.join().expect("a bank client panicked"))
        .collect();
    let history = History::merge(records);
    report.acknowledged = history.acknowledged.len();
    report.attempted = history.attempted.len();
    report.uncertain = history.uncertain.len();
    report.errors = history.errors.clone();
    report.longest_silence = history.longest_silence(report.load_seconds);
    log("load stopped: checking the bank on every node at rest");
    check(&cluster, &history, &mut report);
    Ok(report)
}

fn start_clients(
    opts: &CampaignOptions,
    cluster: &Cluster,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
) -> Vec<thread::JoinHandle<bank::ClientRecord>> {
    let port = cluster.config().ports(1).sql;
    let mut clients = Vec::new();
    for host in 1..=opts.nodes {
        for slot in 0..opts.clients_per_host {
            let id = (host * 64 + slot) as u64;
            let client = BankClient {
                id,
                host: (hosts::address(host), port),
                seed: opts.seed.rotate_left(17) ^ id,
            };
            let stop = Arc::clone(stop);
            clients.push(thread::spawn(move || client.run(stop, epoch)));
        }
    }
    clients
}

/// Injects the schedule's faults until the campaign's time is up, waiting after each for
/// the whole cluster to be Synced again.
fn inject_faults(
    opts: &CampaignOptions,
    cluster: &Cluster,
    report: &mut CampaignReport,
    log: &mut dyn FnMut(&str),
) {
    let start = Instant::now();
    for fault in schedule(opts.seed, opts.nodes) {
        thread::sleep(CALM);
        if start.elapsed() >= opts.duration {
            break;
        }
        let described = match inject(cluster, fault) {
            Ok(described) => described,
            Err(error) => {
                report.problems.push(format!("{fault:?} failed: {error:#}"));
                break;
            }
        };
        log(&format!("t={:>4}s {described}", start.elapsed().as_secs()));
        report.faults.push(described.clone());
        let recovery = Instant::now();
        if !crate::sys::wait_until(RECOVERY, || whole(cluster)) {
            report.problems.push(format!(
                "the cluster was not whole (every node Synced) {} s after: {described}",
                RECOVERY.as_secs()
            ));
            break;
        }
        log(&format!(
            "        whole again {:.1} s later",
            recovery.elapsed().as_secs_f64()
        ));
    }
}

fn whole(cluster: &Cluster) -> bool {
    (1..=cluster.nodes()).all(|node| {
        let status = cluster.node_status(node);
        status.is_synced() && status.cluster_size() == Some(cluster.nodes())
    })
}

/// Injects one fault and undoes it after its hold; describes what was done.
fn inject(cluster: &Cluster, fault: Fault) -> Result<String> {
    let network = cluster.network().context("a campaign needs hosts")?;
    let hold = fault.hold;
    let node = match fault.kind {
        FaultKind::CutLeader => (1..=cluster.nodes())
            .find(|&n| cluster.node_status(n).is_raft_leader())
            .unwrap_or(1),
        _ => fault.node,
    };
    match fault.kind {
        FaultKind::Kill => {
            cluster.kill(node, Signal::Kill)?;
            thread::sleep(hold);
            cluster.start_node(node)?;
            Ok(format!(
                "SIGKILL node{node}, restarted {} s later",
                hold.as_secs()
            ))
        }
        FaultKind::Freeze => {
            cluster.kill(node, Signal::Stop)?;
            thread::sleep(hold);
            cluster.kill(node, Signal::Cont)?;
            Ok(format!(
                "SIGSTOP node{node}, SIGCONT {} s later",
                hold.as_secs()
            ))
        }
        FaultKind::CutHost | FaultKind::CutLeader => {
            network.cut(node)?;
            thread::sleep(hold);
            network.heal(node)?;
            let which = if fault.kind == FaultKind::CutLeader {
                "the leader, "
            } else {
                ""
            };
            Ok(format!(
                "cut off {which}node{node}, for {} s",
                hold.as_secs()
            ))
        }
        FaultKind::Restart => {
            cluster.stop_node(node)?;
            cluster.start_node(node)?;
            Ok(format!("clean restart of node{node}"))
        }
    }
}

/// The checks at the end: every node at rest and equal, then the bank's invariants.
fn check(cluster: &Cluster, history: &History, report: &mut CampaignReport) {
    if let Some(network) = cluster.network() {
        if let Err(error) = network.join_all() {
            report
                .problems
                .push(format!("cannot heal the network: {error:#}"));
        }
    }
    report
        .problems
        .extend(bank::check_at_rest(cluster, history, REST));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_of_every_kind_within_bounds() {
        let first = schedule(7, 3);
        assert_eq!(first, schedule(7, 3), "the same seed, the same faults");
        assert_ne!(first, schedule(8, 3));
        for kind in [
            FaultKind::Kill,
            FaultKind::Freeze,
            FaultKind::CutHost,
            FaultKind::CutLeader,
            FaultKind::Restart,
        ] {
            assert!(first.iter().any(|f| f.kind == kind), "{kind:?}");
        }
        for fault in &first {
            assert!((1..=3).contains(&fault.node));
            let seconds = fault.hold.as_secs();
            match fault.kind {
                FaultKind::Freeze => assert!((5..=15).contains(&seconds)),
                FaultKind::Kill => assert!((5..=10).contains(&seconds)),
                FaultKind::CutHost | FaultKind::CutLeader => {
                    assert!((10..=20).contains(&seconds))
                }
                FaultKind::Restart => assert_eq!(seconds, 0),
            }
        }
    }
}
