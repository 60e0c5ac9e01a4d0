//! This node's part in consistency votes, on the server's threads: the thread whose seqno
//! failed votes and waits for the group's decision. The book-keeping and the decisions are
//! the engine's (`engine::votes`); the tally is `group::vote`.

use std::time::{Duration, Instant};

use base::Seqno;
use engine::VoteWait;

use crate::shared::lock;
use crate::{LogLevel, Replicator, ReplicatorError};

/// How often a thread waiting for a decision says so in the log.
const WAITING_NOTE_EVERY: Duration = Duration::from_secs(10);

/// How often a waiting thread looks whether the node is closing.
const WAIT_STEP: Duration = Duration::from_millis(100);

const _: () = assert!(WAIT_STEP.as_millis() < WAITING_NOTE_EVERY.as_millis());

impl Replicator {
    /// The server failed to apply `seqno` (or to run a TOI statement ordered at it) with
    /// `error`. Votes and waits for the group's decision: `Ok` if every member that holds
    /// data failed alike (or most did), an error after this node left the cluster because
    /// its data differs.
    pub(crate) fn vote_on_failure(
        &self,
        seqno: Seqno,
        error: &[u8],
    ) -> Result<(), ReplicatorError> {
        let shared = &self.shared;
        let mut wait = shared.with_engine(|engine| engine.vote_on_failure(seqno, error));
        let mut next_note = Instant::now() + WAITING_NOTE_EVERY;
        while wait == VoteWait::Pending {
            {
                let inner = lock(&shared.inner);
                let _ = shared
                    .changed
                    .wait_timeout(inner, WAIT_STEP)
                    .unwrap_or_else(|p| p.into_inner());
            }
            if Instant::now() >= next_note {
                next_note += WAITING_NOTE_EVERY;
                let message = format!("still waiting for the group's vote on seqno {seqno}");
                shared.app.log(LogLevel::Info, &message);
            }
            wait = shared.with_engine(|engine| engine.poll_vote(seqno));
        }
        shared.notify_everyone();
        match wait {
            VoteWait::Inconsistent(message) => Err(ReplicatorError::Inconsistent(message)),
            VoteWait::Consistent | VoteWait::Pending => Ok(()),
        }
    }
}
