//! The node's status, typed: what a DBA reads in `SHOW STATUS LIKE 'wsrep_%'`, computed
//! from the node's state and its group member's. The provider gives each field its wsrep
//! name and type, in one place; nothing here is text meant to be parsed back.

use std::collections::BTreeMap;

use base::{Nanos, NodeState, Seqno, Uuid};
use engine::averages::{FlowTotals, Sampled, Window};
use engine::{CacheReach, NodeEngine};
use group::{GroupStatus, PauseLengths};

use crate::app::MemberOut;
use crate::shared::lock;
use crate::Replicator;

/// How many of the tables with the most conflicts the status lists.
pub const CONFLICT_TABLES_SHOWN: usize = 20;
const _: () = assert!(CONFLICT_TABLES_SHOWN <= engine::conflicts::CONFLICT_TABLES_KEPT);

/// A queue's length now, and its extremes and mean since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueStatus {
    /// Its length now.
    pub now: u64,
    /// The shortest it was.
    pub min: u64,
    /// The longest it was.
    pub max: u64,
    /// Its mean length.
    pub mean: f64,
}

impl QueueStatus {
    fn of(now: u64, sampled: &Sampled) -> QueueStatus {
        QueueStatus {
            now,
            min: sampled.min(),
            max: sampled.max(),
            mean: sampled.mean(),
        }
    }
}

/// Flow control as this node sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowStatus {
    /// Total time the group's order was paused, in nanoseconds, since the node started.
    pub paused_ns: u64,
    /// The fraction of time paused since the last reset.
    pub paused_fraction: f64,
    /// Stop requests this node sent since the last reset (`FLUSH STATUS` zeroes it, as
    /// Galera's).
    pub sent: u64,
    /// Stop requests the group ordered since the last reset.
    pub received: u64,
    /// A stop is in force now.
    pub active: bool,
    /// This node wants the group paused now (its queue is over the limit).
    pub requested: bool,
    /// The names of the members whose stop holds the pause now, comma separated (empty
    /// when none).
    pub paused_by: String,
    /// Pauses started since the node started, by the member whose stop began them.
    pub pauses_by: BTreeMap<String, u64>,
    /// How long the finished pauses lasted.
    pub pause_lengths: PauseLengths,
}

impl FlowStatus {
    /// The names in [`FlowStatus::paused_by`], one by one (none when nothing holds the pause).
    pub fn paused_by_names(&self) -> Vec<&str> {
        self.paused_by
            .split(',')
            .filter(|name| !name.is_empty())
            .collect()
    }
}

/// How the certification index and the appliers are doing (averages since the last reset).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ApplyStatus {
    /// Mean distance between a write-set's seqno and the last one it depends on.
    pub deps_distance: f64,
    /// Fraction of write-sets that entered the apply monitor out of order.
    pub out_of_order_entry: f64,
    /// Fraction of local write-sets that left the apply monitor out of order.
    pub out_of_order_leave: f64,
    /// Mean number of seqnos applying at once.
    pub apply_window: f64,
    /// Write-sets that had to wait for an earlier one before applying, since the last
    /// reset.
    pub apply_waits: u64,
    /// Mean number of seqnos between the last committed and one entering commit order.
    pub commit_window: f64,
    /// Keys in the certification index.
    pub cert_index_size: u64,
    /// Mean number of seqnos a write-set is certified against.
    pub cert_interval: f64,
}

/// What this node counted since it started (not restarted by `FLUSH STATUS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Local write-sets replicated.
    pub replicated: u64,
    /// Their encoded bytes.
    pub replicated_bytes: u64,
    /// Keys in them.
    pub repl_keys: u64,
    /// Bytes of those keys.
    pub repl_keys_bytes: u64,
    /// Bytes of row data in them.
    pub repl_data_bytes: u64,
    /// Remote write-sets received.
    pub received: u64,
    /// Their encoded bytes.
    pub received_bytes: u64,
    /// Local transactions committed (their seqno left commit order here).
    pub local_commits: u64,
    /// Local write-sets that failed certification.
    pub cert_failures: u64,
    /// Local transactions replayed after a brute-force abort.
    pub replays: u64,
    /// Local transactions brute-force aborted.
    pub bf_aborts: u64,
    /// Causal reads served.
    pub causal_reads: u64,
    /// Streaming fragments replicated (commit fragments excluded).
    pub fragments_replicated: u64,
    /// Streaming rollbacks replicated.
    pub streaming_rollbacks: u64,
    /// Write-sets refused for `repl.max_ws_size`.
    pub size_exceeded: u64,
}

