//! Rebuilding the index from the files after a restart.
//!
//! Nothing on disk says where the ring's head or tail was (keeping that current would cost a
//! second write per append), so recovery finds records by their own framing: it probes every
//! aligned offset for the record magic and accepts a record only if its checksum, seeded with
//! the history UUID, matches. What survives is then cut down to one consecutive seqno run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::{self, File};
use std::io;
use std::ops::RangeInclusive;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use base::{Seqno, Uuid};

use crate::cache::{Entry, Loc, Page};
use crate::config::PAGE_FILE_PREFIX;
use crate::format::{
    aligned_len, record_crc_start, FileHeader, RecordHeader, FILE_HEADER_LEN, PAGE_MAGIC,
    RECORD_ALIGN, RECORD_HEADER_LEN,
};
use crate::GcacheError;

/// How much of a file the scanner holds in memory at once.
const WINDOW: usize = 1 << 20;

/// A record whose framing and checksum are intact.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub(crate) seqno: Seqno,
    pub(crate) payload_len: u32,
    pub(crate) timestamp: u64,
    pub(crate) offset: u64,
}

/// A record magic whose record did not verify: where it was and what its header claimed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bad {
    pub(crate) offset: u64,
    pub(crate) claimed_end: u64,
}

/// Everything a scan of one file region found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) found: Vec<Found>,
    pub(crate) bad: Vec<Bad>,
}

/// A read-only view of a file region that keeps one window of it in memory.
struct Window<'a> {
    file: &'a File,
    end: u64,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> Window<'a> {
    fn new(file: &'a File, end: u64) -> Window<'a> {
        Window {
            file,
            end,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// `len` bytes at `offset`; the range must lie inside the region and be at most a window.
    fn get(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        debug_assert!(len <= WINDOW && offset + len as u64 <= self.end);
        let loaded_end = self.start + self.buf.len() as u64;
        if offset < self.start || offset + len as u64 > loaded_end {
            let want = (self.end - offset).min(WINDOW as u64) as usize;
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, offset)?;
            self.start = offset;
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + len])
    }
}

/// Finds every verifiable record in `[start, end)` of `file`.
///
/// After a verified record the scan jumps over it, so a payload that happens to contain
/// record-like bytes is never mistaken for records; after anything else it moves on by one
/// alignment step, which resynchronises after torn or damaged regions.
pub(crate) fn scan(file: &File, start: u64, end: u64, seed: u32) -> io::Result<Scan> {
    let mut window = Window::new(file, end);
    let mut out = Scan::default();
    let mut at = start;
    while at + RECORD_HEADER_LEN as u64 <= end {
        let bytes = window.get(at, RECORD_HEADER_LEN)?;
        if let Some(header) = RecordHeader::parse(bytes) {
            let mut header_bytes = [0u8; RECORD_HEADER_LEN];
            header_bytes.copy_from_slice(bytes);
            let payload_end = at + RECORD_HEADER_LEN as u64 + u64::from(header.payload_len);
            if payload_end <= end && header.seqno.is_defined() && header.seqno.0 < i64::MAX {
                let mut crc = record_crc_start(seed, &header_bytes);
                let mut cursor = at + RECORD_HEADER_LEN as u64;
                while cursor < payload_end {
                    let piece = (payload_end - cursor).min(WINDOW as u64) as usize;
                    crc = crc32c::crc32c_append(crc, window.get(cursor, piece)?);
                    cursor += piece as u64;
                }
                if crc == header.crc {
                    out.found.push(Found {
                        seqno: header.seqno,
                        payload_len: header.payload_len,
                        timestamp: header.timestamp,
                        offset: at,
                    });
                    at += aligned_len(header.payload_len);
                    continue;
                }
            }
            out.bad.push(Bad {
                offset: at,
                claimed_end: at.saturating_add(aligned_len(header.payload_len)),
            });
        }
        at += RECORD_ALIGN;
    }
    Ok(out)
}

