//! Where a new record goes: the ring if it has room after purging what the retention
//! rules allow, an overflow page otherwise.

use super::*;

impl Gcache {
    /// Finds room for a record of `need` bytes, purging as the rules allow; `None` if the
    /// record cannot be kept at all under `max_disk_bytes` (the cache is then empty).
    pub(super) fn place(
        &mut self,
        seqno: Seqno,
        need: u64,
    ) -> Result<Option<(Loc, u64)>, GcacheError> {
        let fits_ring = need <= self.ring_end - FILE_HEADER_LEN;
        let protection = self.protection();
        if fits_ring {
            loop {
                if let Some(offset) = self.ring_slot(need) {
                    return Ok(Some((Loc::Ring, offset)));
                }
                let tail = *self
                    .ring_q
                    .front()
                    .expect("an empty ring has room for any record that fits in it");
                if !protection.allows_purge(tail) {
                    break;
                }
                self.purge_through(tail)?;
            }
        }
        if let Some(slot) = self.page_slot(need)? {
            return Ok(Some(slot));
        }

        // Only the disk ceiling can get us here: give up the oldest records, protected or
        // not, until the new one fits in the ring or in a page.
        let mut given_up: Option<(Seqno, Seqno, String)> = None;
        let placed = loop {
            if self.index.is_empty() {
                break None;
            }
            let oldest = self.first;
            if !protection.allows_purge(oldest) {
                self.protected_dropped += 1;
                let reasons = protection.reasons(oldest);
                given_up = Some(match given_up {
                    Some((from, _, why)) => (from, oldest, why),
                    None => (oldest, oldest, reasons),
                });
            }
            self.purge_one()?;
            if fits_ring {
                if let Some(offset) = self.ring_slot(need) {
                    break Some((Loc::Ring, offset));
                }
            }
            if let Some(slot) = self.page_slot(need)? {
                break Some(slot);
            }
        };
        if let Some((from, to, reasons)) = given_up {
            tracing::warn!(
                from = from.0,
                to = to.0,
                max_disk_bytes = self.config.max_disk_bytes,
                protected_by = %reasons,
                "gcache gave up protected seqnos {from}..={to}: keeping them would exceed \
                 gcache.max_disk_bytes ({} bytes) for seqno {seqno}",
                self.config.max_disk_bytes
            );
        }
        if placed.is_none() {
            tracing::warn!(
                seqno = seqno.0,
                bytes = need,
                max_disk_bytes = self.config.max_disk_bytes,
                "gcache cannot hold seqno {seqno} ({need} bytes) within gcache.max_disk_bytes; \
                 it is not cached and the cache is now empty"
            );
        }
        Ok(placed)
    }

    /// The ring offset a record of `need` bytes would take without purging anything.
    pub(super) fn ring_slot(&self, need: u64) -> Option<u64> {
        let start = FILE_HEADER_LEN;
        let Some(tail) = self.ring_tail() else {
            return (need <= self.ring_end - start).then_some(start);
        };
        if self.head > tail {
            // Live bytes are [tail, head): free space at the end, then before the tail.
            if self.ring_end - self.head >= need {
                Some(self.head)
            } else if tail - start >= need {
                Some(start)
            } else {
                None
            }
        } else if tail - self.head >= need {
            // Wrapped: the only free space lies between head and tail.
            Some(self.head)
        } else {
            None
        }
    }

    pub(super) fn ring_tail(&self) -> Option<u64> {
        self.ring_q
            .front()
            .map(|seqno| self.entry(*seqno).expect("ring record cached").offset)
    }

    /// The page offset a record of `need` bytes would take: the current page if it has
    /// room, else a new page if the ceiling allows one.
    pub(super) fn page_slot(&mut self, need: u64) -> Result<Option<(Loc, u64)>, GcacheError> {
        if let Some(id) = self.current_page {
            let page = &self.pages[&id];
            if page.size - page.used >= need {
                return Ok(Some((Loc::Page(id), page.used)));
            }
        }
        let want = FILE_HEADER_LEN + need;
        let size = if self.config.max_disk_bytes == 0 {
            want.max(self.config.page_size)
        } else {
            let headroom = self.config.max_disk_bytes.saturating_sub(self.disk_bytes());
            if want > headroom {
                return Ok(None);
            }
            want.max(self.config.page_size.min(headroom))
        };
        let id = self.create_page(size)?;
        Ok(Some((Loc::Page(id), FILE_HEADER_LEN)))
    }

    pub(super) fn create_page(&mut self, size: u64) -> Result<u64, GcacheError> {
        let id = self.next_page_id;
        let path = self.config.dir.join(format!("{PAGE_FILE_PREFIX}{id:06}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| GcacheError::io(&path, e))?;
        let header = FileHeader {
            history: self.history,
            file_size: size,
            page_id: id,
        };
        let prepared = file
            .set_len(size)
            .and_then(|()| file.write_all_at(&header.encode(PAGE_MAGIC), 0));
        if let Err(e) = prepared {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(GcacheError::io(&path, e));
        }
        self.next_page_id += 1;
        if let Some(previous) = self.current_page.and_then(|id| self.pages.get_mut(&id)) {
            previous.writer = None;
        }
        tracing::debug!(page = %path.display(), size, "gcache opened an overflow page");
        self.pages.insert(
            id,
            Page {
                path,
                size,
                used: FILE_HEADER_LEN,
                live: 0,
                max_seqno: Seqno::UNDEFINED,
                writer: Some(file),
            },
        );
        self.page_bytes += size;
        self.current_page = Some(id);
        Ok(id)
    }

    pub(super) fn remove_page(&mut self, id: u64) -> Result<(), GcacheError> {
        let page = self.pages.remove(&id).expect("removing a known page");
        self.page_bytes -= page.size;
        if self.current_page == Some(id) {
            self.current_page = None;
        }
        drop(page.writer);
        tracing::debug!(page = %page.path.display(), "gcache deleted an overflow page");
        recovery::remove_file(&page.path)
    }
}
