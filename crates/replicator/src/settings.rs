//! What the replicator starts with ([`Settings`]) and the `gcomm://` cluster address.

use std::sync::Arc;
use std::time::Duration;

use base::Gtid;
use gcache::GcacheConfig;
use group::GroupConfig;

use crate::addresses;
use crate::addresses::NodeAddresses;
use crate::error::ReplicatorError;

/// Settings the replicator starts with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `wsrep_node_name`.
    pub node_name: String,
    /// Where clients reach this node, for the members list.
    pub incoming_address: String,
    /// Where the group layer listens and where peers, donors and clients reach this node.
    pub addresses: NodeAddresses,
    /// Group-layer settings (timeouts, flow control).
    pub group: GroupConfig,
    /// Seed of the group member's random choices.
    pub seed: u64,
    /// How long `sync_wait` waits when the caller gives no timeout.
    pub causal_read_timeout: Duration,
    /// Where `grastate.dat` is kept (`base_dir`); `None` keeps no saved state.
    pub state_dir: Option<std::path::PathBuf>,
    /// The server's own position at start (MariaDB recovers it from its storage engine).
    /// A bootstrap continues this history; a joiner asks for IST from it.
    pub history: Option<Gtid>,
    /// The write-set cache (`gcache.*`); `None` keeps none, so this node serves no IST.
    pub gcache: Option<GcacheConfig>,
    /// TLS for group traffic and IST (`socket.ssl_*`); `None`: plaintext.
    pub tls: Option<Arc<tls::TlsContext>>,
    /// Nice steps the replicator's and transport's threads run below the server's own
    /// (`gcomm.thread_nice`, see `transport::priority`); 0 keeps the server's priority.
    pub thread_nice: u8,
}

/// The group port of a `gcomm://` member written without one (Galera's).
pub const DEFAULT_GROUP_PORT: u16 = 4567;

/// Why a cluster address is refused, opening with Galera's words for the same case (its
/// "Invalid backend URI" and "Backend not supported"), which operators and MariaDB's
/// tests look for.
pub(crate) fn describe_bad_cluster_address(url: &str) -> String {
    const EXPECTED: &str = "expected gcomm://host:port[,host:port...]";
    match url.trim().split_once("://") {
        None => format!("Invalid backend URI: {url} ({EXPECTED})"),
        Some((scheme, _)) if scheme != "gcomm" => {
            format!("Backend not supported: {scheme} (in {url:?}; {EXPECTED})")
        }
        Some(_) => format!("bad cluster address {url:?}: {EXPECTED}"),
    }
}

/// Parses `gcomm://host[:port],[v6][:port],...` into peer addresses (empty for `gcomm://`).
pub fn parse_cluster_address(url: &str) -> Result<Vec<String>, ReplicatorError> {
    let bad = || ReplicatorError::BadClusterAddress(url.to_owned());
    let rest = url.trim().strip_prefix("gcomm://").ok_or_else(bad)?;
    let rest = rest.split('?').next().unwrap_or_default();
    let mut peers = Vec::new();
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, port) = addresses::split_host_port(part, DEFAULT_GROUP_PORT).ok_or_else(bad)?;
        peers.push(addresses::host_port(&host, port));
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_addresses_parse_like_galera() {
        assert_eq!(parse_cluster_address("gcomm://"), Ok(vec![]));
        assert_eq!(
            parse_cluster_address("gcomm://127.0.0.1:4567,127.0.0.1:4568"),
            Ok(vec![
                "127.0.0.1:4567".to_owned(),
                "127.0.0.1:4568".to_owned()
            ])
        );
        assert_eq!(
            parse_cluster_address("gcomm://host"),
            Ok(vec!["host:4567".to_owned()])
        );
        assert_eq!(
            parse_cluster_address("gcomm://h:1?pc.wait_prim=no"),
            Ok(vec!["h:1".to_owned()])
        );
        assert!(parse_cluster_address("http://x").is_err());
        assert!(parse_cluster_address("gcomm://h:notaport").is_err());
    }
}
