//! A large write-set whose chunks are being ordered, written into one buffer as they come.
//!
//! Each chunk is copied to its place in the write-set the moment it is ordered, so the
//! write-set is whole, in one buffer, as soon as its last chunk is ordered. Keeping the chunks
//! apart and joining them then cost one more copy of the whole write-set (160 MB for a DELETE
//! of 800,000 rows) into fresh memory, after the write-set had its seqno: every commit ordered
//! after it waited for that copy.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::CHUNK_BYTES;

/// The most bytes reserved up front for one write-set; a larger one grows as its chunks come
/// (a large buffer grows by remapping, not copying). Keeps a count a peer could lie about from
/// reserving much at once.
const RESERVE_AT_MOST: usize = 256 << 20;

const _: () = assert!(CHUNK_BYTES <= RESERVE_AT_MOST);

/// Why a chunk was not taken into its write-set. Every member holds the same reassembly and
/// sees the same chunk, so every member refuses it alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkRefused {
    /// Its index is not below the write-set's chunk count.
    #[error("chunk {index} of a write-set of {count} chunks")]
    OutOfRange {
        /// The chunk's index.
        index: u32,
        /// The write-set's chunk count.
        count: u32,
    },
    /// A chunk with this index was taken already.
    #[error("chunk {0} arrived twice")]
    Repeated(u32),
    /// Not the length its origin cuts: [`CHUNK_BYTES`] for all but the last, at least one byte
    /// and at most that for the last.
    #[error("chunk {index} is {len} bytes long")]
    BadLength {
        /// The chunk's index.
        index: u32,
        /// Its length.
        len: usize,
    },
}

/// A write-set whose chunks are being ordered: the chunks so far, each at its place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ReassemblyWire", into = "ReassemblyWire")]
pub struct Reassembly {
    count: u32,
    /// Chunk `i` at `i * CHUNK_BYTES`; ends with the furthest chunk taken, and a gap (a chunk
    /// ordered late, after a resend) holds zeros until its chunk comes. So a chunk taken far
    /// ahead makes the buffer that long at once: never more than `count * CHUNK_BYTES`, which
    /// the leader holds to `repl.max_ws_size` when it takes the chunk (`check_submission`),
    /// the bound `MAX_REASSEMBLIES_PER_ORIGIN` is stated in.
    buffer: Vec<u8>,
    received: BTreeSet<u32>,
}

impl Reassembly {
    /// An empty write-set of `count` chunks.
    pub fn new(count: u32) -> Reassembly {
        let expected = (count as usize).saturating_mul(CHUNK_BYTES);
        Reassembly {
            count,
            buffer: Vec::with_capacity(expected.min(RESERVE_AT_MOST)),
            received: BTreeSet::new(),
        }
    }

    /// How many chunks make it whole.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// How many chunks it has.
    pub fn received(&self) -> usize {
        self.received.len()
    }

    /// Whether every chunk is in.
    pub fn is_complete(&self) -> bool {
        self.received.len() == self.count as usize
    }

    /// Copies chunk `index` to its place.
    pub fn take(&mut self, index: u32, chunk: &[u8]) -> Result<(), ChunkRefused> {
        let count = self.count;
        if index >= count {
            return Err(ChunkRefused::OutOfRange { index, count });
        }
        let is_last = index + 1 == count;
        let length_ok = match is_last {
            true => (1..=CHUNK_BYTES).contains(&chunk.len()),
            false => chunk.len() == CHUNK_BYTES,
        };
        if !length_ok {
            let len = chunk.len();
            return Err(ChunkRefused::BadLength { index, len });
        }
        if self.received.contains(&index) {
            return Err(ChunkRefused::Repeated(index));
        }
        let start = index as usize * CHUNK_BYTES;
        let end = start + chunk.len();
        if start >= self.buffer.len() {
            // The usual case, chunks in order: appended where the buffer ends.
            self.buffer.resize(start, 0);
            self.buffer.extend_from_slice(chunk);
        } else {
            // A gap left by a chunk ordered late: only the last chunk is shorter, and it is
            // never before a gap, so this one fits the gap exactly.
            debug_assert!(end <= self.buffer.len());
            self.buffer[start..end].copy_from_slice(chunk);
        }
        self.received.insert(index);
        Ok(())
    }

    /// The whole write-set.
    ///
    /// # Panics
    /// If a chunk is missing.
    pub fn into_write_set(self) -> Vec<u8> {
        assert!(
            self.is_complete(),
            "a write-set taken out before its last chunk"
        );
        debug_assert!(self.buffer.len() > (self.count as usize - 1) * CHUNK_BYTES);
        self.buffer
    }

