//! No option accepted in silence: every implemented option Trireme does not act on yields a
//! `Warning::NoEffect` naming the option, the value and the reason, at start and at runtime;
//! the runtime requests (`pc.bootstrap`, `socket.ssl_reload`) are recorded only when
//! something will act on them.

use std::collections::BTreeSet;

use common::NO_EFFECT_AT_START;
use options::{OptionsError, ProviderOptions, Warning};

mod common;

/// A valid option string setting `name`, for every option Trireme implements.
fn sample(name: &str) -> &'static str {
    match name {
        "base_dir" => "base_dir=/data",
        "base_host" => "base_host=10.0.0.1",
        "base_port" => "base_port=5000",
        "cert.log_conflicts" => "cert.log_conflicts=yes",
        "evs.inactive_timeout" => "evs.inactive_timeout=PT30S",
        "evs.keepalive_period" => "evs.keepalive_period=PT2S",
        "evs.suspect_timeout" => "evs.suspect_timeout=PT6S",
        "gcache.dir" => "gcache.dir=/cache",
        "gcache.freeze_purge_at_seqno" => "gcache.freeze_purge_at_seqno=5",
        "gcache.keep_pages_size" => "gcache.keep_pages_size=1M",
        "gcache.keep_seconds" => "gcache.keep_seconds=60",
        "gcache.max_disk_bytes" => "gcache.max_disk_bytes=1T",
        "gcache.name" => "gcache.name=x.cache",
        "gcache.page_size" => "gcache.page_size=1M",
        "gcache.recover" => "gcache.recover=no",
        "gcache.size" => "gcache.size=1M",
        "gcomm.thread_nice" => "gcomm.thread_nice=2",
        "gcs.catch_up_period" => "gcs.catch_up_period=PT2M",
        "gcs.fc_factor" => "gcs.fc_factor=0.5",
        "gcs.fc_limit" => "gcs.fc_limit=5",
        "gcs.fc_master_slave" => "gcs.fc_master_slave=yes",
        "gcs.fc_single_primary" => "gcs.fc_single_primary=yes",
        "gmcast.isolate" => "gmcast.isolate=1",
        "gmcast.listen_addr" => "gmcast.listen_addr=tcp://127.0.0.1:4567",
        "gmcast.segment" => "gmcast.segment=1",
        "ist.recv_addr" => "ist.recv_addr=10.0.0.1",
        "ist.recv_bind" => "ist.recv_bind=0.0.0.0",
        "metrics.listen_addr" => "metrics.listen_addr=127.0.0.1:9104",
        "pc.bootstrap" => "pc.bootstrap=yes",
        "pc.ignore_quorum" => "pc.ignore_quorum=yes",
        "pc.ignore_sb" => "pc.ignore_sb=yes",
        "pc.recovery" => "pc.recovery=no",
        "pc.weight" => "pc.weight=2",
        "repl.causal_read_timeout" => "repl.causal_read_timeout=PT1S",
        "repl.commit_order" => "repl.commit_order=1",
        "repl.max_ws_size" => "repl.max_ws_size=1M",
        "socket.ssl" => "socket.ssl=no",
        "socket.ssl_ca" => "socket.ssl_ca=/ca.pem",
        "socket.ssl_cert" => "socket.ssl_cert=/c.pem; socket.ssl=no",
        "socket.ssl_cipher" => "socket.ssl_cipher=AES128-SHA",
        "socket.ssl_key" => "socket.ssl_key=/k.pem; socket.ssl=no",
        "socket.ssl_password_file" => "socket.ssl_password_file=/p",
        "socket.ssl_reload" => "socket.ssl_reload=1",
        other => panic!("no sample value for {other}: add one"),
    }
}

fn no_effect_names(warnings: &[Warning]) -> BTreeSet<String> {
    warnings
        .iter()
        .map(|warning| match warning {
            Warning::NoEffect { option, .. } => option.clone(),
            other => panic!("only implemented options were given: {other:?}"),
        })
        .collect()
}

