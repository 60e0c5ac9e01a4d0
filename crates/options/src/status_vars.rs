//! The status variables a Galera 26.4.23 node shows in `SHOW GLOBAL STATUS LIKE 'wsrep%'`,
//! as data: names, value types, who computes each one, and a one-line meaning.
//!
//! Source: `shared/reference/galera-status-vars.txt` (names and order, as shown on a synced
//! node of a 3-node cluster) and `shared/notes/wsrep-contract.md` §4.1 (types and owners).
//! Names are stored without the `wsrep_` prefix: the provider reports them that way from
//! `stats_get` and MariaDB adds the prefix. The server-owned ones are listed so the whole
//! picture is in one place; the provider must not report those.

use self::ValueKind::{Bool, Double, Int, Text};

/// The type of a status value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A 64-bit integer (`WSREP_VAR_INT64`; the server's own integers).
    Int,
    /// A floating-point number (`WSREP_VAR_DOUBLE`, shown with 6 significant digits).
    Double,
    /// Text (`WSREP_VAR_STRING`; the server's own text values).
    Text,
    /// `ON`/`OFF` (server-owned only).
    Bool,
}

/// Who computes a status value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The provider, in `stats_get`.
    Provider,
    /// MariaDB itself; the provider never reports it.
    Server,
}

/// One status variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusVar {
    /// The name without the `wsrep_` prefix, as the provider reports it.
    pub name: &'static str,
    /// The value's type.
    pub kind: ValueKind,
    /// Who computes it.
    pub owner: Owner,
    /// What it means.
    pub meaning: &'static str,
}

/// The prefix MariaDB puts before every name.
pub const PREFIX: &str = "wsrep_";

const fn provider(name: &'static str, kind: ValueKind, meaning: &'static str) -> StatusVar {
    StatusVar {
        name,
        kind,
        owner: Owner::Provider,
        meaning,
    }
}

const fn server(name: &'static str, kind: ValueKind, meaning: &'static str) -> StatusVar {
    StatusVar {
        name,
        kind,
        owner: Owner::Server,
        meaning,
    }
}

