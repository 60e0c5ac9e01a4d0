//! The full-crash drill: bank clients on every node, then every node SIGKILLed at once (a
//! power loss) and all started again as their init system would (`cluster up`: each with
//! the position `--wsrep-recover` finds, none told to bootstrap, no file edited), round after
//! round. The provider must restore the primary component by itself each time; at the end
//! the bank is checked on every node at rest: nothing acknowledged lost, nothing invented,
//! the nodes equal.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::bank::{self, BankClient, History};
use crate::compare::RestOptions;
use crate::{Cluster, UpOptions};

/// How the comparison at the end waits for rest.
const REST: RestOptions = RestOptions {
    settle: Duration::from_secs(2),
    timeout: Duration::from_secs(180),
};

/// The most rounds one drill runs (each is a crash and a restart of every node).
pub const ROUNDS_MAX: usize = 50;

/// What a drill does.
#[derive(Debug, Clone)]
pub struct DrillOptions {
    /// Crashes of the whole cluster.
    pub rounds: usize,
    /// How long the clients run before each crash.
    pub load: Duration,
    /// Bank clients per node.
    pub clients_per_node: usize,
    /// Seed of the clients' choices.
    pub seed: u64,
}

/// What a drill saw.
#[derive(Debug, Default, Clone)]
pub struct DrillReport {
    /// Seconds from the start of each restart to every node Synced together.
    pub back_after: Vec<f64>,
    /// Transfers acknowledged, attempted, and of unknown fate, over all rounds.
    pub acknowledged: usize,
    /// See `acknowledged`.
    pub attempted: usize,
    /// See `acknowledged`.
    pub uncertain: usize,
    /// What is wrong, one line each; empty when the drill passed.
    pub problems: Vec<String>,
}

impl DrillReport {
    /// A few lines for a person: the restart times and the bank's verdict.
    pub fn summary(&self) -> String {
        let mut times = self.back_after.clone();
        times.sort_by(f64::total_cmp);
        let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
        let mut text = format!(
            "{} full crashes: back in {:.1} s median, {:.1} s worst; {} transfers \
             acknowledged ({} attempted, {} uncertain); {} problem(s)\n",
            times.len(),
            median,
            times.last().copied().unwrap_or(0.0),
            self.acknowledged,
            self.attempted,
            self.uncertain,
            self.problems.len()
        );
        for problem in &self.problems {
            text.push_str(&format!("  PROBLEM: {problem}\n"));
        }
        text
    }
}

/// Runs the drill on the running cluster that `up` restarts (created with the bank by the
/// caller or here), logging each step with `log`.
pub fn run(up: &UpOptions, opts: &DrillOptions, log: &mut dyn FnMut(&str)) -> Result<DrillReport> {
    ensure!(
        (1..=ROUNDS_MAX).contains(&opts.rounds),
        "a drill runs 1 to {ROUNDS_MAX} rounds, not {}",
        opts.rounds
    );
    let mut cluster = Cluster::up(up).context("the cluster does not come up")?;
    if cluster
        .sql(1, "SELECT 1 FROM bank.accounts LIMIT 1")
        .is_err()
    {
        bank::create(&cluster, 1)?;
    }
    let mut report = DrillReport::default();
    let mut records = Vec::new();
    let epoch = Instant::now();
    for round in 1..=opts.rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = start_clients(&cluster, opts, round, &stop, epoch);
        thread::sleep(opts.load);
        let killed = cluster.kill_all()?;
        stop.store(true, Ordering::Relaxed);
        records.extend(
            clients
                .into_iter()
                .map(|client| client.join().expect("a bank client thread panicked")),
        );
        log(&format!(
            "round {round}: SIGKILL of nodes {killed:?} under the bank load"
        ));
        let restart = Instant::now();
        cluster = Cluster::up(up).with_context(|| format!("round {round}: no restart"))?;
        let seconds = restart.elapsed().as_secs_f64();
        log(&format!(
            "round {round}: all Synced again {seconds:.1} s after the start"
        ));
        report.back_after.push(seconds);
    }
    let history = History::merge(records);
    report.acknowledged = history.acknowledged.len();
    report.attempted = history.attempted.len();
    report.uncertain = history.uncertain.len();
    if history.acknowledged.is_empty() {
        report
            .problems
            .push("no transfer was acknowledged: the drill tested nothing".into());
    }
    log("checking the bank on every node at rest");
    report
        .problems
        .extend(bank::check_at_rest(&cluster, &history, REST));
    Ok(report)
}

fn start_clients(
    cluster: &Cluster,
    opts: &DrillOptions,
    round: usize,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
) -> Vec<thread::JoinHandle<bank::ClientRecord>> {
    let mut clients = Vec::new();
    for node in 1..=cluster.nodes() {
        let address: Ipv4Addr = cluster
            .config()
            .sql_host(node)
            .parse()
            .expect("a node's SQL host is an IPv4 address");
        let port = cluster.config().ports(node).sql;
        for slot in 0..opts.clients_per_node {
            // Distinct in every round: transfer ids carry the client id.
            let id = ((round * 16 + node) * 64 + slot) as u64;
            let client = BankClient {
                id,
                host: (address, port),
                seed: opts.seed.rotate_left(11) ^ id,
            };
            let stop = Arc::clone(stop);
            clients.push(thread::spawn(move || client.run(stop, epoch)));
        }
    }
    clients
}
