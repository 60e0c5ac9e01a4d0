//! Behaviour of a running cache.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use base::Seqno;
use tracing::Level;

use super::*;
use crate::{FreezePurge, GcacheError};

fn open(config: GcacheConfig) -> Gcache {
    Gcache::open(config, history(1)).expect("open")
}

#[test]
fn append_and_get_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    assert!(cache.is_empty());
    assert_eq!(cache.seqno_min(), None);
    assert_eq!(cache.get(Seqno(1)).expect("get"), None);

    for seqno in 100..110 {
        put(&mut cache, seqno, (seqno as usize) * 7);
    }
    let empty = Seqno(110);
    cache
        .append(empty, 9, &[], EPOCH + 110)
        .expect("empty payload");

    assert_eq!(cache.seqno_min(), Some(Seqno(100)));
    assert_eq!(cache.seqno_max(), Some(Seqno(110)));
    assert_eq!(cache.len(), 11);
    let record = cache.get(Seqno(105)).expect("get").expect("cached");
    assert_eq!(record.seqno, Seqno(105));
    assert_eq!(record.kind, 0);
    assert_eq!(record.payload, payload(105, 735));
    assert_eq!(record.timestamp, EPOCH + 105);
    let last = cache.get(empty).expect("get").expect("cached");
    assert_eq!((last.kind, last.payload.len()), (9, 0));
    assert_eq!(cache.get(Seqno(99)).expect("get"), None);
    assert_eq!(cache.get(Seqno(111)).expect("get"), None);

    assert!(cache.contains_range(Seqno(100), Seqno(110)));
    assert!(cache.contains_range(Seqno(103), Seqno(103)));
    assert!(!cache.contains_range(Seqno(99), Seqno(105)));
    assert!(!cache.contains_range(Seqno(105), Seqno(111)));
    assert!(!cache.contains_range(Seqno(106), Seqno(105)));
    let seqnos: Vec<i64> = cache
        .read_range(Seqno(102), Seqno(104))
        .expect("range")
        .map(|r| r.expect("verifies").seqno.0)
        .collect();
    assert_eq!(seqnos, vec![102, 103, 104]);
    assert!(matches!(
        cache.read_range(Seqno(90), Seqno(104)),
        Err(GcacheError::NotCached { .. })
    ));

    let status = cache.status();
    assert_eq!(status.records, 11);
    assert_eq!(status.oldest_timestamp, Some(EPOCH + 100));
    assert_eq!(status.newest_timestamp, Some(EPOCH + 110));
    assert_eq!(status.page_count, 0);
    assert_eq!(status.disk_bytes, 64 * KIB);
    let written: u64 = (100..110)
        .map(|s| (32 + s as u64 * 7).div_ceil(8) * 8)
        .sum::<u64>()
        + 32;
    assert_eq!(status.ring_bytes_used, written);
}

#[test]
fn ring_wraps_many_times_without_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    let len_of = |seqno: i64| 700 + (seqno as usize * 37) % 600;
    for seqno in 1..=5000 {
        put(&mut cache, seqno, len_of(seqno));
        assert_eq!(cache.seqno_max(), Some(Seqno(seqno)));
        assert_eq!(
            cache.disk_bytes(),
            64 * KIB,
            "no page needed without retention"
        );
        if seqno % 97 == 0 {
            assert_contents(&cache, len_of);
        }
    }
    // Only the newest ring's worth survives, and it is most of the ring.
    let status = cache.status();
    assert!(status.records >= 40 && status.records <= 64, "{status:?}");
    assert!(status.ring_bytes_used > 48 * KIB, "{status:?}");
    assert_contents(&cache, len_of);
}

