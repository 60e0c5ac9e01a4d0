//! The wire format between donor and joiner.
//!
//! Every frame is a fixed 16-byte prefix, a bincode-encoded [`Frame`] and an optional
//! payload (the data of a piece):
//!
//! ```text
//! magic "TS" | version u8 | 0 u8 | header length u32 | payload length u32 | CRC32C u32
//! ```
//!
//! The prefix CRC32C covers the first 12 prefix bytes and the header, so a peer speaking
//! garbage or a corrupted length is caught before anything is allocated or written. The
//! payload has its own CRC32C inside [`Frame::Data`], over the uncompressed bytes, checked
//! by the joiner right before it writes them.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::SstError;

/// The protocol version this build speaks.
pub const VERSION: u8 = 1;
const MAGIC: [u8; 2] = *b"TS";
const PREFIX_BYTES: usize = 16;
/// The largest header accepted (a resume manifest of a very large datadir still fits).
pub const MAX_HEADER_BYTES: u32 = 256 << 20;
/// The largest payload accepted: a piece, compressed or not, with room for zstd's overhead.
/// Also the largest uncompressed length a `Data` frame may announce.
pub const MAX_PAYLOAD_BYTES: u32 = 4 << 20;
/// The most a length field makes a reader allocate ahead of the bytes it has received: a
/// long header or payload is received in steps of at most this, or of what already arrived.
pub const READ_AHEAD: usize = 64 << 10;

/// One piece the joiner already holds, as its journal recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldPiece {
    /// Path relative to the snapshot's root.
    pub path: String,
    /// Offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// xxh3-64 of the bytes.
    pub digest: u64,
}

/// What flows between donor and joiner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// Donor, first frame of every stream.
    Hello {
        /// The joiner's session (from its `ready` address): a stale donor is turned away.
        session: u64,
        /// This stream's number, `0..streams`.
        stream: u16,
        /// How many streams the donor opens.
        streams: u16,
    },
    /// Donor, on stream 0 after `Hello`: what is coming.
    Plan {
        /// `Some(position)` when the server asked for no data (IST follows).
        bypass: Option<String>,
        /// The donor's estimate of the snapshot's size (its datadir).
        estimated_bytes: u64,
        /// The donor server's version (`10.11.19-MariaDB-...`).
        server_version: String,
    },
    /// Joiner: go ahead; these are the pieces it already holds.
    Accept {
        /// The resume manifest.
        held: Vec<HeldPiece>,
    },
    /// Either side: stop; the message says why and what to do.
    Error {
        /// The reason, for the other side's log.
        message: String,
    },
    /// Donor: one piece of a file. The payload follows (zstd-compressed if `compressed`).
    Data {
        /// The stream's sequence number for acknowledgements.
        seq: u64,
        /// Path relative to the snapshot's root.
        path: String,
        /// Offset in the file.
        offset: u64,
        /// Uncompressed length.
        len: u32,
        /// CRC32C of the uncompressed bytes.
        crc: u32,
        /// The payload is a zstd frame.
        compressed: bool,
    },
    /// Donor: the joiner's held piece at (path, offset) is current; no payload.
    Same {
        /// The stream's sequence number for acknowledgements.
        seq: u64,
        /// Path relative to the snapshot's root.
        path: String,
        /// Offset in the file.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// Donor: this file is part of the snapshot (needed for empty files).
    File {
        /// The stream's sequence number for acknowledgements.
        seq: u64,
        /// Path relative to the snapshot's root.
        path: String,
    },
    /// Joiner: every frame up to `seq` on this stream is verified and written.
    Ack {
        /// The highest sequence number done.
        seq: u64,
        /// Per mille of the last second this receiver waited for the network, which tells
        /// the donor whether the link or the joiner's disk is the bottleneck.
        waiting_permille: u16,
    },
    /// Joiner: frame `seq` failed verification; send that piece again.
    Nack {
        /// The sequence number to send again.
        seq: u64,
        /// What was wrong, for the donor's log.
        reason: String,
    },
    /// Donor, on stream 0 once every stream is acknowledged: the snapshot is complete.
    Done {
        /// Pieces sent as data or confirmed as `Same`.
        pieces: u64,
        /// Bytes those pieces cover.
        bytes: u64,
        /// Distinct files.
        files: u64,
    },
    /// Joiner: it counted the same; the donor may report success.
    Finished,
}

