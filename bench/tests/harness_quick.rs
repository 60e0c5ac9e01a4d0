//! Keeps the side-by-side benchmark harness (`bench/run.sh`) from rotting: runs a shortened
//! `--quick` (only the write load on node 1, 10 s per provider) against Trireme and Galera
//! and checks that `report.md` has numbers, not "n/a", for both.
//!
//! It needs what the harness needs: root (the servers run as the user `trireme`), MariaDB
//! 10.11, Galera 4 and sysbench (scripts/setup.sh), and builds of the provider and the CLI
//! (see `builds_under_test`). It takes about a minute.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";
/// What bench/run.sh loads from `target/release` of the workspace.
const RELEASE_FILES: [&str; 2] = ["libtrireme.so", "trireme"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ lies inside the workspace")
        .to_path_buf()
}

/// The provider and the `trireme` program the harness runs: `TRIREME_TEST_PROVIDER` and
/// `TRIREME_CLI` when both are set (scripts/test.sh points them at the build every other
/// test uses, so that a test run compiles nothing twice), else the release builds, built when
/// missing.
fn builds_under_test(root: &Path) -> (PathBuf, PathBuf) {
    if let (Some(provider), Some(cli)) = (
        std::env::var_os("TRIREME_TEST_PROVIDER"),
        std::env::var_os("TRIREME_CLI"),
    ) {
        let (provider, cli) = (PathBuf::from(provider), PathBuf::from(cli));
        for file in [&provider, &cli] {
            assert!(file.is_file(), "{} is missing", file.display());
        }
        return (provider, cli);
    }
    ensure_release_builds(root);
    let release = root.join("target/release");
    (
        release.join(RELEASE_FILES[0]),
        release.join(RELEASE_FILES[1]),
    )
}

fn ensure_release_builds(root: &Path) {
    let release = root.join("target/release");
    if RELEASE_FILES.iter().all(|f| release.join(f).is_file()) {
        return;
    }
    eprintln!("building the release provider and CLI for bench/run.sh");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "provider", "-p", "cli"])
        .current_dir(root)
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "`cargo build --release -p provider -p cli` failed ({status}); bench/run.sh needs \
         target/release/libtrireme.so and target/release/trireme"
    );
    for file in RELEASE_FILES {
        assert!(
            release.join(file).is_file(),
            "{} is still missing after the release build (is CARGO_TARGET_DIR set? bench/run.sh \
             expects the workspace's target/)",
            release.join(file).display()
        );
    }
}

/// The cells of every table row between the heading that contains `heading` and the next
/// heading, without the outer pipes.
fn section_rows(report: &str, heading: &str) -> Vec<Vec<String>> {
    report
        .lines()
        .skip_while(|line| !(line.starts_with('#') && line.contains(heading)))
        .skip(1)
        .take_while(|line| !line.starts_with('#'))
        .filter(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

/// The median at the start of a cell such as "512.3 [500.1–520.0]".
fn leading_number(cell: &str) -> Option<f64> {
    cell.split_whitespace().next()?.parse().ok()
}

#[test]
fn quick_write_on_node1_reports_numbers_for_both_providers() {
    assert!(
        Path::new(GALERA).is_file(),
        "{GALERA} is missing: run scripts/setup.sh to install MariaDB 10.11 and Galera 4"
    );
    let root = workspace_root();
    let (provider, cli) = builds_under_test(&root);
    let out = std::env::temp_dir().join(format!("trireme-bench-harness-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);

    // Ports away from the harness defaults (a benchmark may be running) and from the test
    // clusters, which take multiples of 1000.
    let result = Command::new("timeout")
        .arg("900")
        .arg(root.join("bench/run.sh"))
        .env("TRIREME_CLI", &cli)
        .arg("--provider-a")
        .arg(&provider)
        .args(["--quick", "--only", "write-node1", "--seconds", "10"])
        .args(["--base-port-a", "28300", "--base-port-b", "29300"])
        .args(["--base-port-c", "30300", "--out"])
        .arg(&out)
        .output()
        .expect("bash runs bench/run.sh");
    let log = fs::read_to_string(out.join("run.log")).unwrap_or_default();
    assert!(
        result.status.success(),
        "bench/run.sh failed ({}):\n{}\n--- {} ---\n{log}",
        result.status,
        String::from_utf8_lossy(&result.stderr),
        out.join("run.log").display()
    );

    let report = fs::read_to_string(out.join("report.md")).expect("bench/run.sh wrote report.md");
    let rows = section_rows(&report, "`oltp_write_only-8t-node1`");
    assert!(
        rows.len() > 2,
        "no metric table for oltp_write_only-8t-node1 in {}:\n{report}",
        out.display()
    );
    assert!(
        rows[0].iter().any(|c| c.contains("Trireme"))
            && rows[0].iter().any(|c| c.contains("Galera")),
        "the table header names both providers: {:?}",
        rows[0]
    );
    for metric in [
        "tps",
        "latency p50 (ms)",
        "latency p95 (ms)",
        "latency p99 (ms)",
    ] {
        let row = rows
            .iter()
            .find(|r| r[0] == metric)
            .unwrap_or_else(|| panic!("no row {metric:?} in {}:\n{report}", out.display()));
        for (column, provider) in [(1, "A (Trireme)"), (2, "B (Galera)")] {
            let value = leading_number(&row[column]);
            assert!(
                value.is_some_and(|v| v > 0.0),
                "{metric} of {provider} is {:?}, not a positive number; see {}",
                row[column],
                out.display()
            );
        }
    }
    assert!(
        out.join("write_tps.png").is_file() || !report.contains("write_tps.png"),
        "the report links a plot that was not written"
    );
    fs::remove_dir_all(&out).expect("remove the output directory");
}
