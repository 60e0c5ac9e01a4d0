//! Restarts: clean ones, and ones over files damaged in every way we could think of.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use base::Seqno;
use rand::Rng;
use tracing::Level;

use super::*;
use crate::format::{FileHeader, RING_MAGIC};
use crate::FreezePurge;

fn len_of(seqno: i64) -> usize {
    300 + (seqno as usize * 7919) % 2200
}

fn reopen(dir: &Path) -> (Gcache, Logs) {
    let (cache, logs) = Logs::capture(|| Gcache::open(small_config(dir), history(1)));
    let cache = cache.expect("open never fails on damaged contents");
    cache.assert_invariants();
    (cache, logs)
}

/// Writes `from..=to`, optionally freezing at `freeze_at` first so that pages appear.
fn write(dir: &Path, from: i64, to: i64, freeze_at: Option<i64>) -> (Option<Seqno>, Option<Seqno>) {
    let mut cache = Gcache::open(small_config(dir), history(1)).expect("open");
    if let Some(at) = freeze_at {
        cache
            .set_freeze_purge(FreezePurge::At(Seqno(at)))
            .expect("freeze");
    }
    for seqno in from..=to {
        put(&mut cache, seqno, len_of(seqno));
    }
    (cache.seqno_min(), cache.seqno_max())
}

fn page_files(dir: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains("gcache.page."))
        .collect();
    pages.sort();
    pages
}

fn ring_path(dir: &Path) -> PathBuf {
    dir.join("galera.cache")
}

#[test]
fn clean_restart_recovers_the_same_range_and_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (min, max) = write(dir.path(), 1, 3000, None);
    let (mut cache, logs) = reopen(dir.path());
    assert_eq!(cache.seqno_max(), max);
    assert!(
        cache.seqno_min() <= min,
        "purged records may come back, never fewer"
    );
    assert_contents(&cache, len_of);
    assert!(
        logs.at(Level::WARN).is_empty(),
        "{:?}",
        logs.at(Level::WARN)
    );
    assert!(logs.any(Level::INFO, "recovered seqnos"));

    // The recovered head and tail must be right: keep wrapping, restart again.
    for seqno in 3001..=4000 {
        put(&mut cache, seqno, len_of(seqno));
    }
    assert_contents(&cache, len_of);
    drop(cache);
    let (cache, logs) = reopen(dir.path());
    assert_eq!(cache.seqno_max(), Some(Seqno(4000)));
    assert_contents(&cache, len_of);
    assert!(
        logs.at(Level::WARN).is_empty(),
        "{:?}",
        logs.at(Level::WARN)
    );
}

#[test]
fn clean_restart_with_pages_recovers_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (min, max) = write(dir.path(), 10, 400, Some(10));
    assert_eq!(min, Some(Seqno(10)));
    assert!(page_files(dir.path()).len() > 3);
    let (mut cache, logs) = reopen(dir.path());
    assert_eq!((cache.seqno_min(), cache.seqno_max()), (min, max));
    assert_contents(&cache, len_of);
    assert!(
        logs.at(Level::WARN).is_empty(),
        "{:?}",
        logs.at(Level::WARN)
    );
    let status = cache.status();
    assert_eq!(status.page_count as usize, page_files(dir.path()).len());
    assert_eq!(status.disk_bytes, 64 * KIB + status.page_bytes);
    // Without the freeze (not persisted), the next append releases the pages.
    for seqno in 401..=420 {
        put(&mut cache, seqno, len_of(seqno));
    }
    assert_eq!(cache.status().page_count, 0);
    assert!(page_files(dir.path()).is_empty());
    assert_contents(&cache, len_of);
}

#[test]
fn another_history_starts_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), 1, 300, Some(1));
    let (cache, logs) = Logs::capture(|| Gcache::open(small_config(dir.path()), history(9)));
    let cache = cache.expect("open");
    assert!(cache.is_empty());
    assert_eq!(cache.history(), history(9));
    assert!(page_files(dir.path()).is_empty());
    assert!(logs.any(Level::INFO, "another history"));
    drop(cache);
    // And the old history is gone for good, not just ignored.
    let (cache, _) = reopen(dir.path());
    assert!(cache.is_empty());
}

#[test]
fn recover_off_and_size_change_start_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), 1, 300, Some(1));
    let mut config = small_config(dir.path());
    config.recover = false;
    let cache = Gcache::open(config, history(1)).expect("open");
    assert!(cache.is_empty());
    assert!(page_files(dir.path()).is_empty());
    drop(cache);

    write(dir.path(), 1, 100, None);
    let mut config = small_config(dir.path());
    config.size = 128 * KIB;
    let (cache, logs) = Logs::capture(|| Gcache::open(config, history(1)));
    let cache = cache.expect("open");
    assert!(cache.is_empty());
    assert!(logs.any(Level::INFO, "gcache.size changed"));
    assert_eq!(
        fs::metadata(ring_path(dir.path())).expect("stat").len(),
        128 * KIB
    );
}