/// Page files in `dir`, by page number.
pub(crate) fn list_pages(dir: &Path) -> Result<Vec<(u64, PathBuf)>, GcacheError> {
    let mut pages = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| GcacheError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| GcacheError::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(number) = name.strip_prefix(PAGE_FILE_PREFIX) else {
            continue;
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(id) = number.parse::<u64>() {
            pages.push((id, entry.path()));
        }
    }
    pages.sort_unstable_by_key(|(id, _)| *id);
    Ok(pages)
}

/// Removes a file that recovery decided not to use; a file already gone is fine.
pub(crate) fn remove_file(path: &Path) -> Result<(), GcacheError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GcacheError::io(path, e)),
    }
}

/// The state recovery hands to the cache.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub(crate) first: Seqno,
    pub(crate) index: VecDeque<Entry>,
    pub(crate) ring_q: VecDeque<Seqno>,
    /// Offset right after the newest ring record (the ring start if the ring is empty).
    pub(crate) head: u64,
    pub(crate) pages: BTreeMap<u64, Page>,
    /// One past the highest page number seen in the directory, used or not.
    pub(crate) next_page_id: u64,
}

/// What the ring scan should look at.
pub(crate) struct RingSource<'a> {
    pub(crate) file: &'a File,
    pub(crate) path: &'a Path,
    /// End of the readable part of the ring region (short if the file was truncated).
    pub(crate) scan_end: u64,
    /// End of the ring region in a healthy file.
    pub(crate) ring_end: u64,
}

/// Rebuilds the cache contents from the ring and the page files in `dir`.
///
/// Keeps the longest consecutive run of verified seqnos that ends at the highest verified
/// seqno, provided the run's ring records form one valid ring layout; everything else is
/// dropped, and page files left without records are deleted.
pub(crate) fn recover(
    ring: RingSource<'_>,
    dir: &Path,
    history: Uuid,
    seed: u32,
) -> Result<Recovered, GcacheError> {
    let start = FILE_HEADER_LEN;
    let ring_scan =
        scan(ring.file, start, ring.scan_end, seed).map_err(|e| GcacheError::io(ring.path, e))?;
    let pages = scan_pages(dir, history, seed)?;
    let mut candidates = Candidates::default();
    for found in &ring_scan.found {
        candidates.add(Loc::Ring, *found);
    }
    for (id, found) in &pages.found {
        candidates.add(Loc::Page(*id), *found);
    }
    // A seqno found twice cannot be trusted either way (one copy may be a leftover the
    // truncation did not manage to erase), so it breaks the run like a missing one.
    for seqno in &candidates.duplicates {
        candidates.by_seqno.remove(seqno);
    }
    let duplicates = candidates.duplicates.len();
    let total_valid = ring_scan.found.len() + pages.found.len();

    let mut out = Recovered {
        head: start,
        next_page_id: pages.next_page_id,
        ..Recovered::default()
    };
    let Some(&hi) = candidates.by_seqno.keys().next_back() else {
        log_outcome(&Outcome {
            run: None,
            ring_records: 0,
            page_records: 0,
            older_leftovers: total_valid.saturating_sub(2 * duplicates),
            overwritten: ring_scan.bad.len(),
            corrupt: pages.bad,
            duplicates,
            layout_cut: 0,
            pages_rejected: pages.rejected,
            pages_unused: delete_unused_pages(&pages.files, &out.pages)?,
        });
        return Ok(out);
    };
    let mut lo = hi;
    while lo > 0 && candidates.by_seqno.contains_key(&(lo - 1)) {
        lo -= 1;
    }
    let layout = cut_to_ring_layout(&candidates.by_seqno, lo..=hi, ring.ring_end);
    let lo = layout.lo;
    out.head = layout.head.unwrap_or(start);
    let built = build_index(&candidates.by_seqno, lo..=hi, &pages.files, &mut out);
    if out.ring_q.is_empty() {
        out.head = start;
    }
    let (overwritten, ring_corrupt) = classify_bad(&ring_scan.bad, built.run_extents);

    let in_run = out.index.len();
    log_outcome(&Outcome {
        run: Some((Seqno(lo), Seqno(hi))),
        ring_records: built.ring_records,
        page_records: built.page_records,
        older_leftovers: total_valid.saturating_sub(in_run + layout.cut + 2 * duplicates),
        overwritten,
        corrupt: ring_corrupt + pages.bad,
        duplicates,
        layout_cut: layout.cut,
        pages_rejected: pages.rejected,
        pages_unused: delete_unused_pages(&pages.files, &out.pages)?,
    });
    Ok(out)
}

