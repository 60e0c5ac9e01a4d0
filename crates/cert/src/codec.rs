//! The binary form of a [`Certifier`], which a donor sends to a joiner so that the joiner
//! continues certification exactly where the donor's index stood.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use base::{Seqno, Uuid};

use crate::{
    CertConfig, Certifier, Index, OpenStream, PathHash, PathHashHasher, Record, Slots, StreamId,
    EMPTY_SLOT,
};

const MAGIC: [u8; 4] = *b"TRCI";
/// Version 2 added the open streaming transactions, so that a joiner certifies their next
/// fragments exactly as every other member does.
const FORMAT_VERSION: u8 = 2;
/// Magic, version, max_interval, position, purged_to, last_barrier.
const HEADER_LEN: usize = 4 + 1 + 4 * 8;
/// A count field.
const COUNT_LEN: usize = 8;
/// Source, TOI flag, path count.
const RECORD_LEN: usize = 16 + 1 + 8;
const PATH_LEN: usize = 16;
/// Path and slot mask; then 8 bytes per slot held.
const ENTRY_HEAD_LEN: usize = 16 + 1;
/// An index entry holds at least one slot.
const MIN_ENTRY_LEN: usize = ENTRY_HEAD_LEN + 8;
/// Source, transaction id, last fragment, fragments.
const STREAM_LEN: usize = 16 + 8 + 8 + 8;
const CRC_LEN: usize = 4;
/// One mask bit per key type.
const SLOT_MASK: u8 = 0b1111;

/// Why [`Certifier::decode`] refused its input.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum IndexDecodeError {
    /// The input ends before the index does, or a count promises more than the input holds.
    #[error("certification index truncated")]
    Truncated,
    /// The input does not start with `TRCI`: it is not a certification index.
    #[error("not a certification index (bad magic)")]
    BadMagic,
    /// A format version this build does not read.
    #[error("unknown certification index format version {0}")]
    UnknownVersion(u8),
    /// The CRC32C trailer does not match the contents.
    #[error(
        "certification index checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
    )]
    ChecksumMismatch {
        /// The checksum the input carries.
        stored: u32,
        /// The checksum of what was received.
        computed: u32,
    },
    /// Well formed, but describes a state no certifier can be in.
    #[error("inconsistent certification index: {0}")]
    Inconsistent(String),
}

fn inconsistent(what: String) -> IndexDecodeError {
    IndexDecodeError::Inconsistent(what)
}

impl Certifier {
    /// The whole state of the index, for [`Certifier::decode`] on another node.
    ///
    /// The same state always encodes to the same bytes (index entries are sorted by path).
    /// Layout, all integers little endian, seqnos as `i64`:
    ///
    /// ```text
    /// offset  size  field
    ///      0     4  magic "TRCI"
    ///      4     1  format version (1)
    ///      5     8  max_interval (u64)
    ///     13     8  position
    ///     21     8  purged_to
    ///     29     8  last_barrier (-1: none)
    ///     37     8  H: history record count (u64), always position - purged_to
    ///           25  × H records, for seqnos purged_to+1 ..= position in order:
    ///                 source uuid (16), TOI (u8: 0 or 1), paths written (u64)
    ///            8  W: written path count (u64), always the sum of the records' paths
    ///           16  × W path hashes (u128), in the order the records wrote them
    ///            8  N: index entry count (u64)
    ///               N entries, by ascending path hash:
    ///                 path hash (u128, 16), slot mask (u8; bit k = key type k is held, never 0),
    ///                 then one seqno (8) per set bit, lowest key type first
    ///            8  S: open streaming transaction count (u64)
    ///           40  × S streams, by ascending (source, transaction id):
    ///                 source uuid (16), transaction id (u64), last fragment (seqno),
    ///                 fragments certified (u64, at least 1)
    ///            4  CRC32C (u32) of every byte before it
    /// ```
    ///
    /// The per-call scratch buffers are not part of the state and are not encoded.
    pub fn encode(&self) -> Vec<u8> {
        let mut entries: Vec<(&PathHash, &Slots)> = self.index.iter().collect();
        entries.sort_unstable_by_key(|(path, _)| **path);
        let slots_held: usize = entries.iter().map(|(_, slots)| slots.held()).sum();
        let len = HEADER_LEN
            + COUNT_LEN
            + RECORD_LEN * self.history.len()
            + COUNT_LEN
            + PATH_LEN * self.written.len()
            + COUNT_LEN
            + ENTRY_HEAD_LEN * entries.len()
            + 8 * slots_held
            + COUNT_LEN
            + STREAM_LEN * self.streams.len()
            + CRC_LEN;

        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.cfg.max_interval.to_le_bytes());
        out.extend_from_slice(&self.position.0.to_le_bytes());
        out.extend_from_slice(&self.purged_to.0.to_le_bytes());
        out.extend_from_slice(&self.last_barrier.0.to_le_bytes());

