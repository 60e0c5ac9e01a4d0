//! The state transfer stream a donor sends to its joiner's `ist.recv_addr`: the donor's
//! certification index, then (for IST) every ordered action the joiner misses, each with the
//! verdict the cluster gave it.
//!
//! ```text
//! stream  := header record* end
//! header  := "TRIS" version:u8 cluster:16 outcome:u8 first:i64 last:i64
//!            reason_len:u32 reason index_len:u64 index crc32c:u32
//! record  := body_len:u32 body crc32c(body_len, body):u32
//! body    := seqno:i64 kind:u8 depends_on:i64 payload
//! end     := 0xFFFF_FFFF count:u64 crc32c(count):u32
//! ```
//!
//! Integers are little-endian. `outcome` says what the joiner gets: IST (records `first..=last`
//! follow), SST (the server's snapshot brings the data; no records) or a refusal (the donor
//! cannot serve an IST-only request; `reason` says why). Every part is checksummed; a
//! truncated stream, a checksum mismatch, a seqno out of sequence or a wrong record count is
//! a specific [`IstError`], and nothing after the last good record is used.

use std::io::{Read, Write};

use base::{Seqno, Uuid};

/// The stream's magic bytes.
const MAGIC: [u8; 4] = *b"TRIS";
/// The stream format this build writes and reads.
/// Version 2 added view records ([`ActionKind::View`]); a version-1 joiner refuses the
/// stream whole rather than a record in its middle.
pub const VERSION: u8 = 2;
/// Marks the end frame where a record's length would be.
const END_MARK: u32 = u32::MAX;
/// Largest certification index accepted from a donor.
pub const INDEX_MAX: u64 = 512 << 20;
/// Largest single record accepted (Galera's 2 GiB write-set ceiling does not fit a frame;
/// a write-set that large is refused at replication time anyway).
pub const RECORD_MAX: u32 = (1 << 31) - 1;
/// Longest reason text accepted.
const REASON_MAX: u32 = 64 << 10;
/// The most a length field makes a reader allocate ahead of the bytes it has received: a
/// long index or record is received in steps of at most this, or of what already arrived.
pub const READ_AHEAD: usize = 64 << 10;

/// What kind of ordered action a record (and a gcache entry) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ActionKind {
    /// A write-set: its payload is the encoded write-set.
    WriteSet = 1,
    /// A seqno that carries nothing to apply (a non-primary view, an undecodable write-set).
    Skip = 2,
    /// A primary view: its payload is a [`crate::view_record`] body, which a joiner hands to
    /// its server at this seqno.
    View = 3,
}

impl ActionKind {
    /// The kind a stored tag stands for, if any.
    pub fn from_u8(value: u8) -> Option<ActionKind> {
        match value {
            1 => Some(ActionKind::WriteSet),
            2 => Some(ActionKind::Skip),
            3 => Some(ActionKind::View),
            _ => None,
        }
    }
}

/// `depends_on` value that marks a write-set that failed certification.
pub const FAILED_CERT: i64 = i64::MIN;

/// One ordered action as a donor stores and streams it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// Its seqno.
    pub seqno: Seqno,
    /// What it is.
    pub kind: ActionKind,
    /// The verdict: the seqno it depends on, or [`FAILED_CERT`].
    pub depends_on: i64,
    /// Its bytes (an encoded write-set or view record).
    pub payload: Vec<u8>,
}

impl Action {
    /// The gcache body of this action: depends_on then payload (the seqno and kind are the
    /// gcache record's own fields).
    pub fn cache_body(depends_on: i64, payload: &[u8]) -> Vec<u8> {
        let mut body = Vec::with_capacity(8 + payload.len());
        body.extend_from_slice(&depends_on.to_le_bytes());
        body.extend_from_slice(payload);
        body
    }

