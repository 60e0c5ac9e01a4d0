//! The index's encoding: its documented layout, exact round trips, and every damage
//! refused.

use super::*;

/// An index holding every kind of record and entry, partly purged: seqnos 5 to 10 are live,
/// among them a view (6), a TOI (7), a failed write-set (8) and a PA_UNSAFE barrier (9).
fn sample_index() -> Certifier {
    let mut cert = Certifier::starting_at(CertConfig { max_interval: 100 }, Seqno(3));
    assert_eq!(cert.certify(Seqno(4), &ws(1, 3, 0, &[(ROW, EX)])), pass(3));
    assert_eq!(
        cert.certify(Seqno(5), &ws(2, 4, 0, &[(ROW, SH), (ROW2, UP)])),
        pass(4)
    );
    cert.skip(Seqno(6));
    assert_eq!(
        cert.certify(Seqno(7), &ws(3, 6, flags::ISOLATION, &[(TABLE, EX)])),
        pass(6)
    );
    assert_eq!(
        cert.certify(Seqno(8), &ws(2, 4, 0, &[(ROW2, EX)])),
        key_conflict(7, EX, SH)
    );
    assert_eq!(
        cert.certify(
            Seqno(9),
            &ws(1, 8, flags::PA_UNSAFE, &[(OTHER_TABLE_ROW, RE)])
        ),
        pass(8)
    );
    assert_eq!(cert.certify(Seqno(10), &ws(3, 9, 0, &[(ROW, UP)])), pass(9));
    cert.purge_to(Seqno(4));
    cert
}

/// Where the first history record starts.
const RECORDS_AT: usize = 45;

/// Where the index entry count of `cert`'s encoding starts.
fn index_count_at(cert: &Certifier) -> usize {
    RECORDS_AT + 25 * cert.history.len() + 8 + 16 * cert.written.len()
}

/// `parts` followed by their CRC32C.
fn sealed(parts: &[&[u8]]) -> Vec<u8> {
    let mut bytes = parts.concat();
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Replaces the checksum of an edited encoding.
fn reseal(bytes: &mut Vec<u8>) {
    bytes.truncate(bytes.len() - 4);
    *bytes = sealed(&[bytes]);
}

fn expect_inconsistent(bytes: &[u8], what: &str) {
    match Certifier::decode(bytes) {
        Err(IndexDecodeError::Inconsistent(message)) => {
            assert!(message.contains(what), "expected {what:?}, got {message:?}")
        }
        other => panic!("expected an inconsistency ({what}), got {other:?}"),
    }
}

/// The index entries, comparable.
fn entries(cert: &Certifier) -> Vec<(PathHash, [i64; 4])> {
    let mut entries: Vec<_> = cert.index.iter().map(|(p, s)| (*p, s.0)).collect();
    entries.sort_unstable();
    entries
}

#[test]
fn an_empty_index_encodes_to_the_documented_layout() {
    let cert = Certifier::starting_at(CertConfig { max_interval: 7 }, Seqno(5));
    let bytes = cert.encode();
    let body = [
        b"TRCI".as_slice(),
        &[2],
        &7u64.to_le_bytes(),
        &5i64.to_le_bytes(),
        &5i64.to_le_bytes(),
        &(-1i64).to_le_bytes(),
        &0u64.to_le_bytes(),
        &0u64.to_le_bytes(),
        &0u64.to_le_bytes(),
        &0u64.to_le_bytes(),
    ]
    .concat();
    assert_eq!(bytes, sealed(&[&body]));
    assert_eq!(bytes.len(), 73);
    let copy = Certifier::decode(&bytes).expect("an empty index decodes");
    assert_eq!(copy.config(), cert.config());
    assert_eq!(copy.position(), Seqno(5));
    assert_eq!(copy.purged_to(), Seqno(5));
    assert_eq!(copy.last_barrier, Seqno::UNDEFINED);
    assert_eq!(copy.index_len(), 0);
}

#[test]
fn the_sample_index_round_trips_exactly() {
    let cert = sample_index();
    // The sample exercises every part of the format.
    assert!(cert.history.iter().any(|r| r.toi));
    assert!(cert.history.iter().any(|r| r.paths == 0));
    assert!(cert
        .index
        .values()
        .any(|s| s.0.iter().filter(|seqno| **seqno != EMPTY_SLOT).count() > 1));
    assert!(cert.last_barrier > cert.purged_to);
    assert_eq!(cert.purged_to(), Seqno(4));

    let bytes = cert.encode();
    let slots: usize = cert
        .index
        .values()
        .map(|s| s.0.iter().filter(|seqno| **seqno != EMPTY_SLOT).count())
        .sum();
    assert_eq!(
        bytes.len(),
        index_count_at(&cert) + 8 + 17 * cert.index_len() + 8 * slots + 8 + 4
    );
    let copy = Certifier::decode(&bytes).expect("the sample decodes");
    assert_eq!(copy.config(), cert.config());
    assert_eq!(copy.position(), cert.position());
    assert_eq!(copy.purged_to(), cert.purged_to());
    assert_eq!(copy.last_barrier, cert.last_barrier);
    let records = |c: &Certifier| -> Vec<(Uuid, bool, usize)> {
        c.history
            .iter()
            .map(|r| (r.source, r.toi, r.paths))
            .collect()
    };
    assert_eq!(records(&copy), records(&cert));
    assert_eq!(copy.written, cert.written);
    assert_eq!(entries(&copy), entries(&cert));
    assert_eq!(copy.scratch.capacity(), 0);
    assert_eq!(copy.encode(), bytes);
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = sample_index().encode();
    for len in 0..bytes.len() {
        match Certifier::decode(&bytes[..len]) {
            Err(IndexDecodeError::Truncated) if len < 9 => {}
            Err(IndexDecodeError::ChecksumMismatch { .. }) if len >= 9 => {}
            other => panic!("cut to {len} of {} bytes: {other:?}", bytes.len()),
        }
    }
    // With a checksum made to match, the structure still gives a cut index away.
    let body = &bytes[..bytes.len() - 4];
    for len in 0..body.len() {
        assert_eq!(
            Certifier::decode(&sealed(&[&body[..len]])).err(),
            Some(IndexDecodeError::Truncated),
            "cut to {len} bytes and resealed"
        );
    }
}

#[test]
fn every_bit_flip_is_rejected() {
    let bytes = sample_index().encode();
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            match Certifier::decode(&flipped) {
                Err(IndexDecodeError::BadMagic) if at < 4 => {}
                Err(IndexDecodeError::ChecksumMismatch { stored, computed }) if at >= 4 => {
                    assert_ne!(stored, computed)
                }
                other => panic!("bit {bit} of byte {at} flipped: {other:?}"),
            }
        }
    }
}

