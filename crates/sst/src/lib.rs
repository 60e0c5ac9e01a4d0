//! The `trireme` state snapshot transfer (SST) method.
//!
//! MariaDB runs `wsrep_sst_trireme` (the binary of this crate) on the joiner and on the
//! donor, with the arguments of its SST script interface. The joiner checks everything it
//! can before it touches anything (preflight), listens, and prints `ready <address>`; the
//! donor connects several TCP streams to that address and sends a hot `mariadb-backup`
//! snapshot over them:
//!
//! ```text
//! donor                                              joiner
//! mariadb-backup --backup --stream=xbstream          preflight: port, tool, versions
//!   │ xbstream chunks (one pipe)                     ready 127.0.0.1:P/trireme/<session>
//!   ▼                                                  ▲
//! split at 1 MiB file offsets ──► work queue           │ Plan (size, versions) / Accept
//!   ▼            ▼           ▼                         │ (resume manifest) or Reject
//! stream 0    stream 1 …  stream N-1   ── Data ──►   one receiver per stream:
//!   CRC32C, optional zstd, rate limit  ◄─ Ack/Nack ─   verify CRC32C, pwrite into the
//!   a Nacked piece is sent again                       staging dir, journal the piece
//! Done ─────────────────────────────────────────────► verify counts ─► Finished
//!                                                    prepare (--use-memory from free RAM)
//!                                                    swap staging <-> datadir atomically
//!                                                    print uuid:seqno from the snapshot
//! ```
//!
//! Pieces are identified by (file, offset), so streams need no ordering among themselves.
//! The joiner's journal lists every piece it verified and wrote; a later attempt sends it
//! to the donor as a manifest, and the donor sends a short `Same` instead of the data for
//! every piece whose length and digest are unchanged (a resumed transfer re-reads on the
//! donor but does not re-send). The old datadir stays untouched until the prepared snapshot
//! replaces its entries by renames (see [`swap`]).
//!
//! Every connection is checked before a frame crosses it (see [`session`]):
//! - TLS, with both ends presenting a certificate that must chain to the CA file, whenever
//!   `[sst]` names a key and a certificate (`tkey`/`tcert`/`tca`, or `ssl-key`/`ssl-cert`/
//!   `ssl-ca`; `encrypt` plays no part), else whenever the provider has TLS on (the
//!   `socket.ssl_*` files of `wsrep_provider_options`), else plaintext. The donor is the
//!   TLS client, the joiner the server. See [`config::resolve_tls`].
//! - The session secret: the `<session>` of the ready address is 256 random bits that reach
//!   the donor only through the group (the server sends the ready address as its state
//!   transfer request). Each side proves it holds the secret by an HMAC over fresh nonces,
//!   so the secret itself never crosses an SST connection, and the joiner refuses every
//!   connection that does not prove it: only the donor the group chose can stream.

// An I/O shell like `transport`: it runs processes, threads, sockets and the wall clock.
#![allow(clippy::disallowed_methods)]

pub mod config;
pub mod donor;
pub mod frame;
pub mod joiner;
pub mod journal;
pub mod progress;
pub mod session;
pub mod swap;
pub mod xbstream;

use std::io;

/// The method's name: `wsrep_sst_method=trireme`.
pub const METHOD: &str = "trireme";
/// Pieces are cut at multiples of this file offset, so that two attempts cut the same
/// file the same way and a resumed transfer recognises what it already has.
pub const PIECE_BYTES: u64 = 1 << 20;

/// Why an SST attempt failed. Each kind maps to the exit code MariaDB reports (it prints
/// the code as an errno), and every message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SstError {
    /// A setting or argument is wrong.
    #[error("{0}")]
    Config(String),
    /// A check before the transfer failed; nothing was touched.
    #[error("preflight check failed: {message}")]
    Preflight {
        /// What failed and how to fix it.
        message: String,
        /// The errno-like exit code (EADDRINUSE, ENOSPC, ENOENT, EACCES, ...).
        code: i32,
    },
    /// The other side refused or reported an error.
    #[error("{0}")]
    Peer(String),
    /// The other side sent something that is not this protocol, or broke it.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A connection or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
    /// An external tool (mariadb-backup) failed.
    #[error("{0}")]
    Tool(String),
    /// A TLS handshake with the other side failed; the message says which side refused what.
    #[error("{0}")]
    Tls(String),
}

impl SstError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: io::Error) -> SstError {
        SstError::Io {
            what: what.into(),
            source,
        }
    }

    /// The process exit code for this error (an errno value, as the stock scripts use).
    pub fn exit_code(&self) -> i32 {
        match self {
            SstError::Config(_) => 22, // EINVAL
            SstError::Preflight { code, .. } => *code,
            SstError::Peer(_) => 125,    // ECANCELED
            SstError::Protocol(_) => 71, // EPROTO
            SstError::Io { .. } => 32,   // EPIPE
            SstError::Tool(_) => 5,      // EIO
            SstError::Tls(_) => 71,      // EPROTO, as for a protocol mismatch
        }
    }
}

/// Exit codes of the preflight checks.
pub mod exit_code {
    /// The listening port is taken.
    pub const ADDRESS_IN_USE: i32 = 98;
    /// Not enough disk.
    pub const NO_SPACE: i32 = 28;
    /// A tool is missing.
    pub const NOT_FOUND: i32 = 2;
    /// Credentials were refused, or a directory is not writable.
    pub const ACCESS: i32 = 13;
    /// Versions do not match.
    pub const VERSION: i32 = 95; // EOPNOTSUPP
}

/// A `uuid:seqno` position as MariaDB passes and expects it.
pub fn is_position(text: &str) -> bool {
    let Some((uuid, rest)) = text.split_once(':') else {
        return false;
    };
    let seqno = rest.split_whitespace().next().unwrap_or("");
    uuid.len() == 36 && seqno.parse::<i64>().is_ok()
}

/// One line for the server's error log, in the stock scripts' format
/// (`WSREP_SST: [LEVEL] message`), written to stderr, which the server copies into its log.
pub fn log(level: &str, message: &str) {
    use std::io::Write;
    let line = format!("WSREP_SST: [{level}] {message}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_recognised() {
        assert!(is_position("6ba7b810-9dad-11d1-80b4-00c04fd430c8:42"));
        assert!(is_position("6ba7b810-9dad-11d1-80b4-00c04fd430c8:-1 0"));
        assert!(!is_position("6ba7b810:42"));
        assert!(!is_position("6ba7b810-9dad-11d1-80b4-00c04fd430c8:x"));
    }
}
