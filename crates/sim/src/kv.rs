//! The toy database the simulator's nodes apply write-sets to.
//!
//! A write-set is applied in two steps, as in a real server: its changes are staged when its
//! applier runs (in parallel, as `depends_on` allows) and written when its seqno commits (in
//! order). Every row remembers the seqno of the write-set that wrote it last, and a staged
//! change checks that no earlier write-set to the same row is still uncommitted and no later
//! one already wrote it: a wrong `depends_on` is caught on the spot instead of surfacing as
//! a vague difference at the end. A crash loses what was staged, as a real one rolls back
//! what was not committed.

use std::collections::BTreeMap;

use base::{Seqno, Uuid};
use serde::{Deserialize, Serialize};

/// One change a transaction makes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Sets `table/row` to a value.
    Put {
        /// Table name.
        table: String,
        /// Row name.
        row: String,
        /// The new value (unique per transaction, so a lost write is visible).
        value: u64,
    },
    /// Removes every row of a table (a DDL-like statement run in total order isolation).
    Truncate {
        /// Table name.
        table: String,
    },
    /// Bytes that change nothing: they make a write-set large enough to travel in chunks.
    Filler(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// Encodes a transaction's changes as write-set data.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    bincode::serialize(ops).expect("ops encode")
}

/// Decodes write-set data back into changes.
pub fn decode_ops(bytes: &[u8]) -> Vec<Op> {
    bincode::deserialize(bytes).expect("write-set data written by the simulator decodes")
}

/// A row: its value and the seqno that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// Current value.
    pub value: u64,
    /// Seqno of the last write-set that wrote it.
    pub version: Seqno,
}

/// The whole database of one node. It survives a crash, like a real datadir.
#[derive(Clone, Debug, Default)]
pub struct KvDb {
    /// The history its rows belong to (set by a bootstrap or a snapshot).
    pub history: Uuid,
    /// Rows by (table, row).
    pub rows: BTreeMap<(String, String), Row>,
    /// Seqno of the last truncate of each table.
    pub truncated: BTreeMap<String, Seqno>,
    /// The last committed seqno.
    pub committed: Seqno,
    /// The last committed seqno that changed anything (rows or streams): seqnos after it
    /// up to `committed` were failures, which change nothing.
    pub last_written: Seqno,
    /// Fragments of streaming transactions committed and not ended yet, by origin and
    /// transaction (a real server keeps them in its streaming log, which a snapshot
    /// carries).
    pub streams: BTreeMap<StreamKey, Vec<Op>>,
    /// Changes applied but not committed yet, by seqno.
    pub staged: BTreeMap<Seqno, Staged>,
}

/// Two databases are equal when their data and position are: what is staged and where the
/// last write happened (a failure changes nothing, a snapshot may start after it) are not
/// data.
impl PartialEq for KvDb {
    fn eq(&self, other: &KvDb) -> bool {
        self.history == other.history
            && self.rows == other.rows
            && self.truncated == other.truncated
            && self.committed == other.committed
            && self.streams == other.streams
    }
}

impl Eq for KvDb {}

/// A streaming transaction: its origin and its id there.
pub type StreamKey = (Uuid, u64);

/// What a seqno does to the streaming transactions when it commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamStep {
    /// Nothing.
    None,
    /// Its changes are a fragment of this stream: kept until the stream commits.
    Fragment(StreamKey),
    /// It commits this stream (its changes include every fragment's).
    Commit(StreamKey),
    /// It rolls this stream back.
    Drop(StreamKey),
    /// A primary view: the streams of origins not in it end.
    KeepOnly(Vec<Uuid>),
}

/// A seqno's changes, applied and not committed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// Rows its write-set writes at its commit.
    pub ops: Vec<Op>,
    /// For a stream's commit: what its earlier fragments applied, written with it.
    pub fragments: Vec<Op>,
    /// What it does to the streams.
    pub stream: StreamStep,
}

/// Whether two changes touch the same data: the same row, or a table one of them
/// truncates.
fn conflicts(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (
            Op::Put {
                table: t, row: r, ..
            },
            Op::Put {
                table: u, row: w, ..
            },
        ) => t == u && r == w,
        (Op::Put { table: t, .. } | Op::Truncate { table: t }, Op::Truncate { table: u })
        | (Op::Truncate { table: t }, Op::Put { table: u, .. }) => t == u,
        (Op::Filler(_), _) | (_, Op::Filler(_)) => false,
    }
}

