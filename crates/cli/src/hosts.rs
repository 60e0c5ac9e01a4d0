//! A network of hosts on one machine, for clusters made with `trireme cluster up --hosts`.
//!
//! Node `N` runs in the network namespace `triN` with the addresses `10.213.0.N/24` and
//! `fd00:213::N/64` on its `eth0`, a veth whose other end `trivN` is a port of the bridge
//! `tribr0`. The machine itself has `10.213.0.254` on that bridge, so clients (sysbench, the
//! tests) reach every host over the bridge as they would reach real ones. Faults act on that
//! network:
//! - a cut takes a host's link down: it reaches nobody, nobody reaches it;
//! - a split moves some hosts' links to a second bridge `tribr1`: they reach each other and
//!   nothing else (the machine keeps no address there), which isolates a chosen minority,
//!   the Raft leader included;
//! - an impairment adds delay and loss with `tc netem` inside the host's namespace.
//!
//! Everything here is created and removed by name; nothing outside these names is touched.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::config::MAX_NODES;
use crate::sys;

/// The bridge every host is plugged into.
pub const BRIDGE: &str = "tribr0";
/// The bridge hosts are moved to when they are split off the others.
pub const SPLIT_BRIDGE: &str = "tribr1";
/// The machine's own address on [`BRIDGE`], from which clients reach the hosts.
pub const CLIENT_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 254);
/// The IPv4 prefix length of the hosts' network.
const PREFIX_V4: u8 = 24;
/// The IPv6 prefix length of the hosts' network.
const PREFIX_V6: u8 = 64;
/// Longest wait for one `ip` or `tc` command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

const _: () = assert!(MAX_NODES < CLIENT_ADDRESS.octets()[3] as usize);

/// The namespace of host `node`.
pub fn namespace(node: usize) -> String {
    format!("tri{node}")
}

/// The IPv4 address of host `node`.
pub fn address(node: usize) -> Ipv4Addr {
    assert!((1..=MAX_NODES).contains(&node), "host {node} out of range");
    Ipv4Addr::new(10, 213, 0, node as u8)
}

/// The IPv6 address of host `node`.
pub fn address_v6(node: usize) -> Ipv6Addr {
    assert!((1..=MAX_NODES).contains(&node), "host {node} out of range");
    Ipv6Addr::new(0xfd00, 0x213, 0, 0, 0, 0, 0, node as u16)
}

/// The machine's end of host `node`'s link (a port of a bridge).
fn link(node: usize) -> String {
    format!("triv{node}")
}

/// Runs `ip`/`tc` with `args`; the error names the command and what it printed.
fn run(program: &str, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = sys::run_captured(&mut cmd, COMMAND_TIMEOUT)?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            sys::describe(&cmd),
            out.stderr.trim().lines().next().unwrap_or("no message")
        );
    }
    Ok(())
}

/// Runs `ip` inside host `node`'s namespace.
fn run_in(node: usize, program: &str, args: &[&str]) -> Result<()> {
    let ns = namespace(node);
    let mut full = vec!["netns", "exec", ns.as_str(), program];
    full.extend_from_slice(args);
    run("ip", &full)
}

fn exists(kind: &[&str]) -> bool {
    let mut cmd = Command::new("ip");
    cmd.args(kind);
    sys::run_captured(&mut cmd, COMMAND_TIMEOUT).is_ok_and(|out| out.status.success())
}

fn namespace_exists(node: usize) -> bool {
    exists(&["netns", "exec", &namespace(node), "true"])
}

/// The pids of the processes in host `node`'s namespace.
fn processes_in(node: usize) -> Vec<String> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "pids", &namespace(node)]);
    sys::run_captured(&mut cmd, COMMAND_TIMEOUT)
        .map(|out| out.stdout.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn link_exists(name: &str) -> bool {
    exists(&["link", "show", "dev", name])
}

/// The hosts `1..=nodes` of one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostNetwork {
    nodes: usize,
}

impl HostNetwork {
    /// The network of a cluster of `nodes` hosts.
    pub fn new(nodes: usize) -> HostNetwork {
        assert!(
            (1..=MAX_NODES).contains(&nodes),
            "{nodes} hosts out of range"
        );
        HostNetwork { nodes }
    }

    /// Creates whatever is missing: the bridges, and every host's namespace, link and
    /// addresses. Needs root.
    pub fn create(&self) -> Result<()> {
        if !sys::running_as_root() {
            bail!("--hosts creates network namespaces and a bridge: run trireme as root");
        }
        for bridge in [BRIDGE, SPLIT_BRIDGE] {
            if !link_exists(bridge) {
                run("ip", &["link", "add", bridge, "type", "bridge"])?;
            }
            run("ip", &["link", "set", bridge, "up"])?;
        }
        // Ignore "exists": a restart of the cluster finds its address in place.
        let client = format!("{CLIENT_ADDRESS}/{PREFIX_V4}");
        let _ = run("ip", &["addr", "add", &client, "dev", BRIDGE]);
        for node in 1..=self.nodes {
            self.create_host(node)
                .with_context(|| format!("cannot create host {node} ({})", namespace(node)))?;
        }
        Ok(())
    }

