//! The architecture of `ARCHITECTURE.md`, checked against the workspace as it is.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use tidy::length::{self, Lengths};
use tidy::metadata::{self, DependencyKind};
use tidy::{purity, rules, rust_files, workspace_root, CORE_CRATES};

/// The ratchet of long functions and files (see `tidy::length`).
const RATCHET: &str = "crates/tidy/ratchet.txt";

fn parse(path: &PathBuf) -> (String, syn::File) {
    let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
    let file = syn::parse_file(&text)
        .unwrap_or_else(|e| panic!("{}: does not parse: {e}", path.display()));
    (text, file)
}

/// Every source file of the crates, test modules declared with `#[cfg(test)] mod x;` aside.
fn sources(crate_dirs: &[PathBuf]) -> Vec<(PathBuf, String, syn::File, bool)> {
    let root = workspace_root();
    let mut files = Vec::new();
    let mut test_files = HashSet::new();
    for dir in crate_dirs {
        for path in rust_files(&root, &dir.join("src")).unwrap() {
            let (text, file) = parse(&path);
            test_files.extend(purity::test_module_files(&path, &file));
            files.push((path, text, file));
        }
    }
    files
        .into_iter()
        .map(|(path, text, file)| {
            let test_only = test_files.contains(&path);
            (path, text, file, test_only)
        })
        .collect()
}

#[test]
fn the_crate_table_names_the_workspace_and_its_rules_hold() {
    let root = workspace_root();
    let dependencies = metadata::workspace_dependencies(&root).unwrap();
    let workspace: BTreeSet<String> = dependencies.keys().cloned().collect();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rules = rules::parse(&architecture, &workspace);
    let table: BTreeSet<String> = rules.keys().cloned().collect();
    assert_eq!(
        table, workspace,
        "ARCHITECTURE.md's crate table and the workspace name different crates"
    );
    let mut broken = Vec::new();
    for (name, uses) in &dependencies {
        for (on, kind) in uses {
            if on == "fuzzing" && *kind != DependencyKind::Dev {
                broken.push(format!("{name} links fuzzing, which is test-only"));
            }
            if *kind != DependencyKind::Dev && !rules[name].contains(on) {
                broken.push(format!(
                    "{name} depends on {on}, which its row does not allow"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn core_crates_do_no_io_spawn_no_threads_and_read_no_clock() {
    let dirs: Vec<PathBuf> = CORE_CRATES
        .iter()
        .map(|name| PathBuf::from("crates").join(name))
        .collect();
    let mut broken = Vec::new();
    for (path, _, file, test_only) in sources(&dirs) {
        if test_only {
            continue;
        }
        for finding in purity::findings(&file) {
            broken.push(format!(
                "{}:{}: {} ({})",
                path.display(),
                finding.line,
                finding.what,
                finding.rule
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn long_functions_and_files_only_get_shorter() {
    let root = workspace_root();
    let crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("Cargo.toml").exists())
        .map(|path| path.strip_prefix(&root).unwrap().to_path_buf())
        .collect();
    let mut measured = Lengths::new();
    for (path, text, file, test_only) in sources(&crates) {
        let name = path.display().to_string();
        measured.extend(length::long_file(&name, &text));
        if !test_only {
            measured.extend(length::long_functions(&name, &file));
        }
    }
    let ratchet = std::fs::read_to_string(root.join(RATCHET)).unwrap();
    let ratchet = length::parse_ratchet(&ratchet).unwrap();
    let problems = length::compare(&measured, &ratchet);
    assert!(
        problems.is_empty(),
        "{RATCHET} (functions over {} lines, files over {}):\n{}",
        length::FUNCTION_LINES_MAX,
        length::FILE_LINES_MAX,
        problems.join("\n")
    );
}
