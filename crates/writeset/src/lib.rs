//! The write-set: what one transaction changed, as replicated to every node.
//!
//! A write-set carries the keys the transaction touched (with their wsrep key type), the
//! opaque row data the host database will apply, the originator's `last_seen` seqno (where
//! its certification interval starts) and the wsrep flags. [`WriteSet::encode`] and
//! [`WriteSet::decode`] define its versioned, checksummed byte format (see ARCHITECTURE.md).

use base::{Seqno, Uuid};
pub use bytes::Bytes;

mod keys;

pub use keys::{Key, KeyIter, KeyRef, Keys, Parts};

/// The wsrep v26 write-set flags, with their ABI bit values.
pub mod flags {
    /// Last fragment: commit the transaction.
    pub const TRX_END: u32 = 1 << 0;
    /// Roll back the transaction (and every earlier fragment).
    pub const ROLLBACK: u32 = 1 << 1;
    /// Total order isolation: apply and commit in isolation (DDL).
    pub const ISOLATION: u32 = 1 << 2;
    /// Must not be applied in parallel with anything earlier.
    pub const PA_UNSAFE: u32 = 1 << 3;
    /// Order does not matter (unused by MariaDB).
    pub const COMMUTATIVE: u32 = 1 << 4;
    /// Payload in provider-native format (unused by MariaDB).
    pub const NATIVE: u32 = 1 << 5;
    /// First fragment of a transaction.
    pub const TRX_START: u32 = 1 << 6;
    /// XA prepare fragment.
    pub const TRX_PREPARE: u32 = 1 << 7;
    /// Read view snapshot (unused by MariaDB).
    pub const SNAPSHOT: u32 = 1 << 8;
    /// Depend on everything the originator had seen.
    pub const IMPLICIT_DEPS: u32 = 1 << 9;
    /// Every flag bit wsrep v26 defines.
    pub const MASK: u32 = 0x3ff;
}

/// Everything one transaction (or one fragment of it) replicates.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WriteSet {
    /// The member that executed the transaction.
    pub source: Uuid,
    /// The client connection on the source.
    pub conn_id: u64,
    /// The transaction id on the source.
    pub trx_id: u64,
    /// The source's last committed seqno when it replicated: the start of the interval this
    /// write-set is certified against.
    pub last_seen: Seqno,
    /// wsrep flags (see [`flags`]).
    pub flags: u32,
    /// The keys the transaction touched.
    pub keys: Keys,
    /// The row data, opaque to the provider. Shared: a decoded write-set's data is a view
    /// of the ordered bytes it came from, so that a large one is not copied again.
    pub data: Bytes,
}

impl WriteSet {
    /// True for a total-order-isolation action (DDL).
    pub fn is_toi(&self) -> bool {
        self.flags & flags::ISOLATION != 0
    }

    /// True if it must not be applied in parallel with anything before it.
    pub fn is_pa_unsafe(&self) -> bool {
        self.flags & flags::PA_UNSAFE != 0
    }

    /// True for a streaming-replication rollback: it ends its transaction everywhere and
    /// carries no keys to certify.
    pub fn is_rollback(&self) -> bool {
        !self.is_toi() && self.flags & flags::ROLLBACK != 0
    }

    /// True for a fragment that leaves its transaction open (streaming replication): the
    /// first or a middle fragment, neither committing nor rolling back.
    pub fn is_open_fragment(&self) -> bool {
        !self.is_toi() && self.flags & (flags::TRX_END | flags::ROLLBACK) == 0
    }

    /// True for a write-set that continues a streaming transaction: it has no `TRX_START`,
    /// so earlier fragments of the same transaction were ordered before it.
    pub fn continues_stream(&self) -> bool {
        !self.is_toi() && self.flags & flags::TRX_START == 0
    }

    /// The header every encoding starts with.
    fn header(&self) -> Header {
        Header {
            source: self.source,
            conn_id: self.conn_id,
            trx_id: self.trx_id,
            last_seen: self.last_seen,
            flags: self.flags,
        }
    }

