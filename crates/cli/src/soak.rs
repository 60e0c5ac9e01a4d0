//! The transfer soak: state transfers of every kind under an unthrottled write load, each
//! followed by a comparison of every node at rest.
//!
//! One 3-node cluster. sysbench writes on node 1 and large transactions run on node 2 while
//! node 3 is brought back by the transfer under test: a full SST of its emptied datadir by
//! one of the three methods, IST after a clean stop, or a rejoin after it was frozen
//! (SIGSTOP) until the others evicted it. The donor is pinned to node 1 (the loaded node)
//! in odd rounds and node 2 in even ones. After each transfer the load stops and
//! `Cluster::compare_at_rest` must find every table equal on all three nodes; the soak stops
//! at the first difference or failure and leaves the cluster for inspection.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::load::{self, Load, LoadOptions, LoadSummary};
use crate::{sys, Cluster, RestOptions, Signal, SstMethod, UpOptions};

/// The node every transfer brings back.
const JOINER: usize = 3;
/// How long a stopped node stays away before an IST round starts it again, so that there
/// is a gap to transfer.
const IST_GAP: Duration = Duration::from_secs(3);
/// How long a frozen node stays frozen after the others evicted it.
const FROZEN_AFTER_EVICTION: Duration = Duration::from_secs(2);
/// How long the others may take to evict a frozen node.
const EVICTION_TIMEOUT: Duration = Duration::from_secs(120);
/// The load goes on this long after the joiner is Synced: it then applies under load too.
const LOAD_AFTER_TRANSFER: Duration = Duration::from_secs(2);
/// Provider options of the soak cluster: a gcache large enough for every IST gap.
const PROVIDER_OPTIONS: &str = "gcache.size=512M";

/// One kind of state transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferKind {
    /// A full SST of an emptied datadir by this method.
    Sst(SstMethod),
    /// IST after a clean stop.
    Ist,
    /// Frozen by SIGSTOP until evicted, then resumed: back by IST.
    Freeze,
}

impl TransferKind {
    /// Every kind, in the order rounds run them.
    pub const ALL: [TransferKind; 5] = [
        TransferKind::Sst(SstMethod::Trireme),
        TransferKind::Sst(SstMethod::Rsync),
        TransferKind::Sst(SstMethod::Mariabackup),
        TransferKind::Ist,
        TransferKind::Freeze,
    ];
}

impl fmt::Display for TransferKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferKind::Sst(method) => write!(f, "{method}"),
            TransferKind::Ist => f.write_str("ist"),
            TransferKind::Freeze => f.write_str("freeze"),
        }
    }
}

impl FromStr for TransferKind {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ist" => Ok(TransferKind::Ist),
            "freeze" => Ok(TransferKind::Freeze),
            method => method.parse().map(TransferKind::Sst).map_err(|_| {
                anyhow!("unknown transfer {s:?}: use trireme, rsync, mariabackup, ist or freeze")
            }),
        }
    }
}

/// What the soak runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// The cluster directory (created; removed after a soak without failure).
    pub dir: PathBuf,
    /// The provider [default: libtrireme.so next to the running binary].
    pub provider: Option<PathBuf>,
    /// The cluster's base port.
    pub base_port: u16,
    /// More `[mysqld]` settings for every node.
    pub server_options: Option<String>,
    /// The write load.
    pub load: LoadOptions,
    /// Rounds of each kind.
    pub rounds: usize,
    /// The kinds, run in this order in every round.
    pub kinds: Vec<TransferKind>,
    /// How long one transfer may take until the joiner is Synced.
    pub transfer_timeout: Duration,
    /// How long the load runs before each transfer starts.
    pub warmup: Duration,
    /// The wait for rest before each comparison.
    pub rest: RestOptions,
}

