//! The options Trireme implements, as [`Setting`]s: each one's name, whether it can change
//! at runtime, and what giving it does at start and at runtime (with the reason when it does
//! nothing).

/// What giving an implemented option does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Effect {
    /// The node uses the value.
    Applies,
    /// Accepted, checked and listed, but nothing in Trireme reads it; the reason says why.
    NoEffect(&'static str),
}

/// The options Trireme implements. Each has a name, a value form, a runtime flag and a
/// rendering; the tables below are the single place these are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Setting {
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
    GcommThreadNice,
    GcsCatchUpPeriod,
    GcsFcFactor,
    GcsFcLimit,
    GcsFcMasterSlave,
    GcsFcSinglePrimary,
    GmcastIsolate,
    GmcastListenAddr,
    GmcastSegment,
    IstRecvAddr,
    IstRecvBind,
    MetricsListenAddr,
    PcBootstrap,
    PcIgnoreQuorum,
    PcIgnoreSb,
    PcRecovery,
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
    pub(super) const ALL: [Setting; 43] = [
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
        Setting::GcommThreadNice,
        Setting::GcsCatchUpPeriod,
        Setting::GcsFcFactor,
        Setting::GcsFcLimit,
        Setting::GcsFcMasterSlave,
        Setting::GcsFcSinglePrimary,
        Setting::GmcastIsolate,
        Setting::GmcastListenAddr,
        Setting::GmcastSegment,
        Setting::IstRecvAddr,
        Setting::IstRecvBind,
        Setting::MetricsListenAddr,
        Setting::PcBootstrap,
        Setting::PcIgnoreQuorum,
        Setting::PcIgnoreSb,
        Setting::PcRecovery,
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

    pub(super) fn name(self) -> &'static str {
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
            Setting::GcsCatchUpPeriod => "gcs.catch_up_period",
            Setting::GcsFcFactor => "gcs.fc_factor",
            Setting::GcsFcLimit => "gcs.fc_limit",
            Setting::GcsFcMasterSlave => "gcs.fc_master_slave",
            Setting::GcsFcSinglePrimary => "gcs.fc_single_primary",
            Setting::GcommThreadNice => "gcomm.thread_nice",
            Setting::GmcastIsolate => "gmcast.isolate",
            Setting::GmcastListenAddr => "gmcast.listen_addr",
            Setting::GmcastSegment => "gmcast.segment",
            Setting::IstRecvAddr => "ist.recv_addr",
            Setting::IstRecvBind => "ist.recv_bind",
            Setting::MetricsListenAddr => "metrics.listen_addr",
            Setting::PcBootstrap => "pc.bootstrap",
            Setting::PcIgnoreQuorum => "pc.ignore_quorum",
            Setting::PcIgnoreSb => "pc.ignore_sb",
            Setting::PcRecovery => "pc.recovery",
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
    pub(super) fn runtime(self) -> bool {
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
            | Setting::GcsCatchUpPeriod
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit
            | Setting::GmcastIsolate
            | Setting::PcBootstrap
            | Setting::PcIgnoreQuorum
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
            | Setting::GcommThreadNice
            | Setting::GmcastListenAddr
            | Setting::GmcastSegment
            | Setting::IstRecvAddr
            | Setting::IstRecvBind
            | Setting::MetricsListenAddr
            | Setting::PcRecovery
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
    pub(super) fn derived(self) -> bool {
        matches!(
            self,
            Setting::GcacheDir
                | Setting::GmcastListenAddr
                | Setting::IstRecvAddr
                | Setting::IstRecvBind
                | Setting::SocketSsl
        )
    }

    pub(super) fn from_name(name: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|key| key.name() == name)
    }

    /// What the option does when the option string given at start sets it. An option has
    /// an effect only if something outside this crate reads its value; check with a grep of
    /// the field before changing an entry here.
    pub(super) fn startup_effect(self) -> Effect {
        match self {
            Setting::EvsInactiveTimeout => Effect::NoEffect(NO_INACTIVE_TIMER),
            Setting::EvsKeepalivePeriod => Effect::NoEffect(HEARTBEATS_ARE_KEEPALIVES),
            Setting::GmcastSegment => Effect::NoEffect(NO_SEGMENTS),
            Setting::ReplCommitOrder => Effect::NoEffect(ALWAYS_IN_ORDER),
            Setting::SocketSslReload => Effect::NoEffect(RELOAD_AT_START),
            Setting::BaseDir
            | Setting::BaseHost
            | Setting::BasePort
            | Setting::CertLogConflicts
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
            | Setting::GcsCatchUpPeriod
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit
            | Setting::GcsFcMasterSlave
            | Setting::GcsFcSinglePrimary
            | Setting::GcommThreadNice
            | Setting::GmcastIsolate
            | Setting::GmcastListenAddr
            | Setting::IstRecvAddr
            | Setting::IstRecvBind
            | Setting::MetricsListenAddr
            | Setting::PcBootstrap
            | Setting::PcIgnoreQuorum
            | Setting::PcIgnoreSb
            | Setting::PcRecovery
            | Setting::PcWeight
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
    pub(super) fn runtime_effect(self) -> Effect {
        debug_assert!(self.runtime(), "{} is not a runtime option", self.name());
        match self {
            Setting::GcacheKeepPagesSize
            | Setting::GcacheKeepSeconds
            | Setting::GcacheMaxDiskBytes
            | Setting::GcachePageSize => Effect::NoEffect(CACHE_SET_AT_OPEN),
            // With TLS on; with TLS off, see `apply_runtime`.
            Setting::SocketSslReload => Effect::Applies,
            _ => self.startup_effect(),
        }
    }
}

// Why an option has no effect, in the words of the domain. `docs/options.md` shows them too.
pub(super) const NO_INACTIVE_TIMER: &str = "Trireme has no separate inactivity timer: the primary \
     component evicts a silent member after evs.suspect_timeout, and an evicted member \
     rejoins as a new one once it learns of it (the value must still be at least \
     evs.suspect_timeout, as in Galera)";
pub(super) const HEARTBEATS_ARE_KEEPALIVES: &str =
    "the Raft leader's heartbeats, every 20 ms (2 group \
     ticks of 10 ms), are the keepalives, whatever this option says";
pub(super) const NO_SEGMENTS: &str =
    "the Raft leader sends every write-set to each member directly: \
     there are no segment relays, and donor choice ignores segments";
pub(super) const ALWAYS_IN_ORDER: &str =
    "Trireme always commits in the global order, as 3 (NO_OOOC) \
     asks; it offers no out-of-order commit";
pub(super) const RELOAD_AT_START: &str =
    "a reload request means something only at runtime; at start \
     the TLS files are read anyway";
pub(super) const NOTHING_TO_RELOAD: &str = "socket.ssl is off: there are no TLS files to reload";
pub(super) const CACHE_SET_AT_OPEN: &str = "the running write-set cache keeps the value it opened \
     with; set the option in my.cnf for the next start";

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