    /// Size of the encoded form, in bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.keys.section().len() + self.data.len() + TRAILER_LEN
    }

    /// Appends the encoded write-set to `out` (see [`WriteSetView::encode`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let keys = self.keys.section();
        let encoded_len = self.encoded_len();
        self.header()
            .encode(self.keys.len(), encoded_len, &self.data, out, |out| {
                out.extend_from_slice(keys)
            });
    }

    /// The encoded write-set as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes one write-set that fills `bytes` exactly, checking the checksum first. The
    /// data is copied out; [`WriteSet::decode_shared`] keeps it in place.
    pub fn decode(bytes: &[u8]) -> Result<WriteSet, DecodeError> {
        let (mut write_set, sections) = Self::decode_parts(bytes)?;
        let keys = Bytes::copy_from_slice(&bytes[sections.keys]);
        write_set.keys = Keys::checked(keys, sections.key_count);
        write_set.data = Bytes::copy_from_slice(&bytes[sections.data]);
        Ok(write_set)
    }

    /// As [`WriteSet::decode`], with the keys and the data views of `bytes` instead of
    /// copies.
    pub fn decode_shared(bytes: &Bytes) -> Result<WriteSet, DecodeError> {
        let (mut write_set, sections) = Self::decode_parts(bytes)?;
        write_set.keys = Keys::checked(bytes.slice(sections.keys), sections.key_count);
        write_set.data = bytes.slice(sections.data);
        Ok(write_set)
    }

    /// Everything but the keys and the data, and where those lie in `bytes` (checked).
    fn decode_parts(bytes: &[u8]) -> Result<(WriteSet, Sections), DecodeError> {
        if bytes.len() < HEADER_LEN + TRAILER_LEN {
            return Err(DecodeError::Truncated {
                needed: HEADER_LEN + TRAILER_LEN,
                got: bytes.len(),
            });
        }
        if bytes[..4] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if bytes[4] != FORMAT_VERSION {
            return Err(DecodeError::UnknownVersion(bytes[4]));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - TRAILER_LEN);
        let stored = u32::from_le_bytes(trailer.try_into().expect("trailer is 4 bytes"));
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(DecodeError::ChecksumMismatch { stored, computed });
        }
        let mut reader = Reader {
            bytes: body,
            pos: 5,
        };
        let flags = reader.u32()?;
        if flags & !flags::MASK != 0 {
            return Err(DecodeError::UnknownFlags(flags));
        }
        let source = Uuid(reader.take(16)?.try_into().expect("16 bytes"));
        let conn_id = reader.u64()?;
        let trx_id = reader.u64()?;
        let last_seen = Seqno(reader.u64()? as i64);
        let key_count = reader.u32()? as usize;
        let data_len = reader.u32()? as usize;
        // Every key takes at least 3 bytes, so a count beyond that is a lie, not a big key set.
        if key_count > body.len() / 3 {
            return Err(DecodeError::Truncated {
                needed: key_count.saturating_mul(3),
                got: body.len(),
            });
        }
        let keys_start = reader.pos;
        let keys_len = Keys::check(&body[keys_start..], key_count)?;
        reader.take(keys_len)?;
        let data_start = reader.pos;
        reader.take(data_len)?;
        if reader.pos != body.len() {
            return Err(DecodeError::TrailingBytes(body.len() - reader.pos));
        }
        let write_set = WriteSet {
            source,
            conn_id,
            trx_id,
            last_seen,
            flags,
            keys: Keys::default(),
            data: Bytes::new(),
        };
        let sections = Sections {
            key_count,
            keys: keys_start..data_start,
            data: data_start..data_start + data_len,
        };
        Ok((write_set, sections))
    }
}

/// Where a decoded write-set's keys and data lie in its bytes.
struct Sections {
    key_count: usize,
    keys: std::ops::Range<usize>,
    data: std::ops::Range<usize>,
}

/// The fields every encoding starts with.
struct Header {
    source: Uuid,
    conn_id: u64,
    trx_id: u64,
    last_seen: Seqno,
    flags: u32,
}

