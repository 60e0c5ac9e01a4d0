//! Locating the rows two nodes disagree on, once their checksums of a table differ.
//!
//! The primary key range is cut into [`FANOUT`] buckets; each node sums a hash of every
//! row per bucket in one query, and the search goes on in the lowest bucket that differs
//! until the range is small enough to list ([`LISTED_RANGE`]). A table of a million rows
//! takes five rounds. Only tables whose primary key is one integer column can be cut this
//! way; for others the report says so.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::Cluster;

/// Buckets per round of the search.
const FANOUT: i128 = 16;
/// A key range this small is listed row by row.
const LISTED_RANGE: i128 = 32;
/// At most this many differing rows are reported per table and node.
const ROWS_SHOWN: usize = 10;
/// A row's text is cut to this many characters in the report.
const ROW_TEXT_CHARS: usize = 160;
/// Integer column types a key range can be cut on.
const INTEGER_TYPES: [&str; 5] = ["tinyint", "smallint", "mediumint", "int", "bigint"];

const _: () = assert!(FANOUT >= 2 && LISTED_RANGE >= FANOUT && ROWS_SHOWN > 0);

/// `schema.table` as a quoted identifier pair.
pub(crate) fn quoted_table(table: &str) -> String {
    match table.split_once('.') {
        Some((schema, name)) => format!("{}.{}", quoted(schema), quoted(name)),
        None => quoted(table),
    }
}

fn quoted(identifier: &str) -> String {
    format!("`{}`", identifier.replace('`', "``"))
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// What the search needs to know of a table.
struct Shape {
    table: String,
    /// The primary key column, quoted.
    key: String,
    /// Every column, quoted, in table order.
    columns: Vec<String>,
}

impl Shape {
    /// An order-independent hash of one row, NULLs told apart from empty strings.
    fn row_hash(&self) -> String {
        let nulls: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("ISNULL({c})"))
            .collect();
        format!(
            "CRC32(CONCAT_WS(0x1f, {}, CONCAT({})))",
            self.columns.join(", "),
            nulls.join(", ")
        )
    }

    /// One row as text for the report.
    fn row_text(&self) -> String {
        let values: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("IFNULL(QUOTE({c}), 'NULL')"))
            .collect();
        format!("CONCAT_WS(', ', {})", values.join(", "))
    }
}

/// Up to [`ROWS_SHOWN`] lines naming the first rows (by primary key) in which `node`'s
/// `table` differs from `reference`'s.
pub(crate) fn first_differing_rows(
    cluster: &Cluster,
    table: &str,
    reference: usize,
    node: usize,
) -> Result<Vec<String>> {
    let shape = shape(cluster, reference, table)?;
    let (Some(a), Some(b)) = (
        key_bounds(cluster, reference, &shape)?,
        key_bounds(cluster, node, &shape)?,
    ) else {
        let empty = if key_bounds(cluster, reference, &shape)?.is_none() {
            reference
        } else {
            node
        };
        return Ok(vec![format!("node{empty} has no rows in {table}")]);
    };
    let (mut lo, mut hi) = (a.0.min(b.0), a.1.max(b.1));
    while hi - lo + 1 > LISTED_RANGE {
        let width = bucket_width(lo, hi);
        let ours = bucket_sums(cluster, reference, &shape, lo, hi, width)?;
        let theirs = bucket_sums(cluster, node, &shape, lo, hi, width)?;
        let Some(bucket) = first_differing_bucket(&ours, &theirs) else {
            return Ok(vec![format!(
                "node{node} against node{reference}: the checksums differ but every row \
                 hashes alike between keys {lo} and {hi}"
            )]);
        };
        lo += bucket * width;
        hi = hi.min(lo + width - 1);
    }
    let ours = rows(cluster, reference, &shape, lo, hi)?;
    let theirs = rows(cluster, node, &shape, lo, hi)?;
    let key_name = shape.key.trim_matches('`');
    let lines = diff_rows(key_name, &ours, &theirs, reference, node);
    if lines.is_empty() {
        bail!("the keys {lo}..={hi} that hash differently list alike");
    }
    Ok(lines)
}

