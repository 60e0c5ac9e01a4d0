//! The bank workload of the fault campaign, and its checker.
//!
//! Accounts hold money; a transfer moves an amount between two accounts and appends a
//! ledger row with a transfer id the client chose, in one transaction. Every client keeps
//! what it attempted and what the server acknowledged (COMMIT returned OK). After the faults
//! the checker asks of the data:
//! - every acknowledged transfer is in the ledger (nothing acknowledged was lost);
//! - every ledger row is a transfer some client attempted (nothing invented);
//! - the total is what the accounts started with (money is conserved);
//! - each balance is its start plus what the ledger moved in, minus what it moved out.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mysql::prelude::Queryable;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::compare::RestOptions;
use crate::Cluster;

/// Accounts in the bank.
pub const ACCOUNTS: i64 = 20;
/// Each account's balance at the start.
pub const INITIAL_BALANCE: i64 = 1_000;
/// Largest amount of one transfer.
const MAX_AMOUNT: i64 = 50;
/// The account clients log in with over the network.
const USER: &str = "trireme_bank";
/// Its password (test clusters only).
const PASSWORD: &str = "trireme-bank";
/// How long a client waits to connect, and for any answer, before it gives up on the
/// statement (a frozen or cut-off host must not hold a client forever).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed connection before trying again.
const RECONNECT_PAUSE: Duration = Duration::from_millis(300);
/// Pause after a failed transfer: a node outside the primary component refuses at once,
/// and its clients must not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(20);
/// Bits of a transfer id that number a client's transfers (the client id is above).
const SEQUENCE_BITS: u32 = 40;

/// Creates the schema, the accounts and the client account (on `via`, replicated to all).
pub fn create(cluster: &Cluster, via: usize) -> Result<()> {
    cluster.sql(
        via,
        &format!(
            "CREATE DATABASE bank; \
             CREATE TABLE bank.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL); \
             CREATE TABLE bank.ledger (transfer_id BIGINT PRIMARY KEY, from_id INT NOT NULL, \
               to_id INT NOT NULL, amount BIGINT NOT NULL); \
             INSERT INTO bank.accounts SELECT seq, {INITIAL_BALANCE} FROM bank.seq_1_to_{ACCOUNTS}; \
             CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; \
             GRANT ALL ON bank.* TO '{USER}'@'%'"
        ),
    )?;
    Ok(())
}

/// What one client did.
#[derive(Debug, Default, Clone)]
pub struct ClientRecord {
    /// Transfer ids sent to the server (whatever became of them).
    pub attempted: BTreeSet<u64>,
    /// Transfer ids whose COMMIT returned OK.
    pub acknowledged: BTreeSet<u64>,
    /// Transfer ids whose COMMIT got no answer: committed or not, nobody can say.
    pub uncertain: BTreeSet<u64>,
    /// When each acknowledgement came, as time since the campaign's start.
    pub acknowledged_at: Vec<Duration>,
    /// Failed statements by cause (a server error code, or the connection).
    pub errors: BTreeMap<String, u64>,
}

/// A short name for what failed: the server's error code, else the kind of failure.
fn cause(error: &mysql::Error) -> String {
    match error {
        mysql::Error::MySqlError(server) => server.code.to_string(),
        mysql::Error::IoError(_) | mysql::Error::DriverError(_) => "connection".to_string(),
        _ => "other".to_string(),
    }
}

/// One client: transfers on one host until `stop`.
pub struct BankClient {
    /// Distinct per client: the high bits of its transfer ids.
    pub id: u64,
    /// The host's address and SQL port.
    pub host: (Ipv4Addr, u16),
    /// Seed of its choice of accounts and amounts.
    pub seed: u64,
}