#[test]
fn an_unknown_version_is_named() {
    let bytes = sample_index().encode();
    for version in [0u8, 1, 3, 0xff] {
        let mut other = bytes.clone();
        other[4] = version;
        assert!(matches!(
            Certifier::decode(&other),
            Err(IndexDecodeError::ChecksumMismatch { .. })
        ));
        reseal(&mut other);
        let error = Certifier::decode(&other).expect_err("unknown version accepted");
        assert_eq!(error, IndexDecodeError::UnknownVersion(version));
        assert!(error.to_string().contains(&format!("version {version}")));
    }
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    let header = |position: i64, purged_to: i64| {
        [
            b"TRCI".as_slice(),
            &[2],
            &16u64.to_le_bytes(),
            &position.to_le_bytes(),
            &purged_to.to_le_bytes(),
            &(-1i64).to_le_bytes(),
        ]
        .concat()
    };
    let max = u64::MAX.to_le_bytes();
    let zero = 0u64.to_le_bytes();
    let one = 1u64.to_le_bytes();
    // A window of 2^64 - 1 seqnos, with as many records claimed.
    let bytes = sealed(&[&header(i64::MAX, i64::MIN), &max]);
    assert_eq!(
        Certifier::decode(&bytes).err(),
        Some(IndexDecodeError::Truncated)
    );
    // One record that wrote 2^64 - 1 paths, and as many written paths.
    let bytes = sealed(&[&header(1, 0), &one, &[7; 16], &[0], &max, &max]);
    assert_eq!(
        Certifier::decode(&bytes).err(),
        Some(IndexDecodeError::Truncated)
    );
    // 2^64 - 1 index entries; then one entry with a byte too few for even one slot.
    let bytes = sealed(&[&header(0, 0), &zero, &zero, &max]);
    assert_eq!(
        Certifier::decode(&bytes).err(),
        Some(IndexDecodeError::Truncated)
    );
    let bytes = sealed(&[&header(0, 0), &zero, &zero, &one, &[1; 24]]);
    assert_eq!(
        Certifier::decode(&bytes).err(),
        Some(IndexDecodeError::Truncated)
    );
    // Path counts that overflow when summed.
    let record = [[9u8; 16].as_slice(), &[0], &max].concat();
    let bytes = sealed(&[&header(2, 0), &2u64.to_le_bytes(), &record, &record]);
    expect_inconsistent(&bytes, "more paths than fit");
}