fn shape(cluster: &Cluster, node: usize, table: &str) -> Result<Shape> {
    let (schema, name) = table
        .split_once('.')
        .with_context(|| format!("{table:?} is not schema.table"))?;
    let (schema, name) = (literal(schema), literal(name));
    let columns = cluster.sql(
        node,
        &format!(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = {schema} AND TABLE_NAME = {name} ORDER BY ORDINAL_POSITION"
        ),
    )?;
    let key = cluster.sql(
        node,
        &format!(
            "SELECT s.COLUMN_NAME, c.DATA_TYPE FROM information_schema.STATISTICS s \
             JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA \
             AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME \
             WHERE s.TABLE_SCHEMA = {schema} AND s.TABLE_NAME = {name} \
             AND s.INDEX_NAME = 'PRIMARY' ORDER BY s.SEQ_IN_INDEX"
        ),
    )?;
    let key: Vec<(&str, &str)> = key.lines().filter_map(|l| l.split_once('\t')).collect();
    let [(key, data_type)] = key.as_slice() else {
        bail!("{table} has no primary key of one column to cut ranges on");
    };
    if !INTEGER_TYPES.contains(data_type) {
        bail!("{table}'s primary key {key} is {data_type}, not an integer");
    }
    Ok(Shape {
        table: quoted_table(table),
        key: quoted(key),
        columns: columns.lines().map(quoted).collect(),
    })
}

fn key_bounds(cluster: &Cluster, node: usize, shape: &Shape) -> Result<Option<(i128, i128)>> {
    let out = cluster.sql(
        node,
        &format!("SELECT MIN({0}), MAX({0}) FROM {1}", shape.key, shape.table),
    )?;
    let Some((min, max)) = out.trim().split_once('\t') else {
        bail!("unexpected answer to MIN/MAX on node{node}: {out:?}");
    };
    if min == "NULL" {
        return Ok(None);
    }
    Ok(Some((parse_key(min)?, parse_key(max)?)))
}

fn parse_key(text: &str) -> Result<i128> {
    text.parse()
        .with_context(|| format!("{text:?} is not an integer key"))
}

/// The bucket width that cuts `lo..=hi` into at most [`FANOUT`] buckets.
fn bucket_width(lo: i128, hi: i128) -> i128 {
    assert!(hi >= lo, "an empty key range {lo}..={hi}");
    ((hi - lo + 1) + FANOUT - 1) / FANOUT
}

/// Per bucket of `lo..=hi`: the row count and the sum of row hashes.
fn bucket_sums(
    cluster: &Cluster,
    node: usize,
    shape: &Shape,
    lo: i128,
    hi: i128,
    width: i128,
) -> Result<BTreeMap<i128, String>> {
    let out = cluster.sql(
        node,
        &format!(
            "SELECT ({key} - {lo}) DIV {width}, CONCAT(COUNT(*), '/', SUM({hash})) FROM {table} \
             WHERE {key} BETWEEN {lo} AND {hi} GROUP BY 1",
            key = shape.key,
            hash = shape.row_hash(),
            table = shape.table
        ),
    )?;
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(bucket, sums)| Ok((parse_key(bucket)?, sums.to_string())))
        .collect()
}

/// The lowest bucket whose count or hash sum differs (or that only one side has).
fn first_differing_bucket(
    ours: &BTreeMap<i128, String>,
    theirs: &BTreeMap<i128, String>,
) -> Option<i128> {
    ours.keys()
        .chain(theirs.keys())
        .filter(|bucket| ours.get(bucket) != theirs.get(bucket))
        .min()
        .copied()
}

/// The rows with keys in `lo..=hi`, by key: `(hash, text)`.
fn rows(
    cluster: &Cluster,
    node: usize,
    shape: &Shape,
    lo: i128,
    hi: i128,
) -> Result<BTreeMap<i128, (String, String)>> {
    let out = cluster.sql(
        node,
        &format!(
            "SELECT {key}, {hash}, {text} FROM {table} WHERE {key} BETWEEN {lo} AND {hi}",
            key = shape.key,
            hash = shape.row_hash(),
            text = shape.row_text(),
            table = shape.table
        ),
    )?;
    out.lines()
        .filter_map(|l| {
            let mut fields = l.splitn(3, '\t');
            Some((fields.next()?, fields.next()?, fields.next()?))
        })
        .map(|(key, hash, text)| Ok((parse_key(key)?, (hash.to_string(), text.to_string()))))
        .collect()
}

