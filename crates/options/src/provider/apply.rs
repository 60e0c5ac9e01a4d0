//! Reading one option's value into [`ProviderOptions`]: the accepted forms, and the errors and
//! warnings that name the option, the value and the form.

use super::*;

pub(super) const BOOL_FORM: &str = "one of yes/no, true/false, on/off, 1/0";
pub(super) const SIZE_FORM: &str =
    "a byte count with an optional K, M, G or T suffix, such as 128M";
pub(super) const POSITIVE_SIZE_FORM: &str =
    "a positive byte count with an optional K, M, G or T suffix, such as 128M";
pub(super) const MAX_WS_SIZE_FORM: &str =
    "a byte count from 1 to 2147483647, with an optional K, M or G suffix";
pub(super) const PORT_FORM: &str = "a port number from 1 to 65535";
pub(super) const HOST_FORM: &str = "a host name or IP address other than 0.0.0.0 or ::";
pub(super) const ENDPOINT_FORM: &str = "an address [tcp:// or ssl://]host[:port]";
pub(super) const LISTEN_ADDR_FORM: &str =
    "an IP address and port such as 127.0.0.1:9104, or empty for off";
pub(super) const BYTE_FORM: &str = "an integer from 0 to 255";
pub(super) const NICE_STEPS_FORM: &str = "an integer from 0 to 19 (0: the server's priority)";
pub(super) const PATH_FORM: &str = "a non-empty path";
pub(super) const DURATION_FORM: &str = "a positive ISO 8601 duration such as PT1S";
pub(super) const SECONDS_FORM: &str =
    "a whole number of seconds, or an ISO 8601 duration of whole seconds such as PT1H";
pub(super) const FREEZE_FORM: &str = "-1, a seqno from 0 to 9223372036854775807, or now";
pub(super) const COMMIT_ORDER_FORM: &str = "0 (BYPASS), 1 (OOOC), 2 (LOCAL_OOOC) or 3 (NO_OOOC)";
pub(super) const ISOLATE_FORM: &str = "0 (off), 1 (isolated) or 2 (isolated, then quit)";

/// The values given for the derived options, before they are resolved.
#[derive(Default)]
pub(super) struct Explicit {
    pub(super) listen_addr: Option<PartialEndpoint>,
    pub(super) ist_recv_addr: Option<PartialEndpoint>,
    pub(super) ist_recv_bind: Option<PartialEndpoint>,
    pub(super) gcache_dir: Option<String>,
    pub(super) socket_ssl: Option<bool>,
}

pub(super) fn no_effect(key: Setting, value: &str, reason: &'static str) -> Warning {
    Warning::NoEffect {
        option: key.name().to_owned(),
        value: value.to_owned(),
        reason,
    }
}

pub(super) fn invalid(key: Setting, value: &str, expected: &'static str) -> OptionsError {
    OptionsError::InvalidValue {
        option: key.name().to_owned(),
        value: value.to_owned(),
        expected,
    }
}

pub(super) fn from_group_error(error: ConfigError) -> OptionsError {
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

pub(super) fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

pub(super) fn parse_unsigned<T: std::str::FromStr>(text: &str) -> Option<T> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl ProviderOptions {
    /// Parses `value` for `key` and stores it (or, for derived options, records it in
    /// `explicit` for [`ProviderOptions::resolve`]).
    /// The options whose forms and ranges the group layer owns: parsed by it, kept here.
    fn apply_group_owned(&mut self, key: Setting, value: &str) -> Result<(), OptionsError> {
        let mut scratch = GroupConfig::default();
        let applied = scratch
            .apply_option(key.name(), value)
            .map_err(from_group_error)?;
        debug_assert!(applied, "the group layer owns {}", key.name());
        match key {
            Setting::EvsInactiveTimeout => self.evs_inactive_timeout = scratch.inactive_timeout,
            Setting::EvsSuspectTimeout => self.evs_suspect_timeout = scratch.suspect_timeout,
            Setting::GcsCatchUpPeriod => self.gcs_catch_up_period = scratch.catch_up_period,
            Setting::GcsFcFactor => self.gcs_fc_factor = scratch.fc_factor,
            Setting::GcsFcLimit => self.gcs_fc_limit = scratch.fc_limit,
            other => unreachable!("{} is not one of the group layer's options", other.name()),
        }
        Ok(())
    }

    /// `base_host` and `base_port`: where the node listens, unless an address says otherwise.
    fn apply_base_address(&mut self, key: Setting, value: &str) -> Result<(), OptionsError> {
        let bad = |expected| invalid(key, value, expected);
        match key {
            // The listing of a node with no address shows `base_host = `: it parses back.
            Setting::BaseHost if value.trim().is_empty() => {}
            Setting::BaseHost => {
                self.base_host = parse_endpoint(value)
                    .filter(|e| e.scheme.is_none() && e.port.is_none())
                    .filter(|e| !is_any_address(&e.host))
                    .map(|e| e.host)
                    .ok_or_else(|| bad(HOST_FORM))?;
            }
            _ => {
                debug_assert!(
                    matches!(key, Setting::BasePort),
                    "{key:?} is no base address"
                );
                self.base_port = parse_unsigned::<u16>(value)
                    .filter(|port| *port != 0)
                    .ok_or_else(|| bad(PORT_FORM))?;
            }
        }
        Ok(())
    }

    pub(super) fn apply(
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
            Setting::BaseHost | Setting::BasePort => self.apply_base_address(key, value)?,
            Setting::CertLogConflicts => self.cert_log_conflicts = boolean()?,
            Setting::EvsInactiveTimeout
            | Setting::EvsSuspectTimeout
            | Setting::GcsCatchUpPeriod
            | Setting::GcsFcFactor
            | Setting::GcsFcLimit => self.apply_group_owned(key, value)?,
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
            Setting::GcommThreadNice => {
                self.gcomm_thread_nice = parse_unsigned::<u8>(value)
                    .filter(|steps| i32::from(*steps) <= transport::priority::NICE_LIMIT)
                    .ok_or_else(|| bad(NICE_STEPS_FORM))?;
            }
            Setting::GmcastIsolate => {
                self.gmcast_isolate = Isolation::parse(value).ok_or_else(|| bad(ISOLATE_FORM))?;
            }
            Setting::GmcastListenAddr => explicit.listen_addr = endpoint()?,
            Setting::GmcastSegment => self.gmcast_segment = byte()?,
            Setting::IstRecvAddr => explicit.ist_recv_addr = endpoint()?,
            Setting::IstRecvBind => explicit.ist_recv_bind = endpoint()?,
            Setting::MetricsListenAddr => {
                self.metrics_listen_addr = match value.trim() {
                    "" => None,
                    text => Some(text.parse().map_err(|_| bad(LISTEN_ADDR_FORM))?),
                };
            }
            Setting::PcBootstrap => self.pc_bootstrap = boolean()?,
            Setting::PcIgnoreQuorum => self.pc_ignore_quorum = boolean()?,
            Setting::PcIgnoreSb => self.pc_ignore_sb = boolean()?,
            Setting::PcRecovery => self.pc_recovery = boolean()?,
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
}

pub(super) fn positive_duration(text: &str) -> Option<Duration> {
    parse_duration(text).filter(|duration| !duration.is_zero())
}
