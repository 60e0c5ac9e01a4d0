//! The node's saved state in files next to its data (the engine's [`StateStore`]): the saved
//! position in `grastate.dat` ([`crate::saved_state`]) and the identity it comes back under
//! after a crash ([`crate::membership_file`]). A node without a state directory keeps
//! nothing.

use std::path::PathBuf;

use base::grastate::{SavedState, FILE_NAME};
use engine::StateStore;
use group::restart::SavedMembership;

use crate::{membership_file, saved_state};

/// The saved state in `dir` (`base_dir`), or nowhere.
pub(crate) struct FileStateStore {
    dir: Option<PathBuf>,
}

impl FileStateStore {
    pub(crate) fn new(dir: Option<PathBuf>) -> FileStateStore {
        FileStateStore { dir }
    }
}

impl StateStore for FileStateStore {
    fn load(&self) -> Result<Option<SavedState>, String> {
        match &self.dir {
            Some(dir) => saved_state::load(dir).map_err(|error| error.to_string()),
            None => Ok(None),
        }
    }

    fn save(&mut self, state: &SavedState) -> Result<(), String> {
        match &self.dir {
            Some(dir) => saved_state::store(state, dir).map_err(|error| error.to_string()),
            None => Ok(()),
        }
    }

    fn load_membership(&self) -> Option<SavedMembership> {
        membership_file::load(self.dir.as_ref()?)
    }

    fn save_membership(&mut self, membership: &SavedMembership) -> Result<(), String> {
        match &self.dir {
            Some(dir) => membership_file::store(dir, membership)
                .map_err(|error| format!("{}: {error}", membership_file::FILE_NAME)),
            None => Ok(()),
        }
    }

    fn forget_membership(&mut self) -> Result<(), String> {
        match &self.dir {
            Some(dir) => membership_file::forget(dir)
                .map_err(|error| format!("{}: {error}", membership_file::FILE_NAME)),
            None => Ok(()),
        }
    }

    fn location(&self) -> String {
        match &self.dir {
            Some(dir) => dir.join(FILE_NAME).display().to_string(),
            None => FILE_NAME.to_owned(),
        }
    }
}
