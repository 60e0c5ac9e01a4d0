//! A forced bootstrap (`pc.bootstrap=YES` on a running member outside the primary
//! component): the fork it makes in the history, and the rule by which the components of
//! that history give way to it once they meet again.
//!
//! The member that is forced founds a primary component of its own from its last delivered
//! seqno, as Galera's does. That is the unsafe step Galera offers: another component of the
//! same history may still be primary and ordering. The operator chose this member's data, so
//! when the two meet, the other one gives way: each of its members leaves it and joins the
//! forced component, by IST when it holds nothing past the fork, and otherwise (its history
//! went on without this one) only after a restart, by a full state transfer.

use base::Seqno;
use serde::{Deserialize, Serialize};

/// Where a forced bootstrap forked the history: its founder and the last seqno the founder
/// had delivered, which the new component continues from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ForcedFork {
    /// The last seqno the two branches share. Compared first: of two forced bootstraps, the
    /// later one in the history wins.
    pub fork_after: Seqno,
    /// The founder's Raft id (a tie-break that every member computes alike).
    pub founder: u64,
}

/// What a member of a component does on hearing of a forced component of its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveWay {
    /// Nothing: this member's component is that one, or supersedes it.
    Stay,
    /// Leave and join the forced component; what this member holds is a prefix of its
    /// history, so IST brings it up to date.
    Rejoin,
    /// Leave: this member delivered seqnos past the fork that the forced component does not
    /// have. Its data must be replaced by a full state transfer.
    Diverged,
}

impl ForcedFork {
    /// The rule, the same on every member: `own` is the fork this member's component was
    /// founded by (if any), `last_delivered` the last seqno it was handed, `holds_data`
    /// whether it keeps a database (an arbitrator never diverges).
    pub fn give_way(
        self,
        own: Option<ForcedFork>,
        last_delivered: Seqno,
        holds_data: bool,
    ) -> GiveWay {
        if own.is_some_and(|own| own >= self) {
            return GiveWay::Stay;
        }
        if holds_data && last_delivered > self.fork_after {
            GiveWay::Diverged
        } else {
            GiveWay::Rejoin
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(after: i64, founder: u64) -> ForcedFork {
        ForcedFork {
            fork_after: Seqno(after),
            founder,
        }
    }

    #[test]
    fn a_component_of_that_fork_or_a_later_one_stays() {
        let x = fork(100, 7);
        assert_eq!(x.give_way(Some(x), Seqno(500), true), GiveWay::Stay);
        assert_eq!(
            x.give_way(Some(fork(101, 1)), Seqno(500), true),
            GiveWay::Stay
        );
        assert_eq!(
            x.give_way(Some(fork(100, 9)), Seqno(500), true),
            GiveWay::Stay
        );
    }

    #[test]
    fn an_older_component_gives_way_by_ist_only_if_it_holds_nothing_past_the_fork() {
        let x = fork(100, 7);
        for own in [None, Some(fork(99, 9)), Some(fork(100, 3))] {
            assert_eq!(x.give_way(own, Seqno(100), true), GiveWay::Rejoin);
            assert_eq!(x.give_way(own, Seqno(42), true), GiveWay::Rejoin);
            assert_eq!(x.give_way(own, Seqno(101), true), GiveWay::Diverged);
            assert_eq!(x.give_way(own, Seqno(101), false), GiveWay::Rejoin);
        }
    }

    /// Two forced components that meet never both give way: the order is total.
    #[test]
    fn of_two_forced_components_exactly_one_gives_way() {
        let pairs = [(fork(5, 1), fork(5, 2)), (fork(5, 9), fork(6, 1))];
        for (a, b) in pairs {
            let a_yields = b.give_way(Some(a), Seqno(0), true) != GiveWay::Stay;
            let b_yields = a.give_way(Some(b), Seqno(0), true) != GiveWay::Stay;
            assert!(a_yields ^ b_yields, "{a:?} {b:?}");
        }
    }
}