impl BankClient {
    /// Runs transfers until `stop` is set; `epoch` is the campaign's start.
    pub fn run(self, stop: Arc<AtomicBool>, epoch: Instant) -> ClientRecord {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut record = ClientRecord::default();
        let mut connection: Option<mysql::Conn> = None;
        let mut sequence = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let Some(conn) = connection.as_mut() else {
                connection = self.connect();
                if connection.is_none() {
                    thread::sleep(RECONNECT_PAUSE);
                }
                continue;
            };
            sequence += 1;
            let transfer_id = (self.id << SEQUENCE_BITS) | sequence;
            let from = rng.gen_range(1..=ACCOUNTS);
            let to = (from + rng.gen_range(1..ACCOUNTS) - 1) % ACCOUNTS + 1;
            let amount = rng.gen_range(1..=MAX_AMOUNT);
            record.attempted.insert(transfer_id);
            match transfer(conn, transfer_id, from, to, amount) {
                Ok(Outcome::Committed) => {
                    record.acknowledged.insert(transfer_id);
                    record.acknowledged_at.push(epoch.elapsed());
                }
                Ok(Outcome::NotEnoughMoney) => {}
                Err(Failure::BeforeCommit(error)) => {
                    *record.errors.entry(cause(&error)).or_default() += 1;
                    thread::sleep(ERROR_PAUSE);
                    // Rolled back (a conflict, a node leaving the primary component) or the
                    // connection is gone with its transaction: start clean.
                    if conn.query_drop("ROLLBACK").is_err() {
                        connection = None;
                    }
                }
                Err(Failure::AtCommit(error)) => {
                    *record.errors.entry(cause(&error)).or_default() += 1;
                    // An error answer leaves the connection usable; the checker needs no
                    // more (the transfer was attempted, not acknowledged). No answer at
                    // all: the transfer is uncertain, and the connection is dropped.
                    if !matches!(error, mysql::Error::MySqlError(_)) {
                        record.uncertain.insert(transfer_id);
                        connection = None;
                    }
                    thread::sleep(ERROR_PAUSE);
                }
            }
        }
        record
    }

    fn connect(&self) -> Option<mysql::Conn> {
        let opts = mysql::OptsBuilder::new()
            .ip_or_hostname(Some(self.host.0.to_string()))
            .tcp_port(self.host.1)
            .user(Some(USER))
            .pass(Some(PASSWORD))
            .db_name(Some("bank"))
            .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
            .read_timeout(Some(IO_TIMEOUT))
            .write_timeout(Some(IO_TIMEOUT));
        mysql::Conn::new(opts).ok()
    }
}

enum Outcome {
    Committed,
    NotEnoughMoney,
}

enum Failure {
    /// Failed before COMMIT was sent: not committed.
    BeforeCommit(mysql::Error),
    /// COMMIT was sent and did not return OK.
    AtCommit(mysql::Error),
}

fn transfer(
    conn: &mut mysql::Conn,
    transfer_id: u64,
    from: i64,
    to: i64,
    amount: i64,
) -> std::result::Result<Outcome, Failure> {
    let before = Failure::BeforeCommit;
    conn.query_drop("START TRANSACTION").map_err(before)?;
    conn.exec_drop(
        "UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?",
        (amount, from, amount),
    )
    .map_err(before)?;
    if conn.affected_rows() == 0 {
        conn.query_drop("ROLLBACK").map_err(before)?;
        return Ok(Outcome::NotEnoughMoney);
    }
    conn.exec_drop(
        "UPDATE accounts SET balance = balance + ? WHERE id = ?",
        (amount, to),
    )
    .map_err(before)?;
    conn.exec_drop(
        "INSERT INTO ledger (transfer_id, from_id, to_id, amount) VALUES (?, ?, ?, ?)",
        (transfer_id, from, to, amount),
    )
    .map_err(before)?;
    conn.query_drop("COMMIT").map_err(Failure::AtCommit)?;
    Ok(Outcome::Committed)
}