impl Header {
    /// Appends the write-set of `key_count` keys (written by `keys`) and `data` to `out`, with
    /// its checksum; `encoded_len` is its whole length.
    fn encode(
        &self,
        key_count: usize,
        encoded_len: usize,
        data: &[u8],
        out: &mut Vec<u8>,
        keys: impl FnOnce(&mut Vec<u8>),
    ) {
        let start = out.len();
        out.reserve(encoded_len);
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.source.0);
        out.extend_from_slice(&self.conn_id.to_le_bytes());
        out.extend_from_slice(&self.trx_id.to_le_bytes());
        out.extend_from_slice(&self.last_seen.0.to_le_bytes());
        out.extend_from_slice(&len_u32(key_count).to_le_bytes());
        out.extend_from_slice(&len_u32(data.len()).to_le_bytes());
        keys(out);
        out.extend_from_slice(data);
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len() - start, encoded_len);
    }
}

/// A write-set whose keys and data are borrowed: encodes a transaction's write-set straight
/// from where it was collected, without copying a large one first.
#[derive(Clone, Copy, Debug)]
pub struct WriteSetView<'a> {
    /// See [`WriteSet::source`].
    pub source: Uuid,
    /// See [`WriteSet::conn_id`].
    pub conn_id: u64,
    /// See [`WriteSet::trx_id`].
    pub trx_id: u64,
    /// See [`WriteSet::last_seen`].
    pub last_seen: Seqno,
    /// See [`WriteSet::flags`].
    pub flags: u32,
    /// See [`WriteSet::keys`].
    pub keys: &'a [Key],
    /// See [`WriteSet::data`].
    pub data: &'a [u8],
}

impl WriteSetView<'_> {
    /// Size of the encoded form, in bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + keys::section_len(self.keys) + self.data.len() + TRAILER_LEN
    }

    /// Appends the encoded write-set to `out`.
    ///
    /// Layout (little endian): magic `TRWS` (4), version (1), flags (4), source uuid (16),
    /// conn id (8), trx id (8), last_seen (8), key count (4), data length (4); then the keys
    /// (see the `keys` module); then the data; then a CRC32C (4) of everything before it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header = Header {
            source: self.source,
            conn_id: self.conn_id,
            trx_id: self.trx_id,
            last_seen: self.last_seen,
            flags: self.flags,
        };
        let encoded_len = self.encoded_len();
        header.encode(self.keys.len(), encoded_len, self.data, out, |out| {
            for key in self.keys {
                keys::encode_key(key, out);
            }
        });
    }

    /// The encoded write-set as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

const MAGIC: [u8; 4] = *b"TRWS";
/// The write-set format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
const HEADER_LEN: usize = 4 + 1 + 4 + 16 + 8 + 8 + 8 + 4 + 4;
const TRAILER_LEN: usize = 4;

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("write-set section longer than 4 GiB")
}

pub(crate) fn len_u16(len: usize) -> u16 {
    u16::try_from(len).expect("key part or part count over 65535")
}

