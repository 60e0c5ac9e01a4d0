//! [`Cluster`]: create, restart, inspect and stop a local cluster of real MariaDB servers.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{lchown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use base::grastate::{self, SavedState};
use base::{Gtid, Uuid};

use crate::config::{
    ClusterConfig, SstMethod, CONFIG_FILE, DEFAULT_BASE_PORT, DEFAULT_NODES, SERVER_USER,
};
use crate::hosts::{self, HostNetwork};
use crate::sys::{self, wait_until};

/// The server binary (Debian's MariaDB 10.11 package).
pub const MARIADBD: &str = "/usr/sbin/mariadbd";
/// The client used for every SQL statement.
pub const MARIADB_CLIENT: &str = "mariadb";
/// Creates the system tables of the first node.
pub const INSTALL_DB: &str = "mariadb-install-db";
/// The file name the default provider has next to the `trireme` binary.
pub const PROVIDER_FILE_NAME: &str = "libtrireme.so";

/// Lines of a node's error log shown when it fails.
const TAIL_LINES: usize = 40;
/// Pause between two status polls while waiting for a node.
const WAIT_POLL: Duration = Duration::from_millis(500);
/// The status variables the status table and the startup wait read.
const STATUS_VARS: [&str; 12] = [
    "wsrep_local_state_comment",
    "wsrep_ready",
    "wsrep_last_committed",
    "wsrep_local_recv_queue",
    "wsrep_flow_control_paused",
    "wsrep_cluster_size",
    "wsrep_cluster_status",
    "wsrep_cluster_conf_id",
    "wsrep_connected",
    "wsrep_streaming_transactions",
    "wsrep_streaming_fragments",
    "wsrep_raft_leader",
];

/// Upper bounds on every wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From starting a node until it is Synced (includes its SST).
    pub node_start: Duration,
    /// From SIGTERM until a node must have exited; then it gets SIGKILL.
    pub stop: Duration,
    /// One status query.
    pub query: Duration,
    /// One statement of [`Cluster::sql`].
    pub sql: Duration,
    /// `mariadb-install-db` and `mariadbd --wsrep-recover`.
    pub tool: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            node_start: Duration::from_secs(120),
            stop: Duration::from_secs(120),
            query: Duration::from_secs(10),
            sql: Duration::from_secs(600),
            tool: Duration::from_secs(300),
        }
    }
}

/// What `trireme cluster up` was asked for. `None` fields take the default for a new
/// cluster and the recorded value for an existing one (an explicit value that differs from
/// the recorded one is an error).
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The cluster directory; created if missing.
    pub dir: PathBuf,
    /// Number of nodes (default 3).
    pub nodes: Option<usize>,
    /// The wsrep provider library (default: `libtrireme.so` next to the running binary).
    pub provider: Option<PathBuf>,
    /// First port of the layout (default 13300), see [`crate::NodePorts::for_node`].
    pub base_port: Option<u16>,
    /// `wsrep_sst_method` (default rsync).
    pub sst_method: Option<SstMethod>,
    /// More `wsrep_provider_options` for every node (`key=value; ...`).
    pub provider_options: Option<String>,
    /// `[sst]` settings for every node (`key=value; ...`).
    pub sst_options: Option<String>,
    /// More `[mysqld]` settings for every node (`key=value; ...`).
    pub server_options: Option<String>,
    /// Every node on a host of its own (default: all on loopback), see [`crate::hosts`].
    pub hosts: Option<bool>,
    /// Start every joiner at the same moment once the first node is up, as an orchestrator
    /// starting its pods in parallel does (default: one after another).
    pub joiners_together: bool,
    /// Bounds on the waits.
    pub timeouts: Timeouts,
}

impl UpOptions {
    /// Options with every default, for the cluster in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> UpOptions {
        UpOptions {
            dir: dir.into(),
            nodes: None,
            provider: None,
            base_port: None,
            sst_method: None,
            provider_options: None,
            sst_options: None,
            server_options: None,
            hosts: None,
            joiners_together: false,
            timeouts: Timeouts::default(),
        }
    }
}

/// Signals `trireme cluster kill` may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL: a crash.
    Kill,
    /// SIGSTOP: a hang (the node stays in the group's view until it is suspected).
    Stop,
    /// SIGCONT: resume after [`Signal::Stop`].
    Cont,
    /// SIGTERM: a clean shutdown, without waiting for it.
    Term,
}

impl Signal {
    /// The name `kill -s` takes.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Kill => "KILL",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
            Signal::Term => "TERM",
        }
    }
}

/// One node's row in `trireme cluster status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// 1-based node number.
    pub node: usize,
    /// The server's pid, when it runs.
    pub pid: Option<u32>,
    /// Whether the process is stopped by SIGSTOP (it is alive but answers nothing).
    pub suspended: bool,
    /// The wsrep status variables read, by name (empty when the node did not answer).
    pub vars: BTreeMap<String, String>,
    /// Why the variables could not be read, for a running node.
    pub error: Option<String>,
    /// A trireme SST's progress line (bar, bytes, rate, ETA), while one runs.
    pub sst_progress: Option<String>,
}

impl NodeStatus {
    /// Whether the server process runs.
    pub fn alive(&self) -> bool {
        self.pid.is_some()
    }

    /// A status variable, if it was read.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `wsrep_local_state_comment` = Synced and `wsrep_ready` = ON.
    pub fn is_synced(&self) -> bool {
        self.var("wsrep_local_state_comment") == Some("Synced")
            && self.var("wsrep_ready") == Some("ON")
    }

