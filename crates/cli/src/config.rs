//! The cluster's layout on disk, its ports and the `my.cnf` of each node.
//!
//! Everything here is pure: paths and file texts are computed from a [`ClusterConfig`], so
//! the generated configuration can be unit-tested without starting anything.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};

/// Most nodes a cluster may have (the port layout leaves room for nine).
pub const MAX_NODES: usize = 9;
/// Default for `--nodes`.
pub const DEFAULT_NODES: usize = 3;
/// Default for `--base-port`: node `i` serves SQL on `base + i`, group traffic on
/// `base + 100 + 10 * i` and IST/SST on the two ports after that.
pub const DEFAULT_BASE_PORT: u16 = 13300;
/// Highest accepted `--base-port`, so that every derived port stays below 65536.
pub const MAX_BASE_PORT: u16 = 65000;
/// `wsrep_cluster_name` of every cluster this tool creates.
pub const CLUSTER_NAME: &str = "trireme";
/// The system user the servers run as when `trireme` runs as root.
pub const SERVER_USER: &str = "trireme";
/// The file in the cluster directory that records how the cluster was created.
pub const CONFIG_FILE: &str = "trireme-cluster.conf";
/// Longest path a Unix socket may have (`sun_path` holds 108 bytes including the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// How joiners receive their state (`wsrep_sst_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SstMethod {
    /// `wsrep_sst_rsync`: copies the donor's files with an rsync daemon.
    #[default]
    Rsync,
    /// `wsrep_sst_mariabackup`: streams a hot backup through socat.
    Mariabackup,
    /// `wsrep_sst_trireme`: a hot backup over parallel checksummed streams, staged and
    /// swapped in atomically (the `sst` crate).
    Trireme,
}

impl SstMethod {
    /// The value of `wsrep_sst_method`.
    pub fn as_str(self) -> &'static str {
        match self {
            SstMethod::Rsync => "rsync",
            SstMethod::Mariabackup => "mariabackup",
            SstMethod::Trireme => "trireme",
        }
    }
}

impl fmt::Display for SstMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SstMethod {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "rsync" => Ok(SstMethod::Rsync),
            "mariabackup" => Ok(SstMethod::Mariabackup),
            "trireme" => Ok(SstMethod::Trireme),
            other => bail!("unknown SST method {other:?}: use rsync, mariabackup or trireme"),
        }
    }
}

/// The five TCP ports of one node, all bound on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    /// The SQL port (`port`).
    pub sql: u16,
    /// Group communication (`gmcast.listen_addr`, `wsrep_node_address`).
    pub group: u16,
    /// Incremental state transfer receiver (`ist.recv_addr`).
    pub ist: u16,
    /// State snapshot transfer receiver (`wsrep_sst_receive_address`).
    pub sst: u16,
    /// The metrics endpoint and status page (`metrics.listen_addr`), with `--metrics`.
    pub metrics: u16,
}

impl NodePorts {
    /// The ports of node `node` (1-based) for a cluster whose base port is `base_port`.
    ///
    /// Requires `1 <= node <= MAX_NODES` and `base_port <= MAX_BASE_PORT`.
    pub fn for_node(base_port: u16, node: usize) -> NodePorts {
        assert!((1..=MAX_NODES).contains(&node), "node {node} out of range");
        assert!(base_port <= MAX_BASE_PORT, "base port {base_port} too high");
        let n = u16::try_from(node).expect("node fits in u16");
        let group = base_port + 100 + 10 * n;
        NodePorts {
            sql: base_port + n,
            group,
            ist: group + 1,
            sst: group + 2,
            metrics: group + 3,
        }
    }