/// Every verified record found, by seqno, with where it was found.
#[derive(Default)]
struct Candidates {
    by_seqno: BTreeMap<i64, (Loc, Found)>,
    /// Seqnos found more than once.
    duplicates: BTreeSet<i64>,
}

impl Candidates {
    fn add(&mut self, loc: Loc, found: Found) {
        if self.by_seqno.insert(found.seqno.0, (loc, found)).is_some() {
            self.duplicates.insert(found.seqno.0);
        }
    }
}

/// What the scan of the overflow pages found.
struct PageScan {
    /// Usable page files by id: path and length.
    files: BTreeMap<u64, (PathBuf, u64)>,
    /// Verified records, with their page.
    found: Vec<(u64, Found)>,
    /// Record magics whose record did not verify.
    bad: usize,
    /// Page files discarded for an unusable header (and deleted).
    rejected: usize,
    next_page_id: u64,
}

/// Scans every page file in `dir`; a page whose header is unusable is deleted.
fn scan_pages(dir: &Path, history: Uuid, seed: u32) -> Result<PageScan, GcacheError> {
    let listed = list_pages(dir)?;
    let mut pages = PageScan {
        files: BTreeMap::new(),
        found: Vec::new(),
        bad: 0,
        rejected: 0,
        next_page_id: listed.last().map_or(0, |(id, _)| id + 1),
    };
    for (id, path) in listed {
        match scan_page(&path, id, history, seed) {
            Ok((scan, len)) => {
                pages.bad += scan.bad.len();
                pages.found.extend(scan.found.into_iter().map(|f| (id, f)));
                pages.files.insert(id, (path, len));
            }
            Err(reason) => {
                tracing::warn!(
                    page = %path.display(),
                    %reason,
                    "gcache discarding overflow page with an unusable header"
                );
                pages.rejected += 1;
                remove_file(&path)?;
            }
        }
    }
    Ok(pages)
}

/// The run cut to the ring layout an append sequence leaves behind.
struct RingLayout {
    /// The run's new lowest seqno.
    lo: i64,
    /// Records cut from the bottom of the run.
    cut: usize,
    /// Offset right after the newest ring record, if the run has one.
    head: Option<u64>,
}

/// The run's ring records must fit the shape an append sequence leaves behind: walking
/// from newest to oldest, offsets go down, wrap at most once to the end of the ring, and
/// never reach back into the region the newest records occupy. Anything older than the
/// first record that breaks this shape is dropped.
fn cut_to_ring_layout(
    candidates: &BTreeMap<i64, (Loc, Found)>,
    run: RangeInclusive<i64>,
    ring_end: u64,
) -> RingLayout {
    let mut layout = RingLayout {
        lo: *run.start(),
        cut: 0,
        head: None,
    };
    let mut low = 0u64;
    let mut wrapped = false;
    for (&seqno, (loc, found)) in candidates.range(run).rev() {
        if *loc != Loc::Ring {
            continue;
        }
        let end = found.offset + aligned_len(found.payload_len);
        let Some(head) = layout.head else {
            layout.head = Some(end);
            low = found.offset;
            continue;
        };
        let fits = if !wrapped && end <= low {
            true
        } else if end <= ring_end && found.offset >= head && (!wrapped || end <= low) {
            wrapped = true;
            true
        } else {
            false
        };
        if !fits {
            layout.cut = (seqno - layout.lo + 1) as usize;
            layout.lo = seqno + 1;
            break;
        }
        low = found.offset;
    }
    layout
}

