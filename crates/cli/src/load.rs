//! A bounded write load for a local cluster: sysbench `oltp_write_only` (updates, deletes
//! and inserts under secondary keys, unthrottled) on one node, and large transactions on
//! another (thousands of rows per commit, in one table of their own so that they never
//! conflict with sysbench).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{sys, Cluster};

/// The schema sysbench writes.
pub const SYSBENCH_SCHEMA: &str = "sbtest";
/// The table the large transactions rewrite.
pub const LARGE_TABLE: &str = "soak.big";
/// Groups of [`LARGE_TABLE`]: each large transaction rewrites one group.
const LARGE_GROUPS: usize = 10;
/// Pause between two large transactions.
const LARGE_PAUSE: Duration = Duration::from_millis(500);
/// Errors a loaded node may answer with while members come and go: deadlock and lock wait
/// (certification conflicts and brute-force aborts), statement interrupted, node not
/// ready (a view change). sysbench retries the transaction; the load goes on.
const TOLERATED_ERRORS: &str = "1213,1205,1180,1047";
/// How long a stopped sysbench may take to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The shape of the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// sysbench tables.
    pub tables: usize,
    /// Rows per sysbench table.
    pub table_size: usize,
    /// sysbench threads on the loaded node.
    pub threads: usize,
    /// Rows of [`LARGE_TABLE`] (0: no large transactions).
    pub large_rows: usize,
    /// The node sysbench writes to.
    pub sysbench_node: usize,
    /// The node the large transactions run on.
    pub large_node: usize,
}

impl LoadOptions {
    /// Every table the load writes, as `schema.table`.
    pub fn tables_written(&self) -> Vec<String> {
        let mut tables: Vec<String> = (1..=self.tables)
            .map(|i| format!("{SYSBENCH_SCHEMA}.sbtest{i}"))
            .collect();
        if self.large_rows > 0 {
            tables.push(LARGE_TABLE.to_string());
        }
        tables
    }

    fn sysbench(&self, cluster: &Cluster) -> Command {
        let mut cmd = Command::new("sysbench");
        cmd.args([
            "oltp_write_only",
            "--db-driver=mysql",
            "--mysql-user=root",
            &format!("--mysql-db={SYSBENCH_SCHEMA}"),
            &format!("--tables={}", self.tables),
            &format!("--table-size={}", self.table_size),
            &format!(
                "--mysql-socket={}",
                cluster.socket(self.sysbench_node).display()
            ),
        ]);
        cmd
    }
}

/// Creates the tables the load writes and fills them.
pub fn prepare(cluster: &Cluster, opts: &LoadOptions, log: &Path) -> Result<()> {
    cluster.sql(
        opts.sysbench_node,
        &format!("CREATE DATABASE IF NOT EXISTS {SYSBENCH_SCHEMA}"),
    )?;
    let mut cmd = opts.sysbench(cluster);
    cmd.args(["--threads=2", "prepare"]);
    let status = sys::run_logged(&mut cmd, log, Duration::from_secs(7200))?;
    if !status.success() {
        bail!("sysbench prepare failed ({status}); see {}", log.display());
    }
    if opts.large_rows > 0 {
        cluster.sql(
            opts.large_node,
            &format!(
                "CREATE DATABASE IF NOT EXISTS soak; \
                 CREATE TABLE {LARGE_TABLE} (id INT PRIMARY KEY, grp INT NOT NULL, \
                 v BIGINT NOT NULL, pad VARCHAR(64) NOT NULL, KEY (grp), KEY (v)); \
                 INSERT INTO {LARGE_TABLE} SELECT seq, seq % {LARGE_GROUPS}, 0, MD5(seq) \
                 FROM soak.seq_1_to_{}",
                opts.large_rows
            ),
        )?;
    }
    Ok(())
}

/// A running load; [`Load::stop`] ends it.
pub struct Load {
    sysbench: Child,
    output: PathBuf,
    stop: Arc<AtomicBool>,
    large: Option<JoinHandle<LargeCounts>>,
}

/// What the large-transaction writer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LargeCounts {
    /// Transactions committed.
    pub committed: u64,
    /// Transactions that failed (a conflict, a view change); the writer went on.
    pub failed: u64,
    /// The client's error for the first failure.
    pub first_error: Option<String>,
}

/// What a load did, once stopped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadSummary {
    /// Transactions sysbench committed.
    pub transactions: u64,
    /// Their rate over the run.
    pub tps: f64,
    /// The large transactions.
    pub large: LargeCounts,
}

