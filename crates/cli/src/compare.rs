//! Comparing the nodes' data at rest: a comparison that cannot race with a commit.
//!
//! Checksums read on two nodes one after the other are equal only if nothing commits in
//! between, anywhere. A load that was just stopped can still have a commit in flight (held
//! by flow control, say), so "stop, then checksum" is not enough. At rest means: every node
//! Synced, every node's `wsrep_last_committed` equal and unchanged for a settle period;
//! the checksums are taken then, and the positions read again afterwards must not have
//! moved. A difference is then located down to the first differing rows
//! ([`crate::row_diff`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::row_diff;
use crate::Cluster;

/// Schemas that hold the server's own tables, never compared.
const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];
/// Pause between two readings of the nodes' positions.
const REST_POLL: Duration = Duration::from_millis(250);
/// How often the whole comparison is tried when a commit lands while checksumming.
const ATTEMPTS: usize = 3;

/// How long to wait for rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestOptions {
    /// How long every node's position must stay equal and unchanged.
    pub settle: Duration,
    /// The longest wait for that.
    pub timeout: Duration,
}

impl Default for RestOptions {
    fn default() -> Self {
        RestOptions {
            settle: Duration::from_secs(2),
            timeout: Duration::from_secs(300),
        }
    }
}

/// The outcome of comparing some tables across nodes at one position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The nodes compared; the first is the reference the others are compared with.
    pub nodes: Vec<usize>,
    /// The position (`wsrep_last_committed`) every node stood at.
    pub seqno: i64,
    /// One entry per table.
    pub tables: Vec<TableComparison>,
}

/// One table on every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableComparison {
    /// `schema.table`.
    pub table: String,
    /// `CHECKSUM TABLE` on each node, in [`Comparison::nodes`] order (`None`: no such table).
    pub checksums: Vec<Option<String>>,
    /// Where the differing nodes differ from the reference: one line per differing row.
    pub differences: Vec<String>,
}

impl TableComparison {
    /// Whether every node has the table with the same checksum.
    pub fn equal(&self) -> bool {
        self.checksums[0].is_some() && self.checksums.iter().all(|c| *c == self.checksums[0])
    }
}

impl Comparison {
    /// Whether every table is equal on every node.
    pub fn equal(&self) -> bool {
        self.tables.iter().all(TableComparison::equal)
    }

    /// A report: one line for the whole, and for each differing table its checksums and
    /// first differing rows.
    pub fn report(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|n| format!("node{n}")).collect();
        let differing: Vec<&TableComparison> = self.tables.iter().filter(|t| !t.equal()).collect();
        let mut out = format!(
            "{} at rest at seqno {}: {} table(s) compared, {}\n",
            nodes.join(", "),
            self.seqno,
            self.tables.len(),
            if differing.is_empty() {
                "all equal".to_string()
            } else {
                format!("{} differ", differing.len())
            }
        );
        for table in differing {
            let sums: Vec<String> = self
                .nodes
                .iter()
                .zip(&table.checksums)
                .map(|(n, c)| format!("node{n} {}", c.as_deref().unwrap_or("(missing)")))
                .collect();
            let _ = writeln!(out, "  {}: CHECKSUM TABLE {}", table.table, sums.join(", "));
            for line in &table.differences {
                let _ = writeln!(out, "    {line}");
            }
        }
        out
    }
}

impl Cluster {
    /// Waits until `nodes` are at rest: each Synced, and their `wsrep_last_committed` equal
    /// and unchanged for `opts.settle`. Returns that position.
    pub fn wait_at_rest(&self, nodes: &[usize], opts: RestOptions) -> Result<i64> {
        let deadline = Instant::now() + opts.timeout;
        let mut stable: Option<(Vec<Option<i64>>, Instant)> = None;
        loop {
            let positions = self.positions(nodes);
            let agreed = positions.iter().all(|p| p.is_some() && *p == positions[0]);
            let since = match &stable {
                Some((seen, since)) if *seen == positions => *since,
                _ => Instant::now(),
            };
            stable = Some((positions.clone(), since));
            if agreed && since.elapsed() >= opts.settle {
                return Ok(positions[0].expect("agreed positions are read"));
            }
            if Instant::now() >= deadline {
                bail!(
                    "the nodes did not come to rest within {} s (every node Synced, \
                     wsrep_last_committed equal and unchanged for {} s); last seen: {}",
                    opts.timeout.as_secs(),
                    opts.settle.as_secs_f64(),
                    describe_positions(nodes, &positions)
                );
            }
            thread::sleep(REST_POLL);
        }
    }

