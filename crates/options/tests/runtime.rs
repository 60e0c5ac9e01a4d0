//! `SET GLOBAL wsrep_provider_options`: which options may change, which are refused, and
//! that a refused string changes nothing.

use std::time::Duration;

use options::value::FreezePurge;
use options::{OptionsError, ProviderOptions, Warning};

fn started(text: &str) -> ProviderOptions {
    ProviderOptions::parse(text).unwrap().0
}

#[test]
fn runtime_settable_options_are_the_documented_ones() {
    let names: Vec<&str> = options::runtime_options().collect();
    assert_eq!(
        names,
        [
            "cert.log_conflicts",
            "evs.inactive_timeout",
            "evs.keepalive_period",
            "evs.suspect_timeout",
            "gcache.freeze_purge_at_seqno",
            "gcache.keep_pages_size",
            "gcache.keep_seconds",
            "gcache.max_disk_bytes",
            "gcache.page_size",
            "gcs.catch_up_period",
            "gcs.fc_factor",
            "gcs.fc_limit",
            "gmcast.isolate",
            "pc.bootstrap",
            "pc.ignore_quorum",
            "pc.ignore_sb",
            "pc.weight",
            "repl.causal_read_timeout",
            "repl.max_ws_size",
            "socket.ssl_reload",
        ]
    );
}

type Check = fn(&ProviderOptions) -> bool;

/// The runtime changes that reach the running node (the others are in `effects.rs`).
#[test]
fn runtime_options_change() {
    let cases: &[(&str, Check)] = &[
        ("evs.suspect_timeout=PT3S", |o| {
            o.evs_suspect_timeout == Duration::from_secs(3)
        }),
        ("gcache.freeze_purge_at_seqno=now", |o| {
            o.gcache_freeze_purge_at_seqno == FreezePurge::Now
        }),
        ("gcache.freeze_purge_at_seqno=42", |o| {
            o.gcache_freeze_purge_at_seqno == FreezePurge::At(base::Seqno(42))
        }),
        ("gcs.fc_limit=200", |o| o.gcs_fc_limit == 200),
        // The group's quorum takes it (`group::weights`).
        ("pc.weight=3", |o| o.group_config().weight == 3),
        ("gcs.fc_factor=0.8", |o| o.gcs_fc_factor == 0.8),
        ("repl.causal_read_timeout=PT5S", |o| {
            o.repl_causal_read_timeout == Duration::from_secs(5)
        }),
        ("repl.max_ws_size=1M", |o| o.repl_max_ws_size == 1 << 20),
        ("gcs.fc_limit = 50; gcs.fc_factor = 0.5 ;", |o| {
            o.gcs_fc_limit == 50 && o.gcs_fc_factor == 0.5
        }),
        ("", |o| *o == ProviderOptions::default()),
    ];
    for (text, check) in cases {
        let mut options = ProviderOptions::default();
        let warnings = options
            .set_runtime(text)
            .unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        assert!(warnings.is_empty(), "{text:?}: {warnings:?}");
        assert!(check(&options), "{text:?} not applied: {options:?}");
    }
}

#[test]
fn startup_only_options_are_refused_at_runtime() {
    let cases = [
        ("gcache.size", "1G"),
        ("gcache.dir", "/elsewhere"),
        ("gcache.name", "other.cache"),
        ("gcache.recover", "no"),
        ("base_port", "5000"),
        ("base_host", "10.0.0.9"),
        ("base_dir", "/tmp"),
        ("gmcast.listen_addr", "tcp://0.0.0.0:5000"),
        ("gmcast.segment", "2"),
        ("ist.recv_addr", "10.0.0.9:4568"),
        ("ist.recv_bind", "0.0.0.0"),
        ("repl.commit_order", "1"),
        ("gcs.fc_single_primary", "yes"),
        ("socket.ssl", "yes"),
        ("socket.ssl_cert", "/c.pem"),
        ("socket.ssl_cipher", "AES128-SHA"),
        ("socket.ssl_password_file", "/p"),
        // Galera options Trireme ignores but Galera itself refuses at runtime.
        ("pc.linger", "PT10S"),
        ("gmcast.mcast_ttl", "2"),
        ("evs.view_forget_timeout", "PT1H"),
    ];
    for (option, value) in cases {
        let mut options = ProviderOptions::default();
        let text = format!("{option}={value}");
        let error = options.set_runtime(&text).unwrap_err();
        assert_eq!(
            error,
            OptionsError::NotRuntime {
                option: option.to_owned()
            },
            "{text}"
        );
        assert_eq!(
            error.to_string(),
            format!("option {option} cannot be changed at runtime")
        );
        assert_eq!(
            options,
            ProviderOptions::default(),
            "{text} changed something"
        );
    }
}

