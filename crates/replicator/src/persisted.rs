//! What the node keeps on disk between runs, written at the moments that matter: the saved
//! position (`grastate.dat`) and the identity it comes back under after a crash.

use base::{Gtid, Seqno, Uuid};

use crate::app::LogLevel;
use base::grastate::{SavedState, FILE_NAME};

use crate::shared::{lock, Shared};
use crate::{membership_file, saved_state};

/// The identity saved in the node's state directory, if any.
pub(crate) fn membership_file_of(shared: &Shared) -> Option<group::restart::SavedMembership> {
    membership_file::load(shared.settings.state_dir.as_ref()?)
}

/// Forgets the identity saved to come back after a crash: the node left (cleanly, or
/// because its data differs) and must not come back as the member it was.
pub(crate) fn forget_membership(shared: &Shared) {
    if let Some(dir) = &shared.settings.state_dir {
        if let Err(error) = membership_file::forget(dir) {
            let message = format!("cannot remove {}: {error}", membership_file::FILE_NAME);
            shared.app.log(LogLevel::Warning, &message);
        }
    }
}

/// Writes `grastate.dat` (when the node keeps one); a failure is logged, not fatal.
pub(crate) fn save_state(shared: &Shared, state: SavedState) {
    let Some(dir) = &shared.settings.state_dir else {
        return;
    };
    if let Err(error) = saved_state::store(&state, dir) {
        let message = format!("cannot write {}: {error}", dir.join(FILE_NAME).display());
        shared.app.log(LogLevel::Warning, &message);
    }
}

/// Marks the saved state "running in history `cluster`" (seqno -1): after a crash the
/// position is recovered from the storage engine, and the uuid says which history it is in.
/// `sole_member`: this node is the whole primary component, so that after a crash it may
/// found the cluster again (`safe_to_bootstrap: 1`, as Galera writes it). A position
/// cleared by a lost consistency vote stays cleared.
pub(crate) fn save_running_state(shared: &Shared, cluster: Uuid, sole_member: bool) {
    if lock(&shared.inner).votes.inconsistent {
        return;
    }
    save_state(
        shared,
        SavedState {
            position: Gtid {
                cluster,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: sole_member,
        },
    );
}
