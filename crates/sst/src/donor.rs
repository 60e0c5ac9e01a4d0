//! The donor: a hot `mariadb-backup` snapshot, cut into pieces and sent over parallel
//! streams, each piece with its CRC32C; a piece the joiner rejects is sent again, a piece
//! the joiner already holds (resume) is confirmed instead of sent.
//!
//! Each stream is one thread that owns its connection (a TLS connection cannot be shared
//! by a writer and a reader thread): it sends up to [`WINDOW`] frames ahead and reads the
//! joiner's answers when the window is full or nothing is ready to send.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver};
use tls::Stream;

use crate::config::{credentials, Args, Compressor, Settings};
use crate::frame::{self, read_frame, write_frame, Frame, HeldPiece};
use crate::progress::{progress_path, ProgressFile};
use crate::session::{self, set_timeouts, Secret, Session};
use crate::xbstream::{Chunk, XbReader};
use crate::{exit_code, log, SstError, PIECE_BYTES};

/// Frames a stream may have in flight before it waits for acknowledgements.
const WINDOW: usize = 8;
/// How often one piece may fail verification before the transfer gives up.
const MAX_RESENDS: u32 = 3;
/// How long the donor waits for the joiner's replies (plan, acknowledgements, final
/// confirmation) and for a write to make progress.
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the donor keeps trying to reach the joiner's port, which may not be open yet.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two attempts to reach the joiner's port.
const CONNECT_RETRY: Duration = Duration::from_millis(200);
/// How long an idle stream waits for work before it checks whether the transfer failed.
const POLL: Duration = Duration::from_millis(100);
/// How often `[sst] compressor=auto` measures whether the link is the bottleneck.
const AUTO_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// Fault injection for tests: the donor corrupts the payload of its n-th data piece once,
/// after computing its checksum, so the joiner must detect it and ask again.
pub const FAULT_CORRUPT_PIECE: &str = "TRIREME_FAULT_CORRUPT_SST_PIECE";

/// The joiner's address and session secret, from its `ready` text
/// `host:port/trireme/<session>`.
pub fn parse_ready_address(text: &str) -> Result<(String, Secret), SstError> {
    let bad = || {
        // Not the whole text: a mangled address may still hold the secret.
        let shown: Vec<&str> = text.trim().split('/').take(2).collect();
        SstError::Config(format!(
            "donor got address {:?}/...; expected host:port/trireme/<session of {} hex \
             digits> from a joiner that uses wsrep_sst_method=trireme (donor and joiner must \
             use the same method and Trireme version)",
            shown.join("/"),
            session::SECRET_BYTES * 2
        ))
    };
    let mut parts = text.trim().splitn(3, '/');
    let host_port = parts.next().filter(|s| !s.is_empty()).ok_or_else(bad)?;
    if parts.next() != Some(crate::METHOD) {
        return Err(bad());
    }
    let secret = parts.next().and_then(Secret::from_hex).ok_or_else(bad)?;
    Ok((host_port.to_string(), secret))
}

/// One unit of work for the streams.
#[derive(Clone)]
enum Work {
    Piece {
        path: Arc<str>,
        offset: u64,
        data: Arc<Vec<u8>>,
        resends: u32,
    },
    File {
        path: Arc<str>,
    },
}

/// A transfer's first failure: it stops every stream and the feeder.
#[derive(Default)]
struct Failure(Mutex<Option<String>>);

