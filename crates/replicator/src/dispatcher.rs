//! The dispatcher thread: hands the group's deliveries to the engine in order, certifies
//! each write-set outside the engine's lock (the engine's [`engine::CertJob`]), carries out
//! what the engine decided, and ticks it.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base::Seqno;
use group::Delivery;
use transport::RunnerHandle;
use writeset::Bytes;

use crate::app::LogLevel;
use crate::applier::LARGE_WRITE_SET_BYTES;
use crate::seqno_trace::Stage;
use crate::shared::{lock, Shared};
use crate::timings;

/// How often the engine ticks when no delivery comes.
const TICK_EVERY: Duration = Duration::from_millis(50);

/// The dispatcher: takes deliveries in order until the group member stops.
pub(crate) fn dispatch(shared: &Arc<Shared>, deliveries: &Receiver<Delivery>) {
    let mut left_the_group = false;
    loop {
        match deliveries.recv_timeout(TICK_EVERY) {
            Ok(delivery) => {
                left_the_group |= matches!(delivery, Delivery::Closed);
                let routine = matches!(delivery, Delivery::WriteSet { .. });
                handle(shared, delivery);
                tick(shared);
                // A write-set woke its own waiter and the appliers (see `on_write_set`);
                // anything else may end any wait.
                if !routine {
                    shared.notify_everyone();
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                tick(shared);
                shared.notify_all_but_appliers();
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    for sender in std::mem::take(&mut *lock(&shared.senders)) {
        let _ = sender.join();
    }
    // Deliveries end after the member left the group (`Closed`) or `disconnect` stopped
    // it, unless the group member's thread died. A node that looks synced but takes no
    // part in the order would leave every commit waiting for certification forever: stop
    // instead, with the cause in the log.
    let stopped_on_purpose = {
        let inner = lock(&shared.inner);
        inner.engine.closing() || inner.engine.leaving()
    };
    if !left_the_group && !stopped_on_purpose {
        shared.app.fatal(
            "the group communication thread stopped unexpectedly (its error is logged above); \
             this node can no longer replicate and stops",
        );
    }
}

fn handle(shared: &Arc<Shared>, delivery: Delivery) {
    if let Delivery::WriteSet {
        seqno,
        local,
        submit_id,
        safe_seqno,
        payload,
        ..
    } = delivery
    {
        on_write_set(shared, seqno, local, submit_id, safe_seqno, payload.into());
        return;
    }
    let now = shared.now();
    let pending = {
        let mut inner = lock(&shared.inner);
        let mut cache = lock(&shared.cache);
        inner.engine.on_other_delivery(now, delivery, &mut cache);
        drop(cache);
        shared.drain(&mut inner)
    };
    shared.carry_out(pending);
}

/// Certifies an ordered write-set: the engine's lock is not held while it is decoded and
/// certified, nor while it is cached, so the appliers and the local transaction waiting
/// for its verdict go on meanwhile. A local one (`submit_id`: its submission's ticket)
/// wakes the transaction waiting for it.
fn on_write_set(
    shared: &Arc<Shared>,
    seqno: Seqno,
    local: bool,
    submit_id: u64,
    safe_seqno: Seqno,
    payload: Bytes,
) {
    if let Some(trace) = &shared.seqno_trace {
        trace.delivered(seqno, local);
    }
    let (job, pending) = {
        let mut inner = lock(&shared.inner);
        let job = inner
            .engine
            .begin_write_set(seqno, local, safe_seqno, payload);
        (job, shared.drain(&mut inner))
    };
    shared.carry_out(pending);
    let Some(job) = job else {
        // Not certified here (joining, a repeat, or the node fell behind): waits may end.
        shared.notify_everyone();
        return;
    };
    let started = Instant::now();
    let bytes = job.len();
    let certified = job.run();
    let took = started.elapsed();
    timings::observe(&shared.timings.certification, took);
    let (pending, waiter) = {
        let mut inner = lock(&shared.inner);
        inner.engine.finish_write_set(certified);
        let waiter = if local {
            shared.verdict_given(&inner, submit_id)
        } else {
            None
        };
        (shared.drain(&mut inner), waiter)
    };
    shared.trace(seqno, Stage::Certified);
    if let Some(waiter) = waiter {
        waiter.wake.notify_all();
    }
    shared.changed.notify_all();
    let caching = Instant::now();
    shared.carry_out(pending);
    if bytes >= LARGE_WRITE_SET_BYTES {
        let message = format!(
            "large write-set {seqno}: {} MB; decoded and certified in {took:.1?}, cached in \
             {:.1?}",
            bytes >> 20,
            caching.elapsed()
        );
        shared.app.log(LogLevel::Info, &message);
    }
}

/// Moves joins on, turns a caught-up node SYNCED, answers votes and keeps the identity
/// saved for a crash (see `NodeEngine::tick`), and tells the group how far this node has
/// committed.
fn tick(shared: &Arc<Shared>) {
    let committed = lock(&shared.monitors)
        .as_ref()
        .map_or(Seqno::UNDEFINED, |m| m.apply.last_left());
    let runner = lock(&shared.inner).runner.clone();
    let (primary, membership) = runner
        .as_ref()
        .map_or((false, None), RunnerHandle::primary_and_saved_membership);
    let now = shared.now();
    let floor = shared.with_engine(|engine| {
        engine.tick(now, committed, primary, membership);
        engine.purge_floor(committed)
    });
    // This node's part of the commit cut, below which every member purges its
    // certification index. Appliers report it too, but a node whose clients write
    // everything applies nothing: the cut would stay where it last applied, and every
    // member's index would keep every key written since. The dispatcher ticks after every
    // delivery, its own write-sets included, and at least every `TICK_EVERY`.
    if let Some(runner) = runner {
        // Fails only once the node is closing, when nothing is purged any more.
        let _ = runner.report_committed(floor);
    }
}
