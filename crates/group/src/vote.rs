//! Consistency voting, Galera 4's answer to a write-set that fails to apply on some members
//! and not on others: the members that hold data vote on the seqno, each with the digest of
//! its error (0 for success), and the members whose vote differs from the winner's no longer
//! hold the group's data and leave.
//!
//! A vote is a control action in the total order, so every member counts the same ballots
//! in the same order and reaches the same decision without another round. The ballot's
//! voters are fixed when it opens (the members then holding data, and the one that opened
//! it); a voter that leaves is dropped, which may decide the ballot. The winner is the
//! verdict with the most votes; success wins a tie, as in Galera (a node that failed where
//! as many others succeeded is the odd one out); between two errors the larger digest wins,
//! so that every member breaks the tie alike.

use std::collections::{BTreeMap, BTreeSet};

use base::Seqno;
use serde::{Deserialize, Serialize};

/// A member's verdict on a seqno: [`SUCCESS`], or a digest of its error text.
pub type VoteCode = u64;

/// The verdict of a member that applied (or committed) the seqno.
pub const SUCCESS: VoteCode = 0;

/// Ballots open at once, at most. A member votes on one failure at a time (its commit
/// order waits for the decision), so a handful is normal; more means a member is voting on
/// nonsense, and its further ballots are refused rather than grow the replicated state.
pub const MAX_OPEN_BALLOTS: usize = 64;

/// Decisions remembered, so that a vote resent after its ballot was decided does not open
/// a new one.
pub const DECIDED_REMEMBERED: usize = 256;

const _: () = assert!(MAX_OPEN_BALLOTS <= DECIDED_REMEMBERED);

/// One open vote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ballot {
    /// Who must vote: members that held data when the ballot opened, still members.
    pub voters: BTreeSet<u64>,
    /// The votes cast so far, by Raft id.
    pub votes: BTreeMap<u64, VoteCode>,
}

/// What ordering a vote (or a departure) led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteEvent {
    /// A ballot opened on `seqno`: its voters that have not voted must say what they did.
    Opened {
        /// The seqno voted on.
        seqno: Seqno,
        /// The member whose vote opened it.
        by: u64,
        /// Its verdict.
        code: VoteCode,
        /// Who must vote.
        voters: BTreeSet<u64>,
    },
    /// Every voter has voted.
    Decided(VoteDecision),
}

/// The outcome of a ballot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteDecision {
    /// The seqno voted on.
    pub seqno: Seqno,
    /// The winning verdict.
    pub winner: VoteCode,
    /// Every vote counted, by Raft id.
    pub votes: BTreeMap<u64, VoteCode>,
}

/// Why an ordered vote was not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VoteRefusal {
    /// The seqno has not been handed out.
    #[error("vote on seqno {0:?}, which has not been ordered yet")]
    Unordered(Seqno),
    /// Its ballot was decided already (a resend of a counted vote).
    #[error("vote on seqno {0:?}, whose ballot is decided")]
    Decided(Seqno),
    /// Too many ballots are open.
    #[error("vote on seqno {0:?} refused: {MAX_OPEN_BALLOTS} ballots are open")]
    TooMany(Seqno),
    /// The member is not among the ballot's voters, or voted on it already.
    #[error("vote on seqno {0:?} from a member that is not an outstanding voter")]
    NotAVoter(Seqno),
}

/// The ballots of the group: part of the replicated group state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsistencyVotes {
    /// Open ballots by seqno.
    pub open: BTreeMap<Seqno, Ballot>,
    /// Recent decisions: seqno and winner.
    pub decided: BTreeMap<Seqno, VoteCode>,
}

