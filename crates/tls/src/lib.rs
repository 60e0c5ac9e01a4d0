//! TLS for every channel between nodes: group traffic, IST and the `trireme` SST stream.
//!
//! A [`TlsContext`] is built from Galera's `socket.ssl_*` files (or the `[sst]` section's
//! `tkey`/`tcert`/`tca`) by [`TlsContext::load`], which checks them the way a DBA needs:
//! every file readable and in PEM, the key matching the certificate, the node's own
//! certificate chaining to the CA file and not expired. A broken configuration is a
//! [`TlsError`] that names the option, the file and the problem.
//!
//! Authentication is mutual: both ends present a certificate that must chain to the CA file
//! (intermediates sent by the peer are used). Host names are not checked, as in Galera: the
//! CA is the gate. [`TlsContext::reload`] re-reads the files (`socket.ssl_reload`); new
//! connections use the new files, open ones keep theirs.
//!
//! [`TlsContext::connect`] and [`TlsContext::accept`] run the handshake over a connected
//! `TcpStream` and return a [`Stream`]; a failure is a [`HandshakeError`] that says what the
//! peer did wrong (no TLS at all, an untrusted certificate, refused ours).

// This crate is an I/O shell: it reads the clock to check certificate validity.
#![allow(clippy::disallowed_methods)]

mod cipher;
mod context;
mod error;
mod files;
mod stream;
mod verify;

pub use context::TlsContext;
pub use error::{HandshakeError, TlsError};
pub use files::{Labels, TlsFiles};
pub use stream::{explain, is_refusal, looks_like_tls, Stream, TLS_RECORD_HANDSHAKE};