#[test]
fn impossible_states_are_refused() {
    let corrupt = |what: &str, damage: &dyn Fn(&mut Certifier)| {
        let mut cert = sample_index();
        damage(&mut cert);
        expect_inconsistent(&cert.encode(), what);
    };
    let first_path = |cert: &Certifier| *cert.index.keys().min().expect("entries");
    corrupt("5 history records for the 6 seqnos", &|c| {
        c.history.pop_back();
    });
    corrupt("7 history records for the 8 seqnos", &|c| {
        c.history.push_front(Record::NOTHING);
        c.purged_to = Seqno(3);
        c.position = Seqno(11);
    });
    corrupt("beyond the position", &|c| c.purged_to = Seqno(11));
    corrupt("last barrier 11 is beyond", &|c| c.last_barrier = Seqno(11));
    corrupt("written paths, but the history records", &|c| {
        c.written.push_back(7)
    });
    corrupt("written paths, but the history records", &|c| {
        c.history.back_mut().expect("records").paths += 1
    });
    corrupt("outside the history window", &|c| {
        let path = first_path(c);
        c.index.get_mut(&path).expect("entry").0[1] = 11;
    });
    corrupt("outside the history window", &|c| {
        let path = first_path(c);
        c.index.get_mut(&path).expect("entry").0[1] = 4;
    });
    // Seqno 6 is a view: it wrote nothing.
    corrupt("which did not write it", &|c| {
        let path = first_path(c);
        c.index.get_mut(&path).expect("entry").0[1] = 6;
    });
    corrupt("slot mask 0x00", &|c| {
        c.index.insert(12345, Slots::EMPTY);
    });
    corrupt("is missing from the index", &|c| {
        let path = *c.written.back().expect("written");
        c.index.remove(&path);
    });
    // The newest slot of the last path seqno 10 wrote, wound back to its older one (5).
    corrupt("is missing from the index", &|c| {
        let path = *c.written.back().expect("written");
        c.index.get_mut(&path).expect("entry").0[UP as usize] = EMPTY_SLOT;
    });
}

#[test]
fn malformed_fields_are_refused() {
    let cert = sample_index();
    let bytes = cert.encode();
    let entries_at = index_count_at(&cert) + 8;

    let mut toi = bytes.clone();
    toi[RECORDS_AT + 16] = 2;
    reseal(&mut toi);
    expect_inconsistent(&toi, "TOI flag 2 in the record of seqno 5");

    let mut mask = bytes.clone();
    mask[entries_at + 16] |= 0x10;
    reseal(&mut mask);
    expect_inconsistent(&mask, "slot mask");

    // The first entry twice.
    let first_len = 17 + 8 * bytes[entries_at + 16].count_ones() as usize;
    let first = bytes[entries_at..entries_at + first_len].to_vec();
    let mut repeated = bytes.clone();
    repeated.splice(entries_at..entries_at, first);
    let count = cert.index_len() as u64 + 1;
    repeated[entries_at - 8..entries_at].copy_from_slice(&count.to_le_bytes());
    reseal(&mut repeated);
    expect_inconsistent(&repeated, "out of order or repeated");

    let mut trailing = bytes.clone();
    trailing.splice(bytes.len() - 4..bytes.len() - 4, [0, 0]);
    reseal(&mut trailing);
    expect_inconsistent(&trailing, "2 bytes after the open streams");

    let mut magic = bytes.clone();
    magic[..4].copy_from_slice(b"TRWS");
    assert_eq!(
        Certifier::decode(&magic).err(),
        Some(IndexDecodeError::BadMagic)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A joiner's decoded index goes on exactly as the donor's: same verdicts (so the same
    /// depends_on), position, purge point and index size after every later action, and in
    /// the end the same state.
    #[test]
    fn a_decoded_index_behaves_like_the_original(
        start in 0i64..4,
        max_interval in prop_oneof![Just(DEFAULT_MAX_INTERVAL), 1u64..8],
        ops in proptest::collection::vec(op(), 0..100),
        split in any::<proptest::sample::Index>(),
        purge_back in proptest::option::of(0i64..8),
        again in any::<proptest::sample::Index>(),
    ) {
        let split = split.index(ops.len() + 1);
        let again = split + again.index(ops.len() - split + 1);
        let mut cert = Certifier::starting_at(CertConfig { max_interval }, Seqno(start));
        for (i, op) in ops[..split].iter().enumerate() {
            apply(&mut cert, i, op);
        }
        if let Some(back) = purge_back {
            cert.purge_to(Seqno(cert.position().0 - back));
        }
        let bytes = cert.encode();
        let decoded = Certifier::decode(&bytes);
        prop_assert!(decoded.is_ok(), "{:?} does not decode: {:?}", cert, decoded);
        let mut copy = decoded.expect("checked");
        prop_assert_eq!(copy.encode(), bytes, "the encoding is not canonical");
        prop_assert_eq!(copy.config(), cert.config());
        for (i, op) in ops.iter().enumerate().skip(split) {
            if i == again {
                // A copy of a copy, mid-stream.
                copy = Certifier::decode(&copy.encode()).expect("a copy decodes");
            }
            let want = apply(&mut cert, i, op);
            let got = apply(&mut copy, i, op);
            prop_assert_eq!(got, want, "op {}: {:?}", i, op);
            prop_assert_eq!(copy.position(), cert.position());
            prop_assert_eq!(copy.purged_to(), cert.purged_to());
            prop_assert_eq!(copy.index_len(), cert.index_len(), "after op {}", i);
        }
        prop_assert_eq!(copy.encode(), cert.encode());
    }

    /// Random bytes, with or without the magic and a matching checksum, never panic; the
    /// rare input that decodes is the canonical encoding of what it decodes to.
    #[test]
    fn garbage_never_panics(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..400),
        magic in any::<bool>(),
        seal in any::<bool>(),
    ) {
        if magic {
            bytes.splice(0..0, *b"TRCI\x01");
        }
        if seal {
            bytes = sealed(&[&bytes]);
        }
        if let Ok(cert) = Certifier::decode(&bytes) {
            prop_assert_eq!(cert.encode(), bytes);
        }
    }

    /// Real indexes with a few bytes changed (and maybe cut), under a matching checksum:
    /// refused for their structure, or accepted as a state that later calls handle without
    /// panicking.
    #[test]
    fn damaged_indexes_never_panic(
        ops in proptest::collection::vec(op(), 0..60),
        damage in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..4),
        cut in proptest::option::of(any::<proptest::sample::Index>()),
        more in proptest::collection::vec(op(), 0..20),
    ) {
        let mut cert = Certifier::starting_at(CertConfig { max_interval: 6 }, Seqno(0));
        for (i, op) in ops.iter().enumerate() {
            apply(&mut cert, i, op);
        }
        let mut bytes = cert.encode();
        bytes.truncate(bytes.len() - 4);
        // Past the magic and version, which have their own errors.
        for (at, value) in &damage {
            let at = 5 + at.index(bytes.len() - 5);
            bytes[at] = *value;
        }
        if let Some(cut) = cut {
            bytes.truncate(5 + cut.index(bytes.len() - 4));
        }
        let bytes = sealed(&[&bytes]);
        match Certifier::decode(&bytes) {
            Ok(mut decoded) => {
                prop_assert_eq!(decoded.encode(), bytes);
                // Keep clear of seqno overflow and of negative seqnos no cluster uses.
                if decoded.purged_to() >= Seqno::UNDEFINED && decoded.position().0 < i64::MAX / 2 {
                    for (i, op) in more.iter().enumerate() {
                        if let Some(Verdict::Pass { depends_on }) = apply(&mut decoded, i, op) {
                            prop_assert!(depends_on < decoded.position());
                        }
                    }
                }
            }
            Err(error) => prop_assert!(
                matches!(error, IndexDecodeError::Truncated | IndexDecodeError::Inconsistent(_)),
                "{:?}",
                error
            ),
        }
    }
}

