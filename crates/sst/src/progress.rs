//! The machine-readable progress file both sides keep while a transfer runs:
//! `<datadir>.trireme-sst.json`, replaced atomically (write, then rename) at most a few
//! times a second. `trireme cluster status` reads it and draws a progress bar.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What a transfer is doing, as the progress file says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// `joiner` or `donor`.
    pub role: String,
    /// `preflight`, `waiting`, `transfer`, `prepare`, `swap`, `done` or `failed`.
    pub phase: String,
    /// Bytes of the snapshot received (joiner) or sent (donor), including resumed pieces.
    pub bytes_done: u64,
    /// The donor's estimate of the snapshot's size (0 until known).
    pub bytes_total: u64,
    /// Of `bytes_done`, how much was already held from an earlier attempt.
    pub bytes_resumed: u64,
    /// Recent rate in bytes per second.
    pub rate: f64,
    /// Estimated seconds left, if known.
    pub eta_seconds: Option<f64>,
    /// When the transfer started (Unix seconds).
    pub started: u64,
    /// When this file was written (Unix seconds).
    pub updated: u64,
    /// The other side's address.
    pub peer: String,
    /// The error, in phase `failed`.
    pub message: String,
}

/// The progress file of the node whose datadir is `datadir`.
pub fn progress_path(datadir: &Path) -> PathBuf {
    crate::swap::sibling(datadir, "trireme-sst.json")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Progress {
    /// Reads a progress file; `None` if absent or unreadable.
    pub fn read(path: &Path) -> Option<Progress> {
        serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
    }

    /// Seconds since this file was written.
    pub fn age_seconds(&self) -> u64 {
        unix_now().saturating_sub(self.updated)
    }

    /// One line for `trireme cluster status`: a bar, the bytes, the rate and the ETA.
    pub fn render(&self, width: usize) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let fraction = if self.bytes_total > 0 {
            (self.bytes_done as f64 / self.bytes_total as f64).min(1.0)
        } else {
            0.0
        };
        let filled = (fraction * width as f64).round() as usize;
        let bar = format!(
            "[{}{}]",
            "#".repeat(filled),
            ".".repeat(width - filled.min(width))
        );
        let eta = match self.eta_seconds {
            Some(s) if self.phase == "transfer" => format!(", ETA {s:.0} s"),
            _ => String::new(),
        };
        let resumed = if self.bytes_resumed > 0 {
            format!(", {:.2} GiB resumed", gib(self.bytes_resumed))
        } else {
            String::new()
        };
        let failed = if self.phase == "failed" {
            format!(": {}", self.message)
        } else {
            String::new()
        };
        format!(
            "SST {} {} {bar} {:>3.0}% {:.2}/{:.2} GiB, {:.0} MB/s{eta}{resumed}{failed}",
            self.role,
            self.phase,
            fraction * 100.0,
            gib(self.bytes_done),
            gib(self.bytes_total),
            self.rate / 1e6,
        )
    }
}

/// Keeps a progress file up to date, rate-limited.
pub struct ProgressFile {
    path: PathBuf,
    state: Progress,
    started: Instant,
    last_write: Option<Instant>,
    last_log: Instant,
    rate_mark: (Instant, u64),
}

/// How often the file is rewritten at most.
const WRITE_EVERY: Duration = Duration::from_millis(250);
/// How often a progress line goes to the error log.
const LOG_EVERY: Duration = Duration::from_secs(5);

impl ProgressFile {
    /// Starts a progress file for `role` talking to `peer`.
    pub fn new(path: PathBuf, role: &str, peer: &str) -> ProgressFile {
        let now = Instant::now();
        ProgressFile {
            path,
            state: Progress {
                role: role.into(),
                phase: "preflight".into(),
                bytes_done: 0,
                bytes_total: 0,
                bytes_resumed: 0,
                rate: 0.0,
                eta_seconds: None,
                started: unix_now(),
                updated: unix_now(),
                peer: peer.into(),
                message: String::new(),
            },
            started: now,
            last_write: None,
            last_log: now,
            rate_mark: (now, 0),
        }
    }

    /// Enters a phase (always written at once).
    pub fn phase(&mut self, phase: &str) {
        self.state.phase = phase.into();
        if phase == "done" {
            // The estimate was an estimate; a finished transfer is 100%.
            self.state.bytes_total = self.state.bytes_done;
            self.state.eta_seconds = None;
        }
        self.write(true);
    }

    /// Sets the expected size.
    pub fn set_total(&mut self, bytes: u64) {
        self.state.bytes_total = bytes;
    }

    /// Records the bytes done so far (and of them, resumed); writes and logs when due.
    pub fn update(&mut self, done: u64, resumed: u64) {
        self.state.bytes_done = done;
        self.state.bytes_resumed = resumed;
        let now = Instant::now();
        let (mark_at, mark_bytes) = self.rate_mark;
        let span = now.duration_since(mark_at).as_secs_f64();
        if span >= 1.0 {
            self.state.rate = done.saturating_sub(mark_bytes) as f64 / span;
            self.rate_mark = (now, done);
        } else if self.state.rate == 0.0 {
            let total_span = now.duration_since(self.started).as_secs_f64().max(1e-3);
            self.state.rate = done as f64 / total_span;
        }
        self.state.eta_seconds = (self.state.rate > 0.0 && self.state.bytes_total > done)
            .then(|| (self.state.bytes_total - done) as f64 / self.state.rate);
        if now.duration_since(self.last_log) >= LOG_EVERY {
            self.last_log = now;
            crate::log("INFO", &format!("progress: {}", self.state.render(20)));
        }
        self.write(false);
    }

    /// Marks the transfer failed with `message`.
    pub fn failed(&mut self, message: &str) {
        self.state.message = message.into();
        self.phase("failed");
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn write(&mut self, force: bool) {
        let now = Instant::now();
        if !force
            && self
                .last_write
                .is_some_and(|at| now.duration_since(at) < WRITE_EVERY)
        {
            return;
        }
        self.last_write = Some(now);
        self.state.updated = unix_now();
        let Ok(text) = serde_json::to_string_pretty(&self.state) else {
            return;
        };
        let temporary = self.path.with_extension("json.tmp");
        // Progress is advisory: a full disk must not fail the transfer because of it.
        if fs::write(&temporary, text).is_ok() {
            let _ = fs::rename(&temporary, &self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_renders_a_bar() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        let mut file = ProgressFile::new(path.clone(), "joiner", "127.0.0.1:1");
        file.set_total(4 << 30);
        file.phase("transfer");
        file.update(1 << 30, 0);
        file.phase("transfer");
        let read = Progress::read(&path).unwrap();
        assert_eq!(read.bytes_done, 1 << 30);
        assert_eq!(read.bytes_total, 4 << 30);
        let line = read.render(20);
        assert!(
            line.starts_with("SST joiner transfer [#####...............]  25% 1.00/4.00 GiB"),
            "{line}"
        );
        assert!(line.contains("ETA"), "{line}");
    }
}
