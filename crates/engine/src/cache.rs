//! The node's write-set cache as the engine sees it: every ordered action with the verdict
//! the cluster gave it, so that this node can serve IST. The store itself is behind
//! [`ActionStore`] (the on-disk gcache on a real node, [`crate::memory_store::MemoryStore`]
//! in the simulator); [`ActionCache`] adds what the engine decides about it: the cache is
//! started over when the order jumps (after a snapshot, or in a new history), and what
//! running transfers and absent members still need is kept (the retention floor).

use std::collections::BTreeMap;

use base::{FreezePurge, Gtid, Seqno, Uuid};

use crate::ist::{Action, ActionKind, IstError};

/// What the cache holds, for status variables and donor selection.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheReach {
    /// Oldest seqno held (`wsrep_local_cached_downto`), `UNDEFINED` when empty.
    pub from: Seqno,
    /// Newest seqno held.
    pub to: Seqno,
    /// Age of the oldest record, in seconds: how far back in time IST can reach.
    pub seconds: f64,
    /// Bytes on disk, ring and pages.
    pub disk_bytes: u64,
}

impl CacheReach {
    /// The reach of a cache that holds nothing.
    pub const EMPTY: CacheReach = CacheReach {
        from: Seqno::UNDEFINED,
        to: Seqno::UNDEFINED,
        seconds: 0.0,
        disk_bytes: 0,
    };
}

/// Where cached actions live: a gapless run of records of one history, purged oldest first
/// within its limits. Errors are the store's own words.
pub trait ActionStore: Send {
    /// The history the records belong to.
    fn history(&self) -> Uuid;
    /// The oldest and newest seqno held, if any.
    fn range(&self) -> Option<(Seqno, Seqno)>;
    /// Whether every seqno of `from..=to` is held.
    fn contains_range(&self, from: Seqno, to: Seqno) -> bool;
    /// Drops every record and starts a run of `history`.
    fn reset(&mut self, history: Uuid) -> Result<(), String>;
    /// Drops every record after `last`, for good (a restart must not bring them back).
    fn truncate_after(&mut self, last: Seqno) -> Result<(), String>;
    /// Appends the record for `seqno`, the successor of the newest held (or the first).
    fn append(&mut self, seqno: Seqno, kind: u8, body: &[u8]) -> Result<(), String>;
    /// [`ActionStore::append`] of the body `head` then `rest`. A store that writes the two
    /// in place spares a large write-set the copy into one buffer (a fresh 160 MB for a
    /// large DELETE, on every node, while its appliers need the CPU).
    fn append_split(
        &mut self,
        seqno: Seqno,
        kind: u8,
        head: &[u8],
        rest: &[u8],
    ) -> Result<(), String> {
        let mut body = Vec::with_capacity(head.len() + rest.len());
        body.extend_from_slice(head);
        body.extend_from_slice(rest);
        self.append(seqno, kind, &body)
    }
    /// Writes the records appended since the last call, if the store held them back to
    /// write several at once; after it returns, a process crash loses none of them.
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// The record for `seqno`: its kind and body, `None` when not held.
    fn get(&self, seqno: Seqno) -> Result<Option<(u8, Vec<u8>)>, String>;
    /// Never purges `floor` or anything after it (`None`: purge as usual).
    fn set_retention_floor(&mut self, floor: Option<Seqno>) -> Result<(), String>;
    /// Whether the store may grow past its usual size up to a disk budget
    /// (`gcache.max_disk_bytes`), which is what keeping seqnos for absent members needs.
    fn has_disk_budget(&self) -> bool;
    /// `gcache.freeze_purge_at_seqno`.
    fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), String>;
    /// The effective freeze (`now` resolved to the seqno it froze at).
    fn freeze_purge(&self) -> FreezePurge;
    /// What is held, for status variables.
    fn reach(&self) -> CacheReach;
}

/// The cache and the transfers reading from it.
pub struct ActionCache {
    store: Option<Box<dyn ActionStore>>,
    /// Transfer id -> the oldest seqno it still has to send.
    pins: BTreeMap<u64, Seqno>,
    next_pin: u64,
    /// The freeze asked for, kept while no store is open.
    freeze: FreezePurge,
    /// What members absent from the last primary view need to rejoin by IST; kept only
    /// within a disk budget (without one, nothing is kept for them).
    absent_floor: Option<Seqno>,
}

impl ActionCache {
    /// A node that keeps no cache (tests, or a cache that could not be opened): it can
    /// still join and serve SST, only not IST.
    pub fn disabled() -> ActionCache {
        ActionCache {
            store: None,
            pins: BTreeMap::new(),
            next_pin: 0,
            freeze: FreezePurge::Off,
            absent_floor: None,
        }
    }

    /// A cache over `store` (set its freeze with [`ActionCache::set_freeze_purge`]).
    pub fn over(store: Box<dyn ActionStore>) -> ActionCache {
        let mut cache = ActionCache::disabled();
        cache.store = Some(store);
        cache
    }

