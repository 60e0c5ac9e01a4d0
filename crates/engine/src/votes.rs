//! This node's part in consistency votes (the tally is `group::vote`): a write-set or TOI
//! statement that failed here is voted on before its seqno leaves commit order; a vote
//! another member opened is answered with success once this node has committed the seqno;
//! and a node whose verdict loses leaves the cluster with its saved state cleared, so that
//! it comes back only by a full state transfer, as Galera's inconsistent node does.

use std::collections::{BTreeMap, BTreeSet};

use base::{Gtid, NodeState, Seqno};
use group::vote::{error_code, VoteCode, SUCCESS};

use crate::effects::Effect;
use crate::server_view::ViewInfo;
use crate::task::Task;
use crate::{LogLevel, NodeEngine};

/// The votes this node takes part in.
#[derive(Debug, Default)]
pub struct VoteBook {
    /// Seqnos that failed here, with the verdict cast, until decided.
    cast: BTreeMap<Seqno, VoteCode>,
    /// Decisions on the seqnos in `cast`, for the thread waiting on each.
    decided: BTreeMap<Seqno, VoteCode>,
    /// Votes other members opened that this node answers once it committed the seqno.
    requested: BTreeSet<Seqno>,
    /// This node lost a vote: its data differs from the cluster's.
    pub inconsistent: bool,
}

/// Where a failed seqno's vote stands (see [`NodeEngine::poll_vote`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteWait {
    /// Not decided yet.
    Pending,
    /// The group agrees with this node: go on.
    Consistent,
    /// This node's data differs: it is leaving the cluster; the message says why.
    Inconsistent(String),
}

/// The verdict in Galera's notation (hexadecimal digest).
fn verdict(code: VoteCode) -> String {
    if code == SUCCESS {
        "0 (success)".to_owned()
    } else {
        format!("{code:016x}")
    }
}

impl NodeEngine {
    fn gtid(&self, seqno: Seqno) -> Gtid {
        Gtid {
            cluster: self.view.cluster,
            seqno,
        }
    }

    /// The server failed to apply `seqno` (or to run a TOI statement ordered at it) with
    /// `error`: votes, then the caller waits for the group's decision ([`NodeEngine::poll_vote`]).
    /// A node that holds no vote (not a data member of a primary component) is inconsistent
    /// at once.
    pub fn vote_on_failure(&mut self, seqno: Seqno, error: &[u8]) -> VoteWait {
        let code = error_code(error);
        let text = String::from_utf8_lossy(error).into_owned();
        let at = self.gtid(seqno);
        let voter = matches!(
            self.state,
            NodeState::Synced | NodeState::Joined | NodeState::Donor
        );
        if !(voter && self.view.primary && self.life.connected) {
            let message = format!(
                "Inconsistency detected: failed on {at} while not a voting member of a \
                 primary component ({text})"
            );
            self.declare_inconsistent(&message);
            return VoteWait::Inconsistent(message);
        }
        let message = format!(
            "Failed to apply {at} here, voting {}: {text}",
            verdict(code)
        );
        self.say(LogLevel::Info, message);
        self.votes.cast.insert(seqno, code);
        self.emit(Effect::Vote { seqno, code });
        VoteWait::Pending
    }

    /// Where the vote on `seqno` this node cast stands. A node that leaves before the
    /// decision counts itself inconsistent.
    pub fn poll_vote(&mut self, seqno: Seqno) -> VoteWait {
        let Some(code) = self.votes.cast.get(&seqno).copied() else {
            return VoteWait::Consistent;
        };
        let at = self.gtid(seqno);
        let winner = match self.votes.decided.remove(&seqno) {
            Some(winner) => winner,
            None if self.stopped() => {
                self.votes.cast.remove(&seqno);
                let message = format!(
                    "Inconsistency detected: Could not reach consensus on {at} (this node left \
                     the group first), assuming inconsistency"
                );
                self.declare_inconsistent(&message);
                return VoteWait::Inconsistent(message);
            }
            None => return VoteWait::Pending,
        };
        self.votes.cast.remove(&seqno);
        if winner == code {
            let message = format!(
                "Vote {} on {at} is consistent with group. Continue.",
                verdict(code)
            );
            self.say(LogLevel::Info, message);
            return VoteWait::Consistent;
        }
        let message = format!("Inconsistency detected: Inconsistent by consensus on {at}");
        self.declare_inconsistent(&message);
        VoteWait::Inconsistent(message)
    }

