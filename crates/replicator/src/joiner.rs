//! A joiner's side of state transfer on the server's threads: the applier that asks the
//! server for its request and waits for the snapshot, and the server's report of it. The
//! decisions are the engine's (`engine::joiner`).

use std::time::Duration;

use base::Gtid;
use engine::{RequestWait, SnapshotRefusal};

use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

/// How often the applier waiting for the snapshot looks again without being woken.
const SNAPSHOT_POLL: Duration = Duration::from_millis(100);

impl Replicator {
    /// Sends the server's state transfer request to the group, then holds this applier
    /// (and so the order of events) until the server reports the snapshot in place.
    pub(crate) fn request_state(&self) -> bool {
        let shared = &self.shared;
        let sst_request = shared.app.sst_request();
        if !shared.with_engine(|engine| engine.send_state_request(sst_request)) {
            return false;
        }
        loop {
            let (wait, pending) = {
                let mut inner = lock(&shared.inner);
                let wait = inner.engine.poll_state_request();
                (wait, shared.drain(&mut inner))
            };
            shared.carry_out(pending);
            if wait == RequestWait::Done {
                return true;
            }
            let inner = lock(&shared.inner);
            let _ = shared
                .changed
                .wait_timeout(inner, SNAPSHOT_POLL)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The joiner's server has its snapshot, at `state`.
    pub fn sst_received(&self, state: Gtid, rcode: i32) -> Result<(), ReplicatorError> {
        let received = self
            .shared
            .with_engine(|engine| engine.sst_received(state, rcode));
        self.shared.notify_everyone();
        match received {
            Ok(()) => Ok(()),
            Err(SnapshotRefusal::Failed(rcode)) => {
                Err(ReplicatorError::StateTransferFailed { rcode })
            }
            Err(SnapshotRefusal::NotJoining | SnapshotRefusal::Mismatch) => {
                Err(ReplicatorError::NotConnected)
            }
        }
    }
}
