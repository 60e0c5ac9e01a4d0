//! Fuzz targets for the IST stream decoders ([`read_header`], [`RecordReader`]): no byte
//! sequence panics them, no length field makes them allocate ahead of the bytes, and what
//! they accept re-encodes to what was sent. `scripts/fuzz.sh` runs them longer.

use fuzzing::{Damage, Damages, Trickle, Weights};
use proptest::prelude::*;

use super::*;

/// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
const FUZZ_CASES: u32 = 5000;

/// Reads a whole stream as the joiner does: the header, then records until the end frame
/// or the first error. Checks what must hold of anything accepted, and returns the outcome.
fn read_stream(bytes: &[u8], step: usize) -> Result<Result<(), IstError>, TestCaseError> {
    let mut input = Trickle { bytes, step };
    let header = match read_header(&mut input) {
        Ok(header) => header,
        Err(error) => return Ok(Err(error)),
    };
    // An accepted header is what the donor wrote, byte for byte (unless its reason, which
    // is only logged, was not UTF-8 and was repaired).
    if !header.reason.contains(char::REPLACEMENT_CHARACTER) {
        let mut again = Vec::new();
        write_header(&mut again, &header).expect("to memory");
        prop_assert_eq!(&again[..], &bytes[..again.len()]);
    }
    prop_assert!(header.first.0 >= 0 && header.last.0 < i64::MAX);
    prop_assert!(header.first.0 <= header.last.0 + 1);
    let mut reader = RecordReader::new(&header);
    let mut expected = header.first;
    loop {
        match reader.next(&mut input) {
            Ok(Some(action)) => {
                prop_assert_eq!(action.seqno, expected);
                prop_assert!(action.seqno <= header.last);
                expected = action.seqno.next();
                prop_assert_eq!(reader.received_upto(), action.seqno);
            }
            Ok(None) => {
                if header.outcome == Outcome::Ist {
                    prop_assert_eq!(expected.0, header.last.0 + 1);
                }
                return Ok(Ok(()));
            }
            Err(error) => {
                prop_assert_eq!(reader.received_upto(), expected.prev());
                return Ok(Err(error));
            }
        }
    }
}

/// A header with every field as given, the lengths claimed independently of the bytes that
/// follow, and a checksum over the bytes as written.
#[derive(Clone, Debug)]
struct RawHeader {
    outcome: u8,
    first: i64,
    last: i64,
    reason: Vec<u8>,
    reason_claim: Option<u32>,
    index: Vec<u8>,
    index_claim: Option<u64>,
}

impl RawHeader {
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&[9; 16]);
        out.push(self.outcome);
        out.extend_from_slice(&self.first.to_le_bytes());
        out.extend_from_slice(&self.last.to_le_bytes());
        let reason_len = self.reason_claim.unwrap_or(self.reason.len() as u32);
        out.extend_from_slice(&reason_len.to_le_bytes());
        out.extend_from_slice(&self.reason);
        let index_len = self.index_claim.unwrap_or(self.index.len() as u64);
        out.extend_from_slice(&index_len.to_le_bytes());
        out.extend_from_slice(&self.index);
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// A record with its claimed length and its fields as given, checksummed as written.
#[derive(Clone, Debug)]
struct RawRecord {
    claim: Option<u32>,
    seqno: i64,
    kind: u8,
    depends_on: i64,
    payload: Vec<u8>,
}

impl RawRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let len = self.claim.unwrap_or(17 + self.payload.len() as u32);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.seqno.to_le_bytes());
        out.push(self.kind);
        out.extend_from_slice(&self.depends_on.to_le_bytes());
        out.extend_from_slice(&self.payload);
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

fn seqno() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -2i64..40,
        1 => Just(i64::MAX),
        1 => Just(i64::MAX - 1),
        1 => Just(i64::MIN),
        1 => any::<i64>(),
    ]
}

fn claim32() -> impl Strategy<Value = Option<u32>> {
    proptest::option::weighted(
        0.2,
        prop_oneof![
            Just(u32::MAX),
            Just(u32::MAX - 1),
            Just(RECORD_MAX),
            Just(REASON_MAX),
            0u32..40,
            any::<u32>(),
        ],
    )
}

