//! The arguments MariaDB passes to an SST script, and the `[sst]` settings of `my.cnf`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::SstError;

/// Which side this process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Receives the snapshot.
    Joiner,
    /// Sends it.
    Donor,
}

/// The script arguments this method uses (the rest are accepted and ignored).
#[derive(Clone, Debug, Default)]
pub struct Args {
    /// `--role`.
    pub role: Option<Role>,
    /// `--address`: where the joiner listens; for the donor, the joiner's `ready` text.
    pub address: String,
    /// `--datadir`.
    pub datadir: PathBuf,
    /// `--defaults-file`.
    pub defaults_file: Option<PathBuf>,
    /// `--defaults-extra-file`.
    pub defaults_extra_file: Option<PathBuf>,
    /// `--defaults-group-suffix`.
    pub defaults_group_suffix: Option<String>,
    /// `--socket`: the donor server's socket.
    pub socket: Option<String>,
    /// `--parent`: the server's pid.
    pub parent: Option<u32>,
    /// `--gtid`: the donor's position (`uuid:seqno`).
    pub gtid: Option<String>,
    /// `--gtid-domain-id`.
    pub gtid_domain_id: Option<String>,
    /// `--bypass`: no data, IST follows.
    pub bypass: bool,
    /// `--innodb-data-home-dir`, `--innodb-log-group-home-dir`, `--innodb-undo-directory`
    /// when set: this method needs them inside the datadir.
    pub separate_innodb_dirs: Vec<String>,
    /// `--binlog` / `--log-bin`.
    pub binlog: Option<String>,
    /// Everything after `--mysqld-args`: the server's own arguments.
    pub mysqld_args: Vec<String>,
}

impl Args {
    /// Parses the arguments after the program name.
    pub fn parse(argv: &[String]) -> Result<Args, SstError> {
        let mut args = Args::default();
        let mut i = 0;
        while i < argv.len() {
            let raw = &argv[i];
            i += 1;
            let (key, inline) = match raw.split_once('=') {
                Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
                _ => (raw.as_str(), None),
            };
            if key == "--mysqld-args" {
                args.mysqld_args = server_arguments(&argv[i..]);
                break;
            }
            if key == "--bypass" {
                args.bypass = true;
                continue;
            }
            if !key.starts_with("--") {
                return Err(SstError::Config(format!("unexpected argument {raw:?}")));
            }
            let value = match inline {
                Some(v) => v,
                None => {
                    let v = argv
                        .get(i)
                        .cloned()
                        .ok_or_else(|| SstError::Config(format!("argument {key} needs a value")))?;
                    i += 1;
                    v
                }
            };
            match key {
                "--role" => {
                    args.role = Some(match value.as_str() {
                        "joiner" => Role::Joiner,
                        "donor" => Role::Donor,
                        other => {
                            return Err(SstError::Config(format!(
                                "--role {other:?}: expected joiner or donor"
                            )))
                        }
                    })
                }
                "--address" => args.address = value,
                "--datadir" => args.datadir = PathBuf::from(value),
                "--defaults-file" => args.defaults_file = Some(value.into()),
                "--defaults-extra-file" => args.defaults_extra_file = Some(value.into()),
                "--defaults-group-suffix" => args.defaults_group_suffix = Some(value),
                "--socket" => args.socket = Some(value),
                "--parent" => args.parent = value.parse().ok(),
                "--gtid" => args.gtid = Some(value),
                "--gtid-domain-id" => args.gtid_domain_id = Some(value),
                "--binlog" | "--log-bin" => args.binlog = (!value.is_empty()).then_some(value),
                "--innodb-data-home-dir"
                | "--innodb-log-group-home-dir"
                | "--innodb-undo-directory"
                    if !value.is_empty() =>
                {
                    args.separate_innodb_dirs.push(format!("{key}={value}"));
                }
                _ => {} // --progress, --host, --port, --local-port, ...: not needed here
            }
        }
        if args.role.is_none() {
            return Err(SstError::Config("--role joiner|donor is required".into()));
        }
        if args.address.is_empty() {
            return Err(SstError::Config("--address is required".into()));
        }
        if args.datadir.as_os_str().is_empty() {
            return Err(SstError::Config("--datadir is required".into()));
        }
        Ok(args)
    }

    /// The `--defaults-*` options, to hand to tools that read `my.cnf`.
    pub fn defaults_options(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(f) = &self.defaults_file {
            out.push(format!("--defaults-file={}", f.display()));
        }
        if let Some(f) = &self.defaults_extra_file {
            out.push(format!("--defaults-extra-file={}", f.display()));
        }
        if let Some(s) = &self.defaults_group_suffix {
            out.push(format!("--defaults-group-suffix={s}"));
        }
        out
    }
}

