//! Staging pieces past the page cache (see the `direct-io` crate for why).
//!
//! InnoDB reads its data files with `O_DIRECT` (`innodb_flush_method`'s default), and
//! `mariadb-backup --prepare` reads only the pages its redo touches, so a snapshot staged
//! through the page cache is copied once more by the kernel and then never read from there.
//! An aligned piece goes straight to the device; a piece that is not aligned (a file's tail)
//! goes through the page cache.

pub(super) use direct_io::{is_aligned, open_direct, write_direct, AlignedBuffer};

use crate::PIECE_BYTES;

const _: () = assert!(PIECE_BYTES as usize % direct_io::DIRECT_ALIGN == 0);

/// One receiver's reusable buffer, with an aligned window for a whole piece.
pub(super) fn piece_buffer() -> AlignedBuffer {
    AlignedBuffer::new(PIECE_BYTES as usize)
}
