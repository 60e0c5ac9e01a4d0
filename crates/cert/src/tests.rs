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
fn pairs(ws: &WriteSet) -> Vec<(&[Vec<u8>], KeyType)> {
    let mut out = Vec::new();
    for key in &ws.keys {
        for k in 1..key.parts.len() {
            out.push((&key.parts[..k], SH));
        }
        out.push((key.parts.as_slice(), key.key_type));
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
        let mut paths: Vec<&[Vec<u8>]> = self
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
        &[1],
        &7u64.to_le_bytes(),
        &5i64.to_le_bytes(),
        &5i64.to_le_bytes(),
        &(-1i64).to_le_bytes(),
        &0u64.to_le_bytes(),
        &0u64.to_le_bytes(),
        &0u64.to_le_bytes(),
    ]
    .concat();
    assert_eq!(bytes, sealed(&[&body]));
    assert_eq!(bytes.len(), 65);
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
        index_count_at(&cert) + 8 + 17 * cert.index_len() + 8 * slots + 4
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
    for version in [0u8, 2, 0xff] {
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
            &[1],
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
    expect_inconsistent(&trailing, "2 bytes after the index entries");

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