impl ConsistencyVotes {
    /// Counts `member`'s vote on `seqno`. `holders` are the members holding data now: the
    /// voters, should this vote open the ballot. `last_seqno` is the last seqno handed out.
    pub fn cast(
        &mut self,
        seqno: Seqno,
        member: u64,
        code: VoteCode,
        holders: BTreeSet<u64>,
        last_seqno: Seqno,
    ) -> Result<Vec<VoteEvent>, VoteRefusal> {
        if !seqno.is_defined() || seqno > last_seqno {
            return Err(VoteRefusal::Unordered(seqno));
        }
        if self.decided.contains_key(&seqno) {
            return Err(VoteRefusal::Decided(seqno));
        }
        let mut events = Vec::new();
        if !self.open.contains_key(&seqno) {
            if self.open.len() >= MAX_OPEN_BALLOTS {
                return Err(VoteRefusal::TooMany(seqno));
            }
            let mut voters = holders;
            voters.insert(member);
            events.push(VoteEvent::Opened {
                seqno,
                by: member,
                code,
                voters: voters.clone(),
            });
            self.open.insert(
                seqno,
                Ballot {
                    voters,
                    votes: BTreeMap::new(),
                },
            );
        }
        let ballot = self.open.get_mut(&seqno).expect("opened above");
        if !ballot.voters.contains(&member) || ballot.votes.contains_key(&member) {
            return Err(VoteRefusal::NotAVoter(seqno));
        }
        ballot.votes.insert(member, code);
        events.extend(self.settle(seqno).map(VoteEvent::Decided));
        Ok(events)
    }

    /// Drops a member that left from every open ballot; the ballots it completes are
    /// decided.
    #[must_use]
    pub fn forget_voter(&mut self, member: u64) -> Vec<VoteDecision> {
        let touched: Vec<Seqno> = self
            .open
            .iter_mut()
            .filter_map(|(seqno, ballot)| {
                let was_voter = ballot.voters.remove(&member);
                ballot.votes.remove(&member);
                was_voter.then_some(*seqno)
            })
            .collect();
        touched
            .into_iter()
            .filter_map(|seqno| self.settle(seqno))
            .collect()
    }

    /// Decides the ballot on `seqno` if every voter has voted.
    fn settle(&mut self, seqno: Seqno) -> Option<VoteDecision> {
        let ballot = self.open.get(&seqno)?;
        debug_assert!(ballot.votes.keys().all(|id| ballot.voters.contains(id)));
        if ballot.votes.len() < ballot.voters.len() {
            return None;
        }
        let ballot = self.open.remove(&seqno).expect("present above");
        let winner = winner(ballot.votes.values().copied());
        self.decided.insert(seqno, winner);
        while self.decided.len() > DECIDED_REMEMBERED {
            self.decided.pop_first();
        }
        Some(VoteDecision {
            seqno,
            winner,
            votes: ballot.votes,
        })
    }
}

/// The verdict with the most votes; success wins a tie, then the larger digest. No votes
/// at all (every voter left) is success: nobody is left to disagree.
pub fn winner(votes: impl IntoIterator<Item = VoteCode>) -> VoteCode {
    let mut counts: BTreeMap<VoteCode, usize> = BTreeMap::new();
    for code in votes {
        *counts.entry(code).or_default() += 1;
    }
    let key = |(code, count): (&VoteCode, &usize)| (*count, *code == SUCCESS, *code);
    counts
        .iter()
        .max_by_key(|entry| key(*entry))
        .map_or(SUCCESS, |(code, _)| *code)
}

