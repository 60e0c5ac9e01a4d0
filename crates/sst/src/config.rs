//! The arguments MariaDB passes to an SST script, and the `[sst]` settings of `my.cnf`.
//!
//! TLS for the transfer (see [`resolve_tls`]), first match wins:
//! 1. `[sst] tkey`, `tcert` and optionally `tca` (MariaDB's older names);
//! 2. `[sst] ssl-key`, `ssl-cert` and optionally `ssl-ca`;
//! 3. the provider's `socket.ssl_key`, `socket.ssl_cert`, `socket.ssl_ca`,
//!    `socket.ssl_password_file` and `socket.ssl_cipher` from `wsrep_provider_options`
//!    (the server's command line, else its option files), when `socket.ssl` is on;
//! 4. none: plaintext (the session secret is still never sent, see [`crate::session`]).
//!
//! `[sst] encrypt` does not matter. A CA defaults to the certificate file, as in Galera;
//! an encrypted `[sst]` key is read with `socket.ssl_password_file`. Naming only some of a
//! set (a key without a certificate) is an error, not a silent fallback to plaintext.

use std::path::{Path, PathBuf};
use std::process::Command;

use options::ProviderOptions;
use tls::{Labels, TlsFiles};

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
    /// `log_copy_interval`: milliseconds between mariadb-backup's reads of the redo log
    /// (its `--log-copy-interval`, default 50 here, 1000 in mariadb-backup). Twice while the
    /// donor's provider is paused (from `BACKUP STAGE BLOCK_DDL` to `END`), mariadb-backup
    /// waits for its redo copy to catch up, up to one interval each time: the donor's
    /// commits wait that long.
    pub log_copy_interval_ms: u32,
    /// `donor_nice`: how much the donor's transfer (this program and mariadb-backup) lowers
    /// its CPU priority, so that the donor's clients keep theirs (default 10; 0 keeps it).
    pub donor_nice: i32,
    /// The TLS files of every connection, `None` for plaintext (see [`resolve_tls`]).
    pub tls: Option<TlsFiles>,
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
            log_copy_interval_ms: 50,
            donor_nice: 10,
            tls: None,
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
                "log_copy_interval" => {
                    self.log_copy_interval_ms = in_range(value, 10..=10_000)
                        .ok_or_else(|| bad("milliseconds from 10 to 10000"))?
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
        settings.tls = resolve_tls(&pairs, provider_options(args))?;
        Ok(settings)
    }
}

/// The `[sst]` option names of one set of TLS files, and the labels its errors use.
struct SstTlsNames {
    key: &'static str,
    cert: &'static str,
    ca: &'static str,
    /// A CA directory: not supported (the TLS stack takes a CA file).
    capath: &'static str,
    labels: Labels,
}

/// MariaDB's two sets of `[sst]` names, older first: the first set that names anything is
/// used, as the stock SST scripts do.
const SST_TLS_NAMES: [SstTlsNames; 2] = [
    SstTlsNames {
        key: "tkey",
        cert: "tcert",
        ca: "tca",
        capath: "tcapath",
        labels: Labels::SST,
    },
    SstTlsNames {
        key: "ssl-key",
        cert: "ssl-cert",
        ca: "ssl-ca",
        capath: "ssl-capath",
        labels: Labels {
            key: "[sst] ssl-key",
            cert: "[sst] ssl-cert",
            ca: "[sst] ssl-ca",
            password_file: "socket.ssl_password_file",
        },
    },
];

/// The TLS files of the trireme SST from the `[sst]` pairs and the provider's options (see
/// the module documentation for the order); `None`: plaintext. `provider` is only consulted
/// for `socket.ssl_password_file` when `[sst]` names the files, so an error reading it
/// matters only when the provider's files are the ones to use.
pub fn resolve_tls(
    sst: &[(String, String)],
    provider: Result<Option<ProviderOptions>, SstError>,
) -> Result<Option<TlsFiles>, SstError> {
    for names in &SST_TLS_NAMES {
        if let Some(files) = sst_tls_files(sst, names, &provider)? {
            return Ok(Some(files));
        }
    }
    let Some(options) = provider? else {
        return Ok(None);
    };
    options
        .tls_files()
        .map_err(|error| SstError::Config(error.to_string()))
}

