//! What a node keeps next to `grastate.dat` to come back after a crash, each in a small
//! file written whole (a temporary file renamed over it) and removed when the node leaves
//! cleanly or loses a consistency vote:
//! - the member identity of a node in a component of two (`group::restart`), so that it
//!   comes back as itself and the two form the primary component again; written while in
//!   such a component, removed once the component has another size;
//! - the last primary view it applied (`group::recovery`), so that after a full crash the
//!   members restore the primary component by themselves (Galera's `gvwstate.dat`).

use std::fs;
use std::io;
use std::path::Path;

use group::recovery::LastPrimaryView;
use group::restart::SavedMembership;

/// The member identity's file, inside the data directory (`base_dir`).
pub(crate) const MEMBER_FILE: &str = "trireme_member.dat";

/// The last primary view's file, inside the data directory.
pub(crate) const VIEW_FILE: &str = "trireme_view.dat";

/// The saved identity, if there is a readable one.
pub(crate) fn load_membership(dir: &Path) -> Option<SavedMembership> {
    let text = fs::read_to_string(dir.join(MEMBER_FILE)).ok()?;
    SavedMembership::parse(&text)
}

/// The saved view; `None` if there is none, an error naming the file if it is damaged.
pub(crate) fn load_view(dir: &Path) -> Result<Option<LastPrimaryView>, String> {
    let path = dir.join(VIEW_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => LastPrimaryView::parse(&text)
            .map(Some)
            .ok_or_else(|| format!("{} is damaged and not used", path.display())),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// Writes `text` to `dir/name` whole or not at all.
pub(crate) fn store(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    let temporary = dir.join(format!("{name}.tmp"));
    fs::write(&temporary, text)?;
    fs::rename(&temporary, dir.join(name))
}

/// Removes `dir/name`; a file that is not there is fine.
pub(crate) fn forget(dir: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(dir.join(name)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::{Seqno, Uuid};

    #[test]
    fn stored_identity_loads_back_and_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_membership(dir.path()), None);
        forget(dir.path(), MEMBER_FILE).unwrap();
        let saved = SavedMembership {
            raft_id: 11,
            uuid: Uuid::NIL,
            peer: (12, "10.0.0.2:4567".into()),
        };
        store(dir.path(), MEMBER_FILE, &saved.render()).unwrap();
        assert_eq!(load_membership(dir.path()), Some(saved));
        fs::write(dir.path().join(MEMBER_FILE), "version: 1\nraft_id: 11\n").unwrap();
        assert_eq!(
            load_membership(dir.path()),
            None,
            "a damaged file is not used"
        );
        forget(dir.path(), MEMBER_FILE).unwrap();
        assert!(!dir.path().join(MEMBER_FILE).exists());
    }

    #[test]
    fn a_damaged_view_is_named_not_used() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_view(dir.path()), Ok(None));
        let members = ["10.0.0.1:4567".to_string(), "10.0.0.2:4567".to_string()];
        let view =
            LastPrimaryView::new(Uuid([1; 16]), Seqno(9), 4, "10.0.0.1:4567", members).unwrap();
        store(dir.path(), VIEW_FILE, &view.render()).unwrap();
        assert_eq!(load_view(dir.path()), Ok(Some(view.clone())));
        let cut = &view.render()[..40];
        fs::write(dir.path().join(VIEW_FILE), cut).unwrap();
        let error = load_view(dir.path()).unwrap_err();
        assert!(
            error.contains(VIEW_FILE) && error.contains("damaged"),
            "{error}"
        );
    }
}