/// The digest a member votes with for an error text: the same text gives the same digest on
/// every member, and never [`SUCCESS`].
pub fn error_code(error: &[u8]) -> VoteCode {
    // Two CRC32C over the text and over it reversed: 64 bits, stable across builds.
    let forward = u64::from(crc32c::crc32c(error));
    let reversed: Vec<u8> = error.iter().rev().copied().collect();
    let backward = u64::from(crc32c::crc32c(&reversed));
    ((forward << 32) | backward).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn success_wins_a_tie_and_a_majority_wins_otherwise() {
        assert_eq!(winner([SUCCESS, 7]), SUCCESS);
        assert_eq!(winner([7, 7, SUCCESS]), 7);
        assert_eq!(winner([SUCCESS, SUCCESS, 7]), SUCCESS);
        assert_eq!(winner([5, 7, SUCCESS]), SUCCESS);
        assert_eq!(winner([5, 7]), 7, "between errors the larger digest");
        assert_eq!(winner([]), SUCCESS);
    }

    #[test]
    fn a_ballot_is_decided_once_every_voter_voted() {
        let mut votes = ConsistencyVotes::default();
        let events = votes
            .cast(Seqno(5), 2, 9, set(&[1, 2, 3]), Seqno(6))
            .unwrap();
        assert!(matches!(
            events[..],
            [VoteEvent::Opened { by: 2, code: 9, .. }]
        ));
        let events = votes
            .cast(Seqno(5), 1, SUCCESS, set(&[]), Seqno(6))
            .unwrap();
        assert!(events.is_empty());
        let events = votes
            .cast(Seqno(5), 3, SUCCESS, set(&[]), Seqno(6))
            .unwrap();
        let [VoteEvent::Decided(decision)] = &events[..] else {
            panic!("expected a decision, got {events:?}");
        };
        assert_eq!(decision.winner, SUCCESS);
        assert_eq!(decision.votes.len(), 3);
        assert!(votes.open.is_empty());
        assert_eq!(
            votes.cast(Seqno(5), 2, 9, set(&[1, 2, 3]), Seqno(6)),
            Err(VoteRefusal::Decided(Seqno(5))),
            "a resend after the decision opens nothing"
        );
    }

    #[test]
    fn a_departed_voter_no_longer_holds_the_ballot_open() {
        let mut votes = ConsistencyVotes::default();
        votes
            .cast(Seqno(3), 1, 4, set(&[1, 2, 3]), Seqno(3))
            .unwrap();
        votes.cast(Seqno(3), 2, 4, set(&[]), Seqno(3)).unwrap();
        let decided = votes.forget_voter(3);
        assert_eq!(decided.len(), 1);
        assert_eq!(decided[0].winner, 4);
        assert!(votes.forget_voter(3).is_empty());
    }

    #[test]
    fn votes_are_refused_when_they_cannot_count() {
        let mut votes = ConsistencyVotes::default();
        assert_eq!(
            votes.cast(Seqno(9), 1, 1, set(&[1]), Seqno(8)),
            Err(VoteRefusal::Unordered(Seqno(9)))
        );
        votes.cast(Seqno(2), 1, 1, set(&[1, 2]), Seqno(8)).unwrap();
        assert_eq!(
            votes.cast(Seqno(2), 1, 1, set(&[]), Seqno(8)),
            Err(VoteRefusal::NotAVoter(Seqno(2))),
            "a second vote by the same member"
        );
        assert_eq!(
            votes.cast(Seqno(2), 7, 1, set(&[]), Seqno(8)),
            Err(VoteRefusal::NotAVoter(Seqno(2))),
            "a member that was not a voter when the ballot opened"
        );
        for seqno in 10..(10 + MAX_OPEN_BALLOTS as i64 - 1) {
            votes
                .cast(Seqno(seqno), 1, 1, set(&[1, 2]), Seqno(1000))
                .unwrap();
        }
        assert_eq!(
            votes.cast(Seqno(999), 1, 1, set(&[1, 2]), Seqno(1000)),
            Err(VoteRefusal::TooMany(Seqno(999)))
        );
    }

    #[test]
    fn the_same_error_text_gives_the_same_nonzero_code() {
        let a = error_code(b"Table 't1' already exists, Error_code: 1050;");
        assert_eq!(
            a,
            error_code(b"Table 't1' already exists, Error_code: 1050;")
        );
        assert_ne!(a, error_code(b"Unknown table 't1', Error_code: 1051;"));
        assert_ne!(error_code(b""), SUCCESS);
    }
}
