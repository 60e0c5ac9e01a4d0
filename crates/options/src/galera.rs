//! The option names of Galera 26.4, as facts: which names exist, which ones the default
//! `@@wsrep_provider_options` listing shows, what that listing prints when nothing is
//! configured, and which ones Galera lets `SET GLOBAL wsrep_provider_options` change.
//!
//! Sources: the listing of a real Galera 26.4.23 node
//! (`shared/reference/galera-provider-options.txt`) and the parameter registration and
//! `param_set` code of codership/galera 26.4 (`gcomm/src/conf.cpp`, `gcs/src/gcs.cpp`,
//! `gcache/src/gcache_params.cpp`, `galera/src/replicator_smm_params.cpp`,
//! `galerautils/src/gu_asio.cpp`). Two names come from Percona's Galera
//! (`gcache.freeze_purge_at_seqno`, `gcache.keep_pages_count`) so that my.cnf files written for
//! Percona XtraDB Cluster start too.
//!
//! Trireme's own implementation status is not recorded here; see
//! [`crate::implemented_options`] and [`crate::runtime_options`].

/// One option name Galera accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaleraOption {
    /// The option name, as written in `wsrep_provider_options`.
    pub name: &'static str,
    /// Whether Galera's default listing (`@@wsrep_provider_options`) shows it.
    pub listed: bool,
    /// What Galera's listing prints for it with no configuration at all. Empty for the
    /// options the listing does not show, and for `base_host` and `ist.recv_addr`, which
    /// Galera derives from the node address.
    pub default: &'static str,
    /// Whether Galera lets `SET GLOBAL wsrep_provider_options` change it.
    pub runtime: bool,
}

const fn listed(name: &'static str, default: &'static str, runtime: bool) -> GaleraOption {
    GaleraOption {
        name,
        listed: true,
        default,
        runtime,
    }
}

const fn hidden(name: &'static str, runtime: bool) -> GaleraOption {
    GaleraOption {
        name,
        listed: false,
        default: "",
        runtime,
    }
}

/// The names of Galera 26.4.23's default `@@wsrep_provider_options` listing, in its order
/// (which is byte order of the names). Copied from
/// `shared/reference/galera-provider-options.txt`.
pub const LISTED_NAMES: [&str; 72] = [
    "base_dir",
    "base_host",
    "base_port",
    "cert.log_conflicts",
    "cert.optimistic_pa",
    "debug",
    "evs.auto_evict",
    "evs.causal_keepalive_period",
    "evs.debug_log_mask",
    "evs.delay_margin",
    "evs.delayed_keep_period",
    "evs.inactive_check_period",
    "evs.inactive_timeout",
    "evs.info_log_mask",
    "evs.install_timeout",
    "evs.join_retrans_period",
    "evs.keepalive_period",
    "evs.max_install_timeouts",
    "evs.send_window",
    "evs.stats_report_period",
    "evs.suspect_timeout",
    "evs.use_aggregate",
    "evs.user_send_window",
    "evs.version",
    "evs.view_forget_timeout",
    "gcache.dir",
    "gcache.keep_pages_size",
    "gcache.mem_size",
    "gcache.name",
    "gcache.page_size",
    "gcache.recover",
    "gcache.size",
    "gcomm.thread_prio",
    "gcs.fc_debug",
    "gcs.fc_factor",
    "gcs.fc_limit",
    "gcs.fc_master_slave",
    "gcs.fc_single_primary",
    "gcs.max_packet_size",
    "gcs.max_throttle",
    "gcs.recv_q_hard_limit",
    "gcs.recv_q_soft_limit",
    "gcs.sync_donor",
    "gmcast.listen_addr",
    "gmcast.mcast_addr",
    "gmcast.mcast_ttl",
    "gmcast.peer_timeout",
    "gmcast.segment",
    "gmcast.time_wait",
    "gmcast.version",
    "ist.recv_addr",
    "pc.announce_timeout",
    "pc.checksum",
    "pc.ignore_quorum",
    "pc.ignore_sb",
    "pc.linger",
    "pc.npvo",
    "pc.recovery",
    "pc.version",
    "pc.wait_prim",
    "pc.wait_prim_timeout",
    "pc.weight",
    "protonet.backend",
    "protonet.version",
    "repl.causal_read_timeout",
    "repl.commit_order",
    "repl.key_format",
    "repl.max_ws_size",
    "repl.proto_max",
    "socket.checksum",
    "socket.recv_buf_size",
    "socket.send_buf_size",
];