#[test]
fn purges_oldest_first_only_when_space_is_needed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    // 1 KiB records: 63 fit in the 64 KiB ring after its header, purging starts at the 64th.
    let mut seqno = 1;
    while cache.seqno_min() == Some(Seqno(1)) || cache.is_empty() {
        put(&mut cache, seqno, 1024 - 32);
        seqno += 1;
    }
    assert_eq!(seqno - 1, 64, "first purge happens when the ring is full");
    for s in seqno..seqno + 200 {
        let before = cache.seqno_min().expect("not empty");
        put(&mut cache, s, 1024 - 32);
        let after = cache.seqno_min().expect("not empty");
        assert_eq!(
            after,
            before.next(),
            "one record in, exactly the oldest one out"
        );
        assert_eq!(cache.get(before).expect("get"), None);
    }
}

#[test]
fn gap_and_undefined_seqnos_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    put(&mut cache, 5, 10);
    match cache.append(Seqno(7), 0, b"x", EPOCH) {
        Err(GcacheError::Gap { expected, got }) => {
            assert_eq!((expected, got), (Seqno(6), Seqno(7)));
        }
        other => panic!("expected a gap error, got {other:?}"),
    }
    assert!(matches!(
        cache.append(Seqno(5), 0, b"x", EPOCH),
        Err(GcacheError::Gap { .. })
    ));
    assert!(matches!(
        cache.append(Seqno(-1), 0, b"x", EPOCH),
        Err(GcacheError::InvalidSeqno(_))
    ));
    let dir2 = tempfile::tempdir().expect("tempdir");
    let mut fresh = open(small_config(dir2.path()));
    assert!(matches!(
        fresh.append(Seqno(i64::MAX), 0, b"x", EPOCH),
        Err(GcacheError::InvalidSeqno(_))
    ));
    assert_eq!(
        cache.seqno_max(),
        Some(Seqno(5)),
        "refused appends change nothing"
    );
    put(&mut cache, 6, 10);
    assert_eq!(cache.len(), 2);
}

#[test]
fn freeze_at_keeps_records_and_spills_to_pages_then_off_releases_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    for seqno in 1..=100 {
        put(&mut cache, seqno, 1000);
    }
    let frozen_at = cache.seqno_min().expect("cached").0 + 10;
    cache
        .set_freeze_purge(FreezePurge::At(Seqno(frozen_at)))
        .expect("freeze");
    assert_eq!(cache.freeze_purge(), FreezePurge::At(Seqno(frozen_at)));
    for seqno in 101..=400 {
        put(&mut cache, seqno, 1000);
        assert!(
            cache.seqno_min() <= Some(Seqno(frozen_at)),
            "purged down to the freeze, no further"
        );
    }
    assert_eq!(cache.seqno_min(), Some(Seqno(frozen_at)));
    let status = cache.status();
    assert!(status.page_count >= 10, "{status:?}");
    assert_eq!(status.disk_bytes, 64 * KIB + status.page_bytes);
    assert_contents(&cache, |_| 1000);

    let before = cache.disk_bytes();
    cache.set_freeze_purge(FreezePurge::Off).expect("unfreeze");
    assert_eq!(cache.freeze_purge(), FreezePurge::Off);
    let after = cache.disk_bytes();
    assert!(after < before, "lifting the freeze releases pages at once");
    assert!(
        cache.status().page_count <= 1,
        "only the newest record's page may stay: {:?}",
        cache.status()
    );
    assert_eq!(cache.seqno_max(), Some(Seqno(400)));
    put(&mut cache, 401, 1000);
    assert_eq!(
        cache.disk_bytes(),
        64 * KIB,
        "the next append lands in the ring"
    );
    assert_eq!(cache.status().page_count, 0);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("ls").count(),
        1,
        "page files are gone from the directory"
    );
    assert_contents(&cache, |_| 1000);
}

