//! Reading records back, each verified against its checksum.

use super::*;

impl Gcache {
    /// Reads one record, verifying its checksum; `None` if it is not cached.
    pub fn get(&self, seqno: Seqno) -> Result<Option<Record>, GcacheError> {
        let Some(entry) = self.entry(seqno) else {
            return Ok(None);
        };
        if let Some(bytes) = self.write_behind.holds(entry) {
            return verify_record(bytes.to_vec(), &self.ring_path, self.seed, seqno, entry)
                .map(Some);
        }
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
        if let Some(bytes) = cache.write_behind.holds(entry) {
            return verify_record(bytes.to_vec(), &cache.ring_path, cache.seed, seqno, entry);
        }
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

/// Reads and verifies the record the index says is at `entry`.
fn read_record(
    file: &File,
    path: &Path,
    seed: u32,
    seqno: Seqno,
    entry: &Entry,
) -> Result<Record, GcacheError> {
    let mut buf = vec![0u8; RECORD_HEADER_LEN + entry.len as usize];
    if let Err(e) = file.read_exact_at(&mut buf, entry.offset) {
        return Err(if e.kind() == io::ErrorKind::UnexpectedEof {
            corrupt(
                path,
                seqno,
                "record extends past the end of its file".to_owned(),
            )
        } else {
            GcacheError::io(path, e)
        });
    }
    verify_record(buf, path, seed, seqno, entry)
}

fn corrupt(path: &Path, seqno: Seqno, reason: String) -> GcacheError {
    tracing::warn!(seqno = seqno.0, file = %path.display(), %reason, "gcache read a corrupt record");
    GcacheError::Corrupt { seqno, reason }
}

/// Checks the bytes of the record the index says is at `entry` (its header, then the
/// payload, as read from `path` or still gathered for it) and returns it.
fn verify_record(
    mut buf: Vec<u8>,
    path: &Path,
    seed: u32,
    seqno: Seqno,
    entry: &Entry,
) -> Result<Record, GcacheError> {
    let corrupt = |reason: String| corrupt(path, seqno, reason);
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