/// What building the index from the run found.
struct BuiltIndex {
    ring_records: usize,
    page_records: usize,
    /// The ring extents the run's records occupy.
    run_extents: Vec<(u64, u64)>,
}

/// Fills `out`'s index, ring queue and pages from the records of `run`.
fn build_index(
    candidates: &BTreeMap<i64, (Loc, Found)>,
    run: RangeInclusive<i64>,
    page_files: &BTreeMap<u64, (PathBuf, u64)>,
    out: &mut Recovered,
) -> BuiltIndex {
    let mut built = BuiltIndex {
        ring_records: 0,
        page_records: 0,
        run_extents: Vec::new(),
    };
    let mut last_ts = 0u64;
    out.first = Seqno(*run.start());
    for (&seqno, (loc, found)) in candidates.range(run) {
        // Appends store non-decreasing timestamps; clamping keeps the index sorted (which
        // the keep_seconds search relies on) even if a clock step slipped through.
        last_ts = last_ts.max(found.timestamp);
        out.index.push_back(Entry {
            loc: *loc,
            offset: found.offset,
            len: found.payload_len,
            timestamp: last_ts,
        });
        match loc {
            Loc::Ring => {
                built.ring_records += 1;
                out.ring_q.push_back(Seqno(seqno));
                let end = found.offset + aligned_len(found.payload_len);
                built.run_extents.push((found.offset, end));
            }
            Loc::Page(id) => {
                built.page_records += 1;
                let (path, len) = &page_files[id];
                let page = out.pages.entry(*id).or_insert_with(|| Page {
                    path: path.clone(),
                    size: *len,
                    used: *len,
                    live: 0,
                    max_seqno: Seqno::UNDEFINED,
                    writer: None,
                });
                page.live += 1;
                page.max_seqno = Seqno(seqno);
            }
        }
    }
    built
}

/// Splits the ring's bad records into (overwritten, corrupt). A damaged header overlapping
/// a record of the run was simply overwritten by that newer record (normal ring reuse); one
/// that overlaps nothing live is real damage or a torn last write.
fn classify_bad(bad: &[Bad], mut run_extents: Vec<(u64, u64)>) -> (usize, usize) {
    run_extents.sort_unstable();
    bad.iter().fold((0, 0), |(overwritten, corrupt), bad| {
        let next = run_extents.partition_point(|(_, end)| *end <= bad.offset);
        let overlaps = run_extents
            .get(next)
            .is_some_and(|(offset, _)| *offset < bad.claimed_end);
        if overlaps {
            (overwritten + 1, corrupt)
        } else {
            (overwritten, corrupt + 1)
        }
    })
}