#[test]
fn freeze_now_keeps_everything_currently_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    cache
        .set_freeze_purge(FreezePurge::Now)
        .expect("freeze now on empty cache");
    assert_eq!(cache.freeze_purge(), FreezePurge::At(Seqno(0)));
    cache.set_freeze_purge(FreezePurge::Off).expect("off");
    for seqno in 1..=300 {
        put(&mut cache, seqno, 900);
    }
    let min = cache.seqno_min().expect("cached");
    assert!(min > Seqno(1));
    cache
        .set_freeze_purge(FreezePurge::Now)
        .expect("freeze now");
    assert_eq!(cache.freeze_purge(), FreezePurge::At(min));
    assert_eq!(cache.freeze_purge().to_string(), min.0.to_string());
    for seqno in 301..=500 {
        put(&mut cache, seqno, 900);
    }
    assert_eq!(cache.seqno_min(), Some(min));
    assert!(cache.status().page_count > 0);
    assert_contents(&cache, |_| 900);
}

#[test]
fn keep_seconds_keeps_young_records_and_lets_old_ones_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config(dir.path());
    config.keep_seconds = 10;
    let mut cache = open(config);
    // 10 records per second: the ring holds ~6 s of 1000-byte records, so keeping 10 s
    // needs pages.
    let at = |seqno: i64| EPOCH + seqno as u64 * SECOND / 10;
    for seqno in 1..=400 {
        cache
            .append(Seqno(seqno), 0, &payload(seqno, 1000), at(seqno))
            .expect("append");
        cache.assert_invariants();
        let now = at(seqno);
        let min = cache.seqno_min().expect("cached").0;
        // The newest purged record was old enough to go...
        assert!(
            min == 1 || at(min - 1) + 10 * SECOND <= now,
            "seqno {} purged while young at {seqno}",
            min - 1
        );
        // ...and beyond the young ones, the cache keeps about a ring and a page more.
        assert!(
            cache.len() <= 100 + 63 + 16,
            "{} records at {seqno}",
            cache.len()
        );
    }
    assert!(cache.status().page_count > 0);
    // Time passes without appends: the records age out and their pages go.
    cache.release(at(400) + 60 * SECOND).expect("release");
    let status = cache.status();
    assert!(status.page_count <= 1, "{status:?}");
    cache
        .append(Seqno(401), 0, &payload(401, 1000), at(400) + 60 * SECOND)
        .expect("append");
    assert_eq!(cache.status().page_count, 0);
    assert_eq!(cache.disk_bytes(), 64 * KIB);
}

#[test]
fn timestamps_never_go_backwards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    cache.append(Seqno(1), 0, b"a", EPOCH + 50).expect("append");
    cache.append(Seqno(2), 0, b"b", EPOCH + 10).expect("append");
    let second = cache.get(Seqno(2)).expect("get").expect("cached");
    assert_eq!(second.timestamp, EPOCH + 50, "a clock step back is clamped");
}

#[test]
fn retention_floor_protects_what_an_absent_member_needs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    for seqno in 1..=80 {
        put(&mut cache, seqno, 1000);
    }
    let floor = cache.seqno_min().expect("cached");
    cache.set_retention_floor(Some(floor)).expect("floor");
    assert_eq!(cache.retention_floor(), Some(floor));
    for seqno in 81..=300 {
        put(&mut cache, seqno, 1000);
    }
    assert_eq!(cache.seqno_min(), Some(floor));
    assert!(cache.status().page_count > 0);
    // Raising the floor releases what is below it.
    cache.set_retention_floor(Some(Seqno(250))).expect("raise");
    assert!(cache.seqno_min().expect("cached") <= Seqno(250));
    assert!(cache.contains_range(Seqno(250), Seqno(300)));
    cache.set_retention_floor(None).expect("lift");
    put(&mut cache, 301, 1000);
    assert_eq!(cache.status().page_count, 0);
    assert_contents(&cache, |_| 1000);
}

