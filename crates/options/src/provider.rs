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

mod apply;
mod listing;
mod resolve;
mod setting;
#[cfg(test)]
mod tests;

use apply::{from_group_error, no_effect, non_empty, Explicit};
pub use listing::options_table_markdown;
pub use setting::{implemented_options, is_implemented, runtime_options};
use setting::{Effect, Setting, NOTHING_TO_RELOAD};

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
    /// `metrics.listen_addr`: where the node serves Prometheus metrics and its status page
    /// (Trireme's own option; off when unset).
    pub metrics_listen_addr: Option<std::net::SocketAddr>,
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
    /// `gcs.catch_up_period` (Trireme): how long a JOINED node may take to work off its
    /// backlog; flow control slows the cluster as much as that needs.
    pub gcs_catch_up_period: Duration,
    /// `gcomm.thread_nice` (Trireme): how many nice steps the provider's threads run below
    /// the server's own, so that appliers and clients come first on a busy host.
    pub gcomm_thread_nice: u8,
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
    /// `cert.log_conflicts`: log every certification conflict with its table and key.
    pub cert_log_conflicts: bool,
    /// `pc.bootstrap`: a request to form a new primary component from this node. The
    /// provider acts on it and clears it with [`ProviderOptions::take_pc_bootstrap`].
    pub pc_bootstrap: bool,
    /// `pc.ignore_quorum`: go on as a primary component without a quorum (dangerous).
    pub pc_ignore_quorum: bool,
    /// `pc.ignore_sb`: keep accepting writes after a split brain (dangerous; tests use it).
    pub pc_ignore_sb: bool,
    /// `pc.recovery`: restore the primary component by itself after a full crash, from
    /// the last primary view each node saved.
    pub pc_recovery: bool,
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
            metrics_listen_addr: None,
            evs_suspect_timeout: Duration::from_secs(5),
            evs_inactive_timeout: Duration::from_secs(15),
            evs_keepalive_period: Duration::from_secs(1),
            gcs_fc_limit: 16,
            gcs_fc_factor: 1.0,
            gcs_fc_single_primary: false,
            gcs_catch_up_period: group::CATCH_UP_PERIOD_DEFAULT,
            gcomm_thread_nice: transport::priority::PROVIDER_THREAD_NICE_DEFAULT,
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
            pc_ignore_quorum: false,
            pc_ignore_sb: false,
            pc_recovery: true,
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
        config.catch_up_period = self.gcs_catch_up_period;
        config.max_ws_size = self.repl_max_ws_size;
        config.ignore_split_brain = self.pc_ignore_sb;
        config.ignore_quorum = self.pc_ignore_quorum;
        config.recover_primary = self.pc_recovery;
        config.weight = self.pc_weight;
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
}
