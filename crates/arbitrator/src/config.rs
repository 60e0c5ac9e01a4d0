//! The arbitrator's settings, from garbd's arguments (`--address`, `--group`, `--options`,
//! `--name`, `--log`, `--daemon`, `--workdir`) and from the file `--cfg` names, which holds
//! the same settings as `key = value` lines (a garbd configuration file reads the same). The
//! command line wins over the file.

use std::fs;
use std::path::{Path, PathBuf};

use clap::Parser;

/// `wsrep_cluster_name`'s default, which garbd's `--group` shares.
pub const DEFAULT_GROUP: &str = transport::DEFAULT_CLUSTER_NAME;

/// The member name garbd presents when `--name` is not given.
pub const DEFAULT_NAME: &str = "garb";

/// The keys a `--cfg` file may hold.
const CFG_KEYS: [&str; 7] = [
    "address", "group", "options", "name", "log", "daemon", "workdir",
];

/// garbd options that serve its backup feature (a state transfer it asks a donor for).
/// An arbitrator holds no data, so it takes part in no state transfer.
const BACKUP_OPTIONS: [&str; 2] = ["sst", "donor"];

/// The command line, as garbd takes it.
#[derive(Debug, Default, Parser)]
#[command(
    name = "trireme-arbitrator",
    version,
    disable_version_flag = true,
    about = "A Trireme group member that votes and keeps the order but holds no database \
             (Galera's garbd)."
)]
pub struct Args {
    /// The members to join through: gcomm://host1[:port],host2[:port]
    #[arg(short = 'a', long)]
    pub address: Option<String>,
    /// The cluster's name (wsrep_cluster_name of its nodes).
    #[arg(short = 'g', long)]
    pub group: Option<String>,
    /// Provider options, as in wsrep_provider_options (socket.ssl_*, gmcast.listen_addr,
    /// evs.*, ...).
    #[arg(short = 'o', long)]
    pub options: Option<String>,
    /// This member's name in the cluster's views.
    #[arg(short = 'n', long)]
    pub name: Option<String>,
    /// Log to this file instead of standard error.
    #[arg(short = 'l', long)]
    pub log: Option<PathBuf>,
    /// Run in the background (requires --log).
    #[arg(short = 'd', long)]
    pub daemon: bool,
    /// The working directory (where a relative --log lands).
    #[arg(short = 'w', long)]
    pub workdir: Option<PathBuf>,
    /// Read settings from this file (`key = value` lines; the command line wins).
    #[arg(short = 'c', long)]
    pub cfg: Option<PathBuf>,
    /// The group address, as garbd also takes it: without --address.
    #[arg(value_name = "GROUP_ADDRESS", conflicts_with = "address")]
    pub group_address: Option<String>,
    /// Print the version and exit.
    #[arg(short = 'v', long, action = clap::ArgAction::Version)]
    pub version: Option<bool>,
    /// garbd's backup option: refused (the arbitrator holds no data).
    #[arg(long, hide = true)]
    pub sst: Option<String>,
    /// garbd's backup option: refused (the arbitrator holds no data).
    #[arg(long, hide = true)]
    pub donor: Option<String>,
}

/// What the arbitrator runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The members to join through, `host:port`.
    pub peers: Vec<String>,
    /// The cluster's name.
    pub group: String,
    /// The provider options text.
    pub options: String,
    /// This member's name.
    pub name: String,
    /// The log file; `None` logs to standard error.
    pub log: Option<PathBuf>,
    /// Whether to run in the background.
    pub daemon: bool,
    /// The working directory, if one is given.
    pub workdir: Option<PathBuf>,
}

