//! A write-set's keys, kept in the form they travel in.
//!
//! A received write-set's keys are checked once when it is decoded and then read in place: a
//! DELETE of 800,000 rows carries 800,000 keys of three parts each, and decoding them into a
//! vector per key and per part cost 3.2 million allocations (170 MB of fresh memory) on every
//! node, after the write-set had its seqno and before it could be certified.
//!
//! Encoding of one key (little endian): type (1), part count (2), then per part its length (2)
//! and its bytes.

use std::fmt;

use base::KeyType;
use bytes::Bytes;

use crate::DecodeError;

/// One key, built part by part: a list of parts (database, table, primary key bytes, ...)
/// and its type.
///
/// Certification treats every proper prefix of `parts` as an implicit shared "branch" key, so
/// a table-level exclusive key meets every row key of that table.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct Key {
    /// The key parts, outermost first.
    pub parts: Vec<Vec<u8>>,
    /// How the transaction used the key.
    pub key_type: KeyType,
}

impl Key {
    /// A key from string parts, for tests and tools.
    pub fn new<P: AsRef<[u8]>>(parts: &[P], key_type: KeyType) -> Key {
        Key {
            parts: parts.iter().map(|p| p.as_ref().to_vec()).collect(),
            key_type,
        }
    }
}

/// The keys of a write-set, encoded back to back.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keys {
    section: Bytes,
    count: usize,
}

impl Keys {
    /// The keys of `keys`, encoded.
    pub fn from_keys(keys: &[Key]) -> Keys {
        let mut section = Vec::with_capacity(section_len(keys));
        for key in keys {
            encode_key(key, &mut section);
        }
        Keys {
            section: section.into(),
            count: keys.len(),
        }
    }

    /// Keys already checked by [`Keys::check`].
    pub(crate) fn checked(section: Bytes, count: usize) -> Keys {
        Keys { section, count }
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The keys, in the order the transaction added them.
    pub fn iter(&self) -> KeyIter<'_> {
        KeyIter {
            rest: &self.section,
            left: self.count,
        }
    }

    /// The keys as built keys, for tests and tools.
    pub fn to_keys(&self) -> Vec<Key> {
        self.iter()
            .map(|key| Key {
                parts: key.parts.map(<[u8]>::to_vec).collect(),
                key_type: key.key_type,
            })
            .collect()
    }

    /// The encoded keys.
    pub(crate) fn section(&self) -> &[u8] {
        &self.section
    }

    /// Checks that `bytes` starts with `count` well-formed keys; returns how many bytes they
    /// take.
    pub(crate) fn check(bytes: &[u8], count: usize) -> Result<usize, DecodeError> {
        let mut pos = 0;
        for _ in 0..count {
            pos = key_end(bytes, pos)?;
        }
        Ok(pos)
    }
}

/// Where the key that starts at `pos` of `bytes` ends, once its type and lengths are checked.
fn key_end(bytes: &[u8], mut pos: usize) -> Result<usize, DecodeError> {
    let type_byte = *bytes
        .get(pos)
        .ok_or_else(|| truncated(pos + 1, bytes.len()))?;
    KeyType::from_u8(type_byte).ok_or(DecodeError::UnknownKeyType(type_byte))?;
    let part_count = read_u16(bytes, pos + 1)?;
    pos += 3;
    for _ in 0..part_count {
        let part_len = read_u16(bytes, pos)? as usize;
        pos += 2 + part_len;
        if pos > bytes.len() {
            return Err(truncated(pos, bytes.len()));
        }
    }
    Ok(pos)
}

impl From<Vec<Key>> for Keys {
    fn from(keys: Vec<Key>) -> Keys {
        Keys::from_keys(&keys)
    }
}