    /// Another member opened a vote on `seqno`: answered once committed here (see
    /// [`NodeEngine::answer_vote_requests`]), unless this node failed it too and voted.
    pub(crate) fn on_vote_requested(&mut self, seqno: Seqno, by: &str) {
        let message = format!("Member {by} initiates vote on {}", self.gtid(seqno));
        self.say(LogLevel::Info, message);
        if !self.votes.cast.contains_key(&seqno) {
            self.votes.requested.insert(seqno);
        }
    }

    /// Answers the votes this node has committed the seqno of: success.
    pub(crate) fn answer_vote_requests(&mut self, committed: Seqno) {
        if self.votes.requested.is_empty() || !self.life.connected {
            return;
        }
        let due: Vec<Seqno> = self.votes.requested.range(..=committed).copied().collect();
        for seqno in due {
            self.votes.requested.remove(&seqno);
            if !self.votes.cast.contains_key(&seqno) {
                self.emit(Effect::Vote {
                    seqno,
                    code: SUCCESS,
                });
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
        let at = self.gtid(seqno);
        let tally: Vec<String> = votes
            .iter()
            .map(|(name, code)| format!("{name}: {}", verdict(*code)))
            .collect();
        let message = format!(
            "Votes over {at}: {}; winner: {}",
            tally.join(", "),
            verdict(winner)
        );
        self.say(LogLevel::Info, message);
        self.votes.requested.remove(&seqno);
        if self.votes.cast.contains_key(&seqno) {
            // The applier that failed this seqno waits for the decision.
            self.votes.decided.insert(seqno, winner);
            return;
        }
        if mine == winner {
            let message = format!(
                "Vote {} on {at} is consistent with group. Continue.",
                verdict(mine)
            );
            self.say(LogLevel::Info, message);
        } else {
            let message = format!(
                "Vote {} on {at} is inconsistent with group. Leaving cluster.",
                verdict(mine)
            );
            self.declare_inconsistent(&message);
        }
    }

    /// This node's data differs from the cluster's: says so, clears the saved position
    /// (the next start asks for a full snapshot, whatever the server recovers), and leaves
    /// the group; once out ([`NodeEngine::close_after_inconsistency`]) the server sees it
    /// disconnected.
    pub(crate) fn declare_inconsistent(&mut self, message: &str) {
        if self.votes.inconsistent {
            return;
        }
        self.votes.inconsistent = true;
        // Nothing more is applied here: the data is not the cluster's any more, and what
        // follows would fail again (Galera closes at once, dropping its queue).
        self.tasks.retain(|task| task.ordered_seqno().is_none());
        self.say(LogLevel::Error, message.to_owned());
        self.clear_saved_state();
        self.emit(Effect::Leave);
    }

    /// The group member left after an inconsistency: the server gets the final view of a
    /// disconnected node and its appliers return, as after `disconnect`.
    pub(crate) fn close_after_inconsistency(&mut self) {
        if !self.votes.inconsistent || !self.life.connected {
            return;
        }
        self.close_with_final_view();
    }

    /// Hands the server the final view of a disconnected node (no members) and marks the
    /// connection closed: the appliers return once they have passed it on.
    pub fn close_with_final_view(&mut self) {
        let final_view = ViewInfo::disconnected(self.view.cluster, self.view.last_ordered);
        self.tasks.push(Task::View {
            view: final_view,
            ordered: false,
        });
        self.life.closing = true;
        self.life.connected = false;
        self.view.primary = false;
        self.shift(NodeState::Closed);
    }
}
