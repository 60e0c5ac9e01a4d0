//! The write-set cache ("gcache"): every action of the cluster's history, by seqno, on disk,
//! so that a donor can stream an incremental state transfer (IST) to a node that rejoins.
//!
//! Every seqno is appended in order, with no gaps; each record carries a `kind` tag the
//! caller picks (write-set, view, ...) and opaque bytes. The cache holds a consecutive
//! suffix of the history: purging always takes the oldest seqno first.
//!
//! # Storage
//!
//! - The **ring**, `<dir>/<name>` (`gcache.name`, default `galera.cache`), is preallocated
//!   to `gcache.size` bytes. Records are written one after another and the writer wraps to
//!   the front when the next record does not fit before the end; nothing marks the wrap.
//! - **Overflow pages**, `<dir>/gcache.page.NNNNNN`, take a record the ring cannot: one
//!   larger than the ring, or one arriving while retention forbids purging the ring's
//!   oldest records. A page is `max(gcache.page_size, record)` bytes and takes records
//!   until full; it is deleted once none of its records is cached. Pages no retention rule
//!   needs any more are released oldest first, at the next append or retention change,
//!   except that up to `gcache.keep_pages_size` bytes of them (with their records) are kept,
//!   and the page holding the newest record always stays.
//! - The in-memory index holds one small entry per cached seqno (where, how long, when),
//!   never payloads.
//!
//! Purging happens only when space is needed, and never touches a seqno that retention
//! protects: `gcache.freeze_purge_at_seqno` ([`FreezePurge`]), `gcache.keep_seconds`, and
//! the replicator's [`Gcache::set_retention_floor`]. `gcache.max_disk_bytes`, when set, is
//! a hard ceiling on ring plus pages that overrides retention: the oldest records are given
//! up, with a warning naming them.
//!
//! # On-disk format (version 1, little-endian)
//!
//! File header, 64 bytes, at offset 0 of the ring and of every page:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TRGCRING` (ring) or `TRGCPAGE` (page) |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | header length (64) |
//! | 16 | 16 | history: the cluster state UUID the records belong to |
//! | 32 | 8 | file size at creation |
//! | 40 | 8 | page number (0 for the ring) |
//! | 48 | 12 | reserved, zero |
//! | 60 | 4 | CRC32C of bytes 0..60 |
//!
//! Record, starting at a multiple of 8 bytes, header then payload, padded to 8:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `TGCR` |
//! | 4 | 4 | payload length |
//! | 8 | 8 | seqno (i64) |
//! | 16 | 8 | timestamp, unix-epoch nanoseconds |
//! | 24 | 1 | kind |
//! | 25 | 3 | reserved, zero |
//! | 28 | 4 | CRC32C of the history UUID, bytes 0..28 and the payload |
//! | 32 | len | payload |
//!
//! Seeding the record checksum with the history means records of another history never
//! verify, even if a file is reused.
//!
//! # Recovery (`gcache.recover`)
//!
//! At open, a ring whose header is damaged, of another format version, of another history
//! or of another `gcache.size` is discarded and reinitialised (logged, not an error), and
//! so are all page files. Otherwise every aligned offset of the ring and of each page with a
//! good header is probed for a record whose checksum verifies. Of the verified records, the
//! cache keeps the longest run of consecutive seqnos that ends at the highest one, and
//! within it only as far back as the ring records still form the layout appends produce
//! (offsets falling from newest to oldest, wrapping at most once). A seqno found twice is
//! treated as missing. Everything else is dropped, unused pages are deleted, and one log
//! line says what was kept and what was found damaged. A record is verified again on every
//! read; one that fails is an error ([`GcacheError::Corrupt`]), never returned.
//!
//! Reinitialising truncates the ring to zero length before restoring its size, so stale
//! records cannot come back, and [`Gcache::truncate_after`] erases the magic of what it
//! drops for the same reason.
//!
//! # Durability
//!
//! Like Galera's, this cache is not durable: appends are plain positional writes, never
//! synced, so after a power loss the newest records may be missing or torn. Small ring
//! records are gathered in memory and written together at [`Gcache::flush`] (or sooner,
//! see there), so a process crash loses what was appended since the owner last flushed;
//! the replicator flushes after each batch it caches, before its thread goes on. Recovery copes with that by keeping only verified records, so the worst
//! case is a shorter cache, never a wrong record. The database, not the cache, is the
//! node's durable state.
//!
//! # Concurrency
//!
//! A [`Gcache`] is used from one thread at a time (`&mut self` to write, `&self` to read);
//! sharing it between a replicator and an IST sender is the caller's business (a mutex).

mod cache;
mod config;
mod error;
mod format;
mod recovery;

#[cfg(test)]
mod tests;

pub use cache::{FreezePurge, Gcache, GcacheStatus, RangeReader, Record};
pub use config::{GcacheConfig, DEFAULT_NAME, MIN_PAGE_SIZE, MIN_RING_SIZE, PAGE_FILE_PREFIX};
pub use error::GcacheError;
