//! The cache itself: placement, purging, retention, reads.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use base::{Seqno, Uuid};

use crate::config::{GcacheConfig, PAGE_FILE_PREFIX};
use crate::format::{
    aligned_len, encode_record_header, history_seed, record_crc, FileHeader, RecordHeader,
    FILE_HEADER_LEN, PAGE_MAGIC, RECORD_ALIGN, RECORD_HEADER_LEN, RING_MAGIC,
};
use crate::recovery::{self, RingSource};

/// Payloads up to this size are copied behind their header and written in one call; larger
/// ones are written in place after it.
const SCRATCH_RECORD_MAX: usize = 64 << 10;
use crate::GcacheError;

pub use base::FreezePurge;

/// One cached action, as read back (checksum verified).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its position in the history.
    pub seqno: Seqno,
    /// The caller's tag (write-set, view, ...), stored as given.
    pub kind: u8,
    /// The bytes as appended.
    pub payload: Vec<u8>,
    /// Unix-epoch nanoseconds when it was appended (never below its predecessor's).
    pub timestamp: u64,
}

/// A snapshot of the cache's extent and disk use, for status variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcacheStatus {
    /// Oldest cached seqno (`wsrep_local_cached_downto`), `None` when empty.
    pub seqno_min: Option<Seqno>,
    /// Newest cached seqno, `None` when empty.
    pub seqno_max: Option<Seqno>,
    /// Number of cached records.
    pub records: u64,
    /// Timestamp (unix nanos) of the oldest cached record: how far back IST reaches in time.
    pub oldest_timestamp: Option<u64>,
    /// Timestamp (unix nanos) of the newest cached record.
    pub newest_timestamp: Option<u64>,
    /// Size of the ring file (`gcache.size`).
    pub ring_size: u64,
    /// Ring bytes between the oldest and the newest ring record, waste at the wrap included.
    pub ring_bytes_used: u64,
    /// Overflow pages on disk.
    pub page_count: u64,
    /// Bytes of overflow pages on disk.
    pub page_bytes: u64,
    /// Ring plus pages.
    pub disk_bytes: u64,
    /// The effective freeze (`gcache.freeze_purge_at_seqno`).
    pub freeze_purge: FreezePurge,
    /// The replicator's retention floor.
    pub retention_floor: Option<Seqno>,
    /// Protected records given up since open because `gcache.max_disk_bytes` left no room.
    pub protected_dropped: u64,
}

/// Where a record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    Ring,
    Page(u64),
}

/// The index entry of one cached seqno (the seqno itself is implied by the position).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) loc: Loc,
    pub(crate) offset: u64,
    pub(crate) len: u32,
    pub(crate) timestamp: u64,
}

/// An overflow page file.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) path: PathBuf,
    /// Length of the file on disk.
    pub(crate) size: u64,
    /// Offset where the next record would go.
    pub(crate) used: u64,
    /// Cached records in this page; the page is deleted when it reaches zero.
    pub(crate) live: usize,
    /// The newest cached seqno in this page.
    pub(crate) max_seqno: Seqno,
    /// Open only for the page currently receiving records.
    pub(crate) writer: Option<File>,
}

/// What retention currently protects from purging: every seqno at or above the lowest
/// bound set.
#[derive(Clone, Copy, Debug)]
struct Protection {
    freeze: Option<Seqno>,
    floor: Option<Seqno>,
    young: Option<Seqno>,
}

impl Protection {
    fn from(&self) -> Option<Seqno> {
        [self.freeze, self.floor, self.young]
            .into_iter()
            .flatten()
            .min()
    }

    fn allows_purge(&self, seqno: Seqno) -> bool {
        self.from().is_none_or(|from| seqno < from)
    }