#[test]
fn flipped_bytes_leave_a_verified_consecutive_suffix() {
    for seed in 0..24u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let with_pages = seed % 2 == 1;
        let (_, max) = write(dir.path(), 1, 1500, with_pages.then_some(1400));
        let mut rng = base::seeded_rng(seed);
        let mut files = vec![ring_path(dir.path())];
        files.extend(page_files(dir.path()));
        let flips = rng.gen_range(1..=30);
        for _ in 0..flips {
            let path = &files[rng.gen_range(0..files.len())];
            let len = fs::metadata(path).expect("stat").len();
            // Header damage has its own test; here the records take the hits.
            let at = rng.gen_range(64..len);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .expect("open");
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, at).expect("read");
            byte[0] ^= 1 << rng.gen_range(0..8);
            file.write_all_at(&byte, at).expect("write");
        }
        let (mut cache, logs) = reopen(dir.path());
        assert!(!cache.is_empty(), "seed {seed}: something always survives");
        assert!(cache.seqno_max() <= max, "seed {seed}");
        assert_contents(&cache, len_of);
        let _ = logs;
        // The recovered state must be a sound base for further appends and restarts.
        let next = cache.seqno_max().expect("non-empty").0 + 1;
        for seqno in next..next + 300 {
            put(&mut cache, seqno, len_of(seqno));
        }
        assert_contents(&cache, len_of);
        drop(cache);
        let (cache, _) = reopen(dir.path());
        assert_eq!(cache.seqno_max(), Some(Seqno(next + 299)), "seed {seed}");
        assert_contents(&cache, len_of);
    }
}

#[test]
fn damaged_newest_record_is_reported_and_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = Gcache::open(small_config(dir.path()), history(1)).expect("open");
    for seqno in 1..=10 {
        put(&mut cache, seqno, 1000);
    }
    drop(cache);
    // Seqno 10 sits at 64 + 9 * 1032; hit its payload, as a torn last write would.
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    ring.write_all_at(&[0xee; 16], 64 + 9 * 1032 + 500)
        .expect("write");
    let (cache, logs) = reopen(dir.path());
    assert_eq!(cache.seqno_min(), Some(Seqno(1)));
    assert_eq!(cache.seqno_max(), Some(Seqno(9)));
    let warnings = logs.at(Level::WARN);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("seqnos 1..=9"), "{}", warnings[0]);
    assert!(warnings[0].contains("bad_checksum=1"), "{}", warnings[0]);
}

#[test]
fn truncated_ring_is_recovered_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, max) = write(dir.path(), 1, 2000, None);
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    ring.set_len(40 * KIB + 3).expect("truncate");
    drop(ring);
    let (mut cache, logs) = reopen(dir.path());
    assert!(logs.any(Level::WARN, "shorter than its header says"));
    assert!(cache.seqno_max() <= max);
    assert_contents(&cache, len_of);
    assert_eq!(
        fs::metadata(ring_path(dir.path())).expect("stat").len(),
        64 * KIB
    );
    let next = cache.seqno_max().map_or(1, |s| s.0 + 1);
    for seqno in next..next + 200 {
        put(&mut cache, seqno, len_of(seqno));
    }
    assert_contents(&cache, len_of);

    // Cut inside the header: nothing to trust, start over without an error.
    drop(cache);
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    ring.set_len(10).expect("truncate");
    drop(ring);
    let (cache, logs) = reopen(dir.path());
    assert!(cache.is_empty());
    assert!(logs.any(Level::WARN, "header is unusable"));
}

#[test]
fn corrupt_header_discards_the_cache_without_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), 1, 300, Some(1));
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    ring.write_all_at(&[0x55], 20).expect("damage");
    drop(ring);
    let (mut cache, logs) = reopen(dir.path());
    assert!(cache.is_empty());
    assert!(page_files(dir.path()).is_empty(), "pages go with the ring");
    assert!(
        logs.any(Level::WARN, "checksum mismatch"),
        "{:?}",
        logs.at(Level::WARN)
    );
    put(&mut cache, 77, 100);
    assert_eq!(cache.seqno_min(), Some(Seqno(77)));

    // A well-formed header of a format version we do not know is discarded the same way.
    drop(cache);
    let mut header = FileHeader {
        history: history(1),
        file_size: 64 * KIB,
        page_id: 0,
    }
    .encode(RING_MAGIC);
    header[8] = 2;
    let crc = crc32c::crc32c(&header[..60]);
    header[60..64].copy_from_slice(&crc.to_le_bytes());
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    ring.write_all_at(&header, 0).expect("write");
    drop(ring);
    let (cache, logs) = reopen(dir.path());
    assert!(cache.is_empty());
    assert!(logs.any(Level::WARN, "unsupported format version 2"));

    // Garbage from the first byte on.
    drop(cache);
    fs::write(ring_path(dir.path()), vec![0xa5; 64 * KIB as usize]).expect("garbage");
    let (cache, logs) = reopen(dir.path());
    assert!(cache.is_empty());
    assert!(logs.any(Level::WARN, "no gcache magic"));
}