    /// Rebuilds an action from a gcache record.
    pub fn from_cache(seqno: Seqno, kind: u8, body: Vec<u8>) -> Result<Action, IstError> {
        let kind = ActionKind::from_u8(kind).ok_or(IstError::BadRecord {
            seqno,
            what: "unknown action kind",
        })?;
        if body.len() < 8 {
            return Err(IstError::BadRecord {
                seqno,
                what: "cached body shorter than its verdict",
            });
        }
        let depends_on = i64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
        Ok(Action {
            seqno,
            kind,
            depends_on,
            payload: body[8..].to_vec(),
        })
    }
}

/// What a donor answers a state request with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// Records `first..=last` follow.
    Ist = 1,
    /// The data comes by the server's snapshot; no records.
    Sst = 2,
    /// An IST-only request this donor cannot serve.
    Refused = 3,
}

/// The stream header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The history the stream belongs to.
    pub cluster: Uuid,
    /// What the joiner gets.
    pub outcome: Outcome,
    /// First seqno streamed (IST), else the position after the index.
    pub first: Seqno,
    /// Last seqno streamed: the position of the certification index.
    pub last: Seqno,
    /// Why IST was not possible (SST or refusal), for the joiner's log.
    pub reason: String,
    /// The donor's certification index at `last`.
    pub index: Vec<u8>,
}

/// What went wrong with a received stream.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IstError {
    /// The connection failed or ended early.
    #[error("IST stream truncated or broken after seqno {after}: {reason}")]
    Truncated {
        /// The last seqno received intact.
        after: Seqno,
        /// The I/O error.
        reason: String,
    },
    /// Not a stream of this format.
    #[error("not an IST stream of version {VERSION} (bad magic, version or outcome)")]
    BadHeader,
    /// A length field over its limit.
    #[error("IST stream {what} of {length} bytes is over the limit")]
    Oversized {
        /// Which part.
        what: &'static str,
        /// The length it claimed.
        length: u64,
    },
    /// A checksum did not match.
    #[error("IST stream checksum mismatch in {what} after seqno {after}")]
    Checksum {
        /// Which part.
        what: &'static str,
        /// The last seqno received intact.
        after: Seqno,
    },
    /// A record that is not the next expected one, or malformed.
    #[error("IST record {seqno}: {what}")]
    BadRecord {
        /// The record's seqno.
        seqno: Seqno,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A view record that does not decode.
    #[error("IST record {seqno}: {error}")]
    BadView {
        /// The record's seqno.
        seqno: Seqno,
        /// What is wrong with it.
        error: crate::view_record::ViewRecordError,
    },
    /// The end frame does not match what was received.
    #[error("IST stream ended after {received} records, the donor says {sent}")]
    Count {
        /// Records received.
        received: u64,
        /// Records the donor counted.
        sent: u64,
    },
}

fn io_error(after: Seqno) -> impl Fn(std::io::Error) -> IstError {
    move |error| IstError::Truncated {
        after,
        reason: error.to_string(),
    }
}

/// Writes the header.
pub fn write_header(out: &mut impl Write, header: &Header) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(64 + header.reason.len() + header.index.len());
    bytes.extend_from_slice(&MAGIC);
    bytes.push(VERSION);
    bytes.extend_from_slice(&header.cluster.0);
    bytes.push(header.outcome as u8);
    bytes.extend_from_slice(&header.first.0.to_le_bytes());
    bytes.extend_from_slice(&header.last.0.to_le_bytes());
    bytes.extend_from_slice(&(header.reason.len() as u32).to_le_bytes());
    bytes.extend_from_slice(header.reason.as_bytes());
    bytes.extend_from_slice(&(header.index.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&header.index);
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    out.write_all(&bytes)
}

