//! [`ProviderOptions`]: the typed form of `wsrep_provider_options`.
//!
//! Three kinds of names reach the parser:
//! - options Trireme implements ([`implemented_options`]): validated and stored in typed
//!   fields; a bad value is an error naming the option, the value and the accepted form.
//!   Each has an effect, at start and at runtime: either the node uses the value, or
//!   nothing in Trireme reads it, and then giving it explicitly yields a
//!   [`Warning::NoEffect`] that says why (see [`options_table_markdown`]);
//! - other Galera options ([`crate::galera::GALERA_OPTIONS`]): accepted with a [`Warning`]
//!   and ignored, so that my.cnf files written for Galera still start;
//! - any other name: an error, as in Galera (`gu::Config::parse` refuses unknown keys, so a
//!   typo in my.cnf stops the node instead of being silently dropped).
//!
//! A few values depend on others, as in Galera; they are resolved after all entries are read
//! and stored complete, so the struct always holds what the node will actually use:
//! - `gmcast.listen_addr` defaults to `tcp://0.0.0.0:<base_port>`; a port written in it
//!   becomes `base_port`; its scheme is `ssl` exactly when `socket.ssl` is on;
//! - `ist.recv_addr` defaults to `<base_host>:<base_port + 1>`, and a missing port in it (or
//!   in `ist.recv_bind`) is `base_port + 1`;
//! - `gcache.dir` defaults to `base_dir`;
//! - `socket.ssl` defaults to on when `socket.ssl_cert` or `socket.ssl_key` is set, and TLS
//!   then needs both (as in Galera, so that a half-configured TLS stops the node instead of
//!   running in clear); an explicit `socket.ssl = no` turns it off.

use std::path::PathBuf;
use std::time::Duration;

use group::{ConfigError, GroupConfig};

use crate::galera;
use crate::syntax::{escape, parse_entries};
use crate::value::{
    format_duration, format_size, is_any_address, parse_bool, parse_duration, parse_endpoint,
    parse_size, true_false, yes_no, CommitOrder, Endpoint, FreezePurge, Isolation, PartialEndpoint,
    Scheme,
};
use crate::OptionsError;

/// Galera's `repl.max_ws_size` ceiling (and default): 2 GiB - 1.
pub const MAX_WS_SIZE_LIMIT: u64 = 2_147_483_647;

/// The provider options of one node, with every value resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderOptions {
    /// `base_dir`: the data directory (MariaDB passes its datadir; Galera's default is `.`).
    pub base_dir: String,
    /// `base_host`: the address other members and donors reach this node at (from
    /// `wsrep_node_address`). Empty when nothing says: the node then takes the local address
    /// of its route to the cluster when it connects.
    pub base_host: String,
    /// `base_port`: the group communication port (default 4567).
    pub base_port: u16,
    /// `gmcast.listen_addr`: where the group transport listens. Always has a scheme.
    pub gmcast_listen_addr: Endpoint,
    /// `gmcast.segment`: the node's segment (datacenter) number.
    pub gmcast_segment: u8,
    /// `gmcast.isolate`: cut the node off the group (MTR uses it to simulate partitions).
    pub gmcast_isolate: Isolation,
    /// `ist.recv_addr`: the address donors send IST to (an empty host is `base_host`, once
    /// known).
    pub ist_recv_addr: Endpoint,
    /// `ist.recv_bind`: the address the IST receiver binds to, when it differs from
    /// `ist.recv_addr` (NAT).
    pub ist_recv_bind: Option<Endpoint>,
    /// `evs.suspect_timeout`: silence after which a member is evicted.
    pub evs_suspect_timeout: Duration,
    /// `evs.inactive_timeout`: time outside any primary component after which a member
    /// gives up its membership.
    pub evs_inactive_timeout: Duration,
    /// `evs.keepalive_period`: how often an idle member signals that it is alive.
    pub evs_keepalive_period: Duration,
    /// `gcs.fc_limit`: receive queue length that makes a member ask the group to pause.
    pub gcs_fc_limit: u64,
    /// `gcs.fc_factor`: fraction of `gcs.fc_limit` at which the member lets go again.
    pub gcs_fc_factor: f64,
    /// `gcs.fc_single_primary` (alias `gcs.fc_master_slave`): flow control tuned for a
    /// single writing node.
    pub gcs_fc_single_primary: bool,
    /// `gcache.dir`: directory of the write-set cache files.
    pub gcache_dir: String,
    /// `gcache.name`: file name of the write-set cache (relative to `gcache.dir`).
    pub gcache_name: String,
    /// `gcache.size`: size of the preallocated write-set cache, in bytes.
    pub gcache_size: u64,
    /// `gcache.page_size`: size of an overflow page, in bytes.
    pub gcache_page_size: u64,
    /// `gcache.keep_pages_size`: overflow pages kept after use, in bytes.
    pub gcache_keep_pages_size: u64,
    /// `gcache.recover`: rebuild the cache index at startup so the node can serve IST.
    pub gcache_recover: bool,
    /// `gcache.freeze_purge_at_seqno` (Percona): stop purging from a seqno on.
    pub gcache_freeze_purge_at_seqno: FreezePurge,
    /// `gcache.keep_seconds` (Trireme): keep write-sets at least this many seconds, so that a
    /// node down for a known time can rejoin by IST; 0 keeps by size only.
    pub gcache_keep_seconds: u64,
    /// `gcache.max_disk_bytes` (Trireme): ceiling on the cache's disk use, ring and pages
    /// together, that no retention rule may exceed; 0 for no ceiling.
    pub gcache_max_disk_bytes: u64,
    /// `repl.max_ws_size`: largest write-set, in bytes (MariaDB's `wsrep_max_ws_size`).
    pub repl_max_ws_size: u64,
    /// `repl.commit_order`: how far commits may leave the total order.
    pub repl_commit_order: CommitOrder,
    /// `repl.causal_read_timeout`: how long a causal read waits for the node to catch up.
    pub repl_causal_read_timeout: Duration,
    /// `cert.log_conflicts`: log the details of every certification failure.
    pub cert_log_conflicts: bool,
    /// `pc.bootstrap`: a request to form a new primary component from this node. The
    /// provider acts on it and clears it with [`ProviderOptions::take_pc_bootstrap`].
    pub pc_bootstrap: bool,
    /// `pc.ignore_sb`: keep accepting writes after a split brain (dangerous; tests use it).
    pub pc_ignore_sb: bool,
    /// `pc.weight`: the node's weight in quorum decisions.
    pub pc_weight: u8,
    /// `socket.ssl`: TLS for group communication and IST.
    pub socket_ssl: bool,
    /// `socket.ssl_ca`: CA certificate file.
    pub socket_ssl_ca: Option<String>,
    /// `socket.ssl_cert`: the node's certificate file.
    pub socket_ssl_cert: Option<String>,
    /// `socket.ssl_key`: the node's private key file.
    pub socket_ssl_key: Option<String>,
    /// `socket.ssl_password_file`: file whose first line is the password of an encrypted
    /// `socket.ssl_key`.
    pub socket_ssl_password_file: Option<String>,
    /// `socket.ssl_cipher`: the cipher list, in Galera's (OpenSSL's) notation, as given.
    pub socket_ssl_cipher: Option<String>,
    /// `socket.ssl_reload`: a request, made at runtime with TLS on, to read the TLS files
    /// again. The provider acts on it and clears it with [`ProviderOptions::take_ssl_reload`].
    pub socket_ssl_reload: bool,
}