/// Why the arbitrator cannot start with what it was given.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The `--cfg` file cannot be read.
    #[error("--cfg {path}: {source}")]
    CfgUnreadable {
        /// The file.
        path: PathBuf,
        /// The reading error.
        source: std::io::Error,
    },
    /// A line of the `--cfg` file is not `key = value`.
    #[error("--cfg {path}, line {line}: {text:?} is not `key = value`")]
    CfgLine {
        /// The file.
        path: PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
    /// A key the `--cfg` file may not hold.
    #[error("--cfg {path}, line {line}: unknown key {key:?} (known: {known})", known = CFG_KEYS.join(", "))]
    CfgUnknownKey {
        /// The file.
        path: PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// The key.
        key: String,
    },
    /// garbd's backup feature was asked for.
    #[error(
        "{option} belongs to garbd's backup feature: the Trireme arbitrator holds no data and \
         takes part in no state transfer; take backups from a data node"
    )]
    BackupRefused {
        /// The option, as given.
        option: String,
    },
    /// No group address at all.
    #[error(
        "no group address: give --address gcomm://host1,host2 (members of the cluster to \
         join through)"
    )]
    NoAddress,
    /// The group address does not parse.
    #[error("--address: {0}")]
    BadAddress(String),
    /// `gcomm://` with no member: an arbitrator cannot found a cluster.
    #[error(
        "--address {0:?} names no member: an arbitrator joins a cluster of data nodes, it \
         never founds one"
    )]
    NoPeers(String),
    /// A `daemon` value that is not a boolean.
    #[error("daemon = {0:?}: expected yes or no (also true/false, on/off, 1/0)")]
    BadDaemon(String),
    /// `--daemon` without `--log`: a background process has no terminal to log to.
    #[error("--daemon needs --log FILE: a background process has no terminal to log to")]
    DaemonWithoutLog,
    /// The provider options do not parse.
    #[error("--options: {0}")]
    Options(#[from] options::OptionsError),
}

impl Settings {
    /// The settings from `args`, on top of the `--cfg` file when it names one.
    pub fn from_args(args: Args) -> Result<Settings, ConfigError> {
        let mut file = match &args.cfg {
            Some(path) => read_cfg(path)?,
            None => Vec::new(),
        };
        let mut from_file = |key: &str| {
            let at = file.iter().rposition(|(k, _)| k == key)?;
            Some(file.swap_remove(at).1)
        };
        for (option, value) in [("--sst", &args.sst), ("--donor", &args.donor)] {
            if value.is_some() {
                return Err(ConfigError::BackupRefused {
                    option: option.to_owned(),
                });
            }
        }
        let address = (args.address.or(args.group_address))
            .or_else(|| from_file("address"))
            .ok_or(ConfigError::NoAddress)?;
        let group = args.group.or_else(|| from_file("group"));
        let options = args.options.or_else(|| from_file("options"));
        let name = args.name.or_else(|| from_file("name"));
        let log = args.log.or_else(|| from_file("log").map(PathBuf::from));
        let workdir = args
            .workdir
            .or_else(|| from_file("workdir").map(PathBuf::from));
        let daemon = match from_file("daemon") {
            _ if args.daemon => true,
            Some(value) => parse_bool(&value).ok_or(ConfigError::BadDaemon(value))?,
            None => false,
        };
        let peers = replicator::parse_cluster_address(&address)
            .map_err(|error| ConfigError::BadAddress(error.to_string()))?;
        if peers.is_empty() {
            return Err(ConfigError::NoPeers(address));
        }
        if daemon && log.is_none() {
            return Err(ConfigError::DaemonWithoutLog);
        }
        let options = options.unwrap_or_default();
        // Refused here, before any background start, with the option at fault named.
        options::ProviderOptions::parse(&options)?;
        Ok(Settings {
            peers,
            group: group.unwrap_or_else(|| DEFAULT_GROUP.to_owned()),
            options,
            name: name.unwrap_or_else(|| DEFAULT_NAME.to_owned()),
            log,
            daemon,
            workdir,
        })
    }
}

/// The `key = value` lines of a `--cfg` file; `#` starts a comment line.
fn read_cfg(path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let text = fs::read_to_string(path).map_err(|source| ConfigError::CfgUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let mut settings = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |line| (path.to_owned(), line);
        let Some((key, value)) = line.split_once('=') else {
            let (path, line) = at(index + 1);
            return Err(ConfigError::CfgLine {
                path,
                line,
                text: raw.to_owned(),
            });
        };
        let key = key.trim();
        if BACKUP_OPTIONS.contains(&key) {
            return Err(ConfigError::BackupRefused {
                option: key.to_owned(),
            });
        }
        if !CFG_KEYS.contains(&key) {
            let (path, line) = at(index + 1);
            return Err(ConfigError::CfgUnknownKey {
                path,
                line,
                key: key.to_owned(),
            });
        }
        settings.push((key.to_owned(), unquote(value.trim()).to_owned()));
    }
    Ok(settings)
}