/// The differing rows of two listings, in key order, at most [`ROWS_SHOWN`].
fn diff_rows(
    key_name: &str,
    ours: &BTreeMap<i128, (String, String)>,
    theirs: &BTreeMap<i128, (String, String)>,
    reference: usize,
    node: usize,
) -> Vec<String> {
    let mut keys: Vec<&i128> = ours.keys().chain(theirs.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| match (ours.get(key), theirs.get(key)) {
            (Some((a, _)), Some((b, _))) if a == b => None,
            (Some((_, a)), Some((_, b))) => Some(format!(
                "{key_name}={key}: node{reference} ({}), node{node} ({})",
                cut(a),
                cut(b)
            )),
            (Some((_, a)), None) => Some(format!(
                "{key_name}={key}: only on node{reference} ({})",
                cut(a)
            )),
            (None, Some((_, b))) => {
                Some(format!("{key_name}={key}: only on node{node} ({})", cut(b)))
            }
            (None, None) => None,
        })
        .take(ROWS_SHOWN)
        .collect()
}

fn cut(text: &str) -> String {
    if text.chars().count() <= ROW_TEXT_CHARS {
        return text.to_string();
    }
    let mut short: String = text.chars().take(ROW_TEXT_CHARS).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_and_escaped() {
        assert_eq!(quoted_table("sbtest.sbtest1"), "`sbtest`.`sbtest1`");
        assert_eq!(quoted_table("a`b.c"), "`a``b`.`c`");
        assert_eq!(literal("it's"), "'it''s'");
    }

    #[test]
    fn buckets_cover_the_range_and_shrink_it() {
        assert_eq!(bucket_width(1, 1_000_000), 62_500);
        assert_eq!(bucket_width(1, 17), 2, "17 keys need 16 buckets of 2");
        let (lo, hi) = (5, 1_000_004);
        let width = bucket_width(lo, hi);
        assert!(width * FANOUT > hi - lo, "the buckets reach the top key");
    }

    fn sums(entries: &[(i128, &str)]) -> BTreeMap<i128, String> {
        entries.iter().map(|(b, s)| (*b, s.to_string())).collect()
    }

    #[test]
    fn the_lowest_differing_bucket_is_chosen() {
        let ours = sums(&[(0, "5/10"), (1, "5/11"), (3, "5/12")]);
        assert_eq!(first_differing_bucket(&ours, &ours), None);
        let theirs = sums(&[(0, "5/10"), (1, "5/99"), (2, "1/1"), (3, "5/12")]);
        assert_eq!(first_differing_bucket(&ours, &theirs), Some(1));
        let missing_low = sums(&[(1, "5/11"), (3, "5/12")]);
        assert_eq!(first_differing_bucket(&ours, &missing_low), Some(0));
    }

    fn listing(entries: &[(i128, &str, &str)]) -> BTreeMap<i128, (String, String)> {
        entries
            .iter()
            .map(|(k, h, t)| (*k, (h.to_string(), t.to_string())))
            .collect()
    }

    #[test]
    fn differing_rows_are_named_by_key_and_side() {
        let ours = listing(&[(1, "a", "1, 'x'"), (2, "b", "2, 'y'"), (4, "d", "4, 'w'")]);
        let theirs = listing(&[(1, "a", "1, 'x'"), (2, "c", "2, 'z'"), (3, "e", "3, 'v'")]);
        assert_eq!(
            diff_rows("id", &ours, &theirs, 1, 3),
            [
                "id=2: node1 (2, 'y'), node3 (2, 'z')",
                "id=3: only on node3 (3, 'v')",
                "id=4: only on node1 (4, 'w')",
            ]
        );
    }

    #[test]
    fn at_most_a_screenful_of_rows_is_reported() {
        let ours: BTreeMap<i128, (String, String)> =
            (0..50).map(|k| (k, ("h".into(), "t".into()))).collect();
        assert_eq!(
            diff_rows("id", &ours, &BTreeMap::new(), 1, 2).len(),
            ROWS_SHOWN
        );
        let long = "x".repeat(500);
        assert_eq!(cut(&long).chars().count(), ROW_TEXT_CHARS + 1);
    }
}
