//! A member that comes back under its saved identity after its process died (`kill -9`, a
//! power loss), as Galera's `pc.recovery` brings a node back into the component it left.
//!
//! Trireme keeps the Raft log in memory, so a restarted process has lost its log: a voter
//! that forgot what it acknowledged may help elect a leader that lacks a committed entry.
//! That cannot happen in a configuration of two voters: an entry commits only once both hold
//! it, so the only other voter holds every committed entry, and it is the only candidate the
//! returning member can ever vote for. With three or more voters a restarted process joins
//! as a new member (the others evict the old one), and the saved identity is not used.
//!
//! The returning member never campaigns while it has no state of its own (it would found
//! nothing but an empty group): it only answers the survivor, whose election brings it back
//! and sends it the group state. If nobody brings it back within [`COME_BACK_TICKS_PER_SUSPECT`]
//! suspect timeouts (the group moved on without it, or the survivor is gone too), it joins
//! as a new member.

use base::Uuid;
use serde::{Deserialize, Serialize};

/// The only configuration size in which a restarted member may come back as itself.
pub const COME_BACK_VOTERS: usize = 2;

/// How many `evs.suspect_timeout`s a returning member waits to be brought back.
pub const COME_BACK_TICKS_PER_SUSPECT: u64 = 2;

/// What a member saves to come back as itself after a crash: written while it is in a
/// primary component of [`COME_BACK_VOTERS`] voters, forgotten when it leaves cleanly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedMembership {
    /// Its Raft id.
    pub raft_id: u64,
    /// Its member UUID.
    pub uuid: Uuid,
    /// The other voter: Raft id and group address.
    pub peer: (u64, String),
}

impl SavedMembership {
    /// The file's text: one `key: value` per line, like `grastate.dat`.
    pub fn render(&self) -> String {
        format!(
            "# Trireme member identity (for a restart after a crash)\nversion: 1\n\
             raft_id: {}\nuuid: {}\npeer_raft_id: {}\npeer_address: {}\n",
            self.raft_id, self.uuid, self.peer.0, self.peer.1
        )
    }

    /// Parses [`SavedMembership::render`]'s text; `None` if any field is missing or bad.
    pub fn parse(text: &str) -> Option<SavedMembership> {
        let field = |key: &str| {
            text.lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_owned())
        };
        if field("version")? != "1" {
            return None;
        }
        let raft_id: u64 = field("raft_id")?.parse().ok()?;
        let peer_id: u64 = field("peer_raft_id")?.parse().ok()?;
        let uuid = Uuid::parse(&field("uuid")?).ok()?;
        let address = field("peer_address")?;
        let valid = raft_id != 0 && peer_id != 0 && raft_id != peer_id && !address.is_empty();
        valid.then_some(SavedMembership {
            raft_id,
            uuid,
            peer: (peer_id, address),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_saved_identity_reads_back_and_damage_is_refused() {
        let saved = SavedMembership {
            raft_id: 7,
            uuid: Uuid::NIL,
            peer: (9, "127.0.0.1:4567".into()),
        };
        assert_eq!(SavedMembership::parse(&saved.render()), Some(saved.clone()));
        let text = saved.render();
        assert_eq!(
            SavedMembership::parse(&text.replace("raft_id: 7", "raft_id: x")),
            None
        );
        assert_eq!(
            SavedMembership::parse(&text.replace("peer_raft_id: 9", "peer_raft_id: 7")),
            None
        );
        assert_eq!(
            SavedMembership::parse(&text.replace("version: 1", "version: 2")),
            None
        );
        assert_eq!(SavedMembership::parse(""), None);
    }
}
