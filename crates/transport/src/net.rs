//! Inbound sockets: the accept thread and one reader thread per inbound connection (the
//! writers are `writer.rs`).

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use group::wire;
use tls::Stream;

use crate::event_loop::Event;
use crate::handshake::{self, Bindings, HandshakeError};
use crate::{lock, Shared, TransportOptions};

/// Initial (and usual) size of a reader's buffer.
const READ_BUFFER: usize = 256 << 10;

/// A read buffer that grew up to this size is kept for the life of the connection.
const KEEP_READ_BUFFER: usize = 16 << 20;

/// Sources whose refusals are remembered for rate-limited logging; beyond this the memory
/// is cleared (and a few refusals are logged twice).
const REFUSAL_SOURCES_MAX: usize = 1024;

/// A refused source is logged at most once per this interval.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Inbound connections and their reader threads.
#[derive(Default)]
pub(crate) struct Connections {
    inner: Mutex<ConnectionsInner>,
    /// Which address each member id was admitted from.
    bindings: Bindings,
}

#[derive(Default)]
struct ConnectionsInner {
    /// Open connections by id: a clone (to shut it down from outside its reader) and the
    /// source it counts against.
    open: HashMap<u64, (TcpStream, IpAddr)>,
    /// Connections still in their handshake, by id: their source and deadline. A deadline
    /// bounds the whole handshake, which a read timeout alone does not (a peer sending a
    /// byte at a time resets it).
    handshaking: HashMap<u64, (IpAddr, Instant)>,
    /// When each source's last refusal was logged, and how many were not logged since.
    refusals: HashMap<IpAddr, (Instant, u64)>,
    threads: Vec<JoinHandle<()>>,
    next_id: u64,
    closed: bool,
}

impl ConnectionsInner {
    /// Shuts down the handshakes past their deadline; their readers then end.
    fn reap_handshakes(&mut self, now: Instant) {
        let expired: Vec<u64> = self
            .handshaking
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.handshaking.remove(&id);
            if let Some((stream, _)) = self.open.remove(&id) {
                // Fails only if the connection is already gone.
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    /// Why a new connection from `source` is refused, if it is.
    fn over_limits(&self, source: IpAddr, options: &TransportOptions) -> Option<String> {
        let from_source = self.open.values().filter(|(_, s)| *s == source).count();
        let in_handshake = self
            .handshaking
            .values()
            .filter(|(s, _)| *s == source)
            .count();
        if self.open.len() >= options.max_connections {
            Some(format!("over {} connections", options.max_connections))
        } else if from_source >= options.max_connections_per_source {
            Some(format!("over {from_source} connections from one address"))
        } else if in_handshake >= options.max_pending_per_source {
            Some(format!(
                "over {in_handshake} connections from one address in handshake"
            ))
        } else {
            None
        }
    }
}

/// The source a connection counts against: its address, with IPv4-mapped IPv6 addresses
/// read as IPv4 and IPv6 addresses grouped by /64 (one host can hold a whole /64).
fn source_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
        v4 => v4,
    }
}

impl Connections {
    fn add(
        self: &Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        events: &SyncSender<Event>,
        options: &TransportOptions,
    ) {
        let source = source_of(peer.ip());
        let mut inner = lock(&self.inner);
        if inner.closed {
            return;
        }
        inner.threads.retain(|thread| !thread.is_finished());
        inner.reap_handshakes(Instant::now());
        if let Some(reason) = inner.over_limits(source, options) {
            drop(inner);
            self.log_refusal(peer, &reason);
            return;
        }
        let clone = match stream.try_clone() {
            Ok(clone) => clone,
            Err(error) => {
                tracing::warn!(%peer, %error, "could not keep a handle on a connection");
                return;
            }
        };
        let id = inner.next_id;
        inner.next_id += 1;
        let deadline = Instant::now() + options.handshake_timeout;
        let connections = Arc::clone(self);
        let events = events.clone();
        let options = options.clone();
        let spawned = thread::Builder::new()
            .name(format!("trireme-read-{peer}"))
            .spawn(move || {
                crate::priority::lower_this_thread(options.thread_nice);
                connections.serve(id, stream, peer, &events, &options);
                lock(&connections.inner).open.remove(&id);
            });
        match spawned {
            Ok(thread) => {
                inner.open.insert(id, (clone, source));
                inner.handshaking.insert(id, (source, deadline));
                inner.threads.push(thread);
            }
            Err(error) => tracing::warn!(%peer, %error, "could not start a reader thread"),
        }
    }

