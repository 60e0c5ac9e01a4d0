//! The receivers: one thread per stream verifies every piece against its CRC32C and writes
//! it into the staging directory, journalled so that a restarted joiner resumes.

use std::borrow::Cow;
use std::sync::atomic::AtomicBool;

use super::direct::{self, AlignedBuffer};

use super::*;

/// What a receiver thread reports.
pub(super) enum Event {
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
    pub(super) pieces: u64,
    pub(super) bytes: u64,
    pub(super) files: u64,
}

/// How often the joiner writes the journal and the progress file while it receives.
pub(super) const EVENT_POLL: Duration = Duration::from_millis(250);

/// Runs one receiver thread per stream until stream 0 brings the donor's `Done`; returns
/// the counts it announced and stream 0's connection, for the answer.
pub(super) fn receive_streams(
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

pub(super) struct JournalBuffer {
    pub(super) journal: Option<Journal>,
    pub(super) pending: Vec<HeldPiece>,
}

/// What the receivers share.
pub(crate) struct Receiving {
    pub(super) staging: PathBuf,
    pub(super) held: HashMap<(String, u64), HeldPiece>,
    pub(super) files: Mutex<HashMap<String, Arc<File>>>,
    /// Each file's handle for direct writes; `None` once its file system refused one.
    pub(super) direct_files: Mutex<HashMap<String, Option<Arc<File>>>>,
    /// Pieces written past the page cache.
    pub(super) direct_pieces: AtomicU64,
    /// Whether a refused direct write was logged (once per transfer).
    pub(super) direct_refusal_logged: AtomicBool,
    pub(super) seen: Mutex<HashSet<(String, u64)>>,
    pub(super) extents: Mutex<HashMap<String, u64>>,
    pub(super) journal: Mutex<JournalBuffer>,
    pub(super) bytes: AtomicU64,
    pub(super) resumed: AtomicU64,
    pub(super) pieces: AtomicU64,
    pub(super) rejected: AtomicU64,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
            direct_files: Mutex::new(HashMap::new()),
            direct_pieces: AtomicU64::new(0),
            direct_refusal_logged: AtomicBool::new(false),
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

    /// Pieces written past the page cache.
    #[cfg(test)]
    pub(crate) fn direct_pieces(&self) -> u64 {
        self.direct_pieces.load(Ordering::Relaxed)
    }

    pub(super) fn file(&self, path: &str) -> io::Result<Arc<File>> {
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

    /// Writes an aligned piece past the page cache (see `direct`); false when its file
    /// cannot take direct writes, and the caller writes it through the page cache.
    pub(super) fn write_direct(
        &self,
        path: &str,
        offset: u64,
        bytes: &[u8],
        aligned: &mut AlignedBuffer,
    ) -> io::Result<bool> {
        let Some(file) = self.direct_file(path)? else {
            return Ok(false);
        };
        let Some(window) = aligned.fill(bytes) else {
            return Ok(false);
        };
        if direct::write_direct(&file, window, offset)? {
            self.direct_pieces.fetch_add(1, Ordering::Relaxed);
            return Ok(true);
        }
        lock(&self.direct_files).insert(path.to_string(), None);
        self.note_direct_refusal(path);
        Ok(false)
    }

    fn direct_file(&self, path: &str) -> io::Result<Option<Arc<File>>> {
        let mut files = lock(&self.direct_files);
        if let Some(file) = files.get(path) {
            return Ok(file.clone());
        }
        let file = direct::open_direct(&self.staging.join(path))?.map(Arc::new);
        if file.is_none() {
            self.note_direct_refusal(path);
        }
        files.insert(path.to_string(), file.clone());
        Ok(file)
    }

    fn note_direct_refusal(&self, path: &str) {
        if !self.direct_refusal_logged.swap(true, Ordering::Relaxed) {
            log(
                "INFO",
                &format!(
                    "the staging directory refuses direct writes (O_DIRECT), first for {path}: \
                     such pieces go through the page cache"
                ),
            );
        }
    }

    /// Counts a piece once (a resent piece replaces, not adds).
    pub(super) fn count(&self, path: &str, offset: u64, len: u32, resumed: bool) {
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

    pub(super) fn resumed_pieces(&self) -> u64 {
        let seen = lock(&self.seen);
        self.held.keys().filter(|k| seen.contains(*k)).count() as u64
    }

    /// Writes the journal lines of pieces written so far (their data is on the device or in
    /// the page cache, and survives the process; see `verify_held` for what a resumed
    /// attempt re-checks).
    pub(super) fn flush_journal(&self) {
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
    let mut aligned = direct::piece_buffer();
    let mut waiting = WaitingShare::new();
    loop {
        let before = Instant::now();
        let frame = read_frame(connection, &mut payload)?;
        let waiting_permille = waiting.add(before.elapsed());
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
                match verified_piece(&payload, len, crc, compressed) {
                    Some(bytes) => {
                        store_piece(shared, path, offset, &bytes, &mut aligned)?;
                        Frame::Ack {
                            seq,
                            waiting_permille,
                        }
                    }
                    None => {
                        shared.rejected.fetch_add(1, Ordering::Relaxed);
                        let reason = format!("piece {path}@{offset} failed its CRC32C check");
                        log(
                            "WARNING",
                            &format!(
                                "{reason} on stream {stream}: asking the donor to send it again"
                            ),
                        );
                        Frame::Nack { seq, reason }
                    }
                }
            }
            Frame::Same {
                seq,
                path,
                offset,
                len,
            } => {
                if confirm_held(shared, &path, offset, len)? {
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
                create_announced_file(shared, path)?;
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

/// The share of the last second a stream spent waiting for the donor's frames, in
/// permille: each Ack carries it, so the donor can tell whether the network or this joiner
/// holds the transfer back.
struct WaitingShare {
    waited: Duration,
    window_start: Instant,
    permille: u16,
}

impl WaitingShare {
    const WINDOW: Duration = Duration::from_secs(1);

    fn new() -> WaitingShare {
        WaitingShare {
            waited: Duration::ZERO,
            window_start: Instant::now(),
            permille: 0,
        }
    }

    /// Adds one wait; returns the share of the last full window.
    fn add(&mut self, waited: Duration) -> u16 {
        self.waited += waited;
        let window = self.window_start.elapsed();
        if window >= Self::WINDOW {
            let share = self.waited.as_secs_f64() / window.as_secs_f64();
            self.permille = (share * 1000.0).min(1000.0) as u16;
            self.waited = Duration::ZERO;
            self.window_start = Instant::now();
        }
        self.permille
    }
}

/// The piece's bytes, decompressed if need be, when they have the announced length and
/// CRC32C; `None` when they do not (the donor is asked to send the piece again).
fn verified_piece(payload: &[u8], len: u32, crc: u32, compressed: bool) -> Option<Cow<'_, [u8]>> {
    let bytes = if compressed {
        Cow::Owned(zstd::bulk::decompress(payload, len as usize).ok()?)
    } else {
        Cow::Borrowed(payload)
    };
    (bytes.len() == len as usize && crc32c::crc32c(&bytes) == crc).then_some(bytes)
}

/// Writes a verified piece into its staging file (past the page cache when it is
/// aligned), and records it for the journal.
fn store_piece(
    shared: &Receiving,
    path: String,
    offset: u64,
    bytes: &[u8],
    aligned: &mut AlignedBuffer,
) -> Result<(), SstError> {
    let writing = || format!("writing {path} in the staging directory");
    let file = shared
        .file(&path)
        .map_err(|e| SstError::io(format!("opening {path} in the staging directory"), e))?;
    let direct = direct::is_aligned(offset, bytes.len())
        && shared
            .write_direct(&path, offset, bytes, aligned)
            .map_err(|e| SstError::io(writing(), e))?;
    if !direct {
        file.write_all_at(bytes, offset)
            .map_err(|e| SstError::io(writing(), e))?;
    }
    let len = u32::try_from(bytes.len()).expect("a piece's length fits its frame's u32");
    shared.count(&path, offset, len, false);
    lock(&shared.journal).pending.push(HeldPiece {
        digest: frame::digest(bytes),
        path,
        offset,
        len,
    });
    Ok(())
}

/// Whether this joiner holds, verified from an earlier attempt, the piece the donor offers
/// to skip; a held piece counts as received.
fn confirm_held(shared: &Receiving, path: &str, offset: u64, len: u32) -> Result<bool, SstError> {
    let held = shared
        .held
        .get(&(path.to_owned(), offset))
        .is_some_and(|p| p.len == len);
    if held {
        shared
            .file(path)
            .map_err(|e| SstError::io(format!("opening {path}"), e))?;
        shared.count(path, offset, len, true);
    }
    Ok(held)
}

/// Creates a file the donor announces (one that may get no piece: an empty file).
fn create_announced_file(shared: &Receiving, path: String) -> Result<(), SstError> {
    check_relative_path(&path).map_err(SstError::Protocol)?;
    shared
        .file(&path)
        .map_err(|e| SstError::io(format!("creating {path}"), e))?;
    lock(&shared.extents).entry(path).or_insert(0);
    Ok(())
}

/// The journal's pieces that the staging directory still holds intact.
pub(super) fn verify_held(staging: &Path, listed: Vec<HeldPiece>) -> Vec<HeldPiece> {
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
pub(super) fn finish_files(
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
    lock(&shared.direct_files).clear();
    pub(super) fn walk(root: &Path, dir: &Path, keep: &HashMap<String, u64>) -> io::Result<()> {
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
