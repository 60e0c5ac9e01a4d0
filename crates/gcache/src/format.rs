//! Byte layouts of file headers and records (described in the crate documentation).

use base::{Seqno, Uuid};

/// Bytes reserved for the header at the start of the ring file and of every page file.
pub(crate) const FILE_HEADER_LEN: u64 = 64;
/// Bytes of a record header; the payload follows.
pub(crate) const RECORD_HEADER_LEN: usize = 32;
/// Records start at multiples of this, so recovery only probes aligned offsets.
pub(crate) const RECORD_ALIGN: u64 = 8;

pub(crate) const RING_MAGIC: [u8; 8] = *b"TRGCRING";
pub(crate) const PAGE_MAGIC: [u8; 8] = *b"TRGCPAGE";
pub(crate) const FORMAT_VERSION: u32 = 1;
pub(crate) const RECORD_MAGIC: [u8; 4] = *b"TGCR";

/// The decoded header of a ring or page file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    /// The cluster state UUID whose history the records belong to.
    pub(crate) history: Uuid,
    /// The length the file was created with.
    pub(crate) file_size: u64,
    /// The page number (0 for the ring).
    pub(crate) page_id: u64,
}

impl FileHeader {
    pub(crate) fn encode(&self, magic: [u8; 8]) -> [u8; FILE_HEADER_LEN as usize] {
        let mut out = [0u8; FILE_HEADER_LEN as usize];
        out[0..8].copy_from_slice(&magic);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(FILE_HEADER_LEN as u32).to_le_bytes());
        out[16..32].copy_from_slice(&self.history.0);
        out[32..40].copy_from_slice(&self.file_size.to_le_bytes());
        out[40..48].copy_from_slice(&self.page_id.to_le_bytes());
        let crc = crc32c::crc32c(&out[..60]);
        out[60..64].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a header, or says in words why it cannot be trusted (for the log).
    pub(crate) fn decode(bytes: &[u8], magic: [u8; 8]) -> Result<FileHeader, String> {
        if bytes.len() < FILE_HEADER_LEN as usize {
            return Err(format!("file is only {} bytes long", bytes.len()));
        }
        if bytes[0..8] != magic {
            return Err("no gcache magic at the start of the file".to_owned());
        }
        let stored_crc = u32_at(bytes, 60);
        if crc32c::crc32c(&bytes[..60]) != stored_crc {
            return Err("file header checksum mismatch".to_owned());
        }
        let version = u32_at(bytes, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "unsupported format version {version} (this build reads {FORMAT_VERSION})"
            ));
        }
        let header_len = u32_at(bytes, 12);
        if u64::from(header_len) != FILE_HEADER_LEN {
            return Err(format!("unexpected header length {header_len}"));
        }
        let mut history = [0u8; 16];
        history.copy_from_slice(&bytes[16..32]);
        Ok(FileHeader {
            history: Uuid(history),
            file_size: u64_at(bytes, 32),
            page_id: u64_at(bytes, 40),
        })
    }
}

/// The CRC state every record checksum starts from: binding records to their history means
/// a record copied from another cluster's cache can never pass as one of ours.
pub(crate) fn history_seed(history: Uuid) -> u32 {
    crc32c::crc32c(&history.0)
}

/// Bytes a record of `payload_len` occupies on disk, padding included.
pub(crate) fn aligned_len(payload_len: u32) -> u64 {
    let raw = RECORD_HEADER_LEN as u64 + u64::from(payload_len);
    raw.div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

/// The fixed fields of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub(crate) payload_len: u32,
    pub(crate) seqno: Seqno,
    pub(crate) timestamp: u64,
    pub(crate) kind: u8,
    pub(crate) crc: u32,
}