#[test]
fn max_disk_bytes_is_never_exceeded_even_against_freeze() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config(dir.path());
    let cap = 64 * KIB + 3 * 16 * KIB + 5000;
    config.max_disk_bytes = cap;
    let ((), logs) = Logs::capture(|| {
        let mut cache = open(config);
        cache.set_freeze_purge(FreezePurge::Now).expect("freeze");
        let len_of = |seqno: i64| 500 + (seqno as usize * 131) % 2500;
        let mut peak = 0;
        for seqno in 1..=600 {
            put(&mut cache, seqno, len_of(seqno));
            assert!(cache.disk_bytes() <= cap, "{} > {cap}", cache.disk_bytes());
            assert_eq!(cache.seqno_max(), Some(Seqno(seqno)));
            peak = peak.max(cache.disk_bytes());
        }
        let status = cache.status();
        assert!(status.protected_dropped > 0, "{status:?}");
        assert!(status.seqno_min > Some(Seqno(1)));
        // It used the room it had before giving anything up.
        assert!(peak > 64 * KIB + 3 * 16 * KIB, "peak {peak}");
        assert_contents(&cache, len_of);
    });
    assert!(
        logs.any(Level::WARN, "gave up protected seqnos 1..="),
        "{:?}",
        logs.at(Level::WARN)
    );
    assert!(logs.any(Level::WARN, "gcache.freeze_purge_at_seqno"));
}

#[test]
fn record_larger_than_the_ring_goes_to_its_own_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    for seqno in 1..=10 {
        put(&mut cache, seqno, 1000);
    }
    put(&mut cache, 11, 100 * KIB as usize);
    let status = cache.status();
    assert_eq!(status.page_count, 1);
    assert!(status.page_bytes >= 100 * KIB + 32 + 64, "{status:?}");
    assert_eq!(
        cache.seqno_min(),
        Some(Seqno(1)),
        "nothing had to be purged"
    );
    let big = cache.get(Seqno(11)).expect("get").expect("cached");
    assert_eq!(big.payload, payload(11, 100 * KIB as usize));
    // Once it is no longer the newest, nothing needs its page.
    put(&mut cache, 12, 1000);
    assert_eq!(cache.status().page_count, 0);
    assert_eq!(cache.seqno_min(), Some(Seqno(12)));
}

#[test]
fn large_records_in_the_ring_read_back_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config(dir.path());
    config.size = 1024 * KIB;
    let mut cache = open(config.clone());
    // Sizes around the one-write limit, each written whole, then read back byte for byte.
    let sizes = [
        1000,
        64 * KIB as usize,
        64 * KIB as usize + 1,
        200 * KIB as usize,
        7,
    ];
    for (i, &len) in sizes.iter().enumerate() {
        put(&mut cache, i as i64 + 1, len);
    }
    assert_eq!(cache.status().page_count, 0, "all of them fit the ring");
    for (i, &len) in sizes.iter().enumerate() {
        let seqno = i as i64 + 1;
        let record = cache.get(Seqno(seqno)).expect("get").expect("cached");
        assert_eq!(record.payload, payload(seqno, len), "seqno {seqno}");
    }
    drop(cache);
    let reopened = open(config);
    assert_eq!(reopened.seqno_min(), Some(Seqno(1)));
    assert_eq!(reopened.seqno_max(), Some(Seqno(sizes.len() as i64)));
    let record = reopened.get(Seqno(4)).expect("get").expect("recovered");
    assert_eq!(record.payload, payload(4, 200 * KIB as usize));
}

