//! What the node keeps on disk between runs, as the engine sees it: the saved position
//! (`grastate.dat`, [`SavedState`]), the identity it comes back under after a crash in a
//! component of two ([`SavedMembership`]) and the last primary view it applied
//! ([`LastPrimaryView`], for a restore after a full crash). A real node keeps them in files next to its data
//! ([`StateStore`] in the replicator); the simulator keeps them in memory
//! ([`MemoryStateStore`]), where they outlive the node's crash as a disk would.

use std::sync::{Arc, Mutex, MutexGuard};

use base::grastate::SavedState;
use group::recovery::LastPrimaryView;
use group::restart::SavedMembership;

/// Where the saved state lives. Errors are the store's own words (a path and an OS error).
pub trait StateStore: Send {
    /// The saved position, if one was saved.
    fn load(&self) -> Result<Option<SavedState>, String>;
    /// Replaces the saved position, whole or not at all.
    fn save(&mut self, state: &SavedState) -> Result<(), String>;
    /// The identity saved to come back under, if any.
    fn load_membership(&self) -> Option<SavedMembership>;
    /// Saves the identity to come back under.
    fn save_membership(&mut self, membership: &SavedMembership) -> Result<(), String>;
    /// Forgets it: the node must not come back as the member it was.
    fn forget_membership(&mut self) -> Result<(), String>;
    /// The last primary view saved for a restore after a full crash, if any; an error
    /// (naming the file) if it cannot be read or is damaged.
    fn load_view(&self) -> Result<Option<LastPrimaryView>, String>;
    /// Saves it, whole or not at all.
    fn save_view(&mut self, view: &LastPrimaryView) -> Result<(), String>;
    /// Forgets it.
    fn forget_view(&mut self) -> Result<(), String>;
    /// Where the saved position is kept, for messages (a path).
    fn location(&self) -> String;
}

#[derive(Debug, Default)]
struct Saved {
    state: Option<SavedState>,
    membership: Option<SavedMembership>,
    view: Option<LastPrimaryView>,
    writes: u64,
}

/// A [`StateStore`] in memory. It is a handle: clones share what is saved, so the
/// simulator's copy outlives the engine that wrote it.
#[derive(Clone, Debug, Default)]
pub struct MemoryStateStore {
    saved: Arc<Mutex<Saved>>,
}

impl MemoryStateStore {
    fn lock(&self) -> MutexGuard<'_, Saved> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many times the position was written (the simulator checks it moves at the
    /// moments that matter).
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }
}

impl StateStore for MemoryStateStore {
    fn load(&self) -> Result<Option<SavedState>, String> {
        Ok(self.lock().state)
    }

    fn save(&mut self, state: &SavedState) -> Result<(), String> {
        let mut saved = self.lock();
        saved.state = Some(*state);
        saved.writes += 1;
        Ok(())
    }

    fn load_membership(&self) -> Option<SavedMembership> {
        self.lock().membership.clone()
    }

    fn save_membership(&mut self, membership: &SavedMembership) -> Result<(), String> {
        self.lock().membership = Some(membership.clone());
        Ok(())
    }

    fn forget_membership(&mut self) -> Result<(), String> {
        self.lock().membership = None;
        Ok(())
    }

    fn load_view(&self) -> Result<Option<LastPrimaryView>, String> {
        Ok(self.lock().view.clone())
    }

    fn save_view(&mut self, view: &LastPrimaryView) -> Result<(), String> {
        self.lock().view = Some(view.clone());
        Ok(())
    }

    fn forget_view(&mut self) -> Result<(), String> {
        self.lock().view = None;
        Ok(())
    }

    fn location(&self) -> String {
        "grastate.dat (in memory)".to_owned()
    }
}
