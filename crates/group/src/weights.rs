//! `pc.weight`: which members count in the quorum.
//!
//! Galera keeps a side of a split primary when its members' weights add up to more than
//! half of the last primary view's. Trireme's quorum is a Raft majority, so it honours a
//! weight by choosing the Raft voters, the others following as learners (they receive the
//! order but are not counted):
//! - a member that outweighs all the others together is the only voter: it keeps the
//!   primary component alone, and the others without it never do;
//! - otherwise every member of non-zero weight is a voter (a member of weight 0 never
//!   counts), each once.
//!
//! Both give exactly Galera's decision when one member outweighs the others, or when the
//! non-zero weights are equal (the common uses: a tie-breaker among two nodes, a weight of 0
//! for a member that must never decide). Other mixes, say 2, 1 and 1, count each non-zero
//! member once; [`matches_galera`] says when that differs, and the leader logs it.

use std::collections::{BTreeMap, BTreeSet};

/// A member's weight when `pc.weight` is not set, as in Galera.
pub const DEFAULT_WEIGHT: u8 = 1;

/// The most members [`matches_galera`] compares side by side (2^n splits).
const COMPARED_MEMBERS_MAX: usize = 16;

/// The Raft voters that honour `weights` (member -> weight); never empty for a non-empty
/// group (with every weight 0, every member counts once).
pub fn voters(weights: &BTreeMap<u64, u8>) -> BTreeSet<u64> {
    let total: u32 = weights.values().map(|w| u32::from(*w)).sum();
    if let Some((id, _)) = weights
        .iter()
        .find(|(_, weight)| 2 * u32::from(**weight) > total)
    {
        return BTreeSet::from([*id]);
    }
    let counted: BTreeSet<u64> = weights
        .iter()
        .filter(|(_, weight)| **weight > 0)
        .map(|(id, _)| *id)
        .collect();
    let voters = if counted.is_empty() {
        weights.keys().copied().collect()
    } else {
        counted
    };
    debug_assert!(weights.is_empty() || !voters.is_empty());
    voters
}

/// Whether `side` keeps the primary component by Galera's rule: more than half the weight.
pub fn galera_keeps_primary(weights: &BTreeMap<u64, u8>, side: &BTreeSet<u64>) -> bool {
    let total: u32 = weights.values().map(|w| u32::from(*w)).sum();
    let held: u32 = weights
        .iter()
        .filter(|(id, _)| side.contains(id))
        .map(|(_, w)| u32::from(*w))
        .sum();
    2 * held > total
}

/// Whether `side` holds a Raft majority of `voters`.
pub fn majority_of(voters: &BTreeSet<u64>, side: &BTreeSet<u64>) -> bool {
    2 * voters.intersection(side).count() > voters.len()
}

/// Whether Trireme's voters decide every split of these members as Galera's weights do
/// (unknown, and so `false`, past [`COMPARED_MEMBERS_MAX`] members).
pub fn matches_galera(weights: &BTreeMap<u64, u8>) -> bool {
    let members: Vec<u64> = weights.keys().copied().collect();
    if members.len() > COMPARED_MEMBERS_MAX {
        return false;
    }
    let chosen = voters(weights);
    (0u32..1 << members.len()).all(|mask| {
        let side: BTreeSet<u64> = members
            .iter()
            .enumerate()
            .filter(|(bit, _)| mask & (1 << bit) != 0)
            .map(|(_, id)| *id)
            .collect();
        galera_keeps_primary(weights, &side) == majority_of(&chosen, &side)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn weights(list: &[u8]) -> BTreeMap<u64, u8> {
        list.iter()
            .enumerate()
            .map(|(i, w)| (i as u64 + 1, *w))
            .collect()
    }

    #[test]
    fn a_member_that_outweighs_the_others_is_the_only_voter() {
        assert_eq!(voters(&weights(&[2, 1])), BTreeSet::from([1]));
        assert_eq!(voters(&weights(&[1, 3, 1])), BTreeSet::from([2]));
        assert_eq!(voters(&weights(&[4, 1, 1])), BTreeSet::from([1]));
        assert!(matches_galera(&weights(&[3, 1, 1])));
    }

    #[test]
    fn otherwise_every_member_of_non_zero_weight_counts_once() {
        assert_eq!(voters(&weights(&[1, 1, 1])), BTreeSet::from([1, 2, 3]));
        assert_eq!(voters(&weights(&[1, 0, 1, 1])), BTreeSet::from([1, 3, 4]));
        assert_eq!(voters(&weights(&[0, 0])), BTreeSet::from([1, 2]));
        assert_eq!(voters(&weights(&[0, 1])), BTreeSet::from([2]));
        assert!(matches_galera(&weights(&[1, 1, 0, 1])));
        assert!(matches_galera(&weights(&[2, 2, 2])));
    }

    /// Exactly half is not a majority, in Galera as in Raft: two equal halves both wait.
    #[test]
    fn an_even_split_keeps_neither_side() {
        let even = weights(&[1, 1]);
        let one = BTreeSet::from([1]);
        assert!(!galera_keeps_primary(&even, &one));
        assert!(!majority_of(&voters(&even), &one));
    }

    #[test]
    fn mixed_weights_count_once_and_are_told_apart_from_galera() {
        let mixed = weights(&[2, 1, 1]);
        assert_eq!(voters(&mixed), BTreeSet::from([1, 2, 3]));
        assert!(!matches_galera(&mixed));
        let tie_breaker_of_four = weights(&[2, 1, 1, 1]);
        assert!(!matches_galera(&tie_breaker_of_four));
    }

    proptest! {
        /// The two rules Trireme honours decide every split as Galera does.
        #[test]
        fn dictators_and_equal_weights_decide_as_galera(
            members in 1usize..8,
            equal in 1u8..=255,
            zeros in proptest::collection::vec(any::<bool>(), 8),
            heavy_extra in 1u8..=40,
        ) {
            let uniform: Vec<u8> = (0..members)
                // The first member counts: with every weight 0, Galera is never primary.
                .map(|i| if zeros[i] && i > 0 { 0 } else { equal })
                .collect();
            prop_assert!(matches_galera(&weights(&uniform)));
            let mut dictated: Vec<u8> = vec![1; members];
            let others = u8::try_from(members - 1).unwrap();
            dictated[0] = others + heavy_extra;
            prop_assert!(matches_galera(&weights(&dictated)));
            prop_assert_eq!(voters(&weights(&dictated)), BTreeSet::from([1]));
        }
    }
}
