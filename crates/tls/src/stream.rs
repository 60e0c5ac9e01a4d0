//! A connection between nodes, plaintext or TLS, and the handshakes that make one.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::{AlertDescription, ClientConfig, ClientConnection, ServerConfig, ServerConnection};
use rustls::{Error, StreamOwned};
use rustls_pki_types::ServerName;

use crate::error::HandshakeError;
use crate::files::subject_of;

/// The first byte of every TLS connection (a handshake record).
pub const TLS_RECORD_HANDSHAKE: u8 = 0x16;

/// Whether the first byte a peer sent starts a TLS handshake. A plaintext listener uses
/// it to say "this peer speaks TLS" instead of "garbage".
pub fn looks_like_tls(first_byte: u8) -> bool {
    first_byte == TLS_RECORD_HANDSHAKE
}

/// A connection to or from another node.
#[derive(Debug)]
pub enum Stream {
    /// No TLS configured.
    Plain(TcpStream),
    /// TLS, this node connected.
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
    /// TLS, this node accepted.
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Stream {
    /// The socket underneath (to set timeouts, shut down or clone for shutdown).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Client(tls) => tls.get_ref(),
            Stream::Server(tls) => tls.get_ref(),
        }
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// Sends what it can of `bytes` without waiting for the peer, and returns how many of
    /// them it took. Plaintext: what the socket took at once. TLS: what the session took
    /// (all of it unless its buffer is full), encrypted; records the socket could not take
    /// at once stay in the session ([`Stream::has_unsent`]) and go first at the next write
    /// or flush.
    pub fn send_without_waiting(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => send_now(tcp, bytes),
            Stream::Client(tls) => {
                let taken = tls.conn.writer().write(bytes)?;
                while tls.conn.wants_write() {
                    match tls.conn.write_tls(&mut NoWait(&tls.sock)) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                        Err(error) => return Err(error),
                    }
                }
                Ok(taken)
            }
            // Accepted connections only read (each direction has its own connection).
            Stream::Server(_) => Ok(0),
        }
    }

    /// Whether encrypted records wait in the session for the socket (see
    /// [`Stream::send_without_waiting`]).
    pub fn has_unsent(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Client(tls) => tls.conn.wants_write(),
            Stream::Server(tls) => tls.conn.wants_write(),
        }
    }

    /// The subject of the certificate the peer presented (TLS only).
    pub fn peer_subject(&self) -> Option<String> {
        let certificates = match self {
            Stream::Plain(_) => None,
            Stream::Client(tls) => tls.conn.peer_certificates(),
            Stream::Server(tls) => tls.conn.peer_certificates(),
        };
        certificates?.first().map(subject_of)
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buffer),
            Stream::Client(tls) => tls.read(buffer),
            Stream::Server(tls) => tls.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(bytes),
            Stream::Client(tls) => tls.write(bytes),
            Stream::Server(tls) => tls.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Client(tls) => tls.flush(),
            Stream::Server(tls) => tls.flush(),
        }
    }
}

/// Writes to a socket without waiting: what it cannot take at once is `WouldBlock`. A
/// closed peer is an error, never a SIGPIPE (the server loading us may not ignore it).
struct NoWait<'a>(&'a TcpStream);

impl Write for NoWait<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        socket2::SockRef::from(self.0)
            .send_with_flags(bytes, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends as much of `bytes` as the socket takes at once.
fn send_now(tcp: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        match NoWait(tcp).write(&bytes[sent..]) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
            Err(error) => return Err(error),
        }
    }
    Ok(sent)
}

pub(crate) fn connect(
    config: Arc<ClientConfig>,
    mut tcp: TcpStream,
    peer: &str,
) -> Result<Stream, HandshakeError> {
    let address = tcp
        .peer_addr()
        .map_err(|error| HandshakeError::new(peer, format!("connection lost: {error}")))?;
    // Names are not checked (see `verify`); the address fills the field.
    let name = ServerName::IpAddress(address.ip().into());
    let mut connection = ClientConnection::new(config, name)
        .map_err(|error| HandshakeError::new(peer, error.to_string()))?;
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(&mut tcp) {
            return Err(HandshakeError::new(peer, explain(&error)).refusal(is_refusal(&error)));
        }
    }
    Ok(Stream::Client(Box::new(StreamOwned::new(connection, tcp))))
}

