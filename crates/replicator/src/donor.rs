//! A donor's side of state transfer on the server's threads: the applier that starts the
//! server's snapshot (or only confirms the joiner's position, for IST), and the server's
//! report of its end. The choice between IST, SST and a refusal is the engine's
//! (`engine::donor`).

use std::time::Duration;

use base::{Gtid, Seqno};
use group::StateRequest;

use crate::app::RecvContext;
use crate::shared::lock;
use crate::Replicator;

/// `ECANCELED`: the code a transfer the donor's server refused to start fails with.
const ECANCELED: i32 = 125;

/// How often a donor waiting for its snapshot's position to commit looks whether the node
/// closes.
const COMMIT_POLL: Duration = Duration::from_millis(200);

impl Replicator {
    /// Serves a joiner: once everything ordered before its request is committed, the node
    /// goes DONOR and the server starts the snapshot; `sst_sent` ends it. A node that fell
    /// behind meanwhile refuses instead (`NodeEngine::donation_starts`).
    pub(crate) fn donate(
        &self,
        ctx: RecvContext,
        request: &StateRequest,
        wait_for: Seqno,
        bypass: Option<Gtid>,
    ) -> bool {
        if bypass.is_none() {
            let monitors = self.monitors();
            while !monitors.apply.wait_left(wait_for, COMMIT_POLL) {
                let engine = &lock(&self.shared.inner).engine;
                if engine.closing() {
                    return true;
                }
                if !engine.holds_state() {
                    // Fell behind while waiting: `donation_starts` refuses at once rather
                    // than after the node has caught up past the request's position.
                    break;
                }
            }
        }
        if !self
            .shared
            .with_engine(|engine| engine.donation_starts(request))
        {
            return true;
        }
        let (state, started) = match bypass {
            Some(joiner_position) => {
                let started =
                    self.shared
                        .app
                        .sst_donate(ctx, &request.sst_request, joiner_position, true);
                (joiner_position, started)
            }
            None => {
                let state = self.last_committed();
                let started = self
                    .shared
                    .app
                    .sst_donate(ctx, &request.sst_request, state, false);
                (state, started)
            }
        };
        if !started {
            // The server refused to start the transfer (a request it finds unsafe, say; it
            // logged why): this node is a donor no more, and the joiner, which would wait for
            // a snapshot that never comes, is told.
            self.sst_sent(state, -ECANCELED);
        }
        true
    }

    /// The donor's server finished (or failed) sending its snapshot.
    pub fn sst_sent(&self, state: Gtid, rcode: i32) {
        self.shared
            .with_engine(|engine| engine.sst_sent(state, rcode));
        self.shared.notify_everyone();
    }
}
