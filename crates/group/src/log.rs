//! The Raft log of the ordering layer, kept in memory.
//!
//! Why in memory: a member that restarts comes back as a new member with a new Raft id, so
//! no Raft state has to survive a restart (the database keeps its own state, and the
//! missing range arrives by IST/SST). Entries are retained `log_retain_entries` behind the
//! applied position, so a member that lags briefly catches up from the log, but never more
//! than `log_retain_bytes` of them: ten thousand entries of a bulk load's write-sets were
//! gigabytes of memory on every node.

use std::collections::VecDeque;

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

/// How far the byte budget may cut the log.
#[derive(Clone, Copy, Debug)]
pub struct ByteBudget {
    /// The most payload the log keeps.
    pub bytes_max: u64,
    /// The budget never cuts past this index: on a leader, what the slowest live follower
    /// has, so that a follower still taking in a large write-set is not sent a snapshot
    /// (and a state transfer) for want of the entries it is being sent.
    pub cut_limit: u64,
}

impl ByteBudget {
    /// No byte budget: only the entry count cuts.
    pub const NONE: ByteBudget = ByteBudget {
        bytes_max: u64::MAX,
        cut_limit: u64::MAX,
    };
}

/// An in-memory Raft log with group-state snapshots.
#[derive(Default)]
pub struct OrderLog {
    hard_state: HardState,
    conf_state: ConfState,
    /// The snapshot the log starts after: `entries[0]` has index `snapshot.index + 1`.
    snapshot: Snapshot,
    entries: Vec<Entry>,
    /// For each of `entries`, the bytes appended to the log up to and including it. The
    /// count runs on from where the snapshot starts (`bytes_at_start`), so a difference of
    /// two gives what lies between them.
    bytes_through: Vec<u64>,
    /// The byte count at the snapshot the log starts after.
    bytes_at_start: u64,
    /// Snapshots taken at applied positions, waiting until the log may be cut there.
    pending_snapshots: VecDeque<Snapshot>,
    /// The newest snapshot taken: what a peer that needs one is sent. It is never older than
    /// `snapshot`, and it is taken after every membership change, because raft-rs ignores a
    /// snapshot whose configuration does not list its recipient.
    served: Snapshot,
}

impl OrderLog {
    /// A log that starts at `snapshot` (bootstrap, or a snapshot received from the leader).
    pub fn from_snapshot(snapshot: Snapshot) -> OrderLog {
        let mut log = OrderLog::default();
        log.install_snapshot(snapshot);
        log
    }

    /// Replaces the whole log with a snapshot from the leader.
    pub fn install_snapshot(&mut self, snapshot: Snapshot) {
        let metadata = snapshot.get_metadata();
        self.conf_state = metadata.get_conf_state().clone();
        self.hard_state.term = self.hard_state.term.max(metadata.term);
        self.hard_state.commit = self.hard_state.commit.max(metadata.index);
        self.entries.clear();
        self.bytes_through.clear();
        self.pending_snapshots.clear();
        self.served = snapshot.clone();
        self.snapshot = snapshot;
    }

    /// Saves the hard state (term, vote, commit).
    pub fn set_hard_state(&mut self, hard_state: HardState) {
        self.hard_state = hard_state;
    }

    /// Updates the commit index only.
    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    /// Saves the configuration after a membership change was applied.
    pub fn set_conf_state(&mut self, conf_state: ConfState) {
        self.conf_state = conf_state;
    }

    /// The configuration as last applied.
    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// Appends entries from a Ready, replacing any conflicting suffix. Takes them by value:
    /// a chunk of a large write-set is 256 KiB, and a copy of each into fresh memory was what
    /// moving a 160 MB write-set through the log cost most.
    pub fn append(&mut self, new_entries: Vec<Entry>) {
        let Some(first) = new_entries.first() else {
            return;
        };
        let offset = self.snapshot.get_metadata().index + 1;
        assert!(
            first.index >= offset,
            "Raft appended index {} below the log start {offset}",
            first.index
        );
        let keep = (first.index - offset) as usize;
        assert!(
            keep <= self.entries.len(),
            "Raft appended index {} beyond the log end {}: a gap in the log",
            first.index,
            offset + self.entries.len() as u64
        );
        self.entries.truncate(keep);
        self.bytes_through.truncate(keep);
        let mut bytes = self
            .bytes_through
            .last()
            .copied()
            .unwrap_or(self.bytes_at_start);
        for entry in &new_entries {
            bytes += entry_bytes(entry);
            self.bytes_through.push(bytes);
        }
        self.entries.extend(new_entries);
        debug_assert_eq!(self.entries.len(), self.bytes_through.len());
    }

