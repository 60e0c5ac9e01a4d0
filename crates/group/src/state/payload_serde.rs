//! A write-set's bytes in the group's codecs: a `bytes::Bytes`, so that a submission can be
//! a view of a larger buffer (a chunk of the write-set, a slice of a Raft entry) instead of
//! a copy, written as one byte string (as `serde_bytes` writes a `Vec<u8>`: the encoding is
//! the same either way).

use bytes::Bytes;
use serde::{Deserializer, Serializer};

/// Writes the bytes as one byte string.
pub(crate) fn serialize<S: Serializer>(payload: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(payload)
}

/// Reads one byte string (a copy of it: decoders that can share the input use the borrowed
/// shapes instead, see `LogEntry::decode_shared`).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
    let bytes: serde_bytes::ByteBuf = serde::Deserialize::deserialize(deserializer)?;
    Ok(Bytes::from(bytes.into_vec()))
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Shared(#[serde(with = "super")] Bytes);

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Owned(#[serde(with = "serde_bytes")] Vec<u8>);

    #[test]
    fn shared_bytes_encode_as_an_owned_byte_string() {
        let payload: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let shared = crate::wire::bincode_encode(&Shared(Bytes::from(payload.clone())));
        assert_eq!(shared, crate::wire::bincode_encode(&Owned(payload.clone())));
        let back: Shared = crate::wire::bincode_decode(&shared).expect("decodes");
        assert_eq!(back.0, payload);
    }
}
