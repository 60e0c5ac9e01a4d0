//! Settings of one cache, named after the Galera options they stand for.

use std::path::PathBuf;

use crate::GcacheError;

/// Smallest ring accepted. Far below anything useful in production, but small enough for
/// tests to wrap the ring thousands of times in milliseconds.
pub const MIN_RING_SIZE: u64 = 64 << 10;

/// Smallest overflow page size accepted (`gcache.page_size`).
pub const MIN_PAGE_SIZE: u64 = 4 << 10;

/// Galera's default ring file name (`gcache.name`).
pub const DEFAULT_NAME: &str = "galera.cache";

/// Prefix of overflow page file names inside [`GcacheConfig::dir`].
pub const PAGE_FILE_PREFIX: &str = "gcache.page.";

/// How a cache is laid out on disk and how long it keeps what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcacheConfig {
    /// `gcache.dir`: directory of the ring file and the overflow pages. Created if missing.
    /// One cache per directory: page files have fixed names.
    pub dir: PathBuf,
    /// `gcache.name`: file name of the ring inside `dir` (default `galera.cache`).
    pub name: String,
    /// `gcache.size`: bytes of the preallocated ring file, header included (default 128 MiB).
    pub size: u64,
    /// `gcache.page_size`: size of an overflow page; a record larger than this gets a page of
    /// its own size (default 128 MiB).
    pub page_size: u64,
    /// `gcache.keep_pages_size`: bytes of overflow pages kept, with the records in them still
    /// served, after retention stopped needing them (default 0: release pages promptly).
    pub keep_pages_size: u64,
    /// `gcache.keep_seconds` (Trireme): keep every record younger than this, spilling to pages
    /// if the ring is too small (default 0: keep by size only).
    pub keep_seconds: u64,
    /// `gcache.max_disk_bytes` (Trireme): ceiling on ring plus pages that no retention rule
    /// may exceed (default 0: no ceiling).
    pub max_disk_bytes: u64,
    /// `gcache.recover`: rebuild the cache from its files at open, so that a restarted node
    /// can serve IST at once (default true; false starts empty).
    pub recover: bool,
}

impl GcacheConfig {
    /// The defaults, with the files in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> GcacheConfig {
        GcacheConfig {
            dir: dir.into(),
            name: DEFAULT_NAME.to_owned(),
            size: 128 << 20,
            page_size: 128 << 20,
            keep_pages_size: 0,
            keep_seconds: 0,
            max_disk_bytes: 0,
            recover: true,
        }
    }

    /// The ring file's full path.
    pub fn ring_path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Checks the settings against each other; [`crate::Gcache::open`] calls this first.
    pub fn validate(&self) -> Result<(), GcacheError> {
        let invalid = |option: &'static str, reason: String| {
            Err(GcacheError::InvalidConfig { option, reason })
        };
        if self.name.is_empty() || self.name.contains('/') || self.name == "." || self.name == ".."
        {
            return invalid(
                "gcache.name",
                format!("{:?} is not a plain file name", self.name),
            );
        }
        if self.name.starts_with(PAGE_FILE_PREFIX) {
            return invalid(
                "gcache.name",
                format!(
                    "{:?} would collide with overflow page names ({PAGE_FILE_PREFIX}NNNNNN)",
                    self.name
                ),
            );
        }
        if self.size < MIN_RING_SIZE {
            return invalid(
                "gcache.size",
                format!(
                    "{} bytes is below the minimum of {MIN_RING_SIZE}",
                    self.size
                ),
            );
        }
        if self.page_size < MIN_PAGE_SIZE {
            return invalid(
                "gcache.page_size",
                format!(
                    "{} bytes is below the minimum of {MIN_PAGE_SIZE}",
                    self.page_size
                ),
            );
        }
        if self.max_disk_bytes != 0 && self.max_disk_bytes < self.size {
            return invalid(
                "gcache.max_disk_bytes",
                format!(
                    "{} bytes cannot hold the {}-byte ring (gcache.size); use 0 for no ceiling",
                    self.max_disk_bytes, self.size
                ),
            );
        }
        Ok(())
    }

    /// `keep_seconds` in nanoseconds, saturating rather than wrapping for absurd values.
    pub(crate) fn keep_nanos(&self) -> u64 {
        self.keep_seconds.saturating_mul(1_000_000_000)
    }
}
