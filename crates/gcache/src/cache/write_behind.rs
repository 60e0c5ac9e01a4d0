//! Write-behind of small ring records: the newest records, consecutive in the ring, are
//! gathered in memory and written with one call when the owner flushes (or when the next
//! record does not follow them). One positional write per record cost the IST receiver
//! more than decoding its records: the kernel's buffered write path runs once per call and
//! per page touched, and a page holds several small records.

use super::*;

/// Most bytes gathered before they are written, whatever the owner's batch.
pub(super) const WRITE_BEHIND_MAX: usize = 1 << 20;

// A record small enough to be gathered always fits in an empty buffer.
const _: () = assert!(
    (SCRATCH_RECORD_MAX + RECORD_HEADER_LEN) as u64 + RECORD_ALIGN <= WRITE_BEHIND_MAX as u64
);

/// Ring records appended but not written yet: always the newest ring records, laid out as
/// they go on disk (each padded to its aligned length), starting at `offset`.
#[derive(Debug, Default)]
pub(super) struct WriteBehind {
    /// Ring offset of the first gathered byte; meaningless while `bytes` is empty.
    offset: u64,
    /// The oldest seqno gathered.
    first: Seqno,
    bytes: Vec<u8>,
}

impl WriteBehind {
    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The ring offset right after the gathered bytes, `None` when nothing is gathered.
    pub(super) fn end(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.offset + self.bytes.len() as u64)
    }

    /// Whether a record of `need` bytes placed at ring offset `offset` can join the bytes
    /// gathered (or start a new run).
    fn takes(&self, offset: u64, need: u64) -> bool {
        let room = self.bytes.len() as u64 + need <= WRITE_BEHIND_MAX as u64;
        self.end().is_none_or(|end| end == offset) && room
    }

    /// The gathered bytes of the ring record at `entry`, if it has not been written yet.
    pub(super) fn holds(&self, entry: &Entry) -> Option<&[u8]> {
        let end = self.end()?;
        if entry.loc != Loc::Ring || entry.offset < self.offset || entry.offset >= end {
            return None;
        }
        let start = (entry.offset - self.offset) as usize;
        let len = RECORD_HEADER_LEN + entry.len as usize;
        self.bytes.get(start..start + len)
    }

    /// Forgets the gathered bytes without writing them (the records are being dropped).
    pub(super) fn discard(&mut self) {
        self.bytes.clear();
    }
}

impl Gcache {
    /// Gathers a small ring record (header and payload already encoded in the scratch
    /// buffer) at `offset`, writing what was gathered before first if it does not follow.
    pub(super) fn gather(
        &mut self,
        seqno: Seqno,
        offset: u64,
        need: u64,
    ) -> Result<(), GcacheError> {
        if !self.write_behind.takes(offset, need) {
            self.flush()?;
        }
        let gathered = &mut self.write_behind;
        if gathered.is_empty() {
            gathered.offset = offset;
            gathered.first = seqno;
        }
        let start = gathered.bytes.len();
        gathered.bytes.extend_from_slice(&self.scratch);
        gathered.bytes.resize(start + need as usize, 0);
        Ok(())
    }

    /// Writes the records appended since the last flush to the ring file. The cache also
    /// flushes by itself before any other write to the ring, when a record does not
    /// follow the gathered ones, when [`WRITE_BEHIND_MAX`] bytes are gathered, and when it
    /// is dropped; reads see gathered records at once. An owner flushes when it is done
    /// with a batch, so that a process crash loses no more than it would have without the
    /// gathering.
    ///
    /// If the write fails, the gathered records are dropped from the cache (it must not
    /// list records its files do not hold) and the next append must follow what is left.
    pub fn flush(&mut self) -> Result<(), GcacheError> {
        let Some(end) = self.write_behind.end() else {
            return Ok(());
        };
        let offset = self.write_behind.offset;
        debug_assert!(
            end <= self.ring_end,
            "gathered records stay inside the ring"
        );
        let written = self.ring.write_all_at(&self.write_behind.bytes, offset);
        let first = self.write_behind.first;
        self.write_behind.discard();
        let Err(error) = written else {
            return Ok(());
        };
        let error = GcacheError::io(&self.ring_path, error);
        tracing::warn!(%error, from = first.0, "gcache could not write its newest records; dropping them");
        if self.seqno_max().is_some_and(|newest| newest >= first) {
            // Erases whatever part of them reached the file, so a restart cannot find them.
            if let Err(also) = self.truncate_after(first.prev()) {
                tracing::warn!(error = %also, "gcache could not drop the records it failed to write");
            }
        }
        Err(error)
    }
}