/// Why bytes could not be decoded as a write-set.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the format requires.
    #[error("write-set truncated: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the decoder needed at the point it stopped.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// The bytes do not start with the write-set magic.
    #[error("not a write-set: bad magic")]
    BadMagic,
    /// A format version this build does not know.
    #[error("write-set format version {0} is unknown (this build reads version {FORMAT_VERSION})")]
    UnknownVersion(u8),
    /// The CRC32C over the write-set does not match.
    #[error("write-set checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Checksum in the trailer.
        stored: u32,
        /// Checksum of the bytes received.
        computed: u32,
    },
    /// Flag bits outside the wsrep v26 mask.
    #[error("write-set has unknown flag bits {0:#x}")]
    UnknownFlags(u32),
    /// A key type byte outside 0..=3.
    #[error("write-set has unknown key type {0}")]
    UnknownKeyType(u8),
    /// Bytes left after the data section.
    #[error("write-set has {0} unexpected trailing bytes")]
    TrailingBytes(usize),
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or(DecodeError::Truncated {
            needed: self.pos.saturating_add(len),
            got: self.bytes.len(),
        })?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::KeyType;
    use proptest::prelude::*;

    fn sample() -> WriteSet {
        WriteSet {
            source: Uuid([3; 16]),
            conn_id: 9,
            trx_id: 77,
            last_seen: Seqno(41),
            flags: flags::TRX_START | flags::TRX_END,
            keys: Keys::from_keys(&[
                Key::new(&["db", "t1", "pk1"], KeyType::Exclusive),
                Key::new(&["db", "t2"], KeyType::Shared),
            ]),
            data: b"row image".to_vec().into(),
        }
    }

    #[test]
    fn round_trip_and_length() {
        let ws = sample();
        let bytes = ws.to_bytes();
        assert_eq!(bytes.len(), ws.encoded_len());
        assert_eq!(WriteSet::decode(&bytes), Ok(ws));
    }

    #[test]
    fn shared_decoding_keeps_the_data_in_place() {
        let ws = sample();
        let bytes = Bytes::from(ws.to_bytes());
        let shared = WriteSet::decode_shared(&bytes).unwrap();
        assert_eq!(shared, ws);
        let range = bytes.as_ptr_range();
        assert!(
            range.contains(&shared.data.as_ptr()),
            "the data is a view of the ordered bytes, not a copy"
        );
        let mut damaged = bytes.to_vec();
        damaged[10] ^= 1;
        assert!(WriteSet::decode_shared(&Bytes::from(damaged)).is_err());
    }

    #[test]
    fn every_truncation_is_rejected() {
        let bytes = sample().to_bytes();
        for len in 0..bytes.len() {
            assert!(
                WriteSet::decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes accepted"
            );
        }
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let bytes = sample().to_bytes();
        for index in 0..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[index] ^= 0x10;
            assert!(
                WriteSet::decode(&corrupt).is_err(),
                "flip at byte {index} accepted"
            );
        }
    }

    #[test]
    fn unknown_version_is_named() {
        let mut bytes = sample().to_bytes();
        bytes[4] = 9;
        assert_eq!(
            WriteSet::decode(&bytes),
            Err(DecodeError::UnknownVersion(9))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_write_sets_round_trip(
            flags in 0u32..=flags::MASK,
            last_seen in -1i64..1_000_000,
            keys in proptest::collection::vec(
                (proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..4), 0u8..4),
                0..8),
            data in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let ws = WriteSet {
                source: Uuid([1; 16]), conn_id: 1, trx_id: 2, last_seen: Seqno(last_seen), flags,
                keys: keys.into_iter()
                    .map(|(parts, t)| Key { parts, key_type: KeyType::from_u8(t).unwrap() })
                    .collect(),
                data: data.into(),
            };
            prop_assert_eq!(WriteSet::decode(&ws.to_bytes()), Ok(ws));
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = WriteSet::decode(&bytes);
        }
    }
}

/// Fuzz targets: arbitrary bytes and damaged encodings never panic the decoder, never make it
/// allocate in proportion to a length it was not given the bytes for, and whatever decodes
/// is exactly the encoding of what it decodes to. `scripts/fuzz.sh` runs them longer.
#[cfg(test)]
mod fuzz {
    use super::*;
    use base::KeyType;
    use fuzzing::{Damage, Damages};
    use proptest::prelude::*;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 10_000;

    /// Where the key count and the data length sit in the header.
    const LENGTH_FIELDS: [usize; 2] = [49, 53];

    /// Huge values for the format's length fields, besides `u64::MAX` and `u32::MAX`.
    const HUGE: [u64; 2] = [u16::MAX as u64, 1 << 30];

    /// One way to damage an encoding.
    fn damage() -> impl Strategy<Value = Damage> {
        Damages::default()
            .huge(&HUGE)
            .widths(&[2, 4, 8])
            .insert_lengths(1..8)
            .strategy()
    }