    /// The chunks taken so far, by index.
    fn chunks(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.received.iter().map(|&index| {
            let start = index as usize * CHUNK_BYTES;
            let end = (start + CHUNK_BYTES).min(self.buffer.len());
            (index, &self.buffer[start..end])
        })
    }
}

/// How a reassembly travels in a group-state snapshot: its chunks by index.
#[derive(Clone, Serialize, Deserialize)]
struct ReassemblyWire {
    count: u32,
    parts: BTreeMap<u32, serde_bytes::ByteBuf>,
}

impl From<Reassembly> for ReassemblyWire {
    fn from(reassembly: Reassembly) -> Self {
        let parts = reassembly
            .chunks()
            .map(|(index, chunk)| (index, serde_bytes::ByteBuf::from(chunk.to_vec())))
            .collect();
        ReassemblyWire {
            count: reassembly.count,
            parts,
        }
    }
}

impl TryFrom<ReassemblyWire> for Reassembly {
    type Error = ChunkRefused;

    fn try_from(wire: ReassemblyWire) -> Result<Self, Self::Error> {
        let mut reassembly = Reassembly::new(wire.count);
        for (index, chunk) in &wire.parts {
            reassembly.take(*index, chunk)?;
        }
        Ok(reassembly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(byte: u8, len: usize) -> Vec<u8> {
        vec![byte; len]
    }

    #[test]
    fn chunks_in_any_order_make_the_write_set_they_were_cut_from() {
        let write_set: Vec<u8> = (0..2 * CHUNK_BYTES + 10).map(|i| (i % 251) as u8).collect();
        let cut: Vec<&[u8]> = write_set.chunks(CHUNK_BYTES).collect();
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]] {
            let mut reassembly = Reassembly::new(3);
            for (taken, index) in order.into_iter().enumerate() {
                assert!(!reassembly.is_complete());
                reassembly.take(index, cut[index as usize]).unwrap();
                assert_eq!(reassembly.received(), taken + 1);
            }
            assert!(reassembly.is_complete());
            assert_eq!(reassembly.into_write_set(), write_set, "order {order:?}");
        }
    }

    #[test]
    fn a_chunk_its_origin_could_not_have_cut_is_refused() {
        let mut reassembly = Reassembly::new(2);
        let refusals = [
            (
                2,
                chunk(1, 1),
                ChunkRefused::OutOfRange { index: 2, count: 2 },
            ),
            (0, chunk(1, 5), ChunkRefused::BadLength { index: 0, len: 5 }),
            (1, chunk(1, 0), ChunkRefused::BadLength { index: 1, len: 0 }),
            (
                1,
                chunk(1, CHUNK_BYTES + 1),
                ChunkRefused::BadLength {
                    index: 1,
                    len: CHUNK_BYTES + 1,
                },
            ),
        ];
        for (index, bytes, refusal) in refusals {
            assert_eq!(reassembly.take(index, &bytes), Err(refusal));
        }
        assert_eq!(reassembly.received(), 0);
        reassembly.take(1, &chunk(2, 7)).unwrap();
        assert_eq!(
            reassembly.take(1, &chunk(3, 7)),
            Err(ChunkRefused::Repeated(1))
        );
        reassembly.take(0, &chunk(4, CHUNK_BYTES)).unwrap();
        let write_set = reassembly.into_write_set();
        assert_eq!(write_set.len(), CHUNK_BYTES + 7);
        assert!(write_set[..CHUNK_BYTES].iter().all(|b| *b == 4));
        assert!(write_set[CHUNK_BYTES..].iter().all(|b| *b == 2));
    }

    #[test]
    fn a_reassembly_travels_as_its_chunks_and_a_bad_one_is_refused() {
        let mut reassembly = Reassembly::new(4);
        reassembly.take(2, &chunk(9, CHUNK_BYTES)).unwrap();
        reassembly.take(0, &chunk(8, CHUNK_BYTES)).unwrap();
        let bytes = crate::wire::bincode_encode(&reassembly);
        let back: Reassembly = crate::wire::bincode_decode(&bytes).unwrap();
        assert_eq!(back, reassembly);
        let wire = ReassemblyWire {
            count: 4,
            parts: BTreeMap::from([(1, serde_bytes::ByteBuf::from(chunk(1, 3)))]),
        };
        let bytes = crate::wire::bincode_encode(&wire);
        assert!(crate::wire::bincode_decode::<Reassembly>(&bytes).is_err());
    }
}
