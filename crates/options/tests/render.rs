//! The `@@wsrep_provider_options` listing: Galera's names, order and format, and parsing it
//! back gives the same options. The last tests compare against the reference files of a real
//! Galera 26.4.23 node when they are present beside the repository.

use std::path::PathBuf;

use options::galera::LISTED_NAMES;
use options::status_vars::{self, STATUS_VARS};
use options::{InitContext, ProviderOptions, Warning};

/// The listing as (name, value) pairs, checking Galera's `key = value; ` format on the way.
fn rows(listing: &str) -> Vec<(String, String)> {
    assert!(
        listing.ends_with("; "),
        "{listing:?} does not end with \"; \""
    );
    listing
        .strip_suffix("; ")
        .unwrap()
        .split("; ")
        .map(|row| {
            let (name, value) = row
                .split_once(" = ")
                .unwrap_or_else(|| panic!("{row:?} is not `key = value`"));
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

#[test]
fn default_listing_has_every_galera_name_in_galera_s_order() {
    let listing = ProviderOptions::default().render();
    let names: Vec<String> = rows(&listing).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, LISTED_NAMES, "{listing}");
}

#[test]
fn default_listing_shows_galera_defaults() {
    let listing = ProviderOptions::default().render();
    for expected in [
        "base_dir = .; ",
        "base_host = ; ",
        "base_port = 4567; ",
        "cert.log_conflicts = no; ",
        "evs.inactive_check_period = PT0.5S; ",
        "evs.suspect_timeout = PT5S; ",
        "evs.view_forget_timeout = P1D; ",
        "gcache.page_size = 128M; ",
        "gcache.recover = yes; ",
        "gcache.size = 128M; ",
        "gcomm.thread_prio = ; ",
        "gcs.fc_factor = 1.0; ",
        "gcs.fc_limit = 16; ",
        "gmcast.listen_addr = tcp://0.0.0.0:4567; ",
        "ist.recv_addr = ; ",
        "pc.ignore_sb = false; ",
        "pc.weight = 1; ",
        "repl.commit_order = 3; ",
        "repl.max_ws_size = 2147483647; ",
        "socket.send_buf_size = auto; ",
    ] {
        assert!(
            listing.contains(expected),
            "{expected:?} missing from {listing}"
        );
    }
}

#[test]
fn trireme_options_show_only_when_set_and_keep_the_sorted_order() {
    let (options, _) = ProviderOptions::parse(
        "gcache.keep_seconds=600; gcache.freeze_purge_at_seqno=now; pc.bootstrap=yes; \
         gmcast.isolate=1; ist.recv_bind=10.0.0.1",
    )
    .unwrap();
    let listing = options.render();
    for expected in [
        "gcache.freeze_purge_at_seqno = now; ",
        "gcache.keep_seconds = 600; ",
        "pc.bootstrap = true; ",
        "gmcast.isolate = 1; ",
        "ist.recv_bind = 10.0.0.1:4568; ",
    ] {
        assert!(
            listing.contains(expected),
            "{expected:?} missing from {listing}"
        );
    }
    assert!(!listing.contains("gcache.max_disk_bytes"), "{listing}");
    assert!(!listing.contains("socket.ssl"), "{listing}");
    let names: Vec<String> = rows(&listing).into_iter().map(|(name, _)| name).collect();
    assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
    assert_eq!(names.len(), LISTED_NAMES.len() + 5);
}

#[test]
fn the_listing_parses_back_to_the_same_options() {
    let configurations = [
        "",
        "base_port=19002; gcache.size=10M; evs.suspect_timeout=PT10S; \
         evs.inactive_timeout=PT30S; repl.causal_read_timeout=PT90S",
        "gmcast.listen_addr=tcp://[::1]:5000; ist.recv_addr=tcp://[fe80::1]:6000; \
         ist.recv_bind=[::]",
        "socket.ssl_cert=/etc/c.pem; socket.ssl_key=/etc/k.pem; socket.ssl_ca=/etc/ca.pem",
        "socket.ssl_cert=/etc/c.pem; socket.ssl_key=/etc/k.pem; socket.ssl=no",
        "socket.ssl_cert=/etc/c.pem; socket.ssl_key=/etc/k.pem; \
         socket.ssl_cipher=AES256-GCM-SHA384:AES128-SHA; socket.ssl_password_file=/etc/p",
        "socket.ssl_cipher=AES128-SHA; socket.ssl_password_file=/etc/p",
        "gcache.dir=/data/odd\\;dir; gcache.name=/abs/path.cache; base_dir=/var/lib/mysql",
        "gcache.size=1000; gcache.page_size=1536M; gcache.keep_pages_size=3T; \
         gcache.max_disk_bytes=8G; gcache.keep_seconds=86400; gcache.recover=no; \
         gcache.freeze_purge_at_seqno=123",
        "gcs.fc_limit=1000; gcs.fc_factor=0.1; gcs.fc_single_primary=yes; \
         evs.keepalive_period=PT0.25S",
        "repl.max_ws_size=1000000; repl.commit_order=0; cert.log_conflicts=yes; \
         pc.ignore_sb=yes; pc.weight=0; pc.bootstrap=yes; gmcast.segment=7; gmcast.isolate=2",
        "evs.suspect_timeout=P1DT1H0.5S; evs.inactive_timeout=P2D",
    ];
    for text in configurations {
        let (options, _) =
            ProviderOptions::parse(text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
        let listing = options.render();
        let (again, _) = ProviderOptions::parse(&listing)
            .unwrap_or_else(|e| panic!("listing of {text:?} refused: {e}\n{listing}"));
        assert_eq!(again, options, "{text:?}\n{listing}");
        assert_eq!(again.render(), listing);
    }
    let context = InitContext {
        node_address: Some("192.168.0.10:4444"),
        data_dir: Some("/srv/db/"),
    };
    let (options, _) = ProviderOptions::parse_with("gcs.fc_limit=9", &context).unwrap();
    assert_eq!(
        ProviderOptions::parse(&options.render()).unwrap().0,
        options
    );
}

#[test]
fn every_galera_option_name_parses_from_the_default_listing() {
    let listing = ProviderOptions::default().render();
    let (_, warnings) = ProviderOptions::parse(&listing).unwrap();
    let not_implemented: Vec<&str> = LISTED_NAMES
        .iter()
        .copied()
        .filter(|name| !options::is_implemented(name))
        .collect();
    let warned: Vec<&str> = warnings
        .iter()
        .filter_map(|warning| match warning {
            Warning::NotImplemented { option, .. } => Some(option.as_str()),
            Warning::NoEffect { .. } => None,
        })
        .collect();
    assert_eq!(warned, not_implemented);
    let no_effect: Vec<&str> = warnings
        .iter()
        .filter_map(|warning| match warning {
            Warning::NoEffect { option, .. } => Some(option.as_str()),
            Warning::NotImplemented { .. } => None,
        })
        .collect();
    assert_eq!(
        no_effect,
        [
            "evs.inactive_timeout",
            "evs.keepalive_period",
            "gmcast.segment",
            "repl.commit_order"
        ]
    );
}

/// The value of `name` in `listing`, if the listing shows it.
fn shown<'a>(listing: &'a str, name: &str) -> Option<&'a str> {
    listing
        .strip_suffix("; ")
        .unwrap_or(listing)
        .split("; ")
        .find_map(|row| row.strip_prefix(name)?.strip_prefix(" = "))
}

/// With TLS on, Galera shows `socket.ssl_cipher` (empty unless given) and
/// `socket.ssl_reload = 1`; the password file shows whenever it is set. With TLS off none
/// of them shows unless given.
#[test]
fn tls_options_show_as_galera_shows_them() {
    let (on, _) = ProviderOptions::parse("socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem").unwrap();
    let listing = on.render();
    assert_eq!(shown(&listing, "socket.ssl"), Some("yes"), "{listing}");
    assert_eq!(shown(&listing, "socket.ssl_cipher"), Some(""), "{listing}");
    assert_eq!(shown(&listing, "socket.ssl_reload"), Some("1"), "{listing}");
    assert_eq!(
        shown(&listing, "socket.ssl_password_file"),
        None,
        "{listing}"
    );

    let (on, _) = ProviderOptions::parse(
        "socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl_cipher=AES128-SHA; \
         socket.ssl_password_file=/etc/mysql/pass",
    )
    .unwrap();
    let listing = on.render();
    assert_eq!(shown(&listing, "socket.ssl_cipher"), Some("AES128-SHA"));
    assert_eq!(
        shown(&listing, "socket.ssl_password_file"),
        Some("/etc/mysql/pass")
    );

    let (off, _) =
        ProviderOptions::parse("socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl=no")
            .unwrap();
    let listing = off.render();
    assert_eq!(shown(&listing, "socket.ssl"), Some("no"), "{listing}");
    assert_eq!(shown(&listing, "socket.ssl_cipher"), None, "{listing}");
    assert_eq!(shown(&listing, "socket.ssl_reload"), None, "{listing}");

    let (off, _) = ProviderOptions::parse("socket.ssl_cipher=AES128-SHA").unwrap();
    assert_eq!(
        shown(&off.render(), "socket.ssl_cipher"),
        Some("AES128-SHA")
    );
    assert_eq!(shown(&off.render(), "socket.ssl_reload"), None);
}

fn reference_file(name: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference")
        .join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(error) => {
            eprintln!(
                "skipped: reference file {} not readable ({error}); the embedded lists are \
                 still checked by the other tests",
                path.display()
            );
            None
        }
    }
}