impl Failure {
    /// Records `message` unless a failure is recorded already.
    fn set(&self, message: String) {
        let mut first = self.0.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(message);
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A stream's frames in flight and the pieces it must send again.
#[derive(Default)]
struct Window {
    seq: u64,
    unacked: BTreeMap<u64, Work>,
    resend: VecDeque<Work>,
}

impl Window {
    /// Frame `seq` failed verification: its piece goes out again, at most
    /// [`MAX_RESENDS`] times.
    fn nacked(&mut self, seq: u64, reason: &str, totals: &Totals) -> Result<(), SstError> {
        match self.unacked.remove(&seq) {
            Some(Work::Piece {
                path,
                offset,
                data,
                resends,
            }) => {
                if resends + 1 > MAX_RESENDS {
                    return Err(SstError::Peer(format!(
                        "piece {path}@{offset} failed verification {} times on the joiner \
                         ({reason}): the link corrupts data",
                        resends + 1
                    )));
                }
                log(
                    "WARNING",
                    &format!(
                        "the joiner rejected piece {path}@{offset} ({reason}): sending it again"
                    ),
                );
                totals.resent.fetch_add(1, Ordering::Relaxed);
                self.resend.push_back(Work::Piece {
                    path,
                    offset,
                    data,
                    resends: resends + 1,
                });
            }
            Some(other) => self.resend.push_back(other),
            None => {
                return Err(SstError::Protocol(format!(
                    "the joiner rejected frame {seq}, which is not in flight"
                )))
            }
        }
        Ok(())
    }
}

/// Counters shared by all streams.
#[derive(Default)]
struct Totals {
    bytes_sent: AtomicU64,
    bytes_same: AtomicU64,
    pieces_same: AtomicU64,
    resent: AtomicU64,
    blocked_nanos: AtomicU64,
    joiner_waiting: AtomicU32,
    data_pieces: AtomicU64,
}

/// A token bucket shared by all streams (`[sst] rlimit`).
struct RateLimit {
    bytes_per_second: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl RateLimit {
    fn take(&self, bytes: usize) {
        let burst = (self.bytes_per_second / 10.0).max(PIECE_BYTES as f64 * 2.0);
        loop {
            let wait = {
                let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let refill = now.duration_since(bucket.1).as_secs_f64() * self.bytes_per_second;
                bucket.0 = (bucket.0 + refill).min(burst);
                bucket.1 = now;
                if bucket.0 >= bytes as f64 || bucket.0 >= burst {
                    bucket.0 -= bytes as f64;
                    return;
                }
                (bytes as f64 - bucket.0) / self.bytes_per_second
            };
            thread::sleep(Duration::from_secs_f64(wait.min(0.1)));
        }
    }
}

/// Everything a stream's writer needs.
struct Sender {
    held: Arc<HashMap<(String, u64), (u32, u64)>>,
    compress: Arc<AtomicBool>,
    level: i32,
    rate: Option<Arc<RateLimit>>,
    totals: Arc<Totals>,
    corrupt_piece: Option<u64>,
    corrupted: Arc<AtomicBool>,
}

impl Sender {
    fn new(settings: &Settings, held: Vec<HeldPiece>) -> Sender {
        Sender {
            held: Arc::new(
                held.into_iter()
                    .map(|p| ((p.path, p.offset), (p.len, p.digest)))
                    .collect(),
            ),
            compress: Arc::new(AtomicBool::new(settings.compressor == Compressor::Zstd)),
            level: settings.compress_level,
            rate: settings.rate_limit.map(|r| {
                Arc::new(RateLimit {
                    bytes_per_second: r as f64,
                    bucket: Mutex::new((0.0, Instant::now())),
                })
            }),
            totals: Arc::new(Totals::default()),
            corrupt_piece: std::env::var(FAULT_CORRUPT_PIECE)
                .ok()
                .and_then(|v| v.parse().ok()),
            corrupted: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// What the feeder queued: the counts the joiner must confirm.
#[derive(Default)]
struct Fed {
    pieces: u64,
    bytes: u64,
    files: u64,
}

/// Runs the donor side; on success prints nothing itself (the caller prints `done`).
pub fn run_donor(args: &Args, settings: &Settings) -> Result<(), SstError> {
    let (target, secret) = parse_ready_address(&args.address)?;
    let mut progress = ProgressFile::new(progress_path(&args.datadir), "donor", &target);
    // A broken TLS setup fails here, before the joiner is contacted.
    let result = session::load_tls(settings.tls.as_ref()).and_then(|tls| {
        let session = Session::new(secret, tls);
        donate(args, settings, &target, &session, &mut progress)
    });
    if let Err(error) = &result {
        progress.failed(&error.to_string());
    }
    result
}

/// The first frame of every stream.
fn hello(session: &Session, stream: u16, streams: u16) -> Frame {
    Frame::Hello {
        session: session.secret().session_id(),
        stream,
        streams,
    }
}

fn donate(
    args: &Args,
    settings: &Settings,
    target: &str,
    session: &Session,
    progress: &mut ProgressFile,
) -> Result<(), SstError> {
    if args.bypass {
        return donate_nothing(args, target, session, progress);
    }
    let server_version = match preflight(args, settings) {
        Ok(version) => version,
        Err(error) => {
            tell_joiner(
                target,
                session,
                format!("the donor cannot send a snapshot: {error}"),
            );
            return Err(error);
        }
    };
    if settings.donor_nice > 0 {
        // The snapshot yields the CPU to the donor's clients; mariadb-backup, started
        // below, inherits this.
        if let Err(e) = rustix::process::nice(settings.donor_nice) {
            log(
                "WARNING",
                &format!("cannot lower the transfer's CPU priority: {e}"),
            );
        }
    }
    let estimated_bytes = datadir_bytes(&args.datadir);
    progress.set_total(estimated_bytes);
    let streams = settings.streams;
    let mut control = connect(target, session)?;
    write_control(&mut control, &hello(session, 0, streams))?;
    let plan = Frame::Plan {
        bypass: None,
        estimated_bytes,
        server_version,
    };
    write_control(&mut control, &plan)?;
    let held = match read_reply(&mut control)? {
        Frame::Accept { held } => held,
        other => {
            return Err(SstError::Protocol(format!(
                "expected Accept, got {}",
                other.kind()
            )))
        }
    };
    // The other streams only now: the joiner admits them (TLS, the proof of the secret)
    // after it answered the plan, and a handshake needs the joiner's side.
    let mut connections = Vec::with_capacity(usize::from(streams));
    connections.push(control);
    for stream in 1..streams {
        let mut connection = connect(target, session)?;
        write_control(&mut connection, &hello(session, stream, streams))?;
        connections.push(connection);
    }
    log_plan(args, settings, target, estimated_bytes, &held);
    progress.phase("transfer");
    let sender = Arc::new(Sender::new(settings, held));
    send_snapshot(args, settings, progress, &sender, connections)
}

/// No data: the server asked for none (IST follows); the joiner only needs the position.
fn donate_nothing(
    args: &Args,
    target: &str,
    session: &Session,
    progress: &mut ProgressFile,
) -> Result<(), SstError> {
    let position = args.gtid.clone().unwrap_or_default();
    let mut control = connect(target, session)?;
    write_control(&mut control, &hello(session, 0, 1))?;
    let plan = Frame::Plan {
        bypass: Some(position.clone()),
        estimated_bytes: 0,
        server_version: String::new(),
    };
    write_control(&mut control, &plan)?;
    let reply = read_reply(&mut control)?;
    if reply != Frame::Finished {
        return Err(SstError::Protocol(format!(
            "expected Finished, got {}",
            reply.kind()
        )));
    }
    log(
        "INFO",
        &format!("no data needed (IST follows): told the joiner {position}"),
    );
    progress.phase("done");
    Ok(())
}

/// Tells the joiner why this donor cannot send, so that its log names the cause and it
/// stops waiting.
fn tell_joiner(target: &str, session: &Session, message: String) {
    if let Ok(mut control) = connect(target, session) {
        let _ = write_control(&mut control, &hello(session, 0, 1));
        let _ = write_control(&mut control, &Frame::Error { message });
    }
}

fn log_plan(
    args: &Args,
    settings: &Settings,
    target: &str,
    estimated_bytes: u64,
    held: &[HeldPiece],
) {
    if !held.is_empty() {
        let held_bytes: u64 = held.iter().map(|p| u64::from(p.len)).sum();
        log(
            "INFO",
            &format!(
                "the joiner holds {} verified pieces ({:.1} MiB) from an earlier attempt: \
                 unchanged ones are confirmed, not sent",
                held.len(),
                held_bytes as f64 / (1 << 20) as f64
            ),
        );
    }
    log(
        "INFO",
        &format!(
            "sending a hot snapshot of {} (about {:.2} GiB) to {target} over {} {}streams{}",
            args.datadir.display(),
            estimated_bytes as f64 / (1u64 << 30) as f64,
            settings.streams,
            if settings.tls.is_some() { "TLS " } else { "" },
            settings
                .rate_limit
                .map(|r| format!(", at most {:.0} MB/s", r as f64 / 1e6))
                .unwrap_or_default()
        ),
    );
}

/// A stream's thread: it hands its connection back, so that stream 0 can confirm the
/// snapshot and every connection stays open until the joiner has.
type Worker = JoinHandle<(Stream, Result<(), SstError>)>;

/// Runs mariadb-backup, feeds its pieces to the streams and has the joiner confirm them;
/// on failure the joiner is told why on stream 0.
fn send_snapshot(
    args: &Args,
    settings: &Settings,
    progress: &mut ProgressFile,
    sender: &Arc<Sender>,
    connections: Vec<Stream>,
) -> Result<(), SstError> {
    let failure = Arc::new(Failure::default());
    let (work_tx, work_rx) = bounded::<Work>(usize::from(settings.streams) * 4);
    let workers = start_streams(connections, &work_rx, sender, &failure)?;
    drop(work_rx);
    let fed = feed_backup(args, settings, progress, sender, &work_tx, &failure);
    drop(work_tx);
    if let Err(error) = &fed {
        failure.set(format!("the donor stopped: {error}"));
    }
    let (mut connections, streamed) = join_streams(workers, &failure);
    let control = connections.first_mut().and_then(Option::as_mut);
    let result = match (fed, streamed) {
        (Err(error), _) | (Ok(_), Err(error)) => Err(error),
        (Ok(fed), Ok(())) => confirm(control, &fed).map(|()| fed),
    };
    match result {
        Ok(fed) => {
            log_sent(progress, &fed, &sender.totals);
            Ok(())
        }
        Err(error) => {
            if let Some(control) = connections.first_mut().and_then(Option::as_mut) {
                let message = format!("the donor failed: {error}");
                let _ = write_frame(control, &Frame::Error { message }, &[]);
                let _ = control.flush();
            }
            Err(error)
        }
    }
}

fn start_streams(
    connections: Vec<Stream>,
    work: &Receiver<Work>,
    sender: &Arc<Sender>,
    failure: &Arc<Failure>,
) -> Result<Vec<Worker>, SstError> {
    let mut workers = Vec::with_capacity(connections.len());
    for (index, mut connection) in connections.into_iter().enumerate() {
        let (work, sender, shared_failure) = (work.clone(), sender.clone(), failure.clone());
        let spawned = thread::Builder::new()
            .name(format!("sst-send-{index}"))
            .spawn(move || {
                let result = run_stream(&mut connection, &work, &sender, &shared_failure);
                (connection, result)
            });
        match spawned {
            Ok(handle) => workers.push(handle),
            Err(e) => {
                failure.set(format!("cannot start a stream's thread: {e}"));
                return Err(SstError::io("starting a thread", e));
            }
        }
    }
    Ok(workers)
}

/// Waits for every stream; returns their connections (by stream number, `None` for a
/// stream whose thread panicked) and the transfer's first failure.
fn join_streams(
    workers: Vec<Worker>,
    failure: &Failure,
) -> (Vec<Option<Stream>>, Result<(), SstError>) {
    let mut connections = Vec::with_capacity(workers.len());
    let mut first_error = None;
    for handle in workers {
        match handle.join() {
            Ok((connection, result)) => {
                connections.push(Some(connection));
                if let Err(error) = result {
                    first_error.get_or_insert(error);
                }
            }
            Err(_) => {
                connections.push(None);
                first_error.get_or_insert(SstError::Protocol("a stream's sender panicked".into()));
            }
        }
    }
    let result = match (first_error, failure.get()) {
        (Some(error), _) => Err(error),
        (None, Some(message)) => Err(SstError::Peer(message)),
        (None, None) => Ok(()),
    };
    (connections, result)
}

/// Sends `Done` on stream 0 and waits for the joiner to confirm the counts.
fn confirm(control: Option<&mut Stream>, fed: &Fed) -> Result<(), SstError> {
    let control = control.ok_or_else(|| SstError::Protocol("stream 0's sender panicked".into()))?;
    let done = Frame::Done {
        pieces: fed.pieces,
        bytes: fed.bytes,
        files: fed.files,
    };
    write_control(control, &done)?;
    match read_reply(control)? {
        Frame::Finished => Ok(()),
        other => Err(SstError::Protocol(format!(
            "expected Finished, got {}",
            other.kind()
        ))),
    }
}

fn log_sent(progress: &mut ProgressFile, fed: &Fed, totals: &Totals) {
    let sent = totals.bytes_sent.load(Ordering::Relaxed);
    let same = totals.bytes_same.load(Ordering::Relaxed);
    progress.update(sent + same, same);
    progress.phase("done");
    log(
        "INFO",
        &format!(
            "snapshot sent: {} pieces, {} files, {:.1} MiB in {:.1} s ({:.0} MB/s); \
             {} pieces ({:.1} MiB) the joiner already held were not sent again; {} pieces \
             were sent again after failing verification",
            fed.pieces,
            fed.files,
            fed.bytes as f64 / (1 << 20) as f64,
            progress.elapsed(),
            fed.bytes as f64 / progress.elapsed().max(1e-3) / 1e6,
            totals.pieces_same.load(Ordering::Relaxed),
            same as f64 / (1 << 20) as f64,
            totals.resent.load(Ordering::Relaxed),
        ),
    );
}

/// Runs mariadb-backup and queues its pieces for the streams; waits for the tool.
fn feed_backup(
    args: &Args,
    settings: &Settings,
    progress: &mut ProgressFile,
    sender: &Sender,
    work: &crossbeam_channel::Sender<Work>,
    failure: &Failure,
) -> Result<Fed, SstError> {
    let work_dir = std::env::temp_dir().join(format!("trireme-sst-backup-{}", std::process::id()));
    let mut backup = start_backup(args, settings, &work_dir)?;
    let stdout = backup.stdout.take().expect("piped stdout");
    let mut reader = XbReader::new(BufReader::with_capacity(1 << 20, stdout));
    let fed = feed_chunks(&mut reader, settings, progress, sender, work, failure);
    let status = finish_backup(&mut backup, fed.is_err());
    let _ = fs::remove_dir_all(&work_dir);
    let fed = fed?;
    status?;
    Ok(fed)
}

/// Cuts the backup's chunks into pieces and queues them, with a `File` for each new file.
fn feed_chunks(
    reader: &mut XbReader<impl Read>,
    settings: &Settings,
    progress: &mut ProgressFile,
    sender: &Sender,
    work: &crossbeam_channel::Sender<Work>,
    failure: &Failure,
) -> Result<Fed, SstError> {
    let mut files: HashSet<Arc<str>> = HashSet::new();
    let mut fed = Fed::default();
    let mut auto = AutoCompress::new();
    while let Some(chunk) = reader.next_chunk()? {
        let (path, payload) = match chunk {
            Chunk::EndOfFile { path } => (path, None),
            Chunk::Payload { path, offset, data } => (path, Some((offset, data))),
        };
        let path: Arc<str> = path.into();
        if files.insert(path.clone()) {
            queue(work, Work::File { path: path.clone() }, failure)?;
        }
        if let Some((offset, data)) = payload {
            for (piece_offset, piece) in cut_pieces(offset, &data) {
                fed.pieces += 1;
                fed.bytes += piece.len() as u64;
                let piece = Work::Piece {
                    path: path.clone(),
                    offset: piece_offset,
                    data: Arc::new(piece.to_vec()),
                    resends: 0,
                };
                queue(work, piece, failure)?;
            }
        }
        let totals = &sender.totals;
        let same = totals.bytes_same.load(Ordering::Relaxed);
        progress.update(totals.bytes_sent.load(Ordering::Relaxed) + same, same);
        if settings.compressor == Compressor::Auto {
            auto.check(settings, sender);
        }
    }
    fed.files = files.len() as u64;
    Ok(fed)
}

/// `[sst] compressor=auto`: compression starts once the link, not the joiner's disk, is
/// measured to be the bottleneck.
struct AutoCompress {
    last_check: Instant,
    blocked_mark: u64,
}

impl AutoCompress {
    fn new() -> AutoCompress {
        AutoCompress {
            last_check: Instant::now(),
            blocked_mark: 0,
        }
    }

    fn check(&mut self, settings: &Settings, sender: &Sender) {
        if self.last_check.elapsed() < AUTO_CHECK_INTERVAL {
            return;
        }
        let totals = &sender.totals;
        let blocked = totals.blocked_nanos.load(Ordering::Relaxed);
        let span = self.last_check.elapsed().as_nanos() as f64 * f64::from(settings.streams);
        let blocked_share = (blocked - self.blocked_mark) as f64 / span;
        let joiner_waiting = f64::from(totals.joiner_waiting.load(Ordering::Relaxed)) / 1000.0;
        if blocked_share > 0.5 && joiner_waiting > 0.5 && !sender.compress.load(Ordering::Relaxed) {
            sender.compress.store(true, Ordering::Relaxed);
            log(
                "INFO",
                &format!(
                    "the link is the bottleneck (streams blocked {:.0}% of the time while the \
                     joiner waited {:.0}%): compressing with zstd level {}",
                    blocked_share * 100.0,
                    joiner_waiting * 100.0,
                    settings.compress_level
                ),
            );
        }
        self.blocked_mark = blocked;
        self.last_check = Instant::now();
    }
}

/// Splits a chunk at multiples of [`PIECE_BYTES`] of the file offset.
fn cut_pieces(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let position = offset + at as u64;
        let to_boundary = (PIECE_BYTES - position % PIECE_BYTES) as usize;
        let len = to_boundary.min(data.len() - at);
        out.push((position, &data[at..at + len]));
        at += len;
    }
    out
}

/// Queues work unless the transfer already failed.
fn queue(
    tx: &crossbeam_channel::Sender<Work>,
    mut work: Work,
    failure: &Failure,
) -> Result<(), SstError> {
    loop {
        if let Some(message) = failure.get() {
            return Err(SstError::Peer(message));
        }
        match tx.send_timeout(work, POLL) {
            Ok(()) => return Ok(()),
            Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => work = back,
            Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                return Err(SstError::Protocol("every stream stopped".into()))
            }
        }
    }
}

/// One stream: sends pieces (those to send again first) with at most [`WINDOW`]
/// unacknowledged, and reads the joiner's answers when the window is full or nothing is
/// ready to send. Returns once the work is done and acknowledged, or `Ok` early when
/// another stream failed (that failure is in `failure`).
fn run_stream(
    connection: &mut Stream,
    work: &Receiver<Work>,
    sender: &Sender,
    failure: &Failure,
) -> Result<(), SstError> {
    let result = stream_pieces(connection, work, sender, failure);
    if let Err(error) = &result {
        failure.set(error.to_string());
    }
    result
}

fn stream_pieces(
    connection: &mut Stream,
    work: &Receiver<Work>,
    sender: &Sender,
    failure: &Failure,
) -> Result<(), SstError> {
    let mut window = Window::default();
    let mut open = true;
    let mut scratch = Vec::new();
    while failure.get().is_none() {
        if window.unacked.len() < WINDOW {
            let next = match window.resend.pop_front() {
                Some(again) => Next::Ready(again),
                None if open => next_work(work, window.unacked.is_empty()),
                None => Next::NotYet,
            };
            open &= !matches!(next, Next::Finished);
            if let Next::Ready(item) = next {
                send_work(connection, &mut window, item, sender, &mut scratch)?;
                continue;
            }
        }
        if window.unacked.is_empty() {
            if !open {
                return connection
                    .flush()
                    .map_err(|e| SstError::io("flushing a stream", e));
            }
            continue;
        }
        // The joiner answers every frame, so an answer is on its way.
        read_answer(connection, &mut window, &sender.totals)?;
    }
    Ok(())
}

/// What a stream finds when it looks for work.
enum Next {
    Ready(Work),
    NotYet,
    /// The feeder is done: nothing more will come.
    Finished,
}

/// The next piece of work, waiting a little for it when `wait`.
fn next_work(work: &Receiver<Work>, wait: bool) -> Next {
    let received = if wait {
        work.recv_timeout(POLL).map_err(|e| e.is_disconnected())
    } else {
        work.try_recv().map_err(|e| e.is_disconnected())
    };
    match received {
        Ok(item) => Next::Ready(item),
        Err(false) => Next::NotYet,
        Err(true) => Next::Finished,
    }
}

/// Sends one piece of work and keeps it until it is acknowledged.
fn send_work(
    connection: &mut Stream,
    window: &mut Window,
    item: Work,
    sender: &Sender,
    scratch: &mut Vec<u8>,
) -> Result<(), SstError> {
    window.seq += 1;
    let seq = window.seq;
    let (frame, with_payload) = frame_for(&item, seq, sender, scratch)?;
    let payload: &[u8] = if with_payload { scratch } else { &[] };
    if let Some(rate) = &sender.rate {
        rate.take(payload.len() + 64);
    }
    window.unacked.insert(seq, item);
    let started = Instant::now();
    write_frame(connection, &frame, payload).map_err(|e| {
        SstError::Peer(format!(
            "the joiner closed a stream while the donor was sending ({})",
            session::describe_io(connection, &e)
        ))
    })?;
    sender
        .totals
        .blocked_nanos
        .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    Ok(())
}

/// The frame for one piece of work; whether its payload is in `scratch`.
fn frame_for(
    item: &Work,
    seq: u64,
    sender: &Sender,
    scratch: &mut Vec<u8>,
) -> Result<(Frame, bool), SstError> {
    let (path, offset, data, resends) = match item {
        Work::File { path } => {
            let path = path.to_string();
            return Ok((Frame::File { seq, path }, false));
        }
        Work::Piece {
            path,
            offset,
            data,
            resends,
        } => (path, *offset, data, *resends),
    };
    let len = data.len() as u32;
    let unchanged = resends == 0
        && sender
            .held
            .get(&(path.to_string(), offset))
            .is_some_and(|&(l, d)| l == len && d == frame::digest(data));
    if unchanged {
        let totals = &sender.totals;
        totals.pieces_same.fetch_add(1, Ordering::Relaxed);
        totals
            .bytes_same
            .fetch_add(u64::from(len), Ordering::Relaxed);
        let path = path.to_string();
        return Ok((
            Frame::Same {
                seq,
                path,
                offset,
                len,
            },
            false,
        ));
    }
    let crc = crc32c::crc32c(data);
    let compressed = sender.compress.load(Ordering::Relaxed);
    scratch.clear();
    if compressed {
        *scratch = zstd::bulk::compress(data, sender.level)
            .map_err(|e| SstError::io("compressing a piece", e))?;
    } else {
        scratch.extend_from_slice(data);
    }
    let number = sender.totals.data_pieces.fetch_add(1, Ordering::Relaxed) + 1;
    if sender.corrupt_piece == Some(number)
        && !sender.corrupted.swap(true, Ordering::Relaxed)
        && !scratch.is_empty()
    {
        let middle = scratch.len() / 2;
        scratch[middle] ^= 0xff;
        log(
            "WARNING",
            &format!("fault injection: corrupted piece {path}@{offset} after its checksum"),
        );
    }
    if resends == 0 {
        sender
            .totals
            .bytes_sent
            .fetch_add(u64::from(len), Ordering::Relaxed);
    }
    let path = path.to_string();
    let frame = Frame::Data {
        seq,
        path,
        offset,
        len,
        crc,
        compressed,
    };
    Ok((frame, true))
}

/// Reads one answer of the joiner on a data stream.
fn read_answer(
    connection: &mut Stream,
    window: &mut Window,
    totals: &Totals,
) -> Result<(), SstError> {
    match read_frame(connection, &mut Vec::new())? {
        Some(Frame::Ack {
            seq,
            waiting_permille,
        }) => {
            window.unacked = window.unacked.split_off(&(seq + 1));
            totals
                .joiner_waiting
                .store(u32::from(waiting_permille), Ordering::Relaxed);
            Ok(())
        }
        Some(Frame::Nack { seq, reason }) => window.nacked(seq, &reason, totals),
        Some(Frame::Error { message }) => Err(SstError::Peer(format!(
            "the joiner stopped the transfer: {message}"
        ))),
        Some(other) => Err(SstError::Protocol(format!(
            "the joiner sent {} on a data stream",
            other.kind()
        ))),
        None => Err(SstError::Peer(
            "the joiner closed a stream before acknowledging every piece".into(),
        )),
    }
}

/// Connects to the joiner (retrying while its port is not open yet), then TLS and the
/// proof of the session secret; from then on [`REPLY_TIMEOUT`] bounds every wait for it.
fn connect(target: &str, session: &Session) -> Result<Stream, SstError> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let tcp = loop {
        match TcpStream::connect(target) {
            Ok(tcp) => break tcp,
            Err(e) if Instant::now() >= deadline => {
                return Err(SstError::io(
                    format!("connecting to the joiner at {target}"),
                    e,
                ))
            }
            Err(_) => thread::sleep(CONNECT_RETRY),
        }
    };
    let _ = tcp.set_nodelay(true);
    let stream = session.open(tcp, target)?;
    set_timeouts(stream.tcp(), Some(REPLY_TIMEOUT))
        .map_err(|e| SstError::io("configuring a connection", e))?;
    Ok(stream)
}

fn write_control(connection: &mut Stream, frame: &Frame) -> Result<(), SstError> {
    write_frame(connection, frame, &[])
        .and_then(|()| connection.flush())
        .map_err(|e| {
            let cause = session::describe_io(connection, &e);
            SstError::io(
                format!("sending {} to the joiner", frame.kind()),
                std::io::Error::new(e.kind(), cause),
            )
        })
}

fn read_reply(connection: &mut Stream) -> Result<Frame, SstError> {
    frame::expect_frame(connection, &mut Vec::new(), "the joiner's answer").map_err(|e| match e {
        SstError::Peer(message) => SstError::Peer(format!("the joiner refused: {message}")),
        other => other,
    })
}

/// Points a client tool at the donor server's socket with the SST credentials (the
/// password through the environment, never the command line).
fn log_in_as_sst_user(cmd: &mut Command, args: &Args) {
    if let Some(socket) = &args.socket {
        cmd.arg(format!("--socket={socket}"));
    }
    match credentials() {
        Some((user, password)) => {
            cmd.arg(format!("--user={user}")).env("MYSQL_PWD", password);
        }
        None => {
            cmd.arg("--user=root").env_remove("MYSQL_PWD");
        }
    }
}

/// Checks the tool and the credentials before anything is sent; returns the server version.
fn preflight(args: &Args, settings: &Settings) -> Result<String, SstError> {
    crate::joiner::backup_tool_version(&settings.mariabackup)?;
    let mut cmd = Command::new("mariadb");
    cmd.arg("--no-defaults")
        .args(["-N", "-B", "-e", "SELECT VERSION()"]);
    log_in_as_sst_user(&mut cmd, args);
    let out = cmd.output().map_err(|e| SstError::Preflight {
        message: format!("cannot run the mariadb client to check the SST credentials ({e}): install mariadb-client"),
        code: exit_code::NOT_FOUND,
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let user = credentials().map_or("root".to_string(), |c| c.0);
        return Err(SstError::Preflight {
            message: format!(
                "the donor server refused the SST credentials of user {user:?} ({}): set \
                 wsrep_sst_auth to user:password of an account with the RELOAD, PROCESS, LOCK \
                 TABLES and BINLOG MONITOR privileges",
                stderr.trim()
            ),
            code: exit_code::ACCESS,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The donor's estimate of the snapshot: the datadir's bytes minus what a backup leaves
/// out (the provider's files, the redo log, which it copies only from its checkpoint on).
fn datadir_bytes(datadir: &Path) -> u64 {
    let left_out = fs::read_dir(datadir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    crate::swap::is_preserved(&name) || name.starts_with("ib_logfile")
                })
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>()
        })
        .unwrap_or(0);
    crate::swap::staged_bytes(datadir).saturating_sub(left_out)
}

/// Removes the scratch directories of earlier donors that were killed before they could.
fn remove_orphaned_scratch_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("trireme-sst-backup-") else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Starts mariadb-backup streaming to a pipe; `work` is its scratch directory.
fn start_backup(args: &Args, settings: &Settings, work: &Path) -> Result<Child, SstError> {
    remove_orphaned_scratch_dirs();
    fs::create_dir_all(work).map_err(|e| SstError::io("creating a work directory", e))?;
    let log_path = args.datadir.join("mariabackup.backup.log");
    let log_file = fs::File::create(&log_path)
        .map_err(|e| SstError::io(format!("creating {}", log_path.display()), e))?;
    let mut cmd = Command::new(&settings.mariabackup);
    cmd.args(args.defaults_options())
        .arg("--backup")
        .arg("--galera-info")
        .arg("--stream=xbstream")
        .arg(format!("--parallel={}", settings.backup_threads))
        .arg(format!("--target-dir={}", work.display()))
        .arg(format!("--datadir={}", args.datadir.display()))
        .arg("--databases-exclude=lost+found");
    log_in_as_sst_user(&mut cmd, args);
    if !args.mysqld_args.is_empty() {
        cmd.arg("--mysqld-args").args(&args.mysqld_args);
    }
    cmd.stdout(Stdio::piped())
        .stderr(log_file)
        .stdin(Stdio::null());
    log(
        "INFO",
        &format!(
            "starting {} --backup (log: {})",
            settings.mariabackup,
            log_path.display()
        ),
    );
    cmd.spawn()
        .map_err(|e| SstError::Tool(format!("cannot start {}: {e}", settings.mariabackup)))
}

/// Waits for mariadb-backup (killing it if the transfer already failed).
fn finish_backup(backup: &mut Child, failed: bool) -> Result<(), SstError> {
    if failed {
        let _ = backup.kill();
    }
    // Drain what is left so the tool is not stuck on a full pipe.
    if let Some(mut out) = backup.stdout.take() {
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    }
    let status = backup
        .wait()
        .map_err(|e| SstError::io("waiting for mariadb-backup", e))?;
    if !status.success() && !failed {
        return Err(SstError::Tool(format!(
            "mariadb-backup --backup failed ({status}): see mariabackup.backup.log in the \
             donor's datadir"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::joiner::{receive_stream, Receiving};
    use crate::session::tests::tls;
    use std::net::{Shutdown, TcpListener};

    #[test]
    fn chunks_are_cut_at_piece_boundaries_of_the_file() {
        let data = vec![7u8; (PIECE_BYTES as usize) * 2 + 10];
        let cuts = cut_pieces(PIECE_BYTES - 5, &data);
        let offsets: Vec<u64> = cuts.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            vec![
                PIECE_BYTES - 5,
                PIECE_BYTES,
                2 * PIECE_BYTES,
                3 * PIECE_BYTES
            ]
        );
        assert_eq!(cuts.iter().map(|(_, d)| d.len()).sum::<usize>(), data.len());
        assert_eq!(cuts[0].1.len(), 5);
    }

    /// Six pieces of one file, each different.
    fn pieces() -> Vec<Vec<u8>> {
        (0..6u8)
            .map(|i| (0..PIECE_BYTES as usize).map(|b| (b as u8) ^ i).collect())
            .collect()
    }

    /// What one loopback stream delivered.
    struct Delivered {
        /// Pieces received or confirmed, bytes resumed, pieces that failed verification.
        counts: (u64, u64, u64),
        totals: Arc<Totals>,
        written: Vec<u8>,
        /// The certificate subjects each side saw of the other (TLS only).
        donor_saw: Option<String>,
        joiner_saw: Option<String>,
    }

    /// One stream from `donor` to `joiner` over loopback TCP, without mariadb-backup: the
    /// joiner admits the connection and receives; `held` are the pieces (by index) it holds
    /// from an earlier attempt, `corrupt` the data piece the donor corrupts once.
    fn stream_over_loopback(
        donor: Session,
        joiner: Session,
        data: &[Vec<u8>],
        held: &[usize],
        corrupt: Option<u64>,
    ) -> Delivered {
        let staging = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let manifest: Vec<HeldPiece> = held
            .iter()
            .map(|&i| HeldPiece {
                path: "db/t.ibd".into(),
                offset: i as u64 * PIECE_BYTES,
                len: data[i].len() as u32,
                digest: frame::digest(&data[i]),
            })
            .collect();
        let receiving = Arc::new(Receiving::new(
            staging.path().to_path_buf(),
            manifest.clone(),
            None,
        ));
        let joining = {
            let receiving = receiving.clone();
            thread::spawn(move || {
                let (tcp, peer) = listener.accept().unwrap();
                let mut stream = joiner.admit(tcp, &peer.to_string()).unwrap();
                // Stream 1 ends with an error once the donor shuts the connection down.
                let _ = receive_stream(&mut stream, 1, &receiving);
                stream.peer_subject()
            })
        };
        let mut connection = connect(&address, &donor).unwrap();
        let mut sender = Sender::new(&Settings::default(), manifest);
        sender.compress = Arc::new(AtomicBool::new(true));
        sender.level = 3;
        sender.corrupt_piece = corrupt;
        let (tx, rx) = bounded(4);
        let feeder = {
            let data = data.to_vec();
            thread::spawn(move || {
                let path: Arc<str> = "db/t.ibd".into();
                tx.send(Work::File { path: path.clone() }).unwrap();
                for (i, piece) in data.into_iter().enumerate() {
                    let work = Work::Piece {
                        path: path.clone(),
                        offset: i as u64 * PIECE_BYTES,
                        data: Arc::new(piece),
                        resends: 0,
                    };
                    tx.send(work).unwrap();
                }
            })
        };
        run_stream(&mut connection, &rx, &sender, &Failure::default()).unwrap();
        feeder.join().unwrap();
        connection.tcp().shutdown(Shutdown::Both).unwrap();
        let joiner_saw = joining.join().unwrap();
        Delivered {
            counts: receiving.counts(),
            totals: sender.totals.clone(),
            written: std::fs::read(staging.path().join("db/t.ibd")).unwrap(),
            donor_saw: connection.peer_subject(),
            joiner_saw,
        }
    }

    fn plaintext_pair() -> (Session, Session) {
        let secret = Secret::generate().unwrap();
        (
            Session::new(secret.clone(), None),
            Session::new(secret, None),
        )
    }

    /// zstd-compressed pieces arrive intact, a corrupted piece is rejected and sent again,
    /// and a resumed attempt confirms the pieces the joiner holds instead of sending them.
    #[test]
    fn pieces_cross_loopback_compressed_checked_and_resumed() {
        let data = pieces();
        let (donor, joiner) = plaintext_pair();
        let first = stream_over_loopback(donor, joiner, &data, &[], Some(2));
        assert_eq!(first.counts, (6, 0, 1), "one corrupted piece, resent");
        assert_eq!(first.totals.resent.load(Ordering::Relaxed), 1);
        assert_eq!(
            first.written,
            data.concat(),
            "every byte arrived, decompressed, in place"
        );
        assert_eq!(
            (first.donor_saw, first.joiner_saw),
            (None, None),
            "plaintext"
        );

        let (donor, joiner) = plaintext_pair();
        let resumed = stream_over_loopback(donor, joiner, &data, &[0, 1, 2], None);
        let (pieces, resumed_bytes, rejected) = resumed.counts;
        assert_eq!((pieces, rejected), (6, 0));
        assert_eq!(
            resumed_bytes,
            3 * PIECE_BYTES,
            "three pieces confirmed, not sent"
        );
        assert_eq!(resumed.totals.pieces_same.load(Ordering::Relaxed), 3);
        let sent_part = &resumed.written[3 * PIECE_BYTES as usize..];
        assert_eq!(
            sent_part,
            &data[3..].concat()[..],
            "the other three were sent"
        );
    }

    /// The same transfer under mutual TLS: each side saw the other's certificate, and the
    /// resend of a corrupted piece works inside the encrypted stream.
    #[test]
    fn pieces_cross_loopback_under_tls() {
        let data = pieces();
        let secret = Secret::generate().unwrap();
        let donor = Session::new(secret.clone(), tls("node-b.key", "node-b.pem", "ca.pem"));
        let joiner = Session::new(secret, tls("node.key", "node.pem", "ca.pem"));
        let delivered = stream_over_loopback(donor, joiner, &data, &[], Some(4));
        assert_eq!(delivered.counts, (6, 0, 1));
        assert_eq!(delivered.written, data.concat());
        let donor_saw = delivered.donor_saw.expect("TLS on the donor's side");
        let joiner_saw = delivered.joiner_saw.expect("TLS on the joiner's side");
        assert!(donor_saw.ends_with("CN=node"), "{donor_saw}");
        assert!(joiner_saw.ends_with("CN=node-b"), "{joiner_saw}");
    }

    #[test]
    fn ready_addresses_parse() {
        let secret = Secret::generate().unwrap();
        let text = format!("127.0.0.1:4444/trireme/{}", secret.to_hex());
        let (target, parsed) = parse_ready_address(&text).unwrap();
        assert_eq!(target, "127.0.0.1:4444");
        assert_eq!(parsed.to_hex(), secret.to_hex());
        let error = parse_ready_address("127.0.0.1:4444/xtrabackup_sst//1").unwrap_err();
        assert!(error.to_string().contains("same method"), "{error}");
        // A mangled session is refused without being echoed into the log.
        let mangled = format!("{text}x");
        let error = parse_ready_address(&mangled).unwrap_err().to_string();
        assert!(!error.contains(&secret.to_hex()[..16]), "{error}");
        let old_style = parse_ready_address("127.0.0.1:4444/trireme/00ff").unwrap_err();
        assert!(
            old_style.to_string().contains("64 hex digits"),
            "{old_style}"
        );
    }
}
