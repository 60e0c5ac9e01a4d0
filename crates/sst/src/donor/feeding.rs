//! Feeding the streams: mariadb-backup's output cut into pieces,
//! queued for the stream threads, with compression switched on when it pays.

use super::*;

/// The pipe from mariadb-backup holds a whole piece (Linux's default limit for a pipe's
/// size), so the tool writes a chunk with few wake-ups of this reader.
const BACKUP_PIPE_BYTES: usize = PIECE_BYTES as usize;
/// The buffer chunk headers are read through. Most of a payload longer than it is read
/// straight into the payload's own buffer; a shorter one is copied once more, from here.
const HEADER_BUFFER_BYTES: usize = 64 << 10;
const _: () = assert!(HEADER_BUFFER_BYTES < BACKUP_PIPE_BYTES);

/// Runs mariadb-backup and queues its pieces for the streams; waits for the tool.
pub(super) fn feed_backup(
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
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(&stdout, BACKUP_PIPE_BYTES) {
        tracing::debug!("the backup's pipe keeps its size: {e}");
    }
    let mut reader = XbReader::new(BufReader::with_capacity(HEADER_BUFFER_BYTES, stdout));
    let fed = feed_chunks(&mut reader, settings, progress, sender, work, failure);
    let status = finish_backup(&mut backup, fed.is_err());
    let _ = fs::remove_dir_all(&work_dir);
    let fed = fed?;
    status?;
    Ok(fed)
}

/// Cuts the backup's chunks into pieces and queues them, with a `File` for each new file.
pub(super) fn feed_chunks(
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
            let data = Bytes::from(data);
            for (piece_offset, piece) in cut_pieces(offset, &data) {
                fed.pieces += 1;
                fed.bytes += piece.len() as u64;
                let piece = Work::Piece {
                    path: path.clone(),
                    offset: piece_offset,
                    data: data.slice_ref(piece),
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
pub(super) struct AutoCompress {
    pub(super) last_check: Instant,
    pub(super) blocked_mark: u64,
}

impl AutoCompress {
    pub(super) fn new() -> AutoCompress {
        AutoCompress {
            last_check: Instant::now(),
            blocked_mark: 0,
        }
    }

    pub(super) fn check(&mut self, settings: &Settings, sender: &Sender) {
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
pub(super) fn cut_pieces(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
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
pub(super) fn queue(
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
