//! Rebuilding the index from the files after a restart.
//!
//! Nothing on disk says where the ring's head or tail was (keeping that current would cost a
//! second write per append), so recovery finds records by their own framing: it probes every
//! aligned offset for the record magic and accepts a record only if its checksum, seeded with
//! the history UUID, matches. What survives is then cut down to one consecutive seqno run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::{self, File};
use std::io;
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

    let mut candidates: BTreeMap<i64, (Loc, Found)> = BTreeMap::new();
    let mut duplicates: BTreeSet<i64> = BTreeSet::new();
    let mut add = |loc: Loc, found: Found| {
        if candidates.insert(found.seqno.0, (loc, found)).is_some() {
            duplicates.insert(found.seqno.0);
        }
    };
    for found in &ring_scan.found {
        add(Loc::Ring, *found);
    }

    let mut page_files: BTreeMap<u64, (PathBuf, u64)> = BTreeMap::new();
    let mut page_bad = 0usize;
    let mut page_found = 0usize;
    let mut pages_rejected = 0usize;
    let listed = list_pages(dir)?;
    let next_page_id = listed.last().map_or(0, |(id, _)| id + 1);
    for (id, path) in listed {
        match scan_page(&path, id, history, seed) {
            Ok((scan, len)) => {
                page_bad += scan.bad.len();
                page_found += scan.found.len();
                for found in scan.found {
                    add(Loc::Page(id), found);
                }
                page_files.insert(id, (path, len));
            }
            Err(reason) => {
                tracing::warn!(
                    page = %path.display(),
                    %reason,
                    "gcache discarding overflow page with an unusable header"
                );
                pages_rejected += 1;
                remove_file(&path)?;
            }
        }
    }

    // A seqno found twice cannot be trusted either way (one copy may be a leftover the
    // truncation did not manage to erase), so it breaks the run like a missing one.
    for seqno in &duplicates {
        candidates.remove(seqno);
    }
    let total_valid = ring_scan.found.len() + page_found;

    let mut out = Recovered {
        head: start,
        next_page_id,
        ..Recovered::default()
    };
    let Some(&hi) = candidates.keys().next_back() else {
        log_outcome(&Outcome {
            run: None,
            ring_records: 0,
            page_records: 0,
            older_leftovers: total_valid.saturating_sub(2 * duplicates.len()),
            overwritten: ring_scan.bad.len(),
            corrupt: page_bad,
            duplicates: duplicates.len(),
            layout_cut: 0,
            pages_rejected,
            pages_unused: delete_unused_pages(&page_files, &out.pages)?,
        });
        return Ok(out);
    };
    let mut lo = hi;
    while lo > 0 && candidates.contains_key(&(lo - 1)) {
        lo -= 1;
    }

    // The run's ring records must fit the shape an append sequence leaves behind: walking
    // from newest to oldest, offsets go down, wrap at most once to the end of the ring, and
    // never reach back into the region the newest records occupy. Anything older than the
    // first record that breaks this shape is dropped.
    let mut layout_cut = 0usize;
    let mut head: Option<u64> = None;
    let mut low = 0u64;
    let mut wrapped = false;
    for (&seqno, (loc, found)) in candidates.range(lo..=hi).rev() {
        if *loc != Loc::Ring {
            continue;
        }
        let end = found.offset + aligned_len(found.payload_len);
        let Some(head) = head else {
            head = Some(end);
            low = found.offset;
            continue;
        };
        let fits = if !wrapped && end <= low {
            true
        } else if end <= ring.ring_end && found.offset >= head && (!wrapped || end <= low) {
            wrapped = true;
            true
        } else {
            false
        };
        if !fits {
            layout_cut = (seqno - lo + 1) as usize;
            lo = seqno + 1;
            break;
        }
        low = found.offset;
    }
    out.head = head.unwrap_or(start);

    let mut last_ts = 0u64;
    let mut ring_records = 0usize;
    let mut page_records = 0usize;
    let mut run_extents: Vec<(u64, u64)> = Vec::new();
    out.first = Seqno(lo);
    for (&seqno, (loc, found)) in candidates.range(lo..=hi) {
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
                ring_records += 1;
                out.ring_q.push_back(Seqno(seqno));
                run_extents.push((found.offset, found.offset + aligned_len(found.payload_len)));
            }
            Loc::Page(id) => {
                page_records += 1;
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
    if out.ring_q.is_empty() {
        out.head = start;
    }

    // A damaged header overlapping a record of the run was simply overwritten by that newer
    // record (normal ring reuse); one that overlaps nothing live is real damage or a torn
    // last write.
    run_extents.sort_unstable();
    let (overwritten, ring_corrupt) = ring_scan.bad.iter().fold((0, 0), |(ow, co), bad| {
        let next = run_extents.partition_point(|(_, end)| *end <= bad.offset);
        let overlaps = run_extents
            .get(next)
            .is_some_and(|(offset, _)| *offset < bad.claimed_end);
        if overlaps {
            (ow + 1, co)
        } else {
            (ow, co + 1)
        }
    });

    let in_run = out.index.len();
    log_outcome(&Outcome {
        run: Some((Seqno(lo), Seqno(hi))),
        ring_records,
        page_records,
        older_leftovers: total_valid.saturating_sub(in_run + layout_cut + 2 * duplicates.len()),
        overwritten,
        corrupt: ring_corrupt + page_bad,
        duplicates: duplicates.len(),
        layout_cut,
        pages_rejected,
        pages_unused: delete_unused_pages(&page_files, &out.pages)?,
    });
    Ok(out)
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
