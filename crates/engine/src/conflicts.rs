//! Certification conflicts explained: which table and key each failed write-set collided
//! on, logged one by one under `cert.log_conflicts` and tallied by table for the status
//! page and the metrics.

use std::collections::BTreeMap;

use base::Seqno;
use cert::{Conflict, Verdict};
use writeset::WriteSet;

use crate::{LogLevel, NodeEngine};

/// How many tables the tally keeps; when a new one arrives past this, the one with the
/// fewest conflicts is forgotten, so a schema with many tables cannot grow it without bound.
pub const CONFLICT_TABLES_KEPT: usize = 64;

/// Key bytes shown in a log line; a longer key is cut with its length given.
const KEY_BYTES_SHOWN: usize = 64;

/// The table a conflict was on when its key does not name one (a database-level key).
const NO_TABLE: &str = "(none)";

/// Certification conflicts by table (`db.table`), since the node started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConflictTally {
    by_table: BTreeMap<String, u64>,
    /// Conflicts of tables dropped from the tally to keep it bounded.
    forgotten: u64,
}

impl ConflictTally {
    /// Counts one conflict on `table`.
    pub fn count(&mut self, table: &str) {
        if let Some(count) = self.by_table.get_mut(table) {
            *count += 1;
            return;
        }
        if self.by_table.len() == CONFLICT_TABLES_KEPT {
            let coldest = self
                .by_table
                .iter()
                .min_by_key(|(_, count)| **count)
                .map(|(name, count)| (name.clone(), *count));
            if let Some((name, count)) = coldest {
                self.by_table.remove(&name);
                self.forgotten += count;
            }
        }
        self.by_table.insert(table.to_owned(), 1);
        debug_assert!(self.by_table.len() <= CONFLICT_TABLES_KEPT);
    }

    /// The tables with the most conflicts, most first (ties in name order), at most `n`.
    pub fn hottest(&self, n: usize) -> Vec<(String, u64)> {
        let mut tables: Vec<(String, u64)> = self
            .by_table
            .iter()
            .map(|(name, count)| (name.clone(), *count))
            .collect();
        tables.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        tables.truncate(n);
        tables
    }

    /// Conflicts counted on tables no longer in the tally.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

/// A key as MariaDB builds it, `[db, table, row key]`, for people: the table as
/// `db.table`, and the row's key bytes as text when they are printable, else in hex.
pub fn describe_key(parts: &[&[u8]]) -> (String, String) {
    let name = |part: &[u8]| String::from_utf8_lossy(part).into_owned();
    let table = match parts {
        [db, table, ..] => format!("{}.{}", name(db), name(table)),
        [db] => format!("{}.{NO_TABLE}", name(db)),
        [] => NO_TABLE.to_owned(),
    };
    let row = parts.get(2..).unwrap_or_default();
    let key = row.iter().map(|part| show_bytes(part)).collect::<Vec<_>>();
    (table, key.join(","))
}

fn show_bytes(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(KEY_BYTES_SHOWN)];
    let cut = if shown.len() < bytes.len() {
        format!("... ({} bytes)", bytes.len())
    } else {
        String::new()
    };
    if shown.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("'{}'{cut}", String::from_utf8_lossy(shown))
    } else {
        let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{cut}")
    }
}

impl NodeEngine {
    /// `cert.log_conflicts`: whether each conflict is logged.
    pub fn set_log_conflicts(&mut self, on: bool) {
        self.log_conflicts = on;
    }

    /// Tallies (and logs, when asked) the conflict a write-set failed on.
    pub(crate) fn note_conflict(&mut self, seqno: Seqno, write_set: &WriteSet, verdict: &Verdict) {
        let Verdict::Fail(conflict) = verdict else {
            return;
        };
        let named = match conflict {
            Conflict::Key { with, .. } => self
                .certifier
                .as_ref()
                .and_then(|cert| cert.conflicting_key(write_set, *with))
                .map(|parts| describe_key(&parts)),
            Conflict::TooOld { .. } | Conflict::TooLong { .. } => None,
        };
        let table = named.as_ref().map_or(NO_TABLE, |(table, _)| table.as_str());
        self.stats.conflicts.count(table);
        if self.log_conflicts {
            let on = named.map_or(String::new(), |(table, key)| {
                format!(" on table {table} key ({key})")
            });
            let message = format!(
                "certification conflict: write-set {seqno} (transaction {} of {}){on}: \
                 {conflict}",
                write_set.trx_id, write_set.source
            );
            self.say(LogLevel::Info, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_stays_bounded_and_keeps_the_hottest() {
        let mut tally = ConflictTally::default();
        for _ in 0..5 {
            tally.count("db.hot");
        }
        for n in 0..CONFLICT_TABLES_KEPT + 3 {
            tally.count(&format!("db.t{n:03}"));
        }
        let hottest = tally.hottest(2);
        assert_eq!(hottest[0], ("db.hot".to_owned(), 5));
        assert_eq!(hottest[1].1, 1);
        assert_eq!(tally.hottest(usize::MAX).len(), CONFLICT_TABLES_KEPT);
        assert_eq!(
            tally.forgotten(),
            4,
            "four tables of one conflict each made room"
        );
    }

    #[test]
    fn keys_are_shown_as_mariadb_built_them() {
        let parts = |p: &[&'static [u8]]| p.to_vec();
        assert_eq!(
            describe_key(&parts(&[b"sbtest", b"sbtest1", &[1, 0, 0, 0]])),
            ("sbtest.sbtest1".to_owned(), "0x01000000".to_owned())
        );
        assert_eq!(
            describe_key(&parts(&[b"shop", b"orders", b"A-17"])),
            ("shop.orders".to_owned(), "'A-17'".to_owned())
        );
        assert_eq!(
            describe_key(&parts(&[b"shop", b"orders"])),
            ("shop.orders".to_owned(), String::new())
        );
        let long = describe_key(&parts(&[b"d", b"t", &[7u8; 100]])).1;
        assert!(long.ends_with("... (100 bytes)"), "{long}");
    }
}
