//! State transfer between a donor and its joiner, on the node's threads: the stream a donor
//! sends to the joiner's `ist.recv_addr` ([`engine::ist`]), and the joiner's receiver, which
//! hands what it reads to the engine (`engine::transfer_in`), a batch of records at a time.
//! The choice between IST and SST is the engine's.

use std::io::{BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base::Seqno;
use engine::ist::{self, Header, IstError, Outcome, RecordReader};
use engine::{OutgoingTransfer, SnapshotWait, StreamNext};

use crate::seqno_trace::Stage;
use crate::shared::{lock, Inner, Shared};
use crate::LogLevel;

/// Receive-queue length at which the IST receiver waits for the appliers: a long IST must
/// not pile up in memory faster than the server applies it.
const IST_QUEUE_LIMIT: usize = 4096;
/// Queue length at which the appliers wake a receiver waiting for room: it then queues a
/// good stretch at a time instead of waking for every task an applier takes.
const IST_QUEUE_RESUME_AT: usize = IST_QUEUE_LIMIT / 2;
/// Records read from the stream and queued together, at most (one take of the engine's
/// lock and one wake-up of the appliers for them all).
const IST_BATCH_RECORDS: usize = 64;
/// Payload bytes queued together, at most: large write-sets go one or a few at a time.
const IST_BATCH_BYTES: usize = 4 << 20;
/// How often a receiver waiting for room looks again without being woken (it is woken by
/// the appliers, and by every rare change of the engine).
const ROOM_RECHECK: Duration = Duration::from_millis(100);
/// How long a donor may take to connect, and a joiner waits for a stalled stream.
const STREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection to the IST port may take for TLS and the stream's header. Short,
/// so that a connection that never sends does not hold the port (streams are received one
/// at a time) for the whole [`STREAM_TIMEOUT`].
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the receiver waits for the server to report its snapshot before the records.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(3600);
/// Records a donor sends between two moves of its cache pin.
const PIN_STEP: i64 = 1024;
/// Fault injection for tests: a donor whose environment has this variable set to N breaks
/// off its first IST stream after N records, as a donor that dies mid-stream would.
const FAULT_CUT_IST_AFTER: &str = "TRIREME_FAULT_CUT_IST_AFTER";
/// Whether the injected cut already happened in this process (it happens once).
static FAULT_CUT_DONE: AtomicBool = AtomicBool::new(false);

const _: () = assert!(HEADER_TIMEOUT.as_secs() < STREAM_TIMEOUT.as_secs());
// A woken receiver has room for at least one whole batch.
const _: () = assert!(IST_BATCH_RECORDS <= IST_QUEUE_LIMIT - IST_QUEUE_RESUME_AT);

/// The injected cut for this stream, if any (see [`FAULT_CUT_IST_AFTER`]).
fn injected_cut() -> Option<u64> {
    let after = std::env::var(FAULT_CUT_IST_AFTER).ok()?.parse().ok()?;
    (!FAULT_CUT_DONE.swap(true, Ordering::SeqCst)).then_some(after)
}

/// Starts the thread that sends `transfer` to its joiner; `None` (the pin released) when
/// no thread could be started.
pub(crate) fn spawn_sender(
    shared: Arc<Shared>,
    transfer: OutgoingTransfer,
) -> Option<JoinHandle<()>> {
    let pin = transfer.pin;
    let unpin_shared = Arc::clone(&shared);
    let sender = std::thread::Builder::new()
        .name("trireme-ist-send".into())
        .spawn(move || {
            transport::priority::lower_this_thread(shared.settings.thread_nice);
            let address = transfer.address.clone();
            match send_stream(&shared, &address, transfer.header, transfer.pin) {
                Ok(count) if count > 0 => {
                    let message = format!("IST to {address} sent: {count} write-sets");
                    shared.app.log(LogLevel::Info, &message);
                }
                Ok(_) => {}
                Err(error) => {
                    let message = format!("state transfer stream to {address} failed: {error}");
                    shared.app.log(LogLevel::Error, &message);
                }
            }
        });
    match sender {
        Ok(sender) => Some(sender),
        Err(_) => {
            if let Some(pin) = pin {
                lock(&unpin_shared.cache).unpin(pin);
            }
            None
        }
    }
}

/// The donor's side of one transfer: sends the header, then the records for IST. Runs on
/// its own thread.
fn send_stream(
    shared: &Arc<Shared>,
    address: &str,
    header: Header,
    pin: Option<u64>,
) -> Result<u64, String> {
    let result = send_stream_inner(shared, address, &header, pin);
    if let Some(pin) = pin {
        lock(&shared.cache).unpin(pin);
    }
    result
}

fn send_stream_inner(
    shared: &Arc<Shared>,
    address: &str,
    header: &Header,
    pin: Option<u64>,
) -> Result<u64, String> {
    let target = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address} resolves to nothing"))?;
    let tcp = TcpStream::connect_timeout(&target, STREAM_TIMEOUT)
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    tcp.set_write_timeout(Some(STREAM_TIMEOUT))
        .and_then(|()| tcp.set_read_timeout(Some(STREAM_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let stream = match &shared.settings.tls {
        Some(context) => context
            .connect(tcp, address)
            .map_err(|e| format!("IST to {address}: {}", e.cause))?,
        None => tls::Stream::Plain(tcp),
    };
    let mut out = BufWriter::with_capacity(1 << 20, stream);
    ist::write_header(&mut out, header).map_err(|e| format!("sending the header: {e}"))?;
    if header.outcome != Outcome::Ist {
        ist::write_end(&mut out, 0).map_err(|e| e.to_string())?;
        return Ok(0);
    }
    let mut sent = 0u64;
    let mut seqno = header.first;
    let cut_after = injected_cut();
    while seqno <= header.last {
        if cut_after == Some(sent) {
            let _ = out.flush();
            return Err(format!(
                "stream cut after {sent} records ({FAULT_CUT_IST_AFTER} is set)"
            ));
        }
        let action = lock(&shared.cache)
            .read(seqno)
            .map_err(|e| format!("reading seqno {seqno} from the gcache: {e}"))?;
        ist::write_record(&mut out, &action).map_err(|e| format!("sending seqno {seqno}: {e}"))?;
        sent += 1;
        if let Some(pin) = pin {
            if seqno.0 % PIN_STEP == 0 {
                lock(&shared.cache).advance_pin(pin, seqno);
            }
        }
        seqno = seqno.next();
    }
    ist::write_end(&mut out, sent).map_err(|e| format!("sending the end: {e}"))?;
    Ok(sent)
}

/// Accepts donors' streams on `ist.recv_addr` until the node closes or connects again.
pub(crate) fn receive_transfers(shared: Arc<Shared>, listener: TcpListener, connection: u64) {
    listener
        .set_nonblocking(true)
        .expect("a listener can be made nonblocking");
    loop {
        {
            let inner = lock(&shared.inner);
            if inner.engine.stopped() || inner.engine.connection() != connection {
                return;
            }
        }
        match listener.accept() {
            Ok((tcp, peer)) => {
                let peer = peer.to_string();
                match secure(&shared, tcp, &peer) {
                    Ok(stream) => receive_one(&shared, stream, &peer),
                    Err(reason) => {
                        let message =
                            format!("refused a state transfer connection from {peer}: {reason}");
                        shared.app.log(LogLevel::Warning, &message);
                    }
                }
                shared.notify_everyone();
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// TLS when the node has it, as for group traffic (Galera runs IST under `socket.ssl_*`);
/// without it, a peer that starts TLS is told apart from garbage.
fn secure(shared: &Shared, tcp: TcpStream, peer: &str) -> Result<tls::Stream, String> {
    tcp.set_nonblocking(false)
        .and_then(|()| tcp.set_read_timeout(Some(HEADER_TIMEOUT)))
        .and_then(|()| tcp.set_write_timeout(Some(HEADER_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    if let Some(context) = &shared.settings.tls {
        return context.accept(tcp, peer).map_err(|e| e.cause);
    }
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(1) if tls::looks_like_tls(first[0]) => Err(
            "the donor speaks TLS, and this node has no socket.ssl_key and socket.ssl_cert"
                .to_owned(),
        ),
        _ => Ok(tls::Stream::Plain(tcp)),
    }
}

/// A stream failed or was refused: the engine asks again.
fn fail(shared: &Arc<Shared>, message: String) {
    shared.with_engine(|engine| engine.stream_failed(message));
}

fn receive_one(shared: &Arc<Shared>, stream: tls::Stream, peer: &str) {
    let mut input = BufReader::with_capacity(1 << 20, stream);
    let header = match ist::read_header(&mut input) {
        Ok(header) => {
            // A donor that sent its header may pause for as long as its cache reads take.
            let _ = input.get_ref().tcp().set_read_timeout(Some(STREAM_TIMEOUT));
            header
        }
        Err(error) => {
            fail(
                shared,
                format!("refused a state transfer stream from {peer}: {error}"),
            );
            return;
        }
    };
    let next = shared.with_engine(|engine| engine.stream_header(peer, &header));
    if next == StreamNext::Nothing {
        return;
    }
    let started = Instant::now();
    match receive_records(shared, &mut input, &header) {
        Ok(count) => {
            let seconds = started.elapsed().as_secs_f64();
            shared.with_engine(|engine| engine.ist_finished(peer, &header, count, seconds));
        }
        Err(error) => fail(shared, format!("IST from {peer} failed: {error}")),
    }
}

/// Waits until the server reports its snapshot (for IST, its own position), then hands
/// every record after it to the engine; returns the number of records received. Records
/// already read are queued together, under one take of the engine's lock and with one
/// wake-up of the appliers, before the receiver waits for more bytes.
fn receive_records(
    shared: &Arc<Shared>,
    input: &mut BufReader<tls::Stream>,
    header: &Header,
) -> Result<u64, IstError> {
    let position = wait_for_snapshot(shared)?;
    shared.with_engine(|engine| engine.ist_begins(header, position))?;
    let mut reader = RecordReader::new(header);
    let mut received = 0u64;
    let mut batch = Vec::with_capacity(IST_BATCH_RECORDS);
    let mut batch_bytes = 0usize;
    while let Some(action) = reader.next(input)? {
        if let Some(trace) = &shared.seqno_trace {
            trace.delivered(action.seqno, false);
        }
        batch_bytes += action.payload.len();
        batch.push(action);
        received += 1;
        let more_at_hand = !input.buffer().is_empty();
        if batch.len() >= IST_BATCH_RECORDS || batch_bytes >= IST_BATCH_BYTES || !more_at_hand {
            queue_records(shared, header, position, &mut batch)?;
            batch_bytes = 0;
        }
    }
    queue_records(shared, header, position, &mut batch)?;
    Ok(received)
}

/// Queues `batch` (emptied) for the appliers once the queue has room, and caches it.
fn queue_records(
    shared: &Arc<Shared>,
    header: &Header,
    position: Seqno,
    batch: &mut Vec<ist::Action>,
) -> Result<(), IstError> {
    let Some(first) = batch.first().map(|action| action.seqno) else {
        return Ok(());
    };
    let pending = {
        let mut inner = wait_for_room(shared);
        if inner.engine.stopped() {
            return Err(IstError::Truncated {
                after: first.prev(),
                reason: "the node is closing".into(),
            });
        }
        for action in batch.drain(..) {
            let seqno = action.seqno;
            inner.engine.ist_record(header.cluster, action, position)?;
            shared.trace(seqno, Stage::Certified);
        }
        shared.drain(&mut inner)
    };
    shared.changed.notify_all();
    shared.carry_out(pending);
    Ok(())
}

/// The engine's lock, once the appliers' queue is shorter than [`IST_QUEUE_LIMIT`] (or the
/// node closes). While the receiver waits, the applier that takes the queue down to
/// [`IST_QUEUE_RESUME_AT`] wakes it ([`wake_receiver_if_room`]), not every task.
fn wait_for_room(shared: &Shared) -> MutexGuard<'_, Inner> {
    let mut inner = lock(&shared.inner);
    while inner.engine.tasks().len() >= IST_QUEUE_LIMIT && !inner.engine.stopped() {
        inner.ist_receiver_waiting = true;
        let (guard, _) = shared
            .ist_room
            .wait_timeout(inner, ROOM_RECHECK)
            .unwrap_or_else(|p| p.into_inner());
        inner = guard;
    }
    inner.ist_receiver_waiting = false;
    inner
}

/// Called by an applier that took a task, under the engine's lock: wakes the IST receiver
/// waiting for room once the queue is down to [`IST_QUEUE_RESUME_AT`].
pub(crate) fn wake_receiver_if_room(shared: &Shared, inner: &mut Inner) {
    if inner.ist_receiver_waiting && inner.engine.tasks().len() <= IST_QUEUE_RESUME_AT {
        inner.ist_receiver_waiting = false;
        shared.ist_room.notify_one();
    }
}

fn wait_for_snapshot(shared: &Shared) -> Result<Seqno, IstError> {
    let deadline = Instant::now() + SNAPSHOT_WAIT;
    let mut inner = lock(&shared.inner);
    loop {
        match inner.engine.snapshot_position() {
            SnapshotWait::Ready(position) => return Ok(position),
            SnapshotWait::Gone => {
                return Err(IstError::Truncated {
                    after: Seqno::UNDEFINED,
                    reason: "the node is no longer joining".into(),
                })
            }
            SnapshotWait::Wait if Instant::now() >= deadline => {
                return Err(IstError::Truncated {
                    after: Seqno::UNDEFINED,
                    reason: "the server never reported its snapshot".into(),
                })
            }
            SnapshotWait::Wait => {}
        }
        let (guard, _) = shared
            .changed
            .wait_timeout(inner, Duration::from_millis(100))
            .unwrap_or_else(|p| p.into_inner());
        inner = guard;
    }
}