fn delete_unused_pages(
    files: &BTreeMap<u64, (PathBuf, u64)>,
    used: &BTreeMap<u64, Page>,
) -> Result<usize, GcacheError> {
    let mut deleted = 0;
    for (id, (path, _)) in files {
        if !used.contains_key(id) {
            remove_file(path)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Reads and checks a page header, then scans the page. Errors are reasons for the log.
fn scan_page(path: &Path, id: u64, history: Uuid, seed: u32) -> Result<(Scan, u64), String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    let mut bytes = vec![0u8; (FILE_HEADER_LEN.min(len)) as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| format!("cannot read header: {e}"))?;
    let header = FileHeader::decode(&bytes, PAGE_MAGIC)?;
    if header.history != history {
        return Err(format!("page belongs to history {}", header.history));
    }
    if header.page_id != id {
        return Err(format!("header says page {}", header.page_id));
    }
    let end = len.min(header.file_size);
    let scan = scan(&file, FILE_HEADER_LEN, end, seed).map_err(|e| format!("read error: {e}"))?;
    Ok((scan, len))
}

struct Outcome {
    run: Option<(Seqno, Seqno)>,
    ring_records: usize,
    page_records: usize,
    older_leftovers: usize,
    overwritten: usize,
    corrupt: usize,
    duplicates: usize,
    layout_cut: usize,
    pages_rejected: usize,
    pages_unused: usize,
}

fn log_outcome(o: &Outcome) {
    let range = match o.run {
        Some((lo, hi)) => format!("seqnos {lo}..={hi}"),
        None => "no records".to_owned(),
    };
    let damaged = o.corrupt + o.duplicates + o.layout_cut + o.pages_rejected > 0;
    if damaged {
        tracing::warn!(
            ring_records = o.ring_records,
            page_records = o.page_records,
            bad_checksum = o.corrupt,
            duplicate_seqnos = o.duplicates,
            cut_by_layout = o.layout_cut,
            pages_rejected = o.pages_rejected,
            older_leftovers = o.older_leftovers,
            pages_deleted = o.pages_unused,
            "gcache recovered {range} from ring and pages; discarded {} damaged records \
             (bad checksum or torn), {} duplicated seqnos, {} records out of ring order, \
             {} pages with a bad header",
            o.corrupt,
            o.duplicates,
            o.layout_cut,
            o.pages_rejected,
        );
    } else {
        tracing::info!(
            ring_records = o.ring_records,
            page_records = o.page_records,
            older_leftovers = o.older_leftovers,
            overwritten = o.overwritten,
            pages_deleted = o.pages_unused,
            "gcache recovered {range} from ring and pages; no damage found"
        );
    }
}

/// Fuzz targets: damaged ring and page files never panic the scan or the recovery, and
/// whatever is recovered verifies and reads back. `scripts/fuzz.sh` runs them longer.
#[cfg(test)]
mod fuzz {
    use std::sync::OnceLock;

    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;
    use crate::format::fuzz::{damage, HUGE};
    use crate::format::{encode_record_header, history_seed, record_crc};
    use crate::tests::{history, payload, put, small_config};
    use crate::{FreezePurge, Gcache};

    /// Cases of the scan target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 2000;
    /// Cases of the reopen target, which writes and recovers a whole cache per case.
    const FUZZ_CASES_REOPEN: u32 = 500;

    /// Rewrites the record header at `at` (if one fits there) with `payload_len` and
    /// `seqno` when given, and a checksum that verifies over whatever then is its payload.
    #[derive(Clone, Debug)]
    struct Reseal {
        at: Index,
        payload_len: Option<u64>,
        seqno: Option<i64>,
    }

    fn reseal() -> impl Strategy<Value = Reseal> {
        (
            any::<Index>(),
            proptest::option::of(prop_oneof![fuzzing::huge(&HUGE), 0u64..5000]),
            proptest::option::of(prop_oneof![any::<i64>(), 0i64..100, Just(i64::MAX)]),
        )
            .prop_map(|(at, payload_len, seqno)| Reseal {
                at,
                payload_len,
                seqno,
            })
    }

    fn do_reseal(bytes: &mut [u8], offsets: &[u64], reseal: &Reseal, seed: u32) {
        if offsets.is_empty() {
            return;
        }
        let at = offsets[reseal.at.index(offsets.len())] as usize;
        if at + RECORD_HEADER_LEN > bytes.len() {
            return;
        }
        if let Some(len) = reseal.payload_len {
            bytes[at + 4..at + 8].copy_from_slice(&(len as u32).to_le_bytes());
        }
        if let Some(seqno) = reseal.seqno {
            bytes[at + 8..at + 16].copy_from_slice(&seqno.to_le_bytes());
        }
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
        let end = at + RECORD_HEADER_LEN + len;
        if end <= bytes.len() {
            let crc = record_crc(
                seed,
                &bytes[at..at + RECORD_HEADER_LEN],
                &bytes[at + RECORD_HEADER_LEN..end],
            );
            bytes[at + 28..at + 32].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// A junk file header, then `records` laid out as appends lay them out.
    fn records_file(records: &[(i64, Vec<u8>)], seed: u32) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = vec![0xa5; FILE_HEADER_LEN as usize];
        let mut offsets = Vec::new();
        for (seqno, payload) in records {
            offsets.push(bytes.len() as u64);
            encode_record_header(&mut bytes, seed, Seqno(*seqno), 1, 77, payload);
            bytes.extend_from_slice(payload);
            bytes.resize(bytes.len().next_multiple_of(RECORD_ALIGN as usize), 0);
        }
        (bytes, offsets)
    }

    /// Everything a scan reports must be true of the bytes.
    fn check_scan(bytes: &[u8], end: u64, seed: u32, scan: &Scan) -> Result<(), TestCaseError> {
        let mut free_from = FILE_HEADER_LEN;
        for found in &scan.found {
            let at = found.offset as usize;
            prop_assert!(found.offset >= free_from && found.offset % RECORD_ALIGN == 0);
            let header = RecordHeader::parse(&bytes[at..]).expect("a found record parses");
            prop_assert_eq!(header.seqno, found.seqno);
            prop_assert_eq!(header.payload_len, found.payload_len);
            prop_assert_eq!(header.timestamp, found.timestamp);
            prop_assert!(found.seqno.is_defined() && found.seqno.0 < i64::MAX);
            let payload_end =
                found.offset + RECORD_HEADER_LEN as u64 + u64::from(header.payload_len);
            prop_assert!(payload_end <= end);
            let header_bytes = &bytes[at..at + RECORD_HEADER_LEN];
            let payload = &bytes[at + RECORD_HEADER_LEN..payload_end as usize];
            prop_assert_eq!(record_crc(seed, header_bytes, payload), header.crc);
            free_from = found.offset + aligned_len(found.payload_len);
        }
        for bad in &scan.bad {
            prop_assert!(bad.offset >= FILE_HEADER_LEN && bad.offset < end);
            prop_assert!(bad.offset % RECORD_ALIGN == 0 && bad.claimed_end >= bad.offset);
            prop_assert!(!scan.found.iter().any(|found| found.offset == bad.offset));
        }
        Ok(())
    }

    /// A new file name for one case, in a directory all cases share. Never the same name
    /// twice: rewriting one file in place makes some file systems flush it on every close.
    fn scratch_file(what: &str) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scratch_dir().join(format!("{what}-{n}"))
    }

    /// A directory for the files of one case after another.
    fn scratch_dir() -> &'static Path {
        static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
        DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
            .path()
    }

    /// The cache every reopen case starts from: the ring and the page files of seqnos
    /// 1..=80, with pages because purging was frozen while they were written.
    struct Pristine {
        files: Vec<(String, Vec<u8>)>,
        /// Where each file's records start.
        offsets: Vec<Vec<u64>>,
    }

    fn len_of(seqno: i64) -> usize {
        300 + (seqno as usize * 7919) % 2200
    }

    fn pristine() -> &'static Pristine {
        static PRISTINE: OnceLock<Pristine> = OnceLock::new();
        PRISTINE.get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut cache = Gcache::open(small_config(dir.path()), history(1)).expect("open");
            cache
                .set_freeze_purge(FreezePurge::At(Seqno(1)))
                .expect("freeze");
            for seqno in 1..=80 {
                put(&mut cache, seqno, len_of(seqno));
            }
            drop(cache);
            let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir.path())
                .expect("ls")
                .map(|entry| {
                    let entry = entry.expect("entry");
                    let name = entry.file_name().to_string_lossy().into_owned();
                    (name, fs::read(entry.path()).expect("read"))
                })
                .collect();
            files.sort();
            assert!(files.len() > 2, "the pristine cache has pages");
            let seed = history_seed(history(1));
            let offsets = files
                .iter()
                .map(|(name, _)| {
                    let file = File::open(dir.path().join(name)).expect("open");
                    let end = file.metadata().expect("stat").len();
                    let scan = scan(&file, FILE_HEADER_LEN, end, seed).expect("scan");
                    scan.found.iter().map(|found| found.offset).collect()
                })
                .collect();
            Pristine { files, offsets }
        })
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Runs of records with flipped and overwritten bytes, huge lengths, cuts and
        /// insertions, some resealed so that they verify: the scan never panics and reports
        /// only records that verify, inside the region, without overlaps.
        #[test]
        fn fuzz_gcache_scan_damaged_records(
            records in proptest::collection::vec(
                (prop_oneof![0i64..50, any::<i64>()], proptest::collection::vec(any::<u8>(), 0..60)),
                0..12,
            ),
            damages in proptest::collection::vec(damage(), 0..4),
            reseals in proptest::collection::vec(reseal(), 0..3),
            cut in proptest::option::of(any::<Index>()),
        ) {
            let seed = history_seed(history(3));
            let (mut bytes, offsets) = records_file(&records, seed);
            let damaged = !damages.is_empty() || !reseals.is_empty() || cut.is_some();
            fuzzing::apply(&mut bytes, &damages);
            for reseal in &reseals {
                do_reseal(&mut bytes, &offsets, reseal, seed);
            }
            let end = match cut {
                Some(cut) => cut.index(bytes.len() + 1) as u64,
                None => bytes.len() as u64,
            };
            let path = scratch_file("scanned");
            fs::write(&path, &bytes).expect("write");
            let file = File::open(&path).expect("open");
            let scan = scan(&file, FILE_HEADER_LEN, end, seed).expect("scan");
            fs::remove_file(&path).expect("rm");
            check_scan(&bytes, end, seed, &scan)?;
            if !damaged {
                let seqnos: Vec<i64> = scan.found.iter().map(|f| f.seqno.0).collect();
                let valid: Vec<i64> = records
                    .iter()
                    .map(|(seqno, _)| *seqno)
                    .filter(|seqno| (0..i64::MAX).contains(seqno))
                    .collect();
                prop_assert_eq!(seqnos, valid);
            }
        }
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES_REOPEN))]

        /// A real cache (ring and pages) with one file damaged, maybe with records rewritten
        /// so that they verify: opening it never panics or fails, the recovered cache keeps
        /// its invariants, every record it lists reads back (the original bytes, unless
        /// rewritten records verify), and the next append works.
        #[test]
        fn fuzz_gcache_reopen_damaged_files(
            file in any::<Index>(),
            damages in proptest::collection::vec(damage(), 0..4),
            reseals in proptest::collection::vec(reseal(), 0..3),
        ) {
            let pristine = pristine();
            let seed = history_seed(history(1));
            let dir = tempfile::tempdir().expect("tempdir");
            let damaged = file.index(pristine.files.len());
            for (i, (name, bytes)) in pristine.files.iter().enumerate() {
                let mut bytes = bytes.clone();
                if i == damaged {
                    let offsets = &pristine.offsets[i];
                    fuzzing::apply(&mut bytes, &damages);
                    for reseal in &reseals {
                        do_reseal(&mut bytes, offsets, reseal, seed);
                    }
                }
                fs::write(dir.path().join(name), &bytes).expect("write");
            }
            let mut cache = Gcache::open(small_config(dir.path()), history(1))
                .expect("damaged contents never fail the open");
            cache.assert_invariants();
            if let (Some(min), Some(max)) = (cache.seqno_min(), cache.seqno_max()) {
                for seqno in min.0..=max.0 {
                    let record = cache.get(Seqno(seqno));
                    prop_assert!(matches!(record, Ok(Some(_))), "{}: {:?}", seqno, record);
                    let record = record.expect("ok").expect("cached");
                    if reseals.is_empty() {
                        prop_assert!((1..=80).contains(&seqno));
                        prop_assert_eq!(record.payload, payload(seqno, len_of(seqno)));
                    }
                }
            }
            let next = cache.seqno_max().map_or(1, |max| max.0 + 1);
            if next < 1 << 40 {
                put(&mut cache, next, 700);
                let record = cache.get(Seqno(next)).expect("get").expect("cached");
                prop_assert_eq!(record.payload, payload(next, 700));
            }
        }
    }
}