/// Reads and checks the header.
pub fn read_header(input: &mut impl Read) -> Result<Header, IstError> {
    let broken = io_error(Seqno::UNDEFINED);
    let mut fixed = [0u8; 4 + 1 + 16 + 1 + 8 + 8 + 4];
    input.read_exact(&mut fixed).map_err(&broken)?;
    if fixed[..4] != MAGIC || fixed[4] != VERSION {
        return Err(IstError::BadHeader);
    }
    let cluster = Uuid(fixed[5..21].try_into().expect("16 bytes"));
    let outcome = match fixed[21] {
        1 => Outcome::Ist,
        2 => Outcome::Sst,
        3 => Outcome::Refused,
        _ => return Err(IstError::BadHeader),
    };
    let first = Seqno(i64::from_le_bytes(fixed[22..30].try_into().expect("8")));
    let last = Seqno(i64::from_le_bytes(fixed[30..38].try_into().expect("8")));
    let reason_len = u32::from_le_bytes(fixed[38..42].try_into().expect("4"));
    if reason_len > REASON_MAX {
        return Err(IstError::Oversized {
            what: "reason",
            length: reason_len.into(),
        });
    }
    let mut reason = Vec::new();
    read_bounded(input, reason_len as usize, &mut reason).map_err(&broken)?;
    let mut index_len = [0u8; 8];
    input.read_exact(&mut index_len).map_err(&broken)?;
    let index_len_value = u64::from_le_bytes(index_len);
    if index_len_value > INDEX_MAX {
        return Err(IstError::Oversized {
            what: "certification index",
            length: index_len_value,
        });
    }
    let mut index = Vec::new();
    read_bounded(input, index_len_value as usize, &mut index).map_err(&broken)?;
    let mut crc = [0u8; 4];
    input.read_exact(&mut crc).map_err(&broken)?;
    let mut digest = crc32c::crc32c(&fixed);
    digest = crc32c::crc32c_append(digest, &reason);
    digest = crc32c::crc32c_append(digest, &index_len);
    digest = crc32c::crc32c_append(digest, &index);
    if digest != u32::from_le_bytes(crc) {
        return Err(IstError::Checksum {
            what: "header",
            after: Seqno::UNDEFINED,
        });
    }
    if !seqnos_are_sane(outcome, first, last) {
        return Err(IstError::BadHeader);
    }
    Ok(Header {
        cluster,
        outcome,
        first,
        last,
        reason: String::from_utf8_lossy(&reason).into_owned(),
        index,
    })
}

/// Seqnos a donor can send: the index position `last` is a seqno or -1 with a successor,
/// and `first` is no seqno below 0 nor more than one past `last` (exactly one past unless
/// records follow). Anything else is refused here, so that no later `first - 1` or
/// `last + 1` can overflow.
fn seqnos_are_sane(outcome: Outcome, first: Seqno, last: Seqno) -> bool {
    if last.0 < Seqno::UNDEFINED.0 || last.0 == i64::MAX {
        return false;
    }
    match outcome {
        Outcome::Ist => (0..=last.0 + 1).contains(&first.0),
        Outcome::Sst | Outcome::Refused => first.0 == last.0 + 1,
    }
}

/// Reads exactly `len` bytes into `buf` (replacing its contents), allocating as the bytes
/// arrive: never more than [`READ_AHEAD`] plus twice what was received, whatever `len`
/// claims, so a length field alone cannot make the reader allocate.
pub fn read_bounded(input: &mut impl Read, len: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    while buf.len() < len {
        let received = buf.len();
        let step = (len - received).min(READ_AHEAD.max(received));
        buf.reserve_exact(step);
        buf.resize(received + step, 0);
        input.read_exact(&mut buf[received..])?;
    }
    Ok(())
}

/// Writes one record.
pub fn write_record(out: &mut impl Write, action: &Action) -> std::io::Result<()> {
    let body_len = 8 + 1 + 8 + action.payload.len();
    let mut head = Vec::with_capacity(4 + 17);
    head.extend_from_slice(&(body_len as u32).to_le_bytes());
    head.extend_from_slice(&action.seqno.0.to_le_bytes());
    head.push(action.kind as u8);
    head.extend_from_slice(&action.depends_on.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), &action.payload);
    out.write_all(&head)?;
    out.write_all(&action.payload)?;
    out.write_all(&crc.to_le_bytes())
}

/// Writes the end frame after `count` records.
pub fn write_end(out: &mut impl Write, count: u64) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&END_MARK.to_le_bytes());
    bytes.extend_from_slice(&count.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    out.write_all(&bytes)?;
    out.flush()
}