impl Default for ProviderOptions {
    /// Galera 26.4's defaults, with no node address and no data directory.
    fn default() -> Self {
        ProviderOptions {
            base_dir: ".".to_owned(),
            base_host: String::new(),
            base_port: 4567,
            gmcast_listen_addr: Endpoint {
                scheme: Some(Scheme::Tcp),
                host: "0.0.0.0".to_owned(),
                port: 4567,
            },
            gmcast_segment: 0,
            gmcast_isolate: Isolation::Off,
            ist_recv_addr: Endpoint {
                scheme: None,
                host: String::new(),
                port: 4568,
            },
            ist_recv_bind: None,
            evs_suspect_timeout: Duration::from_secs(5),
            evs_inactive_timeout: Duration::from_secs(15),
            evs_keepalive_period: Duration::from_secs(1),
            gcs_fc_limit: 16,
            gcs_fc_factor: 1.0,
            gcs_fc_single_primary: false,
            gcache_dir: ".".to_owned(),
            gcache_name: "galera.cache".to_owned(),
            gcache_size: 128 << 20,
            gcache_page_size: 128 << 20,
            gcache_keep_pages_size: 0,
            gcache_recover: true,
            gcache_freeze_purge_at_seqno: FreezePurge::Off,
            gcache_keep_seconds: 0,
            gcache_max_disk_bytes: 0,
            repl_max_ws_size: MAX_WS_SIZE_LIMIT,
            repl_commit_order: CommitOrder::Ordered,
            repl_causal_read_timeout: Duration::from_secs(30),
            cert_log_conflicts: false,
            pc_bootstrap: false,
            pc_ignore_sb: false,
            pc_weight: 1,
            socket_ssl: false,
            socket_ssl_ca: None,
            socket_ssl_cert: None,
            socket_ssl_key: None,
            socket_ssl_password_file: None,
            socket_ssl_cipher: None,
            socket_ssl_reload: false,
        }
    }
}

/// What the server hands the provider at `init` besides the option string.
#[derive(Clone, Copy, Debug, Default)]
pub struct InitContext<'a> {
    /// `wsrep_node_address` (`host` or `host:port`): sets `base_host` and, with a port,
    /// `base_port`, before the option string is applied (as Galera does).
    pub node_address: Option<&'a str>,
    /// The server's data directory: sets `base_dir`.
    pub data_dir: Option<&'a str>,
}

/// Something the parser accepted but wants the operator to know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    /// A Galera option Trireme does not implement.
    #[error("Galera option {option} = {value:?} accepted but not implemented by Trireme; ignored")]
    NotImplemented {
        /// The option name.
        option: String,
        /// The value as given.
        value: String,
    },
    /// An option Trireme accepts and checks but that changes nothing in Trireme, given
    /// explicitly (at start, or with `SET GLOBAL`).
    #[error("provider option {option} = {value:?} has no effect in Trireme: {reason}")]
    NoEffect {
        /// The option name.
        option: String,
        /// The value as given.
        value: String,
        /// Why it has no effect, in one sentence.
        reason: &'static str,
    },
}

/// What giving an implemented option does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// The node uses the value.
    Applies,
    /// Accepted, checked and listed, but nothing in Trireme reads it; the reason says why.
    NoEffect(&'static str),
}

/// The options Trireme implements. Each has a name, a value form, a runtime flag and a
/// rendering; the tables below are the single place these are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    BaseDir,
    BaseHost,
    BasePort,
    CertLogConflicts,
    EvsInactiveTimeout,
    EvsKeepalivePeriod,
    EvsSuspectTimeout,
    GcacheDir,
    GcacheFreezePurgeAtSeqno,
    GcacheKeepPagesSize,
    GcacheKeepSeconds,
    GcacheMaxDiskBytes,
    GcacheName,
    GcachePageSize,
    GcacheRecover,
    GcacheSize,
    GcsFcFactor,
    GcsFcLimit,
    GcsFcMasterSlave,
    GcsFcSinglePrimary,
    GmcastIsolate,
    GmcastListenAddr,
    GmcastSegment,
    IstRecvAddr,
    IstRecvBind,
    PcBootstrap,
    PcIgnoreSb,
    PcWeight,
    ReplCausalReadTimeout,
    ReplCommitOrder,
    ReplMaxWsSize,
    SocketSsl,
    SocketSslCa,
    SocketSslCert,
    SocketSslCipher,
    SocketSslKey,
    SocketSslPasswordFile,
    SocketSslReload,
}

impl Setting {
    const ALL: [Setting; 38] = [
        Setting::BaseDir,
        Setting::BaseHost,
        Setting::BasePort,
        Setting::CertLogConflicts,
        Setting::EvsInactiveTimeout,
        Setting::EvsKeepalivePeriod,
        Setting::EvsSuspectTimeout,
        Setting::GcacheDir,
        Setting::GcacheFreezePurgeAtSeqno,
        Setting::GcacheKeepPagesSize,
        Setting::GcacheKeepSeconds,
        Setting::GcacheMaxDiskBytes,
        Setting::GcacheName,
        Setting::GcachePageSize,
        Setting::GcacheRecover,
        Setting::GcacheSize,
        Setting::GcsFcFactor,
        Setting::GcsFcLimit,
        Setting::GcsFcMasterSlave,
        Setting::GcsFcSinglePrimary,
        Setting::GmcastIsolate,
        Setting::GmcastListenAddr,
        Setting::GmcastSegment,
        Setting::IstRecvAddr,
        Setting::IstRecvBind,
        Setting::PcBootstrap,
        Setting::PcIgnoreSb,
        Setting::PcWeight,
        Setting::ReplCausalReadTimeout,
        Setting::ReplCommitOrder,
        Setting::ReplMaxWsSize,
        Setting::SocketSsl,
        Setting::SocketSslCa,
        Setting::SocketSslCert,
        Setting::SocketSslCipher,
        Setting::SocketSslKey,
        Setting::SocketSslPasswordFile,
        Setting::SocketSslReload,
    ];