/// Every option name Galera accepts: first the listed ones (in [`LISTED_NAMES`] order), then
/// the ones it accepts but does not list by default (no default value, hidden, debug-build or
/// Percona-only).
pub const GALERA_OPTIONS: [GaleraOption; 98] = [
    listed("base_dir", ".", false),
    listed("base_host", "", false),
    listed("base_port", "4567", false),
    listed("cert.log_conflicts", "no", true),
    listed("cert.optimistic_pa", "yes", true),
    listed("debug", "no", true),
    listed("evs.auto_evict", "0", true),
    listed("evs.causal_keepalive_period", "PT1S", true),
    listed("evs.debug_log_mask", "0x1", true),
    listed("evs.delay_margin", "PT1S", true),
    listed("evs.delayed_keep_period", "PT30S", true),
    listed("evs.inactive_check_period", "PT0.5S", false),
    listed("evs.inactive_timeout", "PT15S", true),
    listed("evs.info_log_mask", "0", true),
    listed("evs.install_timeout", "PT7.5S", true),
    listed("evs.join_retrans_period", "PT1S", true),
    listed("evs.keepalive_period", "PT1S", true),
    listed("evs.max_install_timeouts", "3", true),
    listed("evs.send_window", "4", true),
    listed("evs.stats_report_period", "PT1M", true),
    listed("evs.suspect_timeout", "PT5S", true),
    listed("evs.use_aggregate", "true", true),
    listed("evs.user_send_window", "2", true),
    listed("evs.version", "1", true),
    listed("evs.view_forget_timeout", "P1D", false),
    listed("gcache.dir", ".", false),
    listed("gcache.keep_pages_size", "0", true),
    listed("gcache.mem_size", "0", true),
    listed("gcache.name", "galera.cache", false),
    listed("gcache.page_size", "128M", true),
    listed("gcache.recover", "yes", false),
    listed("gcache.size", "128M", false),
    listed("gcomm.thread_prio", "", false),
    listed("gcs.fc_debug", "0", true),
    listed("gcs.fc_factor", "1.0", true),
    listed("gcs.fc_limit", "16", true),
    listed("gcs.fc_master_slave", "no", false),
    listed("gcs.fc_single_primary", "no", false),
    listed("gcs.max_packet_size", "64500", true),
    listed("gcs.max_throttle", "0.25", true),
    listed("gcs.recv_q_hard_limit", "9223372036854775807", true),
    listed("gcs.recv_q_soft_limit", "0.25", true),
    listed("gcs.sync_donor", "no", true),
    listed("gmcast.listen_addr", "tcp://0.0.0.0:4567", false),
    listed("gmcast.mcast_addr", "", false),
    listed("gmcast.mcast_ttl", "1", false),
    listed("gmcast.peer_timeout", "PT3S", false),
    listed("gmcast.segment", "0", false),
    listed("gmcast.time_wait", "PT5S", false),
    listed("gmcast.version", "0", false),
    listed("ist.recv_addr", "", false),
    listed("pc.announce_timeout", "PT3S", false),
    listed("pc.checksum", "false", false),
    listed("pc.ignore_quorum", "false", true),
    listed("pc.ignore_sb", "false", true),
    listed("pc.linger", "PT20S", false),
    listed("pc.npvo", "false", false),
    listed("pc.recovery", "true", false),
    listed("pc.version", "0", false),
    listed("pc.wait_prim", "true", false),
    listed("pc.wait_prim_timeout", "PT30S", false),
    listed("pc.weight", "1", true),
    listed("protonet.backend", "asio", false),
    listed("protonet.version", "0", false),
    listed("repl.causal_read_timeout", "PT30S", true),
    listed("repl.commit_order", "3", false),
    listed("repl.key_format", "FLAT8", true),
    listed("repl.max_ws_size", "2147483647", true),
    listed("repl.proto_max", "11", false),
    listed("socket.checksum", "2", false),
    listed("socket.recv_buf_size", "auto", true),
    listed("socket.send_buf_size", "auto", false),
    // Accepted, not listed by default.
    hidden("dbug", true),
    hidden("evs.evict", true),
    hidden("gcache.debug", true),
    hidden("gcache.freeze_purge_at_seqno", true),
    hidden("gcache.keep_pages_count", true),
    hidden("gcs.sm_dump", true),
    hidden("gcs.vote_policy", false),
    hidden("gmcast.group", false),
    hidden("gmcast.isolate", true),
    hidden("gmcast.mcast_port", false),
    hidden("gmcast.mira", true),
    hidden("gmcast.peer_addr", true),
    hidden("ist.keep_keys", false),
    hidden("ist.recv_bind", false),
    hidden("pc.bootstrap", true),
    hidden("signal", true),
    hidden("socket.dynamic", false),
    hidden("socket.non_blocking", false),
    hidden("socket.ssl", false),
    hidden("socket.ssl_ca", false),
    hidden("socket.ssl_cert", false),
    hidden("socket.ssl_cipher", false),
    hidden("socket.ssl_compression", false),
    hidden("socket.ssl_key", false),
    hidden("socket.ssl_password_file", false),
    hidden("socket.ssl_reload", true),
];

/// Galera's facts about `name`, if Galera knows the name.
pub fn lookup(name: &str) -> Option<&'static GaleraOption> {
    GALERA_OPTIONS.iter().find(|option| option.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_options_follow_the_listing_order() {
        let listed: Vec<&str> = GALERA_OPTIONS
            .iter()
            .filter(|option| option.listed)
            .map(|option| option.name)
            .collect();
        assert_eq!(listed, LISTED_NAMES);
        assert!(
            LISTED_NAMES.windows(2).all(|pair| pair[0] < pair[1]),
            "the listing is in byte order of the names"
        );
        let hidden_start = LISTED_NAMES.len();
        assert!(GALERA_OPTIONS[hidden_start..].iter().all(|o| !o.listed));
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = GALERA_OPTIONS.iter().map(|option| option.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn lookup_finds_listed_and_hidden_names() {
        assert!(lookup("evs.send_window").is_some_and(|o| o.listed && o.runtime));
        assert!(lookup("gmcast.isolate").is_some_and(|o| !o.listed && o.runtime));
        assert!(lookup("gcache.size").is_some_and(|o| !o.runtime));
        assert!(lookup("evs.no_such_option").is_none());
    }
}