        out.extend_from_slice(&count(self.history.len()).to_le_bytes());
        for record in &self.history {
            out.extend_from_slice(&record.source.0);
            out.push(u8::from(record.toi));
            out.extend_from_slice(&count(record.paths).to_le_bytes());
        }

        out.extend_from_slice(&count(self.written.len()).to_le_bytes());
        for path in &self.written {
            out.extend_from_slice(&path.to_le_bytes());
        }

        out.extend_from_slice(&count(entries.len()).to_le_bytes());
        for (path, slots) in entries {
            out.extend_from_slice(&path.to_le_bytes());
            let mask = slots
                .0
                .iter()
                .enumerate()
                .filter(|(_, seqno)| **seqno != EMPTY_SLOT)
                .fold(0u8, |mask, (key_type, _)| mask | 1 << key_type);
            out.push(mask);
            for seqno in slots.0.iter().filter(|seqno| **seqno != EMPTY_SLOT) {
                out.extend_from_slice(&seqno.to_le_bytes());
            }
        }

        let mut streams: Vec<(&StreamId, &OpenStream)> = self.streams.iter().collect();
        streams.sort_unstable_by_key(|((source, trx), _)| (source.0, *trx));
        out.extend_from_slice(&count(streams.len()).to_le_bytes());
        for ((source, trx), open) in streams {
            out.extend_from_slice(&source.0);
            out.extend_from_slice(&trx.to_le_bytes());
            out.extend_from_slice(&open.last_fragment.0.to_le_bytes());
            out.extend_from_slice(&open.fragments.to_le_bytes());
        }

        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Rebuilds a certifier from [`Certifier::encode`]'s output. The result certifies,
    /// skips and purges exactly as the encoded one would have.
    ///
    /// The magic is checked first, then the checksum, then the version; only then is anything
    /// parsed. Every count is checked against the bytes left before anything is allocated for
    /// it, so no input makes this panic or allocate much beyond its own size. The decoded
    /// state is checked for consistency (the history window, the path bookkeeping, index
    /// entries held by seqnos that wrote their paths) so that later calls on the result can
    /// rely on the same invariants as on a certifier that got there by certifying.
    pub fn decode(bytes: &[u8]) -> Result<Certifier, IndexDecodeError> {
        let mut input = checked_body(bytes)?;
        let cfg = CertConfig {
            max_interval: input.u64()?,
        };
        let position = Seqno(input.i64()?);
        let purged_to = Seqno(input.i64()?);
        let last_barrier = Seqno(input.i64()?);
        if purged_to > position {
            return Err(inconsistent(format!(
                "purged to {purged_to}, beyond the position {position}"
            )));
        }
        if last_barrier > position && last_barrier != Seqno::UNDEFINED {
            return Err(inconsistent(format!(
                "last barrier {last_barrier} is beyond the position {position}"
            )));
        }
        let (history, paths_recorded) = decode_history(&mut input, purged_to, position)?;
        let written = decode_written(&mut input, paths_recorded)?;
        let owned = paths_owned(&history, &written, purged_to);
        let index = decode_entries(&mut input, purged_to, position, &owned)?;
        let streams = decode_streams(&mut input, position)?;
        if !input.rest.is_empty() {
            return Err(inconsistent(format!(
                "{} bytes after the open streams",
                input.rest.len()
            )));
        }
        check_owned_paths_indexed(&index, &owned)?;
        Ok(Certifier {
            cfg,
            position,
            purged_to,
            last_barrier,
            index,
            history,
            written,
            scratch: Vec::new(),
            states: Vec::new(),
            streams,
        })
    }
}

