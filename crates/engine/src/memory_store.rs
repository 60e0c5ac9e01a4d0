//! An [`ActionStore`] in memory, for the simulator and tests: a gapless run of checksummed
//! records purged oldest first beyond a capacity, within the retention floor and the freeze,
//! as the on-disk gcache behaves. It is a handle: clones share the records, so that what a
//! node cached outlives the node (a crash keeps its disk), and a crash can tear or flip a
//! record, which recovery then finds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use base::{FreezePurge, Seqno, Uuid};

use crate::cache::{ActionStore, CacheReach};

/// One stored record and the checksum written with it.
#[derive(Clone, Debug)]
struct Stored {
    kind: u8,
    body: Vec<u8>,
    crc: u32,
}

impl Stored {
    fn intact(&self, seqno: Seqno) -> bool {
        self.crc == checksum(seqno, self.kind, &self.body)
    }
}

fn checksum(seqno: Seqno, kind: u8, body: &[u8]) -> u32 {
    let head = crc32c::crc32c_append(crc32c::crc32c(&seqno.0.to_le_bytes()), &[kind]);
    crc32c::crc32c_append(head, body)
}

#[derive(Debug)]
struct Records {
    history: Uuid,
    records: BTreeMap<Seqno, Stored>,
    capacity: usize,
    disk_budget: bool,
    floor: Option<Seqno>,
    freeze: FreezePurge,
}

/// Damage a crash can do to the last records written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashDamage {
    /// The newest record was only partly written.
    TornLast,
    /// One bit of this record's body flipped.
    FlippedBit {
        /// The record.
        seqno: Seqno,
        /// Which bit of its body (modulo its length).
        bit: usize,
    },
}

/// Records in memory, shared by every clone of the handle.
#[derive(Clone, Debug)]
pub struct MemoryActionStore {
    records: Arc<Mutex<Records>>,
}