/// Reads records `header.first..=header.last` one at a time, checking each.
pub struct RecordReader {
    next: Seqno,
    last: Seqno,
    received: u64,
    finished: bool,
}

impl RecordReader {
    /// A reader for the records `header` announces.
    pub fn new(header: &Header) -> RecordReader {
        RecordReader {
            next: header.first,
            last: header.last,
            received: 0,
            finished: header.outcome != Outcome::Ist,
        }
    }

    /// The last seqno received intact.
    pub fn received_upto(&self) -> Seqno {
        self.next.prev()
    }

    /// The next record, or `None` after a verified end frame.
    pub fn next(&mut self, input: &mut impl Read) -> Result<Option<Action>, IstError> {
        if self.finished {
            return Ok(None);
        }
        let after = self.received_upto();
        let broken = io_error(after);
        let mut length = [0u8; 4];
        input.read_exact(&mut length).map_err(&broken)?;
        let body_len = u32::from_le_bytes(length);
        if body_len == END_MARK {
            let mut rest = [0u8; 12];
            input.read_exact(&mut rest).map_err(&broken)?;
            let crc = u32::from_le_bytes(rest[8..].try_into().expect("4"));
            let digest = crc32c::crc32c_append(crc32c::crc32c(&length), &rest[..8]);
            if digest != crc {
                return Err(IstError::Checksum { what: "end", after });
            }
            let sent = u64::from_le_bytes(rest[..8].try_into().expect("8"));
            if sent != self.received {
                return Err(IstError::Count {
                    received: self.received,
                    sent,
                });
            }
            if i128::from(self.next.0) != i128::from(self.last.0) + 1 {
                return Err(IstError::BadRecord {
                    seqno: self.next,
                    what: "the stream ended before this seqno",
                });
            }
            self.finished = true;
            return Ok(None);
        }
        if body_len > RECORD_MAX {
            return Err(IstError::Oversized {
                what: "record",
                length: body_len.into(),
            });
        }
        if body_len < 17 {
            return Err(IstError::BadRecord {
                seqno: self.next,
                what: "record shorter than its header",
            });
        }
        let mut body = Vec::new();
        read_bounded(input, body_len as usize, &mut body).map_err(&broken)?;
        let mut crc = [0u8; 4];
        input.read_exact(&mut crc).map_err(&broken)?;
        let digest = crc32c::crc32c_append(crc32c::crc32c(&length), &body);
        if digest != u32::from_le_bytes(crc) {
            return Err(IstError::Checksum {
                what: "record",
                after,
            });
        }
        let seqno = Seqno(i64::from_le_bytes(body[..8].try_into().expect("8")));
        if seqno != self.next || seqno > self.last {
            return Err(IstError::BadRecord {
                seqno,
                what: "out of sequence",
            });
        }
        let kind = ActionKind::from_u8(body[8]).ok_or(IstError::BadRecord {
            seqno,
            what: "unknown action kind",
        })?;
        let depends_on = i64::from_le_bytes(body[9..17].try_into().expect("8"));
        body.drain(..17);
        self.next = seqno.next();
        self.received += 1;
        Ok(Some(Action {
            seqno,
            kind,
            depends_on,
            payload: body,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(outcome: Outcome, first: i64, last: i64) -> Header {
        Header {
            cluster: Uuid([7; 16]),
            outcome,
            first: Seqno(first),
            last: Seqno(last),
            reason: "because".into(),
            index: vec![1, 2, 3, 4, 5],
        }
    }

    fn action(seqno: i64) -> Action {
        Action {
            seqno: Seqno(seqno),
            kind: if seqno % 5 == 0 {
                ActionKind::Skip
            } else {
                ActionKind::WriteSet
            },
            depends_on: if seqno % 7 == 0 {
                FAILED_CERT
            } else {
                seqno - 2
            },
            payload: vec![seqno as u8; (seqno as usize * 13) % 300],
        }
    }

    fn stream(first: i64, last: i64) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_header(&mut bytes, &header(Outcome::Ist, first, last)).unwrap();
        for seqno in first..=last {
            write_record(&mut bytes, &action(seqno)).unwrap();
        }
        write_end(&mut bytes, (last - first + 1) as u64).unwrap();
        bytes
    }

    fn read_all(bytes: &[u8]) -> (Result<(), IstError>, Vec<Action>) {
        let mut input = bytes;
        let mut got = Vec::new();
        let header = match read_header(&mut input) {
            Ok(header) => header,
            Err(error) => return (Err(error), got),
        };
        let mut reader = RecordReader::new(&header);
        loop {
            match reader.next(&mut input) {
                Ok(Some(action)) => got.push(action),
                Ok(None) => return (Ok(()), got),
                Err(error) => return (Err(error), got),
            }
        }
    }

    #[test]
    fn a_stream_round_trips() {
        let bytes = stream(11, 60);
        let (result, got) = read_all(&bytes);
        assert_eq!(result, Ok(()));
        let expected: Vec<Action> = (11..=60).map(action).collect();
        assert_eq!(got, expected);
        let mut input = &bytes[..];
        assert_eq!(
            read_header(&mut input).unwrap(),
            header(Outcome::Ist, 11, 60)
        );
    }

    #[test]
    fn an_sst_header_has_no_records() {
        let mut bytes = Vec::new();
        write_header(&mut bytes, &header(Outcome::Sst, 101, 100)).unwrap();
        let (result, got) = read_all(&bytes);
        assert_eq!(result, Ok(()));
        assert!(got.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_and_keeps_only_intact_records() {
        let bytes = stream(1, 20);
        for cut in 0..bytes.len() {
            let (result, got) = read_all(&bytes[..cut]);
            assert!(
                result.is_err(),
                "cut at {cut} of {} went unnoticed",
                bytes.len()
            );
            let expected: Vec<Action> = (1..=got.len() as i64).map(action).collect();
            assert_eq!(got, expected, "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = stream(1, 12);
        for position in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[position] ^= 0x20;
            let (result, got) = read_all(&damaged);
            assert!(result.is_err(), "flip at {position} went unnoticed");
            for (i, action_got) in got.iter().enumerate() {
                assert_eq!(*action_got, action(i as i64 + 1), "flip at {position}");
            }
        }
    }

    #[test]
    fn records_out_of_sequence_or_a_short_count_are_refused() {
        let mut bytes = Vec::new();
        write_header(&mut bytes, &header(Outcome::Ist, 1, 3)).unwrap();
        write_record(&mut bytes, &action(1)).unwrap();
        write_record(&mut bytes, &action(3)).unwrap();
        let (result, _) = read_all(&bytes);
        assert!(matches!(result, Err(IstError::BadRecord { .. })));

        let mut bytes = Vec::new();
        write_header(&mut bytes, &header(Outcome::Ist, 1, 3)).unwrap();
        write_record(&mut bytes, &action(1)).unwrap();
        write_end(&mut bytes, 1).unwrap();
        let (result, _) = read_all(&bytes);
        assert_eq!(
            result,
            Err(IstError::BadRecord {
                seqno: Seqno(2),
                what: "the stream ended before this seqno"
            })
        );

        let mut bytes = Vec::new();
        write_header(&mut bytes, &header(Outcome::Ist, 1, 1)).unwrap();
        write_record(&mut bytes, &action(1)).unwrap();
        write_end(&mut bytes, 2).unwrap();
        let (result, _) = read_all(&bytes);
        assert_eq!(
            result,
            Err(IstError::Count {
                received: 1,
                sent: 2
            })
        );
    }

    #[test]
    fn cache_bodies_round_trip() {
        let body = Action::cache_body(FAILED_CERT, b"payload");
        let action = Action::from_cache(Seqno(9), ActionKind::WriteSet as u8, body).unwrap();
        assert_eq!(action.depends_on, FAILED_CERT);
        assert_eq!(action.payload, b"payload");
        assert!(Action::from_cache(Seqno(9), 77, vec![0; 8]).is_err());
        assert!(Action::from_cache(Seqno(9), 1, vec![0; 3]).is_err());
    }
}

#[cfg(test)]
mod fuzz;
