//! The member identity a node of a two-member component keeps on disk (`group::restart`),
//! next to `grastate.dat`, so that after a crash it comes back as itself and the two form
//! the primary component again. Written while in such a component, removed at a clean
//! leave, after a lost consistency vote, and once the component has another size.

use std::fs;
use std::io;
use std::path::Path;

use group::restart::SavedMembership;

/// The file name, inside the data directory (`base_dir`).
pub(crate) const FILE_NAME: &str = "trireme_member.dat";

/// The saved identity, if there is a readable one.
pub(crate) fn load(dir: &Path) -> Option<SavedMembership> {
    let text = fs::read_to_string(dir.join(FILE_NAME)).ok()?;
    SavedMembership::parse(&text)
}

/// Saves `saved` (through a temporary file and a rename: never half written).
pub(crate) fn store(dir: &Path, saved: &SavedMembership) -> io::Result<()> {
    let temporary = dir.join(format!("{FILE_NAME}.tmp"));
    fs::write(&temporary, saved.render())?;
    fs::rename(&temporary, dir.join(FILE_NAME))
}

/// Removes the saved identity; a file that is not there is fine.
pub(crate) fn forget(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(FILE_NAME)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::Uuid;

    #[test]
    fn stored_identity_loads_back_and_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), None);
        forget(dir.path()).unwrap();
        let saved = SavedMembership {
            raft_id: 11,
            uuid: Uuid::NIL,
            peer: (12, "10.0.0.2:4567".into()),
        };
        store(dir.path(), &saved).unwrap();
        assert_eq!(load(dir.path()), Some(saved));
        fs::write(dir.path().join(FILE_NAME), "version: 1\nraft_id: 11\n").unwrap();
        assert_eq!(load(dir.path()), None, "a damaged file is not used");
        forget(dir.path()).unwrap();
        assert!(!dir.path().join(FILE_NAME).exists());
    }
}
