//! Why TLS could not be set up (at start or reload) or a handshake failed.

use std::io;
use std::path::PathBuf;

/// A TLS configuration that cannot be used. Each names the option and the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{option} {path:?}: cannot read: {source}")]
    Read {
        /// The option that names the file.
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A file holds nothing of the expected kind.
    #[error("{option} {path:?}: {problem}")]
    Content {
        /// The option that names the file.
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The private key does not belong to the certificate.
    #[error("{key:?} does not match the certificate: {detail}")]
    KeyMismatch {
        /// The key file.
        key: PathBuf,
        /// The options and the certificate's subject.
        detail: String,
    },
    /// The node's own certificate does not verify against the CA file (expired, not yet
    /// valid, another CA's): peers would refuse it.
    #[error("{cert:?}: {detail}")]
    OwnCertificate {
        /// The certificate file.
        cert: PathBuf,
        /// The subject, the CA file and the verification error.
        detail: String,
    },
    /// `socket.ssl_cipher` names no suite this TLS stack offers.
    #[error("socket.ssl_cipher {0}")]
    Cipher(String),
    /// The TLS library refused the configuration.
    #[error("TLS configuration refused: {0}")]
    Config(String),
}

/// A TLS handshake (or the first read after it) that failed, with the likely cause.
#[derive(Debug, thiserror::Error)]
#[error("TLS with {peer}: {cause}")]
pub struct HandshakeError {
    /// The peer's address.
    pub peer: String,
    /// What went wrong, for the log.
    pub cause: String,
    /// A refusal (certificates, TLS parameters, plaintext against TLS), which retrying at
    /// once will not fix; otherwise the connection broke or timed out.
    pub refused: bool,
}

impl HandshakeError {
    pub(crate) fn new(peer: &str, cause: impl Into<String>) -> HandshakeError {
        HandshakeError {
            peer: peer.to_owned(),
            cause: cause.into(),
            refused: false,
        }
    }

    pub(crate) fn refusal(mut self, refused: bool) -> HandshakeError {
        self.refused = refused;
        self
    }
}