    /// The rules that protect `seqno`, for the log.
    fn reasons(&self, seqno: Seqno) -> String {
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

/// The write-set cache. See the crate documentation for the format and the rules.
pub struct Gcache {
    config: GcacheConfig,
    history: Uuid,
    seed: u32,
    ring_path: PathBuf,
    ring: File,
    /// End of the usable ring region (the file size rounded down to the record alignment).
    ring_end: u64,
    /// Where the next ring record goes if it fits there.
    head: u64,
    /// Seqnos of the ring-resident records, oldest first; the front one is the ring's tail.
    ring_q: VecDeque<Seqno>,
    /// One entry per cached seqno, `first` upwards.
    index: VecDeque<Entry>,
    first: Seqno,
    /// The only seqno the next append may carry; `None` lets it start anywhere.
    next: Option<Seqno>,
    pages: BTreeMap<u64, Page>,
    page_bytes: u64,
    current_page: Option<u64>,
    next_page_id: u64,
    freeze: Option<Seqno>,
    floor: Option<Seqno>,
    /// The latest time a caller gave us (unix nanos); retention by age is judged against it.
    clock: u64,
    last_timestamp: u64,
    protected_dropped: u64,
    /// Reused encoding buffer so that an append allocates nothing in the steady state.
    scratch: Vec<u8>,
}

impl fmt::Debug for Gcache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gcache")
            .field("ring", &self.ring_path)
            .field("history", &self.history)
            .field("status", &self.status())
            .finish()
    }
}

