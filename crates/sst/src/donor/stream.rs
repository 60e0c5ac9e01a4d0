//! One stream thread: its connection, its window of unacknowledged pieces, and the
//! joiner's answers.

use super::*;

/// One stream: sends pieces (those to send again first) with at most [`WINDOW`]
/// unacknowledged, and reads the joiner's answers when the window is full or nothing is
/// ready to send. Returns once the work is done and acknowledged, or `Ok` early when
/// another stream failed (that failure is in `failure`).
pub(super) fn run_stream(
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

pub(super) fn stream_pieces(
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
pub(super) enum Next {
    Ready(Work),
    NotYet,
    /// The feeder is done: nothing more will come.
    Finished,
}

/// The next piece of work, waiting a little for it when `wait`.
pub(super) fn next_work(work: &Receiver<Work>, wait: bool) -> Next {
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
pub(super) fn send_work(
    connection: &mut Stream,
    window: &mut Window,
    item: Work,
    sender: &Sender,
    scratch: &mut Vec<u8>,
) -> Result<(), SstError> {
    window.seq += 1;
    let seq = window.seq;
    let (frame, body) = frame_for(&item, seq, sender, scratch)?;
    let payload: &[u8] = match &body {
        Body::Empty => &[],
        Body::Piece(bytes) => bytes,
        Body::Scratch => scratch,
    };
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

/// Where a frame's payload is.
pub(super) enum Body {
    /// The frame has none.
    Empty,
    /// The piece's bytes as they are.
    Piece(Bytes),
    /// The scratch buffer: compressed, or corrupted by fault injection.
    Scratch,
}

/// The frame for one piece of work, and where its payload is.
pub(super) fn frame_for(
    item: &Work,
    seq: u64,
    sender: &Sender,
    scratch: &mut Vec<u8>,
) -> Result<(Frame, Body), SstError> {
    let (path, offset, data, resends) = match item {
        Work::File { path } => {
            let path = path.to_string();
            return Ok((Frame::File { seq, path }, Body::Empty));
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
            Body::Empty,
        ));
    }
    let crc = crc32c::crc32c(data);
    let compressed = sender.compress.load(Ordering::Relaxed);
    let mut body = Body::Piece(data.clone());
    if compressed {
        *scratch = zstd::bulk::compress(data, sender.level)
            .map_err(|e| SstError::io("compressing a piece", e))?;
        body = Body::Scratch;
    }
    let number = sender.totals.data_pieces.fetch_add(1, Ordering::Relaxed) + 1;
    if sender.corrupt_piece == Some(number)
        && !data.is_empty()
        && !sender.corrupted.swap(true, Ordering::Relaxed)
    {
        if !compressed {
            scratch.clear();
            scratch.extend_from_slice(data);
            body = Body::Scratch;
        }
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
    Ok((frame, body))
}

/// Reads one answer of the joiner on a data stream.
pub(super) fn read_answer(
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
pub(super) fn connect(target: &str, session: &Session) -> Result<Stream, SstError> {
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

pub(super) fn write_control(connection: &mut Stream, frame: &Frame) -> Result<(), SstError> {
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

pub(super) fn read_reply(connection: &mut Stream) -> Result<Frame, SstError> {
    frame::expect_frame(connection, &mut Vec::new(), "the joiner's answer").map_err(|e| match e {
        SstError::Peer(message) => SstError::Peer(format!("the joiner refused: {message}")),
        other => other,
    })
}