    fn name(self) -> &'static str {
        match self {
            Setting::BaseDir => "base_dir",
            Setting::BaseHost => "base_host",
            Setting::BasePort => "base_port",
            Setting::CertLogConflicts => "cert.log_conflicts",
            Setting::EvsInactiveTimeout => "evs.inactive_timeout",
            Setting::EvsKeepalivePeriod => "evs.keepalive_period",
            Setting::EvsSuspectTimeout => "evs.suspect_timeout",
            Setting::GcacheDir => "gcache.dir",
            Setting::GcacheFreezePurgeAtSeqno => "gcache.freeze_purge_at_seqno",
            Setting::GcacheKeepPagesSize => "gcache.keep_pages_size",
            Setting::GcacheKeepSeconds => "gcache.keep_seconds",
            Setting::GcacheMaxDiskBytes => "gcache.max_disk_bytes",
            Setting::GcacheName => "gcache.name",
            Setting::GcachePageSize => "gcache.page_size",
            Setting::GcacheRecover => "gcache.recover",
            Setting::GcacheSize => "gcache.size",
            Setting::GcsFcFactor => "gcs.fc_factor",
            Setting::GcsFcLimit => "gcs.fc_limit",
            Setting::GcsFcMasterSlave => "gcs.fc_master_slave",
            Setting::GcsFcSinglePrimary => "gcs.fc_single_primary",
            Setting::GmcastIsolate => "gmcast.isolate",
            Setting::GmcastListenAddr => "gmcast.listen_addr",
            Setting::GmcastSegment => "gmcast.segment",
            Setting::IstRecvAddr => "ist.recv_addr",
            Setting::IstRecvBind => "ist.recv_bind",
            Setting::PcBootstrap => "pc.bootstrap",
            Setting::PcIgnoreSb => "pc.ignore_sb",
            Setting::PcWeight => "pc.weight",
            Setting::ReplCausalReadTimeout => "repl.causal_read_timeout",
            Setting::ReplCommitOrder => "repl.commit_order",
            Setting::ReplMaxWsSize => "repl.max_ws_size",
            Setting::SocketSsl => "socket.ssl",
            Setting::SocketSslCa => "socket.ssl_ca",
            Setting::SocketSslCert => "socket.ssl_cert",
            Setting::SocketSslCipher => "socket.ssl_cipher",
            Setting::SocketSslKey => "socket.ssl_key",
            Setting::SocketSslPasswordFile => "socket.ssl_password_file",
            Setting::SocketSslReload => "socket.ssl_reload",
        }
    }

    /// Whether `SET GLOBAL wsrep_provider_options` may change it. Follows Galera's
    /// `param_set` (which of its options are dynamic); Trireme's own additions are retention
    /// rules and so may change at runtime too.
    fn runtime(self) -> bool {
        match self {
            Setting::CertLogConflicts
            | Setting::EvsInactiveTimeout
            | Setting::EvsKeepalivePeriod
            | Setting::EvsSuspectTimeout
            | Setting::GcacheFreezePurgeAtSeqno
            | Setting::GcacheKeepPagesSize
            | Setting::GcacheKeepSeconds
            | Setting::GcacheMaxDiskBytes
            | Setting::GcachePageSize
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit
            | Setting::GmcastIsolate
            | Setting::PcBootstrap
            | Setting::PcIgnoreSb
            | Setting::PcWeight
            | Setting::ReplCausalReadTimeout
            | Setting::ReplMaxWsSize
            | Setting::SocketSslReload => true,
            Setting::BaseDir
            | Setting::BaseHost
            | Setting::BasePort
            | Setting::GcacheDir
            | Setting::GcacheName
            | Setting::GcacheRecover
            | Setting::GcacheSize
            | Setting::GcsFcMasterSlave
            | Setting::GcsFcSinglePrimary
            | Setting::GmcastListenAddr
            | Setting::GmcastSegment
            | Setting::IstRecvAddr
            | Setting::IstRecvBind
            | Setting::ReplCommitOrder
            | Setting::SocketSsl
            | Setting::SocketSslCa
            | Setting::SocketSslCert
            | Setting::SocketSslCipher
            | Setting::SocketSslKey
            | Setting::SocketSslPasswordFile => false,
        }
    }

    /// Whether the stored value is resolved from other options after parsing (see the
    /// module documentation). None of these may change at runtime.
    fn derived(self) -> bool {
        matches!(
            self,
            Setting::GcacheDir
                | Setting::GmcastListenAddr
                | Setting::IstRecvAddr
                | Setting::IstRecvBind
                | Setting::SocketSsl
        )
    }

    fn from_name(name: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|key| key.name() == name)
    }

    /// What the option does when the option string given at start sets it. An option has
    /// an effect only if something outside this crate reads its value; check with a grep of
    /// the field before changing an entry here.
    fn startup_effect(self) -> Effect {
        match self {
            Setting::CertLogConflicts => Effect::NoEffect(NO_CONFLICT_LOG),
            Setting::EvsInactiveTimeout => Effect::NoEffect(NO_INACTIVE_TIMER),
            Setting::EvsKeepalivePeriod => Effect::NoEffect(HEARTBEATS_ARE_KEEPALIVES),
            Setting::GmcastSegment => Effect::NoEffect(NO_SEGMENTS),
            Setting::PcWeight => Effect::NoEffect(NO_WEIGHTS),
            Setting::ReplCommitOrder => Effect::NoEffect(ALWAYS_IN_ORDER),
            Setting::SocketSslReload => Effect::NoEffect(RELOAD_AT_START),
            Setting::BaseDir
            | Setting::BaseHost
            | Setting::BasePort
            | Setting::EvsSuspectTimeout
            | Setting::GcacheDir
            | Setting::GcacheFreezePurgeAtSeqno
            | Setting::GcacheKeepPagesSize
            | Setting::GcacheKeepSeconds
            | Setting::GcacheMaxDiskBytes
            | Setting::GcacheName
            | Setting::GcachePageSize
            | Setting::GcacheRecover
            | Setting::GcacheSize
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit
            | Setting::GcsFcMasterSlave
            | Setting::GcsFcSinglePrimary
            | Setting::GmcastIsolate
            | Setting::GmcastListenAddr
            | Setting::IstRecvAddr
            | Setting::IstRecvBind
            | Setting::PcBootstrap
            | Setting::PcIgnoreSb
            | Setting::ReplCausalReadTimeout
            | Setting::ReplMaxWsSize
            | Setting::SocketSsl
            | Setting::SocketSslCa
            | Setting::SocketSslCert
            | Setting::SocketSslCipher
            | Setting::SocketSslKey
            | Setting::SocketSslPasswordFile => Effect::Applies,
        }
    }

    /// What changing the option with `SET GLOBAL wsrep_provider_options` does (for the
    /// options that may change at runtime): what `options_set` in the provider passes on to
    /// the running node.
    fn runtime_effect(self) -> Effect {
        debug_assert!(self.runtime(), "{} is not a runtime option", self.name());
        match self {
            Setting::GcacheKeepPagesSize
            | Setting::GcacheKeepSeconds
            | Setting::GcacheMaxDiskBytes
            | Setting::GcachePageSize => Effect::NoEffect(CACHE_SET_AT_OPEN),
            Setting::PcBootstrap => Effect::NoEffect(BOOTSTRAP_ONLY_AT_CONNECT),
            // With TLS on; with TLS off, see `apply_runtime`.
            Setting::SocketSslReload => Effect::Applies,
            _ => self.startup_effect(),
        }
    }
}

// Why an option has no effect, in the words of the domain. `docs/options.md` shows them too.
const NO_CONFLICT_LOG: &str = "Trireme does not log certification conflicts one by one: \
     wsrep_local_cert_failures counts them and each is traced at debug level";
const NO_INACTIVE_TIMER: &str = "Trireme has no separate inactivity timer: the primary \
     component evicts a silent member after evs.suspect_timeout, and an evicted member \
     rejoins as a new one once it learns of it (the value must still be at least \
     evs.suspect_timeout, as in Galera)";
const HEARTBEATS_ARE_KEEPALIVES: &str = "the Raft leader's heartbeats, every 20 ms (2 group \
     ticks of 10 ms), are the keepalives, whatever this option says";
const NO_SEGMENTS: &str = "the Raft leader sends every write-set to each member directly: \
     there are no segment relays, and donor choice ignores segments";
const NO_WEIGHTS: &str = "Trireme's quorum is a Raft majority in which every member counts \
     once; there are no weights";
const ALWAYS_IN_ORDER: &str = "Trireme always commits in the global order, as 3 (NO_OOOC) \
     asks; it offers no out-of-order commit";
const RELOAD_AT_START: &str = "a reload request means something only at runtime; at start \
     the TLS files are read anyway";
const NOTHING_TO_RELOAD: &str = "socket.ssl is off: there are no TLS files to reload";
const CACHE_SET_AT_OPEN: &str = "the running write-set cache keeps the value it opened \
     with; set the option in my.cnf for the next start";
const BOOTSTRAP_ONLY_AT_CONNECT: &str = "a running node acts on no bootstrap request: \
     Trireme forms a new primary component only when it connects (an empty gcomm:// \
     address, --wsrep-new-cluster, or pc.bootstrap in my.cnf), so the request is dropped \
     rather than kept for a later reconnect";

