//! The donor's side of mariadb-backup: preflight, the SST user's login, the backup process
//! and the scratch directories it leaves.

use super::*;

/// Points a client tool at the donor server's socket with the SST credentials (the
/// password through the environment, never the command line).
pub(super) fn log_in_as_sst_user(cmd: &mut Command, args: &Args) {
    if let Some(socket) = &args.socket {
        cmd.arg(format!("--socket={socket}"));
    }
    match credentials() {
        Some((user, password)) => {
            cmd.arg(format!("--user={user}")).env("MYSQL_PWD", password);
        }
        None => {
            cmd.arg("--user=root").env_remove("MYSQL_PWD");
        }
    }
}

/// Checks the tool and the credentials before anything is sent; returns the server version.
pub(super) fn preflight(args: &Args, settings: &Settings) -> Result<String, SstError> {
    crate::joiner::backup_tool_version(&settings.mariabackup)?;
    let mut cmd = Command::new("mariadb");
    cmd.arg("--no-defaults")
        .args(["-N", "-B", "-e", "SELECT VERSION()"]);
    log_in_as_sst_user(&mut cmd, args);
    let out = cmd.output().map_err(|e| SstError::Preflight {
        message: format!("cannot run the mariadb client to check the SST credentials ({e}): install mariadb-client"),
        code: exit_code::NOT_FOUND,
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let user = credentials().map_or("root".to_string(), |c| c.0);
        return Err(SstError::Preflight {
            message: format!(
                "the donor server refused the SST credentials of user {user:?} ({}): set \
                 wsrep_sst_auth to user:password of an account with the RELOAD, PROCESS, LOCK \
                 TABLES and BINLOG MONITOR privileges",
                stderr.trim()
            ),
            code: exit_code::ACCESS,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The donor's estimate of the snapshot: the datadir's bytes minus what a backup leaves
/// out (the provider's files, the redo log, which it copies only from its checkpoint on).
pub(super) fn datadir_bytes(datadir: &Path) -> u64 {
    let left_out = fs::read_dir(datadir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    crate::swap::is_preserved(&name) || name.starts_with("ib_logfile")
                })
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>()
        })
        .unwrap_or(0);
    crate::swap::staged_bytes(datadir).saturating_sub(left_out)
}

/// Removes the scratch directories of earlier donors that were killed before they could.
pub(super) fn remove_orphaned_scratch_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("trireme-sst-backup-") else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Starts mariadb-backup streaming to a pipe; `work` is its scratch directory.
pub(super) fn start_backup(
    args: &Args,
    settings: &Settings,
    work: &Path,
) -> Result<Child, SstError> {
    remove_orphaned_scratch_dirs();
    fs::create_dir_all(work).map_err(|e| SstError::io("creating a work directory", e))?;
    let log_path = args.datadir.join("mariabackup.backup.log");
    let log_file = fs::File::create(&log_path)
        .map_err(|e| SstError::io(format!("creating {}", log_path.display()), e))?;
    let mut cmd = Command::new(&settings.mariabackup);
    cmd.args(args.defaults_options())
        .arg("--backup")
        .arg("--galera-info")
        .arg("--stream=xbstream")
        .arg(format!("--parallel={}", settings.backup_threads))
        .arg(format!(
            "--log-copy-interval={}",
            settings.log_copy_interval_ms
        ))
        .arg(format!("--target-dir={}", work.display()))
        .arg(format!("--datadir={}", args.datadir.display()))
        .arg("--databases-exclude=lost+found");
    log_in_as_sst_user(&mut cmd, args);
    if !args.mysqld_args.is_empty() {
        cmd.arg("--mysqld-args").args(&args.mysqld_args);
    }
    cmd.stdout(Stdio::piped())
        .stderr(log_file)
        .stdin(Stdio::null());
    log(
        "INFO",
        &format!(
            "starting {} --backup (log: {})",
            settings.mariabackup,
            log_path.display()
        ),
    );
    cmd.spawn()
        .map_err(|e| SstError::Tool(format!("cannot start {}: {e}", settings.mariabackup)))
}

/// Waits for mariadb-backup (killing it if the transfer already failed).
pub(super) fn finish_backup(backup: &mut Child, failed: bool) -> Result<(), SstError> {
    if failed {
        let _ = backup.kill();
    }
    // Drain what is left so the tool is not stuck on a full pipe.
    if let Some(mut out) = backup.stdout.take() {
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    }
    let status = backup
        .wait()
        .map_err(|e| SstError::io("waiting for mariadb-backup", e))?;
    if !status.success() && !failed {
        return Err(SstError::Tool(format!(
            "mariadb-backup --backup failed ({status}): see mariabackup.backup.log in the \
             donor's datadir"
        )));
    }
    Ok(())
}