    /// Every port with what it is for, for error messages.
    pub fn labelled(&self) -> [(u16, &'static str); 5] {
        [
            (self.sql, "SQL"),
            (self.group, "group"),
            (self.ist, "IST"),
            (self.sst, "SST"),
            (self.metrics, "metrics"),
        ]
    }
}

/// How a cluster was created: enough to regenerate every path, port and `my.cnf`.
/// Saved as `key=value` lines in [`CONFIG_FILE`] in the cluster directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster directory (absolute).
    pub dir: PathBuf,
    /// Number of nodes, `1..=MAX_NODES`.
    pub nodes: usize,
    /// See [`NodePorts::for_node`].
    pub base_port: u16,
    /// Absolute path of the wsrep provider library.
    pub provider: PathBuf,
    /// `wsrep_sst_method`.
    pub sst_method: SstMethod,
    /// The OS user the servers run as (`mariadbd --user`), or `None` when they run as the
    /// user who runs `trireme` (which is then not root).
    pub user: Option<String>,
    /// More `wsrep_provider_options` entries (`key=value; ...`) for every node, after the
    /// cluster's own (so they win): for example a small `gcache.size`.
    pub provider_options: String,
    /// Settings for the `[sst]` group of every node's `my.cnf` (`key=value; ...`), read by
    /// the SST scripts: for example `parallel=4; rlimit=100M` for the trireme method.
    pub sst_options: String,
    /// More `[mysqld]` settings for every node (`key=value; ...`), after the cluster's own (so
    /// they win): for example `innodb_buffer_pool_size=1G`.
    pub server_options: String,
    /// Whether every node runs on a host of its own (a network namespace, see
    /// [`crate::hosts`]) with a `my.cnf` written as a DBA writes it for real machines.
    pub hosts: bool,
    /// Whether a `trireme-arbitrator` runs beside the nodes, as member `nodes + 1` (on its
    /// own host with `hosts`), see [`ClusterConfig::arbitrator_cfg`].
    pub arbitrator: bool,
    /// Every node serves Prometheus metrics and its status page
    /// (`metrics.listen_addr`, on the node's metrics port); Trireme's own option, so only
    /// for a Trireme cluster.
    pub metrics: bool,
}

/// The standard ports every node of a `--hosts` cluster uses on its own host.
pub const HOST_PORTS: NodePorts = NodePorts {
    sql: 3306,
    group: 4567,
    ist: 4568,
    sst: 4444,
    metrics: 9104,
};

/// The non-empty `key=value` entries of a `;`-separated settings list.
fn settings(list: &str) -> impl Iterator<Item = &str> {
    list.split(';').map(str::trim).filter(|s| !s.is_empty())
}

