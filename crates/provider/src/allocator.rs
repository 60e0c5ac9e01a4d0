//! The library's allocator: jemalloc for everything but very large blocks, which glibc keeps.
//!
//! - Write-sets, frames and Raft chunks are blocks of a few bytes to a megabyte, allocated
//!   and freed by the thousand a second. glibc mapped each one of 128 KB and more fresh and
//!   unmapped it on free, so the kernel cleared its pages every time; jemalloc keeps freed
//!   pages for reuse.
//! - A large transaction's write-set grows to hundreds of megabytes one row at a time, on its
//!   origin and again where it is reassembled. glibc grows such a block by remapping its pages
//!   (`mremap`), where jemalloc copies it to a new place at each doubling.
//!
//! The server's own allocations never pass here: the server keeps glibc.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

use tikv_jemallocator::Jemalloc;

/// Blocks of this size and more go to glibc: well above a large write-set's chunk and a
/// Raft message (about 1 MiB), so that those, and every ordinary write-set, stay with
/// jemalloc.
pub(crate) const LARGE_BLOCK_BYTES: usize = 4 << 20;

const _: () = assert!(LARGE_BLOCK_BYTES > group::CHUNK_BYTES);

/// jemalloc below [`LARGE_BLOCK_BYTES`], glibc at and above it. The block's size alone
/// decides, so a block is always freed by the allocator that gave it.
pub(crate) struct ProviderAllocator;

fn is_large(size: usize) -> bool {
    size >= LARGE_BLOCK_BYTES
}

// SAFETY: every method hands the call to one of two allocators that meet GlobalAlloc's
// contract, chosen by the block's size, which the caller passes unchanged to `dealloc` and
// `realloc`; a block that changes sides is copied into a block of the other allocator.
unsafe impl GlobalAlloc for ProviderAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
            unsafe { System.alloc(layout) }
        } else {
            // SAFETY: as above.
            unsafe { Jemalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc_zeroed requires.
            unsafe { System.alloc_zeroed(layout) }
        } else {
            // SAFETY: as above.
            unsafe { Jemalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if is_large(layout.size()) {
            // SAFETY: a block of this size came from System (see `alloc` and `realloc`).
            unsafe { System.dealloc(block, layout) }
        } else {
            // SAFETY: a block of this size came from Jemalloc.
            unsafe { Jemalloc.dealloc(block, layout) }
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (is_large(layout.size()), is_large(new_size)) {
            // SAFETY: the block came from System; the caller's arguments, unchanged.
            (true, true) => unsafe { System.realloc(block, layout, new_size) },
            // SAFETY: the block came from Jemalloc; the caller's arguments, unchanged.
            (false, false) => unsafe { Jemalloc.realloc(block, layout, new_size) },
            // SAFETY: GlobalAlloc::realloc's contract makes `new_size` with the old alignment
            // a valid layout.
            _ => unsafe { self.move_block(block, layout, new_size) },
        }
    }
}

impl ProviderAllocator {
    /// Moves a block to the other allocator: a new block of `new_size`, the bytes both
    /// sizes hold copied, the old block freed.
    ///
    /// # Safety
    /// `block` was allocated here with `layout`, and `new_size` with `layout`'s alignment is
    /// a valid, non-zero layout.
    unsafe fn move_block(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller vouches for the new layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a valid, non-zero layout.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks are live, distinct, and hold at least the bytes copied.
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills a block with a pattern that tells its bytes apart.
    fn fill(block: *mut u8, size: usize) {
        for i in 0..size {
            // SAFETY: i < size, the block's size.
            unsafe { *block.add(i) = (i % 251) as u8 };
        }
    }

    fn holds_pattern(block: *const u8, size: usize) -> bool {
        // SAFETY: the block holds at least `size` bytes.
        (0..size).all(|i| unsafe { *block.add(i) } == (i % 251) as u8)
    }

    #[test]
    fn a_block_keeps_its_bytes_as_it_grows_past_the_limit_and_shrinks_back() {
        let small = 1 << 20;
        let large = LARGE_BLOCK_BYTES + (1 << 20);
        for align in [8, 64, 4096] {
            let layout = Layout::from_size_align(small, align).unwrap();
            // SAFETY: a valid, non-zero layout; every block below is freed with the layout
            // of its last size.
            unsafe {
                let block = ProviderAllocator.alloc(layout);
                assert!(!block.is_null());
                fill(block, small);
                let grown = ProviderAllocator.realloc(block, layout, large);
                assert!(!grown.is_null());
                assert_eq!(grown as usize % align, 0, "alignment kept across the move");
                assert!(holds_pattern(grown, small), "copied into the large block");
                fill(grown, large);
                let large_layout = Layout::from_size_align(large, align).unwrap();
                let larger = ProviderAllocator.realloc(grown, large_layout, 2 * large);
                assert!(holds_pattern(larger, large), "grown within the large side");
                let larger_layout = Layout::from_size_align(2 * large, align).unwrap();
                let shrunk = ProviderAllocator.realloc(larger, larger_layout, small);
                assert!(
                    holds_pattern(shrunk, small),
                    "copied back into a small block"
                );
                ProviderAllocator.dealloc(shrunk, layout);
            }
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_on_both_sides() {
        for size in [4096, LARGE_BLOCK_BYTES] {
            let layout = Layout::from_size_align(size, 16).unwrap();
            // SAFETY: a valid, non-zero layout, freed with the same layout.
            unsafe {
                let block = ProviderAllocator.alloc_zeroed(layout);
                assert!(!block.is_null());
                assert!((0..size).all(|i| *block.add(i) == 0));
                ProviderAllocator.dealloc(block, layout);
            }
        }
    }
}