#[test]
fn deleted_page_leaves_a_consecutive_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, max) = write(dir.path(), 1, 400, Some(1));
    let pages = page_files(dir.path());
    assert!(pages.len() >= 4, "{pages:?}");
    fs::remove_file(&pages[pages.len() / 2]).expect("delete page");
    let (cache, logs) = reopen(dir.path());
    assert_eq!(
        cache.seqno_max(),
        max,
        "the newest records are after the hole"
    );
    assert!(cache.seqno_min() > Some(Seqno(1)));
    assert_contents(&cache, len_of);
    // Pages before the hole hold nothing usable any more and are deleted.
    assert_eq!(
        page_files(dir.path()).len() as u64,
        cache.status().page_count
    );
    assert!(logs.any(Level::INFO, "recovered seqnos"));
}

#[test]
fn page_with_a_bad_header_is_discarded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, max) = write(dir.path(), 1, 400, Some(1));
    let pages = page_files(dir.path());
    let last = pages.last().expect("pages");
    let file = OpenOptions::new().write(true).open(last).expect("open");
    file.write_all_at(&[0; 8], 0).expect("damage");
    drop(file);
    let (cache, logs) = reopen(dir.path());
    assert!(cache.seqno_max() < max);
    assert_contents(&cache, len_of);
    assert!(!last.exists());
    assert!(logs.any(Level::WARN, "unusable header"));
}

#[test]
fn ring_records_out_of_append_order_are_cut() {
    // Appends cannot produce this layout (it jumps back to the ring start twice), but a
    // spliced or half-restored file can; recovery must not trust it, or later appends would
    // overwrite records it believes live.
    let dir = tempfile::tempdir().expect("tempdir");
    drop(Gcache::open(small_config(dir.path()), history(1)).expect("create"));
    let ring = OpenOptions::new()
        .write(true)
        .open(ring_path(dir.path()))
        .expect("open");
    let seed = crate::format::history_seed(history(1));
    for (seqno, offset) in [(1, 5000u64), (2, 64), (3, 3000), (4, 200)] {
        let mut bytes = Vec::new();
        let body = payload(seqno, 100);
        crate::format::encode_record_header(
            &mut bytes,
            seed,
            Seqno(seqno),
            (seqno % 3) as u8,
            EPOCH,
            &body,
        );
        bytes.extend_from_slice(&body);
        ring.write_all_at(&bytes, offset).expect("write");
    }
    drop(ring);
    let (mut cache, logs) = reopen(dir.path());
    assert_eq!(cache.seqno_min(), Some(Seqno(3)));
    assert_eq!(cache.seqno_max(), Some(Seqno(4)));
    assert!(
        logs.any(Level::WARN, "2 records out of ring order"),
        "{:?}",
        logs.at(Level::WARN)
    );
    for seqno in 5..=400 {
        put(&mut cache, seqno, 100);
    }
    assert_contents(&cache, |_| 100);
}

/// A record appended in two pieces is the record of their concatenation: read back whole,
/// small (written from the scratch buffer), large (its big piece written in place) and very
/// large (its aligned middle written past the page cache, in a page), and again after a
/// restart has checked its checksum.
#[test]
fn a_record_appended_in_two_pieces_reads_back_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config(dir.path());
    config.size = 4 << 20;
    let lens = [0usize, 17, 3_000, 200_000, 900_000, 5_000, (9 << 20) + 3];
    let open = |config: &GcacheConfig| Gcache::open(config.clone(), history(1)).expect("open");
    let mut cache = open(&config);
    for (i, len) in lens.iter().enumerate() {
        let seqno = i as i64 + 1;
        let body = payload(seqno, *len);
        let (head, rest) = body.split_at((*len).min(8));
        cache
            .append_split(Seqno(seqno), 1, [head, rest], EPOCH + seqno as u64)
            .unwrap_or_else(|e| panic!("append {seqno}: {e}"));
    }
    // All of it but the unaligned ends, at most a block each.
    assert!(
        cache.bytes_past_page_cache() >= (9 << 20) - 2 * 4096,
        "{} bytes past the page cache",
        cache.bytes_past_page_cache()
    );
    let check = |cache: &Gcache| {
        for (i, len) in lens.iter().enumerate() {
            let seqno = i as i64 + 1;
            let record = cache.get(Seqno(seqno)).expect("read").expect("held");
            assert_eq!(record.payload, payload(seqno, *len), "seqno {seqno}");
        }
    };
    check(&cache);
    drop(cache);
    let (cache, logs) = Logs::capture(|| open(&config));
    check(&cache);
    assert!(
        logs.at(Level::WARN).is_empty(),
        "{:?}",
        logs.at(Level::WARN)
    );
}
