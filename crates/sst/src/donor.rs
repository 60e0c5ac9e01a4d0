//! The donor: a hot `mariadb-backup` snapshot, cut into pieces and sent over parallel
//! streams, each piece with its CRC32C; a piece the joiner rejects is sent again, a piece
//! the joiner already holds (resume) is confirmed instead of sent.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use crate::config::{credentials, Args, Compressor, Settings};
use crate::frame::{self, read_frame, write_frame, Frame};
use crate::progress::{progress_path, ProgressFile};
use crate::xbstream::{Chunk, XbReader};
use crate::{exit_code, log, SstError, PIECE_BYTES};

/// Frames a stream may have in flight before it waits for acknowledgements.
const WINDOW: usize = 8;
/// How often one piece may fail verification before the transfer gives up.
const MAX_RESENDS: u32 = 3;
/// How long the donor waits for the joiner's replies (plan, final confirmation).
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);
/// Fault injection for tests: the donor corrupts the payload of its n-th data piece once,
/// after computing its checksum, so the joiner must detect it and ask again.
pub const FAULT_CORRUPT_PIECE: &str = "TRIREME_FAULT_CORRUPT_SST_PIECE";

/// The joiner's address and session, from its `ready` text `host:port/trireme/<session>`.
pub fn parse_ready_address(text: &str) -> Result<(String, u64), SstError> {
    let bad = || {
        SstError::Config(format!(
            "donor got address {text:?}; expected host:port/trireme/<session> from a joiner \
             that uses wsrep_sst_method=trireme (donor and joiner must use the same method)"
        ))
    };
    let mut parts = text.trim().splitn(3, '/');
    let host_port = parts.next().filter(|s| !s.is_empty()).ok_or_else(bad)?;
    if parts.next() != Some(crate::METHOD) {
        return Err(bad());
    }
    let session = u64::from_str_radix(parts.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
    Ok((host_port.to_string(), session))
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

/// What a stream's writer and its acknowledgement reader share.
#[derive(Default)]
struct StreamState {
    unacked: BTreeMap<u64, Work>,
    resend: VecDeque<Work>,
    failed: Option<String>,
    /// Frames other than acknowledgements (stream 0: the joiner's final answer).
    replies: VecDeque<Frame>,
}

struct Stream {
    state: Mutex<StreamState>,
    changed: Condvar,
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

/// Runs the donor side; on success prints nothing itself (the caller prints `done`).
pub fn run_donor(args: &Args, settings: &Settings) -> Result<(), SstError> {
    let (target, session) = parse_ready_address(&args.address)?;
    let mut progress = ProgressFile::new(progress_path(&args.datadir), "donor", &target);
    let result = donate(args, settings, &target, session, &mut progress);
    if let Err(error) = &result {
        progress.failed(&error.to_string());
    }
    result
}

fn donate(
    args: &Args,
    settings: &Settings,
    target: &str,
    session: u64,
    progress: &mut ProgressFile,
) -> Result<(), SstError> {
    if args.bypass {
        let position = args.gtid.clone().unwrap_or_default();
        let mut control = connect(target)?;
        write_control(
            &mut control,
            &Frame::Hello {
                session,
                stream: 0,
                streams: 1,
            },
        )?;
        write_control(
            &mut control,
            &Frame::Plan {
                bypass: Some(position.clone()),
                estimated_bytes: 0,
                server_version: String::new(),
            },
        )?;
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
        return Ok(());
    }
    let preflight = preflight(args, settings);
    let server_version = match preflight {
        Ok(version) => version,
        Err(error) => {
            // Tell the joiner too, so its log names the cause and it stops waiting.
            if let Ok(mut control) = connect(target) {
                let _ = write_control(
                    &mut control,
                    &Frame::Hello {
                        session,
                        stream: 0,
                        streams: 1,
                    },
                );
                let message = format!("the donor cannot send a snapshot: {error}");
                let _ = write_control(&mut control, &Frame::Error { message });
            }
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
    let mut connections = Vec::with_capacity(usize::from(streams));
    for stream in 0..streams {
        let mut connection = connect(target)?;
        write_control(
            &mut connection,
            &Frame::Hello {
                session,
                stream,
                streams,
            },
        )?;
        connections.push(connection);
    }
    write_control(
        &mut connections[0],
        &Frame::Plan {
            bypass: None,
            estimated_bytes,
            server_version: server_version.clone(),
        },
    )?;
    let held = match read_reply(&mut connections[0])? {
        Frame::Accept { held } => held,
        other => {
            return Err(SstError::Protocol(format!(
                "expected Accept, got {}",
                other.kind()
            )))
        }
    };
    let held_bytes: u64 = held.iter().map(|p| u64::from(p.len)).sum();
    if !held.is_empty() {
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
    let held: HashMap<(String, u64), (u32, u64)> = held
        .into_iter()
        .map(|p| ((p.path, p.offset), (p.len, p.digest)))
        .collect();
    log(
        "INFO",
        &format!(
            "sending a hot snapshot of {} (about {:.2} GiB) to {target} over {streams} streams{}",
            args.datadir.display(),
            estimated_bytes as f64 / (1u64 << 30) as f64,
            settings
                .rate_limit
                .map(|r| format!(", at most {:.0} MB/s", r as f64 / 1e6))
                .unwrap_or_default()
        ),
    );
    progress.phase("transfer");

    let totals = Arc::new(Totals::default());
    let compress = Arc::new(AtomicBool::new(settings.compressor == Compressor::Zstd));
    let sender = Arc::new(Sender {
        held: Arc::new(held),
        compress: compress.clone(),
        level: settings.compress_level,
        rate: settings.rate_limit.map(|r| {
            Arc::new(RateLimit {
                bytes_per_second: r as f64,
                bucket: Mutex::new((0.0, Instant::now())),
            })
        }),
        totals: totals.clone(),
        corrupt_piece: std::env::var(FAULT_CORRUPT_PIECE)
            .ok()
            .and_then(|v| v.parse().ok()),
        corrupted: Arc::new(AtomicBool::new(false)),
    });
    // Stream 0's writer owns its connection; `Done` goes out on this second handle once
    // every writer has finished.
    let mut control = connections[0]
        .try_clone()
        .map_err(|e| SstError::io("cloning stream 0", e))?;
    let sent = send_snapshot(args, settings, progress, &sender, connections, &mut control);
    if let Err(error) = &sent {
        let message = format!("the donor failed: {error}");
        let _ = write_frame(&mut control, &Frame::Error { message }, &[]);
    }
    sent
}

/// Runs mariadb-backup and feeds its pieces to the streams until the joiner confirmed.
fn send_snapshot(
    args: &Args,
    settings: &Settings,
    progress: &mut ProgressFile,
    sender: &Arc<Sender>,
    connections: Vec<TcpStream>,
    control: &mut TcpStream,
) -> Result<(), SstError> {
    let streams = settings.streams;
    let totals = sender.totals.clone();
    let compress = sender.compress.clone();
    let (work_tx, work_rx) = bounded::<Work>(usize::from(streams) * 4);
    let mut workers = Vec::new();
    let mut shared_streams = Vec::new();
    for (index, connection) in connections.into_iter().enumerate() {
        let stream = Arc::new(Stream {
            state: Mutex::new(StreamState::default()),
            changed: Condvar::new(),
        });
        shared_streams.push(stream.clone());
        let reader = connection
            .try_clone()
            .map_err(|e| SstError::io("cloning a stream", e))?;
        let acks_stream = stream.clone();
        let acks_totals = totals.clone();
        thread::Builder::new()
            .name(format!("sst-acks-{index}"))
            .spawn(move || read_acks(reader, &acks_stream, &acks_totals))
            .map_err(|e| SstError::io("starting a thread", e))?;
        let rx = work_rx.clone();
        let sender = sender.clone();
        let handle = thread::Builder::new()
            .name(format!("sst-send-{index}"))
            .spawn(move || send_stream(connection, &stream, &rx, &sender))
            .map_err(|e| SstError::io("starting a thread", e))?;
        workers.push(handle);
    }
    drop(work_rx);

    let work_dir = std::env::temp_dir().join(format!("trireme-sst-backup-{}", std::process::id()));
    let mut backup = start_backup(args, settings, &work_dir)?;
    let stdout = backup.stdout.take().expect("piped stdout");
    let mut reader = XbReader::new(BufReader::with_capacity(1 << 20, stdout));
    let mut files: HashMap<Arc<str>, ()> = HashMap::new();
    let mut pieces = 0u64;
    let mut bytes = 0u64;
    let mut last_check = Instant::now();
    let mut blocked_mark = 0u64;
    let feed = (|| -> Result<(), SstError> {
        while let Some(chunk) = reader.next_chunk()? {
            match chunk {
                Chunk::EndOfFile { path } => {
                    let path: Arc<str> = path.into();
                    if files.insert(path.clone(), ()).is_none() {
                        queue(&work_tx, Work::File { path }, &shared_streams)?;
                    }
                }
                Chunk::Payload { path, offset, data } => {
                    let path: Arc<str> = path.into();
                    if files.insert(path.clone(), ()).is_none() {
                        queue(&work_tx, Work::File { path: path.clone() }, &shared_streams)?;
                    }
                    for (piece_offset, piece) in cut_pieces(offset, &data) {
                        pieces += 1;
                        bytes += piece.len() as u64;
                        let work = Work::Piece {
                            path: path.clone(),
                            offset: piece_offset,
                            data: Arc::new(piece.to_vec()),
                            resends: 0,
                        };
                        queue(&work_tx, work, &shared_streams)?;
                    }
                }
            }
            let done = totals.bytes_sent.load(Ordering::Relaxed)
                + totals.bytes_same.load(Ordering::Relaxed);
            progress.update(done, totals.bytes_same.load(Ordering::Relaxed));
            if settings.compressor == Compressor::Auto
                && last_check.elapsed() >= Duration::from_secs(2)
            {
                let blocked = totals.blocked_nanos.load(Ordering::Relaxed);
                let span = last_check.elapsed().as_nanos() as f64 * f64::from(streams);
                let blocked_share = (blocked - blocked_mark) as f64 / span;
                let joiner_waiting =
                    f64::from(totals.joiner_waiting.load(Ordering::Relaxed)) / 1000.0;
                if blocked_share > 0.5 && joiner_waiting > 0.5 && !compress.load(Ordering::Relaxed)
                {
                    compress.store(true, Ordering::Relaxed);
                    log(
                        "INFO",
                        &format!(
                            "the link is the bottleneck (streams blocked {:.0}% of the time \
                             while the joiner waited {:.0}%): compressing with zstd level {}",
                            blocked_share * 100.0,
                            joiner_waiting * 100.0,
                            settings.compress_level
                        ),
                    );
                }
                blocked_mark = blocked;
                last_check = Instant::now();
            }
        }
        Ok(())
    })();
    drop(work_tx);
    let status = finish_backup(&mut backup, feed.is_err());
    let _ = fs::remove_dir_all(&work_dir);
    feed?;
    status?;
    for handle in workers {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => return Err(SstError::Protocol("a stream's sender panicked".into())),
        }
    }
    write_control(
        control,
        &Frame::Done {
            pieces,
            bytes,
            files: files.len() as u64,
        },
    )?;
    let reply = wait_reply(&shared_streams[0], REPLY_TIMEOUT)?;
    if reply != Frame::Finished {
        return Err(SstError::Protocol(format!(
            "expected Finished, got {}",
            reply.kind()
        )));
    }
    let sent = totals.bytes_sent.load(Ordering::Relaxed);
    let same = totals.bytes_same.load(Ordering::Relaxed);
    progress.update(sent + same, same);
    progress.phase("done");
    log(
        "INFO",
        &format!(
            "snapshot sent: {pieces} pieces, {} files, {:.1} MiB in {:.1} s ({:.0} MB/s); \
             {} pieces ({:.1} MiB) the joiner already held were not sent again; {} pieces \
             were sent again after failing verification",
            files.len(),
            bytes as f64 / (1 << 20) as f64,
            progress.elapsed(),
            bytes as f64 / progress.elapsed().max(1e-3) / 1e6,
            totals.pieces_same.load(Ordering::Relaxed),
            same as f64 / (1 << 20) as f64,
            totals.resent.load(Ordering::Relaxed),
        ),
    );
    Ok(())
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

/// Queues work unless a stream already failed (then the transfer is over).
fn queue(
    tx: &crossbeam_channel::Sender<Work>,
    mut work: Work,
    streams: &[Arc<Stream>],
) -> Result<(), SstError> {
    loop {
        if let Some(failure) = streams.iter().find_map(|s| {
            s.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .failed
                .clone()
        }) {
            return Err(SstError::Peer(failure));
        }
        match tx.send_timeout(work, Duration::from_millis(200)) {
            Ok(()) => return Ok(()),
            Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => work = back,
            Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                return Err(SstError::Protocol("every stream stopped".into()))
            }
        }
    }
}

/// One stream's writer: takes pieces (resends first), sends them, keeps them until acked.
fn send_stream(
    mut connection: TcpStream,
    stream: &Stream,
    work: &Receiver<Work>,
    sender: &Sender,
) -> Result<(), SstError> {
    let mut seq = 0u64;
    let mut open = true;
    let mut scratch = Vec::new();
    loop {
        let next = {
            let mut state = stream.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(failure) = &state.failed {
                    return Err(SstError::Peer(failure.clone()));
                }
                if state.unacked.len() < WINDOW {
                    if let Some(again) = state.resend.pop_front() {
                        break Some(again);
                    }
                    if open {
                        break None;
                    }
                }
                if !open && state.unacked.is_empty() && state.resend.is_empty() {
                    let _ = connection.flush();
                    return Ok(());
                }
                let (guard, _) = stream
                    .changed
                    .wait_timeout(state, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner());
                state = guard;
            }
        };
        let item = match next {
            Some(item) => item,
            None => match work.recv_timeout(Duration::from_millis(100)) {
                Ok(item) => item,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    continue;
                }
            },
        };
        seq += 1;
        let (frame, payload): (Frame, &[u8]) = match &item {
            Work::File { path } => (
                Frame::File {
                    seq,
                    path: path.to_string(),
                },
                &[],
            ),
            Work::Piece {
                path,
                offset,
                data,
                resends,
            } => {
                let len = data.len() as u32;
                let unchanged = *resends == 0
                    && sender
                        .held
                        .get(&(path.to_string(), *offset))
                        .is_some_and(|&(l, d)| l == len && d == frame::digest(data));
                if unchanged {
                    sender.totals.pieces_same.fetch_add(1, Ordering::Relaxed);
                    sender
                        .totals
                        .bytes_same
                        .fetch_add(u64::from(len), Ordering::Relaxed);
                    (
                        Frame::Same {
                            seq,
                            path: path.to_string(),
                            offset: *offset,
                            len,
                        },
                        &[],
                    )
                } else {
                    let crc = crc32c::crc32c(data);
                    let compressed = sender.compress.load(Ordering::Relaxed);
                    scratch.clear();
                    if compressed {
                        scratch = zstd::bulk::compress(data, sender.level)
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
                        log("WARNING", &format!("fault injection: corrupted piece {path}@{offset} after its checksum"));
                    }
                    if *resends == 0 {
                        sender
                            .totals
                            .bytes_sent
                            .fetch_add(u64::from(len), Ordering::Relaxed);
                    }
                    (
                        Frame::Data {
                            seq,
                            path: path.to_string(),
                            offset: *offset,
                            len,
                            crc,
                            compressed,
                        },
                        &scratch,
                    )
                }
            }
        };
        if let Some(rate) = &sender.rate {
            rate.take(payload.len() + 64);
        }
        stream
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unacked
            .insert(seq, item);
        let started = Instant::now();
        if let Err(e) = write_frame(&mut connection, &frame, payload) {
            let message = format!("the joiner closed stream while the donor was sending ({e})");
            stream
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .failed = Some(message.clone());
            return Err(SstError::Peer(message));
        }
        sender
            .totals
            .blocked_nanos
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// One stream's acknowledgement reader.
fn read_acks(mut connection: TcpStream, stream: &Stream, totals: &Totals) {
    let mut payload = Vec::new();
    loop {
        let frame = read_frame(&mut connection, &mut payload);
        let mut state = stream.state.lock().unwrap_or_else(|p| p.into_inner());
        match frame {
            Ok(Some(Frame::Ack {
                seq,
                waiting_permille,
            })) => {
                let rest = state.unacked.split_off(&(seq + 1));
                state.unacked = rest;
                totals
                    .joiner_waiting
                    .store(u32::from(waiting_permille), Ordering::Relaxed);
            }
            Ok(Some(Frame::Nack { seq, reason })) => match state.unacked.remove(&seq) {
                Some(Work::Piece {
                    path,
                    offset,
                    data,
                    resends,
                }) => {
                    if resends + 1 > MAX_RESENDS {
                        state.failed = Some(format!(
                            "piece {path}@{offset} failed verification {} times on the joiner \
                             ({reason}): the link corrupts data",
                            resends + 1
                        ));
                    } else {
                        log("WARNING", &format!("the joiner rejected piece {path}@{offset} ({reason}): sending it again"));
                        totals.resent.fetch_add(1, Ordering::Relaxed);
                        state.resend.push_back(Work::Piece {
                            path,
                            offset,
                            data,
                            resends: resends + 1,
                        });
                    }
                }
                Some(other) => state.resend.push_back(other),
                None => {
                    state.failed = Some(format!(
                        "the joiner rejected frame {seq}, which is not in flight"
                    ));
                }
            },
            Ok(Some(Frame::Error { message })) => {
                state.failed = Some(format!("the joiner stopped the transfer: {message}"));
            }
            Ok(Some(other)) => state.replies.push_back(other),
            Ok(None) => {
                if state.failed.is_none() && (!state.unacked.is_empty() || !state.resend.is_empty())
                {
                    state.failed =
                        Some("the joiner closed a stream before acknowledging every piece".into());
                }
                state.replies.push_back(Frame::Error {
                    message: "closed".into(),
                });
                stream.changed.notify_all();
                return;
            }
            Err(error) => {
                state.failed = Some(format!("reading the joiner's acknowledgements: {error}"));
                stream.changed.notify_all();
                return;
            }
        }
        drop(state);
        stream.changed.notify_all();
    }
}

/// Waits for a frame other than an acknowledgement on a stream.
fn wait_reply(stream: &Stream, timeout: Duration) -> Result<Frame, SstError> {
    let deadline = Instant::now() + timeout;
    let mut state = stream.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(frame) = state.replies.pop_front() {
            return match frame {
                Frame::Error { message } if message == "closed" => Err(SstError::Peer(
                    "the joiner closed the connection before confirming the snapshot".into(),
                )),
                other => Ok(other),
            };
        }
        if let Some(failure) = &state.failed {
            return Err(SstError::Peer(failure.clone()));
        }
        if Instant::now() >= deadline {
            return Err(SstError::Peer(
                "the joiner did not confirm the snapshot in time".into(),
            ));
        }
        let (guard, _) = stream
            .changed
            .wait_timeout(state, Duration::from_millis(100))
            .unwrap_or_else(|p| p.into_inner());
        state = guard;
    }
}

fn connect(target: &str) -> Result<TcpStream, SstError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(target) {
            Ok(connection) => {
                let _ = connection.set_nodelay(true);
                return Ok(connection);
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(SstError::io(
                    format!("connecting to the joiner at {target}"),
                    e,
                ))
            }
            Err(_) => thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn write_control(connection: &mut TcpStream, frame: &Frame) -> Result<(), SstError> {
    write_frame(connection, frame, &[])
        .map_err(|e| SstError::io(format!("sending {} to the joiner", frame.kind()), e))
}

fn read_reply(connection: &mut TcpStream) -> Result<Frame, SstError> {
    let _ = connection.set_read_timeout(Some(REPLY_TIMEOUT));
    let frame = frame::expect_frame(connection, &mut Vec::new(), "the joiner's answer");
    let _ = connection.set_read_timeout(None);
    frame.map_err(|e| match e {
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

    /// Donor streams against joiner receivers over loopback TCP, without mariadb-backup:
    /// zstd-compressed pieces arrive intact, a corrupted piece is rejected and sent again,
    /// and a resumed attempt confirms the pieces the joiner holds instead of sending them.
    #[test]
    fn pieces_cross_loopback_compressed_checked_and_resumed() {
        use crate::joiner::{receive_stream, Event, Receiving};
        use std::net::TcpListener;

        let data: Vec<Vec<u8>> = (0..6u8)
            .map(|i| (0..PIECE_BYTES as usize).map(|b| (b as u8) ^ i).collect())
            .collect();
        // `held`: the pieces (by index) the joiner holds from an earlier attempt.
        let run = |held: &[usize], corrupt: Option<u64>| {
            let staging = tempfile::tempdir().unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            let manifest: Vec<crate::frame::HeldPiece> = held
                .iter()
                .map(|&i| crate::frame::HeldPiece {
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
            let (events_tx, _events_rx) = crossbeam_channel::unbounded::<Event>();
            let joiner = {
                let receiving = receiving.clone();
                thread::spawn(move || {
                    let (connection, _) = listener.accept().unwrap();
                    receive_stream(connection, 1, &receiving, &events_tx)
                })
            };
            let connection = TcpStream::connect(address).unwrap();
            let stream = Arc::new(Stream {
                state: Mutex::new(StreamState::default()),
                changed: Condvar::new(),
            });
            let totals = Arc::new(Totals::default());
            {
                let reader = connection.try_clone().unwrap();
                let (stream, totals) = (stream.clone(), totals.clone());
                thread::spawn(move || read_acks(reader, &stream, &totals));
            }
            let sender = Sender {
                held: Arc::new(
                    manifest
                        .into_iter()
                        .map(|p| ((p.path, p.offset), (p.len, p.digest)))
                        .collect(),
                ),
                compress: Arc::new(AtomicBool::new(true)),
                level: 3,
                rate: None,
                totals: totals.clone(),
                corrupt_piece: corrupt,
                corrupted: Arc::new(AtomicBool::new(false)),
            };
            let (tx, rx) = bounded(4);
            let feeder = {
                let data = data.clone();
                thread::spawn(move || {
                    tx.send(Work::File {
                        path: "db/t.ibd".into(),
                    })
                    .unwrap();
                    for (i, piece) in data.into_iter().enumerate() {
                        let work = Work::Piece {
                            path: "db/t.ibd".into(),
                            offset: i as u64 * PIECE_BYTES,
                            data: Arc::new(piece),
                            resends: 0,
                        };
                        tx.send(work).unwrap();
                    }
                })
            };
            send_stream(connection.try_clone().unwrap(), &stream, &rx, &sender).unwrap();
            feeder.join().unwrap();
            connection.shutdown(std::net::Shutdown::Both).unwrap();
            let _ = joiner.join().unwrap();
            let written = std::fs::read(staging.path().join("db/t.ibd")).unwrap();
            (receiving.counts(), totals, written)
        };
        let ((pieces, resumed, rejected), totals, written) = run(&[], Some(2));
        assert_eq!(
            (pieces, resumed, rejected),
            (6, 0, 1),
            "one corrupted piece, resent"
        );
        assert_eq!(totals.resent.load(Ordering::Relaxed), 1);
        assert_eq!(
            written,
            data.concat(),
            "every byte arrived, decompressed, in place"
        );

        let ((pieces, resumed, rejected), totals, written) = run(&[0, 1, 2], None);
        assert_eq!((pieces, rejected), (6, 0));
        assert_eq!(resumed, 3 * PIECE_BYTES, "three pieces confirmed, not sent");
        assert_eq!(totals.pieces_same.load(Ordering::Relaxed), 3);
        let sent_part = &written[3 * PIECE_BYTES as usize..];
        assert_eq!(
            sent_part,
            &data[3..].concat()[..],
            "the other three were sent"
        );
    }

    #[test]
    fn ready_addresses_parse() {
        assert_eq!(
            parse_ready_address("127.0.0.1:4444/trireme/00ff").unwrap(),
            ("127.0.0.1:4444".to_string(), 255)
        );
        let error = parse_ready_address("127.0.0.1:4444/xtrabackup_sst//1").unwrap_err();
        assert!(error.to_string().contains("same method"), "{error}");
    }
}