/// Every status variable, in the order the reference node shows them: the provider's fixed
/// list, then the group layer's entries, then the server's own.
pub const STATUS_VARS: [StatusVar; 84] = [
    provider(
        "local_state_uuid",
        Text,
        "UUID of the history (state) the node's data belongs to",
    ),
    provider(
        "protocol_version",
        Int,
        "replication protocol version in use",
    ),
    provider(
        "protocol_application",
        Int,
        "application protocol version agreed by the group",
    ),
    provider(
        "protocol_replicator",
        Int,
        "replicator protocol version agreed by the group",
    ),
    provider(
        "protocol_gcs",
        Int,
        "group communication protocol version agreed by the group",
    ),
    provider(
        "last_committed",
        Int,
        "seqno of the last committed write-set",
    ),
    provider(
        "replicated",
        Int,
        "write-sets this node replicated to the group",
    ),
    provider(
        "replicated_bytes",
        Int,
        "bytes of write-sets this node replicated",
    ),
    provider(
        "repl_keys",
        Int,
        "keys in the write-sets this node replicated",
    ),
    provider(
        "repl_keys_bytes",
        Int,
        "bytes of keys in the write-sets this node replicated",
    ),
    provider(
        "repl_data_bytes",
        Int,
        "bytes of row data in the write-sets this node replicated",
    ),
    provider(
        "repl_other_bytes",
        Int,
        "bytes of other parts of the write-sets this node replicated",
    ),
    provider("received", Int, "write-sets received from the group"),
    provider(
        "received_bytes",
        Int,
        "bytes of write-sets received from the group",
    ),
    provider("local_commits", Int, "local transactions committed"),
    provider(
        "local_cert_failures",
        Int,
        "local transactions that failed certification",
    ),
    provider(
        "local_replays",
        Int,
        "local transactions replayed after a brute-force abort",
    ),
    provider("local_send_queue", Int, "current length of the send queue"),
    provider(
        "local_send_queue_max",
        Int,
        "longest send queue since the last status read",
    ),
    provider(
        "local_send_queue_min",
        Int,
        "shortest send queue since the last status read",
    ),
    provider(
        "local_send_queue_avg",
        Double,
        "average send queue length since the last status read",
    ),
    provider(
        "local_recv_queue",
        Int,
        "current length of the receive (apply) queue",
    ),
    provider(
        "local_recv_queue_max",
        Int,
        "longest receive queue since the last status read",
    ),
    provider(
        "local_recv_queue_min",
        Int,
        "shortest receive queue since the last status read",
    ),
    provider(
        "local_recv_queue_avg",
        Double,
        "average receive queue length since the last status read",
    ),
    provider(
        "local_cached_downto",
        Int,
        "lowest seqno still in the write-set cache (IST can start there)",
    ),
    provider(
        "ist_reach_seqnos",
        Int,
        "Trireme: how many seqnos back this node can serve IST (its gcache's extent)",
    ),
    provider(
        "ist_reach_seconds",
        Double,
        "Trireme: how many seconds back this node can serve IST (age of its oldest cached write-set)",
    ),
    provider(
        "gcache_disk_bytes",
        Int,
        "Trireme: bytes of the write-set cache on disk, ring and overflow pages",
    ),
    provider(
        "flow_control_paused_ns",
        Int,
        "total time replication was paused by flow control, in nanoseconds",
    ),
    provider(
        "flow_control_paused",
        Double,
        "fraction of time paused by flow control since the last status read",
    ),
    provider(
        "flow_control_sent",
        Int,
        "flow control pause requests this node sent (resumes are not counted)",
    ),
    provider(
        "flow_control_recv",
        Int,
        "flow control pause requests received, own ones included (resumes are not counted)",
    ),
    provider(
        "flow_control_active",
        Text,
        "\"true\" while the group is paused by flow control",
    ),
    provider(
        "flow_control_requested",
        Text,
        "\"true\" while this node asks the group to pause",
    ),
    provider(
        "flow_control_paused_by",
        Text,
        "Trireme: the names of the nodes whose flow-control stop holds the cluster paused now, \
         comma separated; empty when none",
    ),
    provider(
        "cert_deps_distance",
        Double,
        "average distance between the lowest and highest seqno that could be applied in parallel",
    ),
    provider(
        "apply_oooe",
        Double,
        "how often write-sets were applied out of order",
    ),
    provider(
        "apply_oool",
        Double,
        "how often a write-set was applied before a lower one that took longer",
    ),
    provider(
        "apply_window",
        Double,
        "average distance between the highest and lowest seqno applied concurrently",
    ),
    provider(
        "apply_waits",
        Int,
        "times an applier waited for an earlier write-set before applying",
    ),
    provider(
        "commit_oooe",
        Double,
        "how often write-sets were committed out of order",
    ),
    provider(
        "commit_oool",
        Double,
        "how often a write-set was committed before a lower one that took longer",
    ),
    provider(
        "commit_window",
        Double,
        "average distance between the highest and lowest seqno committed concurrently",
    ),
    provider(
        "local_state",
        Int,
        "node state: 1 joining, 2 donor/desynced, 3 joined, 4 synced",
    ),
    provider(
        "local_state_comment",
        Text,
        "node state as text, e.g. Synced, Donor/Desynced, Joining",
    ),
    provider("cert_index_size", Int, "entries in the certification index"),
    provider("causal_reads", Int, "causal read requests served"),
    provider(
        "cert_interval",
        Double,
        "average number of write-sets ordered while a transaction replicated",
    ),
    provider(
        "open_transactions",
        Int,
        "local transactions the provider currently tracks",
    ),
    provider(
        "open_connections",
        Int,
        "connection objects the provider currently tracks",
    ),
    provider(
        "streaming_transactions",
        Int,
        "Trireme: streaming-replication transactions open in the cluster (certified fragments, \
         no commit or rollback yet)",
    ),
    provider(
        "streaming_fragments",
        Int,
        "Trireme: certified fragments of the open streaming transactions",
    ),
    provider(
        "raft_leader",
        Int,
        "Trireme: 1 while this node is the Raft leader, which orders every write-set",
    ),
    provider(
        "local_fragments_replicated",
        Int,
        "Trireme: streaming fragments this node replicated (commit fragments not counted)",
    ),
    provider(
        "local_streaming_rollbacks",
        Int,
        "Trireme: streaming transactions this node rolled back cluster-wide",
    ),
    provider(
        "local_size_exceeded",
        Int,
        "Trireme: write-sets refused for exceeding repl.max_ws_size",
    ),
    provider(
        "incoming_addresses",
        Text,
        "comma-separated client addresses of the members",
    ),
    provider(
        "cluster_weight",
        Text,
        "sum of pc.weight over the primary component",
    ),
    provider(
        "desync_count",
        Text,
        "how many desync requests hold this node desynced",
    ),
    provider(
        "evs_delayed",
        Text,
        "members seen responding late, with their addresses and counts",
    ),
    provider(
        "evs_evict_list",
        Text,
        "UUIDs of members evicted from the group",
    ),
    provider(
        "evs_repl_latency",
        Text,
        "group delivery latency: min/avg/max/stddev/samples",
    ),
    provider("evs_state", Text, "group protocol state, e.g. OPERATIONAL"),
    provider("gcomm_uuid", Text, "this member's UUID in the group"),
    provider(
        "gmcast_segment",
        Text,
        "this member's segment (gmcast.segment)",
    ),
    server(
        "checkpoint_position",
        Text,
        "last committed position as uuid:seqno",
    ),
    server(
        "se_checkpoint",
        Text,
        "position (XID) stored in the storage engine",
    ),
    server("applier_thread_count", Int, "applier threads running"),
    server(
        "cluster_capabilities",
        Text,
        "capabilities of the cluster (never set in 10.11)",
    ),
    server(
        "cluster_conf_id",
        Int,
        "number of membership changes the cluster has seen",
    ),
    server("cluster_size", Int, "members in the current view"),
    server("cluster_state_uuid", Text, "UUID of the cluster's history"),
    server(
        "cluster_status",
        Text,
        "Primary, non-Primary or Disconnected",
    ),
    server(
        "connected",
        Bool,
        "whether the node is connected to a group",
    ),
    server(
        "local_bf_aborts",
        Int,
        "local transactions aborted by replicated ones",
    ),
    server("local_index", Int, "this node's index in the view"),
    server(
        "provider_capabilities",
        Text,
        "the provider's capability flags",
    ),
    server("provider_name", Text, "the provider's name"),
    server("provider_vendor", Text, "the provider's vendor"),
    server("provider_version", Text, "the provider's version"),
    server("ready", Bool, "whether the node accepts queries"),
    server("rollbacker_thread_count", Int, "rollbacker threads running"),
    server(
        "thread_count",
        Int,
        "wsrep threads running (appliers and rollbackers)",
    ),
];