/// One round's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    /// The transfer.
    pub kind: TransferKind,
    /// 1-based round number.
    pub round: usize,
    /// The donor node pinned for the round.
    pub donor: usize,
    /// From stopping (or freezing) the joiner until it was Synced again.
    pub seconds: f64,
    /// The position every node stood at when compared.
    pub seqno: i64,
    /// What the load did during the round.
    pub load: LoadSummary,
}

/// A soak in progress: its cluster and the rounds done.
pub struct Soak {
    cluster: Cluster,
    opts: SoakOptions,
    records: Vec<RoundRecord>,
    started: Instant,
}

impl Soak {
    /// Creates the cluster in `opts.dir` and prepares the tables the load writes.
    pub fn create(opts: SoakOptions) -> Result<Soak> {
        let mut up = UpOptions::new(&opts.dir);
        up.nodes = Some(3);
        up.provider = opts.provider.clone();
        up.base_port = Some(opts.base_port);
        // The trireme method needs its program on the servers' PATH; the others need
        // nothing, so the cluster is created with it and switched per round.
        up.sst_method = Some(SstMethod::Trireme);
        up.provider_options = Some(PROVIDER_OPTIONS.to_string());
        up.server_options = opts.server_options.clone();
        up.timeouts.node_start = opts.transfer_timeout;
        let cluster = Cluster::up(&up).context("starting the soak cluster")?;
        if let Err(error) = load::prepare(&cluster, &opts.load, &opts.dir.join("prepare.log")) {
            let _ = cluster.down();
            return Err(error.context("preparing the tables"));
        }
        Ok(Soak {
            cluster,
            opts,
            records: Vec::new(),
            started: Instant::now(),
        })
    }

    /// The cluster under test.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The rounds done so far.
    pub fn records(&self) -> &[RoundRecord] {
        &self.records
    }

    /// Runs every round; `progress` hears of each one. Stops at the first failure or
    /// difference, whose error carries the comparison report.
    pub fn run(&mut self, progress: &mut dyn FnMut(&str)) -> Result<()> {
        for round in 1..=self.opts.rounds {
            for kind in self.opts.kinds.clone() {
                let record = self
                    .round(kind, round)
                    .with_context(|| format!("round {round} of {kind}"))?;
                let large = &record.load.large;
                let failed = match (&large.first_error, large.failed) {
                    (Some(error), n) if n > 0 => format!(", {n} failed, the first with: {error}"),
                    _ => String::new(),
                };
                progress(&format!(
                    "round {round}/{} {kind:<11} donor node{}: back in {:.1} s, all equal at \
                     seqno {} (load {:.0} tps, {} large transactions{failed})",
                    self.opts.rounds,
                    record.donor,
                    record.seconds,
                    record.seqno,
                    record.load.tps,
                    large.committed
                ));
                self.records.push(record);
            }
        }
        Ok(())
    }

    /// Stops the cluster and removes its directory.
    pub fn remove(self) -> Result<()> {
        self.cluster.down()?;
        fs::remove_dir_all(&self.opts.dir)
            .with_context(|| format!("cannot remove {}", self.opts.dir.display()))
    }

    fn round(&mut self, kind: TransferKind, round: usize) -> Result<RoundRecord> {
        let donor = if round % 2 == 1 { 1 } else { 2 };
        self.prepare_joiner(kind, donor)?;
        let log_from = self
            .cluster
            .error_log_tail(JOINER, usize::MAX)
            .lines()
            .count();
        let limit = self.opts.warmup + self.opts.transfer_timeout + EVICTION_TIMEOUT;
        let mut load = Load::start(
            &self.cluster,
            &self.opts.load,
            limit,
            &self.opts.dir.join("load.txt"),
        )?;
        thread::sleep(self.opts.warmup);
        if !load.running() {
            bail!(
                "sysbench stopped before the transfer; see {}",
                self.opts.dir.join("load.txt").display()
            );
        }
        let started = Instant::now();
        let transferred = self.transfer(kind);
        let seconds = started.elapsed().as_secs_f64();
        if transferred.is_ok() {
            thread::sleep(LOAD_AFTER_TRANSFER);
        }
        let summary = load.stop()?;
        transferred?;
        self.check_transfer_kind(kind, log_from)?;
        let seqno = self.compare()?;
        Ok(RoundRecord {
            kind,
            round,
            donor,
            seconds,
            seqno,
            load: summary,
        })
    }