impl Frame {
    /// A short name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Hello { .. } => "Hello",
            Frame::Plan { .. } => "Plan",
            Frame::Accept { .. } => "Accept",
            Frame::Error { .. } => "Error",
            Frame::Data { .. } => "Data",
            Frame::Same { .. } => "Same",
            Frame::File { .. } => "File",
            Frame::Ack { .. } => "Ack",
            Frame::Nack { .. } => "Nack",
            Frame::Done { .. } => "Done",
            Frame::Finished => "Finished",
        }
    }
}

/// Writes one frame and its payload (empty for all but `Data`).
pub fn write_frame(out: &mut impl Write, frame: &Frame, payload: &[u8]) -> io::Result<()> {
    let header = bincode::serialize(frame).map_err(io::Error::other)?;
    let header_len = u32::try_from(header.len()).map_err(io::Error::other)?;
    let payload_len = u32::try_from(payload.len()).map_err(io::Error::other)?;
    assert!(
        header_len <= MAX_HEADER_BYTES && payload_len <= MAX_PAYLOAD_BYTES,
        "frame {} exceeds the protocol's limits",
        frame.kind()
    );
    let mut prefix = [0u8; PREFIX_BYTES];
    prefix[..2].copy_from_slice(&MAGIC);
    prefix[2] = VERSION;
    prefix[4..8].copy_from_slice(&header_len.to_le_bytes());
    prefix[8..12].copy_from_slice(&payload_len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&prefix[..12]), &header);
    prefix[12..16].copy_from_slice(&crc.to_le_bytes());
    out.write_all(&prefix)?;
    out.write_all(&header)?;
    out.write_all(payload)
}

/// Reads one frame; `payload` receives its payload. `Ok(None)` on a clean end of stream
/// before the first byte of a frame.
pub fn read_frame(input: &mut impl Read, payload: &mut Vec<u8>) -> Result<Option<Frame>, SstError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut got = 0;
    while got < PREFIX_BYTES {
        match input.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(SstError::Protocol(format!(
                    "the stream ended inside a frame prefix ({got} of {PREFIX_BYTES} bytes)"
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SstError::io("reading a frame", e)),
        }
    }
    if prefix[..2] != MAGIC {
        return Err(SstError::Protocol(format!(
            "not a trireme SST frame (starts with {:02x}{:02x}): is something else \
             connecting to the SST port?",
            prefix[0], prefix[1]
        )));
    }
    if prefix[2] != VERSION {
        return Err(SstError::Protocol(format!(
            "the peer speaks protocol version {}, this build {VERSION}: use the same Trireme \
             version on donor and joiner",
            prefix[2]
        )));
    }
    let field = |at: usize| u32::from_le_bytes(prefix[at..at + 4].try_into().expect("4 bytes"));
    let (header_len, payload_len, crc) = (field(4), field(8), field(12));
    if header_len > MAX_HEADER_BYTES || payload_len > MAX_PAYLOAD_BYTES {
        return Err(SstError::Protocol(format!(
            "frame lengths {header_len}/{payload_len} exceed the limits"
        )));
    }
    let mut header = Vec::new();
    read_body(input, header_len, &mut header, "a frame header")?;
    if crc32c::crc32c_append(crc32c::crc32c(&prefix[..12]), &header) != crc {
        return Err(SstError::Protocol(
            "a frame header failed its CRC32C check".into(),
        ));
    }
    let frame: Frame = bincode::deserialize(&header)
        .map_err(|e| SstError::Protocol(format!("a frame header does not decode: {e}")))?;
    if let Frame::Data { len, .. } = frame {
        // The joiner sizes its decompression buffer by it.
        if len > MAX_PAYLOAD_BYTES {
            return Err(SstError::Protocol(format!(
                "a piece of {len} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}"
            )));
        }
    }
    read_body(input, payload_len, payload, "a piece's payload")?;
    Ok(Some(frame))
}