/// The body after the magic and the version, once its checksum holds.
fn checked_body(bytes: &[u8]) -> Result<Reader<'_>, IndexDecodeError> {
    if bytes.len() < MAGIC.len() + 1 + CRC_LEN {
        return Err(IndexDecodeError::Truncated);
    }
    if bytes[..MAGIC.len()] != MAGIC {
        return Err(IndexDecodeError::BadMagic);
    }
    let (body, trailer) = bytes.split_at(bytes.len() - CRC_LEN);
    let mut stored = [0u8; CRC_LEN];
    stored.copy_from_slice(trailer);
    let stored = u32::from_le_bytes(stored);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(IndexDecodeError::ChecksumMismatch { stored, computed });
    }
    let mut input = Reader {
        rest: &body[MAGIC.len()..],
    };
    let version = input.u8()?;
    if version != FORMAT_VERSION {
        return Err(IndexDecodeError::UnknownVersion(version));
    }
    Ok(input)
}

/// One record per seqno after `purged_to` up to `position`; returns them and the number
/// of paths they say they wrote.
fn decode_history(
    input: &mut Reader<'_>,
    purged_to: Seqno,
    position: Seqno,
) -> Result<(VecDeque<Record>, u64), IndexDecodeError> {
    let window = i128::from(position.0) - i128::from(purged_to.0);
    let history_len = input.u64()?;
    if i128::from(history_len) != window {
        return Err(inconsistent(format!(
            "{history_len} history records for the {window} seqnos after {purged_to} \
             up to {position}"
        )));
    }
    let history_len = input.count(history_len, RECORD_LEN)?;
    let mut history = VecDeque::with_capacity(history_len);
    let mut paths_recorded: u64 = 0;
    for offset in 0..history_len {
        let source = Uuid(input.array()?);
        let toi = match input.u8()? {
            0 => false,
            1 => true,
            other => {
                return Err(inconsistent(format!(
                    "TOI flag {other} in the record of seqno {}",
                    seqno_at(purged_to, offset)
                )))
            }
        };
        let paths = input.u64()?;
        paths_recorded = paths_recorded.checked_add(paths).ok_or_else(|| {
            inconsistent("the history records more paths than fit in a u64".to_owned())
        })?;
        // Not above the sum, which must match the written count: bounded by the input.
        let paths = usize::try_from(paths).map_err(|_| {
            inconsistent(format!(
                "seqno {} wrote {paths} paths",
                seqno_at(purged_to, offset)
            ))
        })?;
        history.push_back(Record { source, toi, paths });
    }
    Ok((history, paths_recorded))
}

/// The paths the history wrote, as many as its records say.
fn decode_written(
    input: &mut Reader<'_>,
    paths_recorded: u64,
) -> Result<VecDeque<PathHash>, IndexDecodeError> {
    let written_len = input.u64()?;
    if written_len != paths_recorded {
        return Err(inconsistent(format!(
            "{written_len} written paths, but the history records {paths_recorded}"
        )));
    }
    let written_len = input.count(written_len, PATH_LEN)?;
    let mut written = VecDeque::with_capacity(written_len);
    for _ in 0..written_len {
        written.push_back(input.u128()?);
    }
    Ok(written)
}

/// Which (path, seqno) pairs the history wrote, sorted for lookup: what an index slot may
/// hold.
fn paths_owned(
    history: &VecDeque<Record>,
    written: &VecDeque<PathHash>,
    purged_to: Seqno,
) -> Vec<(PathHash, i64)> {
    let mut owned: Vec<(PathHash, i64)> = Vec::with_capacity(written.len());
    let mut paths = written.iter();
    for (offset, record) in history.iter().enumerate() {
        let seqno = seqno_at(purged_to, offset).0;
        owned.extend(paths.by_ref().take(record.paths).map(|path| (*path, seqno)));
    }
    owned.sort_unstable();
    owned
}