#[test]
fn record_beyond_the_ceiling_empties_the_cache_but_keeps_the_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config(dir.path());
    let cap = 64 * KIB + 80 * KIB;
    config.max_disk_bytes = cap;
    config.page_size = 128 * KIB;
    let ((), logs) = Logs::capture(|| {
        let mut cache = open(config);
        for seqno in 1..=10 {
            put(&mut cache, seqno, 1000);
        }
        put(&mut cache, 11, 200 * KIB as usize);
        assert!(cache.is_empty());
        assert_eq!(cache.next_seqno(), Some(Seqno(12)));
        assert!(matches!(
            cache.append(Seqno(13), 0, b"x", EPOCH),
            Err(GcacheError::Gap { .. })
        ));
        put(&mut cache, 12, 1000);
        put(&mut cache, 13, 30 * KIB as usize);
        assert_eq!(cache.seqno_min(), Some(Seqno(12)));
        // Too big for the ring; the page is cut down from gcache.page_size to the headroom.
        put(&mut cache, 14, 70 * KIB as usize);
        assert_eq!(cache.disk_bytes(), cap);
        assert_eq!(cache.seqno_min(), Some(Seqno(12)));
        // No room for a second page: the oldest records go, unprotected, without a warning.
        put(&mut cache, 15, 70 * KIB as usize);
        assert!(cache.disk_bytes() <= cap);
        assert_eq!(cache.seqno_min(), Some(Seqno(15)));
        assert_contents(&cache, |_| 70 * KIB as usize);
    });
    assert_eq!(logs.at(Level::WARN).len(), 1, "{:?}", logs.at(Level::WARN));
    assert!(logs.any(Level::WARN, "cannot hold seqno 11"));
}

#[test]
fn reset_discards_everything_and_accepts_any_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    cache
        .set_freeze_purge(FreezePurge::At(Seqno(1)))
        .expect("freeze");
    for seqno in 1..=200 {
        put(&mut cache, seqno, 1000);
    }
    assert!(cache.status().page_count > 0);
    cache.reset(history(2)).expect("reset");
    assert!(cache.is_empty());
    assert_eq!(cache.history(), history(2));
    assert_eq!(cache.disk_bytes(), 64 * KIB);
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
    put(&mut cache, 5000, 100);
    assert_eq!(cache.seqno_min(), Some(Seqno(5000)));
    drop(cache);
    let reopened = Gcache::open(small_config(dir.path()), history(2)).expect("reopen");
    assert_eq!(reopened.seqno_min(), Some(Seqno(5000)));
    assert_eq!(reopened.seqno_max(), Some(Seqno(5000)));
}

#[test]
fn truncate_after_lets_history_continue_from_an_earlier_seqno() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    cache
        .set_freeze_purge(FreezePurge::At(Seqno(1)))
        .expect("freeze");
    for seqno in 1..=150 {
        put(&mut cache, seqno, 1000);
    }
    cache.truncate_after(Seqno(120)).expect("truncate");
    cache.assert_invariants();
    assert_eq!(cache.seqno_max(), Some(Seqno(120)));
    assert_eq!(cache.next_seqno(), Some(Seqno(121)));
    // Different bytes for the re-appended seqnos prove the new ones are what is kept.
    for seqno in 121..=130 {
        cache
            .append(Seqno(seqno), 1, &payload(seqno, 50), EPOCH)
            .expect("append");
    }
    drop(cache);
    let reopened = Gcache::open(small_config(dir.path()), history(1)).expect("reopen");
    assert_eq!(reopened.seqno_max(), Some(Seqno(130)));
    assert_eq!(reopened.seqno_min(), Some(Seqno(1)));
    let record = reopened.get(Seqno(125)).expect("get").expect("cached");
    assert_eq!(record.payload, payload(125, 50));
    assert_eq!(reopened.get(Seqno(131)).expect("get"), None);

    let mut reopened = reopened;
    reopened.truncate_after(Seqno(0)).expect("truncate all");
    assert!(reopened.is_empty());
    assert_eq!(reopened.next_seqno(), None);
}