/// One `[sst]` set: `None` when it names nothing, an error when it names only part.
fn sst_tls_files(
    sst: &[(String, String)],
    names: &SstTlsNames,
    provider: &Result<Option<ProviderOptions>, SstError>,
) -> Result<Option<TlsFiles>, SstError> {
    let [key, cert, ca, capath] =
        [names.key, names.cert, names.ca, names.capath].map(|name| last_value(sst, name));
    if let Some(capath) = capath {
        return Err(SstError::Config(format!(
            "[sst] {}={capath:?}: the trireme SST takes a CA file, not a directory: name \
             the CA file with [sst] {} instead",
            names.capath, names.ca
        )));
    }
    let (key, cert) = match (key, cert) {
        (None, None) if ca.is_none() => return Ok(None),
        (Some(key), Some(cert)) => (key, cert),
        (key, cert) => {
            let unset: Vec<&str> = [(names.key, key), (names.cert, cert)]
                .iter()
                .filter(|(_, value)| value.is_none())
                .map(|(name, _)| *name)
                .collect();
            return Err(SstError::Config(format!(
                "[sst] names part of a TLS setup but not [sst] {}: the trireme SST uses TLS \
                 when [sst] names both {} and {} (both sides present a certificate); set \
                 both, or none of {}, {} and {}",
                unset.join(" and [sst] "),
                names.key,
                names.cert,
                names.key,
                names.cert,
                names.ca
            )));
        }
    };
    let password_file = provider
        .as_ref()
        .ok()
        .and_then(|options| options.as_ref()?.socket_ssl_password_file.clone());
    Ok(Some(TlsFiles {
        key: key.into(),
        cert: cert.into(),
        ca: ca.map(PathBuf::from),
        password_file: password_file.map(PathBuf::from),
        cipher: None,
        labels: names.labels,
    }))
}

/// An option name as the server compares it: `_` and `-` alike, `loose-` ignored.
fn option_name(raw: &str) -> String {
    let name = raw.trim().replace('_', "-");
    match name.strip_prefix("loose-") {
        Some(rest) => rest.to_string(),
        None => name,
    }
}

/// The value of the last occurrence of `name` (the server's rule), `None` when it is
/// absent or empty.
fn last_value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(key, _)| option_name(key) == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// The server's `wsrep_provider_options`, parsed; `None` when it sets none.
pub fn provider_options(args: &Args) -> Result<Option<ProviderOptions>, SstError> {
    let Some(text) = provider_options_text(args)? else {
        return Ok(None);
    };
    ProviderOptions::parse(&text)
        .map(|(options, _warnings)| Some(options))
        .map_err(|error| {
            SstError::Config(format!(
                "wsrep_provider_options cannot be read for the SST's TLS settings \
                 (socket.ssl_*): {error}"
            ))
        })
}

/// The server's `wsrep_provider_options` text: its command line wins over its option files.
pub fn provider_options_text(args: &Args) -> Result<Option<String>, SstError> {
    const NAME: &str = "wsrep-provider-options";
    let mut found = None;
    let mut arguments = args.mysqld_args.iter();
    while let Some(argument) = arguments.next() {
        let Some(option) = argument.strip_prefix("--") else {
            continue;
        };
        match option.split_once('=') {
            Some((key, value)) if option_name(key) == NAME => found = Some(value.to_string()),
            None if option_name(option) == NAME => found = arguments.next().cloned(),
            _ => {}
        }
    }
    if found.is_some() {
        return Ok(found);
    }
    let pairs = read_server_groups(args)?;
    Ok(last_value(&pairs, NAME).map(str::to_string))
}

/// The groups the server reads (`[mysqld]`, `[server]`, `[mariadb]`, `[galera]`, ...).
const SERVER_GROUPS: &[&str] = &[
    "mysqld",
    "server",
    "mysqld-10.11",
    "mariadb",
    "mariadb-10.11",
    "mariadbd",
    "client-server",
    "galera",
];