/// A path a live seqno wrote stays indexed at that seqno or a later one until that seqno
/// is purged.
fn check_owned_paths_indexed(
    index: &Index,
    owned: &[(PathHash, i64)],
) -> Result<(), IndexDecodeError> {
    for (path, seqno) in owned {
        let newest = index.get(path).map_or(EMPTY_SLOT, Slots::newest);
        if newest < *seqno {
            return Err(inconsistent(format!(
                "index path {path:#034x} written by seqno {seqno} is missing from the index"
            )));
        }
    }
    Ok(())
}

/// The index entries: in ascending path order, each held by seqnos of the history window
/// that wrote its path.
fn decode_entries(
    input: &mut Reader<'_>,
    purged_to: Seqno,
    position: Seqno,
    owned: &[(PathHash, i64)],
) -> Result<Index, IndexDecodeError> {
    let entries = input.u64()?;
    let entries = input.count(entries, MIN_ENTRY_LEN)?;
    let mut index = Index::default();
    index.reserve(entries);
    let mut previous: Option<PathHash> = None;
    for _ in 0..entries {
        let path = input.u128()?;
        if previous.is_some_and(|previous| previous >= path) {
            return Err(inconsistent(format!(
                "index path {path:#034x} is out of order or repeated"
            )));
        }
        previous = Some(path);
        let mask = input.u8()?;
        if mask == 0 || mask & !SLOT_MASK != 0 {
            return Err(inconsistent(format!(
                "slot mask {mask:#04x} for index path {path:#034x}"
            )));
        }
        let mut slots = Slots::EMPTY;
        for (key_type, slot) in slots.0.iter_mut().enumerate() {
            if mask & (1 << key_type) == 0 {
                continue;
            }
            let seqno = input.i64()?;
            if seqno <= purged_to.0 || seqno > position.0 {
                return Err(inconsistent(format!(
                    "index path {path:#034x} is held by seqno {seqno}, outside the \
                     history window after {purged_to} up to {position}"
                )));
            }
            if owned.binary_search(&(path, seqno)).is_err() {
                return Err(inconsistent(format!(
                    "index path {path:#034x} is held by seqno {seqno}, which did not \
                     write it"
                )));
            }
            *slot = seqno;
        }
        index.insert(path, slots);
    }
    Ok(index)
}

/// The open streaming transactions of an index at `position`: in ascending order, each
/// with a certified last fragment at or before the position.
fn decode_streams(
    input: &mut Reader<'_>,
    position: Seqno,
) -> Result<HashMap<StreamId, OpenStream, BuildHasherDefault<PathHashHasher>>, IndexDecodeError> {
    let count = input.u64()?;
    let count = input.count(count, STREAM_LEN)?;
    let mut streams = HashMap::default();
    let mut previous: Option<([u8; 16], u64)> = None;
    for _ in 0..count {
        let source = input.array::<16>()?;
        let trx = input.u64()?;
        let last_fragment = Seqno(input.i64()?);
        let fragments = input.u64()?;
        if previous.is_some_and(|previous| previous >= (source, trx)) {
            return Err(inconsistent(format!(
                "open stream {trx} of {} is out of order or repeated",
                Uuid(source)
            )));
        }
        previous = Some((source, trx));
        if !last_fragment.is_defined() || last_fragment > position || fragments == 0 {
            return Err(inconsistent(format!(
                "open stream {trx} of {} has {fragments} fragments, the last at \
                 {last_fragment}, in an index at {position}",
                Uuid(source)
            )));
        }
        let open = OpenStream {
            last_fragment,
            fragments,
        };
        streams.insert((Uuid(source), trx), open);
    }
    Ok(streams)
}

impl Slots {
    /// How many key types hold this path.
    fn held(&self) -> usize {
        self.0.iter().filter(|seqno| **seqno != EMPTY_SLOT).count()
    }

