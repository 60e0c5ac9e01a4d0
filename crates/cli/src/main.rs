//! `trireme`: manages a local test cluster of MariaDB servers that load a wsrep provider.

// A shell binary: it drives real processes, so it needs the wall clock and helper threads.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use cli::campaign::{self, CampaignOptions};
use cli::crash_drill::{self, DrillOptions};
use cli::load::LoadOptions;
use cli::soak::{Soak, SoakOptions, TransferKind};
use cli::{format_status_table, Cluster, RestOptions, Signal, SstMethod, Timeouts, UpOptions};

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
    /// Manage a local test cluster of MariaDB servers (on 127.0.0.1, or on hosts of their
    /// own in network namespaces with --hosts).
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Soak state transfers: on a new local 3-node cluster, bring node 3 back again and
    /// again by SST (trireme, rsync, mariabackup), IST and a rejoin after a freeze, under
    /// sysbench on node 1 and large transactions on node 2; after each, the nodes must be
    /// equal at rest. Stops at the first difference, keeping the cluster.
    Soak(SoakArgs),
    /// Fault campaign: bank transfers from clients on every host of a new --hosts cluster
    /// while a nemesis kills, freezes, cuts off (the leader too) and restarts nodes, one
    /// fault at a time; then checks that no acknowledged transfer was lost, none was
    /// invented, money is conserved, balances match the ledger and all nodes are equal.
    /// The same seed gives any provider the same faults. Exits 1 on a problem.
    Campaign(CampaignArgs),
    /// Full-crash drill: on a new local cluster, bank clients on every node, then every
    /// node SIGKILLed at once and all started again as an init system would (each with the
    /// position --wsrep-recover finds, none told to bootstrap), round after round; then
    /// checks the bank on every node. Exits 1 on a problem.
    CrashDrill(CrashDrillArgs),
    /// The cluster table of any cluster, read from nodes' metrics endpoints
    /// (metrics.listen_addr) or over SQL. A node read by its endpoint also lists the
    /// members its group knows. Exits 1 if a node named could not be read.
    Status(StatusArgs),
}

#[derive(Args)]
struct StatusArgs {
    /// A node's metrics endpoint, host:port (repeat for more nodes).
    #[arg(long = "metrics", value_name = "HOST:PORT")]
    metrics: Vec<String>,
    /// A node's SQL port, host:port (repeat for more nodes).
    #[arg(long = "sql", value_name = "HOST:PORT")]
    sql: Vec<String>,
    /// The account --sql reads status as.
    #[arg(long, default_value = "root")]
    user: String,
    /// Its password [default: $MYSQL_PWD, else none].
    #[arg(long, env = "MYSQL_PWD", default_value = "", hide_env_values = true)]
    password: String,
    /// For endpoints of nodes with socket.ssl on: a certificate signed by the cluster's CA
    /// (a node's will do), with --ssl-key and --ssl-ca.
    #[arg(long, value_name = "PEM", requires_all = ["ssl_key", "ssl_ca"])]
    ssl_cert: Option<PathBuf>,
    /// The key of --ssl-cert.
    #[arg(long, value_name = "PEM", requires = "ssl_cert")]
    ssl_key: Option<PathBuf>,
    /// The cluster's CA, which the nodes' certificates must chain to.
    #[arg(long, value_name = "PEM", requires = "ssl_cert")]
    ssl_ca: Option<PathBuf>,
}

#[derive(Args)]
struct CrashDrillArgs {
    /// Cluster directory to create [default: a new directory under /tmp].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// wsrep provider library [default: libtrireme.so next to this binary].
    #[arg(long, value_name = "PATH")]
    provider: Option<PathBuf>,
    /// Base port [default: 13300].
    #[arg(long, value_name = "P")]
    base_port: Option<u16>,
    /// Nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Full crashes.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Seconds of bank load before each crash.
    #[arg(long, default_value_t = 3)]
    load_seconds: u64,
    /// Bank clients per node.
    #[arg(long, default_value_t = 2)]
    clients_per_node: usize,
}