    /// Sets the joiner's SST method and donor for the round (and the donors' method).
    fn prepare_joiner(&self, kind: TransferKind, donor: usize) -> Result<()> {
        let path = self.cluster.config().cnf_path(JOINER);
        let mut text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if let TransferKind::Sst(method) = kind {
            text = with_setting(&text, "wsrep_sst_method", method.as_str());
            for node in 1..=2 {
                self.cluster
                    .sql(node, &format!("SET GLOBAL wsrep_sst_method = '{method}'"))?;
            }
        }
        text = with_setting(&text, "wsrep_sst_donor", &format!("node{donor}"));
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    fn transfer(&self, kind: TransferKind) -> Result<()> {
        match kind {
            TransferKind::Sst(_) => {
                self.cluster.stop_node(JOINER)?;
                empty_dir(&self.cluster.config().datadir(JOINER))?;
                self.cluster.start_node(JOINER)
            }
            TransferKind::Ist => {
                self.cluster.stop_node(JOINER)?;
                thread::sleep(IST_GAP);
                self.cluster.start_node(JOINER)
            }
            TransferKind::Freeze => self.freeze_past_eviction(),
        }
    }

    fn freeze_past_eviction(&self) -> Result<()> {
        let conf_id = |node| self.cluster.node_status(node).conf_id();
        self.cluster.kill(JOINER, Signal::Stop)?;
        let evicted = sys::wait_until(EVICTION_TIMEOUT, || {
            (1..=2).all(|n| self.cluster.node_status(n).cluster_size() == Some(2))
        });
        let evicted_in = conf_id(1);
        thread::sleep(FROZEN_AFTER_EVICTION);
        // Whatever happened, the node must not stay frozen.
        self.cluster.kill(JOINER, Signal::Cont)?;
        if !evicted {
            bail!(
                "node{JOINER}, frozen, was not evicted within {} s",
                EVICTION_TIMEOUT.as_secs()
            );
        }
        // Right after SIGCONT the node still reports the view it was frozen in: it is back
        // only once it shares a newer view with the others.
        let readmitted = sys::wait_until(EVICTION_TIMEOUT, || {
            let own = conf_id(JOINER);
            own.is_some() && own == conf_id(1) && own > evicted_in
        });
        if !readmitted {
            bail!(
                "node{JOINER} was not readmitted within {} s of SIGCONT",
                EVICTION_TIMEOUT.as_secs()
            );
        }
        self.cluster.wait_synced(JOINER, Some(3))
    }

    /// An IST round (or a frozen node's rejoin) must really have gone through IST.
    fn check_transfer_kind(&self, kind: TransferKind, log_from: usize) -> Result<()> {
        if matches!(kind, TransferKind::Sst(_)) {
            return Ok(()); // an emptied datadir can only be filled by a full transfer
        }
        let log = self.cluster.error_log_tail(JOINER, usize::MAX);
        let by_ist = log
            .lines()
            .skip(log_from)
            .any(|line| line.to_ascii_lowercase().contains("receiving ist"));
        if !by_ist {
            bail!("node{JOINER} came back without receiving IST: the round did not test IST");
        }
        Ok(())
    }

    /// Compares the tables the load writes on every node at rest; a difference fails the
    /// soak with the report.
    fn compare(&self) -> Result<i64> {
        let tables = self.opts.load.tables_written();
        let comparison = self
            .cluster
            .compare_at_rest(&[1, 2, 3], Some(&tables), self.opts.rest)?;
        if !comparison.equal() {
            bail!("the nodes differ:\n{}", comparison.report());
        }
        Ok(comparison.seqno)
    }

    /// The rounds by kind: count, transfer times and load.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{:<12} {:>6} {:>10} {:>10} {:>10}\n",
            "transfer", "rounds", "median s", "max s", "load tps"
        );
        for kind in &self.opts.kinds {
            let rounds: Vec<&RoundRecord> =
                self.records.iter().filter(|r| r.kind == *kind).collect();
            let seconds: Vec<f64> = rounds.iter().map(|r| r.seconds).collect();
            let tps: Vec<f64> = rounds.iter().map(|r| r.load.tps).collect();
            out.push_str(&format!(
                "{:<12} {:>6} {:>10.1} {:>10.1} {:>10.0}\n",
                kind.to_string(),
                rounds.len(),
                median(&seconds),
                seconds.iter().copied().fold(0.0, f64::max),
                median(&tps),
            ));
        }
        out.push_str(&format!(
            "{} rounds in {:.0} s, every one followed by all tables equal on all nodes at rest\n",
            self.records.len(),
            self.started.elapsed().as_secs_f64()
        ));
        out
    }

    /// One line per round, tab-separated, with a header.
    pub fn tsv(&self) -> String {
        let mut out = String::from(
            "kind\tround\tdonor\ttransfer_seconds\tseqno\tload_tps\tload_transactions\t\
             large_committed\tlarge_failed\tequal\n",
        );
        for r in &self.records {
            out.push_str(&format!(
                "{}\t{}\tnode{}\t{:.2}\t{}\t{:.1}\t{}\t{}\t{}\tyes\n",
                r.kind,
                r.round,
                r.donor,
                r.seconds,
                r.seqno,
                r.load.tps,
                r.load.transactions,
                r.load.large.committed,
                r.load.large.failed
            ));
        }
        out
    }
}