#[test]
fn open_streams_travel_with_the_index_so_a_joiner_certifies_fragments_alike() {
    let mut donor = Certifier::new(CertConfig::default());
    assert_eq!(
        donor.certify(Seqno(1), &fragment(1, 7, 0, flags::TRX_START, &[(ROW, EX)])),
        pass(0)
    );
    assert_eq!(
        donor.certify(
            Seqno(2),
            &fragment(2, 9, 0, flags::TRX_START, &[(ROW2, EX)])
        ),
        pass(0)
    );
    donor.skip(Seqno(3));
    let bytes = donor.encode();
    let mut joiner = Certifier::decode(&bytes).expect("decodes");
    assert_eq!(joiner.open_streams(), (2, 2));
    assert_eq!(joiner.encode(), bytes, "the same state encodes the same");
    // The next fragment waits for its transaction's last one, on both.
    let next = fragment(1, 7, 3, 0, &[(OTHER_TABLE_ROW, EX)]);
    assert_eq!(joiner.certify(Seqno(4), &next), pass(1));
    assert_eq!(donor.certify(Seqno(4), &next), pass(1));

    // A stream whose last fragment is past the position, or with no fragment, is refused.
    let streams_at = bytes.len() - 4 - 2 * 40;
    for (offset, value, what) in [(24, 9i64, "the last at 9"), (32, 0, "0 fragments")] {
        let mut damaged = bytes.clone();
        damaged[streams_at + offset..streams_at + offset + 8].copy_from_slice(&value.to_le_bytes());
        reseal(&mut damaged);
        expect_inconsistent(&damaged, what);
    }
    // Out of order.
    let mut swapped = bytes.clone();
    let (first, second) = (streams_at, streams_at + 40);
    let copy = swapped[first..second].to_vec();
    swapped.copy_within(second..second + 40, first);
    swapped[second..second + 40].copy_from_slice(&copy);
    reseal(&mut swapped);
    expect_inconsistent(&swapped, "out of order or repeated");
}