/// As in Galera, setting a startup-only option to the value in effect is a no-op, not an
/// error; derived values compare resolved.
#[test]
fn startup_only_options_may_be_set_to_their_current_value() {
    let mut options = started("base_host=127.0.0.1; base_port=19002; gcache.size=2G");
    let before = options.clone();
    for text in [
        "gcache.size=2G",
        "gcache.size=2048M",
        "base_port=19002",
        "gmcast.listen_addr=tcp://0.0.0.0:19002",
        "gmcast.listen_addr=0.0.0.0",
        "ist.recv_addr=127.0.0.1",
        "ist.recv_addr=127.0.0.1:19003",
        "gcache.dir=.",
        "gcache.recover=yes",
        "repl.commit_order=NO_OOOC",
        "socket.ssl=no",
        "ist.recv_bind=",
    ] {
        assert_eq!(options.set_runtime(text), Ok(vec![]), "{text}");
        assert_eq!(options, before, "{text}");
    }
    assert!(options.set_runtime("ist.recv_addr=127.0.0.1:4568").is_err());
}

#[test]
fn ignored_galera_options_warn_when_galera_allows_the_change() {
    let mut options = ProviderOptions::default();
    let warnings = options
        .set_runtime("gmcast.peer_addr=10.0.0.3:4567; evs.send_window=8; gcs.fc_limit=40")
        .unwrap();
    assert_eq!(options.gcs_fc_limit, 40);
    assert_eq!(
        warnings,
        [
            Warning::NotImplemented {
                option: "gmcast.peer_addr".into(),
                value: "10.0.0.3:4567".into()
            },
            Warning::NotImplemented {
                option: "evs.send_window".into(),
                value: "8".into()
            },
        ]
    );
}

#[test]
fn a_refused_string_changes_nothing() {
    let cases = [
        (
            "gcs.fc_limit=100; gcache.size=1G",
            "cannot be changed at runtime",
        ),
        (
            "gcs.fc_limit=100; gcs.fc_factor=3",
            "invalid value \"3\" for gcs.fc_factor",
        ),
        (
            "gcs.fc_limit=100; evs.inactive_timeout=PT1S",
            "inconsistent",
        ),
        (
            "gcs.fc_limit=100; gcs.fc_limi=5",
            "Unknown parameter 'gcs.fc_limi'",
        ),
        ("gcs.fc_limit=100; pc.weight", "has no value"),
        ("gcache.max_disk_bytes=1M", "gcache.max_disk_bytes"),
    ];
    for (text, message) in cases {
        let mut options = ProviderOptions::default();
        let error = options.set_runtime(text).unwrap_err();
        assert!(error.to_string().contains(message), "{text}: {error}");
        assert_eq!(
            options,
            ProviderOptions::default(),
            "{text} changed something"
        );
    }
}

/// MariaDB reads `repl.max_ws_size` back from the listing with `strtoul` to update
/// `wsrep_max_ws_size`, so the listing must show a plain number.
#[test]
fn max_ws_size_reads_back_as_a_plain_number() {
    let mut options = ProviderOptions::default();
    options.set_runtime("repl.max_ws_size=1M").unwrap();
    let listing = options.render();
    let value = listing
        .split("repl.max_ws_size = ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap();
    assert_eq!(value, "1048576");
}

/// A bootstrap request from my.cnf is taken once, at connect.
#[test]
fn bootstrap_is_a_request_taken_once() {
    let mut options = started("pc.bootstrap=1");
    assert!(options.take_pc_bootstrap());
    assert!(!options.take_pc_bootstrap());
    assert_eq!(options, ProviderOptions::default());
}

/// A whole `@@wsrep_provider_options` read back and given again (as MariaDB's test suites
/// and restore scripts do) is accepted and changes nothing, whatever the node started with.
#[test]
fn the_listing_given_back_is_accepted_unchanged() {
    for start in [
        "",
        "gcache.size=10M;evs.suspect_timeout=PT10S;evs.inactive_timeout=PT30S;\
         pc.wait_prim_timeout=PT60S;repl.causal_read_timeout=PT90S",
        "gcs.fc_limit=64;socket.checksum=2;gmcast.listen_addr=tcp://127.0.0.1:14567",
    ] {
        let mut options = started(start);
        let before = options.clone();
        let listing = options.render();
        options
            .set_runtime(&listing)
            .unwrap_or_else(|e| panic!("listing of {start:?} refused: {e}"));
        assert_eq!(options, before, "{start}");
        assert_eq!(options.render(), listing, "{start}");
    }
}
