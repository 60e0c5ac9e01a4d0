//! Tests: behaviour while running, restarts over damaged files, and a model-based proptest.

mod model;
mod restart;
mod unit;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use base::{Seqno, Uuid};
use tracing::field::{Field, Visit};
use tracing::{span, Event, Level, Metadata, Subscriber};

use crate::{Gcache, GcacheConfig};

pub(crate) const KIB: u64 = 1024;
pub(crate) const SECOND: u64 = 1_000_000_000;
/// An arbitrary wall-clock origin, so timestamps look like real ones.
pub(crate) const EPOCH: u64 = 1_700_000_000 * SECOND;

pub(crate) fn history(byte: u8) -> Uuid {
    Uuid([byte; 16])
}

/// A tiny cache: 64 KiB ring, 16 KiB pages.
pub(crate) fn small_config(dir: &Path) -> GcacheConfig {
    let mut config = GcacheConfig::new(dir);
    config.size = 64 * KIB;
    config.page_size = 16 * KIB;
    config
}

/// A copy of every file in `dir`: what a restart would find if the process died now.
pub(crate) fn copy_of_files(dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name");
        std::fs::copy(&path, copy.path().join(name)).expect("copy");
    }
    copy
}

/// Bytes that differ per seqno and per length, so a record read from the wrong place or
/// with the wrong length cannot pass for the right one.
pub(crate) fn payload(seqno: i64, len: usize) -> Vec<u8> {
    let mut state = (seqno as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Appends `seqno` with the standard payload and a timestamp derived from the seqno.
pub(crate) fn put(cache: &mut Gcache, seqno: i64, len: usize) {
    cache
        .append(
            Seqno(seqno),
            (seqno % 3) as u8,
            &payload(seqno, len),
            EPOCH + seqno as u64,
        )
        .unwrap_or_else(|e| panic!("append {seqno}: {e}"));
    cache.assert_invariants();
}

/// Asserts that every cached seqno reads back exactly as [`put`] wrote it.
pub(crate) fn assert_contents(cache: &Gcache, len_of: impl Fn(i64) -> usize) {
    let (Some(min), Some(max)) = (cache.seqno_min(), cache.seqno_max()) else {
        return;
    };
    let mut expected = min.0;
    for record in cache.read_range(min, max).expect("range cached") {
        let record = record.expect("record verifies");
        assert_eq!(record.seqno, Seqno(expected));
        assert_eq!(record.kind, (expected % 3) as u8);
        assert_eq!(
            record.payload,
            payload(expected, len_of(expected)),
            "seqno {expected}"
        );
        expected += 1;
    }
    assert_eq!(expected, max.0 + 1);
}

/// Log lines captured while a closure runs on this thread.
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<(Level, String)>>>);

impl Logs {
    pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Logs) {
        let logs = Logs::default();
        let result = tracing::subscriber::with_default(Capture(logs.clone()), f);
        (result, logs)
    }

    pub(crate) fn at(&self, level: Level) -> Vec<String> {
        let lines = self.0.lock().expect("log lock");
        lines
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, text)| text.clone())
            .collect()
    }

    pub(crate) fn any(&self, level: Level, needle: &str) -> bool {
        self.at(level).iter().any(|line| line.contains(needle))
    }
}

struct Capture(Logs);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        let level = *event.metadata().level();
        self.0 .0.lock().expect("log lock").push((level, line.0));
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}
