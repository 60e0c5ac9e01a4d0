use super::setting::HEARTBEATS_ARE_KEEPALIVES;
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
    let trireme_only = [
        "gcache.keep_seconds",
        "gcache.max_disk_bytes",
        "gcomm.thread_nice",
        "gcs.catch_up_period",
        "metrics.listen_addr",
    ];
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
        Setting::PcIgnoreQuorum => &["pc_ignore_quorum"],
        Setting::PcIgnoreSb => &["pc_ignore_sb"],
        Setting::PcRecovery => &["pc_recovery"],
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