/// The `key=value` pairs of the groups the server reads, in `my_print_defaults --mysqld`'s
/// order; without that tool, those groups of the defaults file.
fn read_server_groups(args: &Args) -> Result<Vec<(String, String)>, SstError> {
    if let Some(pairs) = print_defaults(args, "--mysqld") {
        return Ok(pairs);
    }
    let Some(path) = &args.defaults_file else {
        return Ok(Vec::new());
    };
    let mut pairs = Vec::new();
    for group in SERVER_GROUPS {
        pairs.extend(read_group_from_file(path, group)?);
    }
    Ok(pairs)
}

/// `my_print_defaults`' pairs for a group (or `--mysqld`); `None` when it cannot run.
fn print_defaults(args: &Args, group: &str) -> Option<Vec<(String, String)>> {
    let mut cmd = Command::new("my_print_defaults");
    cmd.args(args.defaults_options()).arg(group);
    let out = cmd.output().ok().filter(|out| out.status.success())?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let line = line.strip_prefix("--")?;
                let (k, v) = line.split_once('=').unwrap_or((line, ""));
                Some((k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

/// The `key=value` pairs of one option group of the server's configuration.
pub fn read_group(args: &Args, group: &str) -> Result<Vec<(String, String)>, SstError> {
    if let Some(pairs) = print_defaults(args, group) {
        return Ok(pairs);
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

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_validate_with_named_errors() {
        let mut s = Settings::default();
        s.apply(&pairs(&[
            ("parallel", "6"),
            ("rlimit", "100M"),
            ("compressor", "zstd"),
        ]))
        .unwrap();
        assert_eq!((s.streams, s.backup_threads, s.compress_threads), (6, 6, 6));
        assert_eq!(s.rate_limit, Some(100 << 20));
        assert_eq!(s.compressor, Compressor::Zstd);
        assert_eq!(s.log_copy_interval_ms, 50);
        s.apply(&pairs(&[("log-copy-interval", "200")])).unwrap();
        assert_eq!(s.log_copy_interval_ms, 200);
        let error = s.apply(&pairs(&[("log_copy_interval", "1s")])).unwrap_err();
        assert!(error.to_string().contains("milliseconds"), "{error}");
        let error = s.apply(&pairs(&[("rlimit", "fast")])).unwrap_err();
        assert!(error.to_string().contains("[sst] rlimit"), "{error}");
        assert!(s.apply(&pairs(&[("parallel", "0")])).is_err());
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("x"), None);
    }

    fn provider(text: &str) -> Result<Option<ProviderOptions>, SstError> {
        let (options, _warnings) = ProviderOptions::parse(text).unwrap();
        Ok(Some(options))
    }

    const PROVIDER_TLS: &str = "socket.ssl_key=/p/key.pem;socket.ssl_cert=/p/cert.pem;\
                                socket.ssl_ca=/p/ca.pem;socket.ssl_password_file=/p/pw;\
                                socket.ssl_cipher=AES256";

    #[test]
    fn sst_names_win_over_the_provider_files() {
        let sst = pairs(&[
            ("tkey", "/s/key.pem"),
            ("tcert", "/s/cert.pem"),
            ("tca", "/s/ca.pem"),
            ("ssl-key", "/other/key.pem"),
            ("encrypt", "0"),
        ]);
        let files = resolve_tls(&sst, provider(PROVIDER_TLS)).unwrap().unwrap();
        assert_eq!(files.labels, Labels::SST);
        assert_eq!(files.key, PathBuf::from("/s/key.pem"));
        assert_eq!(files.cert, PathBuf::from("/s/cert.pem"));
        assert_eq!(files.ca, Some(PathBuf::from("/s/ca.pem")));
        assert_eq!(files.password_file, Some(PathBuf::from("/p/pw")));
        assert_eq!(files.cipher, None);
        let later = pairs(&[("tkey", "/old"), ("tcert", "/c"), ("tkey", "/new")]);
        let files = resolve_tls(&later, Ok(None)).unwrap().unwrap();
        assert_eq!(
            files.key,
            PathBuf::from("/new"),
            "the last occurrence counts"
        );
        // An unreadable provider string matters only when its files are the ones to use.
        let broken = || Err(SstError::Config("unreadable".into()));
        assert!(resolve_tls(&later, broken()).unwrap().is_some());
        assert!(resolve_tls(&[], broken()).is_err());
    }

    #[test]
    fn ssl_key_names_work_in_every_spelling() {
        let sst = pairs(&[("ssl_key", "/s/k.pem"), ("loose-ssl-cert", "/s/c.pem")]);
        let files = resolve_tls(&sst, provider(PROVIDER_TLS)).unwrap().unwrap();
        assert_eq!(files.labels.key, "[sst] ssl-key");
        assert_eq!(files.key, PathBuf::from("/s/k.pem"));
        assert_eq!(files.cert, PathBuf::from("/s/c.pem"));
        assert_eq!(
            files.ca, None,
            "the CA defaults to the certificate in the TLS crate"
        );
    }

    #[test]
    fn the_provider_files_apply_when_sst_names_none_else_plaintext() {
        let sst = pairs(&[("parallel", "4"), ("encrypt", "4"), ("tkey", "")]);
        let files = resolve_tls(&sst, provider(PROVIDER_TLS)).unwrap().unwrap();
        assert_eq!(files.labels, Labels::PROVIDER);
        assert_eq!(files.key, PathBuf::from("/p/key.pem"));
        assert_eq!(files.ca, Some(PathBuf::from("/p/ca.pem")));
        assert_eq!(files.cipher.as_deref(), Some("AES256"));
        let off = format!("{PROVIDER_TLS};socket.ssl=no");
        assert_eq!(resolve_tls(&sst, provider(&off)).unwrap(), None);
        assert_eq!(resolve_tls(&sst, provider("gcache.size=1G")).unwrap(), None);
        assert_eq!(resolve_tls(&sst, Ok(None)).unwrap(), None);
    }

    #[test]
    fn a_partial_tls_setup_is_a_named_error() {
        let error = |list: &[(&str, &str)]| {
            resolve_tls(&pairs(list), provider(PROVIDER_TLS))
                .unwrap_err()
                .to_string()
        };
        let key_only = error(&[("tkey", "/k")]);
        assert!(key_only.contains("not [sst] tcert:"), "{key_only}");
        let ca_only = error(&[("tca", "/ca")]);
        assert!(
            ca_only.contains("not [sst] tkey and [sst] tcert"),
            "{ca_only}"
        );
        let cert_only = error(&[("ssl-cert", "/c")]);
        assert!(cert_only.contains("not [sst] ssl-key:"), "{cert_only}");
        let capath = error(&[("tkey", "/k"), ("tcert", "/c"), ("tcapath", "/dir")]);
        assert!(capath.contains("[sst] tcapath"), "{capath}");
    }

    #[test]
    fn provider_options_come_from_the_command_line_then_the_option_files() {
        let dir = tempfile::tempdir().unwrap();
        let cnf = dir.path().join("my.cnf");
        std::fs::write(
            &cnf,
            "[mysqld]\nwsrep_provider_options=\"socket.ssl_key=/f/k;socket.ssl_cert=/f/c\"\n\
             [sst]\nparallel=2\n",
        )
        .unwrap();
        let base = format!(
            "--role joiner --address a --datadir d --defaults-file {}",
            cnf.display()
        );
        let from_file = Args::parse(&argv(&base)).unwrap();
        assert_eq!(
            provider_options_text(&from_file).unwrap().as_deref(),
            Some("socket.ssl_key=/f/k;socket.ssl_cert=/f/c")
        );
        let settings = Settings::load(&from_file).unwrap();
        assert_eq!(settings.streams, 2);
        let tls = settings.tls.expect("the provider's TLS files");
        assert_eq!(
            (tls.labels, tls.key),
            (Labels::PROVIDER, PathBuf::from("/f/k"))
        );
        let command_line = format!(
            "{base} --mysqld-args --wsrep_provider_options=gcache.size=1G \
             --loose-wsrep-provider-options socket.ssl=no"
        );
        let from_command_line = Args::parse(&argv(&command_line)).unwrap();
        assert_eq!(
            provider_options_text(&from_command_line)
                .unwrap()
                .as_deref(),
            Some("socket.ssl=no"),
            "the command line wins, its last occurrence"
        );
        assert_eq!(Settings::load(&from_command_line).unwrap().tls, None);
    }
}
