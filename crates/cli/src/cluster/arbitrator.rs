//! The `trireme-arbitrator` of a local cluster (`cluster up --arbitrator`): member
//! `nodes + 1`, on its own host with `--hosts`, started after the nodes and stopped before
//! them, with a garbd-style settings file in `DIR/arbitrator/`.

use super::*;
use crate::config::{NodePorts, CLUSTER_NAME};

/// The arbitrator's program, found next to `trireme` (or on PATH).
const ARBITRATOR_PROGRAM: &str = "trireme-arbitrator";

/// Galera's arbitrator (Debian's `galera-arbitrator-4`), which a cluster on Galera runs with
/// the same settings file, for side-by-side benches.
const GARBD: &str = "/usr/bin/garbd";

/// How long every node may take to count the arbitrator in its view.
const ARBITRATOR_JOIN_WAIT: Duration = Duration::from_secs(30);

impl ClusterConfig {
    /// The arbitrator's member number: the one after the last node.
    pub fn arbitrator_member(&self) -> usize {
        self.nodes + 1
    }

    /// `DIR/arbitrator`: its settings, log and pid file.
    pub fn arbitrator_dir(&self) -> PathBuf {
        self.dir.join("arbitrator")
    }

    /// `DIR/arbitrator/arbitrator.cnf`, the `--cfg` file it runs with.
    pub fn arbitrator_cfg(&self) -> PathBuf {
        self.arbitrator_dir().join("arbitrator.cnf")
    }

    /// `DIR/arbitrator/arbitrator.log`.
    pub fn arbitrator_log(&self) -> PathBuf {
        self.arbitrator_dir().join("arbitrator.log")
    }

    /// `DIR/arbitrator/arbitrator.pid`.
    pub fn arbitrator_pid_file(&self) -> PathBuf {
        self.arbitrator_dir().join("arbitrator.pid")
    }

    /// The settings file, as a DBA writes garbd's: the nodes to join through, the cluster's
    /// name, and the provider options the nodes share (TLS among them).
    pub fn render_arbitrator_cfg(&self) -> String {
        let member = self.arbitrator_member();
        let mut options = Vec::new();
        if !self.hosts {
            let port = NodePorts::for_node(self.base_port, member).group;
            options.push(format!("gmcast.listen_addr=tcp://127.0.0.1:{port}"));
        }
        options.extend(
            self.provider_options
                .split(';')
                .map(str::trim)
                .filter(|entry| !entry.is_empty() && !entry.starts_with("gcache."))
                .map(String::from),
        );
        let mut text = format!(
            "# arbitrator settings (garbd's keys), written by `trireme cluster up --arbitrator`\n\
             address = {}\ngroup = {CLUSTER_NAME}\nname = arbitrator\nlog = {}\n",
            self.cluster_address(),
            self.arbitrator_log().display()
        );
        if !options.is_empty() {
            text.push_str(&format!("options = {}\n", options.join("; ")));
        }
        text
    }
}

/// On loopback, the arbitrator's group port must be free (on hosts it has a host of its own).
pub(super) fn check_arbitrator_port(config: &ClusterConfig) -> Result<()> {
    if config.hosts || !config.arbitrator {
        return Ok(());
    }
    let port = config.ports(config.arbitrator_member()).group;
    if !wait_until(PORT_RELEASE_WAIT, || sys::port_free(port)) {
        bail!(
            "port {port} (the arbitrator's group port) on 127.0.0.1 is in use by another \
             program: choose another --base-port"
        );
    }
    Ok(())
}