    /// Stores the action ordered at `seqno` in history `cluster`. An action that does not
    /// continue the cached run (a snapshot moved the node forward, or the history changed)
    /// starts the cache over: a cache never has gaps.
    pub fn record(
        &mut self,
        cluster: Uuid,
        seqno: Seqno,
        kind: ActionKind,
        depends_on: i64,
        payload: &[u8],
    ) -> Result<(), String> {
        let Some(store) = self.store.as_mut() else {
            return Ok(());
        };
        let continues =
            store.history() == cluster && store.range().is_none_or(|(_, max)| max.next() == seqno);
        if !continues {
            store.reset(cluster)?;
        }
        // The body of `Action::cache_body`, in its two pieces.
        store.append_split(seqno, kind as u8, &depends_on.to_le_bytes(), payload)
    }

    /// Writes what the store gathered since the last flush (see [`ActionStore::flush`]).
    pub fn flush(&mut self) -> Result<(), String> {
        self.store.as_mut().map_or(Ok(()), |store| store.flush())
    }

    /// Drops what is cached past `position`, the server's committed position at start:
    /// seqnos it never committed, ordered in a history that may not keep them (after a full
    /// crash the cluster goes on from the most advanced member's commits). The node catches
    /// up from `position` anyway, and the run it keeps ends there, so that it continues.
    pub fn drop_past(&mut self, position: Gtid) -> Result<(), String> {
        let Some(store) = self.store.as_mut() else {
            return Ok(());
        };
        let past = store
            .range()
            .is_some_and(|(_, newest)| newest > position.seqno);
        if store.history() != position.cluster || !position.seqno.is_defined() || !past {
            return Ok(());
        }
        store.truncate_after(position.seqno)
    }

    /// Whether every seqno of `from..=to` is cached in history `cluster`.
    pub fn holds(&self, cluster: Uuid, from: Seqno, to: Seqno) -> bool {
        self.store
            .as_ref()
            .is_some_and(|s| s.history() == cluster && (from > to || s.contains_range(from, to)))
    }

    /// What is cached, as text for log lines.
    pub fn describe(&self) -> String {
        match &self.store {
            None => "no gcache".to_owned(),
            Some(store) => match store.range() {
                Some((from, to)) => format!("seqnos {from}..={to} of {}", store.history()),
                None => "nothing".to_owned(),
            },
        }
    }

    /// Reads one cached action.
    pub fn read(&self, seqno: Seqno) -> Result<Action, String> {
        let store = self.store.as_ref().ok_or("no gcache")?;
        let (kind, body) = store
            .get(seqno)?
            .ok_or_else(|| format!("seqno {seqno} is no longer cached"))?;
        Action::from_cache(seqno, kind, body).map_err(|e: IstError| e.to_string())
    }

    /// Keeps `from` and everything after it until [`ActionCache::unpin`].
    pub fn pin(&mut self, from: Seqno) -> u64 {
        self.next_pin += 1;
        self.pins.insert(self.next_pin, from);
        self.apply_floor();
        self.next_pin
    }

    /// Ends a pin (the transfer finished or failed).
    pub fn unpin(&mut self, pin: u64) {
        self.pins.remove(&pin);
        self.apply_floor();
    }

    /// Moves a pin forward as its transfer sends.
    pub fn advance_pin(&mut self, pin: u64, from: Seqno) {
        if let Some(at) = self.pins.get_mut(&pin) {
            *at = from;
        }
        self.apply_floor();
    }

    /// Keeps `floor` and after for members that left the view (`None`: nobody is absent).
    /// Only with a disk budget: an absent member that never returns must not fill the disk.
    pub fn set_absent_floor(&mut self, floor: Option<Seqno>) {
        let budget = self.keeps_for_absent_members();
        self.absent_floor = floor.filter(|_| budget);
        self.apply_floor();
    }

    /// Whether the cache may grow past its usual size to keep what absent members need:
    /// only within a disk budget (`gcache.max_disk_bytes`).
    pub fn keeps_for_absent_members(&self) -> bool {
        self.store.as_ref().is_some_and(|s| s.has_disk_budget())
    }

    /// The floor below which the store may purge: the oldest seqno a pin or an absent
    /// member still needs.
    pub fn retention_floor(&self) -> Option<Seqno> {
        self.pins.values().copied().chain(self.absent_floor).min()
    }

    fn apply_floor(&mut self) {
        let floor = self.retention_floor();
        if let Some(store) = self.store.as_mut() {
            // A floor the store cannot keep only makes IST less likely to reach back.
            let _ = store.set_retention_floor(floor);
        }
    }

    /// `gcache.freeze_purge_at_seqno` at runtime.
    pub fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), String> {
        self.freeze = freeze;
        match self.store.as_mut() {
            Some(store) => store.set_freeze_purge(freeze),
            None => Ok(()),
        }
    }

    /// The effective freeze (`now` resolved to the seqno it froze at).
    pub fn freeze_purge(&self) -> FreezePurge {
        self.store
            .as_ref()
            .map_or(self.freeze, |store| store.freeze_purge())
    }

    /// The oldest seqno held, `UNDEFINED` when none (cheap: for every write-set).
    pub fn reach_from(&self) -> Seqno {
        self.store
            .as_ref()
            .and_then(|s| s.range())
            .map_or(Seqno::UNDEFINED, |(from, _)| from)
    }

    /// What the cache holds now.
    pub fn reach(&self) -> CacheReach {
        self.store.as_ref().map_or(CacheReach::EMPTY, |s| s.reach())
    }
}
