//! Finding what a cluster needs on this machine: the provider library, the SST script and
//! the MariaDB tools.

use super::*;

/// The path of the provider to use when none is given: `libtrireme.so` next to the running
/// binary (for a test binary in `target/<profile>/deps`, also one directory up).
pub fn default_provider() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running binary's path")?;
    let mut looked = Vec::new();
    if let Some(dir) = exe.parent() {
        looked.push(dir.join(PROVIDER_FILE_NAME));
        if dir.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = dir.parent() {
                looked.push(up.join(PROVIDER_FILE_NAME));
            }
        }
    }
    if let Some(found) = looked.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let list: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "no --provider given and the Trireme provider was not found at {}: build it in the same \
         target directory, or pass --provider PATH (for example \
         --provider /usr/lib/galera/libgalera_smm.so)",
        list.join(" or ")
    )
}

/// The name of the trireme SST method's program.
pub const SST_SCRIPT: &str = "wsrep_sst_trireme";

/// The directory holding `wsrep_sst_trireme`: next to the running binary (or one level up
/// from a test binary in `deps/`), else anywhere on PATH.
pub fn sst_script_dir() -> Result<PathBuf> {
    program_dir(SST_SCRIPT, "sst").context("--sst-method trireme needs it")
}

/// The directory holding `program`: next to the running binary (or one level up from a
/// test binary in `deps/`), else anywhere on PATH. `package` builds it.
pub(super) fn program_dir(program: &str, package: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running binary's path")?;
    let mut looked = Vec::new();
    if let Some(dir) = exe.parent() {
        looked.push(dir.to_path_buf());
        if dir.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = dir.parent() {
                looked.push(up.to_path_buf());
            }
        }
    }
    looked.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    looked
        .into_iter()
        .find(|dir| dir.join(program).is_file())
        .ok_or_else(|| {
            anyhow!(
                "{program} is neither next to this binary nor on PATH: build it with \
                 `cargo build --release -p {package}`"
            )
        })
}

/// Makes `path` absolute without requiring it to exist (and resolves it when it does).
pub(super) fn absolute(path: &Path) -> Result<PathBuf> {
    if path.exists() {
        return fs::canonicalize(path)
            .with_context(|| format!("cannot resolve {}", path.display()));
    }
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Makes `path` absolute without resolving symbolic links (a provider path is kept as the
/// user wrote it).
pub(super) fn absolute_path(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Finds `program` on PATH.
pub(super) fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Fails unless the MariaDB programs this tool runs are installed.
pub fn check_mariadb_installed() -> Result<()> {
    if !Path::new(MARIADBD).is_file() {
        bail!("{MARIADBD} is missing: install MariaDB 10.11 (run scripts/setup.sh)");
    }
    for program in [MARIADB_CLIENT, INSTALL_DB] {
        if on_path(program).is_none() {
            bail!("{program} is not on PATH: install MariaDB 10.11 (run scripts/setup.sh)");
        }
    }
    Ok(())
}
