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

mod arbitrator;
mod locate;
mod startup;
pub(crate) mod status;
#[cfg(test)]
mod tests;

use locate::{absolute, absolute_path};
pub use locate::{check_mariadb_installed, default_provider, sst_script_dir, SST_SCRIPT};
pub use status::{format_status_table, NodeStatus};

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
/// How long a starting server's pid may be unreadable (its pid file being rewritten) before
/// the server counts as exited.
const PID_REWRITE_WAIT: Duration = Duration::from_secs(2);
/// The status variables the status table, the startup wait and the tests read.
const STATUS_VARS: [&str; 14] = [
    "wsrep_local_state_comment",
    "wsrep_ready",
    "wsrep_last_committed",
    "wsrep_local_recv_queue",
    "wsrep_flow_control_paused",
    "wsrep_flow_control_paused_by",
    "wsrep_cluster_size",
    "wsrep_cluster_status",
    "wsrep_cluster_conf_id",
    "wsrep_connected",
    "wsrep_streaming_transactions",
    "wsrep_streaming_fragments",
    "wsrep_raft_leader",
    "wsrep_cluster_weight",
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
    /// A `trireme-arbitrator` beside the nodes (default: none), see `cluster/arbitrator.rs`.
    pub arbitrator: Option<bool>,
    /// Every node serves metrics and its status page (default: off).
    pub metrics: Option<bool>,
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
            arbitrator: None,
            metrics: None,
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
            .then(|| HostNetwork::new(self.config.nodes + usize::from(self.config.arbitrator)))
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
        // First: a node that leaves last alone is the one marked safe to bootstrap.
        self.stop_arbitrator()?;
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
        let marker = self.config.cnf_path(node).display().to_string();
        self.signal_process(&format!("node{node}"), pid, &marker, signal)
    }

    /// SIGKILLs every running node at once (a power loss), then waits (bounded) until all
    /// are gone. Returns the nodes killed.
    pub fn kill_all(&self) -> Result<Vec<usize>> {
        let running: Vec<(usize, u32)> = (1..=self.config.nodes)
            .filter_map(|node| self.pid(node).map(|pid| (node, pid)))
            .collect();
        for (_, pid) in &running {
            sys::send_signal(*pid, Signal::Kill.name())?;
        }
        for (node, pid) in &running {
            let marker = self.config.cnf_path(*node).display().to_string();
            self.signal_process(&format!("node{node}"), *pid, &marker, Signal::Kill)?;
        }
        Ok(running.into_iter().map(|(node, _)| node).collect())
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

    /// Waits (at most the node start timeout) until `node` is Synced and ready (and, with
    /// `size`, sees that many members).
    pub fn wait_synced(&self, node: usize, size: Option<usize>) -> Result<()> {
        let timeout = self.timeouts.node_start;
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.node_status(node);
            let Some(pid) = status.pid else {
                // The server truncates and rewrites its pid file as it starts: an empty
                // read is that moment, not an exit, unless the pid stays missing.
                if wait_until(PID_REWRITE_WAIT, || self.pid(node).is_some()) {
                    continue;
                }
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

    /// An error for a failed node, with the tails of its error log and of its standard
    /// output: a server that dies before it opens its error log (or a namespace or program
    /// that cannot be entered) says why only there.
    fn failure(&self, node: usize, what: &str) -> anyhow::Error {
        let log = self.config.error_log(node);
        let out = self.config.stdout_log(node);
        anyhow!(
            "{what}\n--- last {TAIL_LINES} lines of {} ---\n{}\n--- last {TAIL_LINES} lines of {} \
             ---\n{}\n---\nThe cluster directory {} is left for inspection (also see the other \
             nodes' error.log and mariadbd.out); stop what still runs with `trireme cluster \
             down --dir {}`",
            log.display(),
            sys::tail(&log, TAIL_LINES),
            out.display(),
            sys::tail(&out, TAIL_LINES),
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
        self.stop_process(
            &format!("node{node}"),
            pid,
            &marker,
            " (it will need recovery on the next start)",
        )
    }

    /// Stops `who` (pid `pid`, whose command line holds `marker`) with SIGTERM, and with
    /// SIGKILL and a warning ending in `after_kill` if it is still there after the stop
    /// timeout.
    pub(crate) fn stop_process(
        &self,
        who: &str,
        pid: u32,
        marker: &str,
        after_kill: &str,
    ) -> Result<()> {
        eprintln!("trireme: stopping {who} (pid {pid})");
        sys::send_signal(pid, "TERM")?;
        if sys::proc_state(pid) == Some('T') {
            // A SIGSTOPped process acts on SIGTERM only once it runs again.
            sys::send_signal(pid, "CONT")?;
        }
        if wait_until(self.timeouts.stop, || !sys::is_our_process(pid, marker)) {
            return Ok(());
        }
        eprintln!(
            "trireme: warning: {who} (pid {pid}) did not exit within {} s of SIGTERM; \
             sending SIGKILL{after_kill}",
            self.timeouts.stop.as_secs()
        );
        self.signal_process(who, pid, marker, Signal::Kill)
    }

    /// Sends `signal` to `who` (pid `pid`, whose command line holds `marker`); after
    /// [`Signal::Kill`], waits (bounded) until the process is gone.
    pub(crate) fn signal_process(
        &self,
        who: &str,
        pid: u32,
        marker: &str,
        signal: Signal,
    ) -> Result<()> {
        sys::send_signal(pid, signal.name())?;
        if signal == Signal::Kill
            && !wait_until(Duration::from_secs(30), || {
                !sys::is_our_process(pid, marker)
            })
        {
            bail!("{who} (pid {pid}) is still there 30 s after SIGKILL");
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