impl ClusterConfig {
    /// Checks the values a user can get wrong; the message says what to change.
    pub fn validate(&self) -> Result<()> {
        if self.arbitrator && self.nodes >= MAX_NODES {
            bail!(
                "an arbitrator takes the place of member {}: a cluster with an arbitrator has \
                 at most {} nodes",
                self.nodes + 1,
                MAX_NODES - 1
            );
        }
        if !(1..=MAX_NODES).contains(&self.nodes) {
            bail!(
                "--nodes {} is out of range: use 1 to {MAX_NODES}",
                self.nodes
            );
        }
        if !(1024..=MAX_BASE_PORT).contains(&self.base_port) {
            bail!(
                "--base-port {} is out of range: use 1024 to {MAX_BASE_PORT}",
                self.base_port
            );
        }
        if !self.dir.is_absolute() {
            bail!(
                "cluster directory {} must be an absolute path",
                self.dir.display()
            );
        }
        for (what, path) in [
            ("cluster directory", &self.dir),
            ("provider", &self.provider),
        ] {
            let text = path
                .to_str()
                .ok_or_else(|| anyhow!("{what} path {} is not valid UTF-8", path.display()))?;
            if text
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, '#' | '"' | '\'' | ';'))
            {
                bail!(
                    "{what} path {text:?} contains whitespace, a quote, '#' or ';', which \
                     my.cnf and the SST scripts cannot carry: choose another path"
                );
            }
        }
        for (flag, list) in [
            ("--server-options", &self.server_options),
            ("--sst-options", &self.sst_options),
            ("--provider-options", &self.provider_options),
        ] {
            // A line break would start a new my.cnf line; an entry opening with '[' (each
            // entry is a line of its own) a new group.
            let breaks_out = list.contains(['\n', '\r'])
                || (flag != "--provider-options" && settings(list).any(|e| e.starts_with('[')));
            if breaks_out {
                bail!(
                    "{flag} {list:?} holds a line break or a '[', which would start a new \
                     my.cnf line or group: give key=value settings separated by ';'"
                );
            }
        }
        for entry in settings(&self.server_options) {
            let key = entry.split('=').next().unwrap_or(entry).trim();
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                bail!(
                    "--server-options entry {entry:?} is not a server setting: use \
                     name=value (or a bare name), e.g. innodb_buffer_pool_size=1G"
                );
            }
        }
        let socket = self.socket(self.nodes);
        let socket_len = socket.as_os_str().len();
        if socket_len > MAX_SOCKET_PATH {
            bail!(
                "socket path {} is {socket_len} bytes, more than the {MAX_SOCKET_PATH} a Unix \
                 socket allows: choose a shorter --dir",
                socket.display()
            );
        }
        Ok(())
    }

    /// `DIR/nodeI`: the node's own directory (socket, pid file, logs, my.cnf).
    pub fn node_dir(&self, node: usize) -> PathBuf {
        self.dir.join(format!("node{node}"))
    }

    /// `DIR/nodeI/data`: the datadir.
    pub fn datadir(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("data")
    }

    /// `DIR/nodeI/my.cnf`.
    pub fn cnf_path(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("my.cnf")
    }

    /// `DIR/nodeI/mysqld.sock`.
    pub fn socket(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("mysqld.sock")
    }

    /// `DIR/nodeI/mysqld.pid`.
    pub fn pid_file(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("mysqld.pid")
    }

    /// `DIR/nodeI/error.log`: the server's `log-error`.
    pub fn error_log(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("error.log")
    }

    /// `DIR/nodeI/mariadbd.out`: the server's stdout and stderr.
    pub fn stdout_log(&self, node: usize) -> PathBuf {
        self.node_dir(node).join("mariadbd.out")
    }

    /// `DIR/nodeI/data/grastate.dat`: Galera's saved state.
    pub fn grastate_path(&self, node: usize) -> PathBuf {
        self.datadir(node).join("grastate.dat")
    }

    /// Whether the cluster runs Galera's library rather than Trireme's.
    pub fn runs_galera(&self) -> bool {
        self.provider
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("libgalera"))
    }

    /// Where `node` keeps its last primary view for a restore after a full crash:
    /// Trireme's `trireme_view.dat`, or Galera's `gvwstate.dat` (`pc.recovery`).
    pub fn saved_view_path(&self, node: usize) -> PathBuf {
        let name = if self.runs_galera() {
            "gvwstate.dat"
        } else {
            "trireme_view.dat"
        };
        self.datadir(node).join(name)
    }

    /// The ports of `node`.
    pub fn ports(&self, node: usize) -> NodePorts {
        if self.hosts {
            HOST_PORTS
        } else {
            NodePorts::for_node(self.base_port, node)
        }
    }

    /// Where `node` serves its metrics and status page (`host:port`), in a cluster made
    /// with `--metrics`.
    pub fn metrics_address(&self, node: usize) -> Option<String> {
        self.metrics
            .then(|| format!("{}:{}", self.sql_host(node), self.ports(node).metrics))
    }

    /// The address clients reach `node`'s server at over the network.
    pub fn sql_host(&self, node: usize) -> String {
        if self.hosts {
            crate::hosts::address(node).to_string()
        } else {
            "127.0.0.1".to_string()
        }
    }

    /// `gcomm://127.0.0.1:G1,127.0.0.1:G2,...` over every node's group port; on hosts,
    /// `gcomm://10.213.0.1,10.213.0.2,...` (the default port).
    pub fn cluster_address(&self) -> String {
        let members: Vec<String> = (1..=self.nodes)
            .map(|n| {
                if self.hosts {
                    crate::hosts::address(n).to_string()
                } else {
                    format!("127.0.0.1:{}", self.ports(n).group)
                }
            })
            .collect();
        format!("gcomm://{}", members.join(","))
    }

    /// The text of `DIR/nodeI/my.cnf`.
    pub fn render_my_cnf(&self, node: usize) -> String {
        let mut lines = self.common_cnf_head(node);
        if self.hosts {
            lines.extend(self.host_wsrep_settings(node));
        } else {
            lines.extend(self.loopback_wsrep_settings(node));
        }
        self.finish_cnf(node, lines)
    }

    /// The `[mysqld]` settings that do not depend on the network.
    fn common_cnf_head(&self, node: usize) -> Vec<String> {
        let p = self.ports(node);
        let path = |p: PathBuf| p.display().to_string();
        vec![
            format!(
                "# Generated by `trireme cluster up` for node{node} of the cluster in {}.",
                self.dir.display()
            ),
            "# Start: mariadbd --defaults-file=<this file> [--user=trireme] \
             [--wsrep-new-cluster]"
                .to_string(),
            String::new(),
            "[mysqld]".to_string(),
            format!("datadir={}", path(self.datadir(node))),
            format!("socket={}", path(self.socket(node))),
            format!("port={}", p.sql),
            format!("pid-file={}", path(self.pid_file(node))),
            format!("log-error={}", path(self.error_log(node))),
            "skip-name-resolve".to_string(),
            "binlog_format=ROW".to_string(),
            "default_storage_engine=InnoDB".to_string(),
            "innodb_autoinc_lock_mode=2".to_string(),
            "innodb_buffer_pool_size=64M".to_string(),
            "innodb_log_file_size=32M".to_string(),
            String::new(),
            "wsrep_on=ON".to_string(),
            format!("wsrep_provider={}", path(self.provider.clone())),
            format!("wsrep_cluster_name={CLUSTER_NAME}"),
            format!("wsrep_cluster_address={}", self.cluster_address()),
            format!("wsrep_node_name=node{node}"),
            format!("wsrep_sst_method={}", self.sst_method),
            "wsrep_slave_threads=2".to_string(),
        ]
    }

    /// `wsrep_provider_options` with the cluster's small cache and the user's entries.
    fn provider_options_line(&self, own: &str) -> String {
        let extra = self.provider_options.trim();
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!("; {extra}")
        };
        format!("wsrep_provider_options=\"{own}gcache.size=64M{extra}\"")
    }

    /// On hosts: what a DBA writes for real machines. No listen or node address anywhere:
    /// the server and the provider find them as they do on a real host (the metrics
    /// endpoint, which has no default address, excepted).
    fn host_wsrep_settings(&self, node: usize) -> Vec<String> {
        let metrics = if self.metrics {
            format!(
                "metrics.listen_addr={}:{}; ",
                crate::hosts::address(node),
                HOST_PORTS.metrics
            )
        } else {
            String::new()
        };
        vec![self.provider_options_line(&metrics)]
    }

    /// On loopback every node shares 127.0.0.1, so every address and port is explicit.
    fn loopback_wsrep_settings(&self, node: usize) -> Vec<String> {
        let p = self.ports(node);
        vec![
            "bind-address=127.0.0.1".to_string(),
            format!("wsrep_node_address=127.0.0.1:{}", p.group),
            format!("wsrep_node_incoming_address=127.0.0.1:{}", p.sql),
            self.provider_options_line(&format!(
                "gmcast.listen_addr=tcp://127.0.0.1:{}; ist.recv_addr=127.0.0.1:{}; {}",
                p.group,
                p.ist,
                if self.metrics {
                    format!("metrics.listen_addr=127.0.0.1:{}; ", p.metrics)
                } else {
                    String::new()
                }
            )),
            format!("wsrep_sst_receive_address=127.0.0.1:{}", p.sst),
        ]
    }

    /// The SST credentials, the user's `[mysqld]` settings, and the `[client]` and `[sst]`
    /// groups.
    fn finish_cnf(&self, node: usize, mut lines: Vec<String>) -> String {
        let path = |p: PathBuf| p.display().to_string();
        if matches!(self.sst_method, SstMethod::Mariabackup | SstMethod::Trireme) {
            // mariabackup logs into the donor over its socket; root has no password here.
            lines.push("wsrep_sst_auth=root:".to_string());
        }
        // Last in the group: a later setting wins in my.cnf.
        lines.extend(settings(&self.server_options).map(String::from));
        lines.extend([
            String::new(),
            "[client]".to_string(),
            format!("socket={}", path(self.socket(node))),
            "user=root".to_string(),
            String::new(),
            // Last, so that a test or an operator can append settings to it.
            "[sst]".to_string(),
        ]);
        lines.extend(settings(&self.sst_options).map(String::from));
        lines.push(String::new());
        lines.join("\n")
    }

    /// The text of [`CONFIG_FILE`].
    pub fn to_file_text(&self) -> String {
        format!(
            "# Written by `trireme cluster up`; read by every other `trireme cluster` command.\n\
             nodes={}\nbase_port={}\nprovider={}\nsst_method={}\nuser={}\nprovider_options={}\n\
             sst_options={}\nserver_options={}\nhosts={}\narbitrator={}\nmetrics={}\n",
            self.nodes,
            self.base_port,
            self.provider.display(),
            self.sst_method,
            self.user.as_deref().unwrap_or(""),
            self.provider_options,
            self.sst_options,
            self.server_options,
            if self.hosts { "yes" } else { "no" },
            if self.arbitrator { "yes" } else { "no" },
            if self.metrics { "yes" } else { "no" },
        )
    }

    /// Parses the text of [`CONFIG_FILE`] for the cluster in `dir`.
    pub fn parse_file_text(dir: &Path, text: &str) -> Result<ClusterConfig> {
        let mut nodes = None;
        let mut base_port = None;
        let mut provider = None;
        let mut sst_method = None;
        let mut user = None;
        let mut provider_options = String::new();
        let mut sst_options = String::new();
        // Absent from the files of clusters created before the option existed.
        let mut server_options = String::new();
        let mut hosts = false;
        let mut arbitrator = false;
        let mut metrics = false;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| anyhow!("line {}: expected key=value, got {line:?}", number + 1))?;
            let value = value.trim();
            match key.trim() {
                "nodes" => nodes = Some(value.parse().context("nodes")?),
                "base_port" => base_port = Some(value.parse().context("base_port")?),
                "provider" => provider = Some(PathBuf::from(value)),
                "sst_method" => sst_method = Some(value.parse()?),
                "user" => user = Some((!value.is_empty()).then(|| value.to_string())),
                "provider_options" => provider_options = value.to_string(),
                "sst_options" => sst_options = value.to_string(),
                "server_options" => server_options = value.to_string(),
                "hosts" => hosts = value == "yes",
                "arbitrator" => arbitrator = value == "yes",
                "metrics" => metrics = value == "yes",
                other => bail!("line {}: unknown key {other:?}", number + 1),
            }
        }
        let config = ClusterConfig {
            dir: dir.to_path_buf(),
            nodes: nodes.ok_or_else(|| anyhow!("missing nodes="))?,
            base_port: base_port.ok_or_else(|| anyhow!("missing base_port="))?,
            provider: provider.ok_or_else(|| anyhow!("missing provider="))?,
            sst_method: sst_method.ok_or_else(|| anyhow!("missing sst_method="))?,
            user: user.ok_or_else(|| anyhow!("missing user="))?,
            provider_options,
            sst_options,
            server_options,
            hosts,
            arbitrator,
            metrics,
        };
        config.validate()?;
        Ok(config)
    }

    /// Reads [`CONFIG_FILE`] from `dir` (which must be absolute).
    pub fn load(dir: &Path) -> Result<ClusterConfig> {
        let path = dir.join(CONFIG_FILE);
        let text = fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}: is {} a cluster created by `trireme cluster up`?",
                path.display(),
                dir.display()
            )
        })?;
        ClusterConfig::parse_file_text(dir, &text)
            .with_context(|| format!("{} is malformed", path.display()))
    }

    /// Writes [`CONFIG_FILE`] into the cluster directory.
    pub fn save(&self) -> Result<()> {
        let path = self.dir.join(CONFIG_FILE);
        fs::write(&path, self.to_file_text())
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ClusterConfig {
        ClusterConfig {
            dir: PathBuf::from("/tmp/tc"),
            nodes: 3,
            base_port: 20000,
            provider: PathBuf::from("/usr/lib/galera/libgalera_smm.so"),
            sst_method: SstMethod::Rsync,
            user: Some("trireme".to_string()),
            provider_options: String::new(),
            sst_options: String::new(),
            server_options: String::new(),
            hosts: false,
            arbitrator: false,
            metrics: false,
        }
    }

    /// The text of the `[mysqld]` section.
    fn mysqld_section(cnf: &str) -> &str {
        cnf.split("[mysqld]")
            .nth(1)
            .unwrap()
            .split("\n[")
            .next()
            .unwrap()
    }

    /// The `key=value` settings of the `[mysqld]` section.
    fn mysqld_settings(cnf: &str) -> Vec<(String, String)> {
        mysqld_section(cnf)
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect()
    }

    fn get<'a>(settings: &'a [(String, String)], key: &str) -> &'a str {
        let found: Vec<_> = settings.iter().filter(|(k, _)| k == key).collect();
        assert_eq!(found.len(), 1, "{key} must appear exactly once");
        &found[0].1
    }

    #[test]
    fn ports_are_distinct_across_a_full_cluster() {
        let mut all = Vec::new();
        for node in 1..=MAX_NODES {
            let p = NodePorts::for_node(MAX_BASE_PORT, node);
            all.extend(p.labelled().map(|(port, _)| port));
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "every port of every node is distinct");
        assert_eq!(
            NodePorts::for_node(13300, 1),
            NodePorts {
                sql: 13301,
                group: 13410,
                ist: 13411,
                sst: 13412,
                metrics: 13413
            }
        );
    }

    #[test]
    fn my_cnf_has_every_setting_for_node_two() {
        let cnf = config().render_my_cnf(2);
        let s = mysqld_settings(&cnf);
        assert_eq!(get(&s, "datadir"), "/tmp/tc/node2/data");
        assert_eq!(get(&s, "socket"), "/tmp/tc/node2/mysqld.sock");
        assert_eq!(get(&s, "port"), "20002");
        assert_eq!(get(&s, "bind-address"), "127.0.0.1");
        assert_eq!(get(&s, "pid-file"), "/tmp/tc/node2/mysqld.pid");
        assert_eq!(get(&s, "log-error"), "/tmp/tc/node2/error.log");
        assert_eq!(get(&s, "binlog_format"), "ROW");
        assert_eq!(get(&s, "default_storage_engine"), "InnoDB");
        assert_eq!(get(&s, "innodb_autoinc_lock_mode"), "2");
        assert_eq!(get(&s, "innodb_buffer_pool_size"), "64M");
        assert_eq!(get(&s, "wsrep_on"), "ON");
        assert_eq!(
            get(&s, "wsrep_provider"),
            "/usr/lib/galera/libgalera_smm.so"
        );
        assert_eq!(get(&s, "wsrep_cluster_name"), "trireme");
        assert_eq!(
            get(&s, "wsrep_cluster_address"),
            "gcomm://127.0.0.1:20110,127.0.0.1:20120,127.0.0.1:20130"
        );
        assert_eq!(get(&s, "wsrep_node_name"), "node2");
        assert_eq!(get(&s, "wsrep_node_address"), "127.0.0.1:20120");
        assert_eq!(
            get(&s, "wsrep_provider_options"),
            "\"gmcast.listen_addr=tcp://127.0.0.1:20120; ist.recv_addr=127.0.0.1:20121; \
             gcache.size=64M\""
        );
        assert_eq!(get(&s, "wsrep_sst_method"), "rsync");
        assert_eq!(get(&s, "wsrep_sst_receive_address"), "127.0.0.1:20122");
        assert_eq!(get(&s, "wsrep_slave_threads"), "2");
        assert_eq!(get(&s, "skip-name-resolve"), "");
        assert!(
            s.iter().all(|(k, _)| k != "wsrep_sst_auth"),
            "rsync needs no SST user"
        );
        assert!(cnf.contains("[client]\nsocket=/tmp/tc/node2/mysqld.sock\nuser=root\n"));
    }

    #[test]
    fn my_cnf_for_mariabackup_names_the_sst_user() {
        let mut c = config();
        c.sst_method = SstMethod::Mariabackup;
        let s = mysqld_settings(&c.render_my_cnf(1));
        assert_eq!(get(&s, "wsrep_sst_method"), "mariabackup");
        assert_eq!(get(&s, "wsrep_sst_auth"), "root:");
    }

    #[test]
    fn my_cnf_for_trireme_has_an_sst_group_last() {
        let mut c = config();
        c.sst_method = SstMethod::Trireme;
        c.sst_options = "parallel=3; rlimit=50M".to_string();
        let cnf = c.render_my_cnf(1);
        let s = mysqld_settings(&cnf);
        assert_eq!(get(&s, "wsrep_sst_method"), "trireme");
        assert_eq!(get(&s, "wsrep_sst_auth"), "root:");
        assert!(cnf.ends_with("[sst]\nparallel=3\nrlimit=50M\n"), "{cnf}");
    }

    #[test]
    fn server_options_come_last_in_the_mysqld_group_and_win() {
        let mut c = config();
        c.server_options = "innodb_buffer_pool_size=1G; skip-log-bin".to_string();
        c.validate().unwrap();
        let cnf = c.render_my_cnf(1);
        let mysqld = mysqld_section(&cnf);
        assert!(
            mysqld
                .trim_end()
                .ends_with("innodb_buffer_pool_size=1G\nskip-log-bin"),
            "{mysqld}"
        );
        // The cluster's own 64M comes earlier, so the server takes the later 1G.
        let s = mysqld_settings(&cnf);
        let last = s
            .iter()
            .rev()
            .find(|(k, _)| k == "innodb_buffer_pool_size")
            .unwrap();
        assert_eq!(last.1, "1G");
        for bad in ["x=1\n[client]", "=1", "a b=1", "[sst]"] {
            let mut c = config();
            c.server_options = bad.to_string();
            let error = c.validate().unwrap_err().to_string();
            assert!(error.contains("--server-options"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn every_address_in_my_cnf_is_on_loopback() {
        let cnf = config().render_my_cnf(3);
        for (i, _) in cnf.match_indices("://").chain(cnf.match_indices("addr")) {
            let rest = &cnf[i..];
            let line = rest.lines().next().unwrap();
            if let Some(pos) = line.find(|c: char| c.is_ascii_digit()) {
                assert!(
                    line[pos..].starts_with("127.0.0.1"),
                    "non-loopback address in {line}"
                );
            }
        }
    }

    #[test]
    fn metrics_listen_on_each_nodes_own_port_only_when_asked() {
        let options = |c: &ClusterConfig, node| {
            let cnf = c.render_my_cnf(node);
            get(&mysqld_settings(&cnf), "wsrep_provider_options").to_owned()
        };
        let mut c = config();
        assert!(!options(&c, 2).contains("metrics"));
        c.metrics = true;
        assert!(
            options(&c, 2).contains("metrics.listen_addr=127.0.0.1:20123; "),
            "{}",
            options(&c, 2)
        );
        assert_eq!(c.metrics_address(2).as_deref(), Some("127.0.0.1:20123"));
        c.hosts = true;
        assert!(options(&c, 2).contains("metrics.listen_addr=10.213.0.2:9104; "));
    }

    #[test]
    fn config_file_round_trips() {
        for user in [Some("trireme".to_string()), None] {
            let mut c = config();
            c.user = user;
            c.sst_method = SstMethod::Trireme;
            c.sst_options = "parallel=2".to_string();
            c.server_options = "innodb_buffer_pool_size=1G".to_string();
            c.metrics = true;
            let parsed = ClusterConfig::parse_file_text(&c.dir, &c.to_file_text()).unwrap();
            assert_eq!(parsed, c);
        }
        assert!(ClusterConfig::parse_file_text(Path::new("/x"), "nodes=3\n").is_err());
    }

    #[test]
    fn validate_rejects_bad_values_with_a_hint() {
        let mut c = config();
        c.nodes = 10;
        assert!(c.validate().unwrap_err().to_string().contains("--nodes"));
        let mut c = config();
        c.base_port = 65500;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--base-port"));
        let mut c = config();
        c.dir = PathBuf::from(format!("/tmp/{}", "d".repeat(100)));
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("shorter --dir"));
        let mut c = config();
        c.dir = PathBuf::from("/tmp/with space");
        assert!(c.validate().is_err());
        config().validate().unwrap();
    }
}
