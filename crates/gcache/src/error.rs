//! What can go wrong in the cache.

use std::io;
use std::path::PathBuf;

use base::Seqno;

/// An error from the cache.
#[derive(Debug, thiserror::Error)]
pub enum GcacheError {
    /// A setting is out of range or contradicts another one.
    #[error("invalid {option}: {reason}")]
    InvalidConfig {
        /// The Galera-style option name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The operating system refused a file operation.
    #[error("gcache I/O error on {}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An append that does not continue the cached history (seqnos have no gaps).
    #[error("gcache gap: expected seqno {expected}, got {got}")]
    Gap {
        /// The only seqno the cache accepts next.
        expected: Seqno,
        /// The seqno offered.
        got: Seqno,
    },
    /// A seqno outside `0..i64::MAX` was appended (only ordered actions are cached).
    #[error("gcache cannot store seqno {0}: not an ordered action's seqno")]
    InvalidSeqno(Seqno),
    /// A payload longer than the record format can describe (u32 length).
    #[error("gcache record of {len} bytes exceeds the format's 4 GiB limit")]
    PayloadTooLarge {
        /// The payload length offered.
        len: usize,
    },
    /// A stored record failed verification on read; it is never returned.
    #[error("gcache record {seqno} is corrupt: {reason}")]
    Corrupt {
        /// The seqno that was being read.
        seqno: Seqno,
        /// What did not match.
        reason: String,
    },
    /// A range was asked for that the cache does not hold in full.
    #[error("gcache does not hold seqnos {from}..={to} (it holds {held})")]
    NotCached {
        /// First seqno asked for.
        from: Seqno,
        /// Last seqno asked for.
        to: Seqno,
        /// What the cache holds, for the log.
        held: String,
    },
}

impl GcacheError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> GcacheError {
        GcacheError::Io {
            path: path.into(),
            source,
        }
    }
}