/// The names of the options Trireme implements, in byte order.
pub fn implemented_options() -> impl Iterator<Item = &'static str> {
    Setting::ALL.into_iter().map(Setting::name)
}

/// The names of the options `SET GLOBAL wsrep_provider_options` may change, in byte order.
/// (Galera options Trireme ignores are accepted at runtime, with a warning, when Galera
/// allows changing them; see [`crate::galera::GaleraOption::runtime`].)
pub fn runtime_options() -> impl Iterator<Item = &'static str> {
    Setting::ALL
        .into_iter()
        .filter(|key| key.runtime())
        .map(Setting::name)
}

/// Whether Trireme implements the option `name`.
pub fn is_implemented(name: &str) -> bool {
    Setting::from_name(name).is_some()
}

const BOOL_FORM: &str = "one of yes/no, true/false, on/off, 1/0";
const SIZE_FORM: &str = "a byte count with an optional K, M, G or T suffix, such as 128M";
const POSITIVE_SIZE_FORM: &str =
    "a positive byte count with an optional K, M, G or T suffix, such as 128M";
const MAX_WS_SIZE_FORM: &str =
    "a byte count from 1 to 2147483647, with an optional K, M or G suffix";
const PORT_FORM: &str = "a port number from 1 to 65535";
const HOST_FORM: &str = "a host name or IP address other than 0.0.0.0 or ::";
const ENDPOINT_FORM: &str = "an address [tcp:// or ssl://]host[:port]";
const BYTE_FORM: &str = "an integer from 0 to 255";
const PATH_FORM: &str = "a non-empty path";
const DURATION_FORM: &str = "a positive ISO 8601 duration such as PT1S";
const SECONDS_FORM: &str =
    "a whole number of seconds, or an ISO 8601 duration of whole seconds such as PT1H";
const FREEZE_FORM: &str = "-1, a seqno from 0 to 9223372036854775807, or now";
const COMMIT_ORDER_FORM: &str = "0 (BYPASS), 1 (OOOC), 2 (LOCAL_OOOC) or 3 (NO_OOOC)";
const ISOLATE_FORM: &str = "0 (off), 1 (isolated) or 2 (isolated, then quit)";

/// The values given for the derived options, before they are resolved.
#[derive(Default)]
struct Explicit {
    listen_addr: Option<PartialEndpoint>,
    ist_recv_addr: Option<PartialEndpoint>,
    ist_recv_bind: Option<PartialEndpoint>,
    gcache_dir: Option<String>,
    socket_ssl: Option<bool>,
}

fn no_effect(key: Setting, value: &str, reason: &'static str) -> Warning {
    Warning::NoEffect {
        option: key.name().to_owned(),
        value: value.to_owned(),
        reason,
    }
}

