//! Random operation sequences checked against a plain in-memory model.

use base::Seqno;
use proptest::prelude::*;

use super::*;
use crate::FreezePurge;

#[derive(Clone, Debug)]
enum Op {
    /// Append the next seqno with this payload length, `advance` milliseconds later.
    Append {
        len: usize,
        advance_ms: u64,
    },
    /// Freeze at the newest seqno minus `back` (clamped at 0).
    FreezeAt {
        back: i64,
    },
    FreezeNow,
    Unfreeze,
    /// Retention floor at the newest seqno minus `back`, or none.
    Floor(Option<i64>),
    /// Let time pass without appends and release what aged out.
    Release {
        advance_ms: u64,
    },
    /// Close and reopen the cache.
    Reopen,
    /// Flush, then open a copy of the files as a process crash would leave them.
    FlushAndCopy,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0usize..3000, 0u64..400).prop_map(|(len, advance_ms)| Op::Append { len, advance_ms }),
        1 => (2usize..90_000).prop_map(|len| Op::Append { len, advance_ms: 10 }),
        1 => (0i64..60).prop_map(|back| Op::FreezeAt { back }),
        1 => Just(Op::FreezeNow),
        2 => Just(Op::Unfreeze),
        1 => proptest::option::of(0i64..60).prop_map(Op::Floor),
        1 => (0u64..5000).prop_map(|advance_ms| Op::Release { advance_ms }),
        1 => Just(Op::Reopen),
        1 => Just(Op::FlushAndCopy),
    ]
}

#[derive(Clone, Debug)]
struct Setup {
    keep_pages_size: u64,
    keep_seconds: u64,
    max_disk_bytes: u64,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![Just(0u64), Just(40 * KIB)],
        prop_oneof![Just(0u64), Just(3)],
        prop_oneof![
            Just(0u64),
            Just(64 * KIB + 100 * KIB),
            Just(64 * KIB + 20 * KIB)
        ],
    )
        .prop_map(|(keep_pages_size, keep_seconds, max_disk_bytes)| Setup {
            keep_pages_size,
            keep_seconds,
            max_disk_bytes,
        })
}

/// What the cache must look like, kept the simple way.
struct Model {
    /// Every appended record: (length, timestamp), seqno `first + i`.
    records: Vec<(usize, u64)>,
    first: i64,
    now: u64,
    /// Lowest seqno retention demands, as resolved when the rule was set.
    freeze: Option<i64>,
    floor: Option<i64>,
    /// Protected records the cap has already forced out: demands below this are void.
    forced_up_to: i64,
}

impl Model {
    fn last(&self) -> Option<i64> {
        (!self.records.is_empty()).then(|| self.first + self.records.len() as i64 - 1)
    }
}

fn configure(dir: &std::path::Path, setup: &Setup) -> GcacheConfig {
    let mut config = small_config(dir);
    config.keep_pages_size = setup.keep_pages_size;
    config.keep_seconds = setup.keep_seconds;
    config.max_disk_bytes = setup.max_disk_bytes;
    config
}

fn check(cache: &Gcache, model: &Model, setup: &Setup) -> Result<(), TestCaseError> {
    cache.assert_invariants();
    if setup.max_disk_bytes != 0 {
        prop_assert!(cache.disk_bytes() <= setup.max_disk_bytes);
    }
    let (Some(min), Some(max)) = (cache.seqno_min(), cache.seqno_max()) else {
        return Ok(());
    };
    // A consecutive suffix of what was appended, read back byte for byte.
    prop_assert_eq!(Some(max.0), model.last());
    prop_assert!(min.0 >= model.first);
    for record in cache.read_range(min, max).expect("range") {
        let record = record.expect("verifies");
        let (len, _) = model.records[(record.seqno.0 - model.first) as usize];
        prop_assert_eq!(&record.payload, &payload(record.seqno.0, len));
        prop_assert_eq!(record.kind, (record.seqno.0 % 3) as u8);
    }
    // Everything retention demands is there, unless the cap forced it out.
    let mut demanded = [model.freeze, model.floor].into_iter().flatten().min();
    if setup.keep_seconds > 0 {
        let keep = setup.keep_seconds * SECOND;
        let young = model
            .records
            .iter()
            .position(|(_, ts)| ts + keep > model.now)
            .map(|i| model.first + i as i64);
        demanded = [demanded, young].into_iter().flatten().min();
    }
    if let Some(from) = demanded {
        let from = from.max(model.forced_up_to + 1).max(model.first);
        if from <= max.0 {
            prop_assert!(
                min.0 <= from,
                "seqno {} demanded but cache starts at {}",
                from,
                min.0
            );
        }
    }
    Ok(())
}

