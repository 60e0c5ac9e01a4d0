//! A large record's payload written past the page cache.
//!
//! A write-set of hundreds of megabytes (a DELETE of 800,000 rows is 160 MB) is cached on
//! every node while its appliers start on it, and is read back only if a joiner asks for it
//! by IST. Through the page cache, its write cost each node more than a CPU-second where free
//! memory is cold, taken from the appliers everyone else's commits were waiting for. So the
//! aligned middle of a large payload goes to the device with `O_DIRECT` (see the `direct-io`
//! crate), through one reused aligned window; its unaligned ends, and the whole of it where
//! the file system refuses, go through the page cache.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use direct_io::{align_down, align_up, open_direct, write_direct, AlignedBuffer};

/// A payload at least this large is written past the page cache.
pub(super) const DIRECT_PAYLOAD_MIN: usize = 4 << 20;

/// The aligned window each direct write goes through.
const WINDOW_BYTES: usize = 4 << 20;

const _: () = assert!(WINDOW_BYTES % direct_io::DIRECT_ALIGN == 0);
const _: () = assert!(DIRECT_PAYLOAD_MIN >= 2 * direct_io::DIRECT_ALIGN);

/// The window, kept from one large record to the next, and what went through it.
#[derive(Default)]
pub(super) struct PastPageCache {
    window: Option<AlignedBuffer>,
    written: u64,
}

impl PastPageCache {
    /// Bytes written past the page cache since the cache was opened.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Writes `payload` at `offset` of `file` (opened at `path`): its aligned middle
    /// directly when it is large enough and the file system allows.
    pub(super) fn write(
        &mut self,
        file: &File,
        path: &Path,
        payload: &[u8],
        offset: u64,
    ) -> io::Result<()> {
        let end = offset + payload.len() as u64;
        let (middle_start, middle_end) = (align_up(offset), align_down(end));
        if payload.len() < DIRECT_PAYLOAD_MIN || middle_end <= middle_start {
            return file.write_all_at(payload, offset);
        }
        let Some(direct) = open_direct(path)? else {
            return file.write_all_at(payload, offset);
        };
        let at = |position: u64| (position - offset) as usize;
        file.write_all_at(&payload[..at(middle_start)], offset)?;
        let window = self
            .window
            .get_or_insert_with(|| AlignedBuffer::new(WINDOW_BYTES));
        let mut position = middle_start;
        while position < middle_end {
            let len = (middle_end - position).min(WINDOW_BYTES as u64) as usize;
            let piece = &payload[at(position)..at(position) + len];
            let aligned = window.fill(piece).expect("a piece fits the window");
            if write_direct(&direct, aligned, position)? {
                self.written += len as u64;
            } else {
                file.write_all_at(piece, position)?;
            }
            position += len as u64;
        }
        file.write_all_at(&payload[at(middle_end)..], middle_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Payloads at every alignment land whole, and only a large one goes past the cache.
    #[test]
    fn a_large_payload_at_any_offset_lands_whole_past_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut past = PastPageCache::default();
        let small: Vec<u8> = (0..DIRECT_PAYLOAD_MIN - 1)
            .map(|i| (i % 253) as u8)
            .collect();
        past.write(&file, &path, &small, 100).unwrap();
        assert_eq!(past.written(), 0);
        let large: Vec<u8> = (0..DIRECT_PAYLOAD_MIN + WINDOW_BYTES + 77)
            .map(|i| (i % 251) as u8)
            .collect();
        for offset in [0, 1, 4095, 4096, 10_000_001] {
            let before = past.written();
            past.write(&file, &path, &large, offset).unwrap();
            let mut back = vec![0; large.len()];
            file.read_exact_at(&mut back, offset).unwrap();
            assert!(back == large, "payload at {offset} read back different");
            let direct = past.written() - before;
            assert!(
                direct > large.len() as u64 - 2 * 4096,
                "{direct} at {offset}"
            );
        }
    }
}