impl RecordHeader {
    /// Parses the fixed fields if the magic and reserved bytes look like one of our records;
    /// the checksum is not checked here because it also covers the payload.
    pub(crate) fn parse(bytes: &[u8]) -> Option<RecordHeader> {
        if bytes.len() < RECORD_HEADER_LEN || bytes[0..4] != RECORD_MAGIC {
            return None;
        }
        if bytes[25..28] != [0, 0, 0] {
            return None;
        }
        Some(RecordHeader {
            payload_len: u32_at(bytes, 4),
            seqno: Seqno(u64_at(bytes, 8) as i64),
            timestamp: u64_at(bytes, 16),
            kind: bytes[24],
            crc: u32_at(bytes, 28),
        })
    }
}

/// Appends the header of a record for `payload` (its checksum covers the payload) to `out`;
/// the payload goes right after it.
#[cfg(test)]
pub(crate) fn encode_record_header(
    out: &mut Vec<u8>,
    seed: u32,
    seqno: Seqno,
    kind: u8,
    timestamp: u64,
    payload: &[u8],
) {
    encode_split_record_header(out, seed, seqno, kind, timestamp, [&[], payload]);
}

/// [`encode_record_header`] for a payload given in two pieces, stored one after the other.
pub(crate) fn encode_split_record_header(
    out: &mut Vec<u8>,
    seed: u32,
    seqno: Seqno,
    kind: u8,
    timestamp: u64,
    payload: [&[u8]; 2],
) {
    let payload_len = u32::try_from(payload[0].len() + payload[1].len())
        .expect("caller checked the payload length");
    let start = out.len();
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&seqno.0.to_le_bytes());
    out.extend_from_slice(&timestamp.to_le_bytes());
    out.extend_from_slice(&[kind, 0, 0, 0]);
    let crc = payload
        .iter()
        .fold(crc32c::crc32c_append(seed, &out[start..]), |crc, piece| {
            crc32c::crc32c_append(crc, piece)
        });
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Checksum of a record's covered header bytes plus its payload.
pub(crate) fn record_crc(seed: u32, header: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c_append(seed, &header[..28]), payload)
}

/// Starts a checksum over a record whose payload is fed afterwards in pieces.
pub(crate) fn record_crc_start(seed: u32, header: &[u8]) -> u32 {
    crc32c::crc32c_append(seed, &header[..28])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_header_round_trips_and_rejects_damage() {
        let header = FileHeader {
            history: Uuid([7; 16]),
            file_size: 1 << 20,
            page_id: 3,
        };
        let bytes = header.encode(PAGE_MAGIC);
        assert_eq!(FileHeader::decode(&bytes, PAGE_MAGIC), Ok(header));
        assert!(FileHeader::decode(&bytes, RING_MAGIC).is_err());
        for at in 0..bytes.len() {
            let mut damaged = bytes;
            damaged[at] ^= 0x10;
            assert!(
                FileHeader::decode(&damaged, PAGE_MAGIC).is_err(),
                "flip at {at}"
            );
        }
        assert!(FileHeader::decode(&bytes[..20], PAGE_MAGIC).is_err());
    }

    #[test]
    fn record_encoding_matches_parser_and_checksum() {
        let seed = history_seed(Uuid([1; 16]));
        let mut out = Vec::new();
        encode_record_header(&mut out, seed, Seqno(42), 3, 1234, b"hello");
        out.extend_from_slice(b"hello");
        assert_eq!(out.len(), RECORD_HEADER_LEN + 5);
        let header = RecordHeader::parse(&out).expect("parses");
        assert_eq!(header.seqno, Seqno(42));
        assert_eq!(header.kind, 3);
        assert_eq!(header.payload_len, 5);
        assert_eq!(header.timestamp, 1234);
        assert_eq!(
            record_crc(seed, &out, &out[RECORD_HEADER_LEN..]),
            header.crc
        );
        // Another history's seed must not validate the same bytes.
        let other = history_seed(Uuid([2; 16]));
        assert_ne!(
            record_crc(other, &out, &out[RECORD_HEADER_LEN..]),
            header.crc
        );
        assert_eq!(aligned_len(5), 40);
        assert_eq!(aligned_len(0), 32);
        assert_eq!(aligned_len(8), 40);
    }
}

