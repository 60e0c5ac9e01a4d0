//! Where a node is reached, as Galera picks it: the group layer may listen on a wildcard
//! (`gmcast.listen_addr`, default `tcp://0.0.0.0:4567`), so the address its peers call is
//! the node's host (`wsrep_node_address`, or else the local address of the route to the
//! first cluster member that resolves) with the group port. IST listens on `ist.recv_addr`,
//! by default that same host with the group port + 1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};

use options::ProviderOptions;

/// The addresses a node is configured with. Hosts left out are found at `connect`, when the
/// cluster's members are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddresses {
    /// Where the group layer listens (`gmcast.listen_addr`); may be a wildcard.
    pub group_listen: SocketAddr,
    /// This node's host as its peers reach it (`wsrep_node_address`, `base_host`).
    pub host: Option<String>,
    /// The port peers call the group layer at (`base_port`).
    pub group_port: u16,
    /// `ist.recv_addr` when it names a host; `None` takes this node's host.
    pub ist_host: Option<String>,
    /// The port of `ist.recv_addr`.
    pub ist_port: u16,
    /// `ist.recv_bind`: where the IST receiver listens when that differs from where donors
    /// send (NAT); `None` listens at the IST address itself.
    pub ist_bind: Option<SocketAddr>,
}

/// The addresses of a connected node, every host decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachable {
    /// `host:port` its peers reach its group layer at.
    pub group: String,
    /// Where the group layer listens: `gmcast.listen_addr`, except that the IPv4 wildcard
    /// (the default) becomes the IPv6 one, which also takes IPv4, when peers call this node
    /// at an IPv6 address.
    pub group_bind: SocketAddr,
    /// `host:port` donors send its state transfer stream to.
    pub ist: String,
    /// Where its state transfer receiver listens.
    pub ist_bind: SocketAddr,
}

/// Why a node's addresses cannot be decided.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    /// A host name that does not resolve.
    #[error("{what} {host} does not resolve to an address")]
    Unresolved {
        /// Which address it was.
        what: &'static str,
        /// The host as configured.
        host: String,
    },
}

impl NodeAddresses {
    /// The addresses `wsrep_provider_options` configures (`gmcast.listen_addr`,
    /// `base_host`, `base_port`, `ist.recv_addr`, `ist.recv_bind`); hosts not configured
    /// are decided at connect. An error names the option whose host does not resolve.
    pub fn from_options(options: &ProviderOptions) -> Result<NodeAddresses, String> {
        let listen = &options.gmcast_listen_addr;
        let group_listen = resolve_one(&listen.host, listen.port)
            .ok_or_else(|| format!("gmcast.listen_addr {listen} does not resolve"))?;
        let ist_bind = match &options.ist_recv_bind {
            None => None,
            Some(bind) => Some(
                resolve_one(&bind.host, bind.port)
                    .ok_or_else(|| format!("ist.recv_bind {bind} does not resolve"))?,
            ),
        };
        let known = |host: &str| (!host.is_empty()).then(|| host.to_owned());
        Ok(NodeAddresses {
            group_listen,
            host: known(&options.base_host),
            group_port: options.base_port,
            ist_host: known(&options.ist_recv_addr.host),
            ist_port: options.ist_recv_addr.port,
            ist_bind,
        })
    }

    /// Every address on loopback, as single-machine tests use them.
    pub fn loopback(group_listen: SocketAddr, ist: SocketAddr) -> NodeAddresses {
        NodeAddresses {
            group_listen,
            host: Some(group_listen.ip().to_string()),
            group_port: group_listen.port(),
            ist_host: Some(ist.ip().to_string()),
            ist_port: ist.port(),
            ist_bind: None,
        }
    }

