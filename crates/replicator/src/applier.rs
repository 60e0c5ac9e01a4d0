//! The server's applier threads: each takes the engine's next task in turn
//! ([`engine::Task`]: serial tasks run alone, nothing after the pause point starts) and
//! runs it, write-sets through the monitors.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base::{Gtid, Seqno};
use engine::{NextTask, Task};
use writeset::{flags, WriteSet};

use crate::app::{ApplyAction, LogLevel, Meta, RecvContext};
use crate::error::ReplicatorError;
use crate::seqno_trace::Stage;
use crate::shared::{lock, Monitors};
use crate::timings;
use crate::transfer;
use crate::Replicator;

/// Write-sets at least this large are logged with how long this node took over them: a
/// DBA looking for a stall finds the transaction that caused it.
pub(crate) const LARGE_WRITE_SET_BYTES: usize = 16 << 20;

/// How often an idle applier looks for a task without being woken: a safety net, since
/// every queued task wakes one (counted by `Replicator::tasks_found_late` when it did not).
const TASK_RECHECK: Duration = Duration::from_millis(100);

impl Replicator {
    /// An applier thread's loop: runs ordered actions until the node closes.
    pub fn recv(&self, ctx: RecvContext) -> Result<(), ReplicatorError> {
        let shared = &self.shared;
        loop {
            let task = self.next_task()?;
            let serial = task.is_serial();
            let mut exit_loop = false;
            let ok = self.run_task(ctx, task, &mut exit_loop);
            lock(&shared.inner).engine.task_done(serial);
            shared.changed.notify_all();
            if serial || !ok || exit_loop {
                // Tasks held back while a serial one ran may start now, and an applier that
                // leaves no longer takes the next task itself.
                shared.work.notify_all();
            }
            self.report_progress();
            if !ok {
                // After a lost consistency vote the server fails the seqno it voted on;
                // this applier stays to hand it the final view of a disconnected node.
                if lock(&shared.inner).engine.votes().inconsistent {
                    continue;
                }
                shared.app.log(
                    LogLevel::Error,
                    "the server failed to apply an ordered action",
                );
                return Err(ReplicatorError::NotConnected);
            }
            if exit_loop {
                return Ok(());
            }
        }
    }

    /// Waits for the next task this applier may run.
    fn next_task(&self) -> Result<Task, ReplicatorError> {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let mut rechecking = false;
        loop {
            match inner.engine.next_task() {
                NextTask::Run(task) => {
                    if rechecking {
                        shared.tasks_found_late.fetch_add(1, Ordering::Relaxed);
                    }
                    transfer::wake_receiver_if_room(shared, &mut inner);
                    return Ok(task);
                }
                NextTask::Inconsistent => {
                    return Err(ReplicatorError::Inconsistent(
                        "this node left the cluster: its data is inconsistent".into(),
                    ))
                }
                NextTask::Closed => return Err(ReplicatorError::NotConnected),
                NextTask::Wait => {}
            }
            let (guard, waited) = shared
                .work
                .wait_timeout(inner, TASK_RECHECK)
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
            rechecking = waited.timed_out();
        }
    }

    /// Tasks an idle applier found only at its periodic recheck ([`TASK_RECHECK`]): each
    /// is a wake-up that whoever queued the task should have given.
    pub fn tasks_found_late(&self) -> u64 {
        self.shared.tasks_found_late.load(Ordering::Relaxed)
    }

    pub(crate) fn run_task(&self, ctx: RecvContext, task: Task, exit_loop: &mut bool) -> bool {
        let app = &self.shared.app;
        match task {
            Task::Connected(view) => app.connected(&view),
            Task::Synced => {
                app.synced();
                true
            }
            Task::RequestState => self.request_state(),
            Task::Donate {
                request,
                wait_for,
                bypass,
            } => self.donate(ctx, &request, wait_for, bypass),
            Task::Skip { seqno } => {
                let monitors = self.monitors();
                monitors.apply.enter_regardless(seqno, seqno.prev());
                monitors.commit.enter_regardless(seqno, seqno.prev());
                monitors.commit.leave(seqno);
                monitors.apply.leave(seqno);
                true
            }
            Task::View { view, ordered } => {
                if !ordered {
                    return app.view(ctx, &view);
                }
                let monitors = self.monitors();
                let seqno = view.state_id.seqno;
                monitors.apply.enter_regardless(seqno, seqno.prev());
                monitors.commit.enter_regardless(seqno, seqno.prev());
                let ok = app.view(ctx, &view);
                monitors.commit.leave(seqno);
                monitors.apply.leave(seqno);
                ok
            }
            Task::Apply {
                seqno,
                depends_on,
                write_set,
                failed,
            } => self.apply(ctx, seqno, depends_on, &write_set, failed, exit_loop),
        }
    }

    /// Applies one ordered write-set through the apply monitor (the server takes it
    /// through commit order inside its apply).
    fn apply(
        &self,
        ctx: RecvContext,
        seqno: Seqno,
        depends_on: Seqno,
        write_set: &WriteSet,
        failed: bool,
        exit_loop: &mut bool,
    ) -> bool {
        self.shared.trace(seqno, Stage::Picked);
        let monitors = self.monitors();
        let last_applied = monitors.apply.last_left();
        lock(&self.shared.inner)
            .engine
            .applier_entering(seqno, depends_on, last_applied);
        monitors.apply.enter_regardless(seqno, depends_on);
        self.shared.trace(seqno, Stage::ApplyEntered);
        let cluster = {
            let mut inner = lock(&self.shared.inner);
            inner.engine.applier_entered(seqno);
            inner.engine.cluster()
        };
        let action = ApplyAction {
            meta: Meta {
                gtid: Gtid { cluster, seqno },
                source: write_set.source,
                trx_id: write_set.trx_id,
                conn_id: write_set.conn_id,
                depends_on,
            },
            flags: if failed {
                write_set.flags | flags::ROLLBACK
            } else {
                write_set.flags
            },
            data: &write_set.data,
        };
        let applying = Instant::now();
        let ok = self.shared.app.apply(ctx, &action, exit_loop);
        timings::observe(&self.shared.timings.apply, applying.elapsed());
        self.shared.trace(seqno, Stage::ApplyReturned);
        if write_set.data.len() >= LARGE_WRITE_SET_BYTES {
            let message = format!(
                "large write-set {seqno}: applied and committed in {:.1?}",
                applying.elapsed()
            );
            self.shared.app.log(LogLevel::Info, &message);
        }
        // The application leaves commit order inside apply; make sure the apply monitor is
        // left even if it did not.
        if lock(&self.shared.inner).engine.leave_apply(seqno) {
            monitors.apply.leave(seqno);
        }
        ok
    }

    pub(crate) fn monitors(&self) -> Arc<Monitors> {
        lock(&self.shared.monitors)
            .clone()
            .expect("monitors exist once a view was delivered")
    }

    fn report_progress(&self) {
        let committed = self.last_committed().seqno;
        let inner = lock(&self.shared.inner);
        if let Some(runner) = inner.runner.as_ref() {
            let _ = runner.report_committed(inner.engine.purge_floor(committed));
            let _ = runner.report_apply_queue(inner.engine.tasks().len() as u64);
        }
    }
}
