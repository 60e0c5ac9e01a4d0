//! After the last piece: `mariadb-backup --prepare` on the staging directory, and the
//! position the snapshot was taken at.

use super::*;

/// Memory for `--prepare --use-memory`: `[sst] use_memory`, else half of what is available.
pub(super) fn prepare_memory(settings: &Settings) -> u64 {
    if let Some(bytes) = settings.use_memory {
        return bytes;
    }
    let available = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024);
    (available / 2).clamp(128 << 20, 64 << 30)
}

pub(super) fn prepare(staging: &Path, settings: &Settings) -> Result<(), SstError> {
    let memory = prepare_memory(settings);
    let log_path = staging.with_extension("trireme-sst.prepare.log");
    let log_file =
        File::create(&log_path).map_err(|e| SstError::io("creating the prepare log", e))?;
    let started = Instant::now();
    log(
        "INFO",
        &format!(
            "preparing the snapshot with {} --prepare --use-memory={}M",
            settings.mariabackup,
            memory >> 20
        ),
    );
    let status = Command::new(&settings.mariabackup)
        .arg("--prepare")
        .arg(format!("--target-dir={}", staging.display()))
        .arg(format!("--use-memory={memory}"))
        .stdout(
            log_file
                .try_clone()
                .map_err(|e| SstError::io("prepare log", e))?,
        )
        .stderr(log_file)
        .status()
        .map_err(|e| SstError::Tool(format!("cannot run {}: {e}", settings.mariabackup)))?;
    if !status.success() {
        let tail: String = fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        return Err(SstError::Tool(format!(
            "mariadb-backup --prepare failed ({status}); the datadir is untouched; see {}: {tail}",
            log_path.display()
        )));
    }
    let _ = fs::remove_file(&log_path);
    log(
        "INFO",
        &format!("prepared in {:.1} s", started.elapsed().as_secs_f64()),
    );
    Ok(())
}

/// The snapshot's `uuid:seqno [domain]` as mariadb-backup recorded it.
pub(super) fn snapshot_position(staging: &Path) -> Result<String, SstError> {
    let path = staging.join("xtrabackup_galera_info");
    let text = fs::read_to_string(&path).map_err(|e| {
        SstError::io(
            format!("reading {} (the snapshot's position)", path.display()),
            e,
        )
    })?;
    let line = text.lines().next().unwrap_or("").trim().to_string();
    if !crate::is_position(&line) {
        return Err(SstError::Tool(format!(
            "{} holds {line:?}, not uuid:seqno: was the donor's backup taken with --galera-info?",
            path.display()
        )));
    }
    Ok(line)
}