/// `text` (a my.cnf) with `key=value` in its `[mysqld]` group: an existing line is
/// replaced, else one is added right after the group's header.
fn with_setting(text: &str, key: &str, value: &str) -> String {
    let line = format!("{key}={value}");
    let is_key = |l: &str| l.split('=').next().is_some_and(|k| k.trim() == key);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if let Some(existing) = lines.iter_mut().find(|l| is_key(l)) {
        *existing = line;
    } else if let Some(header) = lines.iter().position(|l| l.trim() == "[mysqld]") {
        lines.insert(header + 1, line);
    } else {
        lines.insert(0, "[mysqld]".to_string());
        lines.insert(1, line);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Removes everything inside `dir`, keeping the directory (its owner and mode).
fn empty_dir(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        let removed = if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print_alike() {
        for kind in TransferKind::ALL {
            assert_eq!(kind.to_string().parse::<TransferKind>().unwrap(), kind);
        }
        let error = "xtrabackup".parse::<TransferKind>().unwrap_err();
        assert!(error.to_string().contains("use trireme, rsync"), "{error}");
    }

    #[test]
    fn a_setting_replaces_its_line_or_joins_the_mysqld_group() {
        let cnf = "[mysqld]\ndatadir=/d\nwsrep_sst_method=rsync\n\n[client]\nuser=root\n";
        let changed = with_setting(cnf, "wsrep_sst_method", "trireme");
        assert!(changed.contains("wsrep_sst_method=trireme\n"), "{changed}");
        assert!(!changed.contains("rsync"), "{changed}");
        let added = with_setting(&changed, "wsrep_sst_donor", "node2");
        assert!(
            added.starts_with("[mysqld]\nwsrep_sst_donor=node2\ndatadir=/d\n"),
            "{added}"
        );
        let again = with_setting(&added, "wsrep_sst_donor", "node1");
        assert_eq!(again.matches("wsrep_sst_donor").count(), 1, "{again}");
    }

    #[test]
    fn medians_of_odd_even_and_empty_lists() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