impl Cluster {
    /// The arbitrator's pid if it runs (from its pid file, checked in /proc).
    pub fn arbitrator_pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.config.arbitrator_pid_file()).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let marker = self.config.arbitrator_cfg().display().to_string();
        sys::is_our_process(pid, &marker).then_some(pid)
    }

    /// Starts the arbitrator (detached, as the server user) and waits until every running
    /// node counts it in its view.
    pub fn start_arbitrator(&self) -> Result<u32> {
        if !self.config.arbitrator {
            bail!(
                "this cluster has no arbitrator: create one with `trireme cluster up --arbitrator`"
            );
        }
        if let Some(pid) = self.arbitrator_pid() {
            bail!("the arbitrator already runs (pid {pid})");
        }
        let config = &self.config;
        check_arbitrator_port(config)?;
        create_dir_mode(&config.arbitrator_dir(), 0o755)?;
        let cfg = config.arbitrator_cfg();
        fs::write(&cfg, config.render_arbitrator_cfg())
            .with_context(|| format!("cannot write {}", cfg.display()))?;
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(config.arbitrator_log())?;
        self.chown_to_server_user(&config.arbitrator_dir())?;
        self.chown_to_server_user(&config.arbitrator_log())?;
        let program = self.arbitrator_program()?;
        eprintln!(
            "trireme: starting the arbitrator (member {})",
            config.arbitrator_member()
        );
        let before = self.running_views();
        let mut cmd = self.detached_command(config.arbitrator_member(), &config.arbitrator_log());
        if let Some(user) = &config.user {
            // setpriv execs in place: the pid stays the arbitrator's.
            cmd.args([
                "setpriv",
                &format!("--reuid={user}"),
                &format!("--regid={user}"),
            ])
            .arg("--init-groups");
        }
        cmd.arg(program)
            .arg("--cfg")
            .arg(&cfg)
            .current_dir(config.arbitrator_dir());
        let pid = startup::launch("the arbitrator", &mut cmd, &config.arbitrator_pid_file())?;
        self.wait_for_arbitrator(pid, &before)?;
        Ok(pid)
    }

    /// `trireme-arbitrator`, or garbd for a cluster on Galera.
    fn arbitrator_program(&self) -> Result<PathBuf> {
        if !self.config.runs_galera() {
            return Ok(
                locate::program_dir(ARBITRATOR_PROGRAM, "arbitrator")?.join(ARBITRATOR_PROGRAM)
            );
        }
        let garbd = PathBuf::from(GARBD);
        if !garbd.is_file() {
            bail!("a cluster on Galera runs garbd as its arbitrator: install galera-arbitrator-4");
        }
        Ok(garbd)
    }

    /// The running nodes with the view id each is in now.
    fn running_views(&self) -> Vec<(usize, Option<u64>)> {
        (1..=self.config.nodes)
            .filter(|&node| self.pid(node).is_some())
            .map(|node| (node, self.conf_id(node)))
            .collect()
    }

    fn conf_id(&self, node: usize) -> Option<u64> {
        self.node_status(node)
            .var("wsrep_cluster_conf_id")
            .and_then(|id| id.parse().ok())
    }

    /// Waits until every node that ran before the start is in a newer view counting one
    /// member more than the nodes: a killed arbitrator the nodes have not evicted yet
    /// still counts in the old view, so the size alone would say yes at once.
    fn wait_for_arbitrator(&self, pid: u32, before: &[(usize, Option<u64>)]) -> Result<()> {
        let size = before.len() + 1;
        let counted = wait_until(ARBITRATOR_JOIN_WAIT, || {
            before.iter().all(|&(node, view)| {
                self.node_status(node).cluster_size() == Some(size) && self.conf_id(node) > view
            })
        });
        if !counted {
            bail!(
                "the arbitrator (pid {pid}) is not in the nodes' view after {} s; its log:\n{}",
                ARBITRATOR_JOIN_WAIT.as_secs(),
                sys::tail(&self.config.arbitrator_log(), TAIL_LINES)
            );
        }
        eprintln!("trireme: the arbitrator is in the view: cluster size {size}");
        Ok(())
    }

    /// Sends `signal` to the arbitrator; after [`Signal::Kill`], waits until it is gone.
    pub fn kill_arbitrator(&self, signal: Signal) -> Result<()> {
        let pid = self
            .arbitrator_pid()
            .ok_or_else(|| anyhow!("the arbitrator is not running"))?;
        let marker = self.config.arbitrator_cfg().display().to_string();
        self.signal_process("the arbitrator", pid, &marker, signal)
    }

    /// Stops the arbitrator cleanly (it leaves the group), if it runs.
    pub fn stop_arbitrator(&self) -> Result<()> {
        let Some(pid) = self.arbitrator_pid() else {
            return Ok(());
        };
        let marker = self.config.arbitrator_cfg().display().to_string();
        self.stop_process("the arbitrator", pid, &marker, "")
    }
}