fn read_body(
    input: &mut impl Read,
    len: u32,
    buf: &mut Vec<u8>,
    what: &str,
) -> Result<(), SstError> {
    read_bounded(input, len as usize, buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            SstError::Protocol(format!("the stream ended inside {what}"))
        } else {
            SstError::io(format!("reading {what}"), e)
        }
    })
}

/// Reads exactly `len` bytes into `buf` (replacing its contents), allocating as the bytes
/// arrive: beyond the capacity `buf` already has, never more than [`READ_AHEAD`] plus twice
/// what was received, whatever `len` claims.
pub(crate) fn read_bounded(input: &mut impl Read, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
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

/// Reads the next frame and fails unless there is one.
pub fn expect_frame(
    input: &mut impl Read,
    payload: &mut Vec<u8>,
    waiting_for: &str,
) -> Result<Frame, SstError> {
    match read_frame(input, payload)? {
        Some(Frame::Error { message }) => Err(SstError::Peer(message)),
        Some(frame) => Ok(frame),
        None => Err(SstError::Protocol(format!(
            "the peer closed the connection while this side waited for {waiting_for}"
        ))),
    }
}

/// The digest the resume manifest compares.
pub fn digest(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Frame {
        Frame::Data {
            seq: 7,
            path: "sbtest/sbtest1.ibd".into(),
            offset: 1 << 20,
            len: 5,
            crc: crc32c::crc32c(b"hello"),
            compressed: false,
        }
    }

    #[test]
    fn frames_round_trip() {
        let mut wire = Vec::new();
        write_frame(&mut wire, &data(), b"hello").unwrap();
        write_frame(&mut wire, &Frame::Finished, &[]).unwrap();
        let mut input = &wire[..];
        let mut payload = Vec::new();
        assert_eq!(read_frame(&mut input, &mut payload).unwrap(), Some(data()));
        assert_eq!(payload, b"hello");
        assert_eq!(
            read_frame(&mut input, &mut payload).unwrap(),
            Some(Frame::Finished)
        );
        assert!(payload.is_empty());
        assert_eq!(read_frame(&mut input, &mut payload).unwrap(), None);
    }

    #[test]
    fn every_truncation_and_every_flipped_header_byte_is_an_error() {
        let mut wire = Vec::new();
        write_frame(&mut wire, &data(), b"hello").unwrap();
        let header_end = wire.len() - 5;
        for cut in 1..wire.len() {
            let mut input = &wire[..cut];
            assert!(
                read_frame(&mut input, &mut Vec::new()).is_err(),
                "cut at {cut}"
            );
        }
        for at in 0..header_end {
            let mut bad = wire.clone();
            bad[at] ^= 0x20;
            let mut input = &bad[..];
            assert!(
                read_frame(&mut input, &mut Vec::new()).is_err(),
                "flip at {at}"
            );
        }
    }

    #[test]
    fn garbage_is_named() {
        let mut input = &b"GET / HTTP/1.1\r\n\r\n"[..];
        let error = read_frame(&mut input, &mut Vec::new()).unwrap_err();
        assert!(
            error.to_string().contains("not a trireme SST frame"),
            "{error}"
        );
    }
}

/// Fuzz targets for [`read_frame`]: no byte sequence panics it, no length field makes it
/// allocate ahead of the bytes, and every frame it returns writes and reads back the same.
/// Also the damage the other SST fuzz targets share. `scripts/fuzz.sh` runs them longer.
#[cfg(test)]
pub(crate) mod fuzz {
    use fuzzing::{Damage, Damages, Trickle, Weights};
    use proptest::prelude::*;

    use super::*;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5000;

    /// One way to damage bytes, mostly in place, with lengths at the limits of a frame.
    pub(crate) fn damage() -> impl Strategy<Value = Damage> {
        Damages::default()
            .weights(Weights::MOSTLY_IN_PLACE)
            .huge(&[u64::from(MAX_HEADER_BYTES), 256 << 20])
            .insert_lengths(1..24)
            .strategy()
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z/.]{0,12}", ".{0,6}"]
    }

    fn frame() -> impl Strategy<Value = Frame> {
        let held = (text(), any::<u64>(), any::<u32>(), any::<u64>()).prop_map(
            |(path, offset, len, digest)| HeldPiece {
                path,
                offset,
                len,
                digest,
            },
        );
        prop_oneof![
            (any::<u64>(), any::<u16>(), any::<u16>()).prop_map(|(session, stream, streams)| {
                Frame::Hello {
                    session,
                    stream,
                    streams,
                }
            }),
            (proptest::option::of(text()), any::<u64>(), text()).prop_map(
                |(bypass, estimated_bytes, server_version)| Frame::Plan {
                    bypass,
                    estimated_bytes,
                    server_version
                }
            ),
            proptest::collection::vec(held, 0..4).prop_map(|held| Frame::Accept { held }),
            text().prop_map(|message| Frame::Error { message }),
            (
                any::<u64>(),
                text(),
                any::<u64>(),
                0..=MAX_PAYLOAD_BYTES,
                any::<u32>(),
                any::<bool>()
            )
                .prop_map(|(seq, path, offset, len, crc, compressed)| Frame::Data {
                    seq,
                    path,
                    offset,
                    len,
                    crc,
                    compressed
                }),
            (any::<u64>(), text(), any::<u64>(), any::<u32>()).prop_map(
                |(seq, path, offset, len)| Frame::Same {
                    seq,
                    path,
                    offset,
                    len
                }
            ),
            (any::<u64>(), text()).prop_map(|(seq, path)| Frame::File { seq, path }),
            (any::<u64>(), any::<u16>()).prop_map(|(seq, waiting_permille)| Frame::Ack {
                seq,
                waiting_permille
            }),
            (any::<u64>(), text()).prop_map(|(seq, reason)| Frame::Nack { seq, reason }),
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(pieces, bytes, files)| {
                Frame::Done {
                    pieces,
                    bytes,
                    files,
                }
            }),
            Just(Frame::Finished),
        ]
    }

    /// The prefix checksum made right for whatever the prefix now claims, if the header it
    /// claims is all there.
    fn reseal(bytes: &mut [u8]) {
        if bytes.len() < PREFIX_BYTES {
            return;
        }
        let header_len = u32::from_le_bytes(bytes[4..8].try_into().expect("4")) as usize;
        if let Some(header) = bytes.get(PREFIX_BYTES..PREFIX_BYTES + header_len) {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..12]), header);
            bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// Reads frames until the end or an error; checks every frame read, and returns them.
    fn read_all(bytes: &[u8], step: usize) -> Result<Vec<(Frame, Vec<u8>)>, TestCaseError> {
        let mut input = Trickle { bytes, step };
        let mut frames = Vec::new();
        let mut payload = Vec::new();
        while let Ok(Some(frame)) = read_frame(&mut input, &mut payload) {
            prop_assert!(payload.len() <= MAX_PAYLOAD_BYTES as usize);
            if let Frame::Data { len, .. } = frame {
                prop_assert!(len <= MAX_PAYLOAD_BYTES);
            }
            let mut again = Vec::new();
            write_frame(&mut again, &frame, &payload).expect("to memory");
            let mut again_payload = Vec::new();
            let reread = read_frame(&mut &again[..], &mut again_payload)
                .ok()
                .flatten();
            prop_assert_eq!(reread.as_ref(), Some(&frame));
            prop_assert_eq!(&again_payload, &payload);
            frames.push((frame, payload.clone()));
        }
        Ok(frames)
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary bytes, most behind a valid magic and version with the prefix checksum
        /// made to match, so that the bincode header decoder is what gets exercised.
        #[test]
        fn fuzz_sst_frame_arbitrary_bytes(
            lengths in (0u32..80, 0u32..40),
            tail in proptest::collection::vec(any::<u8>(), 0..200),
            prefix in prop_oneof![3 => Just(true), 1 => Just(false)],
            step in prop_oneof![Just(usize::MAX), 1usize..16],
        ) {
            let mut bytes = Vec::new();
            if prefix {
                bytes.extend_from_slice(&MAGIC);
                bytes.extend_from_slice(&[VERSION, 0]);
                bytes.extend_from_slice(&lengths.0.to_le_bytes());
                bytes.extend_from_slice(&lengths.1.to_le_bytes());
                bytes.extend_from_slice(&[0; 4]);
            }
            bytes.extend_from_slice(&tail);
            if prefix {
                reseal(&mut bytes);
            }
            read_all(&bytes, step)?;
        }

        /// Real frames with flipped and overwritten bytes, huge lengths, cuts and insertions,
        /// the first prefix resealed or not: never a panic; undamaged, they read back as sent.
        #[test]
        fn fuzz_sst_frame_mutated(
            frames in proptest::collection::vec(
                (frame(), proptest::collection::vec(any::<u8>(), 0..32)),
                1..4,
            ),
            damages in proptest::collection::vec(damage(), 0..3),
            seal in any::<bool>(),
            step in prop_oneof![Just(usize::MAX), 1usize..16],
        ) {
            let mut bytes = Vec::new();
            for (frame, payload) in &frames {
                write_frame(&mut bytes, frame, payload).expect("to memory");
            }
            fuzzing::apply(&mut bytes, &damages);
            if seal {
                reseal(&mut bytes);
            }
            let read = read_all(&bytes, step)?;
            if damages.is_empty() {
                prop_assert_eq!(read, frames);
            }
        }

        /// A length claimed in a frame allocates only as its bytes arrive: with N bytes
        /// available, the buffer never holds more than READ_AHEAD + 2N, and a claim beyond
        /// the bytes is an error.
        #[test]
        fn fuzz_sst_read_bounded_allocates_as_bytes_arrive(
            (claim, available, step) in
                fuzzing::bounded_reads(&[MAX_HEADER_BYTES as usize, 256 << 20]),
        ) {
            fuzzing::check_bounded_read(READ_AHEAD, claim, available, step, |input, claim, buf| {
                read_bounded(input, claim, buf)
            })?;
        }
    }

    /// A prefix claiming the largest header, with a few bytes behind it, is a stream that
    /// ended inside a header; a `Data` frame announcing more than a payload can hold is
    /// refused before its payload is read.
    #[test]
    fn oversized_claims_are_refused() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&[VERSION, 0]);
        bytes.extend_from_slice(&MAX_HEADER_BYTES.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&[0; 24]);
        let error = read_frame(&mut &bytes[..], &mut Vec::new()).expect_err("truncated");
        assert!(
            error.to_string().contains("ended inside a frame header"),
            "{error}"
        );

        let data = Frame::Data {
            seq: 1,
            path: "a".into(),
            offset: 0,
            len: u32::MAX,
            crc: 0,
            compressed: true,
        };
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &data, b"tiny").expect("to memory");
        let error = read_frame(&mut &bytes[..], &mut Vec::new()).expect_err("oversized");
        assert!(error.to_string().contains("exceeds the limit"), "{error}");
    }
}