impl Totals {
    /// Bytes of replicated write-sets that are neither keys nor row data (headers, framing).
    pub fn repl_other_bytes(&self) -> u64 {
        self.replicated_bytes
            .saturating_sub(self.repl_keys_bytes + self.repl_data_bytes)
    }
}

/// The node's status at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// The history this node's state belongs to (the cluster state UUID).
    pub history: Uuid,
    /// The highest seqno committed here with everything before it.
    pub last_committed: Seqno,
    /// The node's state as Galera shows it: OPEN outside the primary component.
    pub state: NodeState,
    /// True once SYNCED: the server accepts queries.
    pub ready: bool,
    /// This member's identity in the group.
    pub member: Uuid,
    /// The members of the current view.
    pub members: Vec<MemberOut>,
    /// `wsrep_cluster_weight`: the sum of the members' `pc.weight` in a primary component.
    pub cluster_weight: u32,
    /// The configuration number of the view (-1 outside a primary component).
    pub view_id: i64,
    /// True in a primary component.
    pub primary: bool,
    /// True while this member leads the group (the Raft leader).
    pub leader: bool,
    /// `wsrep_desync` and FLUSH TABLES WITH READ LOCK in force.
    pub desync_count: u64,
    /// Counters since start.
    pub totals: Totals,
    /// Local write-sets sent and not ordered yet.
    pub send_queue: QueueStatus,
    /// Ordered actions waiting for the appliers.
    pub recv_queue: QueueStatus,
    /// Flow control.
    pub flow: FlowStatus,
    /// Certification and apply averages.
    pub apply: ApplyStatus,
    /// What the gcache holds: how far back IST can reach.
    pub cache: CacheReach,
    /// The tables certification conflicts were found on, most first, with their counts
    /// since the node started (at most [`CONFLICT_TABLES_SHOWN`]).
    pub conflicts_by_table: Vec<(String, u64)>,
    /// This node's incoming state transfer, while it joins.
    pub transfer: Option<engine::TransferStanding>,
    /// Every member of the view as the group's ordered state knows it.
    pub member_rows: Vec<group::MemberRow>,
    /// Local transactions open.
    pub open_transactions: u64,
    /// Client connections with an open transaction or TOI statement.
    pub open_connections: u64,
    /// Streaming transactions open in the cluster, and their certified fragments.
    pub streaming_transactions: u64,
    /// Certified fragments of those.
    pub streaming_fragments: u64,
    /// Replication latency as Galera's `evs_repl_latency` shows it:
    /// `min/avg/max/stddev/count`, in seconds, since the last reset.
    pub replication_latency: String,
}

impl Replicator {
    /// What the write-set cache holds: how far back this node can serve IST.
    pub fn cache_reach(&self) -> CacheReach {
        lock(&self.shared.cache).reach()
    }

    /// Starts the averages over (`stats_reset`, run by `FLUSH STATUS`).
    pub fn reset_stats(&self) {
        let flow_now = lock(&self.runner)
            .as_ref()
            .map_or_else(FlowTotals::default, |r| flow_totals(&r.status()));
        let now = self.shared.now();
        lock(&self.shared.inner).engine.reset_stats(now, flow_now);
    }

    /// `cert.log_conflicts`: whether each certification conflict is logged with its table
    /// and key.
    pub fn set_log_conflicts(&self, on: bool) {
        lock(&self.shared.inner).engine.set_log_conflicts(on);
    }

    /// `wsrep_node_name`.
    pub fn node_name(&self) -> String {
        self.shared.settings.node_name.clone()
    }

    /// The pipeline's timing histograms, for the metrics endpoint.
    pub fn timing_families(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.shared.timings.families()
    }

