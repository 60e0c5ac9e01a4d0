use super::*;
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use KeyType::{Exclusive as EX, Reference as RE, Shared as SH, Update as UP};

/// The conflict matrix as written in the contract note (§6.3), kept apart from `relation` so
/// that the tests do not check the code against itself.
/// Rows: type found in the index; columns: incoming type; both in order EX, UP, RE, SH.
const MATRIX: [[char; 4]; 4] = [
    ['C', 'C', 'C', 'C'], // EX
    ['C', 'C', 'D', 'D'], // UP
    ['C', 'D', 'N', 'N'], // RE
    ['D', 'D', 'N', 'N'], // SH
];

fn matrix(found: KeyType, incoming: KeyType) -> char {
    let row = |t: KeyType| 3 - t as usize;
    MATRIX[row(found)][row(incoming)]
}

fn node(n: u8) -> Uuid {
    Uuid([n; 16])
}

fn ws(source: u8, last_seen: i64, flags: u32, keys: &[(&[&str], KeyType)]) -> WriteSet {
    WriteSet {
        source: node(source),
        conn_id: 1,
        trx_id: 1,
        last_seen: Seqno(last_seen),
        flags: flags::TRX_START | flags::TRX_END | flags,
        keys: keys
            .iter()
            .map(|(parts, key_type)| writeset::Key::new(parts, *key_type))
            .collect(),
        data: Vec::new().into(),
    }
}

fn pass(depends_on: i64) -> Verdict {
    Verdict::Pass {
        depends_on: Seqno(depends_on),
    }
}

fn key_conflict(with: i64, found: KeyType, incoming: KeyType) -> Verdict {
    Verdict::Fail(Conflict::Key {
        with: Seqno(with),
        key_type_found: found,
        key_type_incoming: incoming,
    })
}

const ROW: &[&str] = &["db", "t", "r1"];
const ROW2: &[&str] = &["db", "t", "r2"];
const TABLE: &[&str] = &["db", "t"];
const OTHER_TABLE_ROW: &[&str] = &["db", "u", "r1"];

/// Seqno 1 holds `ROW` as `found` (from node 1); seqno 2 then brings `ROW` as `incoming`.
fn check(found: KeyType, incoming: KeyType, same_source: bool, newer: bool) -> Verdict {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(
        cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, found)])),
        pass(0)
    );
    let source = if same_source { 1 } else { 2 };
    let last_seen = if newer { 0 } else { 1 };
    cert.certify(Seqno(2), &ws(source, last_seen, 0, &[(ROW, incoming)]))
}

#[test]
fn conflict_matrix_all_pairs() {
    let mut cases = 0;
    for found in KeyType::ALL {
        for incoming in KeyType::ALL {
            for same_source in [false, true] {
                for newer in [false, true] {
                    let expected = match matrix(found, incoming) {
                        'C' if newer && !same_source => key_conflict(1, found, incoming),
                        'C' | 'D' => pass(1),
                        _ => pass(0),
                    };
                    assert_eq!(
                        check(found, incoming, same_source, newer),
                        expected,
                        "found {found:?} incoming {incoming:?} same source {same_source} \
                         entry newer than last_seen {newer}"
                    );
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 64);
}

#[test]
fn relation_matches_the_contract_table() {
    for found in KeyType::ALL {
        for incoming in KeyType::ALL {
            let expected = match matrix(found, incoming) {
                'C' => Relation::Conflict,
                'D' => Relation::Depend,
                _ => Relation::None,
            };
            assert_eq!(
                relation(found, incoming),
                expected,
                "{found:?} / {incoming:?}"
            );
        }
    }
}

#[test]
fn table_level_exclusive_meets_every_row_key() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(
        cert.certify(Seqno(1), &ws(1, 0, 0, &[(TABLE, EX)])),
        pass(0)
    );
    // The row key's [db, t] branch is Shared and meets the table-level EX.
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, 0, &[(ROW, UP)])),
        key_conflict(1, EX, SH)
    );
    // Once seen, it is only a dependency.
    assert_eq!(cert.certify(Seqno(3), &ws(2, 1, 0, &[(ROW, UP)])), pass(1));
    // Another table is unaffected.
    assert_eq!(
        cert.certify(Seqno(4), &ws(2, 0, 0, &[(OTHER_TABLE_ROW, EX)])),
        pass(0)
    );
}