    /// The latest seqno holding this path with any type.
    fn newest(&self) -> i64 {
        self.0.iter().copied().max().unwrap_or(EMPTY_SLOT)
    }
}

/// The seqno of the history record at `offset`. The history is never longer than the input,
/// so this cannot overflow for a window that was checked against its record count.
fn seqno_at(purged_to: Seqno, offset: usize) -> Seqno {
    Seqno(purged_to.0 + 1 + offset as i64)
}

fn count(len: usize) -> u64 {
    // usize is at most 64 bits on every supported target.
    len as u64
}

/// Reads the body front to back.
struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], IndexDecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(IndexDecodeError::Truncated)?;
        self.rest = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, IndexDecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u64(&mut self) -> Result<u64, IndexDecodeError> {
        self.array().map(u64::from_le_bytes)
    }

    fn i64(&mut self) -> Result<i64, IndexDecodeError> {
        self.array().map(i64::from_le_bytes)
    }

    fn u128(&mut self) -> Result<u128, IndexDecodeError> {
        self.array().map(u128::from_le_bytes)
    }

    /// `count` items of at least `item_len` bytes each, if the rest of the input can hold
    /// them: checked before anything is allocated for them.
    fn count(&self, count: u64, item_len: usize) -> Result<usize, IndexDecodeError> {
        match usize::try_from(count) {
            Ok(count) if count <= self.rest.len() / item_len => Ok(count),
            _ => Err(IndexDecodeError::Truncated),
        }
    }
}

/// Fuzz targets for [`Certifier::decode`]: arbitrary bytes and damaged real indexes never
/// panic it, what it accepts is the canonical encoding of what it returns (so it is no larger
/// than the input allows), and a joiner can go on from an accepted index. `scripts/fuzz.sh`
/// runs them longer.
#[cfg(test)]
mod fuzz {
    use super::*;
    use base::KeyType;
    use fuzzing::{Damage, Damages};
    use proptest::prelude::*;
    use writeset::{flags, Key, WriteSet};

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5000;

    /// One step of building a real index.
    #[derive(Clone, Debug)]
    enum Op {
        Certify {
            source: u8,
            back: i64,
            flags: u32,
            keys: Vec<(Vec<u8>, u8)>,
        },
        Skip,
        Purge(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let key = (proptest::collection::vec(0u8..3, 1..3), 0u8..4);
        let ws_flags = prop_oneof![
            Just(flags::TRX_START | flags::TRX_END),
            Just(flags::ISOLATION),
            Just(flags::TRX_START | flags::TRX_END | flags::PA_UNSAFE),
            Just(flags::TRX_START),
        ];
        prop_oneof![
            6 => (0u8..3, 0i64..6, ws_flags, proptest::collection::vec(key, 0..4))
                .prop_map(|(source, back, flags, keys)| Op::Certify { source, back, flags, keys }),
            1 => Just(Op::Skip),
            1 => (0i64..6).prop_map(Op::Purge),
        ]
    }

    fn build(start: i64, ops: &[Op]) -> Certifier {
        let mut cert = Certifier::starting_at(CertConfig { max_interval: 8 }, Seqno(start));
        for op in ops {
            let seqno = cert.position().next();
            match op {
                Op::Certify {
                    source,
                    back,
                    flags,
                    keys,
                } => {
                    let ws = WriteSet {
                        source: Uuid([*source; 16]),
                        conn_id: 1,
                        trx_id: u64::from(*source),
                        last_seen: Seqno(seqno.0 - 1 - back),
                        flags: *flags,
                        keys: keys
                            .iter()
                            .map(|(parts, t)| Key {
                                parts: parts.iter().map(|p| vec![*p]).collect(),
                                key_type: KeyType::from_u8(*t).expect("0..4"),
                            })
                            .collect(),
                        data: Default::default(),
                    };
                    cert.certify(seqno, &ws);
                }
                Op::Skip => cert.skip(seqno),
                Op::Purge(back) => cert.purge_to(Seqno(cert.position().0 - back)),
            }
        }
        cert
    }