#[test]
fn the_options_without_effect_at_start_are_exactly_these() {
    let mut warned = BTreeSet::new();
    for name in options::implemented_options() {
        let text = sample(name);
        let (_, warnings) =
            ProviderOptions::parse(text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        let names = no_effect_names(&warnings);
        if names.contains(name) {
            warned.insert(name);
        }
    }
    let expected: BTreeSet<&str> = NO_EFFECT_AT_START.into_iter().collect();
    assert_eq!(warned, expected);
}

#[test]
fn a_no_effect_warning_names_the_option_the_value_and_the_reason() {
    let (options, warnings) = ProviderOptions::parse("gmcast.segment = 2").unwrap();
    assert_eq!(
        options.gmcast_segment, 2,
        "the value is still stored and listed"
    );
    let [Warning::NoEffect {
        option,
        value,
        reason,
    }] = &warnings[..]
    else {
        panic!("{warnings:?}");
    };
    assert_eq!((option.as_str(), value.as_str()), ("gmcast.segment", "2"));
    assert_eq!(
        *reason,
        "the Raft leader sends every write-set to each member directly: there are no segment \
         relays, and donor choice ignores segments"
    );
    assert_eq!(
        warnings[0].to_string(),
        format!("provider option gmcast.segment = \"2\" has no effect in Trireme: {reason}")
    );
}

/// Each reason speaks of what Trireme does instead.
#[test]
fn each_listed_option_gets_its_own_reason() {
    let cases = [
        ("gmcast.segment=2", "no segment relays"),
        ("repl.commit_order=2", "always commits in the global order"),
        ("evs.inactive_timeout=PT1M", "evs.suspect_timeout"),
        ("evs.keepalive_period=PT3S", "heartbeats"),
        ("socket.ssl_reload=1", "only at runtime"),
    ];
    for (text, phrase) in cases {
        let (_, warnings) = ProviderOptions::parse(text).unwrap();
        match &warnings[..] {
            [Warning::NoEffect { reason, .. }] => {
                assert!(reason.contains(phrase), "{text}: {reason}")
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

/// The TLS files are the provider's to load: they take effect, without a warning.
#[test]
fn tls_options_take_effect() {
    let (options, warnings) = ProviderOptions::parse(
        "socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl_ca=/ca.pem; \
         socket.ssl_cipher=AES128-SHA; socket.ssl_password_file=/p",
    )
    .unwrap();
    assert_eq!(warnings, []);
    assert!(options.socket_ssl);
    assert_eq!(options.socket_ssl_cipher.as_deref(), Some("AES128-SHA"));
    assert_eq!(options.socket_ssl_password_file.as_deref(), Some("/p"));
}

/// A runtime option that the running node does not pick up warns, and is still stored (the
/// listing shows what was set), except a bootstrap request, which is dropped.
#[test]
fn runtime_changes_without_effect_warn() {
    let mut warned = BTreeSet::new();
    for name in options::runtime_options() {
        let text = sample(name);
        let mut options = ProviderOptions::default();
        let warnings = options
            .set_runtime(text)
            .unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        if !warnings.is_empty() {
            assert_eq!(warnings.len(), 1, "{text}: {warnings:?}");
            warned.extend(no_effect_names(&warnings));
        }
        // The provider takes a bootstrap request at once; a request at start is the
        // connect's (`pc.bootstrap` in my.cnf).
        options.take_pc_bootstrap();
        let mut expected = ProviderOptions::parse(text).unwrap().0;
        expected.pc_bootstrap = false;
        assert_eq!(options, expected, "{text}");
    }
    let expected: BTreeSet<String> = [
        "evs.inactive_timeout",
        "evs.keepalive_period",
        "gcache.keep_pages_size",
        "gcache.keep_seconds",
        "gcache.max_disk_bytes",
        "gcache.page_size",
        "socket.ssl_reload",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(warned, expected);
}

#[test]
fn a_runtime_bootstrap_request_is_recorded_for_the_provider_and_taken_once() {
    let mut options = ProviderOptions::default();
    let warnings = options.set_runtime("pc.bootstrap=YES").unwrap();
    assert_eq!(warnings, Vec::new(), "the running node acts on it");
    assert!(options.take_pc_bootstrap());
    assert!(
        !options.take_pc_bootstrap(),
        "taken once: never kept for a reconnect"
    );
    assert_eq!(options, ProviderOptions::default());
    options.set_runtime("pc.bootstrap=no").unwrap();
    assert!(!options.take_pc_bootstrap());
    assert!(matches!(
        options.set_runtime("pc.bootstrap=please"),
        Err(OptionsError::InvalidValue { .. })
    ));
}

#[test]
fn a_reload_request_is_recorded_with_tls_on_and_taken_once() {
    let mut options = ProviderOptions::parse("socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem")
        .unwrap()
        .0;
    let before = options.clone();
    assert!(!options.take_ssl_reload(), "no request at start");
    assert_eq!(options.set_runtime("socket.ssl_reload=1"), Ok(vec![]));
    assert_eq!(options.render(), before.render(), "the listing keeps `= 1`");
    assert!(options.take_ssl_reload());
    assert!(!options.take_ssl_reload());
    assert_eq!(options, before);

    options.set_runtime("socket.ssl_reload=no").unwrap();
    assert!(!options.take_ssl_reload());
    assert!(matches!(
        options.set_runtime("socket.ssl_reload=soon"),
        Err(OptionsError::InvalidValue { .. })
    ));
    assert_eq!(options, before);
}

#[test]
fn a_reload_request_without_tls_is_reported_and_dropped() {
    let mut options = ProviderOptions::default();
    let warnings = options.set_runtime("socket.ssl_reload=1").unwrap();
    assert_eq!(
        warnings,
        [Warning::NoEffect {
            option: "socket.ssl_reload".into(),
            value: "1".into(),
            reason: "socket.ssl is off: there are no TLS files to reload",
        }]
    );
    assert!(!options.take_ssl_reload());
    assert_eq!(options, ProviderOptions::default());
}

/// A reload request in the option string at start is checked and reported, never kept.
#[test]
fn a_reload_request_at_start_is_not_kept() {
    let (mut options, warnings) = ProviderOptions::parse(
        "socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl_reload=1",
    )
    .unwrap();
    assert!(!options.take_ssl_reload());
    assert!(no_effect_names(&warnings).contains("socket.ssl_reload"));
}

/// `pc.ignore_quorum` reaches the group layer at start and at runtime, as `pc.ignore_sb`
/// does: a member that lost its quorum goes on alone (see `group::QuorumOverride`).
#[test]
fn ignore_quorum_takes_effect_at_start_and_at_runtime() {
    let (options, notes) = ProviderOptions::parse("pc.ignore_quorum=TRUE").unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let config = options.group_config();
    assert!(config.ignore_quorum && !config.ignore_split_brain);
    assert_eq!(
        config.goes_on_without_quorum(),
        Some(group::QuorumOverride::IgnoreQuorum)
    );
    let mut running = ProviderOptions::parse("").unwrap().0;
    assert_eq!(running.group_config().goes_on_without_quorum(), None);
    assert!(running
        .set_runtime("pc.ignore_quorum=1")
        .unwrap()
        .is_empty());
    assert!(running.group_config().ignore_quorum);
}
