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

mod direct;
mod preparing;
mod receiving;
#[cfg(test)]
mod tests;

use preparing::{prepare, snapshot_position};
#[cfg(test)]
pub(crate) use receiving::receive_stream;
pub(crate) use receiving::Receiving;
use receiving::{finish_files, lock, receive_streams, verify_held, Announced};

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

/// The donor's plan for the transfer (stream 0's first frame after Hello).
struct Plan {
    /// Set when the donor sends no data: IST from this position follows.
    bypass: Option<String>,
    estimated_bytes: u64,
    server_version: String,
}

/// The whole transfer: the donor's plan checked, the streams received, the snapshot
/// prepared and swapped into the datadir.
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
    let plan = read_plan(&mut control)?;
    if let Some(position) = plan.bypass {
        let _ = write_frame(&mut control, &Frame::Finished, &[]);
        log(
            "INFO",
            &format!("the donor sends no data (IST follows) at {position}"),
        );
        progress.phase("done");
        return Ok(Joined { position });
    }
    let staging = staging_dir(&args.datadir);
    if let Err(error) = check_plan(&plan, &prepared, settings, &staging) {
        let _ = write_frame(
            &mut control,
            &Frame::Error {
                message: error.to_string(),
            },
            &[],
        );
        return Err(error);
    }
    progress.set_total(plan.estimated_bytes);

    // Preflight passed: from here on the staging area is touched, never the datadir.
    let (journal, held) = open_staging(&staging, &args.datadir)?;
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
            "receiving a snapshot of about {:.2} GiB from MariaDB {} over {streams} streams into {}",
            plan.estimated_bytes as f64 / (1u64 << 30) as f64,
            plan.server_version,
            staging.display()
        ),
    );
    let shared = Arc::new(Receiving::new(staging.clone(), held, Some(journal)));
    receive_snapshot(connections, &shared, progress, &staging)?;
    install_snapshot(args, settings, &staging, progress, started)
}

/// Reads the donor's plan.
fn read_plan(control: &mut Stream) -> Result<Plan, SstError> {
    match expect_frame(control, &mut Vec::new(), "the donor's Plan")? {
        Frame::Plan {
            bypass,
            estimated_bytes,
            server_version,
        } => Ok(Plan {
            bypass,
            estimated_bytes,
            server_version,
        }),
        other => Err(SstError::Protocol(format!(
            "expected Plan, got {}",
            other.kind()
        ))),
    }
}

/// The checks the plan makes possible: the donor's release against this joiner's
/// mariadb-backup, and the disk the snapshot needs against the disk free.
fn check_plan(
    plan: &Plan,
    prepared: &Prepared,
    settings: &Settings,
    staging: &Path,
) -> Result<(), SstError> {
    if let Some(donor_release) = release_of(&plan.server_version) {
        if donor_release != prepared.tool_release {
            return Err(SstError::Preflight {
                message: format!(
                    "the donor runs MariaDB {donor_release} but this joiner's mariadb-backup \
                     is built for {}: a physical snapshot must be prepared by the same \
                     release; upgrade the older node",
                    prepared.tool_release
                ),
                code: exit_code::VERSION,
            });
        }
    }
    let estimated_bytes = plan.estimated_bytes;
    let parent = staging.parent().unwrap_or(Path::new("/")).to_path_buf();
    let staged = swap::staged_bytes(staging);
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
        return Err(SstError::Preflight {
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
        });
    }
    Ok(())
}

/// Creates the staging directory and opens the journal of an earlier attempt: the pieces
/// it lists that still verify are offered to the donor.
fn open_staging(staging: &Path, datadir: &Path) -> Result<(Journal, Vec<HeldPiece>), SstError> {
    fs::create_dir_all(staging)
        .map_err(|e| SstError::io(format!("creating {}", staging.display()), e))?;
    let (journal, listed, damaged) = Journal::open(&journal_path(datadir))
        .map_err(|e| SstError::io("opening the SST journal", e))?;
    let held = verify_held(staging, listed);
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
    Ok((journal, held))
}

/// Receives every stream, checks what arrived against what the donor announced, and
/// confirms the snapshot to the donor.
fn receive_snapshot(
    connections: Vec<(u16, Stream)>,
    shared: &Arc<Receiving>,
    progress: &mut ProgressFile,
    staging: &Path,
) -> Result<(), SstError> {
    let streams = connections.len();
    let copy_started = Instant::now();
    let (announced, mut control_writer) = receive_streams(connections, shared, progress, staging)?;
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
    finish_files(staging, &extents, shared)?;
    write_frame(&mut control_writer, &Frame::Finished, &[])
        .map_err(|e| SstError::io("confirming the snapshot", e))?;
    let copy_seconds = copy_started.elapsed().as_secs_f64();
    let resumed = shared.resumed.load(Ordering::Relaxed);
    log(
        "INFO",
        &format!(
            "copied {got_bytes} bytes in {copy_seconds:.2} s ({:.0} MB/s) over {streams} \
             streams: {pieces} pieces in {files} files ({} written past the page cache), {} \
             resumed pieces ({:.1} MiB) not sent again, {} pieces failed their CRC32C check \
             and were sent again",
            got_bytes as f64 / copy_seconds.max(1e-3) / 1e6,
            shared.direct_pieces.load(Ordering::Relaxed),
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
    Ok(())
}

/// Prepares the received snapshot and swaps it into the datadir; returns its position.
fn install_snapshot(
    args: &Args,
    settings: &Settings,
    staging: &Path,
    progress: &mut ProgressFile,
    started: Instant,
) -> Result<Joined, SstError> {
    progress.phase("prepare");
    prepare(staging, settings)?;
    let position = snapshot_position(staging)?;
    progress.phase("swap");
    let preserved = swap::swap_into_place(staging, &args.datadir)?;
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

/// Flushes stdout after the `ready` line (the server waits for it).
pub fn print_line(line: &str) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    writeln!(out, "{line}")?;
    out.flush()
}