/// Fuzz targets for the header decoders, and the damage the recovery fuzz targets share.
/// `scripts/fuzz.sh` runs them longer.
#[cfg(test)]
pub(crate) mod fuzz {
    use super::*;
    use fuzzing::{Damage, Damages, Weights};
    use proptest::prelude::*;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 10_000;

    /// Huge values for a length, besides `u64::MAX` and `u32::MAX`.
    pub(crate) const HUGE: [u64; 2] = [i64::MAX as u64, 1 << 20];

    /// One way to damage bytes, mostly in place.
    pub(crate) fn damage() -> impl Strategy<Value = Damage> {
        Damages::default()
            .weights(Weights::MOSTLY_IN_PLACE)
            .huge(&HUGE)
            .insert_lengths(1..40)
            .strategy()
    }

    fn file_header() -> impl Strategy<Value = FileHeader> {
        (any::<[u8; 16]>(), any::<u64>(), any::<u64>()).prop_map(|(history, file_size, id)| {
            FileHeader {
                history: Uuid(history),
                file_size,
                page_id: id,
            }
        })
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary and damaged file headers, resealed or not: refused, or decoded to fields
        /// that encode back to the same bytes (the reserved bytes aside).
        #[test]
        fn fuzz_gcache_file_header_decode(
            header in file_header(),
            ring in any::<bool>(),
            arbitrary in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100)),
            damages in proptest::collection::vec(damage(), 0..3),
            seal in any::<bool>(),
        ) {
            let magic = if ring { RING_MAGIC } else { PAGE_MAGIC };
            let mut bytes = arbitrary.unwrap_or_else(|| header.encode(magic).to_vec());
            fuzzing::apply(&mut bytes, &damages);
            if seal && bytes.len() >= FILE_HEADER_LEN as usize {
                let crc = crc32c::crc32c(&bytes[..60]);
                bytes[60..64].copy_from_slice(&crc.to_le_bytes());
            }
            if let Ok(decoded) = FileHeader::decode(&bytes, magic) {
                let again = decoded.encode(magic);
                prop_assert_eq!(&again[..48], &bytes[..48]);
                prop_assert_eq!(FileHeader::decode(&again, magic), Ok(decoded));
            }
        }

        /// Arbitrary and damaged record headers: refused, or parsed to fields that encode
        /// back to the same bytes.
        #[test]
        fn fuzz_gcache_record_header_parse(
            seqno in any::<i64>(),
            kind in any::<u8>(),
            timestamp in any::<u64>(),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            arbitrary in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80)),
            damages in proptest::collection::vec(damage(), 0..3),
        ) {
            let mut bytes = arbitrary.unwrap_or_else(|| {
                let mut out = Vec::new();
                encode_record_header(&mut out, 7, Seqno(seqno), kind, timestamp, &payload);
                out.extend_from_slice(&payload);
                out
            });
            fuzzing::apply(&mut bytes, &damages);
            if let Some(header) = RecordHeader::parse(&bytes) {
                let mut again = Vec::new();
                again.extend_from_slice(&RECORD_MAGIC);
                again.extend_from_slice(&header.payload_len.to_le_bytes());
                again.extend_from_slice(&header.seqno.0.to_le_bytes());
                again.extend_from_slice(&header.timestamp.to_le_bytes());
                again.extend_from_slice(&[header.kind, 0, 0, 0]);
                again.extend_from_slice(&header.crc.to_le_bytes());
                prop_assert_eq!(&again[..], &bytes[..RECORD_HEADER_LEN]);
                prop_assert!(aligned_len(header.payload_len) >= RECORD_HEADER_LEN as u64);
            }
        }
    }
}
