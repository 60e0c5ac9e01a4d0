//! The node's write-set cache on disk: the engine's [`ActionStore`] over [`gcache::Gcache`]
//! (a preallocated ring file and overflow pages, checksummed, recovered after a restart).
//! What is kept and for whom is the engine's [`ActionCache`].

use std::time::{SystemTime, UNIX_EPOCH};

use base::{FreezePurge, Seqno, Uuid};
use engine::{ActionCache, ActionStore, CacheReach};
use gcache::{Gcache, GcacheConfig};

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The gcache as the engine's store.
struct GcacheStore(Gcache);

impl ActionStore for GcacheStore {
    fn history(&self) -> Uuid {
        self.0.history()
    }

    fn range(&self) -> Option<(Seqno, Seqno)> {
        Some((self.0.seqno_min()?, self.0.seqno_max()?))
    }

    fn contains_range(&self, from: Seqno, to: Seqno) -> bool {
        self.0.contains_range(from, to)
    }

    fn reset(&mut self, history: Uuid) -> Result<(), String> {
        self.0.reset(history).map_err(|e| e.to_string())
    }

    fn truncate_after(&mut self, last: Seqno) -> Result<(), String> {
        self.0.truncate_after(last).map_err(|e| e.to_string())
    }

    fn append(&mut self, seqno: Seqno, kind: u8, body: &[u8]) -> Result<(), String> {
        self.0
            .append(seqno, kind, body, unix_nanos())
            .map_err(|e| e.to_string())
    }

    fn append_split(
        &mut self,
        seqno: Seqno,
        kind: u8,
        head: &[u8],
        rest: &[u8],
    ) -> Result<(), String> {
        self.0
            .append_split(seqno, kind, [head, rest], unix_nanos())
            .map_err(|e| e.to_string())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.0.flush().map_err(|e| e.to_string())
    }

    fn get(&self, seqno: Seqno) -> Result<Option<(u8, Vec<u8>)>, String> {
        let record = self.0.get(seqno).map_err(|e| e.to_string())?;
        Ok(record.map(|r| (r.kind, r.payload)))
    }

    fn set_retention_floor(&mut self, floor: Option<Seqno>) -> Result<(), String> {
        self.0.set_retention_floor(floor).map_err(|error| {
            tracing::warn!(%error, "gcache: cannot apply the IST retention floor");
            error.to_string()
        })
    }

    fn has_disk_budget(&self) -> bool {
        self.0.config().max_disk_bytes > 0
    }

    fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), String> {
        self.0.set_freeze_purge(freeze).map_err(|e| e.to_string())
    }

    fn freeze_purge(&self) -> FreezePurge {
        self.0.freeze_purge()
    }

    fn reach(&self) -> CacheReach {
        let seconds = self
            .0
            .oldest_timestamp()
            .map_or(0.0, |t| unix_nanos().saturating_sub(t) as f64 / 1e9);
        CacheReach {
            from: self.0.seqno_min().unwrap_or(Seqno::UNDEFINED),
            to: self.0.seqno_max().unwrap_or(Seqno::UNDEFINED),
            seconds,
            disk_bytes: self.0.disk_bytes(),
        }
    }
}

/// Opens (and recovers) the cache for `history`; on failure the node runs without one and
/// says why (`log`): it can still join and serve SST, only not IST.
pub(crate) fn open(config: &GcacheConfig, history: Uuid, log: impl Fn(String)) -> ActionCache {
    match Gcache::open(config.clone(), history) {
        Ok(gcache) => {
            if let (Some(from), Some(to)) = (gcache.seqno_min(), gcache.seqno_max()) {
                log(format!(
                    "gcache {} holds seqnos {from}..={to} of history {history}",
                    config.ring_path().display()
                ));
            }
            ActionCache::over(Box::new(GcacheStore(gcache)))
        }
        Err(error) => {
            log(format!(
                "cannot open gcache {}: {error}; this node will not serve IST",
                config.ring_path().display()
            ));
            ActionCache::disabled()
        }
    }
}
