//! The node's write-set cache: every ordered action, with the verdict the cluster gave it, so
//! that this node can serve IST. A thin layer over [`gcache::Gcache`] that knows the
//! replicator's record body ([`crate::ist::Action::cache_body`]), restarts the cache when the
//! order jumps (after a snapshot transfer, or in a new history), and pins what running
//! transfers still read.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base::{Seqno, Uuid};
use gcache::{FreezePurge, Gcache, GcacheConfig, GcacheError};

use crate::ist::{Action, ActionKind};

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

/// The cache and the transfers reading from it.
pub(crate) struct ActionCache {
    gcache: Option<Gcache>,
    /// Transfer id -> the oldest seqno it still has to send.
    pins: BTreeMap<u64, Seqno>,
    next_pin: u64,
    /// The freeze asked for, kept while no cache is open.
    freeze: FreezePurge,
    /// What members absent from the last primary view need to rejoin by IST; kept only
    /// within `gcache.max_disk_bytes` (without that budget, nothing is kept for them).
    absent_floor: Option<Seqno>,
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl ActionCache {
    /// A node that keeps no cache (tests, or a cache that could not be opened).
    pub(crate) fn disabled() -> ActionCache {
        ActionCache {
            gcache: None,
            pins: BTreeMap::new(),
            next_pin: 0,
            freeze: FreezePurge::Off,
            absent_floor: None,
        }
    }

    /// Opens (and recovers) the cache for `history`; on failure the node runs without one
    /// and says why: it can still join and serve SST, only not IST.
    pub(crate) fn open(config: &GcacheConfig, history: Uuid, log: impl Fn(String)) -> ActionCache {
        let gcache = match Gcache::open(config.clone(), history) {
            Ok(gcache) => {
                if let (Some(from), Some(to)) = (gcache.seqno_min(), gcache.seqno_max()) {
                    log(format!(
                        "gcache {} holds seqnos {from}..={to} of history {history}",
                        config.ring_path().display()
                    ));
                }
                Some(gcache)
            }
            Err(error) => {
                log(format!(
                    "cannot open gcache {}: {error}; this node will not serve IST",
                    config.ring_path().display()
                ));
                None
            }
        };
        ActionCache {
            gcache,
            pins: BTreeMap::new(),
            next_pin: 0,
            freeze: FreezePurge::Off,
            absent_floor: None,
        }
    }

    /// Stores the action ordered at `seqno` in history `cluster`. An action that does not
    /// continue the cached run (a snapshot moved the node forward, or the history changed)
    /// starts the cache over: a cache never has gaps.
    pub(crate) fn record(
        &mut self,
        cluster: Uuid,
        seqno: Seqno,
        kind: ActionKind,
        depends_on: i64,
        payload: &[u8],
    ) -> Result<(), GcacheError> {
        let Some(gcache) = self.gcache.as_mut() else {
            return Ok(());
        };
        let body = Action::cache_body(depends_on, payload);
        let continues =
            gcache.history() == cluster && gcache.seqno_max().is_none_or(|max| max.next() == seqno);
        if !continues {
            gcache.reset(cluster)?;
        }
        gcache.append(seqno, kind as u8, &body, unix_nanos())
    }

    /// Whether every seqno of `from..=to` is cached in history `cluster`.
    pub(crate) fn holds(&self, cluster: Uuid, from: Seqno, to: Seqno) -> bool {
        self.gcache
            .as_ref()
            .is_some_and(|g| g.history() == cluster && (from > to || g.contains_range(from, to)))
    }

    /// What is cached, as text for log lines.
    pub(crate) fn describe(&self) -> String {
        match &self.gcache {
            None => "no gcache".to_owned(),
            Some(g) => match (g.seqno_min(), g.seqno_max()) {
                (Some(from), Some(to)) => format!("seqnos {from}..={to} of {}", g.history()),
                _ => "nothing".to_owned(),
            },
        }
    }

    /// Reads one cached action.
    pub(crate) fn read(&self, seqno: Seqno) -> Result<Action, String> {
        let gcache = self.gcache.as_ref().ok_or("no gcache")?;
        let record = gcache
            .get(seqno)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("seqno {seqno} is no longer cached"))?;
        Action::from_cache(seqno, record.kind, record.payload).map_err(|e| e.to_string())
    }

    /// Keeps `from` and everything after it until [`ActionCache::unpin`].
    pub(crate) fn pin(&mut self, from: Seqno) -> u64 {
        self.next_pin += 1;
        self.pins.insert(self.next_pin, from);
        self.apply_pins();
        self.next_pin
    }

    /// Ends a pin (the transfer finished or failed).
    pub(crate) fn unpin(&mut self, pin: u64) {
        self.pins.remove(&pin);
        self.apply_pins();
    }

    /// Moves a pin forward as its transfer sends.
    pub(crate) fn advance_pin(&mut self, pin: u64, from: Seqno) {
        if let Some(at) = self.pins.get_mut(&pin) {
            *at = from;
        }
        self.apply_pins();
    }

    /// Keeps `floor` and after for members that left the view (`None`: nobody is absent).
    /// Only with a disk budget: an absent member that never returns must not fill the disk.
    pub(crate) fn set_absent_floor(&mut self, floor: Option<Seqno>) {
        let budget = self.keeps_for_absent_members();
        self.absent_floor = floor.filter(|_| budget);
        self.apply_pins();
    }

    /// Whether the cache may grow past `gcache.size` to keep what absent members need: only
    /// within a disk budget (`gcache.max_disk_bytes`).
    pub(crate) fn keeps_for_absent_members(&self) -> bool {
        self.gcache
            .as_ref()
            .is_some_and(|g| g.config().max_disk_bytes > 0)
    }

    fn apply_pins(&mut self) {
        let floor = self.pins.values().copied().chain(self.absent_floor).min();
        if let Some(gcache) = self.gcache.as_mut() {
            if let Err(error) = gcache.set_retention_floor(floor) {
                tracing::warn!(%error, "gcache: cannot apply the IST retention floor");
            }
        }
    }

    /// `gcache.freeze_purge_at_seqno` at runtime.
    pub(crate) fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), GcacheError> {
        self.freeze = freeze;
        match self.gcache.as_mut() {
            Some(gcache) => gcache.set_freeze_purge(freeze),
            None => Ok(()),
        }
    }

    /// The effective freeze (`now` resolved to the seqno it froze at).
    pub(crate) fn freeze_purge(&self) -> FreezePurge {
        self.gcache
            .as_ref()
            .map_or(self.freeze, |gcache| gcache.freeze_purge())
    }

    /// The oldest seqno held, `UNDEFINED` when none (cheap: for every write-set).
    pub(crate) fn reach_from(&self) -> Seqno {
        self.gcache
            .as_ref()
            .and_then(Gcache::seqno_min)
            .unwrap_or(Seqno::UNDEFINED)
    }

    /// What the cache holds now.
    pub(crate) fn reach(&self) -> CacheReach {
        let Some(gcache) = self.gcache.as_ref() else {
            return CacheReach {
                from: Seqno::UNDEFINED,
                to: Seqno::UNDEFINED,
                seconds: 0.0,
                disk_bytes: 0,
            };
        };
        let seconds = gcache
            .oldest_timestamp()
            .map_or(0.0, |t| unix_nanos().saturating_sub(t) as f64 / 1e9);
        CacheReach {
            from: gcache.seqno_min().unwrap_or(Seqno::UNDEFINED),
            to: gcache.seqno_max().unwrap_or(Seqno::UNDEFINED),
            seconds,
            disk_bytes: gcache.disk_bytes(),
        }
    }
}