/// A value without the quotes a shell-minded DBA puts around it.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Args {
        let mut all = vec!["trireme-arbitrator"];
        all.extend_from_slice(list);
        Args::try_parse_from(all).expect("the arguments parse")
    }

    #[test]
    fn garbd_arguments_give_the_settings_with_garbd_defaults() {
        let settings =
            Settings::from_args(args(&["-a", "gcomm://10.0.0.1,10.0.0.2:4570"])).unwrap();
        assert_eq!(settings.peers, ["10.0.0.1:4567", "10.0.0.2:4570"]);
        let positional = Settings::from_args(args(&["gcomm://10.0.0.1,10.0.0.2:4570"])).unwrap();
        assert_eq!(
            positional.peers, settings.peers,
            "garbd's positional group address"
        );
        assert_eq!(settings.group, DEFAULT_GROUP);
        assert_eq!(settings.name, DEFAULT_NAME);
        assert!(!settings.daemon);
    }

    #[test]
    fn the_cfg_file_gives_settings_and_the_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("arbitrator.cnf");
        fs::write(
            &cfg,
            "# garbd style\naddress = gcomm://a,b\ngroup=\"prod\"\nname = arb1\n\
             log = /var/log/arb.log\ndaemon = yes\noptions = 'evs.suspect_timeout=PT3S'\n",
        )
        .unwrap();
        let cfg_arg = cfg.to_str().unwrap();
        let settings = Settings::from_args(args(&["--cfg", cfg_arg, "-n", "arb2"])).unwrap();
        assert_eq!(settings.peers, ["a:4567", "b:4567"]);
        assert_eq!(settings.group, "prod");
        assert_eq!(settings.name, "arb2", "the command line wins");
        assert_eq!(settings.options, "evs.suspect_timeout=PT3S");
        assert_eq!(settings.log, Some(PathBuf::from("/var/log/arb.log")));
        assert!(settings.daemon);
    }

    #[test]
    fn bad_settings_are_refused_with_what_is_wrong() {
        let refused = |list: &[&str]| Settings::from_args(args(list)).unwrap_err().to_string();
        assert!(refused(&[]).contains("no group address"));
        assert!(refused(&["-a", "gcomm://"]).contains("never founds one"));
        assert!(refused(&["-a", "mysql://x"]).contains("--address"));
        assert!(refused(&["-a", "gcomm://a", "-d"]).contains("--daemon needs --log"));
        assert!(refused(&["-a", "gcomm://a", "--sst", "backup"]).contains("holds no data"));
        let options = refused(&["-a", "gcomm://a", "-o", "evs.suspect_timeout=soon"]);
        assert!(options.starts_with("--options:") && options.contains("evs.suspect_timeout"));
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.cnf");
        fs::write(&cfg, "address = gcomm://a\nnodes = x\n").unwrap();
        let unknown = refused(&["--cfg", cfg.to_str().unwrap()]);
        assert!(
            unknown.contains("line 2") && unknown.contains("\"nodes\""),
            "{unknown}"
        );
        fs::write(&cfg, "address gcomm://a\n").unwrap();
        assert!(refused(&["--cfg", cfg.to_str().unwrap()]).contains("is not `key = value`"));
        fs::write(&cfg, "address = gcomm://a\ndaemon = maybe\n").unwrap();
        assert!(refused(&["--cfg", cfg.to_str().unwrap()]).contains("daemon = \"maybe\""));
        let missing = dir.path().join("absent.cnf");
        assert!(refused(&["--cfg", missing.to_str().unwrap()]).starts_with("--cfg"));
    }

    #[test]
    fn the_packaged_settings_file_and_unit_start_the_arbitrator() {
        let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
        let cfg = packaging.join("arbitrator.cnf");
        let settings = Settings::from_args(args(&["--cfg", cfg.to_str().unwrap()])).unwrap();
        assert_eq!(settings.peers, ["10.0.0.1:4567", "10.0.0.2:4567"]);
        assert_eq!(
            (settings.group.as_str(), settings.name.as_str()),
            ("prod", "arbitrator")
        );
        assert!(!settings.daemon, "systemd keeps it in the foreground");
        let unit = fs::read_to_string(packaging.join("trireme-arbitrator.service")).unwrap();
        let exec = unit
            .lines()
            .find_map(|line| line.strip_prefix("ExecStart="))
            .expect("the unit starts the arbitrator");
        let mut words = exec.split_whitespace();
        assert_eq!(words.next(), Some("/usr/bin/trireme-arbitrator"));
        let parsed = Args::try_parse_from(std::iter::once("trireme-arbitrator").chain(words));
        assert_eq!(
            parsed.expect("the unit's arguments parse").cfg,
            Some(PathBuf::from("/etc/trireme/arbitrator.cnf"))
        );
    }
}
