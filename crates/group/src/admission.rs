//! Proof of address for joiners, and for the nodes that answer recovery probes.
//!
//! A join names the address the joiner listens at, and the group will send it Raft traffic
//! there and count it in every quorum. Anyone can send a join naming any address, so the
//! leader first sends a challenge to that address, and admits the joiner only once a join
//! comes back with it: only a node that receives at the address learns the challenge. A
//! forger that names a member's address, or one where nobody listens, never gets in.
//!
//! The challenge is a keyed hash (HMAC-SHA256, truncated to 64 bits) of the joiner's
//! identity and address under a secret the leader drew at start, so the leader keeps no
//! state per joiner and a flood of joins costs it no memory.
//!
//! The same key proves the answers to recovery probes (`recovery`): a probe sent to an
//! address carries the hash of that address, and only a node that received it there can
//! answer with it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::state::MemberInfo;

/// The leader's secret for challenges.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChallengeKey(pub(crate) [u64; 2]);

impl ChallengeKey {
    /// The challenge for a joiner: bound to its Raft id, UUID and address.
    pub(crate) fn challenge(&self, info: &MemberInfo) -> u64 {
        let mut mac = self.mac(b"join");
        mac.update(&info.raft_id.to_le_bytes());
        mac.update(&info.uuid.0);
        mac.update(info.address.as_bytes());
        Self::truncate(mac)
    }

    /// The challenge of a recovery probe sent to `address`: only a node that receives
    /// there can answer with it (see `recovery`).
    pub(crate) fn probe_challenge(&self, address: &str) -> u64 {
        let mut mac = self.mac(b"probe");
        mac.update(address.as_bytes());
        Self::truncate(mac)
    }

    /// A MAC under this key for one purpose (its label keeps the purposes apart).
    fn mac(&self, purpose: &[u8]) -> Hmac<Sha256> {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.0[0].to_le_bytes());
        key[8..].copy_from_slice(&self.0[1].to_le_bytes());
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
        mac.update(&[purpose.len() as u8]);
        mac.update(purpose);
        mac
    }

    fn truncate(mac: Hmac<Sha256>) -> u64 {
        let digest = mac.finalize().into_bytes();
        u64::from_le_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 digest has 32 bytes"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::Uuid;

    #[test]
    fn a_challenge_is_bound_to_identity_address_and_key() {
        let key = ChallengeKey([1, 2]);
        let info = MemberInfo {
            raft_id: 7,
            uuid: Uuid([3; 16]),
            name: "n".into(),
            address: "n:4567".into(),
            incoming: String::new(),
        };
        let challenge = key.challenge(&info);
        let mut moved = info.clone();
        moved.address = "m:4567".into();
        let mut renamed = info.clone();
        renamed.raft_id = 8;
        assert_ne!(key.challenge(&moved), challenge);
        assert_ne!(key.challenge(&renamed), challenge);
        assert_ne!(ChallengeKey([1, 3]).challenge(&info), challenge);
        assert_eq!(key.challenge(&info.clone()), challenge);
    }
}