#[derive(Args)]
struct CampaignArgs {
    /// Cluster directory to create [default: a new directory under /tmp].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// wsrep provider library [default: libtrireme.so next to this binary].
    #[arg(long, value_name = "PATH")]
    provider: Option<PathBuf>,
    /// Seed of the fault schedule and of the clients' transfers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds of faults (180 for CI; an hour is a long campaign).
    #[arg(long, default_value_t = 180)]
    seconds: u64,
    /// Hosts.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Bank clients per host.
    #[arg(long, default_value_t = 2)]
    clients_per_host: usize,
}

#[derive(Args)]
struct SoakArgs {
    /// Cluster directory to create [default: a new directory under /tmp].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// wsrep provider library [default: libtrireme.so next to this binary].
    #[arg(long, value_name = "PATH")]
    provider: Option<PathBuf>,
    /// Base port [default: the first free range from 24000].
    #[arg(long, value_name = "P")]
    base_port: Option<u16>,
    /// sysbench tables.
    #[arg(long, default_value_t = 8)]
    tables: usize,
    /// Rows per sysbench table.
    #[arg(long, default_value_t = 250_000)]
    table_size: usize,
    /// sysbench threads on node 1 (unthrottled).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Rows of the table the large transactions rewrite, a tenth per transaction (0: none).
    #[arg(long, default_value_t = 100_000)]
    large_rows: usize,
    /// Rounds of each transfer.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Transfers, in the order each round runs them.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "trireme,rsync,mariabackup,ist,freeze"
    )]
    kinds: Vec<String>,
    /// Seconds one transfer may take.
    #[arg(long, default_value_t = 900, value_name = "SECONDS")]
    transfer_timeout: u64,
    /// More [mysqld] settings for every node, e.g. "innodb_buffer_pool_size=512M".
    #[arg(long, value_name = "OPTIONS")]
    server_options: Option<String>,
    /// Write one tab-separated line per round here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Keep the (stopped) cluster directory after a soak without failure, for its logs.
    #[arg(long)]
    keep: bool,
}