impl Gcache {
    /// Opens (creating if needed) the cache in `config.dir` for the given history.
    ///
    /// With `config.recover`, records of the same history are recovered from the files;
    /// anything unusable (another history, another ring size, a damaged header) is discarded
    /// with a log line, never reported as an error. I/O failures are errors.
    pub fn open(config: GcacheConfig, history: Uuid) -> Result<Gcache, GcacheError> {
        config.validate()?;
        fs::create_dir_all(&config.dir).map_err(|e| GcacheError::io(&config.dir, e))?;
        let ring_path = config.ring_path();
        let ring = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&ring_path)
            .map_err(|e| GcacheError::io(&ring_path, e))?;
        let ring_len = ring
            .metadata()
            .map_err(|e| GcacheError::io(&ring_path, e))?
            .len();
        let ring_end = config.size / RECORD_ALIGN * RECORD_ALIGN;
        let mut cache = Gcache {
            history,
            seed: history_seed(history),
            ring_path,
            ring,
            ring_end,
            head: FILE_HEADER_LEN,
            ring_q: VecDeque::new(),
            index: VecDeque::new(),
            first: Seqno::UNDEFINED,
            next: None,
            pages: BTreeMap::new(),
            page_bytes: 0,
            current_page: None,
            next_page_id: 0,
            freeze: None,
            floor: None,
            clock: 0,
            last_timestamp: 0,
            protected_dropped: 0,
            scratch: Vec::new(),
            config,
        };
        let path = cache.ring_path.display().to_string();
        let usable = if !cache.config.recover {
            tracing::info!(path, "gcache.recover is off: starting with an empty cache");
            false
        } else if ring_len == 0 {
            tracing::info!(path, size = cache.config.size, "creating gcache ring file");
            false
        } else {
            match cache.read_ring_header(ring_len) {
                Err(reason) => {
                    tracing::warn!(
                        path,
                        %reason,
                        "gcache ring file header is unusable; discarding the cache"
                    );
                    false
                }
                Ok(header) if header.history != history => {
                    tracing::info!(
                        path,
                        cached = %header.history,
                        current = %history,
                        "gcache holds another history; discarding it"
                    );
                    false
                }
                Ok(header) if header.file_size != cache.config.size => {
                    tracing::info!(
                        path,
                        old_size = header.file_size,
                        new_size = cache.config.size,
                        "gcache.size changed; discarding the cache"
                    );
                    false
                }
                Ok(_) => true,
            }
        };
        if usable {
            if ring_len < cache.config.size {
                tracing::warn!(
                    path,
                    file_len = ring_len,
                    size = cache.config.size,
                    "gcache ring file is shorter than its header says (truncated?); \
                     recovering what is left"
                );
            }
            cache.recover(ring_len)?;
        } else {
            cache.reinitialise()?;
        }
        Ok(cache)
    }

    fn read_ring_header(&self, ring_len: u64) -> Result<FileHeader, String> {
        let mut bytes = vec![0u8; FILE_HEADER_LEN.min(ring_len) as usize];
        self.ring
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| format!("cannot read header: {e}"))?;
        FileHeader::decode(&bytes, RING_MAGIC)
    }

    fn recover(&mut self, ring_len: u64) -> Result<(), GcacheError> {
        let recovered = recovery::recover(
            RingSource {
                file: &self.ring,
                path: &self.ring_path,
                scan_end: ring_len.min(self.ring_end),
                ring_end: self.ring_end,
            },
            &self.config.dir,
            self.history,
            self.seed,
        )?;
        if ring_len != self.config.size {
            self.ring
                .set_len(self.config.size)
                .map_err(|e| GcacheError::io(&self.ring_path, e))?;
        }
        self.first = recovered.first;
        self.index = recovered.index;
        self.ring_q = recovered.ring_q;
        self.head = recovered.head;
        self.page_bytes = recovered.pages.values().map(|p| p.size).sum();
        self.pages = recovered.pages;
        self.next_page_id = recovered.next_page_id;
        self.next = self.seqno_max().map(Seqno::next);
        self.last_timestamp = self.index.back().map_or(0, |e| e.timestamp);
        self.clock = self.last_timestamp;
        self.check_invariants();
        Ok(())
    }

    /// Deletes every page file and the ring's contents, and writes a fresh header.
    ///
    /// Pages go first: if this is interrupted, what remains is still a consistent old
    /// cache. Truncating the ring to zero before restoring its length is what makes the
    /// stale records unrecoverable, without writing the whole file.
    fn reinitialise(&mut self) -> Result<(), GcacheError> {
        for page in self.pages.values_mut() {
            page.writer = None;
        }
        for (_, path) in recovery::list_pages(&self.config.dir)? {
            recovery::remove_file(&path)?;
        }
        self.pages.clear();
        self.page_bytes = 0;
        self.current_page = None;
        let io_err = |e| GcacheError::io(&self.ring_path, e);
        self.ring.set_len(0).map_err(io_err)?;
        self.ring.set_len(self.config.size).map_err(io_err)?;
        let header = FileHeader {
            history: self.history,
            file_size: self.config.size,
            page_id: 0,
        };
        self.ring
            .write_all_at(&header.encode(RING_MAGIC), 0)
            .map_err(io_err)?;
        self.index.clear();
        self.ring_q.clear();
        self.head = FILE_HEADER_LEN;
        self.first = Seqno::UNDEFINED;
        self.next = None;
        Ok(())
    }

    /// The settings the cache was opened with.
    pub fn config(&self) -> &GcacheConfig {
        &self.config
    }

    /// The history (cluster state UUID) the cached seqnos belong to.
    pub fn history(&self) -> Uuid {
        self.history
    }

    /// Appends the action ordered at `seqno`.
    ///
    /// `seqno` must follow the newest cached one (or any seqno after open with nothing to
    /// recover, [`Gcache::reset`] or [`Gcache::truncate_after`] emptied the cache).
    /// `now_unix_nanos` is the wall-clock time; it timestamps the record and drives
    /// `keep_seconds`. Costs one positional write and no fsync; older records are purged
    /// as the space is needed, except what retention protects, which spills to pages.
    ///
    /// If even an empty cache cannot hold the record within `max_disk_bytes`, the cache
    /// ends up empty (with a warning) and the next append must still be `seqno + 1`.
    pub fn append(
        &mut self,
        seqno: Seqno,
        kind: u8,
        payload: &[u8],
        now_unix_nanos: u64,
    ) -> Result<(), GcacheError> {
        // i64::MAX is refused too: the seqno after it would not exist.
        if !seqno.is_defined() || seqno.0 == i64::MAX {
            return Err(GcacheError::InvalidSeqno(seqno));
        }
        if let Some(expected) = self.next {
            if seqno != expected {
                return Err(GcacheError::Gap {
                    expected,
                    got: seqno,
                });
            }
        }
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|len| *len <= u32::MAX - RECORD_HEADER_LEN as u32 - RECORD_ALIGN as u32)
            .ok_or(GcacheError::PayloadTooLarge { len: payload.len() })?;
        self.clock = self.clock.max(now_unix_nanos);
        // Non-decreasing timestamps keep the index sorted by age even across clock steps.
        let timestamp = now_unix_nanos.max(self.last_timestamp);
        let need = aligned_len(len);

        let Some((loc, offset)) = self.place(seqno, need)? else {
            // Stale records below the hole must not come back after a restart as if the
            // history ended before `seqno`: wipe them (the cache is empty anyway).
            self.reinitialise()?;
            self.next = Some(seqno.next());
            return Ok(());
        };

        // A small record goes out in one write from the scratch buffer; a large one as its
        // header and then the payload in place, so that it is not copied into (and does not
        // leave) a buffer as large as itself.
        let separate_payload = payload.len() > SCRATCH_RECORD_MAX;
        self.scratch.clear();
        encode_record_header(
            &mut self.scratch,
            self.seed,
            seqno,
            kind,
            timestamp,
            payload,
        );
        if !separate_payload {
            self.scratch.extend_from_slice(payload);
        }
        let (file, path) = match loc {
            Loc::Ring => (&self.ring, &self.ring_path),
            Loc::Page(id) => {
                let page = &self.pages[&id];
                let writer = page
                    .writer
                    .as_ref()
                    .expect("only the current page gets records");
                (writer, &page.path)
            }
        };
        let mut written = file.write_all_at(&self.scratch, offset);
        if separate_payload && written.is_ok() {
            written = file.write_all_at(payload, offset + self.scratch.len() as u64);
        }
        let written = written.map_err(|e| GcacheError::io(path, e));
        if let Err(e) = written {
            if let Loc::Page(id) = loc {
                if self.pages[&id].live == 0 {
                    // A page created for this record and nothing else: do not leak it.
                    let _ = self.remove_page(id);
                }
            }
            return Err(e);
        }

        match loc {
            Loc::Ring => {
                self.head = offset + need;
                self.ring_q.push_back(seqno);
            }
            Loc::Page(id) => {
                let page = self.pages.get_mut(&id).expect("page just chosen");
                page.used = offset + need;
                page.live += 1;
                page.max_seqno = seqno;
            }
        }
        if self.index.is_empty() {
            self.first = seqno;
        }
        assert_eq!(
            Seqno(self.first.0 + self.index.len() as i64),
            seqno,
            "gcache index must stay consecutive"
        );
        self.index.push_back(Entry {
            loc,
            offset,
            len,
            timestamp,
        });
        self.next = Some(seqno.next());
        self.last_timestamp = timestamp;
        self.trim()
    }

    /// Finds room for a record of `need` bytes, purging as the rules allow; `None` if the
    /// record cannot be kept at all under `max_disk_bytes` (the cache is then empty).
    fn place(&mut self, seqno: Seqno, need: u64) -> Result<Option<(Loc, u64)>, GcacheError> {
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
    fn ring_slot(&self, need: u64) -> Option<u64> {
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

    fn ring_tail(&self) -> Option<u64> {
        self.ring_q
            .front()
            .map(|seqno| self.entry(*seqno).expect("ring record cached").offset)
    }

    /// The page offset a record of `need` bytes would take: the current page if it has
    /// room, else a new page if the ceiling allows one.
    fn page_slot(&mut self, need: u64) -> Result<Option<(Loc, u64)>, GcacheError> {
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

    fn create_page(&mut self, size: u64) -> Result<u64, GcacheError> {
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

    fn remove_page(&mut self, id: u64) -> Result<(), GcacheError> {
        let page = self.pages.remove(&id).expect("removing a known page");
        self.page_bytes -= page.size;
        if self.current_page == Some(id) {
            self.current_page = None;
        }
        drop(page.writer);
        tracing::debug!(page = %page.path.display(), "gcache deleted an overflow page");
        recovery::remove_file(&page.path)
    }

    /// Drops the oldest cached record.
    fn purge_one(&mut self) -> Result<(), GcacheError> {
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

    fn purge_through(&mut self, seqno: Seqno) -> Result<(), GcacheError> {
        while !self.index.is_empty() && self.first <= seqno {
            self.purge_one()?;
        }
        Ok(())
    }

    /// Releases overflow pages that no retention rule needs any more, oldest first, down to
    /// `keep_pages_size`. The page holding the newest record stays: releasing it would
    /// empty the cache.
    fn trim(&mut self) -> Result<(), GcacheError> {
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

    fn protection(&self) -> Protection {
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

    fn newest_in_page(&self, id: u64) -> Option<Seqno> {
        let position = self.index.iter().rposition(|e| e.loc == Loc::Page(id))?;
        Some(Seqno(self.first.0 + position as i64))
    }

    fn entry(&self, seqno: Seqno) -> Option<&Entry> {
        if self.index.is_empty() || seqno < self.first {
            return None;
        }
        usize::try_from(seqno.0 - self.first.0)
            .ok()
            .and_then(|i| self.index.get(i))
    }

    /// Oldest cached seqno (`wsrep_local_cached_downto`).
    pub fn seqno_min(&self) -> Option<Seqno> {
        (!self.index.is_empty()).then_some(self.first)
    }

    /// Newest cached seqno.
    pub fn seqno_max(&self) -> Option<Seqno> {
        (!self.index.is_empty()).then(|| Seqno(self.first.0 + self.index.len() as i64 - 1))
    }

    /// The seqno the next append must carry, if constrained.
    pub fn next_seqno(&self) -> Option<Seqno> {
        self.next
    }

    /// Number of cached records.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Timestamp (unix nanos) of the oldest cached record.
    pub fn oldest_timestamp(&self) -> Option<u64> {
        self.index.front().map(|e| e.timestamp)
    }

    /// True if every seqno in `from..=to` is cached (an IST donor's question).
    pub fn contains_range(&self, from: Seqno, to: Seqno) -> bool {
        match (self.seqno_min(), self.seqno_max()) {
            (Some(min), Some(max)) => from <= to && min <= from && to <= max,
            _ => false,
        }
    }

    /// Ring file plus page files, in bytes (their full preallocated lengths).
    pub fn disk_bytes(&self) -> u64 {
        self.config.size + self.page_bytes
    }

    /// A snapshot for status variables.
    pub fn status(&self) -> GcacheStatus {
        let ring_bytes_used = match self.ring_tail() {
            None => 0,
            Some(tail) if self.head > tail => self.head - tail,
            Some(tail) => (self.ring_end - tail) + (self.head - FILE_HEADER_LEN),
        };
        GcacheStatus {
            seqno_min: self.seqno_min(),
            seqno_max: self.seqno_max(),
            records: self.index.len() as u64,
            oldest_timestamp: self.oldest_timestamp(),
            newest_timestamp: self.index.back().map(|e| e.timestamp),
            ring_size: self.config.size,
            ring_bytes_used,
            page_count: self.pages.len() as u64,
            page_bytes: self.page_bytes,
            disk_bytes: self.disk_bytes(),
            freeze_purge: self.freeze_purge(),
            retention_floor: self.floor,
            protected_dropped: self.protected_dropped,
        }
    }

    /// Reads one record, verifying its checksum; `None` if it is not cached.
    pub fn get(&self, seqno: Seqno) -> Result<Option<Record>, GcacheError> {
        let Some(entry) = self.entry(seqno) else {
            return Ok(None);
        };
        match entry.loc {
            Loc::Ring => read_record(&self.ring, &self.ring_path, self.seed, seqno, entry),
            Loc::Page(id) => {
                let path = &self.pages[&id].path;
                let file = File::open(path).map_err(|e| GcacheError::io(path, e))?;
                read_record(&file, path, self.seed, seqno, entry)
            }
        }
        .map(Some)
    }

    /// Reads `from..=to` one record at a time, each verified on read. Fails at once if the
    /// range is not fully cached; the iterator stops after the first error it yields.
    pub fn read_range(&self, from: Seqno, to: Seqno) -> Result<RangeReader<'_>, GcacheError> {
        if !self.contains_range(from, to) {
            let held = match (self.seqno_min(), self.seqno_max()) {
                (Some(min), Some(max)) => format!("{min}..={max}"),
                _ => "nothing".to_owned(),
            };
            return Err(GcacheError::NotCached { from, to, held });
        }
        Ok(RangeReader {
            cache: self,
            next: from,
            to,
            page: None,
            failed: false,
        })
    }

    /// Checks the structural invariants; cheap enough to run after recovery.
    fn check_invariants(&self) {
        assert!(self
            .ring_q
            .iter()
            .all(|s| self.entry(*s).is_some_and(|e| e.loc == Loc::Ring)));
        assert_eq!(
            self.ring_q.len(),
            self.index.iter().filter(|e| e.loc == Loc::Ring).count()
        );
        let mut seen: BTreeMap<u64, (usize, Seqno)> = BTreeMap::new();
        for (i, e) in self.index.iter().enumerate() {
            if let Loc::Page(id) = e.loc {
                let slot = seen.entry(id).or_insert((0, Seqno::UNDEFINED));
                slot.0 += 1;
                slot.1 = Seqno(self.first.0 + i as i64);
            }
        }
        assert_eq!(seen.len(), self.pages.len(), "every page holds records");
        for (id, page) in &self.pages {
            assert_eq!(
                seen.get(id),
                Some(&(page.live, page.max_seqno)),
                "page {id}"
            );
        }
        if self.ring_q.is_empty() {
            assert_eq!(self.head, FILE_HEADER_LEN);
        }
    }
}

/// Streams a cached range; see [`Gcache::read_range`].
pub struct RangeReader<'a> {
    cache: &'a Gcache,
    next: Seqno,
    to: Seqno,
    /// The last page file opened, reused while consecutive records come from it.
    page: Option<(u64, File)>,
    failed: bool,
}

impl fmt::Debug for RangeReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeReader")
            .field("next", &self.next)
            .field("to", &self.to)
            .finish()
    }
}

impl RangeReader<'_> {
    fn read(&mut self, seqno: Seqno) -> Result<Record, GcacheError> {
        let cache = self.cache;
        let entry = cache
            .entry(seqno)
            .expect("the range was checked and the cache is borrowed");
        match entry.loc {
            Loc::Ring => read_record(&cache.ring, &cache.ring_path, cache.seed, seqno, entry),
            Loc::Page(id) => {
                let path = &cache.pages[&id].path;
                if self.page.as_ref().is_none_or(|(open, _)| *open != id) {
                    let file = File::open(path).map_err(|e| GcacheError::io(path, e))?;
                    self.page = Some((id, file));
                }
                let (_, file) = self.page.as_ref().expect("just opened");
                read_record(file, path, cache.seed, seqno, entry)
            }
        }
    }
}

impl Iterator for RangeReader<'_> {
    type Item = Result<Record, GcacheError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next > self.to {
            return None;
        }
        let seqno = self.next;
        let result = self.read(seqno);
        match result {
            Ok(_) => self.next = seqno.next(),
            Err(_) => self.failed = true,
        }
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed || self.next > self.to {
            return (0, Some(0));
        }
        let left = usize::try_from(self.to.0 - self.next.0 + 1).unwrap_or(usize::MAX);
        (0, Some(left))
    }
}

