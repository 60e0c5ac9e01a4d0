//! `trireme`: manages a local test cluster of MariaDB servers that load a wsrep provider.

// A shell binary: it drives real processes, so it needs the wall clock and helper threads.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use cli::{format_status_table, Cluster, Signal, SstMethod, Timeouts, UpOptions};

/// Environment variable naming the default cluster directory.
const DIR_ENV: &str = "TRIREME_CLUSTER_DIR";
/// Cluster directory when neither --dir nor $TRIREME_CLUSTER_DIR is given.
const DEFAULT_DIR: &str = "trireme-cluster";

#[derive(Parser)]
#[command(
    name = "trireme",
    version,
    about = "Trireme: a wsrep replication provider for MariaDB"
)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Manage a local test cluster of MariaDB servers (all on 127.0.0.1).
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Args)]
struct DirArg {
    /// Cluster directory [default: $TRIREME_CLUSTER_DIR, else ./trireme-cluster].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArg {
    fn resolve(&self) -> PathBuf {
        self.dir
            .clone()
            .or_else(|| std::env::var_os(DIR_ENV).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
    }
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Create and start a cluster, or restart the stopped cluster in DIR.
    Up {
        /// Number of nodes, 1 to 9 [default: 3].
        #[arg(long)]
        nodes: Option<usize>,
        #[command(flatten)]
        dir: DirArg,
        /// wsrep provider library [default: libtrireme.so next to this binary].
        #[arg(long, value_name = "PATH")]
        provider: Option<PathBuf>,
        /// Node i uses SQL port P+i and group/IST/SST ports P+100+10i .. +2 [default: 13300].
        #[arg(long, value_name = "P")]
        base_port: Option<u16>,
        /// How joiners get their data [default: rsync].
        #[arg(long, value_enum)]
        sst_method: Option<SstArg>,
        /// More wsrep_provider_options for every node, e.g. "gcache.size=16M".
        #[arg(long, value_name = "OPTIONS")]
        provider_options: Option<String>,
        /// Settings for the [sst] group of every my.cnf, e.g. "parallel=4; rlimit=100M".
        #[arg(long, value_name = "OPTIONS")]
        sst_options: Option<String>,
        /// More [mysqld] settings for every my.cnf, e.g. "innodb_buffer_pool_size=1G".
        #[arg(long, value_name = "OPTIONS")]
        server_options: Option<String>,
        /// Seconds each node may take to become Synced (SST included).
        #[arg(long, default_value_t = 120, value_name = "SECONDS")]
        timeout: u64,
    },
    /// Show each node's pid and wsrep state.
    Status {
        #[command(flatten)]
        dir: DirArg,
    },
    /// Stop every node cleanly (the last one stopped is safe to bootstrap).
    Down {
        #[command(flatten)]
        dir: DirArg,
        /// Seconds to wait after SIGTERM before SIGKILL.
        #[arg(long, default_value_t = 120, value_name = "SECONDS")]
        timeout: u64,
    },
    /// Run SQL on one node through the mariadb client (as root, over the socket).
    Sql {
        /// Node number (1-based).
        node: usize,
        /// The statement(s) to run.
        statement: String,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Send a signal to one node's server.
    Kill {
        /// Node number (1-based).
        node: usize,
        /// KILL (crash), STOP (hang), CONT (resume) or TERM (clean stop, not waited for).
        #[arg(long, value_enum, ignore_case = true, default_value = "kill")]
        signal: SignalArg,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Start one stopped node; it rejoins the running ones.
    Start {
        /// Node number (1-based).
        node: usize,
        #[command(flatten)]
        dir: DirArg,
        /// Seconds the node may take to become Synced.
        #[arg(long, default_value_t = 120, value_name = "SECONDS")]
        timeout: u64,
    },
    /// Stop one node cleanly.
    Stop {
        /// Node number (1-based).
        node: usize,
        #[command(flatten)]
        dir: DirArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum SstArg {
    Rsync,
    Mariabackup,
    Trireme,
}

#[derive(Clone, Copy, ValueEnum)]
enum SignalArg {
    Kill,
    Stop,
    Cont,
    Term,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trireme: error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let Top::Cluster { command } = cli.command;
    match command {
        ClusterCommand::Up {
            nodes,
            dir,
            provider,
            base_port,
            sst_method,
            provider_options,
            sst_options,
            server_options,
            timeout,
        } => {
            let mut opts = UpOptions::new(dir.resolve());
            opts.nodes = nodes;
            opts.provider = provider;
            opts.base_port = base_port;
            opts.sst_method = sst_method.map(|s| match s {
                SstArg::Rsync => SstMethod::Rsync,
                SstArg::Mariabackup => SstMethod::Mariabackup,
                SstArg::Trireme => SstMethod::Trireme,
            });
            opts.provider_options = provider_options;
            opts.sst_options = sst_options;
            opts.server_options = server_options;
            opts.timeouts.node_start = Duration::from_secs(timeout);
            let cluster = Cluster::up(&opts)?;
            println!(
                "Cluster in {} is up. Connect with:",
                cluster.dir().display()
            );
            for node in 1..=cluster.nodes() {
                println!("  mariadb -S {} -uroot", cluster.socket(node).display());
            }
            println!();
            print!("{}", format_status_table(&cluster.status()));
        }
        ClusterCommand::Status { dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            print!("{}", format_status_table(&cluster.status()));
        }
        ClusterCommand::Down { dir, timeout } => {
            let mut cluster = Cluster::open(dir.resolve())?;
            cluster.set_timeouts(Timeouts {
                stop: Duration::from_secs(timeout),
                ..cluster.timeouts()
            });
            cluster.down()?;
        }
        ClusterCommand::Sql {
            node,
            statement,
            dir,
        } => {
            let cluster = Cluster::open(dir.resolve())?;
            print!("{}", cluster.sql_table(node, &statement)?);
        }
        ClusterCommand::Kill { node, signal, dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            let signal = match signal {
                SignalArg::Kill => Signal::Kill,
                SignalArg::Stop => Signal::Stop,
                SignalArg::Cont => Signal::Cont,
                SignalArg::Term => Signal::Term,
            };
            cluster
                .kill(node, signal)
                .with_context(|| format!("cannot send SIG{} to node{node}", signal.name()))?;
            println!("sent SIG{} to node{node}", signal.name());
        }
        ClusterCommand::Start { node, dir, timeout } => {
            let mut cluster = Cluster::open(dir.resolve())?;
            cluster.set_timeouts(Timeouts {
                node_start: Duration::from_secs(timeout),
                ..cluster.timeouts()
            });
            cluster.start_node(node)?;
            print!("{}", format_status_table(&cluster.status()));
        }
        ClusterCommand::Stop { node, dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            cluster.stop_node(node)?;
        }
    }
    Ok(())
}
