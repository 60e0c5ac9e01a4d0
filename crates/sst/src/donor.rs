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

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver};
use tls::Stream;

use crate::config::{credentials, Args, Compressor, Settings};
use crate::frame::{self, read_frame, write_frame, Frame, HeldPiece};
use crate::progress::{progress_path, ProgressFile};
use crate::session::{self, set_timeouts, Secret, Session};
use crate::xbstream::{Chunk, XbReader};
use crate::{exit_code, log, SstError, PIECE_BYTES};

mod backup;
mod feeding;
mod stream;
#[cfg(test)]
mod tests;

use backup::{datadir_bytes, finish_backup, preflight, start_backup};
use feeding::feed_backup;
use stream::{connect, read_reply, run_stream, write_control};

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
        /// A slice of the backup's chunk, shared with the chunk's other pieces.
        data: Bytes,
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
