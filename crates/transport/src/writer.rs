//! Writing to peers: one writer thread per destination address, and the event loop's own
//! writes on a connection when they cannot block (`Writer::send`).

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use group::wire;
use tls::Stream;

use crate::handshake::{self, HandshakeError, Introduction};
use crate::{lock, Shared, TransportOptions};

/// Why frames could not be queued for a writer.
pub(crate) enum SendError {
    /// The peer's queue is at its bound: the frames were dropped.
    Full,
    /// The writer thread ended; the bytes come back.
    Gone(Vec<u8>),
}

/// The event loop's side of one writer thread.
pub(crate) struct Writer {
    queue: Sender<(Vec<u8>, usize)>,
    /// Frames queued and not yet written (a batch counts until its write is over).
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// The connection's write side, which the loop uses itself when that cannot block.
    link: Arc<Mutex<Link>>,
    /// The current connection, to shut it down from outside.
    socket: Arc<Mutex<Option<TcpStream>>>,
    thread: JoinHandle<()>,
}

/// What became of frames the loop tried to write itself.
enum Direct {
    /// All written.
    Sent,
    /// Started: the writer thread must finish them (the socket's rest, or a failure).
    Started,
    /// Not now: the writer thread takes them in turn.
    NotNow,
}

impl Writer {
    pub(crate) fn start(
        address: String,
        shared: Arc<Shared>,
        options: &TransportOptions,
    ) -> io::Result<Writer> {
        let (queue, receiver) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let socket = Arc::new(Mutex::new(None));
        let link = Arc::new(Mutex::new(Link::default()));
        let mut connection = Connection {
            address: address.clone(),
            queue: receiver,
            queued: Arc::clone(&queued),
            link: Arc::clone(&link),
            socket: Arc::clone(&socket),
            shared,
            options: options.clone(),
            retry_at: None,
            failing: false,
        };
        let thread = thread::Builder::new()
            .name(format!("trireme-write-{address}"))
            .spawn(move || {
                crate::priority::lower_this_thread(connection.options.thread_nice);
                connection.run()
            })?;
        Ok(Writer {
            queue,
            queued,
            limit: options.writer_queue_frames,
            link,
            socket,
            thread,
        })
    }

    /// Sends `frames` frames (the bytes of all of them, back to back): at once on the
    /// loop's thread when the writer thread has nothing pending and the socket takes them
    /// without waiting (a thread switch saved per message), else through its queue.
    pub(crate) fn send(&self, bytes: Vec<u8>, frames: usize) -> Result<(), SendError> {
        if self.queued.load(Ordering::Acquire) == 0 {
            match self.send_directly(&bytes) {
                Direct::Sent => return Ok(()),
                // An empty batch wakes the writer thread to finish what was started.
                Direct::Started => return self.queue(Vec::new(), 0),
                Direct::NotNow => {}
            }
        }
        if self.queued.load(Ordering::Relaxed) + frames > self.limit {
            return Err(SendError::Full);
        }
        self.queue(bytes, frames)
    }

    fn queue(&self, bytes: Vec<u8>, frames: usize) -> Result<(), SendError> {
        self.queued.fetch_add(frames, Ordering::Relaxed);
        self.queue
            .send((bytes, frames))
            .map_err(|mpsc::SendError((bytes, frames))| {
                self.queued.fetch_sub(frames, Ordering::Relaxed);
                SendError::Gone(bytes)
            })
    }

