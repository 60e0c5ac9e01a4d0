//! The joiner: preflight checks, then parallel receivers that verify every piece and write
//! it into the staging directory, then `mariadb-backup --prepare` and the atomic swap.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, RecvTimeoutError};
use tls::Stream;

use crate::config::{Args, Settings};
use crate::frame::{self, expect_frame, read_frame, write_frame, Frame, HeldPiece};
use crate::journal::Journal;
use crate::progress::{progress_path, ProgressFile};
use crate::session::{self, set_timeouts, Secret, Session};
use crate::swap::{self, journal_path, staging_dir};
use crate::xbstream::check_relative_path;
use crate::{exit_code, log, SstError};

/// The default port when `wsrep_sst_receive_address` names none.
pub const DEFAULT_PORT: u16 = 4444;
/// Disk kept free beyond the snapshot: mariadb-backup's prepare writes some, and a full
/// disk under a starting server is worse than a refused SST.
const HEADROOM_BYTES: u64 = 256 << 20;
/// How long an admitted donor has to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the joiner looks for a new connection (the listener does not block, so that
/// the deadline and the server's presence are checked).
const ACCEPT_POLL: Duration = Duration::from_millis(20);

/// The `major.minor.patch` of a version string (`10.11.19-MariaDB-0+deb12u1` -> `10.11.19`).
pub fn release_of(version: &str) -> Option<String> {
    let start = version.find(|c: char| c.is_ascii_digit())?;
    let release: String = version[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (release.split('.').filter(|p| !p.is_empty()).count() == 3).then_some(release)
}

/// Runs `<tool> --version` and returns the server release it was built from.
pub fn backup_tool_version(tool: &str) -> Result<String, SstError> {
    let missing = |why: String| SstError::Preflight {
        message: format!(
            "{tool} is not usable ({why}): install the mariadb-backup package of the same \
             version as the server, or point [sst] mariabackup= at it"
        ),
        code: exit_code::NOT_FOUND,
    };
    let out = Command::new(tool)
        .arg("--version")
        .output()
        .map_err(|e| missing(e.to_string()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let based_on = text
        .split("based on MariaDB server")
        .nth(1)
        .and_then(release_of)
        .ok_or_else(|| missing(format!("its --version printed {:?}", text.trim())))?;
    Ok(based_on)
}

/// The release of the server binary that runs this joiner.
fn local_server_release(parent: Option<u32>) -> Option<String> {
    let binary = parent
        .and_then(|pid| fs::read_link(format!("/proc/{pid}/exe")).ok())
        .unwrap_or_else(|| PathBuf::from("mariadbd"));
    let out = Command::new(binary).arg("--version").output().ok()?;
    release_of(&String::from_utf8_lossy(&out.stdout))
}

/// What the joiner printed, and what the caller prints at the end.
pub struct Joined {
    /// `uuid:seqno [domain]` of the snapshot, for the server.
    pub position: String,
}

/// Everything up to `ready`: checks that touch nothing, then the listening socket.
pub struct Prepared {
    listener: TcpListener,
    session: Session,
    /// The text to print after `ready ` (it holds the session secret: print it only there).
    pub ready: String,
    /// The address and the public session id, for logs and the progress file.
    pub listening: String,
    tool_release: String,
}

/// The checks that touch nothing, and the listener. Each failure names its cause and fix.
pub fn preflight(args: &Args, settings: &Settings) -> Result<Prepared, SstError> {
    let tls = session::load_tls(settings.tls.as_ref())?;
    if !args.separate_innodb_dirs.is_empty() {
        return Err(SstError::Preflight {
            message: format!(
                "the trireme SST method needs every InnoDB file inside the datadir, but {} \
                 is set: use wsrep_sst_method=mariabackup for this layout",
                args.separate_innodb_dirs.join(", ")
            ),
            code: exit_code::ACCESS,
        });
    }
    swap::check_swap_possible(&args.datadir)?;
    if swap::finish_interrupted_swap(&args.datadir)? {
        log(
            "WARNING",
            "finished the swap of a prepared snapshot that an earlier attempt was interrupted in",
        );
    }
    let tool_release = backup_tool_version(&settings.mariabackup)?;
    if let Some(server) = local_server_release(args.parent) {
        if server != tool_release {
            return Err(SstError::Preflight {
                message: format!(
                    "{} is built for MariaDB {tool_release} but this server is {server}: \
                     install the mariadb-backup package of the server's version",
                    settings.mariabackup
                ),
                code: exit_code::VERSION,
            });
        }
    }
    let address = listen_address(&args.address)?;
    let listener = TcpListener::bind(address).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            SstError::Preflight {
                message: format!(
                    "the SST port {address} is already in use by another process: stop it \
                     (`ss -ltnp 'sport = :{}'` shows which) or set wsrep_sst_receive_address \
                     to a free port",
                    address.port()
                ),
                code: exit_code::ADDRESS_IN_USE,
            }
        } else {
            SstError::Preflight {
                message: format!("cannot listen on {address} for the SST: {e}"),
                code: exit_code::ADDRESS_IN_USE,
            }
        }
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| SstError::io("configuring the listener", e))?;
    let session = Session::new(Secret::generate()?, tls);
    let host = args
        .address
        .rsplit_once(':')
        .map_or(args.address.as_str(), |(h, _)| h);
    let host = if host.is_empty() || host.contains('/') {
        "127.0.0.1"
    } else {
        host
    };
    let ready = format!(
        "{host}:{}/{}/{}",
        address.port(),
        crate::METHOD,
        session.secret().to_hex()
    );
    let listening = format!(
        "{host}:{} (session {:016x}{})",
        address.port(),
        session.secret().session_id(),
        if session.is_tls() { ", TLS" } else { "" }
    );
    Ok(Prepared {
        listener,
        session,
        ready,
        listening,
        tool_release,
    })
}

/// The address to listen on, from `--address` (host, host:port or [v6]:port).
fn listen_address(text: &str) -> Result<SocketAddr, SstError> {
    let text = text.split('/').next().unwrap_or(text);
    let with_port = if text
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !text.ends_with(']')
    {
        text.to_string()
    } else {
        format!("{text}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| SstError::Config(format!("cannot resolve the SST address {text:?}")))
}

/// Receives, prepares and swaps in the snapshot.
pub fn run_joiner(
    args: &Args,
    settings: &Settings,
    prepared: Prepared,
) -> Result<Joined, SstError> {
    let mut progress =
        ProgressFile::new(progress_path(&args.datadir), "joiner", &prepared.listening);
    progress.phase("waiting");
    let result = receive(args, settings, prepared, &mut progress);
    if let Err(error) = &result {
        progress.failed(&error.to_string());
    }
    result
}

/// Why a connection did not become a stream of the transfer.
enum Refused {
    /// Turned away (not the donor, or not provable as the donor); keep waiting.
    Connection(String),
    /// The donor, admitted, reports that it cannot send: the transfer is over.
    Transfer(SstError),
}

/// Most connections being admitted at once; more are turned away on arrival.
const ADMISSIONS_MAX: usize = 8;

/// What one admission thread found.
type Admitted = (SocketAddr, Result<(Stream, u16, u16), Refused>);

/// Connections being admitted (TLS, the proof of the secret, `Hello`), each on a thread of
/// its own, so that a silent or slow connection does not hold up the donor's. Results
/// outlive one [`accept`] call: the donor may connect its next stream before the previous
/// one's admission is collected.
struct Admissions {
    sender: mpsc::Sender<Admitted>,
    results: mpsc::Receiver<Admitted>,
    in_flight: usize,
}

impl Admissions {
    fn new() -> Admissions {
        let (sender, results) = mpsc::channel();
        Admissions {
            sender,
            results,
            in_flight: 0,
        }
    }

    fn start(&mut self, tcp: TcpStream, peer: SocketAddr, session: &Session) {
        if self.in_flight >= ADMISSIONS_MAX {
            log(
                "WARNING",
                &format!("turned away {peer}: {ADMISSIONS_MAX} connections are being admitted"),
            );
            return;
        }
        let sender = self.sender.clone();
        let session = session.clone();
        let spawned = thread::Builder::new()
            .name("sst-admit".into())
            .spawn(move || {
                // The receiver is gone only once the transfer is over.
                let _ = sender.send((peer, admit_donor(tcp, peer, &session)));
            });
        match spawned {
            Ok(_) => self.in_flight += 1,
            Err(e) => log(
                "WARNING",
                &format!("turned away {peer}: no thread for it ({e})"),
            ),
        }
    }
}

/// Waits for the next stream of the donor. Connections that fail TLS or the proof of the
/// secret are turned away with a warning; if none is admitted in time, the error names the
/// last refusal, so that a TLS or session mismatch is not reported as a mere timeout.
/// Admissions under way at the deadline get one handshake timeout more to finish.
fn accept(
    listener: &TcpListener,
    admissions: &mut Admissions,
    session: &Session,
    deadline: Instant,
    parent: Option<u32>,
) -> Result<(Stream, u16, u16), SstError> {
    let mut turned_away: Option<String> = None;
    loop {
        while let Ok((peer, result)) = admissions.results.try_recv() {
            admissions.in_flight -= 1;
            match result {
                Ok(admitted) => return Ok(admitted),
                Err(Refused::Transfer(error)) => return Err(error),
                Err(Refused::Connection(reason)) => {
                    log("WARNING", &format!("turned away {peer}: {reason}"));
                    turned_away = Some(format!("{peer}: {reason}"));
                }
            }
        }
        match listener.accept() {
            Ok((tcp, peer)) => admissions.start(tcp, peer, session),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let now = Instant::now();
                let waiting =
                    admissions.in_flight > 0 && now < deadline + session::HANDSHAKE_TIMEOUT;
                if now >= deadline && !waiting {
                    return Err(SstError::Peer(match turned_away {
                        Some(last) => format!(
                            "no donor was admitted in time; the last connection turned away \
                             was from {last}"
                        ),
                        None => "no donor connected in time: check the donor's error log".into(),
                    }));
                }
                if parent.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                    return Err(SstError::Peer(
                        "the server that started this SST is gone".into(),
                    ));
                }
                thread::sleep(ACCEPT_POLL);
            }
            Err(e) => return Err(SstError::io("accepting a donor connection", e)),
        }
    }
}

/// TLS and the proof of the secret (see [`Session::admit`]), then the donor's `Hello`.
fn admit_donor(
    tcp: TcpStream,
    peer: SocketAddr,
    session: &Session,
) -> Result<(Stream, u16, u16), Refused> {
    tcp.set_nonblocking(false)
        .map_err(|e| Refused::Connection(format!("cannot configure the connection: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let mut stream = session
        .admit(tcp, &peer.to_string())
        .map_err(Refused::Connection)?;
    let _ = stream.tcp().set_read_timeout(Some(HELLO_TIMEOUT));
    match expect_frame(&mut stream, &mut Vec::new(), "the donor's Hello") {
        Ok(Frame::Hello {
            session: id,
            stream: number,
            streams,
        }) if id == session.secret().session_id() => {
            set_timeouts(stream.tcp(), None).map_err(|e| {
                Refused::Connection(format!("cannot configure the connection: {e}"))
            })?;
            Ok((stream, number, streams))
        }
        Ok(Frame::Hello { .. }) => Err(Refused::Connection(
            "its Hello names another SST session".into(),
        )),
        Err(SstError::Peer(message)) => Err(Refused::Transfer(SstError::Peer(format!(
            "the donor at {peer} reports: {message}"
        )))),
        Ok(other) => Err(Refused::Connection(format!(
            "it sent {} before Hello",
            other.kind()
        ))),
        Err(error) => Err(Refused::Connection(error.to_string())),
    }
}

fn receive(
    args: &Args,
    settings: &Settings,
    prepared: Prepared,
    progress: &mut ProgressFile,
) -> Result<Joined, SstError> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(settings.connect_timeout);
    let mut admissions = Admissions::new();
    let (mut control, stream, streams) = accept(
        &prepared.listener,
        &mut admissions,
        &prepared.session,
        deadline,
        args.parent,
    )?;
    if stream != 0 || streams == 0 {
        return Err(SstError::Protocol(format!(
            "the first stream is {stream} of {streams}"
        )));
    }
    let (bypass, estimated_bytes, server_version) =
        match expect_frame(&mut control, &mut Vec::new(), "the donor's Plan")? {
            Frame::Plan {
                bypass,
                estimated_bytes,
                server_version,
            } => (bypass, estimated_bytes, server_version),
            other => {
                return Err(SstError::Protocol(format!(
                    "expected Plan, got {}",
                    other.kind()
                )))
            }
        };
    if let Some(position) = bypass {
        let _ = write_frame(&mut control, &Frame::Finished, &[]);
        log(
            "INFO",
            &format!("the donor sends no data (IST follows) at {position}"),
        );
        progress.phase("done");
        return Ok(Joined { position });
    }
    let refuse = |control: &mut Stream, error: SstError| -> SstError {
        let _ = write_frame(
            control,
            &Frame::Error {
                message: error.to_string(),
            },
            &[],
        );
        error
    };
    if let Some(donor_release) = release_of(&server_version) {
        if donor_release != prepared.tool_release {
            let error = SstError::Preflight {
                message: format!(
                    "the donor runs MariaDB {donor_release} but this joiner's mariadb-backup \
                     is built for {}: a physical snapshot must be prepared by the same \
                     release; upgrade the older node",
                    prepared.tool_release
                ),
                code: exit_code::VERSION,
            };
            return Err(refuse(&mut control, error));
        }
    }
    let staging = staging_dir(&args.datadir);
    let parent = staging.parent().unwrap_or(Path::new("/")).to_path_buf();
    let staged = swap::staged_bytes(&staging);
    let free = rustix::fs::statvfs(&parent)
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .map_err(|e| SstError::io(format!("statvfs {}", parent.display()), e.into()))?;
    let need = estimated_bytes
        .saturating_add(estimated_bytes / 10)
        .saturating_add(HEADROOM_BYTES)
        .saturating_add(settings.reserve)
        .saturating_sub(staged.min(estimated_bytes));
    if free < need {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let error = SstError::Preflight {
            message: format!(
                "not enough disk for the snapshot in {}: it needs {:.2} GiB (the donor's \
                 {:.2} GiB, 10% and 256 MiB headroom, [sst] reserve {:.2} GiB, less {:.2} GiB \
                 already staged) but {:.2} GiB are free: free some space or move the datadir",
                parent.display(),
                gib(need),
                gib(estimated_bytes),
                gib(settings.reserve),
                gib(staged),
                gib(free)
            ),
            code: exit_code::NO_SPACE,
        };
        return Err(refuse(&mut control, error));
    }
    progress.set_total(estimated_bytes);

    // Preflight passed: from here on the staging area is touched, never the datadir.
    fs::create_dir_all(&staging)
        .map_err(|e| SstError::io(format!("creating {}", staging.display()), e))?;
    let (journal, listed, damaged) = Journal::open(&journal_path(&args.datadir))
        .map_err(|e| SstError::io("opening the SST journal", e))?;
    let held = verify_held(&staging, listed);
    if !held.is_empty() || damaged > 0 {
        log(
            "INFO",
            &format!(
                "resuming: {} pieces ({:.1} MiB) from an earlier attempt are verified in {} \
                 and offered to the donor{}",
                held.len(),
                held.iter().map(|p| u64::from(p.len)).sum::<u64>() as f64 / (1 << 20) as f64,
                staging.display(),
                if damaged > 0 {
                    format!("; {damaged} damaged journal lines skipped")
                } else {
                    String::new()
                }
            ),
        );
    }
    write_frame(&mut control, &Frame::Accept { held: held.clone() }, &[])
        .map_err(|e| SstError::io("answering the donor", e))?;

    let mut connections = vec![(0u16, control)];
    while connections.len() < usize::from(streams) {
        let (connection, stream, count) = accept(
            &prepared.listener,
            &mut admissions,
            &prepared.session,
            deadline,
            args.parent,
        )?;
        if count != streams || stream == 0 || connections.iter().any(|(s, _)| *s == stream) {
            return Err(SstError::Protocol(format!(
                "unexpected stream {stream} of {count}"
            )));
        }
        connections.push((stream, connection));
    }
    progress.phase("transfer");
    log(
        "INFO",
        &format!(
            "receiving a snapshot of about {:.2} GiB from MariaDB {server_version} over {streams} streams into {}",
            estimated_bytes as f64 / (1u64 << 30) as f64,
            staging.display()
        ),
    );

    let shared = Arc::new(Receiving::new(staging.clone(), held, Some(journal)));
    let copy_started = Instant::now();
    let (announced, mut control_writer) =
        receive_streams(connections, &shared, progress, &staging)?;
    let Announced {
        pieces,
        bytes,
        files,
    } = announced;
    let got_pieces = shared.pieces.load(Ordering::Relaxed);
    let got_bytes = shared.bytes.load(Ordering::Relaxed);
    let extents = std::mem::take(&mut *lock(&shared.extents));
    if got_pieces != pieces || got_bytes != bytes || extents.len() as u64 != files {
        let message = format!(
            "the donor reports {pieces} pieces, {bytes} bytes, {files} files but this joiner \
             verified {got_pieces} pieces, {got_bytes} bytes, {} files",
            extents.len()
        );
        let _ = write_frame(
            &mut control_writer,
            &Frame::Error {
                message: message.clone(),
            },
            &[],
        );
        return Err(SstError::Protocol(message));
    }
    finish_files(&staging, &extents, &shared)?;
    write_frame(&mut control_writer, &Frame::Finished, &[])
        .map_err(|e| SstError::io("confirming the snapshot", e))?;
    let copy_seconds = copy_started.elapsed().as_secs_f64();
    let resumed = shared.resumed.load(Ordering::Relaxed);
    log(
        "INFO",
        &format!(
            "copied {got_bytes} bytes in {copy_seconds:.2} s ({:.0} MB/s) over {streams} \
             streams: {pieces} pieces in {files} files, {} resumed pieces ({:.1} MiB) not \
             sent again, {} pieces failed their CRC32C check and were sent again",
            got_bytes as f64 / copy_seconds.max(1e-3) / 1e6,
            shared.resumed_pieces(),
            resumed as f64 / (1 << 20) as f64,
            shared.rejected.load(Ordering::Relaxed),
        ),
    );
    // The journal describes the bytes as received; prepare rewrites them, so from here on
    // an interruption starts the next attempt over.
    if let Some(journal) = lock(&shared.journal).journal.take() {
        journal
            .remove()
            .map_err(|e| SstError::io("removing the SST journal", e))?;
    }

    progress.phase("prepare");
    prepare(&staging, settings)?;
    let position = snapshot_position(&staging)?;
    progress.phase("swap");
    let preserved = swap::swap_into_place(&staging, &args.datadir)?;
    progress.phase("done");
    log(
        "INFO",
        &format!(
            "the prepared snapshot replaced {} (kept {}); position {position}; {:.1} s in all",
            args.datadir.display(),
            if preserved.is_empty() {
                "nothing".to_string()
            } else {
                preserved.join(", ")
            },
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Joined { position })
}

/// What a receiver thread reports.
enum Event {
    /// Stream 0 brought the donor's `Done`; its connection carries the answer.
    Done {
        announced: Announced,
        control: Box<Stream>,
    },
    /// A stream broke.
    Ended { stream: u16, error: SstError },
}

/// The counts the donor announced in `Done`.
pub(crate) struct Announced {
    pieces: u64,
    bytes: u64,
    files: u64,
}

/// How often the joiner writes the journal and the progress file while it receives.
const EVENT_POLL: Duration = Duration::from_millis(250);

/// Runs one receiver thread per stream until stream 0 brings the donor's `Done`; returns
/// the counts it announced and stream 0's connection, for the answer.
fn receive_streams(
    connections: Vec<(u16, Stream)>,
    shared: &Arc<Receiving>,
    progress: &mut ProgressFile,
    staging: &Path,
) -> Result<(Announced, Stream), SstError> {
    let (events_tx, events_rx) = unbounded::<Event>();
    for (stream, mut connection) in connections {
        let shared = shared.clone();
        let events = events_tx.clone();
        thread::Builder::new()
            .name(format!("sst-recv-{stream}"))
            .spawn(move || {
                let event = match receive_stream(&mut connection, stream, &shared) {
                    Ok(announced) => Event::Done {
                        announced,
                        control: Box::new(connection),
                    },
                    Err(error) => Event::Ended { stream, error },
                };
                let _ = events.send(event);
            })
            .map_err(|e| SstError::io("starting a thread", e))?;
    }
    drop(events_tx);
    loop {
        let event = events_rx.recv_timeout(EVENT_POLL);
        shared.flush_journal();
        match event {
            Ok(Event::Done { announced, control }) => return Ok((announced, *control)),
            Ok(Event::Ended { stream, error }) => {
                return Err(SstError::Peer(format!(
                    "stream {stream} broke before the snapshot was complete: {error}; the \
                     datadir is untouched and {} pieces are kept in {} for the next attempt",
                    shared.pieces.load(Ordering::Relaxed),
                    staging.display()
                )))
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(SstError::Peer(
                    "the donor closed every stream without finishing".into(),
                ))
            }
        }
        progress.update(
            shared.bytes.load(Ordering::Relaxed),
            shared.resumed.load(Ordering::Relaxed),
        );
    }
}

struct JournalBuffer {
    journal: Option<Journal>,
    pending: Vec<HeldPiece>,
}

/// What the receivers share.
pub(crate) struct Receiving {
    staging: PathBuf,
    held: HashMap<(String, u64), HeldPiece>,
    files: Mutex<HashMap<String, Arc<File>>>,
    seen: Mutex<HashSet<(String, u64)>>,
    extents: Mutex<HashMap<String, u64>>,
    journal: Mutex<JournalBuffer>,
    bytes: AtomicU64,
    resumed: AtomicU64,
    pieces: AtomicU64,
    rejected: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Receiving {
    pub(crate) fn new(
        staging: PathBuf,
        held: Vec<HeldPiece>,
        journal: Option<Journal>,
    ) -> Receiving {
        Receiving {
            staging,
            held: held
                .into_iter()
                .map(|p| ((p.path.clone(), p.offset), p))
                .collect(),
            files: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashSet::new()),
            extents: Mutex::new(HashMap::new()),
            journal: Mutex::new(JournalBuffer {
                journal,
                pending: Vec::new(),
            }),
            bytes: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            pieces: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// Pieces received or confirmed, and how many failed verification.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.pieces.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
        )
    }

    fn file(&self, path: &str) -> io::Result<Arc<File>> {
        let mut files = lock(&self.files);
        if let Some(file) = files.get(path) {
            return Ok(file.clone());
        }
        let full = self.staging.join(path);
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = Arc::new(
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .read(true)
                .open(&full)?,
        );
        files.insert(path.to_string(), file.clone());
        Ok(file)
    }

    /// Counts a piece once (a resent piece replaces, not adds).
    fn count(&self, path: &str, offset: u64, len: u32, resumed: bool) {
        if lock(&self.seen).insert((path.to_string(), offset)) {
            self.pieces.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(u64::from(len), Ordering::Relaxed);
            if resumed {
                self.resumed.fetch_add(u64::from(len), Ordering::Relaxed);
            }
        }
        let mut extents = lock(&self.extents);
        let end = extents.entry(path.to_string()).or_insert(0);
        *end = (*end).max(offset + u64::from(len));
    }

    fn resumed_pieces(&self) -> u64 {
        let seen = lock(&self.seen);
        self.held.keys().filter(|k| seen.contains(*k)).count() as u64
    }

    /// Writes the journal lines of pieces written so far (their data is in the page cache
    /// and survives the process; see `verify_held` for what a resumed attempt re-checks).
    fn flush_journal(&self) {
        let mut buffer = lock(&self.journal);
        let pending = std::mem::take(&mut buffer.pending);
        if let Some(journal) = buffer.journal.as_mut() {
            if let Err(e) = journal.append(&pending) {
                log("WARNING", &format!("cannot write the SST journal ({e}): an interrupted transfer will start over"));
                buffer.journal = None;
            }
        }
    }
}

/// One stream's receiver: verifies and writes what the donor sends and answers every
/// frame. Stream 0 returns with the donor's `Done`; the others only end in an error (once
/// the snapshot is confirmed, nobody waits for them any more).
pub(crate) fn receive_stream(
    connection: &mut Stream,
    stream: u16,
    shared: &Receiving,
) -> Result<Announced, SstError> {
    let mut payload = Vec::new();
    let mut waited = Duration::ZERO;
    let mut window_start = Instant::now();
    let mut waiting_permille = 0u16;
    loop {
        let before = Instant::now();
        let frame = read_frame(connection, &mut payload)?;
        waited += before.elapsed();
        if window_start.elapsed() >= Duration::from_secs(1) {
            waiting_permille = (waited.as_secs_f64() / window_start.elapsed().as_secs_f64()
                * 1000.0)
                .min(1000.0) as u16;
            waited = Duration::ZERO;
            window_start = Instant::now();
        }
        let Some(frame) = frame else {
            return Err(SstError::Peer("the donor closed the stream".into()));
        };
        let reply = match frame {
            Frame::Data {
                seq,
                path,
                offset,
                len,
                crc,
                compressed,
            } => {
                check_relative_path(&path).map_err(SstError::Protocol)?;
                let decoded;
                let bytes: &[u8] = if compressed {
                    match zstd::bulk::decompress(&payload, len as usize) {
                        Ok(d) => {
                            decoded = d;
                            &decoded
                        }
                        Err(_) => &[],
                    }
                } else {
                    &payload
                };
                if bytes.len() != len as usize || crc32c::crc32c(bytes) != crc {
                    shared.rejected.fetch_add(1, Ordering::Relaxed);
                    let reason = format!("piece {path}@{offset} failed its CRC32C check");
                    log(
                        "WARNING",
                        &format!("{reason} on stream {stream}: asking the donor to send it again"),
                    );
                    Frame::Nack { seq, reason }
                } else {
                    let file = shared.file(&path).map_err(|e| {
                        SstError::io(format!("opening {path} in the staging directory"), e)
                    })?;
                    file.write_all_at(bytes, offset).map_err(|e| {
                        SstError::io(format!("writing {path} in the staging directory"), e)
                    })?;
                    lock(&shared.journal).pending.push(HeldPiece {
                        path: path.clone(),
                        offset,
                        len,
                        digest: frame::digest(bytes),
                    });
                    shared.count(&path, offset, len, false);
                    Frame::Ack {
                        seq,
                        waiting_permille,
                    }
                }
            }
            Frame::Same {
                seq,
                path,
                offset,
                len,
            } => {
                if shared
                    .held
                    .get(&(path.clone(), offset))
                    .is_some_and(|p| p.len == len)
                {
                    shared
                        .file(&path)
                        .map_err(|e| SstError::io(format!("opening {path}"), e))?;
                    shared.count(&path, offset, len, true);
                    Frame::Ack {
                        seq,
                        waiting_permille,
                    }
                } else {
                    Frame::Nack {
                        seq,
                        reason: format!("piece {path}@{offset} is not held here"),
                    }
                }
            }
            Frame::File { seq, path } => {
                check_relative_path(&path).map_err(SstError::Protocol)?;
                shared
                    .file(&path)
                    .map_err(|e| SstError::io(format!("creating {path}"), e))?;
                lock(&shared.extents).entry(path).or_insert(0);
                Frame::Ack {
                    seq,
                    waiting_permille,
                }
            }
            Frame::Done {
                pieces,
                bytes,
                files,
            } if stream == 0 => {
                return Ok(Announced {
                    pieces,
                    bytes,
                    files,
                })
            }
            Frame::Error { message } => {
                return Err(SstError::Peer(format!("the donor reports: {message}")))
            }
            other => {
                return Err(SstError::Protocol(format!(
                    "unexpected {} on stream {stream}",
                    other.kind()
                )))
            }
        };
        write_frame(connection, &reply, &[])
            .map_err(|e| SstError::io("acknowledging a piece", e))?;
    }
}

/// The journal's pieces that the staging directory still holds intact.
fn verify_held(staging: &Path, listed: Vec<HeldPiece>) -> Vec<HeldPiece> {
    let mut out = Vec::with_capacity(listed.len());
    let mut buffer = Vec::new();
    let mut open: HashMap<String, Option<File>> = HashMap::new();
    for piece in listed {
        let file = open
            .entry(piece.path.clone())
            .or_insert_with(|| File::open(staging.join(&piece.path)).ok());
        let Some(file) = file else { continue };
        buffer.resize(piece.len as usize, 0);
        if file.read_exact_at(&mut buffer, piece.offset).is_ok()
            && frame::digest(&buffer) == piece.digest
        {
            out.push(piece);
        }
    }
    out
}

/// Cuts every file to its extent in this snapshot and removes what this snapshot does not
/// contain (left from an earlier attempt).
fn finish_files(
    staging: &Path,
    extents: &HashMap<String, u64>,
    shared: &Receiving,
) -> Result<(), SstError> {
    for (path, end) in extents {
        let file = shared
            .file(path)
            .map_err(|e| SstError::io(format!("opening {path}"), e))?;
        file.set_len(*end)
            .map_err(|e| SstError::io(format!("truncating {path}"), e))?;
    }
    lock(&shared.files).clear();
    fn walk(root: &Path, dir: &Path, keep: &HashMap<String, u64>) -> io::Result<()> {
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(root, &path, keep)?;
                if fs::read_dir(&path)?.next().is_none() {
                    fs::remove_dir(&path)?;
                }
            } else {
                let relative = path.strip_prefix(root).map_err(io::Error::other)?;
                if !keep.contains_key(relative.to_string_lossy().as_ref()) {
                    fs::remove_file(&path)?;
                }
            }
        }
        Ok(())
    }
    walk(staging, staging, extents).map_err(|e| SstError::io("tidying the staging directory", e))
}

/// Memory for `--prepare --use-memory`: `[sst] use_memory`, else half of what is available.
fn prepare_memory(settings: &Settings) -> u64 {
    if let Some(bytes) = settings.use_memory {
        return bytes;
    }
    let available = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024);
    (available / 2).clamp(128 << 20, 64 << 30)
}

fn prepare(staging: &Path, settings: &Settings) -> Result<(), SstError> {
    let memory = prepare_memory(settings);
    let log_path = staging.with_extension("trireme-sst.prepare.log");
    let log_file =
        File::create(&log_path).map_err(|e| SstError::io("creating the prepare log", e))?;
    let started = Instant::now();
    log(
        "INFO",
        &format!(
            "preparing the snapshot with {} --prepare --use-memory={}M",
            settings.mariabackup,
            memory >> 20
        ),
    );
    let status = Command::new(&settings.mariabackup)
        .arg("--prepare")
        .arg(format!("--target-dir={}", staging.display()))
        .arg(format!("--use-memory={memory}"))
        .stdout(
            log_file
                .try_clone()
                .map_err(|e| SstError::io("prepare log", e))?,
        )
        .stderr(log_file)
        .status()
        .map_err(|e| SstError::Tool(format!("cannot run {}: {e}", settings.mariabackup)))?;
    if !status.success() {
        let tail: String = fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        return Err(SstError::Tool(format!(
            "mariadb-backup --prepare failed ({status}); the datadir is untouched; see {}: {tail}",
            log_path.display()
        )));
    }
    let _ = fs::remove_file(&log_path);
    log(
        "INFO",
        &format!("prepared in {:.1} s", started.elapsed().as_secs_f64()),
    );
    Ok(())
}

/// The snapshot's `uuid:seqno [domain]` as mariadb-backup recorded it.
fn snapshot_position(staging: &Path) -> Result<String, SstError> {
    let path = staging.join("xtrabackup_galera_info");
    let text = fs::read_to_string(&path).map_err(|e| {
        SstError::io(
            format!("reading {} (the snapshot's position)", path.display()),
            e,
        )
    })?;
    let line = text.lines().next().unwrap_or("").trim().to_string();
    if !crate::is_position(&line) {
        return Err(SstError::Tool(format!(
            "{} holds {line:?}, not uuid:seqno: was the donor's backup taken with --galera-info?",
            path.display()
        )));
    }
    Ok(line)
}

/// Flushes stdout after the `ready` line (the server waits for it).
pub fn print_line(line: &str) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    writeln!(out, "{line}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_read_from_version_strings() {
        assert_eq!(
            release_of("10.11.19-MariaDB-0+deb12u1").as_deref(),
            Some("10.11.19")
        );
        assert_eq!(
            release_of("mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu").as_deref(),
            Some("10.11.19")
        );
        assert_eq!(release_of("nothing"), None);
    }

    /// A joiner's listener, as `preflight` makes it.
    fn listener() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        (listener, address)
    }

    /// Starts a donor's side of one connection. The TCP connection is made here, so that
    /// it waits in the listener's queue before the joiner looks.
    fn donor(session: Session, address: SocketAddr) -> thread::JoinHandle<Result<(), SstError>> {
        let tcp = TcpStream::connect(address).unwrap();
        thread::spawn(move || {
            let mut stream = session.open(tcp, &address.to_string())?;
            let hello = Frame::Hello {
                session: session.secret().session_id(),
                stream: 0,
                streams: 1,
            };
            write_frame(&mut stream, &hello, &[]).map_err(|e| SstError::io("hello", e))?;
            stream.flush().map_err(|e| SstError::io("hello", e))
        })
    }

    #[test]
    fn a_tls_mismatch_is_named_when_no_donor_is_admitted() {
        use crate::session::tests::tls;
        let (listener, address) = listener();
        let secret = Secret::generate().unwrap();
        let joiner = Session::new(secret.clone(), tls("node.key", "node.pem", "ca.pem"));
        let plaintext = donor(Session::new(secret, None), address);
        // The deadline has passed: the queued connection is still handled first.
        let error = accept(
            &listener,
            &mut Admissions::new(),
            &joiner,
            Instant::now(),
            None,
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(message.contains("turned away"), "{message}");
        assert!(message.contains("connected without TLS"), "{message}");
        let donor_error = plaintext.join().unwrap().unwrap_err().to_string();
        assert!(donor_error.contains("requires TLS"), "{donor_error}");
    }

    #[test]
    fn the_chosen_donor_is_admitted_after_a_stale_one_was_turned_away() {
        let (listener, address) = listener();
        let secret = Secret::generate().unwrap();
        let joiner = Session::new(secret.clone(), None);
        let stale = donor(Session::new(Secret::generate().unwrap(), None), address);
        let chosen = donor(Session::new(secret, None), address);
        // A bound that a passing run never reaches: both connections are queued already.
        let deadline = Instant::now() + Duration::from_secs(600);
        let (_stream, number, streams) =
            accept(&listener, &mut Admissions::new(), &joiner, deadline, None).unwrap();
        assert_eq!((number, streams), (0, 1));
        chosen.join().unwrap().unwrap();
        let stale_error = stale.join().unwrap().unwrap_err().to_string();
        assert!(
            stale_error.contains("did not prove the session secret"),
            "{stale_error}"
        );
    }

    #[test]
    fn a_silent_connection_does_not_hold_up_the_donor() {
        let (listener, address) = listener();
        let secret = Secret::generate().unwrap();
        let joiner = Session::new(secret.clone(), None);
        // Connects first and never sends a byte.
        let silent = TcpStream::connect(address).unwrap();
        let chosen = donor(Session::new(secret, None), address);
        let deadline = Instant::now() + Duration::from_secs(600);
        let (_stream, number, _) =
            accept(&listener, &mut Admissions::new(), &joiner, deadline, None).unwrap();
        assert_eq!(number, 0);
        chosen.join().unwrap().unwrap();
        // The silent connection is still waiting for its own admission: the donor's was
        // not queued behind it.
        silent.set_nonblocking(true).unwrap();
        let pending = std::io::Read::read(&mut &silent, &mut [0u8; 1]);
        assert!(
            matches!(&pending, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
            "the silent connection was already handled: {pending:?}"
        );
    }

    #[test]
    fn listen_addresses_default_the_port() {
        assert_eq!(listen_address("127.0.0.1:5555").unwrap().port(), 5555);
        assert_eq!(listen_address("127.0.0.1").unwrap().port(), DEFAULT_PORT);
    }
}
