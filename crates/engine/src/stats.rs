//! What the node counts: totals since it started ([`Counters`]) and the averages that
//! `FLUSH STATUS` restarts ([`crate::averages::Window`]), with the certification index's
//! size as last seen.

use base::Nanos;

use crate::averages::{FlowTotals, Window};

/// Totals since the node started (not restarted by `FLUSH STATUS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Local write-sets replicated.
    pub replicated: u64,
    /// Their encoded bytes.
    pub replicated_bytes: u64,
    /// Remote write-sets received.
    pub received: u64,
    /// Their encoded bytes.
    pub received_bytes: u64,
    /// Local write-sets that failed certification.
    pub cert_failures: u64,
    /// Local transactions brute-force aborted.
    pub bf_aborts: u64,
    /// Local transactions replayed after a brute-force abort.
    pub replays: u64,
    /// Local transactions committed: their seqno left commit order here (applied remote
    /// write-sets are not counted, as in Galera's `wsrep_local_commits`).
    pub local_commits: u64,
    /// Causal reads served.
    pub causal_reads: u64,
    /// Keys in replicated write-sets.
    pub repl_keys: u64,
    /// Bytes of those keys.
    pub repl_keys_bytes: u64,
    /// Bytes of row data in replicated write-sets.
    pub repl_data_bytes: u64,
    /// Streaming fragments this node replicated (commit fragments excluded).
    pub fragments_replicated: u64,
    /// Streaming rollbacks this node replicated.
    pub streaming_rollbacks: u64,
    /// Write-sets refused for `repl.max_ws_size`.
    pub size_exceeded: u64,
}

/// The node's counters and averages.
#[derive(Clone, Debug)]
pub struct NodeStats {
    /// Totals since start.
    pub counters: Counters,
    /// Averages since the last reset.
    pub window: Window,
    /// Keys in the certification index, as of the last certification.
    pub cert_index_size: usize,
    /// Streaming transactions open in the cluster, as this node's certification index
    /// tracks them, and their certified fragments.
    pub open_streams: (usize, u64),
    /// Certification conflicts by table.
    pub conflicts: crate::conflicts::ConflictTally,
}

impl NodeStats {
    /// Nothing counted yet; the window starts at `now`.
    pub fn new(now: Nanos) -> NodeStats {
        NodeStats {
            counters: Counters::default(),
            window: Window::new(now, FlowTotals::default()),
            cert_index_size: 0,
            open_streams: (0, 0),
            conflicts: Default::default(),
        }
    }
}