#[test]
fn row_keys_against_table_level_keys() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    // A table-level SH meets the row's SH branch: nothing.
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, 0, &[(TABLE, SH)])),
        pass(0)
    );
    // A table-level EX meets the SH branches of seqnos 1 and 2: a dependency, not a conflict.
    assert_eq!(
        cert.certify(Seqno(3), &ws(2, 0, 0, &[(TABLE, EX)])),
        pass(2)
    );
    // A row key against the table-level SH of seqno 2 (its branch is SH too): nothing; but
    // seqno 3's table-level EX conflicts.
    assert_eq!(
        cert.certify(Seqno(4), &ws(3, 2, 0, &[(ROW2, UP)])),
        key_conflict(3, EX, SH)
    );
    assert_eq!(cert.certify(Seqno(5), &ws(3, 3, 0, &[(ROW2, UP)])), pass(3));
}

#[test]
fn part_boundaries_matter() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(
        cert.certify(Seqno(1), &ws(1, 0, 0, &[(&["ab", "c"], EX)])),
        pass(0)
    );
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, 0, &[(&["a", "bc"], EX)])),
        pass(0)
    );
    assert_eq!(
        cert.certify(Seqno(3), &ws(2, 0, 0, &[(&["ab", "c", ""], EX)])),
        key_conflict(1, EX, SH)
    );
    assert_eq!(
        cert.certify(Seqno(4), &ws(2, 0, 0, &[(&["ab"], EX)])),
        pass(1)
    );
    // A key of no parts is the empty path: it meets only other empty keys.
    assert_eq!(cert.certify(Seqno(5), &ws(1, 0, 0, &[(&[], EX)])), pass(0));
    assert_eq!(
        cert.certify(Seqno(6), &ws(2, 0, 0, &[(&[], SH)])),
        key_conflict(5, EX, SH)
    );
    assert_eq!(
        cert.certify(Seqno(7), &ws(2, 0, 0, &[(&["x"], EX)])),
        pass(0)
    );
}

#[test]
fn toi_never_fails_and_isolates() {
    let mut cert = Certifier::new(CertConfig { max_interval: 5 });
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    // A TOI from another node with an old last_seen, against a conflicting key: passes, and
    // waits for everything before it.
    let toi = flags::ISOLATION;
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, toi, &[(TABLE, EX)])),
        pass(1)
    );
    // A write-set from the TOI's own node that had not seen it fails: TOI entries conflict
    // regardless of source.
    assert_eq!(
        cert.certify(Seqno(3), &ws(2, 1, 0, &[(ROW2, UP)])),
        key_conflict(2, EX, SH)
    );
    // Having seen it, it depends on it.
    assert_eq!(cert.certify(Seqno(4), &ws(2, 2, 0, &[(ROW2, UP)])), pass(2));
    // Any later write-set depends on the TOI, even one with unrelated keys.
    assert_eq!(
        cert.certify(Seqno(5), &ws(3, 4, 0, &[(OTHER_TABLE_ROW, UP)])),
        pass(2)
    );
    // TOI passes even past the interval rules.
    cert.purge_to(Seqno(3));
    assert_eq!(
        cert.certify(Seqno(6), &ws(1, 0, toi, &[(TABLE, EX)])),
        pass(5)
    );
    assert_eq!(cert.certify(Seqno(7), &ws(1, 5, toi, &[])), pass(6));
    assert_eq!(
        cert.certify(Seqno(8), &ws(3, 7, 0, &[(OTHER_TABLE_ROW, UP)])),
        pass(7)
    );
}

