//! Showing the options: the values as `wsrep_provider_options` reads back, and the table
//! of `docs/options.md`.

use super::*;

impl ProviderOptions {
    /// The value of `key` as the listing shows it.
    pub(super) fn value_text(&self, key: Setting) -> String {
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
            Setting::GcsCatchUpPeriod => format_duration(self.gcs_catch_up_period),
            Setting::GcsFcFactor => format!("{:?}", self.gcs_fc_factor),
            Setting::GcsFcLimit => self.gcs_fc_limit.to_string(),
            Setting::GcsFcMasterSlave | Setting::GcsFcSinglePrimary => {
                yes_no(self.gcs_fc_single_primary).to_owned()
            }
            Setting::GcommThreadNice => self.gcomm_thread_nice.to_string(),
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
            Setting::MetricsListenAddr => self
                .metrics_listen_addr
                .map(|addr| addr.to_string())
                .unwrap_or_default(),
            Setting::PcBootstrap => true_false(self.pc_bootstrap).to_owned(),
            Setting::PcIgnoreQuorum => true_false(self.pc_ignore_quorum).to_owned(),
            Setting::PcIgnoreSb => true_false(self.pc_ignore_sb).to_owned(),
            Setting::PcRecovery => true_false(self.pc_recovery).to_owned(),
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
    pub(super) fn shows_extra(&self, key: Setting, defaults: &ProviderOptions) -> bool {
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

pub(super) const TABLE_PREAMBLE: &str = "# Provider options

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

pub(super) const TABLE_HEADER: &str =
    "| Option | Galera default | Trireme default | At start | At runtime |
|---|---|---|---|---|
";

/// Trireme default, at start, at runtime.
pub(super) fn implemented_row(key: Setting, defaults: &ProviderOptions) -> [String; 3] {
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

pub(super) fn code_or_empty(value: &str) -> String {
    if value.is_empty() {
        "(empty)".to_owned()
    } else {
        format!("`{value}`")
    }
}

pub(super) fn push_row(text: &mut String, name: &str, galera_default: &str, row: &[String; 3]) {
    let cells = [format!("`{name}`"), galera_default.to_owned()]
        .into_iter()
        .chain(row.iter().cloned())
        .map(|cell| cell.replace('|', "\\|"))
        .collect::<Vec<_>>();
    text.push_str(&format!("| {} |\n", cells.join(" | ")));
}