    /// Payload bytes of the entries kept after `index` (all of them for an index at or
    /// before the log's start, none past its end).
    pub fn bytes_after(&self, index: u64) -> u64 {
        let start = self.snapshot.get_metadata().index;
        let end = self
            .bytes_through
            .last()
            .copied()
            .unwrap_or(self.bytes_at_start);
        let at = match index.checked_sub(start + 1) {
            None => self.bytes_at_start,
            Some(position) => match self.bytes_through.get(position as usize) {
                Some(bytes) => *bytes,
                None => end,
            },
        };
        end - at
    }

    /// Payload bytes of every entry kept in memory.
    pub fn bytes(&self) -> u64 {
        self.bytes_after(self.snapshot.get_metadata().index)
    }

    /// Index of the last entry.
    pub fn last_index(&self) -> u64 {
        self.snapshot.get_metadata().index + self.entries.len() as u64
    }

    /// Records a group-state snapshot taken when the entry at `index` (of `term`) was the
    /// last one applied.
    pub fn record_snapshot(&mut self, index: u64, term: u64, data: Vec<u8>) {
        assert!(
            index >= self.served.get_metadata().index,
            "snapshot at {index} is older than the one at {}",
            self.served.get_metadata().index
        );
        let mut snapshot = Snapshot::default();
        snapshot.set_data(data.into());
        let metadata = snapshot.mut_metadata();
        metadata.index = index;
        metadata.term = term;
        metadata.set_conf_state(self.conf_state.clone());
        self.served = snapshot.clone();
        self.pending_snapshots.push_back(snapshot);
    }

    /// Cuts the log at the newest recorded snapshot at or below `index`, or at a later
    /// recorded snapshot, up to `budget.cut_limit`, if that is what it takes to keep at most
    /// `budget.bytes_max` bytes.
    pub fn compact_to(&mut self, index: u64, budget: ByteBudget) {
        let mut cut = None;
        while let Some(next) = self.pending_snapshots.front() {
            let at = next.get_metadata().index;
            let over_budget = self.bytes_after(self.cut_index(cut.as_ref())) > budget.bytes_max;
            if at > index && !(over_budget && at <= budget.cut_limit) {
                break;
            }
            cut = self.pending_snapshots.pop_front();
        }
        let Some(snapshot) = cut else { return };
        let drop = (snapshot.get_metadata().index - self.snapshot.get_metadata().index) as usize;
        assert!(
            drop <= self.entries.len(),
            "a snapshot at {} past the log end {}",
            snapshot.get_metadata().index,
            self.last_index()
        );
        if drop > 0 {
            self.bytes_at_start = self.bytes_through[drop - 1];
        }
        self.entries.drain(..drop);
        self.bytes_through.drain(..drop);
        self.snapshot = snapshot;
    }

    /// Where the log would start after cutting at `cut` (nothing chosen yet: where it starts).
    fn cut_index(&self, cut: Option<&Snapshot>) -> u64 {
        cut.unwrap_or(&self.snapshot).get_metadata().index
    }

    /// Entries kept in memory.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What an entry counts for in the log's byte budget: its payload, and its context (a
/// membership change's).
fn entry_bytes(entry: &Entry) -> u64 {
    (entry.get_data().len() + entry.get_context().len()) as u64
}

impl raft::Storage for OrderLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState {
            hard_state: self.hard_state.clone(),
            conf_state: self.conf_state.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let offset = self.snapshot.get_metadata().index + 1;
        if low < offset {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        assert!(
            high <= self.last_index() + 1,
            "entries({low}, {high}) past the log end"
        );
        let mut slice = self.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut slice, max_size.into());
        Ok(slice)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let metadata = self.snapshot.get_metadata();
        if index == metadata.index {
            return Ok(metadata.term);
        }
        if index < metadata.index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        let position = (index - metadata.index - 1) as usize;
        self.entries
            .get(position)
            .map(|entry| entry.term)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.snapshot.get_metadata().index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(OrderLog::last_index(self))
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.served.get_metadata().index < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.served.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    fn entry(index: u64, term: u64) -> Entry {
        let mut entry = Entry::default();
        entry.index = index;
        entry.term = term;
        entry
    }