    /// Compares `tables` (`schema.table`; every user table when `None`) across `nodes` at
    /// rest. A commit that lands while the checksums are read voids the attempt, which is
    /// repeated; a cluster that never stays at rest is an error, not a difference.
    pub fn compare_at_rest(
        &self,
        nodes: &[usize],
        tables: Option<&[String]>,
        opts: RestOptions,
    ) -> Result<Comparison> {
        if nodes.len() < 2 {
            bail!("a comparison needs at least two nodes, got {nodes:?}");
        }
        for &node in nodes {
            self.check_node(node)?;
        }
        let mut moved = Vec::new();
        for _ in 0..ATTEMPTS {
            let seqno = self.wait_at_rest(nodes, opts)?;
            let tables = match tables {
                Some(tables) => tables.to_vec(),
                None => self.user_tables(nodes)?,
            };
            let checksums = self.checksums(nodes, &tables)?;
            let after = self.positions(nodes);
            if after.iter().any(|p| *p != Some(seqno)) {
                moved.push(describe_positions(nodes, &after));
                continue;
            }
            let mut comparison = Comparison {
                nodes: nodes.to_vec(),
                seqno,
                tables: tables
                    .iter()
                    .zip(checksums)
                    .map(|(table, checksums)| TableComparison {
                        table: table.clone(),
                        checksums,
                        differences: Vec::new(),
                    })
                    .collect(),
            };
            self.locate_differences(&mut comparison);
            return Ok(comparison);
        }
        bail!(
            "the cluster did not stay at rest while the checksums were read ({ATTEMPTS} \
             attempts; is a load still running?): positions moved to {}",
            moved.join("; then ")
        )
    }

    /// Each node's `wsrep_last_committed` if it is Synced, else `None`.
    fn positions(&self, nodes: &[usize]) -> Vec<Option<i64>> {
        nodes
            .iter()
            .map(|&n| {
                let status = self.node_status(n);
                status
                    .is_synced()
                    .then(|| status.last_committed())
                    .flatten()
            })
            .collect()
    }

    /// Every base table outside the system schemas on any of `nodes`, sorted.
    fn user_tables(&self, nodes: &[usize]) -> Result<Vec<String>> {
        let excluded: Vec<String> = SYSTEM_SCHEMAS.iter().map(|s| format!("'{s}'")).collect();
        let query = format!(
            "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES \
             WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({})",
            excluded.join(", ")
        );
        let mut tables = BTreeSet::new();
        for &node in nodes {
            let out = self
                .sql(node, &query)
                .with_context(|| format!("listing the tables of node{node}"))?;
            tables.extend(out.lines().map(str::to_string));
        }
        Ok(tables.into_iter().collect())
    }

    /// `CHECKSUM TABLE` of every table on every node, read in parallel (at rest, the
    /// order does not matter): per table, one value per node.
    fn checksums(&self, nodes: &[usize], tables: &[String]) -> Result<Vec<Vec<Option<String>>>> {
        if tables.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = tables.iter().map(|t| row_diff::quoted_table(t)).collect();
        let statement = format!("CHECKSUM TABLE {}", list.join(", "));
        let per_node: Vec<Result<BTreeMap<String, Option<String>>>> = thread::scope(|scope| {
            let readers: Vec<_> = nodes
                .iter()
                .map(|&node| {
                    let statement = &statement;
                    scope.spawn(move || {
                        let out = self
                            .sql(node, statement)
                            .with_context(|| format!("CHECKSUM TABLE on node{node}"))?;
                        Ok(parse_checksums(&out))
                    })
                })
                .collect();
            readers
                .into_iter()
                .map(|r| {
                    r.join()
                        .unwrap_or_else(|_| Err(anyhow!("a reader panicked")))
                })
                .collect()
        });
        let per_node = per_node.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(tables
            .iter()
            .map(|table| {
                per_node
                    .iter()
                    .map(|sums| sums.get(table).cloned().flatten())
                    .collect()
            })
            .collect())
    }