#[test]
fn pa_unsafe_is_a_barrier_and_implicit_deps_follow_last_seen() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    let unsafe_ = flags::PA_UNSAFE;
    // PA_UNSAFE waits for everything before it...
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 1, unsafe_, &[(OTHER_TABLE_ROW, EX)])),
        pass(1)
    );
    // ...and everything after it waits for it.
    assert_eq!(cert.certify(Seqno(3), &ws(3, 0, 0, &[(ROW2, EX)])), pass(2));
    // PA_UNSAFE still conflicts; a failed one is no barrier.
    assert_eq!(
        cert.certify(Seqno(4), &ws(2, 2, unsafe_, &[(ROW2, EX)])),
        key_conflict(3, EX, EX)
    );
    assert_eq!(
        cert.certify(Seqno(5), &ws(3, 0, 0, &[(&["db", "v", "r"], EX)])),
        pass(2)
    );
    // IMPLICIT_DEPS: at least last_seen, even without any key dependency.
    let implicit = flags::IMPLICIT_DEPS;
    assert_eq!(
        cert.certify(Seqno(6), &ws(1, 4, implicit, &[(&["z"], EX)])),
        pass(4)
    );
    assert_eq!(
        cert.certify(Seqno(7), &ws(1, 4, 0, &[(&["y"], EX)])),
        pass(2)
    );
    // A last_seen at or past the write-set's own seqno is clamped, never a self-dependency.
    assert_eq!(
        cert.certify(Seqno(8), &ws(1, 99, implicit, &[(&["x"], EX)])),
        pass(7)
    );
}

#[test]
fn failed_write_sets_are_not_indexed_but_consume_their_seqno() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    let indexed = cert.index_len();
    assert_eq!(indexed, 3); // [db], [db, t], [db, t, r1]
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, 0, &[(ROW2, EX), (ROW, EX)])),
        key_conflict(1, EX, EX)
    );
    assert_eq!(cert.position(), Seqno(2));
    assert_eq!(
        cert.index_len(),
        indexed,
        "a failed write-set left keys behind"
    );
    // Had seqno 2 been indexed, this would conflict with it (newer than last_seen 1, other
    // node).
    assert_eq!(cert.certify(Seqno(3), &ws(3, 1, 0, &[(ROW2, EX)])), pass(0));
    // Views consume seqnos too.
    cert.skip(Seqno(4));
    assert_eq!(cert.position(), Seqno(4));
    assert_eq!(cert.certify(Seqno(5), &ws(3, 4, 0, &[(ROW2, UP)])), pass(3));
}

#[test]
fn seqnos_must_be_consecutive() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    let w = ws(1, 0, 0, &[(ROW2, EX)]);
    let gap = catch_unwind(AssertUnwindSafe(|| cert.certify(Seqno(3), &w)));
    assert!(gap.is_err(), "a gap was accepted");
    let repeat = catch_unwind(AssertUnwindSafe(|| cert.certify(Seqno(1), &w)));
    assert!(repeat.is_err(), "a repeated seqno was accepted");
    let skip_gap = catch_unwind(AssertUnwindSafe(|| cert.skip(Seqno(5))));
    assert!(skip_gap.is_err(), "skip accepted a gap");
    // The refused calls changed nothing.
    assert_eq!(cert.position(), Seqno(1));
    assert_eq!(cert.certify(Seqno(2), &w), pass(0));
}

#[test]
fn purge_forgets_entries_and_rejects_old_last_seen() {
    let mut cert = Certifier::new(CertConfig::default());
    for seqno in 1..=10 {
        let row = format!("r{seqno}");
        let verdict = cert.certify(
            Seqno(seqno),
            &ws(1, seqno - 1, 0, &[(&["db", "t", &row], EX)]),
        );
        assert_eq!(verdict, pass(0));
    }
    assert_eq!(cert.index_len(), 12);
    cert.purge_to(Seqno(5));
    assert_eq!(cert.purged_to(), Seqno(5));
    // The branches were rewritten by seqno 10; rows 1 to 5 are gone.
    assert_eq!(cert.index_len(), 7);
    assert_eq!(
        cert.certify(Seqno(11), &ws(2, 4, 0, &[(&["x"], EX)])),
        Verdict::Fail(Conflict::TooOld {
            last_seen: Seqno(4),
            purged_to: Seqno(5)
        })
    );
    // The index start is the floor of every dependency.
    assert_eq!(
        cert.certify(Seqno(12), &ws(2, 5, 0, &[(&["x"], EX)])),
        pass(5)
    );
    // Going backwards is ignored.
    cert.purge_to(Seqno(3));
    assert_eq!(cert.purged_to(), Seqno(5));
    assert_eq!(cert.index_len(), 8);
    // Purging beyond the position stops at the position.
    cert.purge_to(Seqno(100));
    assert_eq!(cert.purged_to(), Seqno(12));
    assert_eq!(cert.index_len(), 0);
    assert_eq!(
        cert.certify(Seqno(13), &ws(2, 12, 0, &[(ROW, EX)])),
        pass(12)
    );
}