#[derive(Args)]
struct DirArg {
    /// Cluster directory [default: $TRIREME_CLUSTER_DIR, else ./trireme-cluster].
    #[arg(long, value_name = "DIR", global = true)]
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

/// What `trireme cluster up` takes.
#[derive(Args)]
struct UpArgs {
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
    /// Run every node on a host of its own: network namespace triN, address 10.213.0.N
    /// on bridge tribr0, a my.cnf with no listen or node address (needs root).
    #[arg(long)]
    hosts: bool,
    /// Start all joiners at the same moment once the first node is up.
    #[arg(long)]
    joiners_together: bool,
    /// Run a trireme-arbitrator beside the nodes (member N+1, on a host of its own with
    /// --hosts), as garbd beside two data nodes.
    #[arg(long)]
    arbitrator: bool,
    /// Every node serves Prometheus metrics at /metrics and a status page at / (Trireme's
    /// metrics.listen_addr, on port P+103+10i, or 9104 on its host with --hosts).
    #[arg(long)]
    metrics: bool,
    /// Seconds each node may take to become Synced (SST included).
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    timeout: u64,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Create and start a cluster, or restart the stopped cluster in DIR.
    Up(UpArgs),
    /// Faults on the network of a --hosts cluster.
    Net {
        #[command(subcommand)]
        fault: NetFault,
        #[command(flatten)]
        dir: DirArg,
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
    /// Compare the nodes' tables at rest: waits until every node is Synced at the same
    /// seqno, unchanged for --settle seconds, then compares CHECKSUM TABLE and names the
    /// first differing rows. Exits 1 if a table differs.
    Compare {
        #[command(flatten)]
        dir: DirArg,
        /// Nodes to compare, the first being the reference [default: every node].
        #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
        nodes: Option<Vec<usize>>,
        /// Tables as schema.table [default: every table outside the system schemas].
        #[arg(long, value_delimiter = ',', value_name = "SCHEMA.TABLE,...")]
        tables: Option<Vec<String>>,
        /// Seconds the positions must stay equal and unchanged.
        #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
        settle: f64,
        /// Seconds to wait for rest.
        #[arg(long, default_value_t = 300, value_name = "SECONDS")]
        timeout: u64,
    },
    /// Stop one node cleanly.
    Stop {
        /// Node number (1-based).
        node: usize,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Start, stop or signal the cluster's arbitrator (made with `up --arbitrator`).
    Arbitrator {
        #[command(subcommand)]
        action: ArbitratorAction,
        #[command(flatten)]
        dir: DirArg,
    },
}

#[derive(Subcommand)]
enum ArbitratorAction {
    /// Start it; it joins the running nodes.
    Start,
    /// Stop it cleanly: it leaves the group.
    Stop,
    /// Send it a signal.
    Kill {
        /// KILL (crash), STOP (hang), CONT (resume) or TERM (clean stop, not waited for).
        #[arg(long, value_enum, ignore_case = true, default_value = "kill")]
        signal: SignalArg,
    },
}

#[derive(Subcommand)]
enum NetFault {
    /// Take a host's link down: it reaches nobody, nobody reaches it.
    Cut {
        /// Host (node) number.
        node: usize,
    },
    /// Bring a cut host's link back.
    Heal {
        /// Host (node) number.
        node: usize,
    },
    /// Split these hosts off the others: they reach each other and nothing else.
    Split {
        /// Host (node) numbers.
        #[arg(value_delimiter = ',', required = true, value_name = "N,N,...")]
        nodes: Vec<usize>,
    },
    /// End every split and cut.
    Join,
    /// Delay and drop what a host sends (tc netem); 0 and 0 remove it.
    Impair {
        /// Host (node) number.
        node: usize,
        /// Added delay in milliseconds.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// Packets dropped, in percent.
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
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

impl SignalArg {
    fn signal(self) -> Signal {
        match self {
            SignalArg::Kill => Signal::Kill,
            SignalArg::Stop => Signal::Stop,
            SignalArg::Cont => Signal::Cont,
            SignalArg::Term => Signal::Term,
        }
    }
}

/// `trireme status`: reads the nodes named and prints the table.
fn remote_status(args: StatusArgs) -> Result<ExitCode> {
    use cli::remote_status::{format_remote_table, read, NodeAddress};
    if args.metrics.is_empty() && args.sql.is_empty() {
        bail!("name at least one node: --metrics HOST:PORT or --sql HOST:PORT");
    }
    let mut nodes: Vec<NodeAddress> = args.metrics.into_iter().map(NodeAddress::Metrics).collect();
    nodes.extend(args.sql.into_iter().map(|address| NodeAddress::Sql {
        address,
        user: args.user.clone(),
        password: args.password.clone(),
    }));
    let reader = match (args.ssl_cert, args.ssl_key) {
        (Some(cert), Some(key)) => {
            let files = tls::TlsFiles {
                key,
                cert,
                ca: args.ssl_ca,
                password_file: None,
                cipher: None,
                labels: tls::Labels::CLI,
            };
            let context =
                tls::TlsContext::load(files).context("--ssl-cert, --ssl-key, --ssl-ca")?;
            cli::endpoint::Reader::tls(&context)
        }
        _ => cli::endpoint::Reader::plain(),
    };
    let rows = read(&nodes, &reader);
    print!("{}", format_remote_table(&rows));
    let failed = rows.iter().any(|row| row.error.is_some());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("trireme: error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let command = match cli.command {
        Top::Cluster { command } => command,
        Top::Soak(args) => return soak(args),
        Top::Campaign(args) => return campaign(args),
        Top::CrashDrill(args) => return crash_drill(args),
        Top::Status(args) => return remote_status(args),
    };
    match command {
        ClusterCommand::Up(args) => cluster_up(args)?,
        ClusterCommand::Net { fault, dir } => net_fault(fault, dir)?,
        ClusterCommand::Status { dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            print_status(&cluster);
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
            let signal = signal.signal();
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
        ClusterCommand::Compare {
            dir,
            nodes,
            tables,
            settle,
            timeout,
        } => {
            let cluster = Cluster::open(dir.resolve())?;
            let nodes = nodes.unwrap_or_else(|| (1..=cluster.nodes()).collect());
            if !(0.0..=3600.0).contains(&settle) {
                bail!("--settle {settle} is not between 0 and 3600 seconds");
            }
            let rest = RestOptions {
                settle: Duration::from_secs_f64(settle),
                timeout: Duration::from_secs(timeout),
            };
            let comparison = cluster.compare_at_rest(&nodes, tables.as_deref(), rest)?;
            print!("{}", comparison.report());
            if !comparison.equal() {
                return Ok(ExitCode::FAILURE);
            }
        }
        ClusterCommand::Stop { node, dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            cluster.stop_node(node)?;
        }
        ClusterCommand::Arbitrator { action, dir } => {
            let cluster = Cluster::open(dir.resolve())?;
            match action {
                ArbitratorAction::Start => {
                    let pid = cluster.start_arbitrator()?;
                    println!("the arbitrator runs (pid {pid})");
                }
                ArbitratorAction::Stop => cluster.stop_arbitrator()?,
                ArbitratorAction::Kill { signal } => {
                    let signal = signal.signal();
                    cluster.kill_arbitrator(signal).with_context(|| {
                        format!("cannot send SIG{} to the arbitrator", signal.name())
                    })?;
                    println!("sent SIG{} to the arbitrator", signal.name());
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `trireme cluster up`: creates or restarts the cluster, then says how to connect.
fn cluster_up(args: UpArgs) -> Result<()> {
    let mut opts = UpOptions::new(args.dir.resolve());
    opts.hosts = args.hosts.then_some(true);
    opts.joiners_together = args.joiners_together;
    opts.arbitrator = args.arbitrator.then_some(true);
    opts.metrics = args.metrics.then_some(true);
    opts.nodes = args.nodes;
    opts.provider = args.provider;
    opts.base_port = args.base_port;
    opts.sst_method = args.sst_method.map(|s| match s {
        SstArg::Rsync => SstMethod::Rsync,
        SstArg::Mariabackup => SstMethod::Mariabackup,
        SstArg::Trireme => SstMethod::Trireme,
    });
    opts.provider_options = args.provider_options;
    opts.sst_options = args.sst_options;
    opts.server_options = args.server_options;
    opts.timeouts.node_start = Duration::from_secs(args.timeout);
    let cluster = Cluster::up(&opts)?;
    println!(
        "Cluster in {} is up. Connect with:",
        cluster.dir().display()
    );
    for node in 1..=cluster.nodes() {
        println!("  mariadb -S {} -uroot", cluster.socket(node).display());
    }
    println!();
    print_status(&cluster);
    Ok(())
}

/// The nodes' status table, and the arbitrator's line when the cluster has one.
fn print_status(cluster: &Cluster) {
    print!("{}", format_status_table(&cluster.status()));
    if cluster.config().arbitrator {
        match cluster.arbitrator_pid() {
            Some(pid) => println!("arbitrator: running, pid {pid}"),
            None => println!("arbitrator: not running"),
        }
    }
}

/// `trireme cluster net`: a fault on a --hosts cluster's network.
fn net_fault(fault: NetFault, dir: DirArg) -> Result<()> {
    let cluster = Cluster::open(dir.resolve())?;
    let network = cluster
        .network()
        .context("this cluster runs on loopback: network faults need one made with --hosts")?;
    match fault {
        NetFault::Cut { node } => network.cut(node)?,
        NetFault::Heal { node } => network.heal(node)?,
        NetFault::Split { nodes } => network.split(&nodes)?,
        NetFault::Join => network.join_all()?,
        NetFault::Impair {
            node,
            delay_ms,
            loss,
        } => network.impair(node, Duration::from_millis(delay_ms), loss)?,
    }
    Ok(())
}

/// Refuses a bank run of fewer than 2 or more than `MAX_NODES` nodes, or no clients;
/// `clients_flag` names the clients option in the message.
fn check_bank_run(nodes: usize, clients: usize, clients_flag: &str) -> Result<()> {
    if !(2..=cli::config::MAX_NODES).contains(&nodes) || clients == 0 {
        bail!(
            "--nodes must be 2 to {} and {clients_flag} at least 1",
            cli::config::MAX_NODES
        );
    }
    Ok(())
}

/// The directory of a run: `dir`, else a new one under the temporary directory.
fn run_dir(dir: Option<PathBuf>, what: &str) -> PathBuf {
    dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("trireme-{what}-{}", std::process::id()))
    })
}

fn campaign(args: CampaignArgs) -> Result<ExitCode> {
    check_bank_run(args.nodes, args.clients_per_host, "--clients-per-host")?;
    let dir = run_dir(args.dir, "campaign");
    let provider = match args.provider {
        Some(path) => path,
        None => cli::default_provider()?,
    };
    let opts = CampaignOptions {
        dir: dir.clone(),
        provider,
        nodes: args.nodes,
        seed: args.seed,
        duration: Duration::from_secs(args.seconds),
        clients_per_host: args.clients_per_host,
    };
    let outcome = campaign::run(&opts, &mut |line| eprintln!("trireme campaign: {line}"));
    finish_run(
        "campaign",
        &dir,
        outcome.map(|report| (report.summary(), report.problems.is_empty())),
    )
}

/// Stops the cluster a run left in `dir` and prints the run's summary; removes the
/// directory when the run found no problem, else keeps it and says where.
fn finish_run(what: &str, dir: &Path, outcome: Result<(String, bool)>) -> Result<ExitCode> {
    let stopped = Cluster::open(dir).and_then(|cluster| cluster.down());
    let (summary, clean) = outcome?;
    print!("{summary}");
    stopped?;
    if clean {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "trireme {what}: the stopped cluster is kept in {}",
            dir.display()
        );
        Ok(ExitCode::FAILURE)
    }
}

fn crash_drill(args: CrashDrillArgs) -> Result<ExitCode> {
    check_bank_run(args.nodes, args.clients_per_node, "--clients-per-node")?;
    let dir = run_dir(args.dir, "crash-drill");
    if dir.exists() {
        bail!(
            "{} exists: a drill starts from a new cluster",
            dir.display()
        );
    }
    let mut up = UpOptions::new(&dir);
    up.nodes = Some(args.nodes);
    up.provider = args.provider;
    up.base_port = args.base_port;
    let opts = DrillOptions {
        rounds: args.rounds,
        load: Duration::from_secs(args.load_seconds),
        clients_per_node: args.clients_per_node,
        seed: 1,
    };
    let outcome = crash_drill::run(&up, &opts, &mut |line| {
        eprintln!("trireme crash-drill: {line}")
    });
    finish_run(
        "crash-drill",
        &dir,
        outcome.map(|report| (report.summary(), report.problems.is_empty())),
    )
}

fn soak(args: SoakArgs) -> Result<ExitCode> {
    let kinds = args
        .kinds
        .iter()
        .map(|k| k.parse::<TransferKind>())
        .collect::<Result<Vec<_>>>()?;
    if args.rounds == 0 || args.tables == 0 || args.table_size == 0 || args.threads == 0 {
        bail!("--rounds, --tables, --table-size and --threads must be at least 1");
    }
    let dir = args.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("trireme-soak-{}", std::process::id()))
    });
    let base_port = match args.base_port {
        Some(port) => port,
        None => cli::find_free_base_port(3, 24000).context("no free port range below 32768")?,
    };
    let opts = SoakOptions {
        dir: dir.clone(),
        provider: args.provider,
        base_port,
        server_options: args.server_options,
        load: LoadOptions {
            tables: args.tables,
            table_size: args.table_size,
            threads: args.threads,
            large_rows: args.large_rows,
            sysbench_node: 1,
            large_node: 2,
        },
        rounds: args.rounds,
        kinds,
        transfer_timeout: Duration::from_secs(args.transfer_timeout),
        warmup: Duration::from_secs(3),
        rest: RestOptions::default(),
    };
    eprintln!(
        "trireme soak: {} round(s) of {}; {} x {} rows, {} sysbench threads on node1, \
         large transactions of {} rows on node2; cluster in {}",
        opts.rounds,
        args.kinds.join(", "),
        opts.load.tables,
        opts.load.table_size,
        opts.load.threads,
        opts.load.large_rows / 10,
        dir.display()
    );
    let mut soak = Soak::create(opts)?;
    let outcome = soak.run(&mut |line| eprintln!("trireme soak: {line}"));
    if let Some(path) = &args.report {
        std::fs::write(path, soak.tsv())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", soak.summary());
    match outcome {
        Ok(()) if args.keep => {
            soak.cluster().down()?;
            eprintln!(
                "trireme soak: the stopped cluster is kept in {}",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(()) => {
            soak.remove()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!(
                "trireme soak: FAILED: {error:#}\nthe cluster is left in {} for inspection; \
                 stop it with `trireme cluster down --dir {}`",
                dir.display(),
                dir.display()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}