/// The variable called `name`, with or without the `wsrep_` prefix.
pub fn lookup(name: &str) -> Option<&'static StatusVar> {
    let name = name.strip_prefix(PREFIX).unwrap_or(name);
    STATUS_VARS.iter().find(|var| var.name == name)
}

/// The variables the provider reports from `stats_get`, in order.
pub fn provider_vars() -> impl Iterator<Item = &'static StatusVar> {
    STATUS_VARS
        .iter()
        .filter(|var| var.owner == Owner::Provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_unprefixed() {
        let mut names: Vec<&str> = STATUS_VARS.iter().map(|var| var.name).collect();
        assert!(names.iter().all(|name| !name.starts_with(PREFIX)));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STATUS_VARS.len());
    }

    #[test]
    fn providers_come_first_and_never_report_booleans() {
        let provider_count = provider_vars().count();
        assert_eq!(provider_count, 66);
        assert!(STATUS_VARS[..provider_count]
            .iter()
            .all(|var| var.owner == Owner::Provider && var.kind != ValueKind::Bool));
        assert!(STATUS_VARS[provider_count..]
            .iter()
            .all(|var| var.owner == Owner::Server));
    }

    #[test]
    fn lookup_takes_either_form() {
        let var = lookup("wsrep_local_state_comment").unwrap();
        assert_eq!(
            (var.name, var.kind),
            ("local_state_comment", ValueKind::Text)
        );
        assert_eq!(lookup("last_committed").unwrap().kind, ValueKind::Int);
        assert_eq!(lookup("wsrep_cluster_size").unwrap().owner, Owner::Server);
        assert!(lookup("wsrep_nothing").is_none());
    }
}
