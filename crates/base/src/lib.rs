//! Vocabulary shared by every Trireme crate.
//!
//! Nothing here does I/O, reads a clock or draws unseeded randomness: time arrives as
//! [`Nanos`] values and randomness through a [`SeededRng`] the caller constructs.

pub mod freeze_purge;
pub mod grastate;
pub mod marks;
pub mod node_state;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use freeze_purge::FreezePurge;
pub use node_state::{IllegalTransition, NodeState, SYNCED_QUEUE_MAX};

/// A global sequence number: the position of an ordered action in the cluster's history.
///
/// Seqnos are assigned by the group layer, consecutively and without gaps, to every
/// write-set and every primary view change. `Seqno::UNDEFINED` (-1) is the wsrep value for
/// "no seqno" (a non-primary view, a write-set not yet ordered).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Seqno(pub i64);

impl Seqno {
    /// The wsrep "undefined" seqno.
    pub const UNDEFINED: Seqno = Seqno(-1);
    /// The seqno of a cluster before anything was ordered.
    pub const ZERO: Seqno = Seqno(0);

    /// The seqno right after this one.
    pub fn next(self) -> Seqno {
        Seqno(self.0.checked_add(1).expect("seqno overflow"))
    }

    /// The seqno right before this one (never below UNDEFINED).
    pub fn prev(self) -> Seqno {
        Seqno((self.0 - 1).max(-1))
    }

    /// True unless this is `UNDEFINED` or another negative value.
    pub fn is_defined(self) -> bool {
        self.0 >= 0
    }
}

impl fmt::Debug for Seqno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for Seqno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A 16-byte UUID, printed in the usual 8-4-4-4-12 form.
///
/// Used for the cluster state UUID and for member UUIDs. A restarted node gets a fresh
/// member UUID, which is how it is told apart from its earlier self.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID (wsrep's `WSREP_UUID_UNDEFINED`).
    pub const NIL: Uuid = Uuid([0; 16]);

    /// A UUID that sorts by the time it was made (version 7: milliseconds since the UNIX
    /// epoch, then a 12-bit fraction of the millisecond, then random bits), as Galera's
    /// time-based member UUIDs do: a view ordered by UUID lists members in the order they
    /// started, which is the order MariaDB restores a view in (`wsrep_local_index`, and the
    /// `auto_increment_offset` derived from it, must agree).
    pub fn time_ordered(unix_ns: u64, rng: &mut SeededRng) -> Uuid {
        const NS_PER_MS: u64 = 1_000_000;
        let ms = unix_ns / NS_PER_MS;
        let fraction = (unix_ns % NS_PER_MS) * 4096 / NS_PER_MS;
        debug_assert!(fraction < 4096);
        let mut bytes = Uuid::random(rng).0;
        bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        bytes[6] = 0x70 | (fraction >> 8) as u8;
        bytes[7] = fraction as u8;
        Uuid(bytes)
    }

    /// Draws a random (version 4) UUID from a seeded generator.
    pub fn random(rng: &mut SeededRng) -> Uuid {
        let mut bytes = [0u8; 16];
        rand::RngCore::fill_bytes(rng, &mut bytes);
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// Parses the 36-character textual form.
    pub fn parse(text: &str) -> Result<Uuid, UuidParseError> {
        let hex: Vec<u8> = text.bytes().filter(|b| *b != b'-').collect();
        if text.len() != 36 || hex.len() != 32 {
            return Err(UuidParseError(text.to_owned()));
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let digits = std::str::from_utf8(pair).map_err(|_| UuidParseError(text.to_owned()))?;
            bytes[i] =
                u8::from_str_radix(digits, 16).map_err(|_| UuidParseError(text.to_owned()))?;
        }
        Ok(Uuid(bytes))
    }
}