#[test]
fn purge_keeps_keys_rewritten_later() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    assert_eq!(cert.certify(Seqno(2), &ws(1, 1, 0, &[(ROW, SH)])), pass(1));
    cert.purge_to(Seqno(1));
    assert_eq!(cert.index_len(), 3);
    // Only the SH entry of seqno 2 is left for ROW: an incoming RE meets nothing.
    assert_eq!(cert.certify(Seqno(3), &ws(2, 1, 0, &[(ROW, RE)])), pass(1));
    // Now seqno 3's RE entry and seqno 2's SH entry are both dependencies of an UP.
    assert_eq!(cert.certify(Seqno(4), &ws(2, 1, 0, &[(ROW, UP)])), pass(3));
}

#[test]
fn interval_limits() {
    let mut cert = Certifier::starting_at(CertConfig { max_interval: 3 }, Seqno(10));
    assert_eq!(cert.position(), Seqno(10));
    assert_eq!(cert.purged_to(), Seqno(10));
    assert_eq!(
        cert.certify(Seqno(11), &ws(1, 9, 0, &[(ROW, EX)])),
        Verdict::Fail(Conflict::TooOld {
            last_seen: Seqno(9),
            purged_to: Seqno(10)
        })
    );
    assert_eq!(
        cert.certify(Seqno(12), &ws(1, 10, 0, &[(ROW, EX)])),
        pass(10)
    );
    cert.skip(Seqno(13));
    assert_eq!(
        cert.certify(Seqno(14), &ws(1, 10, 0, &[(ROW2, EX)])),
        Verdict::Fail(Conflict::TooLong {
            last_seen: Seqno(10),
            seqno: Seqno(14),
            max_interval: 3
        })
    );
    assert_eq!(
        cert.certify(Seqno(15), &ws(1, 12, 0, &[(ROW2, EX)])),
        pass(10)
    );
    assert_eq!(CertConfig::default().max_interval, DEFAULT_MAX_INTERVAL);
}

/// A straightforward certifier: keeps every passed write-set and scans them all, with paths
/// compared as bytes.
struct Reference {
    max_interval: u64,
    position: i64,
    purged_to: i64,
    barrier: i64,
    passed: Vec<(i64, WriteSet)>,
}

/// Every (path, type) a write-set holds, in certification order.
fn pairs(ws: &WriteSet) -> Vec<(Vec<&[u8]>, KeyType)> {
    let mut out = Vec::new();
    for key in ws.keys.iter() {
        let parts: Vec<&[u8]> = key.parts.collect();
        for k in 1..parts.len() {
            out.push((parts[..k].to_vec(), SH));
        }
        out.push((parts, key.key_type));
    }
    out
}

impl Reference {
    fn new(max_interval: u64, start: i64) -> Self {
        Reference {
            max_interval,
            position: start,
            purged_to: start,
            barrier: -1,
            passed: vec![],
        }
    }

    fn live(&self) -> impl Iterator<Item = &(i64, WriteSet)> {
        self.passed.iter().filter(|(s, _)| *s > self.purged_to)
    }

    fn certify(&mut self, seqno: i64, ws: &WriteSet) -> Verdict {
        assert_eq!(seqno, self.position + 1);
        let verdict = self.judge(seqno, ws);
        self.position = seqno;
        if verdict.is_pass() {
            self.passed.push((seqno, ws.clone()));
            if ws.is_toi() || ws.is_pa_unsafe() {
                self.barrier = seqno;
            }
        }
        verdict
    }