    fn create_host(&self, node: usize) -> Result<()> {
        let ns = namespace(node);
        if namespace_exists(node) {
            let users = processes_in(node);
            if !users.is_empty() {
                bail!(
                    "{ns} is in use (pids {}): another cluster of hosts runs on this machine; \
                     stop it first (`trireme cluster down --dir ...`)",
                    users.join(" ")
                );
            }
        } else {
            run("ip", &["netns", "add", &ns])?;
        }
        run_in(node, "ip", &["link", "set", "lo", "up"])?;
        let link = link(node);
        if !link_exists(&link) {
            run(
                "ip",
                &[
                    "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            let v4 = format!("{}/{PREFIX_V4}", address(node));
            let v6 = format!("{}/{PREFIX_V6}", address_v6(node));
            run_in(node, "ip", &["addr", "add", &v4, "dev", "eth0"])?;
            run_in(
                node,
                "ip",
                &["-6", "addr", "add", &v6, "dev", "eth0", "nodad"],
            )?;
            run_in(node, "ip", &["link", "set", "eth0", "up"])?;
        }
        run("ip", &["link", "set", &link, "master", BRIDGE])?;
        run("ip", &["link", "set", &link, "up"])
    }

    /// Removes every host's namespace and link, and the bridges. Safe to repeat.
    pub fn remove(&self) -> Result<()> {
        let mut failures = Vec::new();
        for node in 1..=self.nodes {
            if link_exists(&link(node)) {
                if let Err(e) = run("ip", &["link", "del", &link(node)]) {
                    failures.push(format!("{e:#}"));
                }
            }
            if namespace_exists(node) {
                if let Err(e) = run("ip", &["netns", "del", &namespace(node)]) {
                    failures.push(format!("{e:#}"));
                }
            }
        }
        for bridge in [BRIDGE, SPLIT_BRIDGE] {
            if link_exists(bridge) {
                if let Err(e) = run("ip", &["link", "del", bridge]) {
                    failures.push(format!("{e:#}"));
                }
            }
        }
        if !failures.is_empty() {
            bail!(
                "the hosts' network was not fully removed:\n{}",
                failures.join("\n")
            );
        }
        Ok(())
    }

    fn check(&self, node: usize) -> Result<()> {
        if !(1..=self.nodes).contains(&node) {
            bail!("there is no host {node}: the hosts are 1 to {}", self.nodes);
        }
        Ok(())
    }

    /// Cuts host `node`'s link: it reaches nobody and nobody reaches it.
    pub fn cut(&self, node: usize) -> Result<()> {
        self.check(node)?;
        run("ip", &["link", "set", &link(node), "down"])
    }

    /// Restores host `node`'s link after [`HostNetwork::cut`].
    pub fn heal(&self, node: usize) -> Result<()> {
        self.check(node)?;
        run("ip", &["link", "set", &link(node), "up"])
    }

    /// Splits `side` off the other hosts: they keep reaching each other, and nothing else.
    pub fn split(&self, side: &[usize]) -> Result<()> {
        for &node in side {
            self.check(node)?;
        }
        for &node in side {
            run("ip", &["link", "set", &link(node), "master", SPLIT_BRIDGE])?;
        }
        Ok(())
    }

    /// Ends every split and cut: all hosts on one bridge, every link up.
    pub fn join_all(&self) -> Result<()> {
        for node in 1..=self.nodes {
            run("ip", &["link", "set", &link(node), "master", BRIDGE])?;
            run("ip", &["link", "set", &link(node), "up"])?;
        }
        Ok(())
    }

    /// Adds `delay` and `loss_percent` to everything host `node` sends (`tc netem`); zero
    /// for both removes the impairment.
    pub fn impair(&self, node: usize, delay: Duration, loss_percent: f64) -> Result<()> {
        self.check(node)?;
        if !(0.0..=100.0).contains(&loss_percent) {
            bail!("loss {loss_percent}% is not a percentage");
        }
        let _ = run_in(node, "tc", &["qdisc", "del", "dev", "eth0", "root"]);
        if delay.is_zero() && loss_percent == 0.0 {
            return Ok(());
        }
        let delay = format!("{}us", delay.as_micros());
        let loss = format!("{loss_percent}%");
        run_in(
            node,
            "tc",
            &[
                "qdisc", "add", "dev", "eth0", "root", "netem", "delay", &delay, "loss", &loss,
            ],
        )
        .context("this kernel may lack the netem queueing discipline (sch_netem)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_have_their_own_names_and_addresses() {
        assert_eq!(namespace(3), "tri3");
        assert_eq!(address(3).to_string(), "10.213.0.3");
        assert_eq!(address_v6(3).to_string(), "fd00:213::3");
        assert_eq!(link(3), "triv3");
        assert!((1..=MAX_NODES).all(|n| address(n) != CLIENT_ADDRESS));
    }
}