fn raw_header() -> impl Strategy<Value = RawHeader> {
    (
        prop_oneof![4 => Just(1u8), 1 => 0u8..5],
        seqno(),
        seqno(),
        proptest::collection::vec(any::<u8>(), 0..12),
        claim32(),
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::option::weighted(
            0.2,
            prop_oneof![
                Just(u64::MAX),
                Just(INDEX_MAX),
                Just(INDEX_MAX + 1),
                0u64..40
            ],
        ),
    )
        .prop_map(
            |(outcome, first, last, reason, reason_claim, index, index_claim)| RawHeader {
                outcome,
                first,
                last,
                reason,
                reason_claim,
                index,
                index_claim,
            },
        )
}

fn raw_record() -> impl Strategy<Value = RawRecord> {
    (
        claim32(),
        seqno(),
        prop_oneof![4 => 1u8..4, 1 => any::<u8>()],
        any::<i64>(),
        proptest::collection::vec(any::<u8>(), 0..20),
    )
        .prop_map(|(claim, seqno, kind, depends_on, payload)| RawRecord {
            claim,
            seqno,
            kind,
            depends_on,
            payload,
        })
}

/// One way to damage a stream: any but an overwritten byte.
fn damage() -> impl Strategy<Value = Damage> {
    Damages::default()
        .weights(Weights {
            set: 0,
            ..Weights::EVEN
        })
        .insert_lengths(1..20)
        .strategy()
}

fn end_frame(count: u64, out: &mut Vec<u8>) {
    write_end(out, count).expect("to memory");
}

proptest! {
    #![proptest_config(fuzzing::config(FUZZ_CASES))]

    /// Arbitrary bytes, alone or after a valid header: never a panic.
    #[test]
    fn fuzz_ist_stream_arbitrary_bytes(
        first in 0i64..5,
        span in 0i64..5,
        tail in proptest::collection::vec(any::<u8>(), 0..300),
        with_header in any::<bool>(),
        step in 1usize..64,
    ) {
        let mut bytes = Vec::new();
        if with_header {
            let header = Header {
                cluster: Uuid([1; 16]),
                outcome: Outcome::Ist,
                first: Seqno(first),
                last: Seqno(first + span - 1),
                reason: String::new(),
                index: vec![1, 2, 3],
            };
            write_header(&mut bytes, &header).expect("to memory");
        }
        bytes.extend_from_slice(&tail);
        let outcome = read_stream(&bytes, step)?;
        if !with_header {
            prop_assert!(outcome.is_err());
        }
    }

    /// Streams built field by field, each part checksummed as written, with seqnos at and
    /// beyond the extremes, lengths claimed independently of what follows, and then
    /// damaged: never a panic, and nothing accepted out of sequence.
    #[test]
    fn fuzz_ist_stream_crafted_and_mutated(
        header in raw_header(),
        records in proptest::collection::vec(raw_record(), 0..6),
        follow_header in any::<bool>(),
        count in proptest::option::of(0u64..8),
        damages in proptest::collection::vec(damage(), 0..3),
        step in prop_oneof![Just(1usize << 20), 1usize..32],
    ) {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        for (i, record) in records.iter().enumerate() {
            let mut record = record.clone();
            if follow_header {
                // Mostly in sequence, so that the reader gets past the first record.
                record.seqno = header.first.wrapping_add(i as i64);
            }
            record.encode(&mut bytes);
        }
        end_frame(count.unwrap_or(records.len() as u64), &mut bytes);
        fuzzing::apply(&mut bytes, &damages);
        // Its own checks are the assertions; any outcome is fine otherwise.
        let _outcome = read_stream(&bytes, step)?;
    }

    /// Every header that passes its checksum, whatever its seqnos: accepted only with seqnos
    /// a donor can send, and then a full stream of it reads back to the end without
    /// overflowing anything.
    #[test]
    fn fuzz_ist_header_seqnos(
        outcome in 1u8..4,
        first in seqno(),
        last in seqno(),
        near_the_top in any::<bool>(),
    ) {
        let (first, last) = if near_the_top {
            (i64::MAX - 1 - (first & 3), i64::MAX - 1 - (last & 3))
        } else {
            (first, last)
        };
        let mut bytes = Vec::new();
        let raw = RawHeader {
            outcome,
            first,
            last,
            reason: b"why".to_vec(),
            reason_claim: None,
            index: vec![5; 7],
            index_claim: None,
        };
        raw.encode(&mut bytes);
        let mut count = 0u64;
        let ist = outcome == Outcome::Ist as u8;
        if ist && first >= 0 && last < i64::MAX && first <= last.saturating_add(1) {
            for seqno in first..=last.min(first.saturating_add(5)) {
                RawRecord { claim: None, seqno, kind: 2, depends_on: seqno - 1, payload: vec![] }
                    .encode(&mut bytes);
                count += 1;
            }
        }
        end_frame(count, &mut bytes);
        let sane = (-1..i64::MAX).contains(&last)
            && if ist { (0..=last.saturating_add(1)).contains(&first) } else { first == last.saturating_add(1) };
        let outcome = read_stream(&bytes, 1 << 20)?;
        if !sane {
            prop_assert_eq!(outcome, Err(IstError::BadHeader));
        } else if !ist || last - first < 6 {
            prop_assert_eq!(outcome, Ok(()));
        }
    }

    /// A length claimed in a frame allocates only as its bytes arrive: with N bytes
    /// available, the buffer never holds more than READ_AHEAD + 2N, and a claim beyond the
    /// bytes is an error.
    #[test]
    fn fuzz_ist_read_bounded_allocates_as_bytes_arrive(
        (claim, available, step) in
            fuzzing::bounded_reads(&[RECORD_MAX as usize, INDEX_MAX as usize]),
    ) {
        fuzzing::check_bounded_read(READ_AHEAD, claim, available, step, |input, claim, buf| {
            read_bounded(input, claim, buf)
        })?;
    }
}

