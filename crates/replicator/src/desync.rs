//! Stepping out of the cluster's pace: desync (no flow control from this node) and pause
//! (nothing after a point starts until resume, for FTWRL, BACKUP STAGE and rsync donors).

use std::time::{Duration, Instant};

use base::{NodeState, Seqno};

use crate::app::LogLevel;
use crate::commit::STALL_REPORT_AFTER;
use crate::dispatcher::SYNCED_QUEUE_MAX;
use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

impl Replicator {
    /// Stops sending flow control (`wsrep_desync=ON`, FLUSH TABLES WITH READ LOCK).
    pub fn desync(&self) {
        let mut inner = lock(&self.shared.inner);
        inner.desync_count += 1;
        if inner.state == NodeState::Synced {
            inner.shift(NodeState::Donor, &*self.shared.app);
        }
    }

    /// Undoes one `desync`; back to SYNCED when the last one is undone.
    pub fn resync(&self) {
        let mut inner = lock(&self.shared.inner);
        inner.desync_count = inner.desync_count.saturating_sub(1);
        if inner.desync_count == 0 && inner.state == NodeState::Donor {
            // Galera's way back: JOINED, then SYNCED once caught up, which a node that only
            // stopped sending flow control is at once (else the dispatcher finishes it).
            let app = &*self.shared.app;
            inner.shift(NodeState::Joined, app);
            if inner.queue.len() <= SYNCED_QUEUE_MAX {
                inner.shift(NodeState::Synced, app);
            }
        }
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
        let point = inner.pause.pause(committed);
        let started = Instant::now();
        let mut report_at = started + STALL_REPORT_AFTER;
        loop {
            if inner.closing || !inner.connected {
                inner.pause.resume();
                drop(inner);
                shared.changed.notify_all();
                return Err(ReplicatorError::NotConnected);
            }
            let running = inner.applying_now > 0 || inner.ordered_serial_running;
            if !running && self.last_committed_locked() >= point {
                break;
            }
            if Instant::now() >= report_at {
                report_at += STALL_REPORT_AFTER;
                let blocker = self.last_committed_locked().next();
                drop(inner);
                let message = format!(
                    "pause at {point} has waited {:.0?} for {blocker} to commit: {}",
                    started.elapsed(),
                    self.describe(blocker)
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
        Ok(point)
    }

    /// Lifts [`Replicator::pause`]: what it held back runs.
    pub fn resume(&self) {
        lock(&self.shared.inner).pause.resume();
        self.shared.changed.notify_all();
    }
}