/// Everything the clients did, merged.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Every transfer id sent.
    pub attempted: BTreeSet<u64>,
    /// Every acknowledged transfer id.
    pub acknowledged: BTreeSet<u64>,
    /// Transfer ids whose fate is unknown.
    pub uncertain: BTreeSet<u64>,
    /// Acknowledgements per whole second since the campaign's start.
    pub per_second: BTreeMap<u64, u64>,
    /// Failed statements by cause.
    pub errors: BTreeMap<String, u64>,
}

impl History {
    /// Merges the clients' records.
    pub fn merge(records: Vec<ClientRecord>) -> History {
        let mut history = History::default();
        for record in records {
            history.attempted.extend(record.attempted);
            history.acknowledged.extend(record.acknowledged);
            history.uncertain.extend(record.uncertain);
            for (cause, count) in record.errors {
                *history.errors.entry(cause).or_default() += count;
            }
            for at in record.acknowledged_at {
                *history.per_second.entry(at.as_secs()).or_default() += 1;
            }
        }
        history
    }

    /// The longest run of whole seconds with no acknowledgement, from the first second
    /// with one to `until` (seconds since the start).
    pub fn longest_silence(&self, until: u64) -> u64 {
        let Some(first) = self.per_second.keys().next().copied() else {
            return until;
        };
        let (mut longest, mut current) = (0, 0);
        for second in first..until {
            current = if self.per_second.contains_key(&second) {
                0
            } else {
                current + 1
            };
            longest = longest.max(current);
        }
        longest
    }
}

/// The rows the checker reads, from one node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BankState {
    /// Balance by account.
    pub balances: BTreeMap<i64, i64>,
    /// Ledger rows: transfer id -> (from, to, amount).
    pub ledger: BTreeMap<u64, (i64, i64, i64)>,
}

impl BankState {
    /// Reads the accounts and the ledger of `node` (over its socket).
    pub fn read(cluster: &Cluster, node: usize) -> Result<BankState> {
        let mut state = BankState::default();
        for row in rows(cluster, node, "SELECT id, balance FROM bank.accounts", 2)? {
            state.balances.insert(row[0], row[1]);
        }
        let ledger = "SELECT transfer_id, from_id, to_id, amount FROM bank.ledger";
        for row in rows(cluster, node, ledger, 4)? {
            state.ledger.insert(row[0] as u64, (row[1], row[2], row[3]));
        }
        Ok(state)
    }

    /// What is wrong with this state given what the clients did: one line per problem.
    pub fn problems(&self, history: &History) -> Vec<String> {
        let mut problems = Vec::new();
        let lost: Vec<&u64> = history
            .acknowledged
            .iter()
            .filter(|id| !self.ledger.contains_key(id))
            .collect();
        if !lost.is_empty() {
            problems.push(format!(
                "{} acknowledged transfers are missing from the ledger, the first {:?}",
                lost.len(),
                lost.iter().take(5).collect::<Vec<_>>()
            ));
        }
        let invented: Vec<&u64> = self
            .ledger
            .keys()
            .filter(|id| !history.attempted.contains(id))
            .collect();
        if !invented.is_empty() {
            problems.push(format!(
                "{} ledger rows were never attempted, the first {:?}",
                invented.len(),
                invented.iter().take(5).collect::<Vec<_>>()
            ));
        }
        let total: i64 = self.balances.values().sum();
        if total != ACCOUNTS * INITIAL_BALANCE || self.balances.len() != ACCOUNTS as usize {
            problems.push(format!(
                "the bank holds {total} in {} accounts, not {} in {ACCOUNTS}",
                self.balances.len(),
                ACCOUNTS * INITIAL_BALANCE
            ));
        }
        let mut expected: BTreeMap<i64, i64> =
            (1..=ACCOUNTS).map(|id| (id, INITIAL_BALANCE)).collect();
        for (from, to, amount) in self.ledger.values() {
            *expected.entry(*from).or_default() -= amount;
            *expected.entry(*to).or_default() += amount;
        }
        for (id, balance) in &self.balances {
            let want = expected.get(id).copied().unwrap_or_default();
            if *balance != want {
                problems.push(format!(
                    "account {id} holds {balance} but its ledger says {want}"
                ));
            }
        }
        problems
    }
}