    fn judge(&self, seqno: i64, ws: &WriteSet) -> Verdict {
        let toi = ws.is_toi();
        let last_seen = ws.last_seen.0.min(seqno - 1);
        if !toi && last_seen < self.purged_to {
            return Verdict::Fail(Conflict::TooOld {
                last_seen: Seqno(last_seen),
                purged_to: Seqno(self.purged_to),
            });
        }
        if !toi && (seqno - last_seen) as u64 > self.max_interval {
            return Verdict::Fail(Conflict::TooLong {
                last_seen: Seqno(last_seen),
                seqno: Seqno(seqno),
                max_interval: self.max_interval,
            });
        }
        let mut depends = self.purged_to.max(self.barrier);
        if ws.flags & flags::IMPLICIT_DEPS != 0 {
            depends = depends.max(last_seen);
        }
        for (path, incoming) in pairs(ws) {
            for found in [EX, UP, RE, SH] {
                let latest = self
                    .live()
                    .filter(|(_, w)| pairs(w).iter().any(|(p, t)| *p == path && *t == found))
                    .last();
                let Some((held, holder)) = latest else {
                    continue;
                };
                let cell = matrix(found, incoming);
                if cell == 'C'
                    && !toi
                    && *held > last_seen
                    && (holder.source != ws.source || holder.is_toi())
                {
                    return key_conflict(*held, found, incoming);
                }
                if cell != 'N' {
                    depends = depends.max(*held);
                }
            }
        }
        if toi || ws.is_pa_unsafe() {
            depends = seqno - 1;
        }
        pass(depends)
    }

    fn skip(&mut self, seqno: i64) {
        assert_eq!(seqno, self.position + 1);
        self.position = seqno;
    }

    fn purge_to(&mut self, safe: i64) {
        self.purged_to = self.purged_to.max(safe.min(self.position));
    }

