//! Stepping out of the cluster's pace on the server's threads: desync (no flow control from
//! this node) and pause (nothing after a point starts until resume, for FTWRL, BACKUP STAGE
//! and rsync donors). The decisions are the engine's (`engine::desync`).

use std::time::{Duration, Instant};

use base::Seqno;

use crate::app::LogLevel;
use crate::commit::STALL_REPORT_AFTER;
use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

impl Replicator {
    /// Stops sending flow control (`wsrep_desync=ON`, FLUSH TABLES WITH READ LOCK).
    pub fn desync(&self) {
        self.shared.with_engine(|engine| engine.desync());
    }

    /// Undoes one `desync`; back to SYNCED when the last one is undone.
    pub fn resync(&self) {
        self.shared.with_engine(|engine| engine.resync());
    }

    /// Pauses the node for a server that reads its own data as one state (FLUSH TABLES
    /// WITH READ LOCK, BACKUP STAGE, an rsync donor). Returns the pause point once every
    /// seqno up to it is committed and nothing is applying; nothing after it starts (no
    /// applier, local commit, replay or TOI) until [`Replicator::resume`].
    ///
    /// It waits as long as that takes, reporting every [`STALL_REPORT_AFTER`] what it waits
    /// for; it fails only when the node closes (the server then sees -1). A node already
    /// paused returns its point.
    pub fn pause(&self) -> Result<Seqno, ReplicatorError> {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let committed = self.last_committed_locked();
        let point = inner.engine.pause(committed);
        let started = Instant::now();
        let mut report_at = started + STALL_REPORT_AFTER;
        loop {
            if inner.engine.stopped() {
                inner.engine.resume();
                drop(inner);
                shared.notify_everyone();
                return Err(ReplicatorError::NotConnected);
            }
            if inner
                .engine
                .pause_reached(point, self.last_committed_locked())
            {
                break;
            }
            if Instant::now() >= report_at {
                report_at += STALL_REPORT_AFTER;
                let blocker = self.last_committed_locked().next();
                let description = inner.engine.describe(blocker);
                drop(inner);
                let message = format!(
                    "pause at {point} has waited {:.0?} for {blocker} to commit: {description}",
                    started.elapsed(),
                );
                shared.app.log(LogLevel::Warning, &message);
                inner = lock(&shared.inner);
                continue;
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
        drop(inner);
        let message = format!(
            "paused at {point} (waited {:.1?} for earlier seqnos to commit)",
            started.elapsed()
        );
        shared.app.log(LogLevel::Info, &message);
        lock(&shared.paused_since).get_or_insert((point, started));
        Ok(point)
    }

    /// Lifts [`Replicator::pause`]: what it held back runs.
    pub fn resume(&self) {
        lock(&self.shared.inner).engine.resume();
        self.shared.notify_everyone();
        if let Some((point, since)) = lock(&self.shared.paused_since).take() {
            let message = format!(
                "resumed after {:.2?} paused at {point}: commits after it waited that long",
                since.elapsed()
            );
            self.shared.app.log(LogLevel::Info, &message);
        }
    }
}
