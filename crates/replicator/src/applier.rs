//! The server's applier threads: the queue of ordered events they take in turn
//! ([`RecvEvent`]), serial events run alone, and write-sets applied through the monitors.

use std::sync::Arc;
use std::time::Instant;

use base::{Gtid, Seqno};
use group::StateRequest;
use writeset::{flags, WriteSet};

use crate::app::{ApplyAction, LogLevel, Meta, RecvContext, ViewInfo};
use crate::error::ReplicatorError;
use crate::shared::{lock, Monitors};
use crate::Replicator;

/// Write-sets at least this large are logged with how long this node took over them: a
/// DBA looking for a stall finds the transaction that caused it.
pub(crate) const LARGE_WRITE_SET_BYTES: usize = 16 << 20;

pub(crate) enum RecvEvent {
    Connected(ViewInfo),
    View {
        view: ViewInfo,
        ordered: bool,
    },
    Apply {
        seqno: Seqno,
        depends_on: Seqno,
        write_set: WriteSet,
        failed: bool,
    },
    /// A seqno with nothing to apply (a view or an undecodable write-set received by IST):
    /// it only passes the monitors.
    Skip {
        seqno: Seqno,
    },
    Synced,
    /// Ask the server for its state transfer request and send it to the group.
    RequestState,
    /// Serve a joiner: with `bypass`, the server only confirms the joiner's own position
    /// (the data goes by IST); otherwise it sends a snapshot once everything ordered before
    /// the request is committed.
    Donate {
        request: StateRequest,
        wait_for: Seqno,
        bypass: Option<Gtid>,
    },
}

impl RecvEvent {
    /// Serial events run alone: nothing else is applying while they run.
    fn is_serial(&self) -> bool {
        !matches!(self, RecvEvent::Apply { .. } | RecvEvent::Skip { .. })
    }

    /// The seqno the event takes in the server, for events that take one: these are what
    /// `pause` holds back after its point (see [`PauseGate`]).
    pub(crate) fn ordered_seqno(&self) -> Option<Seqno> {
        match self {
            RecvEvent::Apply { seqno, .. } | RecvEvent::Skip { seqno } => Some(*seqno),
            RecvEvent::View {
                view,
                ordered: true,
            } => Some(view.state_id.seqno),
            _ => None,
        }
    }
}

impl Replicator {
    /// An applier thread's loop: runs ordered actions until the node closes.
    pub fn recv(&self, ctx: RecvContext) -> Result<(), ReplicatorError> {
        let shared = &self.shared;
        loop {
            let event = {
                let mut inner = lock(&shared.inner);
                loop {
                    if let Some(front) = inner.queue.front() {
                        let held = front
                            .ordered_seqno()
                            .is_some_and(|seqno| inner.pause.holds(seqno));
                        let free = if front.is_serial() {
                            inner.applying_now == 0 && !inner.serial_running && !held
                        } else {
                            !inner.serial_running && !held
                        };
                        if free {
                            break;
                        }
                    } else if inner.votes.inconsistent && !inner.connected {
                        return Err(ReplicatorError::Inconsistent(
                            "this node left the cluster: its data is inconsistent".into(),
                        ));
                    } else if inner.closing || !inner.connected {
                        return Err(ReplicatorError::NotConnected);
                    }
                    inner = shared
                        .changed
                        .wait(inner)
                        .unwrap_or_else(|p| p.into_inner());
                }
                let event = inner.queue.pop_front().expect("front exists");
                if let Some(seqno) = event.ordered_seqno() {
                    inner.pause.started(seqno);
                }
                if event.is_serial() {
                    inner.serial_running = true;
                    inner.ordered_serial_running = event.ordered_seqno().is_some();
                } else {
                    inner.applying_now += 1;
                }
                event
            };
            let serial = event.is_serial();
            let mut exit_loop = false;
            let ok = self.run_event(ctx, event, &mut exit_loop);
            {
                let mut inner = lock(&shared.inner);
                if serial {
                    inner.serial_running = false;
                    inner.ordered_serial_running = false;
                } else {
                    inner.applying_now -= 1;
                }
            }
            shared.changed.notify_all();
            self.report_progress();
            if !ok {
                // After a lost consistency vote the server fails the seqno it voted on;
                // this applier stays to hand it the final view of a disconnected node.
                if lock(&shared.inner).votes.inconsistent {
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

    pub(crate) fn run_event(
        &self,
        ctx: RecvContext,
        event: RecvEvent,
        exit_loop: &mut bool,
    ) -> bool {
        let app = &self.shared.app;
        match event {
            RecvEvent::Connected(view) => app.connected(&view),
            RecvEvent::Synced => {
                app.synced();
                true
            }
            RecvEvent::RequestState => self.request_state(),
            RecvEvent::Donate {
                request,
                wait_for,
                bypass,
            } => self.donate(ctx, &request, wait_for, bypass),
            RecvEvent::Skip { seqno } => {
                let monitors = self.monitors();
                monitors.apply.enter_regardless(seqno, seqno.prev());
                monitors.commit.enter_regardless(seqno, seqno.prev());
                monitors.commit.leave(seqno);
                monitors.apply.leave(seqno);
                true
            }
            RecvEvent::View { view, ordered } => {
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
            RecvEvent::Apply {
                seqno,
                depends_on,
                write_set,
                failed,
            } => {
                let monitors = self.monitors();
                let last_applied = monitors.apply.last_left();
                {
                    let mut inner = lock(&self.shared.inner);
                    let window = &mut inner.window;
                    window
                        .apply_window
                        .record(seqno.0.saturating_sub(last_applied.0).max(0) as u64);
                    window
                        .apply_out_of_order_entry
                        .record(seqno > last_applied.next());
                    if depends_on > last_applied {
                        inner.counters.apply_waits += 1;
                    }
                }
                monitors.apply.enter_regardless(seqno, depends_on);
                let cluster = {
                    let mut inner = lock(&self.shared.inner);
                    inner.entered_apply.insert(seqno);
                    inner.cluster
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
                let ok = app.apply(ctx, &action, exit_loop);
                if write_set.data.len() >= LARGE_WRITE_SET_BYTES {
                    let message = format!(
                        "large write-set {seqno}: applied and committed in {:.1?}",
                        applying.elapsed()
                    );
                    self.shared.app.log(LogLevel::Info, &message);
                }
                // The application leaves commit order inside apply; make sure the apply
                // monitor is left even if it did not.
                if lock(&self.shared.inner).entered_apply.remove(&seqno) {
                    monitors.apply.leave(seqno);
                }
                ok
            }
        }
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
            let _ = runner.report_committed(inner.purge_floor(committed));
            let _ = runner.report_apply_queue(inner.queue.len() as u64);
        }
    }
}
