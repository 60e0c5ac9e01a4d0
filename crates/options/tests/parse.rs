//! Startup parsing: every implemented option with good and bad values, Galera options Trireme
//! ignores, unknown names, malformed text, and the values that follow other values.

use std::time::Duration;

use common::NO_EFFECT_AT_START;
use options::value::{CommitOrder, Endpoint, FreezePurge, Isolation, Scheme};
use options::{InitContext, OptionsError, ProviderOptions, Warning};

mod common;

/// Parses `text`, which names implemented options only: the only warnings allowed are the
/// no-effect ones.
fn parse(text: &str) -> ProviderOptions {
    let (options, warnings) =
        ProviderOptions::parse(text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
    for warning in &warnings {
        match warning {
            Warning::NoEffect { option, .. } if NO_EFFECT_AT_START.contains(&option.as_str()) => {}
            other => panic!("{text:?} warned: {other:?}"),
        }
    }
    options
}

fn endpoint(scheme: Option<Scheme>, host: &str, port: u16) -> Endpoint {
    Endpoint {
        scheme,
        host: host.to_owned(),
        port,
    }
}

type Edit = fn(&mut ProviderOptions);

/// Each good value, with the change it makes to the defaults.
#[test]
fn good_values_are_stored_typed() {
    let cases: &[(&str, Edit)] = &[
        ("base_dir = /var/lib/mysql", |o| {
            o.base_dir = "/var/lib/mysql".into();
            o.gcache_dir = "/var/lib/mysql".into();
        }),
        ("base_host=10.0.0.5", |o| {
            o.base_host = "10.0.0.5".into();
            o.ist_recv_addr = endpoint(None, "10.0.0.5", 4568);
        }),
        ("base_host=db-1.example", |o| {
            o.base_host = "db-1.example".into();
            o.ist_recv_addr = endpoint(None, "db-1.example", 4568);
        }),
        ("base_port=19002", |o| {
            o.base_port = 19002;
            o.gmcast_listen_addr.port = 19002;
            o.ist_recv_addr.port = 19003;
        }),
        ("cert.log_conflicts=yes", |o| o.cert_log_conflicts = true),
        ("evs.suspect_timeout=PT10S", |o| {
            o.evs_suspect_timeout = Duration::from_secs(10)
        }),
        ("evs.inactive_timeout=PT1M", |o| {
            o.evs_inactive_timeout = Duration::from_secs(60)
        }),
        ("evs.keepalive_period=PT0.5S", |o| {
            o.evs_keepalive_period = Duration::from_millis(500)
        }),
        ("gcache.dir=/data/gcache", |o| {
            o.gcache_dir = "/data/gcache".into()
        }),
        ("gcache.dir=", |_| {}),
        ("gcache.name=my.cache", |o| {
            o.gcache_name = "my.cache".into()
        }),
        ("gcache.size=10M", |o| o.gcache_size = 10 << 20),
        ("gcache.size=0", |o| o.gcache_size = 0),
        ("gcache.page_size=64m", |o| o.gcache_page_size = 64 << 20),
        ("gcache.keep_pages_size=1G", |o| {
            o.gcache_keep_pages_size = 1 << 30
        }),
        ("gcache.recover=no", |o| o.gcache_recover = false),
        ("gcache.freeze_purge_at_seqno=100", |o| {
            o.gcache_freeze_purge_at_seqno = FreezePurge::At(base::Seqno(100));
        }),
        ("gcache.keep_seconds=3600", |o| o.gcache_keep_seconds = 3600),
        ("gcache.keep_seconds=PT2H", |o| o.gcache_keep_seconds = 7200),
        ("gcache.max_disk_bytes=4G", |o| {
            o.gcache_max_disk_bytes = 4 << 30
        }),
        ("gcs.fc_limit=100", |o| o.gcs_fc_limit = 100),
        ("gcs.catch_up_period=PT2M", |o| {
            o.gcs_catch_up_period = std::time::Duration::from_secs(120)
        }),
        ("gcs.catch_up_period=45", |o| {
            o.gcs_catch_up_period = std::time::Duration::from_secs(45)
        }),
        ("gcs.fc_factor=0.5", |o| o.gcs_fc_factor = 0.5),
        ("gcs.fc_single_primary=on", |o| {
            o.gcs_fc_single_primary = true
        }),
        ("gcs.fc_master_slave=YES", |o| {
            o.gcs_fc_single_primary = true
        }),
        ("gcomm.thread_nice=0", |o| o.gcomm_thread_nice = 0),
        ("gcomm.thread_nice=19", |o| o.gcomm_thread_nice = 19),
        ("gmcast.listen_addr=tcp://127.0.0.1:4567", |o| {
            o.gmcast_listen_addr = endpoint(Some(Scheme::Tcp), "127.0.0.1", 4567);
        }),
        ("gmcast.listen_addr=tcp://127.0.0.1:5000", |o| {
            o.gmcast_listen_addr = endpoint(Some(Scheme::Tcp), "127.0.0.1", 5000);
            o.base_port = 5000;
            o.ist_recv_addr.port = 5001;
        }),
        ("gmcast.listen_addr=192.168.1.2", |o| {
            o.gmcast_listen_addr = endpoint(Some(Scheme::Tcp), "192.168.1.2", 4567);
        }),
        ("gmcast.listen_addr=tcp://[::]:4567", |o| {
            o.gmcast_listen_addr = endpoint(Some(Scheme::Tcp), "::", 4567);
        }),
        ("gmcast.segment=3", |o| o.gmcast_segment = 3),
        ("gmcast.isolate=1", |o| o.gmcast_isolate = Isolation::On),
        ("ist.recv_addr=10.0.0.9", |o| {
            o.ist_recv_addr = endpoint(None, "10.0.0.9", 4568)
        }),
        ("ist.recv_addr=tcp://10.0.0.9:6000", |o| {
            o.ist_recv_addr = endpoint(Some(Scheme::Tcp), "10.0.0.9", 6000);
        }),
        ("ist.recv_bind=0.0.0.0", |o| {
            o.ist_recv_bind = Some(endpoint(None, "0.0.0.0", 4568))
        }),
        ("pc.bootstrap=1", |o| o.pc_bootstrap = true),
        ("pc.ignore_sb=true", |o| o.pc_ignore_sb = true),
        ("pc.weight=0", |o| o.pc_weight = 0),
        ("pc.weight=255", |o| o.pc_weight = 255),
        ("repl.causal_read_timeout=PT90S", |o| {
            o.repl_causal_read_timeout = Duration::from_secs(90);
        }),
        ("repl.commit_order=2", |o| {
            o.repl_commit_order = CommitOrder::LocalOutOfOrder
        }),
        ("repl.commit_order=BYPASS", |o| {
            o.repl_commit_order = CommitOrder::Bypass
        }),
        ("repl.max_ws_size=1M", |o| o.repl_max_ws_size = 1 << 20),
        ("repl.max_ws_size=2147483647", |_| {}),
        ("socket.ssl_ca=/etc/ca.pem", |o| {
            o.socket_ssl_ca = Some("/etc/ca.pem".into())
        }),
        (
            "socket.ssl_cipher=ECDHE-RSA-AES256-GCM-SHA384:AES128-SHA",
            |o| o.socket_ssl_cipher = Some("ECDHE-RSA-AES256-GCM-SHA384:AES128-SHA".into()),
        ),
        ("socket.ssl_cipher=", |_| {}),
        ("socket.ssl_password_file = /etc/mysql/key.pass", |o| {
            o.socket_ssl_password_file = Some("/etc/mysql/key.pass".into())
        }),
        // A reload request is a runtime thing: at start it is checked, and dropped.
        ("socket.ssl_reload=1", |_| {}),
        ("socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem", |o| {
            o.socket_ssl_cert = Some("/c.pem".into());
            o.socket_ssl_key = Some("/k.pem".into());
            o.socket_ssl = true;
            o.gmcast_listen_addr.scheme = Some(Scheme::Ssl);
        }),
        (
            "socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl=no",
            |o| {
                o.socket_ssl_cert = Some("/c.pem".into());
                o.socket_ssl_key = Some("/k.pem".into());
            },
        ),
        ("gcs.fc_limit=1; gcs.fc_limit=2", |o| o.gcs_fc_limit = 2),
    ];
    for (text, edit) in cases {
        let mut expected = ProviderOptions::default();
        edit(&mut expected);
        assert_eq!(parse(text), expected, "{text:?}");
    }
}

/// Each bad value is refused with an error naming the option, the value and the accepted
/// form.
#[test]
fn bad_values_name_the_option_the_value_and_the_range() {
    let cases = [
        ("gcs.fc_factor", "2", "a number from 0.0 to 1.0"),
        ("gcs.fc_factor", "-0.1", "0.0 to 1.0"),
        ("gcs.fc_limit", "0", "an integer from 1 to 1073741824"),
        ("gcs.fc_limit", "many", "1 to 1073741824"),
        ("evs.suspect_timeout", "5s", "ISO 8601 duration"),
        ("evs.suspect_timeout", "PT0S", "positive ISO 8601"),
        ("evs.inactive_timeout", "soon", "ISO 8601"),
        ("evs.keepalive_period", "PT0S", "positive ISO 8601"),
        ("repl.causal_read_timeout", "30 seconds", "ISO 8601"),
        ("base_port", "0", "from 1 to 65535"),
        ("base_port", "65536", "from 1 to 65535"),
        ("base_port", "-1", "from 1 to 65535"),
        ("base_host", "0.0.0.0", "other than 0.0.0.0"),
        ("base_host", "10.0.0.1:4567", "host name or IP address"),
        ("base_dir", "", "non-empty path"),
        (
            "cert.log_conflicts",
            "maybe",
            "yes/no, true/false, on/off, 1/0",
        ),
        ("gcache.recover", "2", "yes/no"),
        ("pc.ignore_sb", "", "yes/no"),
        ("gcache.size", "1P", "K, M, G or T suffix"),
        ("gcache.size", "-5", "byte count"),
        ("gcache.size", "1.5G", "byte count"),
        ("gcache.page_size", "0", "positive byte count"),
        ("gcache.keep_pages_size", "lots", "byte count"),
        ("gcache.max_disk_bytes", "1E", "byte count"),
        ("gcache.keep_seconds", "1.5", "whole number of seconds"),
        ("gcache.keep_seconds", "-3", "whole number of seconds"),
        ("gcs.catch_up_period", "PT0S", "from PT1S to P1D"),
        ("gcs.catch_up_period", "P2D", "from PT1S to P1D"),
        ("gcs.catch_up_period", "soon", "from PT1S to P1D"),
        (
            "gcache.freeze_purge_at_seqno",
            "-2",
            "-1, a seqno from 0 to",
        ),
        ("gcache.freeze_purge_at_seqno", "later", "or now"),
        ("gcache.name", "", "non-empty path"),
        (
            "gmcast.listen_addr",
            "udp://0.0.0.0:4567",
            "[tcp:// or ssl://]host[:port]",
        ),
        ("gmcast.listen_addr", "tcp://0.0.0.0:99999", "host[:port]"),
        ("gmcast.segment", "256", "from 0 to 255"),
        ("gmcast.isolate", "3", "0 (off), 1 (isolated) or 2"),
        ("ist.recv_addr", "10.0.0.1:abc", "host[:port]"),
        ("ist.recv_bind", "a b", "host[:port]"),
        ("gcomm.thread_nice", "20", "from 0 to 19"),
        ("gcomm.thread_nice", "-1", "from 0 to 19"),
        ("gcomm.thread_nice", "low", "from 0 to 19"),
        ("pc.weight", "256", "from 0 to 255"),
        ("pc.weight", "-1", "from 0 to 255"),
        ("pc.bootstrap", "please", "yes/no"),
        (
            "repl.commit_order",
            "4",
            "0 (BYPASS), 1 (OOOC), 2 (LOCAL_OOOC) or 3 (NO_OOOC)",
        ),
        ("repl.max_ws_size", "0", "from 1 to 2147483647"),
        ("repl.max_ws_size", "2147483648", "from 1 to 2147483647"),
        ("repl.max_ws_size", "2G", "from 1 to 2147483647"),
        ("socket.ssl", "sometimes", "yes/no"),
        ("socket.ssl_reload", "now", "yes/no"),
    ];
    for (option, value, range) in cases {
        let text = format!("gcache.size = 1G; {option} = {value}");
        let error = ProviderOptions::parse(&text).unwrap_err();
        match &error {
            OptionsError::InvalidValue {
                option: named,
                value: given,
                ..
            } => {
                assert_eq!((named.as_str(), given.as_str()), (option, value), "{text}");
            }
            other => panic!("{text}: expected an invalid value error, got {other:?}"),
        }
        let message = error.to_string();
        assert!(message.contains(option), "{message}");
        assert!(message.contains(&format!("{value:?}")), "{message}");
        assert!(message.contains(range), "{message} lacks {range:?}");
    }
    assert_eq!(
        ProviderOptions::parse("gcs.fc_factor=2")
            .unwrap_err()
            .to_string(),
        "invalid value \"2\" for gcs.fc_factor: a number from 0.0 to 1.0"
    );
}

#[test]
fn sizes_accept_galera_suffixes_in_any_case() {
    let cases = [
        ("1024", 1024),
        ("1k", 1 << 10),
        ("1K", 1 << 10),
        ("128m", 128 << 20),
        ("128M", 128 << 20),
        ("2g", 2 << 30),
        ("2G", 2 << 30),
        ("1t", 1 << 40),
        ("1T", 1 << 40),
    ];
    for (text, bytes) in cases {
        assert_eq!(
            parse(&format!("gcache.size={text}")).gcache_size,
            bytes,
            "{text}"
        );
        assert_eq!(
            parse(&format!("gcache.keep_pages_size={text}")).gcache_keep_pages_size,
            bytes
        );
    }
}

#[test]
fn durations_use_iso_8601_or_seconds() {
    let cases = [
        ("PT5S", Duration::from_secs(5)),
        ("PT1.5S", Duration::from_millis(1500)),
        ("PT1M30S", Duration::from_secs(90)),
        ("PT1H", Duration::from_secs(3600)),
        ("P1D", Duration::from_secs(86_400)),
        ("7", Duration::from_secs(7)),
    ];
    for (text, duration) in cases {
        let options = parse(&format!(
            "evs.suspect_timeout={text}; evs.inactive_timeout=P2D; repl.causal_read_timeout={text}"
        ));
        assert_eq!(options.evs_suspect_timeout, duration, "{text}");
        assert_eq!(options.repl_causal_read_timeout, duration, "{text}");
    }
}

#[test]
fn booleans_accept_every_galera_spelling() {
    for (text, value) in [
        ("yes", true),
        ("YES", true),
        ("true", true),
        ("True", true),
        ("on", true),
        ("1", true),
        ("no", false),
        ("No", false),
        ("false", false),
        ("off", false),
        ("OFF", false),
        ("0", false),
    ] {
        let options = parse(&format!(
            "cert.log_conflicts={text}; pc.ignore_sb={text}; gcache.recover={text}"
        ));
        assert_eq!(options.cert_log_conflicts, value, "{text}");
        assert_eq!(options.pc_ignore_sb, value, "{text}");
        assert_eq!(options.gcache_recover, value, "{text}");
    }
}

#[test]
fn freeze_purge_at_seqno_takes_minus_one_a_seqno_or_now() {
    for (text, value) in [
        ("-1", FreezePurge::Off),
        ("0", FreezePurge::At(base::Seqno(0))),
        ("1401932", FreezePurge::At(base::Seqno(1_401_932))),
        (
            "9223372036854775807",
            FreezePurge::At(base::Seqno(i64::MAX)),
        ),
        ("now", FreezePurge::Now),
        ("NOW", FreezePurge::Now),
    ] {
        let options = parse(&format!("gcache.freeze_purge_at_seqno = {text}"));
        assert_eq!(options.gcache_freeze_purge_at_seqno, value, "{text}");
    }
}

#[test]
fn unimplemented_galera_options_are_accepted_with_a_warning() {
    let text = "evs.send_window=8; pc.wait_prim_timeout=PT60S; gcache.size=10M; \
                socket.ssl_compression=yes; gmcast.peer_addr=10.0.0.2:4567";
    let (options, warnings) = ProviderOptions::parse(text).unwrap();
    assert_eq!(options.gcache_size, 10 << 20);
    let named: Vec<&str> = warnings
        .iter()
        .map(|warning| match warning {
            Warning::NotImplemented { option, .. } => option.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        named,
        [
            "evs.send_window",
            "pc.wait_prim_timeout",
            "socket.ssl_compression",
            "gmcast.peer_addr"
        ]
    );
    let message = warnings[0].to_string();
    assert!(message.contains("evs.send_window"), "{message}");
    assert!(
        message.contains("accepted but not implemented by Trireme; ignored"),
        "{message}"
    );
}

/// Every option in Galera's listing parses, implemented or not, with Galera's default; the
/// ones Trireme ignores or that have no effect in Trireme say so.
#[test]
fn every_galera_option_is_accepted() {
    for option in options::galera::GALERA_OPTIONS.iter().filter(|o| o.listed) {
        let value = match option.name {
            "base_host" => "127.0.0.1",
            "ist.recv_addr" => "127.0.0.1:4568",
            _ => option.default,
        };
        let text = format!("{} = {value}", option.name);
        let (_, warnings) =
            ProviderOptions::parse(&text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        let expected = if !options::is_implemented(option.name) {
            vec![Warning::NotImplemented {
                option: option.name.to_owned(),
                value: value.to_owned(),
            }]
        } else if NO_EFFECT_AT_START.contains(&option.name) {
            assert!(
                matches!(&warnings[..], [Warning::NoEffect { .. }]),
                "{text}: {warnings:?}"
            );
            warnings.clone()
        } else {
            vec![]
        };
        assert_eq!(warnings, expected, "{text}");
    }
}

/// The option string MariaDB's MTR galera suite passes to every node.
#[test]
fn mtr_galera_suite_options_start() {
    let text = "repl.causal_read_timeout=PT90S;base_port=19002;evs.suspect_timeout=PT10S;\
                evs.inactive_timeout=PT30S;evs.install_timeout=PT15S;\
                pc.wait_prim_timeout=PT60S;gcache.size=10M";
    let (options, warnings) = ProviderOptions::parse(text).unwrap();
    assert_eq!(options.base_port, 19002);
    assert_eq!(options.ist_recv_addr.port, 19003);
    assert_eq!(options.evs_suspect_timeout, Duration::from_secs(10));
    assert_eq!(options.repl_causal_read_timeout, Duration::from_secs(90));
    let named: Vec<(&str, bool)> = warnings
        .iter()
        .map(|warning| match warning {
            Warning::NotImplemented { option, .. } => (option.as_str(), false),
            Warning::NoEffect { option, .. } => (option.as_str(), true),
        })
        .collect();
    assert_eq!(
        named,
        [
            ("evs.inactive_timeout", true),
            ("evs.install_timeout", false),
            ("pc.wait_prim_timeout", false)
        ]
    );
}

#[test]
fn unknown_names_are_refused_together() {
    let error = ProviderOptions::parse("gcache.sise=1G; gcache.size=1G; evs.nope=1; gcache.sise=2")
        .unwrap_err();
    assert_eq!(
        error,
        OptionsError::Unknown {
            options: vec!["gcache.sise".into(), "evs.nope".into()]
        }
    );
    let message = error.to_string();
    assert!(
        message.starts_with("Unknown parameter 'gcache.sise', 'evs.nope'"),
        "{message}"
    );
}

#[test]
fn malformed_text_is_an_error() {
    let cases = [
        ("gcache.size", "has no value"),
        ("gcache.size=1G; pc.weight", "pc.weight has no value"),
        ("=1G", "empty option name"),
        ("  = x ;", "empty option name"),
        ("gcache.size=1G=2G", "more than one value"),
    ];
    for (text, message) in cases {
        let error = ProviderOptions::parse(text).unwrap_err();
        assert!(
            matches!(
                error,
                OptionsError::KeyWithoutValue { .. }
                    | OptionsError::EmptyKey { .. }
                    | OptionsError::MoreThanOneValue { .. }
            ),
            "{text:?}: {error:?}"
        );
        assert!(error.to_string().contains(message), "{text:?}: {error}");
    }
    // Empty entries, blanks and a trailing separator are fine.
    assert_eq!(parse(" ;; gcache.size = 1G ; ; ").gcache_size, 1 << 30);
    // An escaped separator stays in the value.
    assert_eq!(parse(r"gcache.dir=/data/a\;b").gcache_dir, "/data/a;b");
}

#[test]
fn contradictions_are_refused() {
    let cases = [
        (
            "evs.suspect_timeout=PT10S; evs.inactive_timeout=PT5S",
            "evs.inactive_timeout",
        ),
        (
            "gcache.size=2G; gcache.max_disk_bytes=1G",
            "gcache.max_disk_bytes",
        ),
        ("socket.ssl=yes", "neither is set"),
        (
            "socket.ssl_cert=/c.pem; socket.ssl=on",
            "socket.ssl_key is not set",
        ),
        // As in Galera, a certificate or a key alone turns TLS on, and TLS needs both: a
        // half-configured TLS must stop the node, not leave it running in clear.
        ("socket.ssl_cert=/c.pem", "socket.ssl_key is not set"),
        (
            "socket.ssl_key=/k.pem; socket.ssl_ca=/ca.pem",
            "socket.ssl_cert is not set",
        ),
        ("gmcast.listen_addr=ssl://0.0.0.0:4567", "socket.ssl is off"),
        ("ist.recv_addr=ssl://10.0.0.1", "socket.ssl is off"),
        ("base_port=65535", "ist.recv_addr needs a port"),
    ];
    for (text, detail) in cases {
        match ProviderOptions::parse(text) {
            Err(OptionsError::Inconsistent(reason)) => {
                assert!(reason.contains(detail), "{text}: {reason}")
            }
            other => panic!("{text}: expected an inconsistency, got {other:?}"),
        }
    }
    // A port for IST makes base_port 65535 usable.
    assert_eq!(
        parse("base_port=65535; ist.recv_addr=10.0.0.1:4000").base_port,
        65535
    );
    // An explicit socket.ssl = no turns TLS off, however many files are given.
    let options = parse("socket.ssl_cert=/c.pem; socket.ssl=no");
    assert!(!options.socket_ssl);
    assert_eq!(options.gmcast_listen_addr.scheme, Some(Scheme::Tcp));
    // Both files and nothing else: on.
    assert!(parse("socket.ssl_key=/k.pem; socket.ssl_cert=/c.pem").socket_ssl);
    // TLS files and an ssl:// address go together.
    let options = parse(
        "socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; \
         gmcast.listen_addr=ssl://0.0.0.0:4567; ist.recv_addr=ssl://10.0.0.1",
    );
    assert_eq!(options.gmcast_listen_addr.scheme, Some(Scheme::Ssl));
    assert_eq!(options.ist_recv_addr.to_string(), "ssl://10.0.0.1:4568");
    // With TLS on, a tcp:// listen address is served over TLS, as in Galera.
    let options = parse("socket.ssl_cert=/c; socket.ssl_key=/k; gmcast.listen_addr=tcp://1.2.3.4");
    assert_eq!(options.gmcast_listen_addr.to_string(), "ssl://1.2.3.4:4567");
}

#[test]
fn node_address_and_data_dir_come_first_and_options_override_them() {
    let context = InitContext {
        node_address: Some("10.0.0.7:5567"),
        data_dir: Some("/var/lib/mysql/"),
    };
    let (options, _) = ProviderOptions::parse_with("", &context).unwrap();
    assert_eq!(options.base_host, "10.0.0.7");
    assert_eq!(options.base_port, 5567);
    assert_eq!(options.gmcast_listen_addr.to_string(), "tcp://0.0.0.0:5567");
    assert_eq!(options.ist_recv_addr.to_string(), "10.0.0.7:5568");
    assert_eq!(options.base_dir, "/var/lib/mysql/");
    assert_eq!(options.gcache_dir, "/var/lib/mysql/");
    assert_eq!(
        options.gcache_path(),
        std::path::Path::new("/var/lib/mysql/galera.cache")
    );

    let (options, _) =
        ProviderOptions::parse_with("base_port=6000; gcache.dir=/fast", &context).unwrap();
    assert_eq!(options.base_port, 6000);
    assert_eq!(options.ist_recv_addr.port, 6001);
    assert_eq!(options.gcache_dir, "/fast");

    let (options, _) = ProviderOptions::parse_with(
        "",
        &InitContext {
            node_address: Some("10.0.0.8"),
            data_dir: None,
        },
    )
    .unwrap();
    assert_eq!(
        (options.base_host.as_str(), options.base_port),
        ("10.0.0.8", 4567)
    );

    for bad in ["0.0.0.0", "tcp://[::]:4567", "no such host"] {
        let context = InitContext {
            node_address: Some(bad),
            data_dir: None,
        };
        let error = ProviderOptions::parse_with("", &context).unwrap_err();
        assert!(
            error.to_string().contains("wsrep_node_address"),
            "{bad}: {error}"
        );
    }
}

#[test]
fn group_config_carries_the_group_options() {
    let options = parse(
        "evs.suspect_timeout=PT2S; evs.inactive_timeout=PT9S; gcs.fc_limit=64; gcs.fc_factor=0.25",
    );
    let config = options.group_config();
    assert_eq!(config.suspect_timeout, Duration::from_secs(2));
    assert_eq!(config.inactive_timeout, Duration::from_secs(9));
    assert_eq!(config.fc_limit, 64);
    assert_eq!(config.fc_factor, 0.25);
    assert_eq!(config.fc_resume_at(1), 16);
    config.validate().unwrap();
    let defaults = group::GroupConfig::default();
    assert_eq!(config.tick_interval_ns, defaults.tick_interval_ns);
    assert_eq!(config.election_ticks, defaults.election_ticks);
}
