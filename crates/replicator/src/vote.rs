//! This node's part in consistency votes (the tally is `group::vote`): a write-set or TOI
//! statement that failed here is voted on before its seqno leaves commit order; a vote
//! another member opened is answered with success once this node has committed the seqno;
//! and a node whose verdict loses leaves the cluster with its saved state cleared, so that
//! it comes back only by a full state transfer, as Galera's inconsistent node does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use base::{Gtid, NodeState, Seqno, Uuid};
use group::vote::{error_code, VoteCode, SUCCESS};

use crate::dispatcher::Dispatcher;
use crate::persisted::{forget_membership, save_state};
use crate::shared::{lock, Inner, Shared};
use crate::{LogLevel, Replicator, ReplicatorError};
use base::grastate::SavedState;

/// How often a thread waiting for a decision says so in the log.
const WAITING_NOTE_EVERY: Duration = Duration::from_secs(10);

/// How often a waiting thread looks whether the node is closing.
const WAIT_STEP: Duration = Duration::from_millis(100);

const _: () = assert!(WAIT_STEP.as_millis() < WAITING_NOTE_EVERY.as_millis());

/// The votes this node takes part in.
#[derive(Debug, Default)]
pub(crate) struct VoteBook {
    /// Seqnos that failed here, with the verdict cast, until decided.
    cast: BTreeMap<Seqno, VoteCode>,
    /// Decisions on the seqnos in `cast`, for the thread waiting on each.
    decided: BTreeMap<Seqno, VoteCode>,
    /// Votes other members opened that this node answers once it committed the seqno.
    requested: BTreeSet<Seqno>,
    /// This node lost a vote: its data differs from the cluster's.
    pub(crate) inconsistent: bool,
}

/// The verdict in Galera's notation (hexadecimal digest).
fn verdict(code: VoteCode) -> String {
    if code == SUCCESS {
        "0 (success)".to_owned()
    } else {
        format!("{code:016x}")
    }
}

fn gtid(inner: &Inner, seqno: Seqno) -> Gtid {
    Gtid {
        cluster: inner.cluster,
        seqno,
    }
}

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
        let code = error_code(error);
        let text = String::from_utf8_lossy(error);
        let mut inner = lock(&shared.inner);
        let at = gtid(&inner, seqno);
        let voter = matches!(
            inner.state,
            NodeState::Synced | NodeState::Joined | NodeState::Donor
        );
        let runner = inner.runner.clone().filter(|_| voter && inner.primary);
        let Some(runner) = runner else {
            drop(inner);
            let message = format!(
                "Inconsistency detected: failed on {at} while not a voting member of a \
                 primary component ({text})"
            );
            declare_inconsistent(shared, &message);
            return Err(ReplicatorError::Inconsistent(message));
        };
        let message = format!(
            "Failed to apply {at} here, voting {}: {text}",
            verdict(code)
        );
        shared.app.log(LogLevel::Info, &message);
        inner.votes.cast.insert(seqno, code);
        let _ = runner.vote(seqno, code);
        let mut next_note = Instant::now() + WAITING_NOTE_EVERY;
        let winner = loop {
            if let Some(winner) = inner.votes.decided.remove(&seqno) {
                break Some(winner);
            }
            if inner.closing || !inner.connected {
                break None;
            }
            let (guard, _) = shared
                .changed
                .wait_timeout(inner, WAIT_STEP)
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
            if Instant::now() >= next_note {
                next_note += WAITING_NOTE_EVERY;
                let message = format!("still waiting for the group's vote on {at}");
                shared.app.log(LogLevel::Info, &message);
            }
        };
        inner.votes.cast.remove(&seqno);
        drop(inner);
        match winner {
            Some(winner) if winner == code => {
                let message = format!(
                    "Vote {} on {at} is consistent with group. Continue.",
                    verdict(code)
                );
                shared.app.log(LogLevel::Info, &message);
                Ok(())
            }
            Some(_) => {
                let message = format!("Inconsistency detected: Inconsistent by consensus on {at}");
                declare_inconsistent(shared, &message);
                Err(ReplicatorError::Inconsistent(message))
            }
            None => {
                let message = format!(
                    "Inconsistency detected: Could not reach consensus on {at} (this node left \
                     the group first), assuming inconsistency"
                );
                declare_inconsistent(shared, &message);
                Err(ReplicatorError::Inconsistent(message))
            }
        }
    }
}