    /// Replaces the trailing checksum with the right one, so the parser behind it is reached.
    fn reseal(bytes: &mut [u8]) {
        if bytes.len() >= TRAILER_LEN {
            let body = bytes.len() - TRAILER_LEN;
            let crc = crc32c::crc32c(&bytes[..body]);
            bytes[body..].copy_from_slice(&crc.to_le_bytes());
        }
    }

    fn write_set() -> impl Strategy<Value = WriteSet> {
        let part = proptest::collection::vec(any::<u8>(), 0..12);
        let key = (proptest::collection::vec(part, 0..4), 0u8..4);
        (
            any::<[u8; 16]>(),
            any::<u64>(),
            any::<i64>(),
            0u32..=flags::MASK,
            proptest::collection::vec(key, 0..5),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(source, trx_id, last_seen, flags, keys, data)| WriteSet {
                source: Uuid(source),
                conn_id: trx_id ^ 5,
                trx_id,
                last_seen: Seqno(last_seen),
                flags,
                keys: keys
                    .into_iter()
                    .map(|(parts, t)| Key {
                        parts,
                        key_type: KeyType::from_u8(t).expect("0..4"),
                    })
                    .collect(),
                data: data.into(),
            })
    }

    /// What every outcome must satisfy: an error, or a write-set whose encoding is the input,
    /// decoded the same way in place, and no larger in memory than a small multiple of it.
    fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        let decoded = WriteSet::decode(bytes);
        let shared = WriteSet::decode_shared(&Bytes::copy_from_slice(bytes));
        prop_assert_eq!(&decoded, &shared);
        if let Ok(ws) = decoded {
            prop_assert_eq!(ws.to_bytes(), bytes);
            let parts: usize = ws.keys.iter().map(|k| k.parts.len()).sum();
            // A key costs at least 3 input bytes and a part at least 2.
            prop_assert!(ws.keys.len() * 3 + parts * 2 <= bytes.len());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary bytes, half of them behind a valid magic and version, and half sealed
        /// with a matching checksum so that the structure parser is what gets exercised.
        #[test]
        fn fuzz_writeset_decode_arbitrary_bytes(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..300),
            magic in any::<bool>(),
            seal in any::<bool>(),
        ) {
            if magic {
                bytes.splice(0..0, MAGIC.iter().copied().chain([FORMAT_VERSION]));
            }
            if seal {
                reseal(&mut bytes);
            }
            check(&bytes)?;
        }

        /// Real encodings with bit flips, overwritten bytes, huge length fields, cuts and
        /// insertions, resealed or not.
        #[test]
        fn fuzz_writeset_decode_mutated(
            ws in write_set(),
            damages in proptest::collection::vec(damage(), 1..4),
            length_field in proptest::option::of(
                (proptest::sample::select(&LENGTH_FIELDS[..]), fuzzing::huge(&HUGE)),
            ),
            seal in any::<bool>(),
        ) {
            let mut bytes = ws.to_bytes();
            prop_assert_eq!(WriteSet::decode(&bytes), Ok(ws));
            if let Some((at, value)) = length_field {
                fuzzing::write_le(&mut bytes, at, value, 4);
            }
            fuzzing::apply(&mut bytes, &damages);
            if seal {
                reseal(&mut bytes);
            }
            check(&bytes)?;
        }
    }

    /// A header claiming 4 GiB of data and 2^32 - 1 keys in a 61-byte write-set is refused
    /// from the header alone.
    #[test]
    fn claimed_lengths_beyond_the_input_are_refused() {
        let mut bytes = WriteSet {
            source: Uuid([1; 16]),
            conn_id: 1,
            trx_id: 1,
            last_seen: Seqno(0),
            flags: 0,
            keys: Keys::default(),
            data: Bytes::new(),
        }
        .to_bytes();
        assert_eq!(bytes.len(), HEADER_LEN + TRAILER_LEN);
        for at in LENGTH_FIELDS {
            let mut huge = bytes.clone();
            huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            reseal(&mut huge);
            assert!(matches!(
                WriteSet::decode(&huge),
                Err(DecodeError::Truncated { .. })
            ));
        }
        reseal(&mut bytes);
        assert!(WriteSet::decode(&bytes).is_ok());
    }
}