    /// Writes on the loop's thread if the connection is up, introduced with the frames'
    /// sender, and has nothing of the writer thread's left to send. Never waits: what the
    /// socket does not take at once is left to the writer thread.
    fn send_directly(&self, bytes: &[u8]) -> Direct {
        let Ok(mut link) = self.link.try_lock() else {
            return Direct::NotNow;
        };
        if !link.idle_for(wire::frame_sender(bytes)) {
            return Direct::NotNow;
        }
        let Link {
            stream: Some(stream),
            carry,
            broken,
            last_direct,
            cut_short,
            ..
        } = &mut *link
        else {
            return Direct::NotNow;
        };
        *last_direct = Some(Instant::now());
        match stream.get_mut().send_without_waiting(bytes) {
            Ok(taken) if taken == bytes.len() && !stream.get_ref().has_unsent() => Direct::Sent,
            Ok(taken) => {
                carry.extend_from_slice(&bytes[taken..]);
                *cut_short += 1;
                Direct::Started
            }
            Err(error) => {
                *broken = Some(error);
                Direct::Started
            }
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Shuts the current connection down, so that a blocked write returns.
    pub(crate) fn close_connection(&self) {
        if let Some(stream) = lock(&self.socket).take() {
            // Fails only if the connection is already gone.
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Ends the writer (it finishes what is queued unless its connection was closed).
    pub(crate) fn stop(self) {
        let Writer { queue, thread, .. } = self;
        drop(queue);
        if thread.join().is_err() {
            tracing::error!("a writer thread panicked");
        }
    }
}

/// One outbound connection's write side: the writer thread's, which the event loop also
/// writes to when it can do so without waiting (`Writer::send`).
#[derive(Default)]
struct Link {
    stream: Option<BufWriter<Stream>>,
    /// The member id the current connection was introduced with.
    introduced_as: u64,
    /// Bytes the loop started to write that the socket did not take: they go first.
    carry: Vec<u8>,
    /// A write by the loop failed: the writer thread handles it as its own failure.
    broken: Option<io::Error>,
    /// The loop's last write: the connection is in use, not idle.
    last_direct: Option<Instant>,
    /// Direct writes the socket did not take whole (left to the writer thread).
    cut_short: u64,
}

impl Link {
    /// Nothing of an earlier write is left, on a connection introduced as `sender`.
    fn idle_for(&self, sender: Option<u64>) -> bool {
        let Some(stream) = self.stream.as_ref() else {
            return false;
        };
        sender == Some(self.introduced_as)
            && self.carry.is_empty()
            && self.broken.is_none()
            && stream.buffer().is_empty()
            && !stream.get_ref().has_unsent()
    }

    /// Whether the loop wrote on this connection within `period`.
    fn used_within(&self, period: Duration) -> bool {
        self.last_direct.is_some_and(|at| at.elapsed() < period)
    }
}

/// The writer thread's side: one outbound connection.
struct Connection {
    address: String,
    queue: Receiver<(Vec<u8>, usize)>,
    queued: Arc<AtomicUsize>,
    link: Arc<Mutex<Link>>,
    socket: Arc<Mutex<Option<TcpStream>>>,
    shared: Arc<Shared>,
    options: TransportOptions,
    /// No connection attempt before this instant.
    retry_at: Option<Instant>,
    /// True from a failure until the next successful connection (to log transitions only).
    failing: bool,
}

/// Why a connection could not be opened.
enum OpenError {
    /// The peer could not be reached, or the connection broke.
    Unreachable(io::Error),
    /// The peer (or TLS) refused this member; the reason says why.
    Refused(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Unreachable(error) => write!(f, "unreachable: {error}"),
            OpenError::Refused(reason) => write!(f, "refused: {reason}"),
        }
    }
}

impl From<io::Error> for OpenError {
    fn from(error: io::Error) -> OpenError {
        OpenError::Unreachable(error)
    }
}

impl Connection {
    fn run(&mut self) {
        let link = Arc::clone(&self.link);
        // Ends when idle (the loop's own writes count as use), or when the event loop drops
        // its side; then the connection closes.
        loop {
            let (bytes, frames) = match self.queue.recv_timeout(self.options.writer_idle_timeout) {
                Ok(batch) => batch,
                Err(RecvTimeoutError::Timeout)
                    if lock(&link).used_within(self.options.writer_idle_timeout) =>
                {
                    continue
                }
                Err(_) => break,
            };
            let mut link = lock(&link);
            if !self.write(&mut link, &bytes, frames) {
                continue;
            }
            // Write everything else already queued, then flush once.
            let mut ok = true;
            while let Ok((bytes, frames)) = self.queue.try_recv() {
                if !self.write(&mut link, &bytes, frames) {
                    ok = false;
                    break;
                }
            }
            if ok {
                if let Some(stream) = link.stream.as_mut() {
                    if let Err(error) = stream.flush() {
                        self.fail(&mut link, &OpenError::Unreachable(error));
                    }
                }
            }
        }
        self.disconnect(&mut lock(&link));
    }

    /// Writes one batch of frames; false if they were dropped (no connection, or an error).
    /// An empty batch only finishes what the loop started (`Writer::send`).
    fn write(&mut self, link: &mut Link, bytes: &[u8], frames: usize) -> bool {
        let written = self.write_batch(link, bytes);
        // Counted until written, so that the loop never writes ahead of a queued batch.
        self.queued.fetch_sub(frames, Ordering::Release);
        written
    }

    fn write_batch(&mut self, link: &mut Link, bytes: &[u8]) -> bool {
        if let Some(error) = link.broken.take() {
            self.fail(link, &OpenError::Unreachable(error));
            return false;
        }
        if !self.finish_carry(link) {
            return false;
        }
        if bytes.is_empty() {
            return true;
        }
        // The id the frames carry: a member that rejoined sends under a new one (frames of
        // the old one may still be queued), and each must go on a connection introduced
        // with it, or the peer takes it for a forgery.
        let sender = wire::frame_sender(bytes).expect("a batch holds whole group frames");
        if link.stream.is_some() && sender != link.introduced_as {
            self.disconnect(link);
        }
        if !self.connect(link, sender) {
            return false;
        }
        let Some(stream) = link.stream.as_mut() else {
            return false;
        };
        match stream.write_all(bytes) {
            Ok(()) => true,
            Err(error) => {
                self.fail(link, &OpenError::Unreachable(error));
                false
            }
        }
    }

    /// Writes what the loop started and the socket did not take at once.
    fn finish_carry(&mut self, link: &mut Link) -> bool {
        if link.carry.is_empty() {
            return true;
        }
        let carry = std::mem::take(&mut link.carry);
        let Some(stream) = link.stream.as_mut() else {
            return true;
        };
        match stream.write_all(&carry) {
            Ok(()) => true,
            Err(error) => {
                self.fail(link, &OpenError::Unreachable(error));
                false
            }
        }
    }

    fn connect(&mut self, link: &mut Link, sender: u64) -> bool {
        if link.stream.is_some() {
            return true;
        }
        if self.shared.stopping() || self.retry_at.is_some_and(|at| Instant::now() < at) {
            return false;
        }
        match self.open(sender) {
            Ok(stream) => {
                if self.failing {
                    tracing::info!(address = %self.address, "connected again");
                }
                self.failing = false;
                self.retry_at = None;
                link.stream = Some(BufWriter::with_capacity(self.options.write_buffer, stream));
                link.introduced_as = sender;
                true
            }
            Err(error) => {
                self.fail(link, &error);
                false
            }
        }
    }

    /// Connects, and introduces this member as `sender`.
    fn open(&mut self, sender: u64) -> Result<Stream, OpenError> {
        let tcp = self.open_tcp()?;
        let bounded = Some(self.options.handshake_timeout);
        tcp.set_read_timeout(bounded)?;
        tcp.set_write_timeout(bounded)?;
        let mut stream = match &self.options.tls {
            Some(context) => {
                context
                    .connect(tcp, &self.address)
                    .map_err(|error| match error.refused {
                        true => OpenError::Refused(error.cause),
                        false => OpenError::Unreachable(io::Error::other(error.cause)),
                    })?
            }
            None => Stream::Plain(tcp),
        };
        let introduction = Introduction {
            raft_id: sender,
            cluster: self.options.cluster_name.clone(),
        };
        handshake::introduce(&mut stream, &introduction).map_err(|error| match error {
            // Under TLS 1.3 a refused certificate shows on the first read.
            HandshakeError::Io(io) if tls::is_refusal(&io) => OpenError::Refused(tls::explain(&io)),
            HandshakeError::Io(io) => OpenError::Unreachable(io),
            other => OpenError::Refused(other.to_string()),
        })?;
        stream.tcp().set_read_timeout(None)?;
        stream.tcp().set_write_timeout(None)?;
        Ok(stream)
    }

    fn open_tcp(&self) -> io::Result<TcpStream> {
        let mut last_error = io::Error::new(io::ErrorKind::InvalidInput, "no address");
        for address in self.address.to_socket_addrs()? {
            match TcpStream::connect_timeout(&address, self.options.connect_timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    socket2::SockRef::from(&stream)
                        .set_tcp_user_timeout(Some(self.options.peer_timeout))?;
                    *lock(&self.socket) = Some(stream.try_clone()?);
                    if self.shared.stopping() {
                        // Shutdown may have missed this connection: do not use it.
                        return Err(io::Error::other("shutting down"));
                    }
                    return Ok(stream);
                }
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    /// Drops the connection and everything queued; connects again after the back-off
    /// (longer after a refusal, which will not fix itself quickly).
    fn fail(&mut self, link: &mut Link, error: &OpenError) {
        if !self.failing && !self.shared.stopping() {
            // A peer that restarts or leaves breaks its connections: routine, noted as
            // Galera notes it. A refusal means a misconfigured or foreign node: a warning.
            match error {
                OpenError::Unreachable(_) => {
                    tracing::info!(address = %self.address, "peer {error}: dropping its frames")
                }
                OpenError::Refused(_) => {
                    tracing::warn!(address = %self.address, "peer {error}: dropping its frames")
                }
            }
        }
        let backoff = match error {
            OpenError::Unreachable(_) => self.options.reconnect_backoff,
            OpenError::Refused(_) => self.options.refused_backoff,
        };
        self.failing = true;
        self.disconnect(link);
        self.retry_at = Some(Instant::now() + backoff);
        while let Ok((_, frames)) = self.queue.try_recv() {
            self.queued.fetch_sub(frames, Ordering::Relaxed);
        }
    }

    fn disconnect(&mut self, link: &mut Link) {
        // Bytes the loop started are dropped with the connection, as the buffered ones.
        link.carry.clear();
        link.broken = None;
        if let Some(stream) = link.stream.take() {
            // The buffered bytes are dropped with the connection.
            let (stream, _) = stream.into_parts();
            // Fails only if the connection is already gone.
            let _ = stream.tcp().shutdown(Shutdown::Both);
        }
        lock(&self.socket).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    use base::{seeded_rng, Nanos, Uuid};
    use group::wire::WireMessage;
    use group::{Contact, GroupConfig, GroupNode, Submission};

    use crate::gauges::Gauges;
    use crate::handshake::Bindings;

    const SENDER: u64 = 7;
    const CLUSTER: &str = "writer-test";

    fn shared() -> Arc<Shared> {
        let contact = Contact {
            name: "writer".into(),
            address: "127.0.0.1:1".into(),
            incoming: String::new(),
        };
        let node = GroupNode::bootstrap(GroupConfig::default(), &contact, seeded_rng(1), Nanos(1));
        Arc::new(Shared {
            stopping: Default::default(),
            status: Mutex::new(node.status()),
            gauges: Gauges::new(),
        })
    }

    /// One frame of `size` payload bytes numbered `n`.
    fn frame(n: u64, size: usize) -> Vec<u8> {
        let submission = Submission {
            origin: Uuid::NIL,
            submit_id: n,
            payload: vec![n as u8; size].into(),
            chunk: (0, 1),
        };
        wire::encode(SENDER, &WireMessage::Forward(vec![submission]))
    }

    /// The submit ids of the frames in `bytes`, in order; every frame whole.
    fn numbers(mut bytes: &[u8]) -> Vec<u64> {
        let mut numbers = Vec::new();
        while !bytes.is_empty() {
            let len = wire::frame_len(bytes).unwrap().expect("a whole frame");
            let (_, message) = wire::decode(&bytes[..len]).unwrap();
            let WireMessage::Forward(submissions) = message else {
                panic!("not the frame sent");
            };
            numbers.extend(submissions.iter().map(|s| s.submit_id));
            bytes = &bytes[len..];
        }
        numbers
    }

    #[test]
    fn frames_the_loop_writes_itself_keep_their_order_when_the_socket_fills() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let peer = thread::spawn(move || {
            let (tcp, from) = listener.accept().unwrap();
            let mut stream = Stream::Plain(tcp);
            handshake::admit(&mut stream, from.ip(), CLUSTER, &Bindings::default()).unwrap();
            // A slow reader: the writer's socket fills, and drains a little at a time.
            let mut received = Vec::new();
            let mut chunk = vec![0u8; 64 << 10];
            loop {
                match stream.read(&mut chunk).unwrap() {
                    0 => return received,
                    n => received.extend_from_slice(&chunk[..n]),
                }
                thread::sleep(Duration::from_micros(200));
            }
        });
        let options = TransportOptions {
            cluster_name: CLUSTER.into(),
            ..TransportOptions::default()
        };
        let writer = Writer::start(address, shared(), &options).unwrap();
        // The first batch connects, on the writer thread.
        writer.send(frame(0, 64), 1).ok().unwrap();
        while writer.queued.load(Ordering::Acquire) > 0 || lock(&writer.link).stream.is_none() {
            thread::sleep(Duration::from_millis(1));
        }
        let count = 2000;
        for n in 1..count {
            writer.send(frame(n, 32 << 10), 1).ok().unwrap();
        }
        let link = Arc::clone(&writer.link);
        writer.stop();
        assert!(
            lock(&link).cut_short > 0,
            "the socket never refused part of a direct write: the test filled nothing"
        );
        let received = peer.join().unwrap();
        assert_eq!(numbers(&received), (0..count).collect::<Vec<_>>());
    }
}