impl MemoryActionStore {
    /// An empty store that keeps at most `capacity` records beyond what the retention
    /// floor and the freeze hold; `disk_budget`: it may keep seqnos for absent members.
    pub fn new(capacity: usize, disk_budget: bool) -> MemoryActionStore {
        assert!(capacity > 0, "a store keeps at least one record");
        MemoryActionStore {
            records: Arc::new(Mutex::new(Records {
                history: Uuid::NIL,
                records: BTreeMap::new(),
                capacity,
                disk_budget,
                floor: None,
                freeze: FreezePurge::Off,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Damages what a crash was writing; false if there was nothing to damage.
    pub fn damage(&self, damage: CrashDamage) -> bool {
        let mut records = self.lock();
        match damage {
            CrashDamage::TornLast => match records.records.values_mut().next_back() {
                Some(last) if !last.body.is_empty() => {
                    last.body.truncate(last.body.len() / 2);
                    true
                }
                _ => false,
            },
            CrashDamage::FlippedBit { seqno, bit } => match records.records.get_mut(&seqno) {
                Some(stored) if !stored.body.is_empty() => {
                    let bit = bit % (stored.body.len() * 8);
                    stored.body[bit / 8] ^= 1 << (bit % 8);
                    true
                }
                _ => false,
            },
        }
    }

    /// What a restart finds: keeps the longest run of consecutive intact records and drops
    /// the rest, as the gcache's recovery does; returns how many were dropped. The freeze
    /// and the floor were the process's, not the disk's: they are gone.
    pub fn recover(&self) -> usize {
        let mut records = self.lock();
        let mut best: Option<(Seqno, Seqno)> = None;
        let mut run: Option<(Seqno, Seqno)> = None;
        for (seqno, stored) in &records.records {
            if !stored.intact(*seqno) {
                run = None;
                continue;
            }
            run = match run {
                Some((first, last)) if last.next() == *seqno => Some((first, *seqno)),
                _ => Some((*seqno, *seqno)),
            };
            let len = |r: (Seqno, Seqno)| r.1 .0 - r.0 .0;
            if best.is_none_or(|b| len(run.expect("set")) > len(b)) {
                best = run;
            }
        }
        let before = records.records.len();
        match best {
            Some((first, last)) => records.records.retain(|s, _| (first..=last).contains(s)),
            None => records.records.clear(),
        }
        records.floor = None;
        records.freeze = FreezePurge::Off;
        before - records.records.len()
    }
}

impl Records {
    fn purge(&mut self) {
        while self.records.len() > self.capacity {
            let oldest = *self.records.keys().next().expect("not empty");
            let kept_by_floor = self.floor.is_some_and(|floor| oldest >= floor);
            let kept_by_freeze = matches!(self.freeze, FreezePurge::At(at) if oldest >= at);
            if kept_by_floor || kept_by_freeze {
                return;
            }
            self.records.remove(&oldest);
        }
    }
}

impl ActionStore for MemoryActionStore {
    fn history(&self) -> Uuid {
        self.lock().history
    }

    fn range(&self) -> Option<(Seqno, Seqno)> {
        let records = self.lock();
        let first = *records.records.keys().next()?;
        let last = *records.records.keys().next_back()?;
        Some((first, last))
    }

    fn contains_range(&self, from: Seqno, to: Seqno) -> bool {
        self.range()
            .is_some_and(|(first, last)| first <= from && to <= last)
    }

    fn reset(&mut self, history: Uuid) -> Result<(), String> {
        let mut records = self.lock();
        records.history = history;
        records.records.clear();
        Ok(())
    }

    fn truncate_after(&mut self, last: Seqno) -> Result<(), String> {
        self.lock().records.retain(|seqno, _| *seqno <= last);
        Ok(())
    }

    fn append(&mut self, seqno: Seqno, kind: u8, body: &[u8]) -> Result<(), String> {
        let mut records = self.lock();
        if let Some((last, _)) = records.records.last_key_value() {
            if last.next() != seqno {
                return Err(format!("seqno {seqno} does not follow {last}"));
            }
        }
        let stored = Stored {
            kind,
            body: body.to_vec(),
            crc: checksum(seqno, kind, body),
        };
        records.records.insert(seqno, stored);
        records.purge();
        Ok(())
    }

    fn get(&self, seqno: Seqno) -> Result<Option<(u8, Vec<u8>)>, String> {
        let records = self.lock();
        let Some(stored) = records.records.get(&seqno) else {
            return Ok(None);
        };
        if !stored.intact(seqno) {
            return Err(format!("record {seqno}: checksum mismatch"));
        }
        Ok(Some((stored.kind, stored.body.clone())))
    }

    fn set_retention_floor(&mut self, floor: Option<Seqno>) -> Result<(), String> {
        let mut records = self.lock();
        records.floor = floor;
        records.purge();
        Ok(())
    }

    fn has_disk_budget(&self) -> bool {
        self.lock().disk_budget
    }

    fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), String> {
        let mut records = self.lock();
        records.freeze = match freeze {
            FreezePurge::Now => {
                let oldest = records.records.keys().next().copied();
                FreezePurge::At(oldest.unwrap_or(Seqno::ZERO))
            }
            other => other,
        };
        records.purge();
        Ok(())
    }

    fn freeze_purge(&self) -> FreezePurge {
        self.lock().freeze
    }

    fn reach(&self) -> CacheReach {
        let bytes = self
            .lock()
            .records
            .values()
            .map(|r| r.body.len() as u64)
            .sum();
        match self.range() {
            Some((from, to)) => CacheReach {
                from,
                to,
                seconds: 0.0,
                disk_bytes: bytes,
            },
            None => CacheReach::EMPTY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(capacity: usize, upto: i64) -> MemoryActionStore {
        let mut store = MemoryActionStore::new(capacity, false);
        store.reset(Uuid([1; 16])).unwrap();
        for seqno in 1..=upto {
            store.append(Seqno(seqno), 1, &[seqno as u8; 8]).unwrap();
        }
        store
    }

    #[test]
    fn purges_oldest_first_within_floor_and_freeze() {
        let mut store = filled(3, 5);
        assert_eq!(store.range(), Some((Seqno(3), Seqno(5))));
        store.set_retention_floor(Some(Seqno(4))).unwrap();
        store.append(Seqno(6), 1, b"x").unwrap();
        store.append(Seqno(7), 1, b"x").unwrap();
        assert_eq!(
            store.range(),
            Some((Seqno(4), Seqno(7))),
            "the floor holds 4"
        );
        store.set_freeze_purge(FreezePurge::Now).unwrap();
        store.set_retention_floor(None).unwrap();
        store.append(Seqno(8), 1, b"x").unwrap();
        assert_eq!(store.range(), Some((Seqno(4), Seqno(8))), "frozen at 4");
        assert_eq!(store.freeze_purge(), FreezePurge::At(Seqno(4)));
        assert!(store.append(Seqno(10), 1, b"x").is_err(), "no gaps");
    }

    #[test]
    fn recovery_keeps_the_longest_intact_run() {
        let store = filled(100, 10);
        assert!(store.damage(CrashDamage::FlippedBit {
            seqno: Seqno(3),
            bit: 5
        }));
        assert!(store.damage(CrashDamage::TornLast));
        assert!(store.get(Seqno(3)).is_err(), "a damaged record never reads");
        assert_eq!(store.recover(), 4, "1, 2, 3 and the torn 10 go");
        assert_eq!(store.range(), Some((Seqno(4), Seqno(9))));
        assert_eq!(store.get(Seqno(4)).unwrap(), Some((1, vec![4; 8])));
    }
}
