//! Cluster management for a local test cluster of real MariaDB servers: the library behind
//! the `trireme` command, also used by integration tests and benchmark harnesses.
//!
//! A cluster lives in one directory: `DIR/trireme-cluster.conf` records how it was created,
//! and node `i` has `DIR/nodeI/{my.cnf,data/,mysqld.sock,mysqld.pid,error.log}`. Every
//! server listens on 127.0.0.1 only, or, in a cluster made with `--hosts`, inside its own
//! network namespace on a bridge this tool creates ([`hosts`]); when `trireme` runs as root
//! the servers run as the unprivileged system user `trireme` (`mariadbd --user=trireme` drops
//! privileges).
//!
//! ```no_run
//! use cli::{Cluster, UpOptions};
//! let mut opts = UpOptions::new("/tmp/my-cluster");
//! opts.provider = Some("/usr/lib/galera/libgalera_smm.so".into());
//! let cluster = Cluster::up(&opts)?;
//! cluster.sql(1, "CREATE DATABASE IF NOT EXISTS t")?;
//! println!("{}", cli::format_status_table(&cluster.status()));
//! cluster.down()?;
//! # Ok::<(), anyhow::Error>(())
//! ```

// A shell crate: it drives real processes, so it needs the wall clock and helper threads.
#![allow(clippy::disallowed_methods)]

pub mod bank;
pub mod campaign;
pub(crate) mod cluster;
mod compare;
pub mod config;
pub mod crash_drill;
pub mod endpoint;
pub mod garbage;
pub mod hosts;
pub mod load;
pub mod net_load;
pub mod remote_status;
mod row_diff;
pub mod soak;
mod sys;

pub use cluster::{
    check_mariadb_installed, default_provider, format_status_table, sst_script_dir, Cluster,
    NodeStatus, Signal, Timeouts, UpOptions, INSTALL_DB, MARIADBD, MARIADB_CLIENT,
    PROVIDER_FILE_NAME, SST_SCRIPT,
};
pub use compare::{Comparison, RestOptions, TableComparison};
pub use config::{ClusterConfig, NodePorts, SstMethod};

/// The first base port at or above `start` (stepping by 1000, below 32768 so that no port
/// falls in Linux's ephemeral range) whose every port for an `nodes`-node cluster is free
/// on 127.0.0.1. For tests and harnesses that must not collide with other clusters.
pub fn find_free_base_port(nodes: usize, start: u16) -> Option<u16> {
    let nodes = nodes.clamp(1, config::MAX_NODES);
    let mut base = start;
    while base <= 32768 - 300 {
        let all_free = (1..=nodes).all(|node| {
            NodePorts::for_node(base, node)
                .labelled()
                .iter()
                .all(|(p, _)| sys_port_free(*p))
        });
        if all_free {
            return Some(base);
        }
        base = base.checked_add(1000)?;
    }
    None
}

fn sys_port_free(port: u16) -> bool {
    sys::port_free(port)
}