/// A string that is not a UUID.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a UUID: {0:?} (expected 8-4-4-4-12 hex digits)")]
pub struct UuidParseError(pub String);

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The first group is enough to tell members apart in logs.
        write!(
            f,
            "{:02x}{:02x}{:02x}{:02x}",
            self.0[0], self.0[1], self.0[2], self.0[3]
        )
    }
}

/// A global transaction id: cluster state UUID plus seqno (`uuid:seqno` in text).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug, Serialize, Deserialize)]
pub struct Gtid {
    /// The cluster state UUID the seqno belongs to.
    pub cluster: Uuid,
    /// The position in that cluster's history.
    pub seqno: Seqno,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.cluster, self.seqno)
    }
}

/// The wsrep v26 key types, with their ABI values (`wsrep_key_type_t`).
///
/// Ordered from weakest to strongest; certification compares them with the matrix in the
/// `cert` crate.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum KeyType {
    /// A read of the row (e.g. a parent row referenced by a foreign key check).
    Shared = 0,
    /// A reference that must not disappear underneath (foreign key child insert).
    Reference = 1,
    /// An update of the row.
    Update = 2,
    /// An exclusive write (delete, primary key change, table-level DDL).
    Exclusive = 3,
}

impl KeyType {
    /// All key types, weakest first.
    pub const ALL: [KeyType; 4] = [
        KeyType::Shared,
        KeyType::Reference,
        KeyType::Update,
        KeyType::Exclusive,
    ];

    /// Converts the ABI value; `None` for anything above 3.
    pub fn from_u8(value: u8) -> Option<KeyType> {
        KeyType::ALL.get(usize::from(value)).copied()
    }
}

/// A point in time, in nanoseconds from an arbitrary origin.
///
/// The core never reads a clock: the driver (real or simulated) passes `Nanos` in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Nanoseconds elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Nanos) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// The only source of randomness the core accepts: a ChaCha generator built from a seed,
/// so that one seed replays one run exactly.
pub type SeededRng = rand_chacha::ChaCha8Rng;

/// Builds a [`SeededRng`] from a 64-bit seed.
pub fn seeded_rng(seed: u64) -> SeededRng {
    <SeededRng as rand::SeedableRng>::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ordered_uuids_sort_by_time() {
        let mut rng = seeded_rng(3);
        let start = 1_795_000_000_123_456_789u64;
        let times = [
            start,
            start + 300,
            start + 1_000_000,
            start + 86_400_000_000_000,
        ];
        let uuids: Vec<Uuid> = times
            .iter()
            .map(|t| Uuid::time_ordered(*t, &mut rng))
            .collect();
        assert!(uuids.windows(2).all(|pair| pair[0] < pair[1]), "{uuids:?}");
        for uuid in &uuids {
            assert_eq!(uuid.0[6] >> 4, 7, "version 7");
            assert_eq!(uuid.0[8] >> 6, 0b10, "RFC 4122 variant");
        }
    }

    #[test]
    fn uuid_text_round_trips() {
        let mut rng = seeded_rng(7);
        let uuid = Uuid::random(&mut rng);
        let text = uuid.to_string();
        assert_eq!(text.len(), 36);
        assert_eq!(Uuid::parse(&text), Ok(uuid));
        assert!(Uuid::parse("not-a-uuid").is_err());
        assert!(Uuid::parse("zzzzzzzz-0000-0000-0000-000000000000").is_err());
    }

    #[test]
    fn seqno_neighbours() {
        assert_eq!(Seqno(5).next(), Seqno(6));
        assert_eq!(Seqno(0).prev(), Seqno::UNDEFINED);
        assert_eq!(Seqno::UNDEFINED.prev(), Seqno::UNDEFINED);
        assert!(!Seqno::UNDEFINED.is_defined());
    }

    #[test]
    fn key_type_abi_values() {
        for (value, key_type) in KeyType::ALL.iter().enumerate() {
            assert_eq!(*key_type as usize, value);
            assert_eq!(KeyType::from_u8(value as u8), Some(*key_type));
        }
        assert_eq!(KeyType::from_u8(4), None);
    }
}