impl KvDb {
    /// Stages the changes of the write-set ordered at `seqno`: checked against what is
    /// committed and what earlier seqnos staged, written at its commit.
    pub fn stage(&mut self, seqno: Seqno, ops: Vec<Op>, stream: StreamStep) -> Result<(), String> {
        if seqno <= self.committed {
            return Err(format!(
                "write-set {seqno:?} staged at or below the committed {:?}",
                self.committed
            ));
        }
        let earlier = self.staged.range(..seqno).find(|(_, staged)| {
            staged
                .ops
                .iter()
                .any(|o| ops.iter().any(|op| conflicts(op, o)))
        });
        if let Some((earlier, staged)) = earlier {
            return Err(format!(
                "write-set {seqno:?} ({ops:?}) applied while the earlier {earlier:?} ({:?}) \
                 that changes the same rows was not committed yet: depends_on let it run too \
                 early",
                staged.ops
            ));
        }
        self.check(seqno, &ops)?;
        // A stream's fragments were applied at their own seqnos (and held their rows since,
        // as a real server's streaming applier does): later write-sets are not checked
        // against them here.
        let fragments = match &stream {
            StreamStep::Commit(key) => self.streams.get(key).cloned().unwrap_or_default(),
            _ => Vec::new(),
        };
        let staged = Staged {
            ops,
            fragments,
            stream,
        };
        self.staged.insert(seqno, staged);
        Ok(())
    }

    /// Commits every seqno up to `upto` in order, writing what each staged.
    pub fn commit_upto(&mut self, upto: Seqno) -> Result<(), String> {
        while self.committed < upto {
            let next = self.committed.next();
            if let Some(staged) = self.staged.remove(&next) {
                self.commit_staged(next, staged)?;
                self.last_written = next;
            }
            self.committed = next;
        }
        Ok(())
    }

    fn commit_staged(&mut self, seqno: Seqno, staged: Staged) -> Result<(), String> {
        match staged.stream {
            StreamStep::None => self.apply(seqno, &staged.ops)?,
            StreamStep::Fragment(key) => self.streams.entry(key).or_default().extend(staged.ops),
            StreamStep::Commit(key) => {
                self.streams.remove(&key);
                self.apply(seqno, &staged.fragments)?;
                self.apply(seqno, &staged.ops)?;
            }
            StreamStep::Drop(key) => {
                self.streams.remove(&key);
            }
            StreamStep::KeepOnly(members) => {
                self.streams
                    .retain(|(origin, _), _| members.contains(origin));
            }
        }
        Ok(())
    }

    /// Drops what was staged and not committed (a crash).
    pub fn roll_back_uncommitted(&mut self) {
        self.staged.clear();
    }

    /// Checks that nothing later than `seqno` wrote what it changes.
    fn check(&self, seqno: Seqno, ops: &[Op]) -> Result<(), String> {
        let mut copy = KvDb {
            rows: BTreeMap::new(),
            ..KvDb::default()
        };
        for op in ops {
            match op {
                Op::Put { table, row, .. } => {
                    if let Some(existing) = self.rows.get(&(table.clone(), row.clone())) {
                        copy.rows.insert((table.clone(), row.clone()), *existing);
                    }
                }
                Op::Truncate { table } => {
                    for (key, existing) in self.rows.iter().filter(|((t, _), _)| t == table) {
                        copy.rows.insert(key.clone(), *existing);
                    }
                }
                Op::Filler(_) => {}
            }
        }
        copy.apply(seqno, ops)
    }

    /// Applies the changes of the write-set ordered at `seqno`.
    fn apply(&mut self, seqno: Seqno, ops: &[Op]) -> Result<(), String> {
        for op in ops {
            match op {
                Op::Put { table, row, value } => {
                    let key = (table.clone(), row.clone());
                    if let Some(existing) = self.rows.get(&key) {
                        if existing.version > seqno {
                            return Err(format!(
                                "write-set {seqno:?} applied over {table}/{row} written by later \
                                 {:?}: depends_on let it run too early",
                                existing.version
                            ));
                        }
                    }
                    self.rows.insert(
                        key,
                        Row {
                            value: *value,
                            version: seqno,
                        },
                    );
                }
                Op::Filler(_) => {}
                Op::Truncate { table } => {
                    if let Some(newer) = self
                        .rows
                        .iter()
                        .find(|((t, _), row)| t == table && row.version > seqno)
                    {
                        return Err(format!(
                            "truncate {seqno:?} of {table} ran after later write {:?}",
                            newer.1.version
                        ));
                    }
                    self.rows.retain(|(t, _), _| t != table);
                    self.truncated.insert(table.clone(), seqno);
                }
            }
        }
        Ok(())
    }