/// One append, checked against the model as it goes.
fn append(
    cache: &mut Gcache,
    model: &mut Model,
    setup: &Setup,
    len: usize,
    advance_ms: u64,
) -> Result<(), TestCaseError> {
    model.now += advance_ms * 1_000_000;
    let seqno = model.last().map_or(model.first, |l| l + 1);
    let dropped_before = cache.status().protected_dropped;
    cache
        .append(
            Seqno(seqno),
            (seqno % 3) as u8,
            &payload(seqno, len),
            model.now,
        )
        .expect("append");
    model.records.push((len, model.now));
    if cache.status().protected_dropped > dropped_before || cache.is_empty() {
        // Forced out by the cap (or not cacheable at all): what is gone can
        // no longer be demanded.
        model.forced_up_to = cache.seqno_min().map_or(seqno, |m| m.0 - 1);
    }
    let protected = model.freeze.is_some() || model.floor.is_some();
    if !protected && setup.keep_seconds == 0 && setup.keep_pages_size == 0 {
        prop_assert!(
            cache.status().page_count <= 1,
            "pages linger without retention: {:?}",
            cache.status()
        );
        if len < 60_000 {
            prop_assert_eq!(cache.status().page_count, 0);
        }
    }
    Ok(())
}

fn run(setup: Setup, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = configure(dir.path(), &setup);
    let mut cache = Gcache::open(config.clone(), history(1)).expect("open");
    let mut model = Model {
        records: Vec::new(),
        first: 1,
        now: EPOCH,
        freeze: None,
        floor: None,
        forced_up_to: i64::MIN,
    };
    for op in ops {
        match op {
            Op::Append { len, advance_ms } => {
                append(&mut cache, &mut model, &setup, len, advance_ms)?
            }
            Op::FreezeAt { back } => {
                let at = model.last().map_or(0, |l| (l - back).max(0));
                cache
                    .set_freeze_purge(FreezePurge::At(Seqno(at)))
                    .expect("freeze");
                model.freeze = Some(at.max(cache.seqno_min().map_or(at, |m| m.0)));
            }
            Op::FreezeNow => {
                cache.set_freeze_purge(FreezePurge::Now).expect("freeze");
                let FreezePurge::At(at) = cache.freeze_purge() else {
                    return Err(TestCaseError::fail("now must resolve to a seqno"));
                };
                if let Some(min) = cache.seqno_min() {
                    prop_assert_eq!(at, min);
                }
                model.freeze = Some(at.0);
            }
            Op::Unfreeze => {
                cache.set_freeze_purge(FreezePurge::Off).expect("unfreeze");
                model.freeze = None;
            }
            Op::Floor(back) => {
                let floor = back.map(|b| model.last().map_or(0, |l| (l - b).max(0)));
                cache.set_retention_floor(floor.map(Seqno)).expect("floor");
                model.floor = floor.map(|f| f.max(cache.seqno_min().map_or(f, |m| m.0)));
            }
            Op::Release { advance_ms } => {
                model.now += advance_ms * 1_000_000;
                cache.release(model.now).expect("release");
            }
            Op::FlushAndCopy => {
                cache.flush().expect("flush");
                let copy = copy_of_files(dir.path());
                let crashed = Gcache::open(configure(copy.path(), &setup), history(1))
                    .expect("open the copy");
                // Nothing appended before the flush is lost to a crash after it.
                prop_assert_eq!(crashed.seqno_max(), cache.seqno_max());
                prop_assert!(crashed.seqno_min() <= cache.seqno_min());
            }
            Op::Reopen => {
                let before = (cache.seqno_min(), cache.seqno_max());
                drop(cache);
                cache = Gcache::open(config.clone(), history(1)).expect("reopen");
                if let (Some(min), Some(_)) = before {
                    prop_assert_eq!(cache.seqno_max(), before.1);
                    prop_assert!(cache.seqno_min() <= Some(min));
                }
                // Runtime settings are the caller's to restore, as the provider would.
                if let Some(at) = model.freeze {
                    cache
                        .set_freeze_purge(FreezePurge::At(Seqno(at)))
                        .expect("freeze");
                }
                cache
                    .set_retention_floor(model.floor.map(Seqno))
                    .expect("floor");
                cache.release(model.now).expect("release");
                // Each setter trims with what it knows so far, so retention set at runtime
                // only guarantees what survived until all of it was restored.
                if let Some(min) = cache.seqno_min() {
                    model.freeze = model.freeze.map(|f| f.max(min.0));
                    model.floor = model.floor.map(|f| f.max(min.0));
                }
                if cache.is_empty() {
                    // An uncacheable last record leaves nothing to recover; history may
                    // then go on from anywhere, and the model follows the next append.
                    model.first = model.last().map_or(model.first, |l| l + 1);
                    model.records.clear();
                }
            }
        }
        check(&cache, &model, &setup)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Failures are reproduced from the printed case; no files next to the sources.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn cache_matches_model(setup in setup(), ops in proptest::collection::vec(op(), 1..90)) {
        run(setup, ops)?;
    }
}
