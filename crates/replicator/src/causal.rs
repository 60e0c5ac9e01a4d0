//! What is committed here, and causal reads (`wsrep_sync_wait`): waits until everything the
//! group had ordered when the read began is committed on this node.

use std::time::{Duration, Instant};

use base::{Gtid, Seqno};
use engine::CausalRefusal;

use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

impl Replicator {
    pub(crate) fn last_committed_locked(&self) -> Seqno {
        lock(&self.shared.monitors)
            .as_ref()
            .map_or(Seqno::UNDEFINED, |m| m.apply.last_left())
    }

    /// The highest seqno applied and committed with everything before it.
    pub fn last_committed(&self) -> Gtid {
        let cluster = lock(&self.shared.inner).engine.cluster();
        Gtid {
            cluster,
            seqno: self.last_committed_locked(),
        }
    }

    /// Waits until `upto` is committed here; without `upto`, a causal read: waits until
    /// everything the group had ordered when it was called (anywhere in the cluster) is
    /// committed here.
    pub fn sync_wait(
        &self,
        upto: Option<Seqno>,
        timeout: Option<Duration>,
    ) -> Result<Gtid, ReplicatorError> {
        let timeout = timeout.unwrap_or_else(|| *lock(&self.shared.causal_read_timeout));
        let deadline = Instant::now() + timeout;
        if lock(&self.shared.inner).engine.may_read().is_err() {
            return Err(ReplicatorError::NoStateYet);
        }
        let target = match upto {
            Some(seqno) => seqno,
            None => self.causal_point(deadline, timeout)?,
        };
        let Some(monitors) = lock(&self.shared.monitors).clone() else {
            return Err(ReplicatorError::NotConnected);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if monitors.apply.wait_left(target, left) {
            Ok(self.last_committed())
        } else {
            Err(ReplicatorError::Timeout(timeout))
        }
    }

    /// Asks the group (through the Raft leader) for the last seqno it has ordered.
    fn causal_point(&self, deadline: Instant, timeout: Duration) -> Result<Seqno, ReplicatorError> {
        let shared = &self.shared;
        let (id, runner) = {
            let mut inner = lock(&shared.inner);
            let runner = inner.runner.clone();
            match (inner.engine.begin_causal_read(), runner) {
                (Ok(id), Some(runner)) => (id, runner),
                (Ok(id), None) => {
                    inner.engine.end_causal_read(id);
                    return Err(ReplicatorError::NotConnected);
                }
                (Err(CausalRefusal::NotPrimary | CausalRefusal::NoStateYet), _) => {
                    return Err(ReplicatorError::NotConnected)
                }
            }
        };
        if runner.causal_read(id).is_err() {
            lock(&shared.inner).engine.end_causal_read(id);
            return Err(ReplicatorError::NotConnected);
        }
        let mut inner = lock(&shared.inner);
        loop {
            if let Some(seqno) = inner.engine.causal_answer(id) {
                return Ok(seqno);
            }
            let now = Instant::now();
            if inner.engine.stopped() || now >= deadline {
                inner.engine.end_causal_read(id);
                return Err(if now >= deadline {
                    ReplicatorError::Timeout(timeout)
                } else {
                    ReplicatorError::NotConnected
                });
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, deadline - now)
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
    }
}
