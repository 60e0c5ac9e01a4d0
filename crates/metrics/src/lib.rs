//! The node's monitoring endpoint, on when `metrics.listen_addr` names an address:
//! - `/metrics`: Prometheus text, every numeric `wsrep_` status value and Trireme's own
//!   histograms and tallies (what is served is the [`Source`]'s: the provider's);
//! - `/status.json`: the status page's data;
//! - `/`: the status page, one static HTML file that reads `/status.json`.
//!
//! It is a shell: it decides nothing about the node, it serves what the source gives at the
//! time of each request. With `socket.ssl` on it speaks TLS only, with the node's
//! certificate, and asks clients for a certificate signed by the node's CA.

// The listener runs on a thread of its own with real timeouts.
#![allow(clippy::disallowed_methods)]

mod error;
pub mod families;
mod server;

pub use error::MetricsError;
pub use prometheus::proto::MetricFamily;
pub use server::{
    MetricsServer, Source, CONNECTION_LIFETIME, HANDSHAKE_TIMEOUT, HEADER_READ_TIMEOUT,
    MAX_CONNECTIONS, SAMPLE_PERIOD,
};