impl Load {
    /// Starts the load for at most `limit` (sysbench's `--time`; the large writer stops
    /// then too); sysbench's output goes to `output`.
    pub fn start(
        cluster: &Cluster,
        opts: &LoadOptions,
        limit: Duration,
        output: &Path,
    ) -> Result<Load> {
        let file =
            File::create(output).with_context(|| format!("cannot create {}", output.display()))?;
        let mut cmd = opts.sysbench(cluster);
        cmd.args([
            &format!("--threads={}", opts.threads),
            "--rate=0",
            &format!("--time={}", limit.as_secs().max(1)),
            &format!("--mysql-ignore-errors={TOLERATED_ERRORS}"),
            // A stopped sysbench prints no summary: its rate comes from these reports.
            "--report-interval=1",
            "run",
        ])
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
        let sysbench = cmd
            .spawn()
            .context("cannot start sysbench (scripts/install-deps.sh installs it)")?;
        let stop = Arc::new(AtomicBool::new(false));
        let large = (opts.large_rows > 0).then(|| {
            let (cluster, stop) = (cluster.clone(), stop.clone());
            let (node, rows) = (opts.large_node, opts.large_rows);
            let deadline = Instant::now() + limit;
            thread::spawn(move || write_large(&cluster, node, rows, &stop, deadline))
        });
        Ok(Load {
            sysbench,
            output: output.to_path_buf(),
            stop,
            large,
        })
    }

    /// Whether sysbench still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.sysbench.try_wait(), Ok(None))
    }

    /// Stops the load and waits until nothing of it runs; the commits it had in flight may
    /// still be landing on the nodes (see `Cluster::wait_at_rest`).
    pub fn stop(mut self) -> Result<LoadSummary> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = sys::send_signal(self.sysbench.id(), "TERM");
        let sysbench = &mut self.sysbench;
        sys::wait_until(STOP_GRACE, || !matches!(sysbench.try_wait(), Ok(None)));
        let _ = self.sysbench.kill();
        let _ = self.sysbench.wait();
        let large = match self.large.take() {
            Some(writer) => writer.join().unwrap_or_default(),
            None => LargeCounts::default(),
        };
        let text = std::fs::read_to_string(&self.output).unwrap_or_default();
        let (transactions, tps) = sysbench_transactions(&text);
        Ok(LoadSummary {
            transactions,
            tps,
            large,
        })
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.sysbench.kill();
        let _ = self.sysbench.wait();
    }
}

/// Rewrites one group of [`LARGE_TABLE`] (`rows` rows in all) per transaction, alternating
/// an update of every row of the group with a delete and re-insert of it, until stopped or
/// past `deadline`.
fn write_large(
    cluster: &Cluster,
    node: usize,
    rows: usize,
    stop: &AtomicBool,
    deadline: Instant,
) -> LargeCounts {
    let mut counts = LargeCounts::default();
    let mut round = 0usize;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        let group = round % LARGE_GROUPS;
        let body = if round.is_multiple_of(2) {
            format!(
                "UPDATE {LARGE_TABLE} SET v = v + 1, pad = MD5(CONCAT(id, v)) \
                 WHERE grp = {group}"
            )
        } else {
            format!(
                "DELETE FROM {LARGE_TABLE} WHERE grp = {group}; \
                 INSERT INTO {LARGE_TABLE} SELECT seq, {group}, {round}, MD5(seq + {round}) \
                 FROM soak.seq_1_to_{rows} WHERE seq % {LARGE_GROUPS} = {group}"
            )
        };
        match cluster.sql(node, &format!("BEGIN; {body}; COMMIT")) {
            Ok(_) => counts.committed += 1,
            Err(error) => {
                counts.failed += 1;
                let text = format!("{error:#}");
                let last = text.lines().last().unwrap_or_default().to_string();
                counts.first_error.get_or_insert(last);
            }
        }
        round += 1;
        thread::sleep(LARGE_PAUSE);
    }
    counts
}

/// Transactions and their mean rate from sysbench's per-second reports
/// (`[ 5s ] thds: 4 tps: 385.88 ...`).
fn sysbench_transactions(output: &str) -> (u64, f64) {
    let rates: Vec<f64> = output
        .lines()
        .filter(|line| line.starts_with('['))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "tps:")?;
            words.next()?.parse().ok()
        })
        .collect();
    if rates.is_empty() {
        return (0, 0.0);
    }
    let total: f64 = rates.iter().sum();
    (total.round() as u64, total / rates.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysbench_totals_come_from_its_per_second_reports() {
        let output = "Threads started!\n\
            [ 1s ] thds: 4 tps: 400.00 qps: 2400.00 (r/w/o: 0.00/1600.00/800.00)\n\
            [ 2s ] thds: 4 tps: 200.00 qps: 1200.00 (r/w/o: 0.00/800.00/400.00)\n";
        assert_eq!(sysbench_transactions(output), (600, 300.0));
        assert_eq!(sysbench_transactions("killed early"), (0, 0.0));
    }

    #[test]
    fn the_tables_written_include_the_large_one_only_when_used() {
        let mut opts = LoadOptions {
            tables: 2,
            table_size: 10,
            threads: 1,
            large_rows: 0,
            sysbench_node: 1,
            large_node: 2,
        };
        assert_eq!(opts.tables_written(), ["sbtest.sbtest1", "sbtest.sbtest2"]);
        opts.large_rows = 100;
        assert_eq!(
            opts.tables_written(),
            ["sbtest.sbtest1", "sbtest.sbtest2", "soak.big"]
        );
    }
}
