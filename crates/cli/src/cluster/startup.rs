//! Creating a cluster directory and starting its servers, and restarting a cluster after
//! its servers stopped (or crashed), choosing the node to bootstrap from as Galera would.

use super::*;

impl Cluster {
    pub(super) fn create(dir: PathBuf, opts: &UpOptions) -> Result<Cluster> {
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
            arbitrator: opts.arbitrator.unwrap_or(false),
            metrics: opts.metrics.unwrap_or(false),
        };
        if config.sst_method == SstMethod::Trireme {
            sst_script_dir()?;
        }
        config.validate()?;
        check_all_ports(&config)?;
        arbitrator::check_arbitrator_port(&config)?;
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
        if cluster.config.arbitrator {
            cluster.start_arbitrator()?;
        }
        Ok(cluster)
    }

    pub(super) fn restart(dir: PathBuf, opts: &UpOptions) -> Result<Cluster> {
        let config = ClusterConfig::load(&dir)?;
        refuse_changed_options(&dir, &config, opts)?;
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
        if cluster.crashed_with_saved_views() {
            eprintln!(
                "trireme: every node of the cluster in {} crashed and kept its last primary \
                 view: starting them all as they were (the provider restores the primary \
                 component)",
                dir.display()
            );
            cluster.start_all_after_crash()?;
        } else {
            let bootstrap = cluster.choose_bootstrap()?;
            eprintln!(
                "trireme: restarting the cluster in {} from node{bootstrap}",
                dir.display()
            );
            cluster.start_all(bootstrap, opts.joiners_together)?;
        }
        if cluster.config.arbitrator {
            // One that outlived the nodes belongs to the group they had: it cannot tell the
            // new one from it, so it starts over too.
            cluster.stop_arbitrator()?;
            cluster.start_arbitrator()?;
        }
        Ok(cluster)
    }

    /// Whether every node stopped uncleanly (no saved position, nobody safe to bootstrap)
    /// and kept its last primary view: the provider then restores the primary component by
    /// itself (Galera's `pc.recovery`), with no node chosen and no file edited.
    pub(super) fn crashed_with_saved_views(&self) -> bool {
        (1..=self.config.nodes).all(|node| {
            let crashed = self.grastate(node).ok().flatten().is_some_and(|g| {
                !g.has_position() && !g.safe_to_bootstrap && g.position.cluster != Uuid::NIL
            });
            crashed && self.config.saved_view_path(node).is_file()
        })
    }

    /// Starts every node after a full crash as its init system would (see
    /// [`Cluster::start_after_crash`]), then waits until all are Synced together.
    pub(super) fn start_all_after_crash(&self) -> Result<()> {
        let n = self.config.nodes;
        let all: Vec<usize> = (1..=n).collect();
        self.start_after_crash(&all)?;
        for node in 1..=n {
            self.wait_synced(node, Some(n))?;
        }
        eprintln!("trireme: all {n} nodes are Synced");
        Ok(())
    }

    /// Starts `nodes` after a crash as an init system would: each with the position
    /// `mariadbd --wsrep-recover` finds (as the systemd unit's `galera_recovery` does), none
    /// told to bootstrap, no file edited. Does not wait for them.
    pub fn start_after_crash(&self, nodes: &[usize]) -> Result<()> {
        let mut positions = Vec::new();
        for &node in nodes {
            self.check_node(node)?;
            let position = self
                .wsrep_recover(node)
                .with_context(|| format!("node{node}: no position to start from"))?;
            positions.push((node, position.to_string()));
        }
        for (node, position) in &positions {
            self.start_process_at(*node, false, Some(position))?;
        }
        Ok(())
    }

    /// Picks the node to bootstrap a stopped cluster from (see [`base::grastate`]), marking
    /// it safe to bootstrap when nobody is.
    pub(super) fn choose_bootstrap(&self) -> Result<usize> {
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
    pub(super) fn wsrep_recover(&self, node: usize) -> Result<Gtid> {
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
    pub(super) fn install_db(&self, node: usize) -> Result<()> {
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
    pub(super) fn start_all(&self, first: usize, joiners_together: bool) -> Result<()> {
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
    pub(super) fn start_process(&self, node: usize, bootstrap: bool) -> Result<u32> {
        self.start_process_at(node, bootstrap, None)
    }

    /// [`Cluster::start_process`], with `--wsrep-start-position` when `start_position` (the
    /// `uuid:seqno` recovered after a crash) is given.
    pub(super) fn start_process_at(
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
        let mut cmd = self.detached_command(node, &self.config.stdout_log(node));
        cmd.arg(MARIADBD)
            .args(&args)
            .current_dir(self.config.node_dir(node));
        if self.config.sst_method == SstMethod::Trireme {
            // The server finds `wsrep_sst_<method>` on its PATH.
            let dir = sst_script_dir()?;
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", dir.display()));
        }
        let pid = launch(&format!("node{node}"), &mut cmd, &pid_file)?;
        // The server (running as the server user) rewrites this file.
        self.chown_to_server_user(&pid_file)?;
        Ok(pid)
    }

    /// A command that starts a process detached on `member`'s host (its namespace with
    /// `--hosts`), its output appended to `out`: add the program and its arguments.
    pub(super) fn detached_command(&self, member: usize, out: &Path) -> Command {
        // `setsid` in a background job of a non-interactive shell is not a group leader, so
        // it execs the program in place: `$!` is the program's pid. The shell exits right
        // away, so the program is nobody's child here (no zombie) and has its own session.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"out=$1; shift; setsid "$@" </dev/null >>"$out" 2>&1 & echo $!"#)
            .arg("sh")
            .arg(out);
        if self.config.hosts {
            // `ip netns exec` enters the host's namespace and execs the program in place.
            cmd.args(["ip", "netns", "exec", &hosts::namespace(member)]);
        }
        cmd
    }
}

/// Runs a [`Cluster::detached_command`] and records the pid it printed in `pid_file`.
pub(super) fn launch(who: &str, cmd: &mut Command, pid_file: &Path) -> Result<u32> {
    let out = sys::run_captured(cmd, Duration::from_secs(30))?;
    let pid: u32 = out
        .stdout
        .trim()
        .parse()
        .map_err(|_| anyhow!("could not start {who}: {:?} {:?}", out.stdout, out.stderr))?;
    fs::write(pid_file, format!("{pid}\n"))
        .with_context(|| format!("cannot write {}", pid_file.display()))?;
    Ok(pid)
}

/// `cluster up` on an existing cluster restarts it as it was created: an option given again
/// must match what the cluster recorded, so that a restart never silently changes it.
fn refuse_changed_options(dir: &Path, config: &ClusterConfig, opts: &UpOptions) -> Result<()> {
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
        (
            "--arbitrator",
            opts.arbitrator.map(|v| v.to_string()),
            config.arbitrator.to_string(),
        ),
        (
            "--metrics",
            opts.metrics.map(|v| v.to_string()),
            config.metrics.to_string(),
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
    Ok(())
}
