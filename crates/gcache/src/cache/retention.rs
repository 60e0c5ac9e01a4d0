//! What stays cached: purging in seqno order, the freeze, the retention floor, age, and
//! trimming overflow pages.

use super::*;

/// What retention currently protects from purging: every seqno at or above the lowest
/// bound set.
#[derive(Clone, Copy, Debug)]
pub(super) struct Protection {
    freeze: Option<Seqno>,
    floor: Option<Seqno>,
    young: Option<Seqno>,
}

impl Protection {
    pub(super) fn from(&self) -> Option<Seqno> {
        [self.freeze, self.floor, self.young]
            .into_iter()
            .flatten()
            .min()
    }

    pub(super) fn allows_purge(&self, seqno: Seqno) -> bool {
        self.from().is_none_or(|from| seqno < from)
    }

    /// The rules that protect `seqno`, for the log.
    pub(super) fn reasons(&self, seqno: Seqno) -> String {
        let mut reasons = Vec::new();
        if self.freeze.is_some_and(|f| f <= seqno) {
            reasons.push("gcache.freeze_purge_at_seqno");
        }
        if self.floor.is_some_and(|f| f <= seqno) {
            reasons.push("retention floor");
        }
        if self.young.is_some_and(|f| f <= seqno) {
            reasons.push("gcache.keep_seconds");
        }
        reasons.join(", ")
    }
}