/// The server's own arguments minus those that name where options come from and how to
/// connect (mariadb-backup takes those separately, and insists `--defaults-file` comes
/// first on its command line).
fn server_arguments(argv: &[String]) -> Vec<String> {
    const DROPPED: &[&str] = &[
        "--defaults-file",
        "--defaults-extra-file",
        "--defaults-group-suffix",
        "--user",
        "--port",
        "--socket",
    ];
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in argv {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let key = arg.split_once('=').map_or(arg.as_str(), |(k, _)| k);
        if DROPPED.contains(&key) {
            skip_value = !arg.contains('=');
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// When to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compressor {
    /// Never.
    None,
    /// Always, with zstd.
    Zstd,
    /// Start without; switch to zstd once the link (not the joiner's disk) is measured to
    /// be the bottleneck.
    Auto,
}

/// The `[sst]` settings this method reads.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `parallel`: TCP streams (and mariadb-backup's `--parallel`, unless `backup_threads`).
    pub streams: u16,
    /// `backup_threads`: mariadb-backup's `--parallel`.
    pub backup_threads: u16,
    /// `compressor`: `auto` (default), `none` or `zstd`.
    pub compressor: Compressor,
    /// `compress_level`: zstd's level (default 1).
    pub compress_level: i32,
    /// `compress_threads`: streams that compress (each stream compresses on its own
    /// thread); at least `parallel`.
    pub compress_threads: u16,
    /// `rlimit`: bytes per second on the wire for all streams together (`K`, `M`, `G`).
    pub rate_limit: Option<u64>,
    /// `mariabackup`: the mariadb-backup binary.
    pub mariabackup: String,
    /// `reserve`: bytes that must stay free on the joiner after the snapshot landed.
    pub reserve: u64,
    /// `use_memory`: mariadb-backup `--prepare --use-memory`; default half the free RAM.
    pub use_memory: Option<u64>,
    /// `connect_timeout`: seconds the joiner waits for the donor (default 600).
    pub connect_timeout: u64,
    /// `donor_nice`: how much the donor's transfer (this program and mariadb-backup) lowers
    /// its CPU priority, so that the donor's clients keep theirs (default 10; 0 keeps it).
    pub donor_nice: i32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            streams: 4,
            backup_threads: 4,
            compressor: Compressor::Auto,
            compress_level: 1,
            compress_threads: 4,
            rate_limit: None,
            mariabackup: "mariadb-backup".into(),
            reserve: 0,
            use_memory: None,
            connect_timeout: 600,
            donor_nice: 10,
        }
    }
}

/// `value` as a number within `range`.
fn in_range<T: std::str::FromStr + PartialOrd>(
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> Option<T> {
    value.parse().ok().filter(|n| range.contains(n))
}

/// Parses `512`, `64K`, `10M`, `2G` (powers of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, scale) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&text[..i], 1 << 20),
        (i, 'g' | 'G') => (&text[..i], 1 << 30),
        (i, 't' | 'T') => (&text[..i], 1 << 40),
        _ => (text, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(scale)
}

impl Settings {
    /// Applies `key=value` pairs (keys with `-` or `_`); a bad value is a named error.
    pub fn apply(&mut self, pairs: &[(String, String)]) -> Result<(), SstError> {
        let mut threads_set = false;
        let mut backup_set = false;
        for (key, value) in pairs {
            let key = key.replace('-', "_");
            let bad = |what: &str| {
                SstError::Config(format!(
                    "[sst] {key}={value:?} is not valid: expected {what}"
                ))
            };
            match key.as_str() {
                "parallel" => {
                    self.streams =
                        in_range(value, 1..=64).ok_or_else(|| bad("a stream count from 1 to 64"))?
                }
                "backup_threads" => {
                    backup_set = true;
                    self.backup_threads =
                        in_range(value, 1..=64).ok_or_else(|| bad("a thread count from 1 to 64"))?
                }
                "compressor" => {
                    self.compressor = match value.as_str() {
                        "auto" => Compressor::Auto,
                        "none" | "" => Compressor::None,
                        "zstd" => Compressor::Zstd,
                        _ => return Err(bad("auto, none or zstd")),
                    }
                }
                "compress_level" => {
                    self.compress_level =
                        in_range(value, 1..=19).ok_or_else(|| bad("a zstd level from 1 to 19"))?
                }
                "compress_threads" => {
                    threads_set = true;
                    self.compress_threads =
                        in_range(value, 1..=64).ok_or_else(|| bad("a thread count from 1 to 64"))?
                }
                "rlimit" => {
                    self.rate_limit = Some(
                        parse_bytes(value)
                            .filter(|&b| b >= 64 << 10)
                            .ok_or_else(|| bad("bytes per second, at least 64K (e.g. 100M)"))?,
                    )
                }
                "mariabackup" => self.mariabackup = value.clone(),
                "reserve" => {
                    self.reserve = parse_bytes(value).ok_or_else(|| bad("a size (e.g. 10G)"))?
                }
                "use_memory" => {
                    self.use_memory = Some(
                        parse_bytes(value)
                            .filter(|&b| b >= 16 << 20)
                            .ok_or_else(|| bad("a size of at least 16M"))?,
                    )
                }
                "donor_nice" => {
                    self.donor_nice =
                        in_range(value, 0..=19).ok_or_else(|| bad("a niceness from 0 to 19"))?
                }
                "connect_timeout" => {
                    self.connect_timeout = value
                        .parse()
                        .ok()
                        .filter(|&s| s > 0)
                        .ok_or_else(|| bad("seconds"))?
                }
                _ => {} // settings of other methods share the [sst] group
            }
        }
        if !backup_set {
            self.backup_threads = self.streams;
        }
        if !threads_set {
            self.compress_threads = self.streams;
        }
        self.streams = self.streams.max(self.compress_threads.min(64));
        Ok(())
    }

    /// Reads the `[sst]` group the way the server reads its options (`my_print_defaults`,
    /// so `!include` and suffixes work), falling back to reading the defaults file directly.
    pub fn load(args: &Args) -> Result<Settings, SstError> {
        let mut settings = Settings::default();
        let pairs = read_group(args, "sst")?;
        settings.apply(&pairs)?;
        Ok(settings)
    }
}

/// The `key=value` pairs of one option group of the server's configuration.
pub fn read_group(args: &Args, group: &str) -> Result<Vec<(String, String)>, SstError> {
    let mut cmd = Command::new("my_print_defaults");
    cmd.args(args.defaults_options()).arg(group);
    if let Ok(out) = cmd.output() {
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| {
                    let line = line.strip_prefix("--")?;
                    let (k, v) = line.split_once('=').unwrap_or((line, ""));
                    Some((k.to_string(), v.to_string()))
                })
                .collect());
        }
    }
    match &args.defaults_file {
        Some(path) => read_group_from_file(path, group),
        None => Ok(Vec::new()),
    }
}