    /// Decides this node's addresses; `peers` are the members of `wsrep_cluster_address`.
    pub fn resolve(&self, peers: &[String]) -> Result<Reachable, AddressError> {
        let host = match &self.host {
            Some(host) => host.clone(),
            None => self.guess_host(peers).to_string(),
        };
        let ist_host = self.ist_host.clone().unwrap_or_else(|| host.clone());
        let ist = host_port(&ist_host, self.ist_port);
        let ist_bind = match self.ist_bind {
            Some(bind) => bind,
            None => {
                resolve_one(&ist_host, self.ist_port).ok_or_else(|| AddressError::Unresolved {
                    what: "ist.recv_addr",
                    host: ist_host.clone(),
                })?
            }
        };
        let mut group_bind = self.group_listen;
        if group_bind.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED) && host.parse::<Ipv6Addr>().is_ok()
        {
            group_bind.set_ip(Ipv6Addr::UNSPECIFIED.into());
        }
        Ok(Reachable {
            group: host_port(&host, self.group_port),
            group_bind,
            ist,
            ist_bind,
        })
    }

    /// With no host configured: the listen address when it names one, else the local end of
    /// the route to the first peer that resolves, else loopback (a lone founder).
    fn guess_host(&self, peers: &[String]) -> IpAddr {
        if !self.group_listen.ip().is_unspecified() {
            return self.group_listen.ip();
        }
        peers
            .iter()
            .filter_map(|peer| peer.to_socket_addrs().ok()?.next())
            .find_map(|peer| local_address_towards(peer).filter(|ip| !ip.is_unspecified()))
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// The local address the kernel would send from to reach `peer`. Connecting a UDP socket
/// only looks up the route: nothing is sent.
fn local_address_towards(peer: SocketAddr) -> Option<IpAddr> {
    let any: IpAddr = if peer.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind((any, 0)).ok()?;
    socket.connect(peer).ok()?;
    Some(socket.local_addr().ok()?.ip())
}

fn resolve_one(host: &str, port: u16) -> Option<SocketAddr> {
    (host, port).to_socket_addrs().ok()?.next()
}

/// `host:port`, with an IPv6 address in brackets.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits one member of `gcomm://` into host and port (default `default_port`): `host`,
/// `host:port`, `[v6]` or `[v6]:port`. `None` when it is none of these.
pub(crate) fn split_host_port(text: &str, default_port: u16) -> Option<(String, u16)> {
    let port_of = |text: &str| text.parse::<u16>().ok().filter(|p| *p != 0);
    let (host, port) = if let Some(bracketed) = text.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        host.parse::<Ipv6Addr>().ok()?;
        match after {
            "" => (host, default_port),
            _ => (host, port_of(after.strip_prefix(':')?)?),
        }
    } else {
        match text.split_once(':') {
            Some((host, port)) if !port.contains(':') => (host, port_of(port)?),
            Some(_) => return None,
            None => (text, default_port),
        }
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_a_cluster_address_take_the_default_port_and_ipv6_brackets() {
        assert_eq!(
            split_host_port("10.0.0.1", 4567),
            Some(("10.0.0.1".into(), 4567))
        );
        assert_eq!(
            split_host_port("db-2:4600", 4567),
            Some(("db-2".into(), 4600))
        );
        assert_eq!(
            split_host_port("[fd00::1]", 4567),
            Some(("fd00::1".into(), 4567))
        );
        assert_eq!(
            split_host_port("[fd00::1]:4570", 4567),
            Some(("fd00::1".into(), 4570))
        );
        // An IPv6 address needs its brackets: the port would be ambiguous.
        assert_eq!(split_host_port("fd00::1", 4567), None);
        assert_eq!(split_host_port("[fd00::1]4570", 4567), None);
        assert_eq!(split_host_port("host:0", 4567), None);
        assert_eq!(split_host_port(":4567", 4567), None);
        assert_eq!(host_port("fd00::1", 4567), "[fd00::1]:4567");
        assert_eq!(host_port("10.0.0.1", 4567), "10.0.0.1:4567");
    }

    #[test]
    fn a_node_without_a_host_advertises_the_route_towards_its_peers() {
        let addresses = NodeAddresses {
            group_listen: "0.0.0.0:4567".parse().unwrap(),
            host: None,
            group_port: 4567,
            ist_host: None,
            ist_port: 0,
            ist_bind: None,
        };
        let reachable = addresses
            .resolve(&["unresolvable.invalid:4567".into(), "127.0.0.2:4567".into()])
            .unwrap();
        // Loopback routes 127.0.0.2 from 127.0.0.1: the first peer that resolves decides.
        assert_eq!(reachable.group, "127.0.0.1:4567");
        assert_eq!(reachable.ist, "127.0.0.1:0");
        let configured = NodeAddresses {
            host: Some("db-1.example".into()),
            ist_host: Some("127.0.0.1".into()),
            ist_port: 4568,
            ..addresses
        };
        let reachable = configured.resolve(&[]).unwrap();
        assert_eq!(reachable.group, "db-1.example:4567");
        assert_eq!(reachable.group_bind, "0.0.0.0:4567".parse().unwrap());
        let v6 = NodeAddresses {
            host: Some("::1".into()),
            ..configured.clone()
        };
        let reachable = v6.resolve(&[]).unwrap();
        assert_eq!(reachable.group, "[::1]:4567");
        assert_eq!(
            reachable.group_bind,
            "[::]:4567".parse().unwrap(),
            "dual stack"
        );
        assert_eq!(reachable.ist, "127.0.0.1:4568");
        assert_eq!(reachable.ist_bind, "127.0.0.1:4568".parse().unwrap());
        let unresolved = NodeAddresses {
            ist_host: Some("unresolvable.invalid".into()),
            ..configured
        };
        assert!(matches!(
            unresolved.resolve(&[]),
            Err(AddressError::Unresolved {
                what: "ist.recv_addr",
                ..
            })
        ));
    }
}
