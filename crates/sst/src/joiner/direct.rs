//! Staging pieces past the page cache.
//!
//! InnoDB reads its data files with `O_DIRECT` (`innodb_flush_method`'s default), and
//! `mariadb-backup --prepare` reads only the pages its redo touches, so a snapshot staged
//! through the page cache is copied once more by the kernel and then never read from there.
//! Where free memory is cold (just dropped, or handed back to a hypervisor), that copy costs
//! the receivers more CPU than everything else they do, CPU the joiner's host shares with
//! the cluster. So an aligned piece goes straight to the device. A file system that refuses
//! `O_DIRECT` (tmpfs before Linux 6.6), and a piece that is not aligned (a file's tail), go
//! through the page cache as before; both kinds of write are coherent with each other and
//! with later reads.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::PIECE_BYTES;

/// The alignment of a direct write's offset, length and buffer: the largest logical block
/// size a device here may have.
pub(super) const DIRECT_ALIGN: usize = 4096;

const _: () = assert!(PIECE_BYTES as usize % DIRECT_ALIGN == 0);

/// Whether a piece at `offset` of `len` bytes can be written directly.
pub(super) fn is_aligned(offset: u64, len: usize) -> bool {
    len > 0 && offset % DIRECT_ALIGN as u64 == 0 && len % DIRECT_ALIGN == 0
}

/// One receiver's reusable buffer with an aligned window for a whole piece.
pub(super) struct AlignedBuffer {
    bytes: Vec<u8>,
}

impl AlignedBuffer {
    /// A buffer for pieces of up to [`PIECE_BYTES`].
    pub(super) fn new() -> AlignedBuffer {
        AlignedBuffer {
            bytes: vec![0; PIECE_BYTES as usize + DIRECT_ALIGN],
        }
    }

    /// `data` copied into the aligned window, or `None` when it does not fit (or the
    /// allocator's address cannot be aligned).
    pub(super) fn fill(&mut self, data: &[u8]) -> Option<&[u8]> {
        let start = self.bytes.as_ptr().align_offset(DIRECT_ALIGN);
        if start >= DIRECT_ALIGN || data.len() > PIECE_BYTES as usize {
            return None;
        }
        let window = &mut self.bytes[start..start + data.len()];
        window.copy_from_slice(data);
        Some(window)
    }
}

/// Opens an existing staging file for direct writes; `None` when its file system refuses.
pub(super) fn open_direct(path: &Path) -> io::Result<Option<File>> {
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(e) if refuses_direct(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes an aligned piece; `Ok(false)` when the device refuses a direct write of it (the
/// caller writes it through the page cache instead).
pub(super) fn write_direct(file: &File, aligned: &[u8], offset: u64) -> io::Result<bool> {
    debug_assert!(is_aligned(offset, aligned.len()));
    debug_assert_eq!(aligned.as_ptr().align_offset(DIRECT_ALIGN), 0);
    write_or_refused(file, aligned, offset)
}

fn write_or_refused(file: &File, bytes: &[u8], offset: u64) -> io::Result<bool> {
    match file.write_all_at(bytes, offset) {
        Ok(()) => Ok(true),
        Err(e) if refuses_direct(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `EINVAL`: the file system has no `O_DIRECT`, or the device wants another alignment.
fn refuses_direct(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_blocks_at_block_offsets_are_aligned() {
        assert!(is_aligned(0, DIRECT_ALIGN));
        assert!(is_aligned(PIECE_BYTES, PIECE_BYTES as usize));
        assert!(!is_aligned(0, 0));
        assert!(!is_aligned(512, DIRECT_ALIGN));
        assert!(!is_aligned(0, DIRECT_ALIGN + 512));
    }

    #[test]
    fn the_window_is_aligned_and_holds_the_data() {
        let mut buffer = AlignedBuffer::new();
        let data: Vec<u8> = (0..PIECE_BYTES as usize).map(|i| i as u8).collect();
        let window = buffer.fill(&data).unwrap();
        assert_eq!(window.as_ptr().align_offset(DIRECT_ALIGN), 0);
        assert_eq!(window, &data[..]);
        assert!(buffer.fill(&vec![0; PIECE_BYTES as usize + 1]).is_none());
    }

    /// A direct write the kernel refuses (here: from a misaligned buffer) is reported as
    /// refused, for the caller to write through the page cache; an aligned one lands.
    #[test]
    fn a_refused_direct_write_is_told_apart_from_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ibd");
        File::create(&path).unwrap();
        let Some(file) = open_direct(&path).unwrap() else {
            panic!("the temporary directory's file system refuses O_DIRECT");
        };
        let mut buffer = AlignedBuffer::new();
        let data = vec![7u8; 2 * DIRECT_ALIGN];
        let window = buffer.fill(&data).unwrap();
        assert!(write_direct(&file, &window[..DIRECT_ALIGN], 0).unwrap());
        let misaligned = &window[1..=DIRECT_ALIGN];
        assert!(!write_or_refused(&file, misaligned, 0).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; DIRECT_ALIGN]);
    }
}