    /// `wsrep_cluster_size`, if read.
    pub fn cluster_size(&self) -> Option<usize> {
        self.var("wsrep_cluster_size")?.parse().ok()
    }

    /// `wsrep_cluster_conf_id` (the number of the node's current view), if read.
    pub fn conf_id(&self) -> Option<i64> {
        self.var("wsrep_cluster_conf_id")?.parse().ok()
    }

    /// Whether the node says it is the Raft leader (`wsrep_raft_leader`, Trireme only).
    pub fn is_raft_leader(&self) -> bool {
        self.var("wsrep_raft_leader") == Some("1")
    }

    /// `wsrep_last_committed`, if read.
    pub fn last_committed(&self) -> Option<i64> {
        self.var("wsrep_last_committed")?.parse().ok()
    }

    /// A short description of the state for progress messages.
    fn summary(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        format!(
            "state {}, ready {}, cluster size {}, cluster status {}",
            self.var("wsrep_local_state_comment").unwrap_or("?"),
            self.var("wsrep_ready").unwrap_or("?"),
            self.var("wsrep_cluster_size").unwrap_or("?"),
            self.var("wsrep_cluster_status").unwrap_or("?"),
        )
    }
}

/// Renders `trireme cluster status` as an aligned text table.
pub fn format_status_table(rows: &[NodeStatus]) -> String {
    let header = [
        "node",
        "pid",
        "alive",
        "state",
        "last_committed",
        "recv_queue",
        "fc_paused",
        "cluster_size",
        "cluster_status",
        "streaming",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let var = |name: &str| row.var(name).unwrap_or("-").to_string();
        let (alive, state) = match (row.pid, row.suspended, &row.error) {
            (None, _, _) => ("no", "down".to_string()),
            (Some(_), true, _) => ("stopped", "(SIGSTOP)".to_string()),
            (Some(_), false, Some(_)) => ("yes", "unreachable".to_string()),
            (Some(_), false, None) => ("yes", var("wsrep_local_state_comment")),
        };
        table.push(vec![
            format!("node{}", row.node),
            row.pid.map_or("-".to_string(), |p| p.to_string()),
            alive.to_string(),
            state,
            var("wsrep_last_committed"),
            var("wsrep_local_recv_queue"),
            var("wsrep_flow_control_paused"),
            var("wsrep_cluster_size"),
            var("wsrep_cluster_status"),
            streaming_cell(row),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for row in rows {
        if let Some(e) = &row.error {
            out.push_str(&format!("node{}: {e}\n", row.node));
        }
        if let Some(progress) = &row.sst_progress {
            out.push_str(&format!("node{}: {progress}\n", row.node));
        }
    }
    out
}

/// Open streaming-replication transactions and their certified fragments as
/// `"<transactions> trx/<fragments> frags"`; `-` where the provider does not report them
/// (Galera).
fn streaming_cell(row: &NodeStatus) -> String {
    match (
        row.var("wsrep_streaming_transactions"),
        row.var("wsrep_streaming_fragments"),
    ) {
        (Some(trx), Some(fragments)) => format!("{trx} trx/{fragments} frags"),
        _ => "-".to_string(),
    }
}

/// The path of the provider to use when none is given: `libtrireme.so` next to the running
/// binary (for a test binary in `target/<profile>/deps`, also one directory up).
pub fn default_provider() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running binary's path")?;
    let mut looked = Vec::new();
    if let Some(dir) = exe.parent() {
        looked.push(dir.join(PROVIDER_FILE_NAME));
        if dir.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = dir.parent() {
                looked.push(up.join(PROVIDER_FILE_NAME));
            }
        }
    }
    if let Some(found) = looked.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let list: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "no --provider given and the Trireme provider was not found at {}: build it in the same \
         target directory, or pass --provider PATH (for example \
         --provider /usr/lib/galera/libgalera_smm.so)",
        list.join(" or ")
    )
}

/// The name of the trireme SST method's program.
pub const SST_SCRIPT: &str = "wsrep_sst_trireme";

/// The directory holding `wsrep_sst_trireme`: next to the running binary (or one level up
/// from a test binary in `deps/`), else anywhere on PATH.
pub fn sst_script_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running binary's path")?;
    let mut looked = Vec::new();
    if let Some(dir) = exe.parent() {
        looked.push(dir.to_path_buf());
        if dir.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = dir.parent() {
                looked.push(up.to_path_buf());
            }
        }
    }
    looked.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    looked
        .into_iter()
        .find(|dir| dir.join(SST_SCRIPT).is_file())
        .ok_or_else(|| {
            anyhow!(
                "--sst-method trireme needs {SST_SCRIPT} next to this binary or on PATH: build it \
                 with `cargo build --release -p sst`"
            )
        })
}