impl Gcache {
    /// Drops the oldest cached record.
    pub(super) fn purge_one(&mut self) -> Result<(), GcacheError> {
        let entry = self.index.pop_front().expect("purging an empty cache");
        let seqno = self.first;
        self.first = seqno.next();
        match entry.loc {
            Loc::Ring => {
                let tail = self.ring_q.pop_front();
                assert_eq!(tail, Some(seqno), "ring records must be purged in order");
                if self.ring_q.is_empty() {
                    // Restarting at the front keeps the whole ring contiguous for big records.
                    self.head = FILE_HEADER_LEN;
                }
            }
            Loc::Page(id) => {
                let page = self.pages.get_mut(&id).expect("record in a known page");
                page.live -= 1;
                if page.live == 0 {
                    self.remove_page(id)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn purge_through(&mut self, seqno: Seqno) -> Result<(), GcacheError> {
        while !self.index.is_empty() && self.first <= seqno {
            self.purge_one()?;
        }
        Ok(())
    }

    /// Releases overflow pages that no retention rule needs any more, oldest first, down to
    /// `keep_pages_size`. The page holding the newest record stays: releasing it would
    /// empty the cache.
    pub(super) fn trim(&mut self) -> Result<(), GcacheError> {
        let protection = self.protection();
        let before = self.page_bytes;
        while self.page_bytes > self.config.keep_pages_size {
            let Some((&id, page)) = self.pages.first_key_value() else {
                break;
            };
            let max = page.max_seqno;
            if self.seqno_max().is_none_or(|newest| max >= newest) {
                break;
            }
            if !protection.allows_purge(max) {
                break;
            }
            self.purge_through(max)?;
            assert!(
                !self.pages.contains_key(&id),
                "purging through a page's newest seqno must release it"
            );
        }
        if self.page_bytes < before {
            tracing::info!(
                released_bytes = before - self.page_bytes,
                pages = self.pages.len(),
                disk_bytes = self.disk_bytes(),
                seqno_min = self.seqno_min().map_or(-1, |s| s.0),
                "gcache released overflow pages"
            );
        }
        Ok(())
    }

    pub(super) fn protection(&self) -> Protection {
        let keep = self.config.keep_nanos();
        let young = if keep == 0 {
            None
        } else {
            let now = self.clock;
            let old = self
                .index
                .partition_point(|e| e.timestamp.saturating_add(keep) <= now);
            (old < self.index.len()).then(|| Seqno(self.first.0 + old as i64))
        };
        Protection {
            freeze: self.freeze,
            floor: self.floor,
            young,
        }
    }

    /// Sets `gcache.freeze_purge_at_seqno`. Lifting or lowering a freeze releases the
    /// pages it was holding at once (see [`Gcache::disk_bytes`]).
    pub fn set_freeze_purge(&mut self, freeze: FreezePurge) -> Result<(), GcacheError> {
        self.freeze = match freeze {
            FreezePurge::Off => None,
            FreezePurge::At(seqno) => Some(seqno),
            FreezePurge::Now => Some(self.seqno_min().or(self.next).unwrap_or(Seqno::ZERO)),
        };
        tracing::info!(
            requested = %freeze,
            effective = %self.freeze_purge(),
            "gcache.freeze_purge_at_seqno set"
        );
        self.trim()
    }

    /// The effective freeze: `Off` or `At` (a `Now` reads back as the seqno it froze at).
    pub fn freeze_purge(&self) -> FreezePurge {
        self.freeze.map_or(FreezePurge::Off, FreezePurge::At)
    }

    /// Keeps every seqno from `floor` on (the replicator uses it for what a known-absent
    /// member will need); `None` lifts it.
    pub fn set_retention_floor(&mut self, floor: Option<Seqno>) -> Result<(), GcacheError> {
        self.floor = floor;
        self.trim()
    }

    /// The current retention floor.
    pub fn retention_floor(&self) -> Option<Seqno> {
        self.floor
    }

    /// Re-evaluates retention at `now_unix_nanos` (records age out of `keep_seconds` between
    /// appends) and releases pages nothing needs any more.
    pub fn release(&mut self, now_unix_nanos: u64) -> Result<(), GcacheError> {
        self.clock = self.clock.max(now_unix_nanos);
        self.trim()
    }

    /// Forgets everything and starts over for `history`; the next append may carry any
    /// seqno. Used when a full state transfer moves the node to another history or
    /// position. Freeze and retention floor settings are kept.
    pub fn reset(&mut self, history: Uuid) -> Result<(), GcacheError> {
        tracing::info!(
            old_history = %self.history,
            new_history = %history,
            dropped_records = self.index.len(),
            "gcache reset"
        );
        self.history = history;
        self.seed = history_seed(history);
        self.reinitialise()
    }

    /// Drops every record after `seqno`, so that the history can continue from `seqno + 1`
    /// (a restarted node whose database is behind what it had cached). If nothing is
    /// left, the next append may carry any seqno.
    pub fn truncate_after(&mut self, seqno: Seqno) -> Result<(), GcacheError> {
        // The magic erasures below must land after the gathered records, not under them.
        self.flush()?;
        let mut touched_pages = Vec::new();
        let mut dropped = 0u64;
        while self.seqno_max().is_some_and(|max| max > seqno) {
            let entry = self.index.pop_back().expect("non-empty");
            dropped += 1;
            // Erase the magic, or a restart could resurrect the dropped record.
            match entry.loc {
                Loc::Ring => {
                    self.ring
                        .write_all_at(&[0u8; 4], entry.offset)
                        .map_err(|e| GcacheError::io(&self.ring_path, e))?;
                    self.ring_q.pop_back();
                    self.head = match self.ring_q.back() {
                        Some(newest) => {
                            let e = self.entry(*newest).expect("ring record cached");
                            e.offset + aligned_len(e.len)
                        }
                        None => FILE_HEADER_LEN,
                    };
                }
                Loc::Page(id) => {
                    let page = self.pages.get_mut(&id).expect("record in a known page");
                    erase_magic(&page.path, entry.offset)?;
                    page.live -= 1;
                    if page.live == 0 {
                        self.remove_page(id)?;
                    } else {
                        touched_pages.push(id);
                    }
                }
            }
        }
        for id in touched_pages {
            if let Some(max) = self.newest_in_page(id) {
                if let Some(page) = self.pages.get_mut(&id) {
                    page.max_seqno = max;
                }
            }
        }
        if dropped > 0 && self.index.is_empty() {
            // Older purged records may still verify on disk; with nothing left to anchor
            // the run, a restart could mistake them for the newest history.
            self.reinitialise()?;
        }
        if dropped > 0 {
            self.next = self.seqno_max().map(Seqno::next);
            tracing::info!(
                after = seqno.0,
                dropped,
                "gcache dropped records past a seqno"
            );
        } else if self.index.is_empty() {
            self.next = None;
        }
        Ok(())
    }
}
