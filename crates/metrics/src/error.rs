//! Why the endpoint could not start.

use std::net::SocketAddr;

/// A failure to start the metrics endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound (in use, or not this host's).
    #[error("metrics.listen_addr {address}: cannot listen there: {error}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// What the system said.
        error: std::io::Error,
    },
    /// The listener's thread or runtime could not be made.
    #[error("metrics endpoint: cannot start its thread: {0}")]
    Runtime(std::io::Error),
}
