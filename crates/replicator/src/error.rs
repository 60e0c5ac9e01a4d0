//! How the replicator's calls end when they do not simply succeed: [`ReplicatorError`] (the
//! outcomes of certification and brute-force aborts are the engine's).

use std::net::SocketAddr;
use std::time::Duration;

use crate::addresses::AddressError;
use crate::settings::describe_bad_cluster_address;

/// Why a call could not be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReplicatorError {
    /// `connect` was called on a connected replicator.
    #[error("already connected: disconnect first")]
    AlreadyConnected,
    /// The node is not part of a primary component (or not connected at all).
    #[error("not connected to a primary component")]
    NotConnected,
    /// The server failed to receive its snapshot: the node cannot go on without state
    /// (Galera stops the server here too).
    #[error(
        "state transfer failed (code {rcode}): this node cannot continue without the \
         cluster's state; fix the cause named above and restart it"
    )]
    StateTransferFailed {
        /// The server's error code (a negative errno).
        rcode: i32,
    },
    /// A `gcomm://` address that does not parse.
    #[error("{}", describe_bad_cluster_address(.0))]
    BadClusterAddress(String),
    /// This node's own addresses cannot be decided.
    #[error("{0}")]
    Address(#[from] AddressError),
    /// The group transport could not start.
    #[error("cannot start the group transport on {address}: {reason}")]
    Transport {
        /// The listen address.
        address: SocketAddr,
        /// The OS error.
        reason: String,
    },
    /// Waiting timed out.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The TLS files could not be (re)loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// The transaction is unknown.
    #[error("unknown transaction {0}")]
    UnknownTransaction(u64),
    /// Option values that do not fit together.
    #[error("invalid options: {0}")]
    Options(String),
    /// A bootstrap from a node that was not the last to leave the cluster: another node may
    /// hold newer data.
    #[error(
        "It may not be safe to bootstrap the cluster from this node: it was not the last one \
         to leave and may not have all the data. To force it, set safe_to_bootstrap: 1 in {0}"
    )]
    UnsafeBootstrap(String),
    /// The saved state could not be read.
    #[error("{0}")]
    SavedState(String),
    /// A causal read on a joiner that waits for a snapshot: it holds none of the cluster's
    /// history to read from, and would wait for its own transfer.
    #[error(
        "this node has no state of the cluster's history yet (it waits for a snapshot): it \
         cannot serve a causal read"
    )]
    NoStateYet,
    /// A consistency vote found this node's data different from the cluster's: it left.
    #[error("{0}")]
    Inconsistent(String),
}
