//! What `trireme cluster status` shows: one row per node, from its wsrep status variables.

use super::*;

/// One node's row in `trireme cluster status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// 1-based node number.
    pub node: usize,
    /// The server's pid, when it runs.
    pub pid: Option<u32>,
    /// Whether the process is stopped by SIGSTOP (it is alive but answers nothing).
    pub suspended: bool,
    /// The wsrep status variables read, by name (empty when the node did not answer).
    pub vars: BTreeMap<String, String>,
    /// Why the variables could not be read, for a running node.
    pub error: Option<String>,
    /// A trireme SST's progress line (bar, bytes, rate, ETA), while one runs.
    pub sst_progress: Option<String>,
}

impl NodeStatus {
    /// Whether the server process runs.
    pub fn alive(&self) -> bool {
        self.pid.is_some()
    }

    /// A status variable, if it was read.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `wsrep_local_state_comment` = Synced and `wsrep_ready` = ON.
    pub fn is_synced(&self) -> bool {
        self.var("wsrep_local_state_comment") == Some("Synced")
            && self.var("wsrep_ready") == Some("ON")
    }

    /// `wsrep_cluster_size`, if read.
    pub fn cluster_size(&self) -> Option<usize> {
        self.var("wsrep_cluster_size")?.parse().ok()
    }

    /// `wsrep_cluster_conf_id` (the number of the node's current view), if read.
    pub fn conf_id(&self) -> Option<i64> {
        self.var("wsrep_cluster_conf_id")?.parse().ok()
    }

    /// Whether the node says it is the Raft leader (`wsrep_raft_leader`, Trireme only).
    pub fn is_raft_leader(&self) -> bool {
        self.var("wsrep_raft_leader") == Some("1")
    }

    /// `wsrep_last_committed`, if read.
    pub fn last_committed(&self) -> Option<i64> {
        self.var("wsrep_last_committed")?.parse().ok()
    }

    /// A short description of the state for progress messages.
    pub(super) fn summary(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        format!(
            "state {}, ready {}, cluster size {}, cluster status {}",
            self.var("wsrep_local_state_comment").unwrap_or("?"),
            self.var("wsrep_ready").unwrap_or("?"),
            self.var("wsrep_cluster_size").unwrap_or("?"),
            self.var("wsrep_cluster_status").unwrap_or("?"),
        )
    }
}

/// Renders `trireme cluster status` as an aligned text table.
pub fn format_status_table(rows: &[NodeStatus]) -> String {
    let header = [
        "node",
        "pid",
        "alive",
        "state",
        "last_committed",
        "recv_queue",
        "fc_paused",
        "fc_paused_by",
        "cluster_size",
        "cluster_status",
        "streaming",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let var = |name: &str| row.var(name).unwrap_or("-").to_string();
        let (alive, state) = match (row.pid, row.suspended, &row.error) {
            (None, _, _) => ("no", "down".to_string()),
            (Some(_), true, _) => ("stopped", "(SIGSTOP)".to_string()),
            (Some(_), false, Some(_)) => ("yes", "unreachable".to_string()),
            (Some(_), false, None) => ("yes", var("wsrep_local_state_comment")),
        };
        table.push(vec![
            format!("node{}", row.node),
            row.pid.map_or("-".to_string(), |p| p.to_string()),
            alive.to_string(),
            state,
            var("wsrep_last_committed"),
            var("wsrep_local_recv_queue"),
            var("wsrep_flow_control_paused"),
            paused_by_cell(row),
            var("wsrep_cluster_size"),
            var("wsrep_cluster_status"),
            streaming_cell(row),
        ]);
    }
    let mut out = aligned(&table);
    for row in rows {
        if let Some(e) = &row.error {
            out.push_str(&format!("node{}: {e}\n", row.node));
        }
        if let Some(progress) = &row.sst_progress {
            out.push_str(&format!("node{}: {progress}\n", row.node));
        }
    }
    out
}

/// The rows of `table` (header first) in columns as wide as their widest cell.
pub(crate) fn aligned(table: &[Vec<String>]) -> String {
    let columns = table.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The nodes whose flow-control stop holds the cluster paused now, as the node sees it;
/// `-` when none does, or where the provider does not report it (Galera).
pub(super) fn paused_by_cell(row: &NodeStatus) -> String {
    match row.var("wsrep_flow_control_paused_by") {
        Some(names) if !names.is_empty() => names.to_string(),
        _ => "-".to_string(),
    }
}

/// Open streaming-replication transactions and their certified fragments as
/// `"<transactions> trx/<fragments> frags"`; `-` where the provider does not report them
/// (Galera).
pub(super) fn streaming_cell(row: &NodeStatus) -> String {
    match (
        row.var("wsrep_streaming_transactions"),
        row.var("wsrep_streaming_fragments"),
    ) {
        (Some(trx), Some(fragments)) => format!("{trx} trx/{fragments} frags"),
        _ => "-".to_string(),
    }
}