impl FromIterator<Key> for Keys {
    fn from_iter<I: IntoIterator<Item = Key>>(keys: I) -> Keys {
        Keys::from_keys(&keys.into_iter().collect::<Vec<_>>())
    }
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// How many bytes `keys` take encoded.
pub(crate) fn section_len(keys: &[Key]) -> usize {
    keys.iter()
        .map(|k| 1 + 2 + k.parts.iter().map(|p| 2 + p.len()).sum::<usize>())
        .sum()
}

/// Appends `key`, encoded, to `out`.
pub(crate) fn encode_key(key: &Key, out: &mut Vec<u8>) {
    out.push(key.key_type as u8);
    out.extend_from_slice(&crate::len_u16(key.parts.len()).to_le_bytes());
    for part in &key.parts {
        out.extend_from_slice(&crate::len_u16(part.len()).to_le_bytes());
        out.extend_from_slice(part);
    }
}

fn truncated(needed: usize, got: usize) -> DecodeError {
    DecodeError::Truncated { needed, got }
}

fn read_u16(bytes: &[u8], at: usize) -> Result<u16, DecodeError> {
    let two = bytes
        .get(at..at + 2)
        .ok_or_else(|| truncated(at + 2, bytes.len()))?;
    Ok(u16::from_le_bytes([two[0], two[1]]))
}

/// One key of a [`Keys`], read in place.
#[derive(Clone)]
pub struct KeyRef<'a> {
    /// How the transaction used the key.
    pub key_type: KeyType,
    /// The key parts, outermost first.
    pub parts: Parts<'a>,
}

impl fmt::Debug for KeyRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<_> = self.parts.clone().map(String::from_utf8_lossy).collect();
        write!(f, "{:?}{parts:?}", self.key_type)
    }
}

/// The keys of a [`Keys`], in order.
pub struct KeyIter<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = KeyRef<'a>;

    fn next(&mut self) -> Option<KeyRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked when the keys were decoded (or encoded here): well formed throughout.
        let end = key_end(self.rest, 0).expect("a checked key");
        let (key, rest) = self.rest.split_at(end);
        self.rest = rest;
        let key_type = KeyType::from_u8(key[0]).expect("a checked key type");
        let part_count = u16::from_le_bytes([key[1], key[2]]);
        let parts = &key[3..];
        Some(KeyRef {
            key_type,
            parts: Parts {
                rest: parts,
                left: part_count,
            },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for KeyIter<'_> {}

/// The parts of one key, outermost first.
#[derive(Clone)]
pub struct Parts<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> Iterator for Parts<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let len = u16::from_le_bytes([self.rest[0], self.rest[1]]) as usize;
        let (part, rest) = self.rest[2..].split_at(len);
        self.rest = rest;
        Some(part)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Parts<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_in_place_are_the_keys_that_were_encoded() {
        let built = vec![
            Key::new(&["db", "t1", "pk1"], KeyType::Exclusive),
            Key::new(&["db", "t2"], KeyType::Shared),
            Key::new::<&str>(&[], KeyType::Reference),
            Key::new(&["", "x"], KeyType::Update),
        ];
        let keys = Keys::from_keys(&built);
        assert_eq!(keys.len(), 4);
        assert_eq!(keys.to_keys(), built);
        assert_eq!(Keys::check(keys.section(), 4), Ok(keys.section().len()));
        assert_eq!(keys.section().len(), section_len(&built));
        let first = keys.iter().next().unwrap();
        assert_eq!(first.parts.len(), 3);
        assert_eq!(format!("{first:?}"), r#"Exclusive["db", "t1", "pk1"]"#);
    }

    #[test]
    fn a_key_section_cut_short_or_with_a_bad_type_is_refused() {
        let keys = Keys::from_keys(&[Key::new(&["db", "t", "row"], KeyType::Update)]);
        let section = keys.section();
        for len in 0..section.len() {
            assert!(
                matches!(
                    Keys::check(&section[..len], 1),
                    Err(DecodeError::Truncated { .. })
                ),
                "a section of {len} bytes accepted"
            );
        }
        let mut bad = section.to_vec();
        bad[0] = 9;
        assert_eq!(Keys::check(&bad, 1), Err(DecodeError::UnknownKeyType(9)));
    }
}