#[test]
fn a_damaged_record_is_an_error_not_a_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    for seqno in 1..=20 {
        put(&mut cache, seqno, 500);
    }
    // Damage the payload of seqno 5 behind the cache's back, once it is in the file.
    cache.flush().expect("flush");
    let ring = OpenOptions::new()
        .write(true)
        .open(dir.path().join("galera.cache"))
        .expect("open ring");
    let offset = 64 + 4 * (32 + 504) + 32 + 100;
    ring.write_all_at(&[0xff], offset).expect("damage");
    match cache.get(Seqno(5)) {
        Err(GcacheError::Corrupt { seqno, reason }) => {
            assert_eq!(seqno, Seqno(5));
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(cache.get(Seqno(4)).expect("intact").is_some());
    let results: Vec<_> = cache
        .read_range(Seqno(3), Seqno(10))
        .expect("range")
        .collect();
    assert_eq!(results.len(), 3, "stops after the first error");
    assert!(results[0].is_ok() && results[1].is_ok());
    assert!(matches!(results[2], Err(GcacheError::Corrupt { .. })));
}

#[test]
fn configuration_is_validated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let check = |change: fn(&mut GcacheConfig), option: &str| {
        let mut config = small_config(dir.path());
        change(&mut config);
        match Gcache::open(config, history(1)) {
            Err(GcacheError::InvalidConfig { option: got, .. }) => assert_eq!(got, option),
            other => panic!("expected {option} to be refused, got {other:?}"),
        }
    };
    check(|c| c.size = 1000, "gcache.size");
    check(|c| c.page_size = 10, "gcache.page_size");
    check(|c| c.max_disk_bytes = 1000, "gcache.max_disk_bytes");
    check(|c| c.name = String::new(), "gcache.name");
    check(|c| c.name = "a/b".to_owned(), "gcache.name");
    check(|c| c.name = "gcache.page.000001".to_owned(), "gcache.name");
    let defaults = GcacheConfig::new("/tmp");
    assert_eq!(defaults.size, 128 << 20);
    assert_eq!(defaults.page_size, 128 << 20);
    assert_eq!(defaults.name, "galera.cache");
    assert!(defaults.recover);
    assert!(defaults.validate().is_ok());
}

/// Opens a copy of the cache's files, as a restart after a process crash would find them,
/// and returns the newest seqno it recovers.
fn newest_in_a_copy(dir: &Path) -> Option<Seqno> {
    let copy = copy_of_files(dir);
    let recovered = open(small_config(copy.path()));
    recovered.seqno_max()
}

#[test]
fn small_records_are_read_back_at_once_and_reach_the_file_at_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    put(&mut cache, 1, 500);
    cache.flush().expect("flush");
    for seqno in 2..=20 {
        put(&mut cache, seqno, 500);
    }
    // Gathered, not yet written: readers see them all the same.
    let record = cache.get(Seqno(7)).expect("get").expect("cached");
    assert_eq!(record.payload, payload(7, 500));
    let read: Vec<_> = cache
        .read_range(Seqno(1), Seqno(20))
        .expect("range")
        .map(|r| r.expect("verifies").seqno.0)
        .collect();
    assert_eq!(read, (1..=20).collect::<Vec<_>>());
    assert_eq!(
        newest_in_a_copy(dir.path()),
        Some(Seqno(1)),
        "records appended since the last flush are gathered in memory"
    );
    cache.flush().expect("flush");
    assert_eq!(newest_in_a_copy(dir.path()), Some(Seqno(20)));
    // A large record is written at once, after what was gathered before it.
    put(&mut cache, 21, 300);
    put(&mut cache, 22, 70_000);
    assert_eq!(newest_in_a_copy(dir.path()), Some(Seqno(22)));
}

#[test]
fn truncating_gathered_records_keeps_them_from_coming_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cache = open(small_config(dir.path()));
    for seqno in 1..=30 {
        put(&mut cache, seqno, 400);
    }
    cache.truncate_after(Seqno(25)).expect("truncate");
    cache.assert_invariants();
    assert_eq!(cache.seqno_max(), Some(Seqno(25)));
    put(&mut cache, 26, 900);
    drop(cache);
    let reopened = open(small_config(dir.path()));
    assert_eq!(reopened.seqno_max(), Some(Seqno(26)));
    let record = reopened.get(Seqno(26)).expect("get").expect("cached");
    assert_eq!(record.payload, payload(26, 900));
}