fn read_group_from_file(path: &Path, group: &str) -> Result<Vec<(String, String)>, SstError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SstError::io(format!("reading {}", path.display()), e))?;
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == group;
        } else if inside && !line.is_empty() && !line.starts_with(['#', ';']) {
            let (k, v) = line.split_once('=').unwrap_or((line, ""));
            pairs.push((k.trim().to_string(), v.trim().trim_matches('"').to_string()));
        }
    }
    Ok(pairs)
}

/// The SST credentials (`user`, `password`) the server passes in `WSREP_SST_OPT_AUTH`.
pub fn credentials() -> Option<(String, String)> {
    let auth = std::env::var("WSREP_SST_OPT_AUTH").ok()?;
    if auth.is_empty() || auth == "(null)" {
        return None;
    }
    let (user, password) = auth.split_once(':').unwrap_or((&auth, ""));
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn joiner_and_donor_arguments_parse() {
        let a = Args::parse(&argv(
            "--role joiner --address 127.0.0.1:4444 --datadir /d/ --defaults-file /d.cnf \
             --parent 12 --progress 0 --mysqld-args --wsrep-new-cluster --x",
        ))
        .unwrap();
        assert_eq!(a.role, Some(Role::Joiner));
        assert_eq!(a.address, "127.0.0.1:4444");
        assert_eq!(a.parent, Some(12));
        assert_eq!(a.mysqld_args, argv("--wsrep-new-cluster --x"));
        let b = Args::parse(&argv(
            "--role joiner --address a --datadir d --mysqld-args --defaults-file=/x.cnf \
             --user trireme --wsrep-new-cluster --port=3306",
        ))
        .unwrap();
        assert_eq!(b.mysqld_args, argv("--wsrep-new-cluster"));
        let d = Args::parse(&argv(
            "--role donor --address 127.0.0.1:4444/trireme/ab --socket /s --datadir /d \
             --gtid 6ba7b810-9dad-11d1-80b4-00c04fd430c8:5 --gtid-domain-id 0 --bypass",
        ))
        .unwrap();
        assert!(d.bypass);
        assert_eq!(d.socket.as_deref(), Some("/s"));
        assert!(Args::parse(&argv("--role donor")).is_err());
        assert!(Args::parse(&argv("--role x --address a --datadir d")).is_err());
    }

    #[test]
    fn settings_validate_with_named_errors() {
        let mut s = Settings::default();
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        s.apply(&pairs(&[
            ("parallel", "6"),
            ("rlimit", "100M"),
            ("compressor", "zstd"),
        ]))
        .unwrap();
        assert_eq!((s.streams, s.backup_threads, s.compress_threads), (6, 6, 6));
        assert_eq!(s.rate_limit, Some(100 << 20));
        assert_eq!(s.compressor, Compressor::Zstd);
        let error = s.apply(&pairs(&[("rlimit", "fast")])).unwrap_err();
        assert!(error.to_string().contains("[sst] rlimit"), "{error}");
        assert!(s.apply(&pairs(&[("parallel", "0")])).is_err());
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("x"), None);
    }
}
