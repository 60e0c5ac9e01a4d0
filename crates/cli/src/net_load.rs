//! sysbench over the network of a `--hosts` cluster: clients connect to the hosts' addresses
//! across the bridge, as they would to real machines, and report their throughput every
//! second, from which a fault's zero-throughput gap is read.

use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::load::SYSBENCH_SCHEMA;
use crate::{sys, Cluster};

/// The account sysbench logs in with over the network.
pub const CLIENT_USER: &str = "trireme_load";
/// Its password (test clusters only).
const CLIENT_PASSWORD: &str = "trireme-load";
/// Errors a node answers with while members come and go (see [`crate::load`]), and lost
/// connections to a host that was cut off (2013) or cannot be reached (2003): sysbench
/// retries, the load goes on.
const TOLERATED_ERRORS: &str = "1213,1205,1180,1047,2013,2003";
/// Extra time sysbench gets beyond its own `--time` before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(60);

/// A sysbench `oltp_write_only` run against some hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetLoad {
    /// sysbench tables.
    pub tables: usize,
    /// Rows per table.
    pub table_size: usize,
    /// Client threads, spread over `hosts`.
    pub threads: usize,
    /// The hosts (node numbers) the clients connect to.
    pub hosts: Vec<usize>,
    /// How long the run lasts.
    pub time: Duration,
}

impl NetLoad {
    fn command(&self, cluster: &Cluster) -> Command {
        let hosts: Vec<String> = self
            .hosts
            .iter()
            .map(|&node| cluster.config().sql_host(node))
            .collect();
        let mut cmd = Command::new("sysbench");
        cmd.args([
            "oltp_write_only",
            "--db-driver=mysql",
            &format!("--mysql-host={}", hosts.join(",")),
            &format!("--mysql-port={}", cluster.config().ports(1).sql),
            &format!("--mysql-user={CLIENT_USER}"),
            &format!("--mysql-password={CLIENT_PASSWORD}"),
            &format!("--mysql-db={SYSBENCH_SCHEMA}"),
            &format!("--tables={}", self.tables),
            &format!("--table-size={}", self.table_size),
        ]);
        cmd
    }

    /// Creates the client account (on `via`, replicated to all) and the tables.
    pub fn prepare(&self, cluster: &Cluster, via: usize, log: &Path) -> Result<()> {
        cluster.sql(
            via,
            &format!(
                "CREATE DATABASE IF NOT EXISTS {SYSBENCH_SCHEMA}; \
                 CREATE USER IF NOT EXISTS '{CLIENT_USER}'@'%' IDENTIFIED BY '{CLIENT_PASSWORD}'; \
                 GRANT ALL ON {SYSBENCH_SCHEMA}.* TO '{CLIENT_USER}'@'%'"
            ),
        )?;
        let mut cmd = self.command(cluster);
        cmd.args(["--threads=2", "prepare"]);
        let status = sys::run_logged(&mut cmd, log, Duration::from_secs(1800))?;
        if !status.success() {
            bail!("sysbench prepare failed ({status}); see {}", log.display());
        }
        Ok(())
    }

    /// Runs the load to its end, reporting every second into `output`.
    pub fn run(&self, cluster: &Cluster, output: &Path) -> Result<ExitStatus> {
        let mut cmd = self.command(cluster);
        cmd.args([
            &format!("--threads={}", self.threads),
            &format!("--time={}", self.time.as_secs().max(1)),
            "--report-interval=1",
            &format!("--mysql-ignore-errors={TOLERATED_ERRORS}"),
            "run",
        ]);
        let out =
            File::create(output).with_context(|| format!("cannot create {}", output.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let mut child = cmd.spawn().context("cannot run sysbench")?;
        let limit = self.time + EXIT_GRACE;
        if !sys::wait_until(limit, || matches!(child.try_wait(), Ok(Some(_)))) {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "sysbench ran {} s past its --time: killed",
                EXIT_GRACE.as_secs()
            );
        }
        Ok(child.wait()?)
    }
}

/// The per-second throughput sysbench reported (`[ 12s ] thds: 8 tps: 412.00 ...`).
pub fn per_second_tps(report: &str) -> Vec<f64> {
    report
        .lines()
        .filter(|line| line.trim_start().starts_with('['))
        .filter_map(|line| {
            let rest = line.split(" tps: ").nth(1)?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .collect()
}

/// The longest run of consecutive seconds with no transaction at all.
pub fn longest_zero_run(tps: &[f64]) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for &value in tps {
        current = if value == 0.0 { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

/// The transactions sysbench committed in all (`transactions: N (...)`).
pub fn total_transactions(report: &str) -> Option<u64> {
    report
        .lines()
        .find(|line| line.trim_start().starts_with("transactions:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "\
[ 1s ] thds: 4 tps: 310.93 qps: 1869.58 (r/w/o: 0.00/1245.71/623.86) lat (ms,95%): 20.37 err/s: 0.00 reconn/s: 0.00
[ 2s ] thds: 4 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00 reconn/s: 0.00
[ 3s ] thds: 4 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00 reconn/s: 0.00
[ 4s ] thds: 4 tps: 291.00 qps: 1746.00 (r/w/o: 0.00/1164.00/582.00) lat (ms,95%): 21.11 err/s: 1.00 reconn/s: 0.00
[ 5s ] thds: 4 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00 reconn/s: 0.00

SQL statistics:
    transactions:                        1203   (240.12 per sec.)
";

    #[test]
    fn reads_the_per_second_reports_and_the_total() {
        let tps = per_second_tps(REPORT);
        assert_eq!(tps, vec![310.93, 0.0, 0.0, 291.0, 0.0]);
        assert_eq!(longest_zero_run(&tps), 2);
        assert_eq!(longest_zero_run(&[]), 0);
        assert_eq!(total_transactions(REPORT), Some(1203));
    }
}