    /// The reader thread of connection `id`: handshake, then frames until it ends.
    fn serve(
        &self,
        id: u64,
        tcp: TcpStream,
        peer: SocketAddr,
        events: &SyncSender<Event>,
        options: &TransportOptions,
    ) {
        let admitted = self.admit(tcp, peer, options);
        lock(&self.inner).handshaking.remove(&id);
        match admitted {
            Ok((stream, sender)) => {
                self.bindings.hold(sender);
                read_loop(stream, peer, sender, events);
                self.bindings.release(sender);
            }
            Err(reason) => self.log_refusal(peer, &reason),
        }
    }

    /// TLS (when configured) and the member handshake, within the handshake timeout.
    fn admit(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        options: &TransportOptions,
    ) -> Result<(Stream, u64), String> {
        let bounded = Some(options.handshake_timeout);
        tcp.set_read_timeout(bounded)
            .and_then(|()| tcp.set_write_timeout(bounded))
            .map_err(|error| error.to_string())?;
        let mut stream = match &options.tls {
            Some(context) => {
                refuse_plaintext_peer(&tcp)?;
                context
                    .accept(tcp, &peer.to_string())
                    .map_err(|error| error.cause)?
            }
            None => {
                refuse_tls_peer(&tcp)?;
                Stream::Plain(tcp)
            }
        };
        let introduction = handshake::admit(
            &mut stream,
            peer.ip(),
            &options.cluster_name,
            &self.bindings,
        )
        .map_err(|error| match error {
            HandshakeError::Io(io) => format!("handshake not completed: {io}"),
            other => other.to_string(),
        })?;
        let tcp = stream.tcp();
        tcp.set_read_timeout(Some(options.idle_timeout))
            .and_then(|()| tcp.set_write_timeout(None))
            .map_err(|error| error.to_string())?;
        tracing::debug!(%peer, member = introduction.raft_id, tls = stream.is_tls(), "member connected");
        Ok((stream, introduction.raft_id))
    }

    /// Logs a refused connection, at most once per source per [`REFUSAL_LOG_INTERVAL`].
    fn log_refusal(&self, peer: SocketAddr, reason: &str) {
        let mut inner = lock(&self.inner);
        if inner.refusals.len() >= REFUSAL_SOURCES_MAX {
            inner.refusals.clear();
        }
        let now = Instant::now();
        let entry = inner
            .refusals
            .entry(peer.ip())
            .or_insert((now - REFUSAL_LOG_INTERVAL, 0));
        if now.duration_since(entry.0) < REFUSAL_LOG_INTERVAL {
            entry.1 += 1;
            return;
        }
        let unlogged = std::mem::replace(entry, (now, 0)).1;
        drop(inner);
        tracing::warn!(%peer, %reason, unlogged, "refused a group connection");
    }

    /// Refuses new connections, shuts the open ones down and returns their readers to join.
    pub(crate) fn close_all(&self) -> Vec<JoinHandle<()>> {
        let mut inner = lock(&self.inner);
        inner.closed = true;
        for (stream, _) in inner.open.values() {
            // Fails only if the connection is already gone.
            let _ = stream.shutdown(Shutdown::Both);
        }
        inner.open.clear();
        std::mem::take(&mut inner.threads)
    }
}

