//! The simulator's safety checks: what every node must agree on, and what no client may
//! lose.

use std::collections::BTreeMap;

use base::Seqno;

use crate::kv::Op;

/// The safety checks, fed as the run goes.
///
/// - every node delivers the same action at the same seqno (after a full crash, from the
///   position the component is restored from on);
/// - every node reaches the same certification verdict for a seqno;
/// - seqnos reach each node consecutively;
/// - commits happen in seqno order (checked by the database itself);
/// - no acknowledged write is lost;
/// - a causal read waits for at least every write acknowledged before it was asked;
/// - all synced nodes end with equal database state (checked at the end).
#[derive(Default)]
pub struct Checker {
    delivered: BTreeMap<Seqno, String>,
    verdicts: BTreeMap<Seqno, Option<Seqno>>,
    pub(crate) acknowledged: Vec<(Seqno, Vec<Op>)>,
    /// The highest seqno acknowledged to any client so far.
    pub(crate) highest_acknowledged: Seqno,
    /// Causal reads in flight: request id -> the highest acknowledged seqno when asked.
    pub(crate) causal_floors: BTreeMap<u64, Seqno>,
}

impl Checker {
    pub(crate) fn delivered(
        &mut self,
        slot: usize,
        seqno: Seqno,
        digest: String,
    ) -> Result<(), String> {
        agree(&mut self.delivered, slot, seqno, digest, "delivered")
    }

    /// The primary component was founded again from `position` after a full crash: what
    /// was ordered after it was never committed anywhere, so nothing acknowledged may lie
    /// past it, and those seqnos are ordered anew from here.
    pub(crate) fn history_restored(&mut self, slot: usize, position: Seqno) -> Result<(), String> {
        if self.highest_acknowledged > position {
            return Err(format!(
                "node {slot} restored the primary component from {position:?}, but \
                 {:?} was acknowledged: lost",
                self.highest_acknowledged
            ));
        }
        self.delivered.retain(|seqno, _| *seqno <= position);
        self.verdicts.retain(|seqno, _| *seqno <= position);
        Ok(())
    }

    pub(crate) fn certified(
        &mut self,
        slot: usize,
        seqno: Seqno,
        verdict: Option<Seqno>,
    ) -> Result<(), String> {
        agree(&mut self.verdicts, slot, seqno, verdict, "certified")
    }

    pub(crate) fn acknowledge(&mut self, seqno: Seqno, ops: Vec<Op>) {
        self.highest_acknowledged = self.highest_acknowledged.max(seqno);
        self.acknowledged.push((seqno, ops));
    }

    /// A causal read's answer may not be below any write acknowledged before it was asked.
    pub(crate) fn causal_answered(
        &mut self,
        slot: usize,
        id: u64,
        seqno: Seqno,
    ) -> Result<bool, String> {
        let Some(floor) = self.causal_floors.remove(&id) else {
            return Ok(false);
        };
        if seqno < floor {
            return Err(format!(
                "node {slot}: causal read {id} would wait only for {seqno:?}, but {floor:?} was \
                 acknowledged before it was asked"
            ));
        }
        Ok(true)
    }
}

/// Records what the first node saw at `seqno`; any later node must see the same.
fn agree<T: PartialEq + std::fmt::Debug>(
    seen: &mut BTreeMap<Seqno, T>,
    slot: usize,
    seqno: Seqno,
    what: T,
    verb: &str,
) -> Result<(), String> {
    match seen.get(&seqno) {
        Some(first) if *first != what => Err(format!(
            "node {slot} {verb} {what:?} at {seqno:?}, another node {verb} {first:?}"
        )),
        Some(_) => Ok(()),
        None => {
            seen.insert(seqno, what);
            Ok(())
        }
    }
}