/// Checks the bank on every node once the cluster is at rest (`rest`): the nodes equal, and
/// each one's data true to what the clients did. One line per problem.
pub fn check_at_rest(cluster: &Cluster, history: &History, rest: RestOptions) -> Vec<String> {
    let mut problems = Vec::new();
    let nodes: Vec<usize> = (1..=cluster.nodes()).collect();
    let tables = vec!["bank.accounts".to_string(), "bank.ledger".to_string()];
    match cluster.compare_at_rest(&nodes, Some(&tables), rest) {
        Ok(comparison) if comparison.equal() => {}
        Ok(comparison) => problems.push(format!("the nodes differ:\n{}", comparison.report())),
        Err(error) => problems.push(format!("the nodes never came to rest: {error:#}")),
    }
    for node in nodes {
        match BankState::read(cluster, node) {
            Ok(state) => problems.extend(
                state
                    .problems(history)
                    .into_iter()
                    .map(|problem| format!("node{node}: {problem}")),
            ),
            Err(error) => problems.push(format!("node{node}: cannot read the bank: {error:#}")),
        }
    }
    problems
}

/// The rows of `query` on `node`, each `width` integers.
fn rows(cluster: &Cluster, node: usize, query: &str, width: usize) -> Result<Vec<Vec<i64>>> {
    let text = cluster.sql(node, query)?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields = line
                .split('\t')
                .map(|field| field.trim().parse::<i64>())
                .collect::<std::result::Result<Vec<i64>, _>>()
                .with_context(|| format!("row {line:?} of {query:?}"))?;
            if fields.len() != width {
                bail!("row {line:?} of {query:?}: expected {width} fields");
            }
            Ok(fields)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(acknowledged: &[u64], attempted: &[u64]) -> History {
        History {
            attempted: attempted.iter().copied().collect(),
            acknowledged: acknowledged.iter().copied().collect(),
            ..History::default()
        }
    }

    fn opening() -> BankState {
        BankState {
            balances: (1..=ACCOUNTS).map(|id| (id, INITIAL_BALANCE)).collect(),
            ledger: BTreeMap::new(),
        }
    }

    #[test]
    fn a_consistent_bank_has_no_problem() {
        let mut state = opening();
        state.ledger.insert(7, (1, 2, 30));
        *state.balances.get_mut(&1).unwrap() -= 30;
        *state.balances.get_mut(&2).unwrap() += 30;
        assert_eq!(
            state.problems(&history(&[7], &[7, 8])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_checker_finds_lost_invented_and_unbalanced_transfers() {
        let mut state = opening();
        state.ledger.insert(9, (1, 2, 30));
        *state.balances.get_mut(&1).unwrap() -= 30;
        *state.balances.get_mut(&3).unwrap() += 30;
        let problems = state.problems(&history(&[7], &[7]));
        let text = problems.join("\n");
        assert!(
            text.contains("1 acknowledged transfers are missing"),
            "{text}"
        );
        assert!(
            text.contains("1 ledger rows were never attempted"),
            "{text}"
        );
        assert!(
            text.contains("account 2 holds 1000 but its ledger says 1030"),
            "{text}"
        );
        assert!(
            text.contains("account 3 holds 1030 but its ledger says 1000"),
            "{text}"
        );
        state.balances.remove(&20);
        assert!(state
            .problems(&history(&[], &[9]))
            .join("\n")
            .contains("in 19 accounts"));
    }

    #[test]
    fn silence_is_counted_in_whole_seconds_from_the_first_acknowledgement() {
        let mut history = History::default();
        for second in [2, 3, 7, 8] {
            history.per_second.insert(second, 5);
        }
        assert_eq!(history.longest_silence(10), 3);
        assert_eq!(History::default().longest_silence(10), 10);
    }
}