/// Makes `path` absolute without requiring it to exist (and resolves it when it does).
fn absolute(path: &Path) -> Result<PathBuf> {
    if path.exists() {
        return fs::canonicalize(path)
            .with_context(|| format!("cannot resolve {}", path.display()));
    }
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Makes `path` absolute without resolving symbolic links (a provider path is kept as the
/// user wrote it).
fn absolute_path(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Finds `program` on PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Fails unless the MariaDB programs this tool runs are installed.
pub fn check_mariadb_installed() -> Result<()> {
    if !Path::new(MARIADBD).is_file() {
        bail!("{MARIADBD} is missing: install MariaDB 10.11 (run scripts/setup.sh)");
    }
    for program in [MARIADB_CLIENT, INSTALL_DB] {
        if on_path(program).is_none() {
            bail!("{program} is not on PATH: install MariaDB 10.11 (run scripts/setup.sh)");
        }
    }
    Ok(())
}

/// A local cluster of MariaDB servers described by a cluster directory.
///
/// Every method works from the files in that directory (config, pid files, sockets), so a
/// `Cluster` opened by another process sees the same servers.
#[derive(Debug, Clone)]
pub struct Cluster {
    config: ClusterConfig,
    timeouts: Timeouts,
}

impl Cluster {
    /// Opens the existing cluster in `dir` (created earlier by [`Cluster::up`]).
    pub fn open(dir: impl AsRef<Path>) -> Result<Cluster> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            bail!(
                "no cluster directory {}: create the cluster with `trireme cluster up`",
                dir.display()
            );
        }
        let config = ClusterConfig::load(&absolute(dir)?)?;
        Ok(Cluster {
            config,
            timeouts: Timeouts::default(),
        })
    }

    /// Starts the cluster in `opts.dir`: creates it if the directory is missing or empty,
    /// restarts it if it exists and nothing runs, and does nothing if it already runs.
    ///
    /// On failure the directory and whatever already runs are left for inspection; stop
    /// them with `Cluster::open(dir)?.down()`.
    pub fn up(opts: &UpOptions) -> Result<Cluster> {
        check_mariadb_installed()?;
        let dir = absolute(&opts.dir)?;
        if dir.join(CONFIG_FILE).is_file() {
            return Cluster::restart(dir, opts);
        }
        if dir.exists() {
            let mut entries =
                fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
            if entries.next().is_some() {
                bail!(
                    "{} exists, is not empty and holds no {CONFIG_FILE}: it is not a trireme \
                     cluster; choose another --dir or remove it",
                    dir.display()
                );
            }
        }
        Cluster::create(dir, opts)
    }

    /// The cluster's recorded configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The cluster directory.
    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.config.nodes
    }

    /// The Unix socket of `node`.
    pub fn socket(&self, node: usize) -> PathBuf {
        self.config.socket(node)
    }

    /// The hosts' network of a `--hosts` cluster (`None` on loopback).
    pub fn network(&self) -> Option<HostNetwork> {
        self.config
            .hosts
            .then(|| HostNetwork::new(self.config.nodes))
    }

    /// The bounds on waits used by this handle.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Replaces the bounds on waits used by this handle.
    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// The pid of `node`'s server if it runs (read from its pid file and checked in /proc).
    pub fn pid(&self, node: usize) -> Option<u32> {
        let text = fs::read_to_string(self.config.pid_file(node)).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let marker = self.config.cnf_path(node).display().to_string();
        sys::is_our_process(pid, &marker).then_some(pid)
    }

    /// The status of every node.
    pub fn status(&self) -> Vec<NodeStatus> {
        (1..=self.config.nodes)
            .map(|n| self.node_status(n))
            .collect()
    }

    /// The node's trireme SST progress line, while a transfer runs or for a minute after
    /// it ended.
    pub fn sst_progress(&self, node: usize) -> Option<String> {
        let progress = sst::progress::Progress::read(&sst::progress::progress_path(
            &self.config.datadir(node),
        ))?;
        let running = !matches!(progress.phase.as_str(), "done" | "failed");
        (running && progress.age_seconds() < 600 || progress.age_seconds() < 60)
            .then(|| progress.render(30))
    }

    /// The status of one node.
    pub fn node_status(&self, node: usize) -> NodeStatus {
        let pid = self.pid(node);
        let suspended = pid.is_some_and(|p| sys::proc_state(p) == Some('T'));
        let mut status = NodeStatus {
            node,
            pid,
            suspended,
            vars: BTreeMap::new(),
            error: None,
            sst_progress: self.sst_progress(node),
        };
        if pid.is_none() || suspended {
            return status;
        }
        let names: Vec<String> = STATUS_VARS.iter().map(|v| format!("'{v}'")).collect();
        let stmt = format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ({})",
            names.join(",")
        );
        match self.run_sql(node, &stmt, false, self.timeouts.query) {
            Ok(out) => {
                for line in out.lines() {
                    if let Some((name, value)) = line.split_once('\t') {
                        status.vars.insert(name.to_string(), value.to_string());
                    }
                }
            }
            Err(e) => status.error = Some(format!("{e:#}").lines().next().unwrap_or("").into()),
        }
        status
    }

    /// Runs `statement` (one or more, separated by `;`) on `node` and returns the client's
    /// batch output: tab-separated values, no column names.
    pub fn sql(&self, node: usize, statement: &str) -> Result<String> {
        self.run_sql(node, statement, false, self.timeouts.sql)
    }

    /// Like [`Cluster::sql`] but as the client's boxed table with column names.
    pub fn sql_table(&self, node: usize, statement: &str) -> Result<String> {
        self.run_sql(node, statement, true, self.timeouts.sql)
    }

    /// Stops every running node cleanly, the highest-numbered first, so that node 1 stops
    /// last and is the one Galera marks safe to bootstrap.
    pub fn down(&self) -> Result<()> {
        let running: Vec<(usize, u32)> = (1..=self.config.nodes)
            .rev()
            .filter_map(|n| self.pid(n).map(|p| (n, p)))
            .collect();
        if running.is_empty() {
            eprintln!(
                "trireme: no node of the cluster in {} is running",
                self.dir().display()
            );
            if let Some(network) = self.network() {
                network.remove()?;
            }
            return Ok(());
        }
        let mut failures = Vec::new();
        for (node, pid) in running {
            if let Err(e) = self.stop_pid(node, pid) {
                failures.push(format!("{e:#}"));
            }
        }
        if !failures.is_empty() {
            bail!("some nodes did not stop cleanly:\n{}", failures.join("\n"));
        }
        if let Some(network) = self.network() {
            network.remove()?;
        }
        if let Some(node) = (1..=self.config.nodes).find(|&n| {
            self.grastate(n)
                .ok()
                .flatten()
                .is_some_and(|g| g.safe_to_bootstrap)
        }) {
            eprintln!("trireme: cluster stopped; node{node} is marked safe to bootstrap");
        } else {
            eprintln!("trireme: cluster stopped");
        }
        Ok(())
    }

    /// Stops one node cleanly (SIGTERM, then SIGKILL with a warning after the stop timeout).
    pub fn stop_node(&self, node: usize) -> Result<()> {
        self.check_node(node)?;
        match self.pid(node) {
            Some(pid) => self.stop_pid(node, pid),
            None => {
                eprintln!("trireme: node{node} is not running");
                Ok(())
            }
        }
    }

    /// Sends `signal` to `node`'s server. After [`Signal::Kill`] it waits (bounded) until
    /// the process is gone.
    pub fn kill(&self, node: usize, signal: Signal) -> Result<()> {
        self.check_node(node)?;
        let pid = self
            .pid(node)
            .ok_or_else(|| anyhow!("node{node} is not running"))?;
        sys::send_signal(pid, signal.name())?;
        if signal == Signal::Kill {
            let marker = self.config.cnf_path(node).display().to_string();
            if !wait_until(Duration::from_secs(30), || {
                !sys::is_our_process(pid, &marker)
            }) {
                bail!("node{node} (pid {pid}) is still there 30 s after SIGKILL");
            }
        }
        Ok(())
    }

    /// Starts one stopped node, which joins the running nodes (IST or SST), and waits until
    /// it is Synced.
    pub fn start_node(&self, node: usize) -> Result<()> {
        self.check_node(node)?;
        if let Some(pid) = self.pid(node) {
            bail!("node{node} already runs (pid {pid})");
        }
        if !(1..=self.config.nodes).any(|n| n != node && self.pid(n).is_some()) {
            bail!(
                "no other node of the cluster in {} runs, so node{node} has nobody to join: \
                 start the whole cluster with `trireme cluster up`",
                self.dir().display()
            );
        }
        // After a crash the saved state has no position (seqno -1): recover it from the
        // storage engine and hand it to the server, as Galera's systemd unit does, so that
        // the node can rejoin by IST instead of a full SST.
        let crashed = self
            .grastate(node)
            .ok()
            .flatten()
            .is_some_and(|g| !g.has_position() && g.position.cluster != Uuid::NIL);
        let start_position = if crashed {
            match self.wsrep_recover(node) {
                Ok(position) if position.seqno.is_defined() => Some(position.to_string()),
                Ok(_) => None,
                Err(e) => {
                    eprintln!("trireme: warning: node{node}: {e:#}; it will join by SST");
                    None
                }
            }
        } else {
            None
        };
        self.start_process_at(node, false, start_position.as_deref())?;
        self.wait_synced(node, None)
    }

    /// The last lines of `node`'s error log.
    pub fn error_log_tail(&self, node: usize, lines: usize) -> String {
        sys::tail(&self.config.error_log(node), lines)
    }

    /// Parses `node`'s `grastate.dat`; `None` if the file does not exist.
    pub fn grastate(&self, node: usize) -> Result<Option<SavedState>> {
        let path = self.config.grastate_path(node);
        match fs::read_to_string(&path) {
            Ok(text) => SavedState::parse(&text)
                .map(Some)
                .with_context(|| format!("cannot parse {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    // ---- creation and restart ----------------------------------------------------------

    fn create(dir: PathBuf, opts: &UpOptions) -> Result<Cluster> {
        let provider = match &opts.provider {
            Some(p) => absolute_path(p)?,
            None => default_provider()?,
        };
        if !provider.is_file() {
            bail!(
                "provider library {} does not exist or is not a file",
                provider.display()
            );
        }
        let root = sys::running_as_root();
        let config = ClusterConfig {
            dir,
            nodes: opts.nodes.unwrap_or(DEFAULT_NODES),
            base_port: opts.base_port.unwrap_or(DEFAULT_BASE_PORT),
            provider,
            sst_method: opts.sst_method.unwrap_or_default(),
            user: root.then(|| SERVER_USER.to_string()),
            provider_options: opts.provider_options.clone().unwrap_or_default(),
            sst_options: opts.sst_options.clone().unwrap_or_default(),
            server_options: opts.server_options.clone().unwrap_or_default(),
            hosts: opts.hosts.unwrap_or(false),
        };
        if config.sst_method == SstMethod::Trireme {
            sst_script_dir()?;
        }
        config.validate()?;
        check_all_ports(&config)?;
        let ids = match &config.user {
            Some(user) => Some(sys::ensure_system_user(user)?),
            None => None,
        };
        check_server_access(&config)?;
        eprintln!(
            "trireme: creating a {}-node cluster in {} (provider {}, SST {})",
            config.nodes,
            config.dir.display(),
            config.provider.display(),
            config.sst_method
        );
        create_dir_mode(&config.dir, 0o755)?;
        for node in 1..=config.nodes {
            create_dir_mode(&config.node_dir(node), 0o755)?;
            create_dir_mode(&config.datadir(node), 0o750)?;
            let cnf = config.cnf_path(node);
            fs::write(&cnf, config.render_my_cnf(node))
                .with_context(|| format!("cannot write {}", cnf.display()))?;
            fs::write(config.error_log(node), "")?;
            if let Some((uid, gid)) = ids {
                sys::chown_tree(&config.node_dir(node), uid, gid)?;
            }
        }
        config.save()?;
        let cluster = Cluster {
            config,
            timeouts: opts.timeouts,
        };
        if let Some(network) = cluster.network() {
            network.create()?;
        }
        cluster.install_db(1)?;
        cluster.start_all(1, opts.joiners_together)?;
        Ok(cluster)
    }

    fn restart(dir: PathBuf, opts: &UpOptions) -> Result<Cluster> {
        let config = ClusterConfig::load(&dir)?;
        let provider = opts.provider.as_deref().map(absolute_path).transpose()?;
        let conflicts = [
            (
                "--nodes",
                opts.nodes.map(|v| v.to_string()),
                config.nodes.to_string(),
            ),
            (
                "--base-port",
                opts.base_port.map(|v| v.to_string()),
                config.base_port.to_string(),
            ),
            (
                "--provider",
                provider.map(|p| p.display().to_string()),
                config.provider.display().to_string(),
            ),
            (
                "--sst-method",
                opts.sst_method.map(|v| v.to_string()),
                config.sst_method.to_string(),
            ),
            (
                "--provider-options",
                opts.provider_options.clone(),
                config.provider_options.clone(),
            ),
            (
                "--sst-options",
                opts.sst_options.clone(),
                config.sst_options.clone(),
            ),
            (
                "--server-options",
                opts.server_options.clone(),
                config.server_options.clone(),
            ),
            (
                "--hosts",
                opts.hosts.map(|v| v.to_string()),
                config.hosts.to_string(),
            ),
        ];
        for (flag, given, recorded) in conflicts {
            if let Some(given) = given {
                if given != recorded {
                    bail!(
                        "the cluster in {} was created with {flag} {recorded}, not {given}: \
                         drop the option, or use another --dir for a new cluster",
                        dir.display()
                    );
                }
            }
        }
        let cluster = Cluster {
            config,
            timeouts: opts.timeouts,
        };
        let n = cluster.config.nodes;
        let running: Vec<usize> = (1..=n)
            .filter(|&node| cluster.pid(node).is_some())
            .collect();
        if running.len() == n {
            eprintln!(
                "trireme: the cluster in {} is already running ({n} nodes); nothing to do",
                dir.display()
            );
            return Ok(cluster);
        }
        if !running.is_empty() {
            let names: Vec<String> = running.iter().map(|n| format!("node{n}")).collect();
            bail!(
                "the cluster in {} is partly running ({} of {n} nodes: {}): start the others \
                 with `trireme cluster start NODE`, or stop it with `trireme cluster down` and \
                 run `trireme cluster up` again",
                dir.display(),
                running.len(),
                names.join(", ")
            );
        }
        if !cluster.config.provider.is_file() {
            bail!(
                "the cluster's provider {} does not exist any more: rebuild or reinstall it",
                cluster.config.provider.display()
            );
        }
        check_all_ports(&cluster.config)?;
        if let Some(network) = cluster.network() {
            network.create()?;
        }
        if let Some(user) = &cluster.config.user {
            if sys::lookup_user(user)?.is_none() {
                bail!(
                    "the server user {user:?} no longer exists: recreate it or remove the cluster"
                );
            }
        }
        let bootstrap = cluster.choose_bootstrap()?;
        eprintln!(
            "trireme: restarting the cluster in {} from node{bootstrap}",
            dir.display()
        );
        cluster.start_all(bootstrap, opts.joiners_together)?;
        Ok(cluster)
    }

    /// Picks the node to bootstrap a stopped cluster from (see [`base::grastate`]), marking
    /// it safe to bootstrap when nobody is.
    fn choose_bootstrap(&self) -> Result<usize> {
        let n = self.config.nodes;
        let mut states = Vec::new();
        for node in 1..=n {
            match self.grastate(node) {
                Ok(Some(g)) => states.push((node, g)),
                Ok(None) => {}
                Err(e) => eprintln!("trireme: warning: node{node}: {e:#}"),
            }
        }
        if states.is_empty() {
            // A provider without grastate.dat (not Galera): node 1 holds the initial data.
            eprintln!("trireme: no grastate.dat in any datadir: node1 bootstraps");
            return Ok(1);
        }
        let safe = states
            .iter()
            .filter(|(_, g)| g.safe_to_bootstrap)
            .max_by_key(|(n, g)| (g.position.seqno, std::cmp::Reverse(*n)));
        if let Some((node, g)) = safe {
            eprintln!(
                "trireme: node{node} is marked safe_to_bootstrap (seqno {})",
                g.position.seqno.0
            );
            return Ok(*node);
        }
        // An unclean stop: find each node's position, from grastate.dat or by recovery.
        let mut positions = Vec::new();
        for (node, g) in &states {
            if g.has_position() {
                positions.push((*node, g.position.seqno.0));
                continue;
            }
            match self.wsrep_recover(*node) {
                Ok(position) => positions.push((*node, position.seqno.0)),
                Err(e) => eprintln!("trireme: warning: node{node}: {e:#}"),
            }
        }
        let Some(&(node, seqno)) = positions
            .iter()
            .filter(|(_, s)| *s >= 0)
            .max_by_key(|(n, s)| (*s, std::cmp::Reverse(*n)))
        else {
            bail!(
                "cannot choose a node to bootstrap: no node has a known position; inspect \
                 {}/node*/data/grastate.dat and the error logs",
                self.dir().display()
            );
        };
        let path = self.config.grastate_path(node);
        let text = fs::read_to_string(&path)?;
        fs::write(&path, grastate::with_safe_to_bootstrap(&text))
            .with_context(|| format!("cannot update {}", path.display()))?;
        eprintln!(
            "trireme: no node was marked safe_to_bootstrap (unclean stop); node{node} has the \
             highest seqno ({seqno}): set safe_to_bootstrap: 1 in {}",
            path.display()
        );
        Ok(node)
    }

    /// Runs `mariadbd --wsrep-recover` on a stopped node and returns the recovered position
    /// (cluster uuid, seqno).
    fn wsrep_recover(&self, node: usize) -> Result<Gtid> {
        eprintln!("trireme: node{node} has no saved position: running mariadbd --wsrep-recover");
        let log = self.config.node_dir(node).join("wsrep-recover.log");
        fs::write(&log, "")?;
        self.chown_to_server_user(&log)?;
        let mut cmd = Command::new(MARIADBD);
        cmd.arg(format!(
            "--defaults-file={}",
            self.config.cnf_path(node).display()
        ));
        if let Some(user) = &self.config.user {
            cmd.arg(format!("--user={user}"));
        }
        cmd.arg("--wsrep-recover")
            .arg(format!("--log-error={}", log.display()));
        cmd.current_dir(self.config.node_dir(node));
        let out = self.config.node_dir(node).join("wsrep-recover.out");
        let status = sys::run_logged(&mut cmd, &out, self.timeouts.tool)?;
        let text = fs::read_to_string(&log).unwrap_or_default();
        match grastate::parse_recovered_position(&text) {
            Some(position) => {
                eprintln!("trireme: node{node} recovered position {position}");
                Ok(position)
            }
            None => bail!(
                "mariadbd --wsrep-recover ({status}) printed no position; see {}",
                log.display()
            ),
        }
    }

    /// Creates the system tables in `node`'s datadir.
    fn install_db(&self, node: usize) -> Result<()> {
        let datadir = self.config.datadir(node);
        eprintln!(
            "trireme: node{node}: mariadb-install-db --datadir={}",
            datadir.display()
        );
        let mut cmd = Command::new(INSTALL_DB);
        // --no-defaults keeps /etc/mysql (and its wsrep settings) out of the bootstrap.
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()));
        if let Some(user) = &self.config.user {
            cmd.arg(format!("--user={user}"));
        }
        cmd.args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=32M",
        ]);
        cmd.current_dir(self.config.node_dir(node));
        let log = self.config.node_dir(node).join("install-db.log");
        let status = sys::run_logged(&mut cmd, &log, self.timeouts.tool)?;
        if !status.success() {
            bail!(
                "mariadb-install-db failed ({status}) for node{node}:\n{}",
                sys::tail(&log, TAIL_LINES)
            );
        }
        Ok(())
    }

    /// Starts `first` as a new cluster, then every other node in order, each waited for
    /// until Synced; finally waits until every node sees the whole cluster.
    fn start_all(&self, first: usize, joiners_together: bool) -> Result<()> {
        let n = self.config.nodes;
        if !self.config.datadir(first).join("mysql").is_dir() {
            bail!(
                "node{first} would bootstrap the cluster but its datadir {} has no system \
                 tables (an earlier `trireme cluster up` failed before creating them): remove {} \
                 and run `trireme cluster up` again",
                self.config.datadir(first).display(),
                self.dir().display()
            );
        }
        self.start_process(first, true)?;
        self.wait_synced(first, None)?;
        let joiners: Vec<usize> = (1..=n).filter(|&node| node != first).collect();
        if joiners_together {
            for &node in &joiners {
                self.start_process(node, false)?;
            }
        }
        for &node in &joiners {
            if !joiners_together {
                self.start_process(node, false)?;
            }
            self.wait_synced(node, None)?;
        }
        for node in 1..=n {
            self.wait_synced(node, Some(n))?;
        }
        eprintln!("trireme: all {n} nodes are Synced");
        Ok(())
    }

    /// Launches `node`'s server detached (own session, output to `mariadbd.out`) and records
    /// its pid in the pid file (the server rewrites the same pid there once it is up).
    fn start_process(&self, node: usize, bootstrap: bool) -> Result<u32> {
        self.start_process_at(node, bootstrap, None)
    }

    /// [`Cluster::start_process`], with `--wsrep-start-position` when `start_position` (the
    /// `uuid:seqno` recovered after a crash) is given.
    fn start_process_at(
        &self,
        node: usize,
        bootstrap: bool,
        start_position: Option<&str>,
    ) -> Result<u32> {
        if !self.config.hosts {
            check_ports(&self.config, node)?;
        }
        let pid_file = self.config.pid_file(node);
        let _ = fs::remove_file(&pid_file);
        let mut args = vec![format!(
            "--defaults-file={}",
            self.config.cnf_path(node).display()
        )];
        if let Some(user) = &self.config.user {
            args.push(format!("--user={user}"));
        }
        if bootstrap {
            args.push("--wsrep-new-cluster".to_string());
        }
        if let Some(position) = start_position {
            args.push(format!("--wsrep-start-position={position}"));
        }
        eprintln!(
            "trireme: starting node{node}{}",
            if bootstrap {
                " (bootstraps a new cluster)"
            } else {
                " (joins)"
            }
        );
        // `setsid` in a background job of a non-interactive shell is not a group leader, so
        // it execs mariadbd in place: `$!` is the server's pid. The shell exits right away,
        // so the server is nobody's child here (no zombie) and has its own session.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"out=$1; shift; setsid "$@" </dev/null >>"$out" 2>&1 & echo $!"#)
            .arg("sh")
            .arg(self.config.stdout_log(node));
        if self.config.hosts {
            // `ip netns exec` enters the host's namespace and execs the server in place.
            cmd.args(["ip", "netns", "exec", &hosts::namespace(node)]);
        }
        cmd.arg(MARIADBD)
            .args(&args)
            .current_dir(self.config.node_dir(node));
        if self.config.sst_method == SstMethod::Trireme {
            // The server finds `wsrep_sst_<method>` on its PATH.
            let dir = sst_script_dir()?;
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", dir.display()));
        }
        let out = sys::run_captured(&mut cmd, Duration::from_secs(30))?;
        let pid: u32 = out.stdout.trim().parse().map_err(|_| {
            anyhow!(
                "could not start node{node}: {:?} {:?}",
                out.stdout,
                out.stderr
            )
        })?;
        fs::write(&pid_file, format!("{pid}\n"))
            .with_context(|| format!("cannot write {}", pid_file.display()))?;
        // The server (running as the server user) rewrites this file.
        self.chown_to_server_user(&pid_file)?;
        Ok(pid)
    }

    /// Waits (at most the node start timeout) until `node` is Synced and ready (and, with
    /// `size`, sees that many members).
    pub fn wait_synced(&self, node: usize, size: Option<usize>) -> Result<()> {
        let timeout = self.timeouts.node_start;
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.node_status(node);
            let Some(pid) = status.pid else {
                return Err(self.failure(node, &format!("node{node} exited while starting")));
            };
            if status.is_synced() && size.is_none_or(|s| status.cluster_size() == Some(s)) {
                self.check_unprivileged(node, pid)?;
                if size.is_none() {
                    eprintln!(
                        "trireme: node{node} (pid {pid}) is Synced, cluster size {}",
                        status.var("wsrep_cluster_size").unwrap_or("?")
                    );
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                let want = match size {
                    Some(s) => format!("Synced with cluster size {s}"),
                    None => "Synced".to_string(),
                };
                return Err(self.failure(
                    node,
                    &format!(
                        "node{node} (pid {pid}) did not become {want} within {} s (last seen: {})",
                        timeout.as_secs(),
                        status.summary()
                    ),
                ));
            }
            thread::sleep(WAIT_POLL);
        }
    }

    /// Fails if the server of `node` kept root privileges although it should run as the
    /// server user.
    fn check_unprivileged(&self, node: usize, pid: u32) -> Result<()> {
        let Some(user) = &self.config.user else {
            return Ok(());
        };
        let (uid, _) = sys::lookup_user(user)?
            .ok_or_else(|| anyhow!("the server user {user:?} does not exist"))?;
        match sys::proc_euid(Some(pid)) {
            Some(euid) if euid == uid => Ok(()),
            Some(euid) => bail!(
                "node{node} (pid {pid}) runs as uid {euid}, not as {user} (uid {uid}): it did not \
                 drop privileges; stop it with `trireme cluster down`"
            ),
            None => Ok(()), // It just exited; the caller notices on its next look.
        }
    }

    /// An error for a failed node, with the tail of its error log.
    fn failure(&self, node: usize, what: &str) -> anyhow::Error {
        let log = self.config.error_log(node);
        anyhow!(
            "{what}\n--- last {TAIL_LINES} lines of {} ---\n{}\n---\nThe cluster directory {} is \
             left for inspection (also see the other nodes' error.log and mariadbd.out); stop \
             what still runs with `trireme cluster down --dir {}`",
            log.display(),
            sys::tail(&log, TAIL_LINES),
            self.dir().display(),
            self.dir().display()
        )
    }

    // ---- helpers -----------------------------------------------------------------------

    pub(crate) fn check_node(&self, node: usize) -> Result<()> {
        if !(1..=self.config.nodes).contains(&node) {
            bail!(
                "no node {node}: the cluster has nodes 1 to {}",
                self.config.nodes
            );
        }
        Ok(())
    }

    fn run_sql(&self, node: usize, stmt: &str, table: bool, timeout: Duration) -> Result<String> {
        self.check_node(node)?;
        if self.pid(node).is_none() {
            bail!("node{node} is not running (start it with `trireme cluster start {node}`)");
        }
        let mut cmd = Command::new(MARIADB_CLIENT);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", self.config.socket(node).display()))
            .args(["--user=root", "--connect-timeout=5"]);
        if table {
            cmd.arg("--table");
        } else {
            cmd.args(["--batch", "--skip-column-names"]);
        }
        cmd.arg(format!("--execute={stmt}"));
        let out =
            sys::run_captured(&mut cmd, timeout).with_context(|| format!("SQL on node{node}"))?;
        if !out.status.success() {
            bail!("SQL on node{node} failed: {}", out.stderr.trim());
        }
        Ok(out.stdout)
    }

    fn stop_pid(&self, node: usize, pid: u32) -> Result<()> {
        let marker = self.config.cnf_path(node).display().to_string();
        eprintln!("trireme: stopping node{node} (pid {pid})");
        sys::send_signal(pid, "TERM")?;
        if sys::proc_state(pid) == Some('T') {
            // A SIGSTOPped server acts on SIGTERM only once it runs again.
            sys::send_signal(pid, "CONT")?;
        }
        if wait_until(self.timeouts.stop, || !sys::is_our_process(pid, &marker)) {
            return Ok(());
        }
        eprintln!(
            "trireme: warning: node{node} (pid {pid}) did not exit within {} s of SIGTERM; \
             sending SIGKILL (it will need recovery on the next start)",
            self.timeouts.stop.as_secs()
        );
        sys::send_signal(pid, "KILL")?;
        if !wait_until(Duration::from_secs(30), || {
            !sys::is_our_process(pid, &marker)
        }) {
            bail!("node{node} (pid {pid}) survived SIGKILL for 30 s");
        }
        Ok(())
    }

    fn chown_to_server_user(&self, path: &Path) -> Result<()> {
        let Some(user) = &self.config.user else {
            return Ok(());
        };
        let (uid, gid) = sys::lookup_user(user)?
            .ok_or_else(|| anyhow!("the server user {user:?} does not exist"))?;
        lchown(path, Some(uid), Some(gid))
            .with_context(|| format!("cannot chown {} to {user}", path.display()))
    }
}