impl Dispatcher {
    /// Another member opened a vote on `seqno`: answered once committed here (see
    /// [`Dispatcher::answer_vote_requests`]), unless this node failed it too and voted.
    pub(crate) fn on_vote_requested(&mut self, seqno: Seqno, by: &str) {
        let mut inner = lock(&self.shared.inner);
        let message = format!("Member {by} initiates vote on {}", gtid(&inner, seqno));
        self.shared.app.log(LogLevel::Info, &message);
        if !inner.votes.cast.contains_key(&seqno) {
            inner.votes.requested.insert(seqno);
        }
    }

    /// Answers the votes this node has committed the seqno of: success.
    pub(crate) fn answer_vote_requests(&mut self, committed: Seqno) {
        let mut inner = lock(&self.shared.inner);
        if inner.votes.requested.is_empty() {
            return;
        }
        let due: Vec<Seqno> = inner.votes.requested.range(..=committed).copied().collect();
        let Some(runner) = inner.runner.clone() else {
            return;
        };
        for seqno in due {
            inner.votes.requested.remove(&seqno);
            if !inner.votes.cast.contains_key(&seqno) {
                let _ = runner.vote(seqno, SUCCESS);
            }
        }
    }

    /// A vote this node took part in is decided.
    pub(crate) fn on_vote_decided(
        &mut self,
        seqno: Seqno,
        winner: VoteCode,
        mine: VoteCode,
        votes: &[(String, VoteCode)],
    ) {
        let shared = &self.shared;
        let mut inner = lock(&shared.inner);
        let at = gtid(&inner, seqno);
        let tally: Vec<String> = votes
            .iter()
            .map(|(name, code)| format!("{name}: {}", verdict(*code)))
            .collect();
        let message = format!(
            "Votes over {at}: {}; winner: {}",
            tally.join(", "),
            verdict(winner)
        );
        shared.app.log(LogLevel::Info, &message);
        inner.votes.requested.remove(&seqno);
        if inner.votes.cast.contains_key(&seqno) {
            // The applier that failed this seqno waits for the decision.
            inner.votes.decided.insert(seqno, winner);
            drop(inner);
            shared.changed.notify_all();
            return;
        }
        drop(inner);
        if mine == winner {
            let message = format!(
                "Vote {} on {at} is consistent with group. Continue.",
                verdict(mine)
            );
            shared.app.log(LogLevel::Info, &message);
        } else {
            let message = format!(
                "Vote {} on {at} is inconsistent with group. Leaving cluster.",
                verdict(mine)
            );
            declare_inconsistent(shared, &message);
        }
    }
}

/// This node's data differs from the cluster's: says so, clears the saved position (the
/// next start asks for a full snapshot, whatever the server recovers), and leaves the
/// group; once out (`close_after_inconsistency`) the server sees it disconnected.
pub(crate) fn declare_inconsistent(shared: &Shared, message: &str) {
    let runner = {
        let mut inner = lock(&shared.inner);
        if inner.votes.inconsistent {
            return;
        }
        inner.votes.inconsistent = true;
        // Nothing more is applied here: the data is not the cluster's any more, and what
        // follows would fail again (Galera closes at once, dropping its queue).
        inner.queue.retain(|event| event.ordered_seqno().is_none());
        inner.runner.clone()
    };
    shared.app.log(LogLevel::Error, message);
    save_state(
        shared,
        SavedState {
            position: Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: false,
        },
    );
    forget_membership(shared);
    if let Some(runner) = runner {
        let _ = runner.leave();
    }
    shared.changed.notify_all();
}

/// The group member left after an inconsistency: the server gets the final view of a
/// disconnected node and its appliers return, as after `disconnect`.
pub(crate) fn close_after_inconsistency(shared: &Shared) {
    let mut inner = lock(&shared.inner);
    if !inner.votes.inconsistent || !inner.connected {
        return;
    }
    inner.close_with_final_view(&*shared.app);
    drop(inner);
    shared.changed.notify_all();
}