    /// The first difference from `other`, for failure reports.
    pub fn difference(&self, other: &KvDb) -> String {
        if self.history != other.history {
            return format!("history {} / {}", self.history, other.history);
        }
        if self.committed != other.committed {
            return format!("committed {:?} / {:?}", self.committed, other.committed);
        }
        if self.streams != other.streams {
            return format!("streams {:?} / {:?}", self.streams, other.streams);
        }
        if self.truncated != other.truncated {
            return format!("truncated {:?} / {:?}", self.truncated, other.truncated);
        }
        for (key, row) in &self.rows {
            if other.rows.get(key) != Some(row) {
                return format!("row {key:?}: {row:?} / {:?}", other.rows.get(key));
            }
        }
        for (key, row) in &other.rows {
            if !self.rows.contains_key(key) {
                return format!("row {key:?}: none / {row:?}");
            }
        }
        format!("staged {:?} / {:?}", self.staged.len(), other.staged.len())
    }

    /// True if an acknowledged write of `value` at `seqno` is still reflected.
    pub fn reflects(&self, seqno: Seqno, table: &str, row: &str) -> bool {
        let overwritten_or_kept = self
            .rows
            .get(&(table.to_owned(), row.to_owned()))
            .is_some_and(|r| r.version >= seqno);
        let truncated_later = self.truncated.get(table).is_some_and(|t| *t > seqno);
        overwritten_or_kept || truncated_later
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(row: &str, value: u64) -> Op {
        Op::Put {
            table: "t".into(),
            row: row.into(),
            value,
        }
    }

    #[test]
    fn writes_out_of_dependency_order_are_caught() {
        let mut db = KvDb::default();
        let none = || StreamStep::None;
        db.stage(Seqno(2), vec![put("a", 1)], none()).unwrap();
        assert!(
            db.stage(Seqno(3), vec![put("a", 2)], none()).is_err(),
            "2 is not committed yet"
        );
        db.stage(Seqno(3), vec![put("b", 2)], none()).unwrap();
        db.commit_upto(Seqno(3)).unwrap();
        assert!(
            db.stage(Seqno(3), vec![put("c", 3)], none()).is_err(),
            "committed"
        );
        db.stage(Seqno(5), vec![put("a", 5)], none()).unwrap();
        db.commit_upto(Seqno(5)).unwrap();
        assert!(db.check(Seqno(4), &[put("a", 4)]).is_err(), "5 wrote it");
        db.stage(Seqno(6), vec![Op::Truncate { table: "t".into() }], none())
            .unwrap();
        db.commit_upto(Seqno(6)).unwrap();
        assert!(
            db.reflects(Seqno(5), "t", "a"),
            "truncated by a later statement"
        );
        assert!(!db.reflects(Seqno(7), "t", "a"));
        db.stage(Seqno(7), vec![put("x", 7)], none()).unwrap();
        db.roll_back_uncommitted();
        db.commit_upto(Seqno(7)).unwrap();
        assert!(!db.reflects(Seqno(7), "t", "x"), "lost in the crash");
        let stream = (Uuid([1; 16]), 9);
        db.stage(Seqno(8), vec![put("s", 8)], StreamStep::Fragment(stream))
            .unwrap();
        db.commit_upto(Seqno(8)).unwrap();
        assert!(
            !db.reflects(Seqno(8), "t", "s"),
            "a fragment writes at its commit"
        );
        db.stage(Seqno(9), vec![put("u", 9)], StreamStep::Commit(stream))
            .unwrap();
        db.commit_upto(Seqno(9)).unwrap();
        assert!(db.reflects(Seqno(9), "t", "s") && db.reflects(Seqno(9), "t", "u"));
        assert!(db.streams.is_empty());
        assert_eq!(decode_ops(&encode_ops(&[put("x", 3)])), vec![put("x", 3)]);
    }
}
