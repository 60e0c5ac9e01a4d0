//! The cache itself: opening and recovery, appends, the index, status and invariants.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use base::{Seqno, Uuid};

use crate::config::{GcacheConfig, PAGE_FILE_PREFIX};
use crate::format::{
    aligned_len, encode_split_record_header, history_seed, record_crc, FileHeader, RecordHeader,
    FILE_HEADER_LEN, PAGE_MAGIC, RECORD_ALIGN, RECORD_HEADER_LEN, RING_MAGIC,
};
use crate::recovery::{self, RingSource};
use crate::GcacheError;

pub use base::FreezePurge;
pub use reading::RangeReader;

mod past_page_cache;
mod placement;
mod reading;
mod retention;
mod write_behind;

use past_page_cache::PastPageCache;
use write_behind::WriteBehind;

/// Payloads up to this size are copied behind their header and written in one call; larger
/// ones are written in place after it.
const SCRATCH_RECORD_MAX: usize = 64 << 10;

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

/// What an append is about to write, besides its payload.
struct NewRecord {
    seqno: Seqno,
    kind: u8,
    timestamp: u64,
    len: u32,
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
    /// Writes large payloads past the page cache.
    past_page_cache: PastPageCache,
    /// The newest small ring records, not written yet.
    write_behind: WriteBehind,
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
            past_page_cache: PastPageCache::default(),
            write_behind: WriteBehind::default(),
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
        // Every record goes, the gathered ones too: writing them now would bring them back.
        self.write_behind.discard();
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
        self.append_split(seqno, kind, [&[], payload], now_unix_nanos)
    }

    /// [`Gcache::append`] of a payload given in two pieces (a few bytes put before a large
    /// write-set), stored as their concatenation without copying them into one buffer
    /// first: for a 160 MB write-set that copy cost a fresh 160 MB of memory.
    pub fn append_split(
        &mut self,
        seqno: Seqno,
        kind: u8,
        payload: [&[u8]; 2],
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
        let total = payload[0].len() + payload[1].len();
        let len = u32::try_from(total)
            .ok()
            .filter(|len| *len <= u32::MAX - RECORD_HEADER_LEN as u32 - RECORD_ALIGN as u32)
            .ok_or(GcacheError::PayloadTooLarge { len: total })?;
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

        let record = NewRecord {
            seqno,
            kind,
            timestamp,
            len,
        };
        self.write_record(&record, loc, offset, payload)?;
        self.index_record(&record, loc, offset, need);
        self.next = Some(seqno.next());
        self.last_timestamp = timestamp;
        self.trim()
    }

    /// Writes a record at its place. A small ring record is gathered with the newest ones
    /// and written with them (see [`Gcache::flush`]); a small page record goes out in one
    /// write from the scratch buffer; a large one as its header and then the payload in
    /// place, so that it is not copied into (and does not leave) a buffer as large as itself.
    fn write_record(
        &mut self,
        record: &NewRecord,
        loc: Loc,
        offset: u64,
        payload: [&[u8]; 2],
    ) -> Result<(), GcacheError> {
        let [head, payload] = payload;
        let separate_payload = payload.len() > SCRATCH_RECORD_MAX;
        self.scratch.clear();
        encode_split_record_header(
            &mut self.scratch,
            self.seed,
            record.seqno,
            record.kind,
            record.timestamp,
            [head, payload],
        );
        self.scratch.extend_from_slice(head);
        if !separate_payload {
            self.scratch.extend_from_slice(payload);
            if loc == Loc::Ring {
                return self.gather(record.seqno, offset, aligned_len(record.len));
            }
        }
        // Anything written straight to the files comes after what was gathered.
        if let Err(error) = self.flush() {
            self.forget_new_page(loc);
            return Err(error);
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
            let at = offset + self.scratch.len() as u64;
            written = self.past_page_cache.write(file, path, payload, at);
        }
        let written = written.map_err(|e| GcacheError::io(path, e));
        if written.is_err() {
            self.forget_new_page(loc);
        }
        written
    }

    /// After a failed write: removes the page if it was created for that record alone, so
    /// that it does not leak.
    fn forget_new_page(&mut self, loc: Loc) {
        if let Loc::Page(id) = loc {
            if self.pages.get(&id).is_some_and(|page| page.live == 0) {
                let _ = self.remove_page(id);
            }
        }
    }

    /// Takes a written record into the ring's queue or its page, and into the index.
    fn index_record(&mut self, record: &NewRecord, loc: Loc, offset: u64, need: u64) {
        let seqno = record.seqno;
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
            len: record.len,
            timestamp: record.timestamp,
        });
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

    /// Bytes of large payloads written past the page cache since the cache was opened.
    pub fn bytes_past_page_cache(&self) -> u64 {
        self.past_page_cache.written()
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
        if let Some(end) = self.write_behind.end() {
            // Purging is oldest first: while any ring record is left, the newest gathered
            // one is the ring's newest, and the next ring record goes right after it.
            assert!(
                self.ring_q.is_empty() || end == self.head,
                "gathered records end at the head"
            );
            assert!(end <= self.ring_end);
        }
    }
}

impl Drop for Gcache {
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::warn!(%error, "gcache lost its newest records when it closed");
        }
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