fn invalid(key: Setting, value: &str, expected: &'static str) -> OptionsError {
    OptionsError::InvalidValue {
        option: key.name().to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn from_group_error(error: ConfigError) -> OptionsError {
    match error {
        ConfigError::InvalidValue {
            option,
            value,
            expected,
        } => OptionsError::InvalidValue {
            option,
            value,
            expected,
        },
        ConfigError::Inconsistent(reason) => OptionsError::Inconsistent(reason),
    }
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn parse_unsigned<T: std::str::FromStr>(text: &str) -> Option<T> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl ProviderOptions {
    /// Parses the option string given at startup (`wsrep_provider_options` in my.cnf), on
    /// top of Galera's defaults. Returns the options and a warning per ignored Galera option
    /// and per option given that has no effect in Trireme.
    pub fn parse(text: &str) -> Result<(ProviderOptions, Vec<Warning>), OptionsError> {
        ProviderOptions::parse_with(text, &InitContext::default())
    }

    /// [`ProviderOptions::parse`] with the node address and data directory the server passes
    /// to `init`; the option string may still override what they set.
    pub fn parse_with(
        text: &str,
        context: &InitContext<'_>,
    ) -> Result<(ProviderOptions, Vec<Warning>), OptionsError> {
        let entries = parse_entries(text)?;
        let mut options = ProviderOptions::default();
        options.apply_context(context)?;
        let mut explicit = Explicit::default();
        let mut warnings = Vec::new();
        let mut unknown = Vec::new();
        for entry in entries {
            if let Some(key) = Setting::from_name(&entry.key) {
                options.apply(key, &entry.value, &mut explicit)?;
                if let Effect::NoEffect(reason) = key.startup_effect() {
                    warnings.push(no_effect(key, &entry.value, reason));
                }
            } else if galera::lookup(&entry.key).is_some() {
                warnings.push(Warning::NotImplemented {
                    option: entry.key,
                    value: entry.value,
                });
            } else if !unknown.contains(&entry.key) {
                unknown.push(entry.key);
            }
        }
        if !unknown.is_empty() {
            return Err(OptionsError::Unknown { options: unknown });
        }
        // A reload request exists only at runtime (a listing of a node with TLS on shows
        // `socket.ssl_reload = 1`, and must parse back to the same options).
        options.socket_ssl_reload = false;
        options.resolve(&explicit)?;
        options.validate()?;
        Ok((options, warnings))
    }

    /// Applies `SET GLOBAL wsrep_provider_options = '<text>'`: changes only the options
    /// named, all or none of them. An option that cannot change at runtime is refused unless
    /// the value given is the one in effect (as in Galera). Galera options Trireme ignores
    /// are accepted with a warning when Galera allows changing them at runtime, and so is a
    /// change that has no effect on the running node.
    pub fn set_runtime(&mut self, text: &str) -> Result<Vec<Warning>, OptionsError> {
        let entries = parse_entries(text)?;
        let mut next = self.clone();
        let mut warnings = Vec::new();
        let mut unknown = Vec::new();
        for entry in entries {
            if let Some(key) = Setting::from_name(&entry.key) {
                if key.runtime() {
                    next.apply_runtime(key, &entry.value, &mut warnings)?;
                } else if !next.is_current_value(key, &entry.value)? {
                    return Err(OptionsError::NotRuntime { option: entry.key });
                }
            } else if let Some(option) = galera::lookup(&entry.key) {
                // The listing shows Galera's default for these: giving it back (a whole
                // `@@wsrep_provider_options` restored, as scripts and tests do) changes
                // nothing and is accepted quietly, as Galera accepts it.
                if option.listed && entry.value == option.default {
                    continue;
                }
                if !option.runtime {
                    return Err(OptionsError::NotRuntime { option: entry.key });
                }
                warnings.push(Warning::NotImplemented {
                    option: entry.key,
                    value: entry.value,
                });
            } else if !unknown.contains(&entry.key) {
                unknown.push(entry.key);
            }
        }
        if !unknown.is_empty() {
            return Err(OptionsError::Unknown { options: unknown });
        }
        next.validate()?;
        *self = next;
        Ok(warnings)
    }

    /// The option listing `@@wsrep_provider_options` shows, in Galera's format
    /// (`key = value; ` for each option, sorted by name): every option of Galera's default
    /// listing, with Trireme's values where Trireme implements the option and Galera's
    /// default where it does not, followed in the same order by Trireme's other options
    /// whenever they are set away from their defaults. Parsing the listing gives back the
    /// same options.
    pub fn render(&self) -> String {
        let defaults = ProviderOptions::default();
        let mut rows: Vec<(&'static str, String)> = galera::GALERA_OPTIONS
            .iter()
            .filter(|option| option.listed)
            .map(|option| match Setting::from_name(option.name) {
                Some(key) => (option.name, self.value_text(key)),
                None => (option.name, option.default.to_owned()),
            })
            .collect();
        for key in Setting::ALL {
            let listed = galera::lookup(key.name()).is_some_and(|option| option.listed);
            if !listed && self.shows_extra(key, &defaults) {
                rows.push((key.name(), self.value_text(key)));
            }
        }
        rows.sort_by(|a, b| a.0.cmp(b.0));
        rows.iter()
            .map(|(name, value)| format!("{name} = {}; ", escape(value)))
            .collect()
    }

    /// The group layer's settings: Galera's `evs.*` and `gcs.fc_*` values on top of the group
    /// layer's own defaults for everything Galera has no option for. (`evs.keepalive_period`
    /// is not mapped: the group layer's Raft heartbeats are its keepalives.)
    pub fn group_config(&self) -> GroupConfig {
        let mut config = GroupConfig::default();
        config.suspect_timeout = self.evs_suspect_timeout;
        config.inactive_timeout = self.evs_inactive_timeout;
        config.fc_limit = self.gcs_fc_limit;
        config.fc_factor = self.gcs_fc_factor;
        config.fc_single_primary = self.gcs_fc_single_primary;
        config.max_ws_size = self.repl_max_ws_size;
        config.ignore_split_brain = self.pc_ignore_sb;
        config
    }

    /// The write-set cache file: `gcache.name`, inside `gcache.dir` unless it is absolute.
    pub fn gcache_path(&self) -> PathBuf {
        let name = PathBuf::from(&self.gcache_name);
        if name.is_absolute() {
            name
        } else {
            PathBuf::from(&self.gcache_dir).join(name)
        }
    }

    /// Returns whether a bootstrap was requested (`pc.bootstrap`) and clears the request.
    pub fn take_pc_bootstrap(&mut self) -> bool {
        std::mem::take(&mut self.pc_bootstrap)
    }

    /// Returns whether a reload of the TLS files was requested (`socket.ssl_reload`) and
    /// clears the request.
    pub fn take_ssl_reload(&mut self) -> bool {
        std::mem::take(&mut self.socket_ssl_reload)
    }

    /// One runtime option of [`ProviderOptions::set_runtime`]: stores the value, or only
    /// checks it for a request nothing acts on, and warns when the change has no effect.
    fn apply_runtime(
        &mut self,
        key: Setting,
        value: &str,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), OptionsError> {
        debug_assert!(!key.derived(), "{} is derived", key.name());
        let mut next = self.clone();
        next.apply(key, value, &mut Explicit::default())?;
        let (effect, keep) = match key {
            Setting::SocketSslReload if !self.socket_ssl => {
                (Effect::NoEffect(NOTHING_TO_RELOAD), false)
            }
            // The only taker of this request is the next connect, which would then form a
            // new primary component long after the operator asked: a split brain in waiting.
            Setting::PcBootstrap => {
                let effect = key.runtime_effect();
                (effect, effect == Effect::Applies)
            }
            _ => (key.runtime_effect(), true),
        };
        if keep {
            *self = next;
        }
        if let Effect::NoEffect(reason) = effect {
            warnings.push(no_effect(key, value, reason));
        }
        Ok(())
    }

    fn apply_context(&mut self, context: &InitContext<'_>) -> Result<(), OptionsError> {
        if let Some(dir) = context.data_dir.and_then(non_empty) {
            self.base_dir = dir;
        }
        let Some(address) = context.node_address.filter(|a| !a.trim().is_empty()) else {
            return Ok(());
        };
        let invalid_address = || OptionsError::InvalidValue {
            option: "wsrep_node_address".to_owned(),
            value: address.to_owned(),
            expected: "host[:port] with a host other than 0.0.0.0 or ::",
        };
        let endpoint = parse_endpoint(address)
            .filter(|endpoint| !is_any_address(&endpoint.host))
            .ok_or_else(invalid_address)?;
        self.base_host = endpoint.host;
        if let Some(port) = endpoint.port {
            self.base_port = port;
        }
        Ok(())
    }

    /// Parses `value` for `key` and stores it (or, for derived options, records it in
    /// `explicit` for [`ProviderOptions::resolve`]).
    fn apply(
        &mut self,
        key: Setting,
        value: &str,
        explicit: &mut Explicit,
    ) -> Result<(), OptionsError> {
        let bad = |expected| invalid(key, value, expected);
        let boolean = || parse_bool(value).ok_or_else(|| bad(BOOL_FORM));
        let size = || parse_size(value).ok_or_else(|| bad(SIZE_FORM));
        let byte = || parse_unsigned::<u8>(value).ok_or_else(|| bad(BYTE_FORM));
        let path = || non_empty(value).ok_or_else(|| bad(PATH_FORM));
        let endpoint = || match value.trim() {
            "" => Ok(None),
            text => parse_endpoint(text)
                .map(Some)
                .ok_or_else(|| bad(ENDPOINT_FORM)),
        };
        match key {
            Setting::BaseDir => self.base_dir = path()?,
            // The listing of a node with no address shows `base_host = `: it parses back.
            Setting::BaseHost if value.trim().is_empty() => {}
            Setting::BaseHost => {
                self.base_host = parse_endpoint(value)
                    .filter(|e| e.scheme.is_none() && e.port.is_none())
                    .filter(|e| !is_any_address(&e.host))
                    .map(|e| e.host)
                    .ok_or_else(|| bad(HOST_FORM))?;
            }
            Setting::BasePort => {
                self.base_port = parse_unsigned::<u16>(value)
                    .filter(|port| *port != 0)
                    .ok_or_else(|| bad(PORT_FORM))?;
            }
            Setting::CertLogConflicts => self.cert_log_conflicts = boolean()?,
            Setting::EvsInactiveTimeout
            | Setting::EvsSuspectTimeout
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit => {
                // The group layer owns these values' forms and ranges.
                let mut scratch = GroupConfig::default();
                let applied = scratch
                    .apply_option(key.name(), value)
                    .map_err(from_group_error)?;
                debug_assert!(applied, "the group layer owns {}", key.name());
                match key {
                    Setting::EvsInactiveTimeout => {
                        self.evs_inactive_timeout = scratch.inactive_timeout
                    }
                    Setting::EvsSuspectTimeout => {
                        self.evs_suspect_timeout = scratch.suspect_timeout
                    }
                    Setting::GcsFcFactor => self.gcs_fc_factor = scratch.fc_factor,
                    _ => self.gcs_fc_limit = scratch.fc_limit,
                }
            }
            Setting::EvsKeepalivePeriod => {
                self.evs_keepalive_period =
                    positive_duration(value).ok_or_else(|| bad(DURATION_FORM))?
            }
            Setting::GcacheDir => explicit.gcache_dir = non_empty(value),
            Setting::GcacheFreezePurgeAtSeqno => {
                self.gcache_freeze_purge_at_seqno =
                    FreezePurge::parse(value).ok_or_else(|| bad(FREEZE_FORM))?;
            }
            Setting::GcacheKeepPagesSize => self.gcache_keep_pages_size = size()?,
            Setting::GcacheKeepSeconds => {
                self.gcache_keep_seconds = parse_duration(value)
                    .filter(|d| d.subsec_nanos() == 0)
                    .map(|d| d.as_secs())
                    .ok_or_else(|| bad(SECONDS_FORM))?;
            }
            Setting::GcacheMaxDiskBytes => self.gcache_max_disk_bytes = size()?,
            Setting::GcacheName => self.gcache_name = path()?,
            Setting::GcachePageSize => {
                self.gcache_page_size = parse_size(value)
                    .filter(|bytes| *bytes > 0)
                    .ok_or_else(|| bad(POSITIVE_SIZE_FORM))?;
            }
            Setting::GcacheRecover => self.gcache_recover = boolean()?,
            Setting::GcacheSize => self.gcache_size = size()?,
            Setting::GcsFcMasterSlave | Setting::GcsFcSinglePrimary => {
                self.gcs_fc_single_primary = boolean()?;
            }
            Setting::GmcastIsolate => {
                self.gmcast_isolate = Isolation::parse(value).ok_or_else(|| bad(ISOLATE_FORM))?;
            }
            Setting::GmcastListenAddr => explicit.listen_addr = endpoint()?,
            Setting::GmcastSegment => self.gmcast_segment = byte()?,
            Setting::IstRecvAddr => explicit.ist_recv_addr = endpoint()?,
            Setting::IstRecvBind => explicit.ist_recv_bind = endpoint()?,
            Setting::PcBootstrap => self.pc_bootstrap = boolean()?,
            Setting::PcIgnoreSb => self.pc_ignore_sb = boolean()?,
            Setting::PcWeight => self.pc_weight = byte()?,
            Setting::ReplCausalReadTimeout => {
                self.repl_causal_read_timeout =
                    positive_duration(value).ok_or_else(|| bad(DURATION_FORM))?;
            }
            Setting::ReplCommitOrder => {
                self.repl_commit_order =
                    CommitOrder::parse(value).ok_or_else(|| bad(COMMIT_ORDER_FORM))?;
            }
            Setting::ReplMaxWsSize => {
                self.repl_max_ws_size = parse_size(value)
                    .filter(|bytes| (1..=MAX_WS_SIZE_LIMIT).contains(bytes))
                    .ok_or_else(|| bad(MAX_WS_SIZE_FORM))?;
            }
            Setting::SocketSsl => explicit.socket_ssl = Some(boolean()?),
            Setting::SocketSslCa => self.socket_ssl_ca = non_empty(value),
            Setting::SocketSslCert => self.socket_ssl_cert = non_empty(value),
            Setting::SocketSslKey => self.socket_ssl_key = non_empty(value),
            Setting::SocketSslCipher => self.socket_ssl_cipher = non_empty(value),
            Setting::SocketSslPasswordFile => self.socket_ssl_password_file = non_empty(value),
            Setting::SocketSslReload => self.socket_ssl_reload = boolean()?,
        }
        Ok(())
    }

    /// Computes the derived options from what was given and from the options they follow.
    /// The order matters: the listen address may set `base_port`, which the IST addresses
    /// then follow.
    fn resolve(&mut self, explicit: &Explicit) -> Result<(), OptionsError> {
        self.socket_ssl = self.resolve_socket_ssl(explicit.socket_ssl);
        let listen = self.resolve_listen_addr(explicit.listen_addr.as_ref())?;
        self.base_port = listen.port;
        self.gmcast_listen_addr = listen;
        self.ist_recv_addr =
            self.resolve_ist_addr(Setting::IstRecvAddr, explicit.ist_recv_addr.as_ref())?;
        self.ist_recv_bind = match &explicit.ist_recv_bind {
            Some(partial) => Some(self.resolve_ist_addr(Setting::IstRecvBind, Some(partial))?),
            None => None,
        };
        self.gcache_dir = explicit
            .gcache_dir
            .clone()
            .unwrap_or_else(|| self.base_dir.clone());
        Ok(())
    }

    /// As in Galera: a certificate or a key turns TLS on unless `socket.ssl` says no
    /// ([`ProviderOptions::validate`] then asks for both).
    fn resolve_socket_ssl(&self, given: Option<bool>) -> bool {
        given.unwrap_or(self.socket_ssl_cert.is_some() || self.socket_ssl_key.is_some())
    }

    fn resolve_listen_addr(
        &self,
        given: Option<&PartialEndpoint>,
    ) -> Result<Endpoint, OptionsError> {
        let scheme = if self.socket_ssl {
            Scheme::Ssl
        } else {
            Scheme::Tcp
        };
        let Some(given) = given else {
            return Ok(Endpoint {
                scheme: Some(scheme),
                host: "0.0.0.0".to_owned(),
                port: self.base_port,
            });
        };
        self.check_scheme(Setting::GmcastListenAddr, given)?;
        // Like Galera: with TLS on, a tcp:// listen address is served over TLS anyway.
        Ok(Endpoint {
            scheme: Some(scheme),
            ..given.with_default_port(self.base_port)
        })
    }

    fn resolve_ist_addr(
        &self,
        key: Setting,
        given: Option<&PartialEndpoint>,
    ) -> Result<Endpoint, OptionsError> {
        if let Some(given) = given {
            self.check_scheme(key, given)?;
            if let Some(port) = given.port {
                return Ok(given.with_default_port(port));
            }
        }
        let port = self.base_port.checked_add(1).ok_or_else(|| {
            OptionsError::Inconsistent(format!(
                "{} needs a port: base_port {} leaves no room for the default base_port + 1",
                key.name(),
                self.base_port
            ))
        })?;
        Ok(match given {
            Some(given) => given.with_default_port(port),
            None => Endpoint {
                scheme: None,
                host: self.base_host.clone(),
                port,
            },
        })
    }

    fn check_scheme(&self, key: Setting, given: &PartialEndpoint) -> Result<(), OptionsError> {
        if given.scheme == Some(Scheme::Ssl) && !self.socket_ssl {
            return Err(OptionsError::Inconsistent(format!(
                "{} uses ssl:// but socket.ssl is off (set socket.ssl_cert and socket.ssl_key)",
                key.name()
            )));
        }
        Ok(())
    }

    /// Whether `value` for the static option `key` is the value in effect, so that setting
    /// it at runtime changes nothing. Derived options are resolved against the options in
    /// effect.
    fn is_current_value(&self, key: Setting, value: &str) -> Result<bool, OptionsError> {
        let mut probe = self.clone();
        let mut explicit = Explicit::default();
        probe.apply(key, value, &mut explicit)?;
        match key {
            Setting::GcacheDir => {
                probe.gcache_dir = explicit.gcache_dir.unwrap_or_else(|| self.base_dir.clone());
            }
            Setting::GmcastListenAddr => {
                probe.gmcast_listen_addr =
                    self.resolve_listen_addr(explicit.listen_addr.as_ref())?;
            }
            Setting::IstRecvAddr => {
                probe.ist_recv_addr =
                    self.resolve_ist_addr(key, explicit.ist_recv_addr.as_ref())?;
            }
            Setting::IstRecvBind => {
                probe.ist_recv_bind = match &explicit.ist_recv_bind {
                    Some(partial) => Some(self.resolve_ist_addr(key, Some(partial))?),
                    None => None,
                };
            }
            Setting::SocketSsl => probe.socket_ssl = self.resolve_socket_ssl(explicit.socket_ssl),
            _ => debug_assert!(!key.derived()),
        }
        Ok(probe.value_text(key) == self.value_text(key))
    }

    /// Checks the relationships between options.
    fn validate(&self) -> Result<(), OptionsError> {
        self.group_config().validate().map_err(from_group_error)?;
        if self.gcache_max_disk_bytes != 0 && self.gcache_max_disk_bytes < self.gcache_size {
            return Err(OptionsError::Inconsistent(format!(
                "gcache.max_disk_bytes ({}) is below gcache.size ({})",
                format_size(self.gcache_max_disk_bytes),
                format_size(self.gcache_size)
            )));
        }
        if self.socket_ssl {
            let missing: Vec<&str> = [
                (Setting::SocketSslCert, &self.socket_ssl_cert),
                (Setting::SocketSslKey, &self.socket_ssl_key),
            ]
            .into_iter()
            .filter(|(_, file)| file.is_none())
            .map(|(key, _)| key.name())
            .collect();
            if !missing.is_empty() {
                return Err(OptionsError::Inconsistent(format!(
                    "TLS is on (socket.ssl, or a certificate or key given) but {}: it \
                     needs both socket.ssl_cert and socket.ssl_key (socket.ssl = no turns \
                     it off)",
                    match missing.as_slice() {
                        [one] => format!("{one} is not set"),
                        _ => "neither is set".to_owned(),
                    }
                )));
            }
        }
        Ok(())
    }

    /// The value of `key` as the listing shows it.
    fn value_text(&self, key: Setting) -> String {
        let optional = |value: &Option<String>| value.clone().unwrap_or_default();
        match key {
            Setting::BaseDir => self.base_dir.clone(),
            Setting::BaseHost => self.base_host.clone(),
            Setting::BasePort => self.base_port.to_string(),
            Setting::CertLogConflicts => yes_no(self.cert_log_conflicts).to_owned(),
            Setting::EvsInactiveTimeout => format_duration(self.evs_inactive_timeout),
            Setting::EvsKeepalivePeriod => format_duration(self.evs_keepalive_period),
            Setting::EvsSuspectTimeout => format_duration(self.evs_suspect_timeout),
            Setting::GcacheDir => self.gcache_dir.clone(),
            Setting::GcacheFreezePurgeAtSeqno => self.gcache_freeze_purge_at_seqno.to_string(),
            Setting::GcacheKeepPagesSize => format_size(self.gcache_keep_pages_size),
            Setting::GcacheKeepSeconds => self.gcache_keep_seconds.to_string(),
            Setting::GcacheMaxDiskBytes => format_size(self.gcache_max_disk_bytes),
            Setting::GcacheName => self.gcache_name.clone(),
            Setting::GcachePageSize => format_size(self.gcache_page_size),
            Setting::GcacheRecover => yes_no(self.gcache_recover).to_owned(),
            Setting::GcacheSize => format_size(self.gcache_size),
            // Debug formatting keeps the ".0" Galera shows ("1.0") and reads back exactly.
            Setting::GcsFcFactor => format!("{:?}", self.gcs_fc_factor),
            Setting::GcsFcLimit => self.gcs_fc_limit.to_string(),
            Setting::GcsFcMasterSlave | Setting::GcsFcSinglePrimary => {
                yes_no(self.gcs_fc_single_primary).to_owned()
            }
            Setting::GmcastIsolate => self.gmcast_isolate.number().to_string(),
            Setting::GmcastListenAddr => self.gmcast_listen_addr.to_string(),
            Setting::GmcastSegment => self.gmcast_segment.to_string(),
            // With no node address yet, the host is decided at connect: nothing to show.
            Setting::IstRecvAddr if self.ist_recv_addr.host.is_empty() => String::new(),
            Setting::IstRecvAddr => self.ist_recv_addr.to_string(),
            Setting::IstRecvBind => self
                .ist_recv_bind
                .as_ref()
                .map(Endpoint::to_string)
                .unwrap_or_default(),
            Setting::PcBootstrap => true_false(self.pc_bootstrap).to_owned(),
            Setting::PcIgnoreSb => true_false(self.pc_ignore_sb).to_owned(),
            Setting::PcWeight => self.pc_weight.to_string(),
            Setting::ReplCausalReadTimeout => format_duration(self.repl_causal_read_timeout),
            Setting::ReplCommitOrder => self.repl_commit_order.number().to_string(),
            // A plain decimal: MariaDB reads it back with strtoul for wsrep_max_ws_size.
            Setting::ReplMaxWsSize => self.repl_max_ws_size.to_string(),
            Setting::SocketSsl => yes_no(self.socket_ssl).to_owned(),
            Setting::SocketSslCa => optional(&self.socket_ssl_ca),
            Setting::SocketSslCert => optional(&self.socket_ssl_cert),
            Setting::SocketSslKey => optional(&self.socket_ssl_key),
            Setting::SocketSslCipher => optional(&self.socket_ssl_cipher),
            Setting::SocketSslPasswordFile => optional(&self.socket_ssl_password_file),
            // Galera sets it to 1 when TLS starts, and shows it from then on.
            Setting::SocketSslReload if self.socket_ssl => "1".to_owned(),
            Setting::SocketSslReload => String::new(),
        }
    }

    /// Whether the listing shows `key`, an option Galera's default listing does not have:
    /// when its value differs from the default; `socket.ssl` also whenever a certificate
    /// or key is set (otherwise an explicit `socket.ssl = no` would not read back); and, as
    /// Galera does once TLS is on, `socket.ssl_cipher` even when empty.
    fn shows_extra(&self, key: Setting, defaults: &ProviderOptions) -> bool {
        let tls_files = self.socket_ssl_cert.is_some() || self.socket_ssl_key.is_some();
        let always = match key {
            Setting::SocketSsl => tls_files,
            Setting::SocketSslCipher => self.socket_ssl,
            _ => false,
        };
        always || self.value_text(key) != defaults.value_text(key)
    }
}

/// The text of `docs/options.md`: every Galera option, then Trireme's own, with what Trireme
/// does with each at start and with `SET GLOBAL wsrep_provider_options`, from the same
/// tables the parser uses.
pub fn options_table_markdown() -> String {
    let defaults = ProviderOptions::default();
    let mut text = String::from(TABLE_PREAMBLE);
    text.push_str("\n## Galera options\n\n");
    text.push_str(TABLE_HEADER);
    let mut names: Vec<&'static galera::GaleraOption> = galera::GALERA_OPTIONS.iter().collect();
    names.sort_by_key(|option| option.name);
    for option in names {
        let galera_default = if option.listed {
            code_or_empty(option.default)
        } else {
            "not listed".to_owned()
        };
        let row = match Setting::from_name(option.name) {
            Some(key) => implemented_row(key, &defaults),
            None if option.runtime => [
                "—".to_owned(),
                "not implemented: ignored, with a warning".to_owned(),
                "not implemented: ignored, with a warning".to_owned(),
            ],
            None => [
                "—".to_owned(),
                "not implemented: ignored, with a warning".to_owned(),
                "refused (startup only)".to_owned(),
            ],
        };
        push_row(&mut text, option.name, &galera_default, &row);
    }
    text.push_str("\n## Trireme's own options\n\n");
    text.push_str(TABLE_HEADER);
    for key in Setting::ALL {
        if galera::lookup(key.name()).is_none() {
            push_row(&mut text, key.name(), "—", &implemented_row(key, &defaults));
        }
    }
    text
}

const TABLE_PREAMBLE: &str = "# Provider options

<!-- Generated from crates/options/src/provider.rs by options::options_table_markdown().
     Do not edit; regenerate with: TRIREME_UPDATE_DOCS=1 cargo test -p options --test docs -->

What Trireme does with each entry of `wsrep_provider_options`, at start (my.cnf) and at
runtime (`SET GLOBAL wsrep_provider_options`):

- **takes effect**: the node uses the value.
- **no effect**: accepted, checked and shown in `@@wsrep_provider_options`, but nothing in
  Trireme reads it. Whenever it is given, the provider logs a warning with the reason shown
  here.
- **not implemented**: a Galera option Trireme ignores, accepted with a warning so that a
  my.cnf written for Galera still starts.
- **refused (startup only)**: `SET GLOBAL` fails unless the value is the one in effect, as in
  Galera.

Any other name stops the node, as in Galera. Some defaults follow other values: `base_host`
comes from `wsrep_node_address`, `base_dir` from the server's datadir, `gcache.dir` from
`base_dir`, `gmcast.listen_addr` and `ist.recv_addr` from `base_host` and `base_port`, and
`socket.ssl` is on when `socket.ssl_cert` or `socket.ssl_key` is given.
";

const TABLE_HEADER: &str = "| Option | Galera default | Trireme default | At start | At runtime |
|---|---|---|---|---|
";

/// Trireme default, at start, at runtime.
fn implemented_row(key: Setting, defaults: &ProviderOptions) -> [String; 3] {
    let describe = |effect| match effect {
        Effect::Applies => "takes effect".to_owned(),
        Effect::NoEffect(reason) => format!("no effect: {reason}"),
    };
    let runtime = if key.runtime() {
        describe(key.runtime_effect())
    } else {
        "refused (startup only)".to_owned()
    };
    [
        code_or_empty(&defaults.value_text(key)),
        describe(key.startup_effect()),
        runtime,
    ]
}

fn code_or_empty(value: &str) -> String {
    if value.is_empty() {
        "(empty)".to_owned()
    } else {
        format!("`{value}`")
    }
}

fn push_row(text: &mut String, name: &str, galera_default: &str, row: &[String; 3]) {
    let cells = [format!("`{name}`"), galera_default.to_owned()]
        .into_iter()
        .chain(row.iter().cloned())
        .map(|cell| cell.replace('|', "\\|"))
        .collect::<Vec<_>>();
    text.push_str(&format!("| {} |\n", cells.join(" | ")));
}

fn positive_duration(text: &str) -> Option<Duration> {
    parse_duration(text).filter(|duration| !duration.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_unique_and_named_consistently() {
        let names: Vec<&str> = implemented_options().collect();
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
        for key in Setting::ALL {
            assert_eq!(Setting::from_name(key.name()), Some(key));
            assert!(
                !(key.runtime() && key.derived()),
                "{} is derived and runtime",
                key.name()
            );
        }
    }

    #[test]
    fn every_implemented_option_is_a_galera_option_or_trireme_s_own() {
        let trireme_only = ["gcache.keep_seconds", "gcache.max_disk_bytes"];
        for name in implemented_options() {
            assert!(
                galera::lookup(name).is_some() || trireme_only.contains(&name),
                "{name} is neither a Galera option nor listed as Trireme's own"
            );
        }
    }

    #[test]
    fn runtime_flags_agree_with_galera_where_galera_has_the_option() {
        for key in Setting::ALL {
            if let Some(option) = galera::lookup(key.name()) {
                assert_eq!(key.runtime(), option.runtime, "{}", key.name());
            }
        }
    }

    #[test]
    fn defaults_are_what_an_empty_string_parses_to() {
        let (parsed, warnings) = ProviderOptions::parse("").unwrap();
        assert_eq!(parsed, ProviderOptions::default());
        assert!(warnings.is_empty());
        ProviderOptions::default().validate().unwrap();
    }

    /// The names whose use outside this crate would mean that `key` takes effect at start:
    /// its field, and for values the group layer holds, the group layer's reader.
    fn readers(key: Setting) -> &'static [&'static str] {
        match key {
            Setting::CertLogConflicts => &["cert_log_conflicts"],
            Setting::EvsInactiveTimeout => &["evs_inactive_timeout", ".inactive_ticks("],
            Setting::EvsKeepalivePeriod => &["evs_keepalive_period"],
            Setting::GmcastIsolate => &["gmcast_isolate"],
            Setting::GmcastSegment => &["gmcast_segment"],
            Setting::PcIgnoreSb => &["pc_ignore_sb"],
            Setting::PcWeight => &["pc_weight"],
            Setting::ReplCommitOrder => &["repl_commit_order"],
            _ => &[],
        }
    }

    /// Whether `code` uses `name` as a whole name: not as part of a longer one, and not as
    /// a string (`"gmcast_segment"` is a status variable).
    fn uses(code: &str, name: &str) -> bool {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let joined = |c: Option<char>| c.is_some_and(|c| word(c) || c == '"');
        code.match_indices(name).any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + name.len()..].chars().next();
            let longer_before = name.starts_with(word) && joined(before);
            let longer_after = name.ends_with(word) && joined(after);
            !longer_before && !longer_after
        })
    }

    fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }

    /// An option reported as having no effect must really be read nowhere else: the check
    /// that keeps the warnings honest once another crate starts using an option (then
    /// change its entry in `startup_effect`).
    #[test]
    fn options_without_effect_are_read_nowhere_outside_this_crate() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&crates).unwrap().map(Result::unwrap) {
            let src = entry.path().join("src");
            if entry.file_name() != "options" && src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        assert!(
            files.iter().any(|f| f.ends_with("provider/src/entry.rs")),
            "the provider's sources were not found under {}",
            crates.display()
        );
        let mut violations = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let code: String = text
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for key in Setting::ALL {
                if key.startup_effect() == Effect::Applies {
                    continue;
                }
                for name in readers(key) {
                    if uses(&code, name) {
                        violations.push(format!("{} reads {name}", file.display()));
                    }
                }
            }
        }
        assert!(
            violations.is_empty(),
            "options marked as having no effect are read: {violations:?}"
        );
        // Every no-effect option is covered by the check, but `socket.ssl_reload`: a request
        // at start is dropped here, and the provider reads only runtime requests.
        for key in Setting::ALL {
            let no_effect = key.startup_effect() != Effect::Applies;
            let dropped_here = key == Setting::SocketSslReload;
            assert!(
                !no_effect || dropped_here || !readers(key).is_empty(),
                "{} has no effect but no reader to check",
                key.name()
            );
        }
    }

    #[test]
    fn whole_name_matching_ignores_longer_names() {
        assert!(uses("o.socket_ssl;", "socket_ssl"));
        assert!(!uses("o.socket_ssl_ca;", "socket_ssl"));
        assert!(!uses("my_socket_ssl", "socket_ssl"));
        assert!(!uses("(\"gmcast_segment\", x)", "gmcast_segment"));
        assert!(uses("c.inactive_ticks()", ".inactive_ticks("));
        assert!(!uses("fn inactive_ticks(&self)", ".inactive_ticks("));
    }

    /// The keepalive reason names the group layer's heartbeat period: keep them in step.
    #[test]
    fn the_heartbeat_period_is_the_one_the_keepalive_reason_names() {
        let config = GroupConfig::default();
        assert_eq!(config.tick_interval_ns, 10_000_000);
        assert_eq!(config.heartbeat_ticks, 2);
        assert!(HEARTBEATS_ARE_KEEPALIVES.contains("every 20 ms (2 group ticks of 10 ms)"));
    }

    /// Every effect reason reads as one clause: no table separator, no final full stop.
    #[test]
    fn reasons_fit_a_table_cell_and_a_log_line() {
        for key in Setting::ALL {
            let mut effects = vec![key.startup_effect()];
            if key.runtime() {
                effects.push(key.runtime_effect());
            }
            for effect in effects {
                if let Effect::NoEffect(reason) = effect {
                    assert!(!reason.contains('|') && !reason.ends_with('.'), "{reason}");
                    assert!(!reason.contains("  "), "{reason}");
                }
            }
        }
    }

    #[test]
    fn defaults_render_as_galera_s_defaults() {
        let options = ProviderOptions::default();
        for option in galera::GALERA_OPTIONS
            .iter()
            .filter(|o| o.listed && !o.default.is_empty())
        {
            if let Some(key) = Setting::from_name(option.name) {
                assert_eq!(options.value_text(key), option.default, "{}", option.name);
            }
        }
    }
}