fn erase_magic(path: &Path, offset: u64) -> Result<(), GcacheError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| GcacheError::io(path, e))?;
    file.write_all_at(&[0u8; 4], offset)
        .map_err(|e| GcacheError::io(path, e))
}

/// Reads and verifies the record the index says is at `entry`.
fn read_record(
    file: &File,
    path: &Path,
    seed: u32,
    seqno: Seqno,
    entry: &Entry,
) -> Result<Record, GcacheError> {
    let corrupt = |reason: String| {
        tracing::warn!(seqno = seqno.0, file = %path.display(), %reason, "gcache read a corrupt record");
        GcacheError::Corrupt { seqno, reason }
    };
    let mut buf = vec![0u8; RECORD_HEADER_LEN + entry.len as usize];
    if let Err(e) = file.read_exact_at(&mut buf, entry.offset) {
        return Err(if e.kind() == io::ErrorKind::UnexpectedEof {
            corrupt("record extends past the end of its file".to_owned())
        } else {
            GcacheError::io(path, e)
        });
    }
    let Some(header) = RecordHeader::parse(&buf) else {
        return Err(corrupt(format!(
            "no record header at offset {}",
            entry.offset
        )));
    };
    if header.seqno != seqno {
        return Err(corrupt(format!(
            "found seqno {} where {seqno} was written",
            header.seqno
        )));
    }
    if header.payload_len != entry.len {
        return Err(corrupt(format!(
            "length {} where {} was written",
            header.payload_len, entry.len
        )));
    }
    let computed = record_crc(seed, &buf, &buf[RECORD_HEADER_LEN..]);
    if computed != header.crc {
        return Err(corrupt(format!(
            "checksum mismatch (stored {:08x}, computed {computed:08x})",
            header.crc
        )));
    }
    buf.drain(..RECORD_HEADER_LEN);
    Ok(Record {
        seqno,
        kind: header.kind,
        payload: buf,
        timestamp: header.timestamp,
    })
}

#[cfg(test)]
impl Gcache {
    /// Runs the structural checks from tests after every operation.
    pub(crate) fn assert_invariants(&self) {
        self.check_invariants();
        let used: u64 = self.pages.values().map(|p| p.size).sum();
        assert_eq!(used, self.page_bytes);
        if self.config.max_disk_bytes != 0 {
            assert!(self.disk_bytes() <= self.config.max_disk_bytes);
        }
    }
}