    /// The node's status now.
    pub fn status(&self) -> Status {
        let last_committed = self.last_committed().seqno;
        let (group, waiting_to_send) = lock(&self.runner).as_ref().map_or((None, 0), |r| {
            (Some(r.status()), r.write_sets_waiting_to_send())
        });
        let cache = self.cache_reach();
        let now = self.shared.now();
        let inner = lock(&self.shared.inner);
        let engine = &inner.engine;
        // Outside the primary component Galera's node is back to Initialized; its own state
        // returns with the primary component.
        let state = if engine.primary() || engine.state() == NodeState::Closed {
            engine.state()
        } else {
            NodeState::Open
        };
        let stats = engine.stats();
        let window = &stats.window;
        Status {
            history: engine.cluster(),
            last_committed,
            state,
            ready: engine.state() == NodeState::Synced,
            member: engine.own(),
            members: engine.members().to_vec(),
            cluster_weight: group
                .as_ref()
                .filter(|_| engine.primary())
                .map_or(0, |g| g.cluster_weight),
            view_id: engine.view_id(),
            primary: engine.primary(),
            leader: group.as_ref().is_some_and(|g| g.leader),
            desync_count: engine.desync_count(),
            totals: totals(engine),
            send_queue: QueueStatus::of(waiting_to_send, &window.send_queue),
            recv_queue: QueueStatus::of(engine.tasks().len() as u64, &window.recv_queue),
            flow: flow(group.as_ref(), window, now),
            apply: apply(engine),
            cache,
            conflicts_by_table: stats.conflicts.hottest(CONFLICT_TABLES_SHOWN),
            transfer: engine.joining().map(|joining| joining.standing()),
            member_rows: group.as_ref().map_or(Vec::new(), |g| g.member_rows.clone()),
            open_transactions: engine.open_transactions() as u64,
            open_connections: engine.open_connections() as u64,
            streaming_transactions: stats.open_streams.0 as u64,
            streaming_fragments: stats.open_streams.1,
            replication_latency: window.replication_latency.render(),
        }
    }
}

fn totals(engine: &NodeEngine) -> Totals {
    let c = &engine.stats().counters;
    Totals {
        replicated: c.replicated,
        replicated_bytes: c.replicated_bytes,
        repl_keys: c.repl_keys,
        repl_keys_bytes: c.repl_keys_bytes,
        repl_data_bytes: c.repl_data_bytes,
        received: c.received,
        received_bytes: c.received_bytes,
        local_commits: c.local_commits,
        cert_failures: c.cert_failures,
        replays: c.replays,
        bf_aborts: c.bf_aborts,
        causal_reads: c.causal_reads,
        fragments_replicated: c.fragments_replicated,
        streaming_rollbacks: c.streaming_rollbacks,
        size_exceeded: c.size_exceeded,
    }
}

/// The group member's flow-control totals since it started.
fn flow_totals(group: &GroupStatus) -> FlowTotals {
    FlowTotals {
        paused_ns: group.flow.paused_ns,
        sent: group.flow.sent,
        received: group.flow.recv,
    }
}

fn flow(group: Option<&GroupStatus>, window: &Window, now: Nanos) -> FlowStatus {
    let Some(group) = group else {
        return FlowStatus::default();
    };
    let totals = flow_totals(group);
    let in_window = window.flow(totals);
    FlowStatus {
        paused_ns: group.flow.paused_ns,
        paused_fraction: window.paused_fraction(now, totals),
        sent: in_window.sent,
        received: in_window.received,
        active: group.paused,
        requested: group.stop_requested,
        paused_by: group.paused_by.join(","),
        pauses_by: group.flow.pauses_by.clone(),
        pause_lengths: group.flow.pause_lengths.clone(),
    }
}

fn apply(engine: &NodeEngine) -> ApplyStatus {
    let stats = engine.stats();
    let w = &stats.window;
    ApplyStatus {
        deps_distance: w.deps_distance.mean(),
        out_of_order_entry: w.apply_out_of_order_entry.fraction(),
        out_of_order_leave: w.apply_out_of_order_leave.fraction(),
        apply_window: w.apply_window.mean(),
        apply_waits: w.apply_waits,
        commit_window: w.commit_window.mean(),
        cert_index_size: stats.cert_index_size as u64,
        cert_interval: w.cert_interval.mean(),
    }
}