/// The largest index and record a header may claim, sent with a few bytes behind them:
/// refused as truncated streams, from what arrived.
#[test]
fn maximal_claims_with_a_few_bytes_are_truncated_streams() {
    let mut bytes = Vec::new();
    RawHeader {
        outcome: 1,
        first: 1,
        last: 3,
        reason: Vec::new(),
        reason_claim: None,
        index: vec![0; 20],
        index_claim: Some(INDEX_MAX),
    }
    .encode(&mut bytes);
    assert!(matches!(
        read_header(&mut &bytes[..]),
        Err(IstError::Truncated { .. })
    ));

    let header = Header {
        cluster: Uuid([1; 16]),
        outcome: Outcome::Ist,
        first: Seqno(1),
        last: Seqno(3),
        reason: String::new(),
        index: Vec::new(),
    };
    let mut bytes = Vec::new();
    write_header(&mut bytes, &header).expect("to memory");
    let records_at = bytes.len();
    RawRecord {
        claim: Some(RECORD_MAX),
        seqno: 1,
        kind: 1,
        depends_on: 0,
        payload: vec![7; 20],
    }
    .encode(&mut bytes);
    let mut input = &bytes[records_at..];
    assert!(matches!(
        RecordReader::new(&header).next(&mut input),
        Err(IstError::Truncated { .. })
    ));
}

/// Headers whose seqnos would overflow `last + 1` or `first - 1` later are refused.
#[test]
fn overflowing_seqnos_are_bad_headers() {
    for (outcome, first, last) in [
        (1, 0, i64::MAX),
        (1, i64::MIN, 5),
        (1, -1, 5),
        (1, 0, -2),
        (2, i64::MIN, i64::MAX),
        (2, 0, 5),
        (3, i64::MIN, i64::MAX),
        (3, i64::MAX, i64::MAX),
    ] {
        let mut bytes = Vec::new();
        RawHeader {
            outcome,
            first,
            last,
            reason: Vec::new(),
            reason_claim: None,
            index: Vec::new(),
            index_claim: None,
        }
        .encode(&mut bytes);
        assert_eq!(
            read_header(&mut &bytes[..]),
            Err(IstError::BadHeader),
            "{outcome} {first} {last}"
        );
    }
}
