//! Writing past the page cache.
//!
//! Some files are written once, in bulk, and not read back soon: a state transfer's staged
//! data files (InnoDB reads them with `O_DIRECT`), a large write-set in the gcache (read back
//! only if a joiner asks for it by IST). Written through the page cache, they cost the
//! kernel one more copy into pages that must first be found and cleared, and where free
//! memory is cold (just dropped, or handed back to a hypervisor) that costs more CPU than
//! everything else the writer does, CPU its host shares with the database. So an aligned
//! window goes straight to the device. A file system that refuses `O_DIRECT` (tmpfs before
//! Linux 6.6) or a device that wants another alignment says `EINVAL`; the caller then writes
//! through the page cache as before. Both kinds of write are coherent with each other and
//! with later reads.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The alignment of a direct write's offset, length and buffer: the largest logical block
/// size a device here may have.
pub const DIRECT_ALIGN: usize = 4096;

/// Whether `len` bytes at `offset` can be written directly.
pub fn is_aligned(offset: u64, len: usize) -> bool {
    len > 0 && offset % DIRECT_ALIGN as u64 == 0 && len % DIRECT_ALIGN == 0
}

/// `offset` rounded up to the next multiple of [`DIRECT_ALIGN`].
pub fn align_up(offset: u64) -> u64 {
    offset.next_multiple_of(DIRECT_ALIGN as u64)
}

/// `offset` rounded down to a multiple of [`DIRECT_ALIGN`].
pub fn align_down(offset: u64) -> u64 {
    offset - offset % DIRECT_ALIGN as u64
}

/// A reusable buffer with an aligned window of a fixed size.
pub struct AlignedBuffer {
    bytes: Vec<u8>,
    window: usize,
}

impl AlignedBuffer {
    /// A buffer whose window takes up to `window` bytes.
    pub fn new(window: usize) -> AlignedBuffer {
        AlignedBuffer {
            bytes: vec![0; window + DIRECT_ALIGN],
            window,
        }
    }

    /// `data` copied into the aligned window, or `None` when it does not fit (or the
    /// allocator's address cannot be aligned).
    pub fn fill(&mut self, data: &[u8]) -> Option<&[u8]> {
        let start = self.bytes.as_ptr().align_offset(DIRECT_ALIGN);
        if start >= DIRECT_ALIGN || data.len() > self.window {
            return None;
        }
        let window = &mut self.bytes[start..start + data.len()];
        window.copy_from_slice(data);
        Some(window)
    }
}

/// Opens an existing file for direct writes; `None` when its file system refuses.
pub fn open_direct(path: &Path) -> io::Result<Option<File>> {
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

/// Writes an aligned window; `Ok(false)` when the device refuses a direct write of it (the
/// caller writes it through the page cache instead).
pub fn write_direct(file: &File, aligned: &[u8], offset: u64) -> io::Result<bool> {
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
        assert!(is_aligned(1 << 20, 1 << 20));
        assert!(!is_aligned(0, 0));
        assert!(!is_aligned(512, DIRECT_ALIGN));
        assert!(!is_aligned(0, DIRECT_ALIGN + 512));
        assert_eq!(align_up(1), DIRECT_ALIGN as u64);
        assert_eq!(align_up(DIRECT_ALIGN as u64), DIRECT_ALIGN as u64);
        assert_eq!(align_down(DIRECT_ALIGN as u64 + 5), DIRECT_ALIGN as u64);
    }

    #[test]
    fn the_window_is_aligned_and_holds_the_data() {
        let mut buffer = AlignedBuffer::new(1 << 20);
        let data: Vec<u8> = (0..1 << 20).map(|i| i as u8).collect();
        let window = buffer.fill(&data).unwrap();
        assert_eq!(window.as_ptr().align_offset(DIRECT_ALIGN), 0);
        assert_eq!(window, &data[..]);
        assert!(buffer.fill(&vec![0; (1 << 20) + 1]).is_none());
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
        let mut buffer = AlignedBuffer::new(2 * DIRECT_ALIGN);
        let data = vec![7u8; 2 * DIRECT_ALIGN];
        let window = buffer.fill(&data).unwrap();
        assert!(write_direct(&file, &window[..DIRECT_ALIGN], 0).unwrap());
        let misaligned = &window[1..=DIRECT_ALIGN];
        assert!(!write_or_refused(&file, misaligned, 0).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; DIRECT_ALIGN]);
    }
}