    fn index_len(&self) -> usize {
        let mut paths: Vec<Vec<&[u8]>> = self
            .live()
            .flat_map(|(_, w)| pairs(w))
            .map(|(p, _)| p)
            .collect();
        paths.sort();
        paths.dedup();
        paths.len()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Certify {
        source: u8,
        lag: i64,
        flags: u32,
        keys: Vec<(Vec<Vec<u8>>, u8)>,
    },
    Skip,
    Purge {
        back: i64,
    },
}

impl Op {
    /// The write-set a `Certify` op stands for as the `i`-th op, ordered at `seqno`.
    fn write_set(&self, seqno: i64, i: usize) -> WriteSet {
        let Op::Certify {
            source,
            lag,
            flags,
            keys,
        } = self
        else {
            panic!("{self:?} is no write-set");
        };
        WriteSet {
            source: node(*source),
            conn_id: 0,
            trx_id: i as u64,
            last_seen: Seqno(seqno - 1 - lag),
            // Whole transactions: streaming fragments have tests of their own.
            flags: *flags | flags::TRX_START | flags::TRX_END,
            keys: keys
                .iter()
                .map(|(parts, t)| writeset::Key {
                    parts: parts.clone(),
                    key_type: KeyType::from_u8(*t).expect("0..4"),
                })
                .collect(),
            data: vec![].into(),
        }
    }
}

/// Applies `op` as the `i`-th op at the certifier's next seqno; the verdict of a write-set.
fn apply(cert: &mut Certifier, i: usize, op: &Op) -> Option<Verdict> {
    let seqno = cert.position().0 + 1;
    match op {
        Op::Certify { .. } => Some(cert.certify(Seqno(seqno), &op.write_set(seqno, i))),
        Op::Skip => {
            cert.skip(Seqno(seqno));
            None
        }
        Op::Purge { back } => {
            cert.purge_to(Seqno(seqno - 1 - back));
            None
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let part = proptest::collection::vec(0u8..2, 0..2);
    let key = (proptest::collection::vec(part, 0..4), 0u8..4);
    let ws_flags = prop_oneof![
        12 => Just(0),
        1 => Just(flags::ISOLATION),
        1 => Just(flags::PA_UNSAFE),
        2 => Just(flags::IMPLICIT_DEPS),
        1 => Just(flags::PA_UNSAFE | flags::IMPLICIT_DEPS),
    ];
    prop_oneof![
        8 => (0u8..3, -1i64..8, ws_flags, proptest::collection::vec(key, 0..5))
            .prop_map(|(source, lag, flags, keys)| Op::Certify { source, lag, flags, keys }),
        1 => Just(Op::Skip),
        1 => (0i64..10).prop_map(|back| Op::Purge { back }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_the_reference_certifier(
        start in 0i64..4,
        max_interval in prop_oneof![Just(DEFAULT_MAX_INTERVAL), 1u64..8],
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let mut cert = Certifier::starting_at(CertConfig { max_interval }, Seqno(start));
        let mut reference = Reference::new(max_interval, start);
        for (i, op) in ops.into_iter().enumerate() {
            let seqno = cert.position().0 + 1;
            match op {
                Op::Certify { .. } => {
                    let ws = op.write_set(seqno, i);
                    let got = cert.certify(Seqno(seqno), &ws);
                    let want = reference.certify(seqno, &ws);
                    prop_assert_eq!(got, want, "op {} at seqno {}: {:?}", i, seqno, ws);
                    if let Verdict::Pass { depends_on } = got {
                        prop_assert!(depends_on.0 < seqno);
                    }
                }
                Op::Skip => {
                    cert.skip(Seqno(seqno));
                    reference.skip(seqno);
                }
                Op::Purge { back } => {
                    cert.purge_to(Seqno(seqno - 1 - back));
                    reference.purge_to(seqno - 1 - back);
                    prop_assert_eq!(cert.purged_to().0, reference.purged_to);
                }
            }
            prop_assert_eq!(cert.position().0, reference.position);
            prop_assert_eq!(cert.index_len(), reference.index_len(), "after op {}", i);
        }
    }
}

/// A fragment of streaming transaction `trx` from `source` with exactly `flags`.
fn fragment(
    source: u8,
    trx: u64,
    last_seen: i64,
    flags: u32,
    keys: &[(&[&str], KeyType)],
) -> WriteSet {
    WriteSet {
        trx_id: trx,
        flags,
        ..ws(source, last_seen, 0, keys)
    }
}

#[test]
fn a_fragment_depends_on_the_previous_fragment_of_its_transaction() {
    let mut cert = Certifier::new(CertConfig::default());
    let start = flags::TRX_START;
    assert_eq!(
        cert.certify(Seqno(1), &fragment(1, 7, 0, start, &[(ROW, EX)])),
        pass(0)
    );
    // Unrelated work in between runs in parallel with the stream.
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 1, 0, &[(OTHER_TABLE_ROW, EX)])),
        pass(0)
    );
    // A middle fragment on other rows still waits for the first fragment, not for seqno 2.
    assert_eq!(
        cert.certify(Seqno(3), &fragment(1, 7, 1, 0, &[(ROW2, EX)])),
        pass(1)
    );
    assert_eq!(
        cert.open_stream((node(1), 7)),
        Some(OpenStream {
            last_fragment: Seqno(3),
            fragments: 2
        })
    );
    assert_eq!(cert.open_streams(), (1, 2));
    // Its own earlier rows are no conflict even though it had not seen them committed.
    assert_eq!(
        cert.certify(Seqno(4), &fragment(1, 7, 0, 0, &[(ROW, EX)])),
        pass(3)
    );
    // The commit fragment (PA_UNSAFE, as wsrep-lib sends it) closes the stream.
    assert_eq!(
        cert.certify(
            Seqno(5),
            &fragment(1, 7, 4, flags::TRX_END | flags::PA_UNSAFE, &[(ROW2, EX)])
        ),
        pass(4)
    );
    assert_eq!(cert.open_streams(), (0, 0));
}

#[test]
fn a_certified_fragment_wins_against_a_conflicting_transaction_of_another_node() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(
        cert.certify(Seqno(1), &fragment(1, 7, 0, flags::TRX_START, &[(ROW, EX)])),
        pass(0)
    );
    // Node 2 updated the row without having seen the fragment: it loses.
    assert_eq!(
        cert.certify(Seqno(2), &ws(2, 0, 0, &[(ROW, EX)])),
        key_conflict(1, EX, EX)
    );
    assert_eq!(cert.open_streams(), (1, 1));
}

#[test]
fn a_rollback_fragment_passes_without_keys_and_closes_the_stream() {
    let mut cert = Certifier::new(CertConfig::default());
    assert_eq!(
        cert.certify(Seqno(1), &fragment(1, 7, 0, flags::TRX_START, &[(ROW, EX)])),
        pass(0)
    );
    cert.skip(Seqno(2));
    cert.purge_to(Seqno(2));
    // Even with a last_seen far below the index start, a rollback cannot fail.
    let rollback = flags::ROLLBACK | flags::PA_UNSAFE;
    assert_eq!(
        cert.certify(Seqno(3), &fragment(1, 7, -5, rollback, &[])),
        pass(2)
    );
    assert_eq!(cert.open_streams(), (0, 0));
    // A rollback of a transaction nobody knows passes too (the servers log a dummy).
    assert_eq!(
        cert.certify(Seqno(4), &fragment(3, 9, 3, rollback, &[])),
        pass(3)
    );
}

#[test]
fn a_failed_fragment_closes_its_stream_and_views_close_streams_of_departed_members() {
    let mut cert = Certifier::new(CertConfig::default());
    cert.certify(Seqno(1), &ws(2, 0, 0, &[(ROW, EX)]));
    assert_eq!(
        cert.certify(
            Seqno(2),
            &fragment(1, 7, 1, flags::TRX_START, &[(ROW2, EX)])
        ),
        pass(0)
    );
    // A middle fragment that conflicts fails, and the stream is over.
    assert_eq!(
        cert.certify(Seqno(3), &fragment(1, 7, 0, 0, &[(ROW, EX)])),
        key_conflict(1, EX, EX)
    );
    assert_eq!(cert.open_streams(), (0, 0));
    // Streams of two members; a view with only member 1 closes member 3's.
    cert.certify(
        Seqno(4),
        &fragment(1, 8, 3, flags::TRX_START, &[(&["a"], EX)]),
    );
    cert.certify(
        Seqno(5),
        &fragment(3, 8, 3, flags::TRX_START, &[(&["b"], EX)]),
    );
    assert_eq!(cert.close_streams_absent_from(&[node(1), node(2)]), 1);
    assert_eq!(cert.open_streams(), (1, 1));
    // A fragment of a stream this index never saw waits for everything before it.
    assert_eq!(
        cert.certify(Seqno(6), &fragment(3, 8, 5, 0, &[(&["c"], EX)])),
        pass(5)
    );
}

#[test]
fn the_conflicting_key_is_named_down_to_the_level_that_collided() {
    let mut cert = Certifier::new(CertConfig::default());
    let parts = |names: &[&'static str]| names.iter().map(|n| n.as_bytes()).collect::<Vec<_>>();
    assert_eq!(cert.certify(Seqno(1), &ws(1, 0, 0, &[(ROW, EX)])), pass(0));
    // A row conflict names the row, not the table branch it shares with other rows.
    let row_clash = ws(2, 0, 0, &[(OTHER_TABLE_ROW, UP), (ROW2, UP), (ROW, UP)]);
    assert_eq!(cert.certify(Seqno(2), &row_clash), key_conflict(1, EX, UP));
    assert_eq!(cert.conflicting_key(&row_clash, Seqno(1)), Some(parts(ROW)));
    // A TOI's table-level key collides at the table level of a later row key.
    let toi = ws(3, 2, flags::ISOLATION, &[(TABLE, EX)]);
    assert_eq!(cert.certify(Seqno(3), &toi), pass(2));
    let behind_toi = ws(3, 2, 0, &[(ROW2, UP)]);
    assert_eq!(cert.certify(Seqno(4), &behind_toi), key_conflict(3, EX, SH));
    assert_eq!(
        cert.conflicting_key(&behind_toi, Seqno(3)),
        Some(parts(TABLE))
    );
    // Nothing of a write-set that does not touch what `with` holds.
    let elsewhere = ws(2, 0, 0, &[(OTHER_TABLE_ROW, UP)]);
    assert_eq!(cert.conflicting_key(&elsewhere, Seqno(1)), None);
}

mod encoding;