pub(crate) fn accept(
    config: Arc<ServerConfig>,
    mut tcp: TcpStream,
    peer: &str,
) -> Result<Stream, HandshakeError> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(0) => return Err(HandshakeError::new(peer, "closed before the TLS handshake")),
        Ok(_) if !looks_like_tls(first[0]) => {
            return Err(HandshakeError::new(
                peer,
                "the peer sent plaintext, not a TLS handshake: a node without socket.ssl_key \
                 and socket.ssl_cert, or not a node at all",
            )
            .refusal(true))
        }
        Ok(_) => {}
        Err(error) => return Err(HandshakeError::new(peer, explain(&error))),
    }
    let mut connection = ServerConnection::new(config)
        .map_err(|error| HandshakeError::new(peer, error.to_string()))?;
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(&mut tcp) {
            // Tell the peer why, if the library has an alert queued; only write, never wait
            // for more of the peer's bytes.
            while connection.wants_write() && connection.write_tls(&mut tcp).is_ok_and(|n| n > 0) {}
            return Err(HandshakeError::new(peer, explain(&error)).refusal(is_refusal(&error)));
        }
    }
    Ok(Stream::Server(Box::new(StreamOwned::new(connection, tcp))))
}

/// Whether a handshake (or first read) failure is a refusal (a certificate or the TLS
/// parameters turned down by one side), as opposed to a connection that broke or timed out.
/// A refusal will not fix itself by retrying at once.
pub fn is_refusal(error: &io::Error) -> bool {
    let tls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>());
    matches!(
        tls_error,
        Some(
            Error::AlertReceived(_)
                | Error::InvalidCertificate(_)
                | Error::NoCertificatesPresented
                | Error::PeerIncompatible(_)
                | Error::InvalidMessage(_)
                | Error::InappropriateMessage { .. }
        )
    )
}

/// A handshake (or first read) failure in a DBA's words, with the likely cause.
pub fn explain(error: &io::Error) -> String {
    let tls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>());
    match tls_error {
        Some(Error::AlertReceived(alert)) => explain_alert(*alert),
        Some(Error::InvalidCertificate(reason)) => format!(
            "the peer's certificate was refused: {reason} (is it signed by this node's CA?)"
        ),
        Some(Error::InvalidMessage(_) | Error::InappropriateMessage { .. }) => {
            format!("the peer does not speak TLS ({error}): is socket.ssl configured on it?")
        }
        Some(other) => format!("TLS failed: {other}"),
        None => match error.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => format!(
                "the peer closed the connection during the TLS handshake ({error}): it may \
                 have no TLS configured, or refused this node's certificate"
            ),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                "no TLS handshake in time: the peer may not speak TLS".to_owned()
            }
            _ => format!("connection failed during the TLS handshake: {error}"),
        },
    }
}

fn explain_alert(alert: AlertDescription) -> String {
    match alert {
        AlertDescription::UnknownCA
        | AlertDescription::BadCertificate
        | AlertDescription::CertificateUnknown
        | AlertDescription::CertificateExpired
        | AlertDescription::CertificateRevoked
        | AlertDescription::AccessDenied
        | AlertDescription::DecryptError => format!(
            "the peer refused this node's certificate ({alert:?}): it must chain to the CA \
             in the peer's socket.ssl_ca and be valid now"
        ),
        AlertDescription::CertificateRequired => {
            "the peer requires a certificate and this node sent none".to_owned()
        }
        AlertDescription::HandshakeFailure | AlertDescription::InsufficientSecurity => {
            format!("no common TLS parameters with the peer ({alert:?}): compare socket.ssl_cipher")
        }
        other => format!("the peer ended TLS with alert {other:?}"),
    }
}