    /// Huge values for the counts, besides `u64::MAX` and `u32::MAX`.
    const HUGE: [u64; 3] = [i64::MAX as u64, i64::MIN as u64, 1 << 40];

    /// The magic and version, which damage spares: the body behind them is what gets damaged.
    const SPARED: usize = MAGIC.len() + 1;

    /// One way to damage an encoding; a wide value is a count.
    fn damage() -> impl Strategy<Value = Damage> {
        Damages::default()
            .huge(&HUGE)
            .widths(&[COUNT_LEN])
            .insert_lengths(1..26)
            .strategy()
    }

    fn sealed(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    /// The offsets of the four counts in an encoding of `cert`.
    fn count_fields(cert: &Certifier, encoded_len: usize) -> [usize; 4] {
        let history = HEADER_LEN;
        let written = history + COUNT_LEN + RECORD_LEN * cert.history.len();
        let entries = written + COUNT_LEN + PATH_LEN * cert.written.len();
        let streams = encoded_len - CRC_LEN - STREAM_LEN * cert.streams.len() - COUNT_LEN;
        [history, written, entries, streams]
    }

    /// What every outcome must satisfy: an error, or an index whose encoding is the input
    /// (so nothing in it is larger than the input paid for) and that a joiner can continue.
    fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        let Ok(mut cert) = Certifier::decode(bytes) else {
            return Ok(());
        };
        prop_assert_eq!(cert.encode(), bytes);
        prop_assert!(cert.history.len() * RECORD_LEN <= bytes.len());
        prop_assert!(cert.written.len() * PATH_LEN <= bytes.len());
        prop_assert!(cert.index.len() * MIN_ENTRY_LEN <= bytes.len());
        prop_assert!(cert.streams.len() * STREAM_LEN <= bytes.len());
        // What a joiner does next: purge to the position and take the next seqno.
        if cert.position().0 < i64::MAX {
            cert.purge_to(cert.position());
            prop_assert_eq!(cert.index_len(), 0);
            cert.skip(cert.position().next());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary bytes, most of them behind the magic and version and under a matching
        /// checksum, so that the structure parser is what gets exercised.
        #[test]
        fn fuzz_cert_index_decode_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            magic in any::<bool>(),
            seal in any::<bool>(),
        ) {
            let mut bytes = bytes;
            if magic {
                bytes.splice(0..0, MAGIC.iter().copied().chain([FORMAT_VERSION]));
            }
            if seal {
                bytes = sealed(bytes);
            }
            check(&bytes)?;
        }

        /// Real indexes with flipped and overwritten bytes, huge counts, cuts and insertions,
        /// under a matching checksum (or not).
        #[test]
        fn fuzz_cert_index_decode_mutated(
            start in prop_oneof![Just(0i64), Just(-1), Just(i64::MAX - 200), any::<i64>()],
            ops in proptest::collection::vec(op(), 0..40),
            count in proptest::option::of((0usize..4, fuzzing::huge(&HUGE))),
            damages in proptest::collection::vec(damage(), 0..3),
            seal in prop_oneof![4 => Just(true), 1 => Just(false)],
        ) {
            // Seqnos below -1 never reach a certifier; the ops need 100 seqnos of room.
            let start = start.clamp(-1, i64::MAX - 100);
            let cert = build(start, &ops);
            let mut bytes = cert.encode();
            let fields = count_fields(&cert, bytes.len());
            prop_assert_eq!(Certifier::decode(&bytes).map(|c| c.encode()), Ok(bytes.clone()));
            let mut body = bytes.split_off(bytes.len() - CRC_LEN);
            std::mem::swap(&mut body, &mut bytes);
            if let Some((field, value)) = count {
                let at = fields[field];
                fuzzing::write_le(&mut body, at, value, COUNT_LEN);
            }
            for damage in &damages {
                damage.apply_from(SPARED, &mut body);
            }
            let bytes = if seal { sealed(body) } else { [body, bytes].concat() };
            check(&bytes)?;
        }
    }
}
