//! Checks that keep the architecture as `ARCHITECTURE.md` describes it, run as tests
//! (`crates/tidy/tests/architecture.rs`):
//!
//! - [`rules`]: the crate table of `ARCHITECTURE.md` names exactly the workspace's crates, and
//!   each crate depends (outside its tests) only on the workspace crates its row allows;
//! - [`purity`]: the core crates do no I/O, spawn no threads, sleep on no clock and read none;
//! - [`length`]: functions and files longer than the limits do not appear or grow (the
//!   ratchet lists today's offenders, and only lets their lengths go down).

pub mod length;
pub mod metadata;
pub mod purity;
pub mod rules;

use std::path::{Path, PathBuf};

/// The crates that must stay deterministic (see `ARCHITECTURE.md`, "Architecture invariant").
pub const CORE_CRATES: [&str; 6] = ["base", "writeset", "cert", "order", "group", "engine"];

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/tidy sits two levels below the root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted, as paths relative to `root`.
pub fn rust_files(root: &Path, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack = vec![root.join(dir)];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Whether an item is compiled only for tests (`#[cfg(test)]`).
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}