/// The names in the reference listing are the embedded [`LISTED_NAMES`], and Trireme renders
/// the reference node's configuration exactly as that node did.
#[test]
fn listing_matches_the_reference_galera_node() {
    let Some(text) = reference_file("galera-provider-options.txt") else {
        return;
    };
    let raw = text
        .lines()
        .skip_while(|line| !line.starts_with("# raw:"))
        .nth(1)
        .expect("the reference file has a line after `# raw:`");
    let names: Vec<String> = rows(raw).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, LISTED_NAMES);

    // What cluster.sh gave that node (see the file's header); the rest is defaults.
    let context = InitContext {
        node_address: Some("127.0.0.1"),
        data_dir: Some("$BASE/node1/data/"),
    };
    let configured = "gmcast.listen_addr=tcp://127.0.0.1:4567; ist.recv_addr=127.0.0.1:4568; \
                      gcache.size=2G; gcache.dir=$BASE/node1/data";
    let (options, warnings) = ProviderOptions::parse_with(configured, &context).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(options.render(), raw);
}

/// The status variable names are the reference node's, in its order, plus Trireme's own
/// (each says so in its meaning).
#[test]
fn status_variables_match_the_reference_galera_node() {
    let Some(text) = reference_file("galera-status-vars.txt") else {
        return;
    };
    let names: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| line.split('\t').next().unwrap_or(line))
        .collect();
    let ours: Vec<String> = STATUS_VARS
        .iter()
        .filter(|var| !var.meaning.starts_with("Trireme:"))
        .map(|var| format!("{}{}", status_vars::PREFIX, var.name))
        .collect();
    assert_eq!(names, ours);
    let own: Vec<&str> = STATUS_VARS
        .iter()
        .filter(|var| var.meaning.starts_with("Trireme:"))
        .map(|var| var.name)
        .collect();
    assert!(!own.is_empty(), "Trireme's own variables are listed too");
    for name in own {
        let full = format!("{}{name}", status_vars::PREFIX);
        assert!(
            !names.contains(&full.as_str()),
            "{full} is a Galera name and must never be marked as Trireme's own"
        );
    }
}
