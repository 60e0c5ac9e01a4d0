//! The workspace's crates and their dependencies on each other, from `cargo metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// What a dependency is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DependencyKind {
    /// Linked into the crate itself.
    Normal,
    /// Only for its build script.
    Build,
    /// Only for its tests, examples and benches.
    Dev,
}

/// Crate name -> the workspace crates it depends on, with the kind of each dependency.
pub type Dependencies = BTreeMap<String, BTreeSet<(String, DependencyKind)>>;

/// Why the workspace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// `cargo` did not run.
    #[error("cannot run cargo metadata: {0}")]
    Run(#[from] std::io::Error),
    /// `cargo metadata` failed.
    #[error("cargo metadata failed: {0}")]
    Failed(String),
    /// Its output was not what cargo writes.
    #[error("cargo metadata wrote something unexpected: {0}")]
    Unexpected(String),
}

/// Reads the workspace at `root` (no network: only the workspace's own manifests).
pub fn workspace_dependencies(root: &Path) -> Result<Dependencies, MetadataError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root)
        .output()?;
    if !output.status.success() {
        return Err(MetadataError::Failed(
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| MetadataError::Unexpected(e.to_string()))?;
    from_json(&json)
}

/// The dependencies in `cargo metadata`'s JSON, restricted to the workspace's crates.
pub fn from_json(json: &serde_json::Value) -> Result<Dependencies, MetadataError> {
    let unexpected = |what: &str| MetadataError::Unexpected(what.to_owned());
    let packages = json["packages"]
        .as_array()
        .ok_or_else(|| unexpected("no packages"))?;
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut dependencies = Dependencies::new();
    for package in packages {
        let name = package["name"]
            .as_str()
            .ok_or_else(|| unexpected("a package without a name"))?;
        let entry = dependencies.entry(name.to_owned()).or_default();
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let Some(on) = dependency["name"].as_str().filter(|n| names.contains(n)) else {
                continue;
            };
            let kind = match dependency["kind"].as_str() {
                None => DependencyKind::Normal,
                Some("build") => DependencyKind::Build,
                Some("dev") => DependencyKind::Dev,
                Some(other) => return Err(unexpected(other)),
            };
            entry.insert((on.to_owned(), kind));
        }
    }
    Ok(dependencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_workspace_crates_count_with_their_kind() {
        let json = serde_json::json!({"packages": [
            {"name": "cli", "dependencies": [
                {"name": "base", "kind": null},
                {"name": "clap", "kind": null},
                {"name": "fuzzing", "kind": "dev"}
            ]},
            {"name": "base", "dependencies": []},
            {"name": "fuzzing", "dependencies": []}
        ]});
        let dependencies = from_json(&json).unwrap();
        assert_eq!(
            dependencies["cli"],
            [
                ("base".to_owned(), DependencyKind::Normal),
                ("fuzzing".to_owned(), DependencyKind::Dev)
            ]
            .into()
        );
        assert!(dependencies["base"].is_empty());
        let broken = serde_json::json!({"packages": [{"name": "a", "dependencies": [
            {"name": "a", "kind": "sideways"}]}]});
        assert!(matches!(
            from_json(&broken),
            Err(MetadataError::Unexpected(_))
        ));
    }
}