/// How long a port may stay taken before `check_ports` gives up: a server killed a moment
/// ago (SIGKILL returns before the kernel has closed its sockets) frees its ports within
/// this time.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Fails, naming the port, if any of `node`'s ports is taken on 127.0.0.1 for longer than
/// [`PORT_RELEASE_WAIT`].
/// On loopback every node's ports must be free; hosts have their own (fresh) namespaces.
fn check_all_ports(config: &ClusterConfig) -> Result<()> {
    if config.hosts {
        return Ok(());
    }
    for node in 1..=config.nodes {
        check_ports(config, node)?;
    }
    Ok(())
}

fn check_ports(config: &ClusterConfig, node: usize) -> Result<()> {
    for (port, what) in config.ports(node).labelled() {
        if !wait_until(PORT_RELEASE_WAIT, || sys::port_free(port)) {
            bail!(
                "port {port} (node{node} {what}) on 127.0.0.1 is in use by another program: \
                 choose another --base-port (the cluster uses base+1..base+{n} for SQL and \
                 base+110..base+{g} for group, IST and SST)",
                n = config.nodes,
                g = 102 + 10 * config.nodes
            );
        }
    }
    Ok(())
}

/// Creates `path` (and parents) and sets its mode.
fn create_dir_mode(path: &Path, mode: u32) -> Result<()> {
    fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", path.display()))
}

