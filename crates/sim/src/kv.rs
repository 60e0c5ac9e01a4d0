//! The toy database the simulator's nodes apply write-sets to.
//!
//! Every row remembers the seqno of the write-set that wrote it last, so applying a write-set
//! over a row written by a *later* seqno (the sign of a wrong `depends_on`) is caught on the
//! spot instead of surfacing as a vague difference at the end.

use std::collections::BTreeMap;

use base::Seqno;
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvDb {
    /// Rows by (table, row).
    pub rows: BTreeMap<(String, String), Row>,
    /// Seqno of the last truncate of each table.
    pub truncated: BTreeMap<String, Seqno>,
    /// The last committed seqno.
    pub committed: Seqno,
}

impl KvDb {
    /// Applies the changes of the write-set ordered at `seqno`.
    pub fn apply(&mut self, seqno: Seqno, ops: &[Op]) -> Result<(), String> {
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

    /// Marks `seqno` committed; commits must come in seqno order.
    pub fn commit(&mut self, seqno: Seqno) -> Result<(), String> {
        if seqno != self.committed.next() {
            return Err(format!(
                "commit of {seqno:?} out of order: last committed is {:?}",
                self.committed
            ));
        }
        self.committed = seqno;
        Ok(())
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
    fn out_of_order_writes_and_commits_are_caught() {
        let mut db = KvDb::default();
        db.apply(Seqno(5), &[put("a", 1)]).unwrap();
        assert!(db.apply(Seqno(4), &[put("a", 2)]).is_err());
        assert!(db.commit(Seqno(2)).is_err());
        db.commit(Seqno(1)).unwrap();
        db.apply(Seqno(6), &[Op::Truncate { table: "t".into() }])
            .unwrap();
        assert!(
            db.reflects(Seqno(5), "t", "a"),
            "truncated by a later statement"
        );
        assert!(!db.reflects(Seqno(7), "t", "a"));
        assert_eq!(decode_ops(&encode_ops(&[put("x", 3)])), vec![put("x", 3)]);
    }
}