/// Accepts connections until shutdown; each gets a reader thread.
pub(crate) fn accept_loop(
    listener: TcpListener,
    events: SyncSender<Event>,
    connections: Arc<Connections>,
    shared: Arc<Shared>,
    options: TransportOptions,
) {
    loop {
        let accepted = listener.accept();
        if shared.stopping() {
            return;
        }
        match accepted {
            Ok((stream, peer)) => connections.add(stream, peer, &events, &options),
            Err(error) => {
                // Typically out of file descriptors: wait for some to be released.
                tracing::warn!(%error, "accept failed");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// With TLS, a peer that starts in plaintext is told why it is refused, in plaintext, so
/// that its log says so instead of "connection closed".
fn refuse_plaintext_peer(tcp: &TcpStream) -> Result<(), String> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(1) if !tls::looks_like_tls(first[0]) => {
            let reason = "this node runs TLS (socket.ssl_key, socket.ssl_cert) and the peer \
                          speaks plaintext: configure the same TLS on every node";
            let mut tcp = tcp;
            handshake::refuse(&mut tcp, reason);
            Err(reason.to_owned())
        }
        _ => Ok(()),
    }
}

/// Without TLS, a peer whose first byte starts a TLS handshake is refused by name.
fn refuse_tls_peer(tcp: &TcpStream) -> Result<(), String> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(1) if tls::looks_like_tls(first[0]) => Err(
            "the peer speaks TLS, and this node has no socket.ssl_key and socket.ssl_cert: \
             configure the same TLS on every node"
                .to_owned(),
        ),
        Ok(_) => Ok(()),
        Err(error) => Err(format!("nothing received: {error}")),
    }
}

/// Reads one connection, cutting the stream into frames and forwarding whole frames.
/// Anything that is not a group frame from `sender` closes the connection. The buffer grows
/// with the bytes that arrive, never ahead of them on a length field's word.
fn read_loop(mut stream: Stream, peer: SocketAddr, sender: u64, events: &SyncSender<Event>) {
    let mut buffer = vec![0u8; READ_BUFFER];
    let mut filled = 0;
    loop {
        let read = match stream.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(%peer, %error, "connection ended (closed, idle or reset)");
                break;
            }
        };
        filled += read;
        let mut complete = 0;
        let mut needed = None;
        loop {
            match wire::frame_len(&buffer[complete..filled]) {
                Ok(Some(_)) if wire::frame_sender(&buffer[complete..filled]) != Some(sender) => {
                    tracing::warn!(%peer, member = sender, "a frame claims another member's id: closing the connection");
                    // Fails only if the connection is already gone.
                    let _ = stream.tcp().shutdown(Shutdown::Both);
                    return;
                }
                Ok(Some(len)) if len <= filled - complete => complete += len,
                Ok(Some(len)) => {
                    needed = Some(len);
                    break;
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%peer, %error, "not a group frame: closing the connection");
                    // Fails only if the connection is already gone.
                    let _ = stream.tcp().shutdown(Shutdown::Both);
                    return;
                }
            }
        }
        if complete > 0 {
            let frames = buffer[..complete].to_vec();
            if events.send(Event::Frames(frames)).is_err() {
                return;
            }
            buffer.copy_within(complete..filled, 0);
            filled -= complete;
        }
        match needed {
            // A frame bigger than the buffer: grow toward it as its bytes arrive, at most
            // doubling what is already here, so that a length field alone allocates nothing.
            Some(len) if filled == buffer.len() && len > buffer.len() => {
                buffer.resize(len.min(buffer.len() * 2), 0);
            }
            // After a huge frame, go back to the usual size. A buffer that grew for ordinary
            // large messages (chunks of big write-sets, Raft appends) stays: growing it
            // again for every such frame zeroes megabytes each time.
            None if buffer.len() > KEEP_READ_BUFFER && filled <= READ_BUFFER => {
                buffer.truncate(READ_BUFFER);
                buffer.shrink_to_fit();
            }
            _ => {}
        }
    }
}