    fn genesis() -> OrderLog {
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().index = 1;
        snapshot.mut_metadata().term = 1;
        OrderLog::from_snapshot(snapshot)
    }

    #[test]
    fn append_replaces_a_conflicting_suffix() {
        let mut log = genesis();
        log.append(vec![entry(2, 1), entry(3, 1), entry(4, 1)]);
        log.append(vec![entry(3, 2)]);
        assert_eq!(log.last_index(), 3);
        assert_eq!(log.term(3), Ok(2));
        assert_eq!(log.term(1), Ok(1));
        assert!(log.term(0).is_err());
        assert!(log.term(4).is_err());
    }

    #[test]
    fn compaction_cuts_at_a_recorded_snapshot_only() {
        let mut log = genesis();
        log.append((2..=10).map(|i| entry(i, 1)).collect());
        log.compact_to(9, ByteBudget::NONE);
        assert_eq!(
            log.first_index(),
            Ok(2),
            "no snapshot recorded yet: nothing cut"
        );
        log.record_snapshot(5, 1, b"state at 5".to_vec());
        log.record_snapshot(8, 1, b"state at 8".to_vec());
        log.compact_to(7, ByteBudget::NONE);
        assert_eq!(log.first_index(), Ok(6));
        assert_eq!(log.term(5), Ok(1));
        assert_eq!(
            log.snapshot(0, 0).unwrap().get_data(),
            b"state at 8",
            "the newest is served"
        );
        assert!(matches!(
            log.entries(5, 7, None, GetEntriesContext::empty(false)),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert_eq!(
            log.entries(6, 11, None, GetEntriesContext::empty(false))
                .unwrap()
                .len(),
            5
        );
    }

    fn entry_of(index: u64, bytes: usize) -> Entry {
        let mut entry = entry(index, 1);
        entry.set_data(vec![7; bytes].into());
        entry
    }

    /// Entries 2..=9 of 100 bytes each, with snapshots recorded at 3, 5 and 7.
    fn eight_entries_and_three_snapshots() -> OrderLog {
        let mut log = genesis();
        log.append((2..=9).map(|i| entry_of(i, 100)).collect());
        log.record_snapshot(3, 1, b"at 3".to_vec());
        log.record_snapshot(5, 1, b"at 5".to_vec());
        log.record_snapshot(7, 1, b"at 7".to_vec());
        log
    }

    #[test]
    fn the_byte_budget_cuts_past_the_entry_count_to_a_later_snapshot() {
        let mut log = eight_entries_and_three_snapshots();
        assert_eq!(log.bytes(), 800);
        log.compact_to(2, budget(1_000));
        assert_eq!(
            log.first_index(),
            Ok(2),
            "within budget and count: nothing cut"
        );
        log.compact_to(2, budget(450));
        assert_eq!(
            log.first_index(),
            Ok(6),
            "the first snapshot that leaves at most 450 bytes"
        );
        assert_eq!(log.bytes(), 400);
        assert_eq!(log.bytes_after(7), 200);
        log.append(vec![entry_of(10, 1_000)]);
        assert_eq!(log.bytes(), 1_400);
        log.compact_to(2, budget(0));
        assert_eq!(
            log.first_index(),
            Ok(8),
            "no later snapshot: the newest one is as far as it can cut"
        );
        assert_eq!(log.bytes(), 1_200);
        assert_eq!(log.bytes_after(0), 1_200);
        assert_eq!(log.bytes_after(99), 0);
    }

    fn budget(bytes_max: u64) -> ByteBudget {
        ByteBudget {
            bytes_max,
            cut_limit: u64::MAX,
        }
    }

    #[test]
    fn the_byte_budget_does_not_cut_past_its_limit() {
        let mut log = eight_entries_and_three_snapshots();
        log.compact_to(
            2,
            ByteBudget {
                bytes_max: 0,
                cut_limit: 6,
            },
        );
        assert_eq!(log.first_index(), Ok(6), "cut at 5, not at 7");
        log.compact_to(7, budget(u64::MAX));
        assert_eq!(log.first_index(), Ok(8), "the entry count cuts regardless");
    }

    #[test]
    fn a_replaced_suffix_gives_back_its_bytes() {
        let mut log = genesis();
        log.append((2..=5).map(|i| entry_of(i, 10)).collect());
        log.append(vec![entry_of(4, 1)]);
        assert_eq!(log.bytes(), 21);
        log.install_snapshot(log.snapshot(0, 0).unwrap());
        assert_eq!(log.bytes(), 0);
    }

    #[test]
    fn a_gap_in_the_log_is_a_loud_error() {
        let result = std::panic::catch_unwind(|| {
            let mut log = genesis();
            log.append(vec![entry(5, 1)]);
        });
        assert!(result.is_err());
    }

    mod fuzz {
        use super::*;
        use crate::state::{GroupState, MemberInfo};
        use base::{Seqno, Uuid};
        use proptest::prelude::*;
        use proptest::sample::Index;
        use protobuf::Message as _;

        /// Cases: a case parses and checks a snapshot of a few hundred bytes and drives the
        /// log through it, a few microseconds, so this takes under a second.
        const FUZZ_CASES: u32 = 100_000;

        fn member(raft_id: u64) -> MemberInfo {
            MemberInfo {
                raft_id,
                uuid: Uuid([raft_id as u8; 16]),
                name: format!("n{raft_id}"),
                address: format!("n{raft_id}:4567"),
                incoming: String::new(),
            }
        }

        /// A snapshot as a leader serves it: position, the voters and their group state.
        fn real_snapshot() -> Snapshot {
            let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(12), member(7));
            state.add_member(member(9));
            let mut snapshot = Snapshot::default();
            snapshot.set_data(state.encode().into());
            snapshot.mut_metadata().index = 40;
            snapshot.mut_metadata().term = 3;
            snapshot.mut_metadata().mut_conf_state().voters = vec![7, 9];
            snapshot
        }

        proptest! {
            #![proptest_config(fuzzing::config(FUZZ_CASES))]

            /// Arbitrary and mangled snapshot bytes: parsing and checking never panic, and a
            /// snapshot the check accepts (what a member lets through to raft-rs) installs,
            /// serves, extends and compacts the log without a panic.
            #[test]
            fn fuzz_snapshot_decode_and_install(
                arbitrary in proptest::collection::vec(any::<u8>(), 0..200),
                edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
                cut in proptest::option::of(any::<Index>()),
                message_term in prop_oneof![Just(3u64), Just(u64::MAX), any::<u64>()],
            ) {
                let mut bytes = real_snapshot().write_to_bytes().unwrap();
                if edits.is_empty() && cut.is_none() {
                    bytes = arbitrary;
                }
                fuzzing::apply(&mut bytes, &edits);
                if let Some(at) = cut {
                    bytes.truncate(at.index(bytes.len() + 1));
                }
                let Ok(snapshot) = Snapshot::parse_from_bytes(&bytes) else {
                    return Ok(());
                };
                if crate::check::check_snapshot(&snapshot, message_term).is_err() {
                    return Ok(());
                }
                let state = GroupState::decode(snapshot.get_data());
                prop_assert!(state.is_ok_and(|s| s.check().is_ok()));
                let (index, term) = (snapshot.get_metadata().index, snapshot.get_metadata().term);
                let mut log = OrderLog::from_snapshot(snapshot.clone());
                prop_assert!(log.initial_state().is_ok());
                prop_assert_eq!(log.first_index(), Ok(index + 1));
                prop_assert_eq!(Storage::last_index(&log), Ok(index));
                prop_assert_eq!(log.term(index), Ok(term));
                prop_assert!(log.term(index + 1).is_err());
                prop_assert_eq!(log.snapshot(index, 0).map(|s| s == snapshot), Ok(true));
                if index < u64::MAX - 2 {
                    log.append(vec![entry(index + 1, term), entry(index + 2, term)]);
                    let got = log.entries(index + 1, index + 3, None, GetEntriesContext::empty(false));
                    prop_assert_eq!(got.map(|e| e.len()), Ok(2));
                    log.record_snapshot(index + 1, term, snapshot.get_data().to_vec());
                    log.compact_to(index + 2, ByteBudget::NONE);
                    prop_assert_eq!(log.first_index(), Ok(index + 2));
                }
            }
        }
    }
}