/// As root, checks (before anything is created) that the server user can read the provider
/// and reach the cluster directory: every directory above it must be searchable by others.
fn check_server_access(config: &ClusterConfig) -> Result<()> {
    let Some(user) = &config.user else {
        return Ok(());
    };
    let existing = config
        .dir
        .ancestors()
        .find(|a| a.is_dir())
        .unwrap_or(Path::new("/"));
    let mut cmd = Command::new("runuser");
    cmd.args([
        "-u",
        user,
        "--",
        "sh",
        "-c",
        r#"test -r "$1" && test -x "$2""#,
        "sh",
    ])
    .arg(&config.provider)
    .arg(existing);
    let out = sys::run_captured(&mut cmd, Duration::from_secs(30))?;
    if !out.status.success() {
        bail!(
            "the server user {user} cannot read the provider {} or reach {}: every directory \
             above them must be searchable by other users (chmod o+x); a --dir under /root \
             does not work, use one under /tmp or /var/tmp {}",
            config.provider.display(),
            existing.display(),
            out.stderr.trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(node: usize, pid: Option<u32>, vars: &[(&str, &str)]) -> NodeStatus {
        NodeStatus {
            node,
            pid,
            suspended: false,
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            error: None,
            sst_progress: None,
        }
    }

    #[test]
    fn status_table_shows_live_and_down_nodes() {
        let synced = row(
            1,
            Some(4242),
            &[
                ("wsrep_local_state_comment", "Synced"),
                ("wsrep_ready", "ON"),
                ("wsrep_last_committed", "17"),
                ("wsrep_local_recv_queue", "0"),
                ("wsrep_flow_control_paused", "0"),
                ("wsrep_cluster_size", "2"),
                ("wsrep_cluster_status", "Primary"),
                ("wsrep_streaming_transactions", "1"),
                ("wsrep_streaming_fragments", "57"),
            ],
        );
        assert!(synced.is_synced());
        assert_eq!(synced.cluster_size(), Some(2));
        assert_eq!(synced.last_committed(), Some(17));
        let mut unreachable = row(3, Some(4343), &[]);
        unreachable.error = Some("timed out".to_string());
        let table = format_status_table(&[synced, row(2, None, &[]), unreachable]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("node   pid   alive  state        last_committed"));
        assert!(lines[1].starts_with("node1  4242  yes    Synced       17"));
        assert!(lines[1].ends_with("Primary         1 trx/57 frags"));
        assert!(lines[2].starts_with("node2  -     no     down         -"));
        assert!(lines[3].starts_with("node3  4343  yes    unreachable"));
        assert_eq!(lines[4], "node3: timed out");
    }

    #[test]
    fn not_synced_until_ready() {
        let joining = row(
            2,
            Some(1),
            &[(
                "wsrep_local_state_comment",
                "Joining: receiving State Transfer",
            )],
        );
        assert!(!joining.is_synced());
        let not_ready = row(
            2,
            Some(1),
            &[
                ("wsrep_local_state_comment", "Synced"),
                ("wsrep_ready", "OFF"),
            ],
        );
        assert!(!not_ready.is_synced());
    }

    #[test]
    fn up_options_default_to_nothing_recorded() {
        let o = UpOptions::new("/tmp/x");
        assert_eq!(o.dir, PathBuf::from("/tmp/x"));
        assert!(o.nodes.is_none() && o.provider.is_none() && o.base_port.is_none());
        assert_eq!(o.timeouts.node_start, Duration::from_secs(120));
    }
}