    /// Fills in where each differing table differs, node by node against the reference.
    fn locate_differences(&self, comparison: &mut Comparison) {
        let reference = comparison.nodes[0];
        for table in comparison.tables.iter_mut().filter(|t| !t.equal()) {
            for (i, &node) in comparison.nodes.iter().enumerate().skip(1) {
                if table.checksums[i] == table.checksums[0] {
                    continue;
                }
                if table.checksums[i].is_none() || table.checksums[0].is_none() {
                    let missing = if table.checksums[0].is_none() {
                        reference
                    } else {
                        node
                    };
                    table
                        .differences
                        .push(format!("node{missing} has no such table"));
                    continue;
                }
                match row_diff::first_differing_rows(self, &table.table, reference, node) {
                    Ok(lines) => table.differences.extend(lines),
                    Err(error) => table.differences.push(format!(
                        "node{node} against node{reference}: rows not located: {error:#}"
                    )),
                }
            }
        }
    }
}

/// Parses `CHECKSUM TABLE` batch output (`schema.table<TAB>value`; `NULL` for a table that
/// does not exist).
fn parse_checksums(out: &str) -> BTreeMap<String, Option<String>> {
    out.lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(table, value)| {
            let value = (value != "NULL").then(|| value.to_string());
            (table.to_string(), value)
        })
        .collect()
}

fn describe_positions(nodes: &[usize], positions: &[Option<i64>]) -> String {
    nodes
        .iter()
        .zip(positions)
        .map(|(n, p)| match p {
            Some(seqno) => format!("node{n} at {seqno}"),
            None => format!("node{n} not Synced"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_output_parses_with_missing_tables() {
        let parsed = parse_checksums("sbtest.sbtest1\t1234\nsbtest.gone\tNULL\n");
        assert_eq!(parsed["sbtest.sbtest1"], Some("1234".to_string()));
        assert_eq!(parsed["sbtest.gone"], None);
    }

    fn table(sums: &[Option<&str>]) -> TableComparison {
        TableComparison {
            table: "db.t".into(),
            checksums: sums.iter().map(|s| s.map(str::to_string)).collect(),
            differences: Vec::new(),
        }
    }

    #[test]
    fn a_table_is_equal_only_when_present_everywhere_with_one_checksum() {
        assert!(table(&[Some("1"), Some("1"), Some("1")]).equal());
        assert!(!table(&[Some("1"), Some("2"), Some("1")]).equal());
        assert!(!table(&[Some("1"), None]).equal());
        assert!(
            !table(&[None, None]).equal(),
            "a table nowhere compares nothing"
        );
    }

    #[test]
    fn the_report_names_the_position_and_each_difference() {
        let mut differing = table(&[Some("1"), Some("2")]);
        differing
            .differences
            .push("id=7: only on node1: (7, 'a')".into());
        let comparison = Comparison {
            nodes: vec![1, 3],
            seqno: 42,
            tables: vec![table(&[Some("5"), Some("5")]), differing],
        };
        assert!(!comparison.equal());
        let report = comparison.report();
        assert!(
            report.starts_with("node1, node3 at rest at seqno 42: 2 table(s) compared, 1 differ"),
            "{report}"
        );
        assert!(
            report.contains("db.t: CHECKSUM TABLE node1 1, node3 2"),
            "{report}"
        );
        assert!(report.contains("    id=7: only on node1"), "{report}");
    }

    #[test]
    fn positions_are_described_per_node() {
        assert_eq!(
            describe_positions(&[1, 2], &[Some(10), None]),
            "node1 at 10, node2 not Synced"
        );
    }
}
