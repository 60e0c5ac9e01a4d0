//! Naming the key behind a certification conflict, for `cert.log_conflicts` and the
//! conflict tallies. Certification itself only keeps hashes of key paths; this finds which
//! of a failed write-set's keys hashed to the path the conflict was found on.

use base::{KeyType, Seqno};
use writeset::WriteSet;

use crate::{relation, Certifier, PathState, Relation, STRONGEST_FIRST};

impl Certifier {
    /// The parts of `ws`'s key (down to the level that collided: a table-level key of a
    /// TOI write-set collides at `[db, table]`) that `with` holds in the index in a way
    /// that conflicts, right after `ws` failed certification against `with`. `None` when
    /// `with` no longer holds any of them (it was purged since).
    ///
    /// Each key is examined deepest level first, so a row is named rather than the table
    /// branch it shares with the row before.
    pub fn conflicting_key<'w>(&self, ws: &'w WriteSet, with: Seqno) -> Option<Vec<&'w [u8]>> {
        for key in ws.keys.iter() {
            let parts: Vec<&'w [u8]> = key.parts.collect();
            let mut state = PathState::ROOT;
            let prefixes: Vec<_> = parts
                .iter()
                .map(|part| {
                    state = state.part(part);
                    state.finish()
                })
                .collect();
            for (level, path) in prefixes.iter().enumerate().rev() {
                let incoming = if level + 1 == parts.len() {
                    key.key_type
                } else {
                    KeyType::Shared
                };
                let Some(slots) = self.index.get(path) else {
                    continue;
                };
                let collides = STRONGEST_FIRST.into_iter().any(|found| {
                    slots.0[found as usize] == with.0
                        && relation(found, incoming) == Relation::Conflict
                });
                if collides {
                    return Some(parts[..=level].to_vec());
                }
            }
        }
        None
    }
}
