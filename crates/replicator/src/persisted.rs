//! The node's saved state in files next to its data (the engine's [`StateStore`]): the saved
//! position in `grastate.dat` ([`crate::saved_state`]), and the identity and last primary
//! view it comes back with after a crash ([`crate::restart_files`]). A node without a state
//! directory keeps nothing.

use std::path::PathBuf;

use base::grastate::{SavedState, FILE_NAME};
use engine::StateStore;
use group::recovery::LastPrimaryView;
use group::restart::SavedMembership;

use crate::restart_files::{self, MEMBER_FILE, VIEW_FILE};
use crate::saved_state;

/// The saved state in `dir` (`base_dir`), or nowhere.
pub(crate) struct FileStateStore {
    dir: Option<PathBuf>,
}

impl FileStateStore {
    pub(crate) fn new(dir: Option<PathBuf>) -> FileStateStore {
        FileStateStore { dir }
    }
}

impl FileStateStore {
    fn store_file(&self, name: &str, text: &str) -> Result<(), String> {
        match &self.dir {
            Some(dir) => restart_files::store(dir, name, text).map_err(|e| format!("{name}: {e}")),
            None => Ok(()),
        }
    }

    fn forget_file(&self, name: &str) -> Result<(), String> {
        match &self.dir {
            Some(dir) => restart_files::forget(dir, name).map_err(|e| format!("{name}: {e}")),
            None => Ok(()),
        }
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
        restart_files::load_membership(self.dir.as_ref()?)
    }

    fn save_membership(&mut self, membership: &SavedMembership) -> Result<(), String> {
        self.store_file(MEMBER_FILE, &membership.render())
    }

    fn forget_membership(&mut self) -> Result<(), String> {
        self.forget_file(MEMBER_FILE)
    }

    fn load_view(&self) -> Result<Option<LastPrimaryView>, String> {
        match &self.dir {
            Some(dir) => restart_files::load_view(dir),
            None => Ok(None),
        }
    }

    fn save_view(&mut self, view: &LastPrimaryView) -> Result<(), String> {
        self.store_file(VIEW_FILE, &view.render())
    }

    fn forget_view(&mut self) -> Result<(), String> {
        self.forget_file(VIEW_FILE)
    }

    fn location(&self) -> String {
        match &self.dir {
            Some(dir) => dir.join(FILE_NAME).display().to_string(),
            None => FILE_NAME.to_owned(),
        }
    }
}
