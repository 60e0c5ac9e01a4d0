//! The joiner's staging directory and the atomic swap into the datadir.
//!
//! The snapshot lands in `<datadir>.trireme-sst`, a sibling of the datadir on the same
//! filesystem, so the datadir is not touched while data arrives or while it is prepared.
//! Then the datadir's entries are replaced by renames (see [`swap_into_place`]), keeping
//! the files the provider owns across an SST (the gcache, `grastate.dat`, `gvwstate.dat`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::SstError;

/// Files of the old datadir that survive an SST (they belong to the provider, not to the
/// snapshot). Names starting with these prefixes are moved too (gcache pages).
const PRESERVED: &[&str] = &[
    "galera.cache",
    "grastate.dat",
    "gvwstate.dat",
    "gcache.page.",
];

/// `<dir>.<suffix>` next to `dir` (a trailing slash in `dir` is ignored).
pub fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let text = dir.to_string_lossy();
    let trimmed = text.trim_end_matches('/');
    PathBuf::from(format!("{trimmed}.{suffix}"))
}

/// The staging directory for `datadir`.
pub fn staging_dir(datadir: &Path) -> PathBuf {
    sibling(datadir, "trireme-sst")
}

/// The resume journal for `datadir`.
pub fn journal_path(datadir: &Path) -> PathBuf {
    sibling(datadir, "trireme-sst.journal")
}

/// Checks, before anything is touched, that the swap will be possible: the datadir's parent
/// is writable by this user and on the same filesystem as the datadir.
pub fn check_swap_possible(datadir: &Path) -> Result<(), SstError> {
    let datadir = Path::new(datadir.to_string_lossy().trim_end_matches('/')).to_path_buf();
    let parent = datadir.parent().unwrap_or(Path::new("/"));
    let access = rustix::fs::access(
        parent,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    );
    if access.is_err() {
        return Err(SstError::Preflight {
            message: format!(
                "the trireme SST method stages the snapshot next to the datadir and swaps it \
                 in atomically, so it needs write access to {} (the datadir's parent) as the \
                 server's user: grant it (e.g. chown the parent to the server's user), or use \
                 wsrep_sst_method=mariabackup",
                parent.display()
            ),
            code: crate::exit_code::ACCESS,
        });
    }
    if datadir.exists() {
        let a = rustix::fs::stat(&datadir).map_err(|e| SstError::io("stat datadir", e.into()))?;
        let b = rustix::fs::stat(parent).map_err(|e| SstError::io("stat parent", e.into()))?;
        if a.st_dev != b.st_dev {
            return Err(SstError::Preflight {
                message: format!(
                    "the datadir {} is a mount point, so no directory next to it can be \
                     swapped with it atomically: mount the filesystem one level up, or use \
                     wsrep_sst_method=mariabackup",
                    datadir.display()
                ),
                code: crate::exit_code::ACCESS,
            });
        }
    }
    Ok(())
}

/// Bytes held in the staging directory (reusable by a resumed transfer).
pub fn staged_bytes(staging: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(entries) = fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    }
    walk(staging)
}

/// The marker that says a swap is under way, and in which phase.
pub fn swap_marker(datadir: &Path) -> PathBuf {
    sibling(datadir, "trireme-sst.swap")
}

/// Whether `name` in the datadir belongs to the provider and survives an SST.
pub fn is_preserved(name: &str) -> bool {
    PRESERVED.iter().any(|p| name.starts_with(p))
}

fn write_marker(marker: &Path, phase: u8) -> Result<(), SstError> {
    let text = format!("phase={phase}\n");
    let write = || -> io::Result<()> {
        let mut file = fs::File::create(marker)?;
        io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()
    };
    write().map_err(|e| SstError::io(format!("writing {}", marker.display()), e))
}

fn move_entries(from: &Path, to: &Path, keep: impl Fn(&str) -> bool) -> Result<usize, SstError> {
    let entries =
        fs::read_dir(from).map_err(|e| SstError::io(format!("listing {}", from.display()), e))?;
    let mut moved = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep(&name) {
            continue;
        }
        fs::rename(entry.path(), to.join(&name)).map_err(|e| {
            SstError::io(
                format!("moving {name} from {} to {}", from.display(), to.display()),
                e,
            )
        })?;
        moved += 1;
    }
    Ok(moved)
}

/// Replaces the datadir's contents with the staged snapshot, keeping the provider's files.
///
/// The server's working directory is the datadir, so the directory itself must stay; its
/// entries are renamed instead (each rename is atomic; no file is ever half-copied). A
/// marker next to the datadir records the phase, so that an interruption is finished by
/// [`finish_interrupted_swap`] before the next attempt: phase 1 moves the old entries out
/// to `<datadir>.trireme-old`, phase 2 moves the staged ones in.
pub fn swap_into_place(staging: &Path, datadir: &Path) -> Result<Vec<String>, SstError> {
    let datadir = Path::new(datadir.to_string_lossy().trim_end_matches('/')).to_path_buf();
    fs::create_dir_all(&datadir)
        .map_err(|e| SstError::io(format!("creating {}", datadir.display()), e))?;
    let marker = swap_marker(&datadir);
    let old = sibling(&datadir, "trireme-old");
    remove_tree(&old)?;
    fs::create_dir_all(&old).map_err(|e| SstError::io(format!("creating {}", old.display()), e))?;
    write_marker(&marker, 1)?;
    complete_swap(staging, &datadir, &old, &marker, 1)
}

fn complete_swap(
    staging: &Path,
    datadir: &Path,
    old: &Path,
    marker: &Path,
    phase: u8,
) -> Result<Vec<String>, SstError> {
    if phase == 1 {
        move_entries(datadir, old, is_preserved)?;
        write_marker(marker, 2)?;
    }
    let mut preserved = Vec::new();
    if let Ok(entries) = fs::read_dir(datadir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_preserved(&name) {
                // The provider's own copy wins over one that came with the snapshot.
                let _ = fs::remove_file(staging.join(&name));
                preserved.push(name);
            }
        }
    }
    move_entries(staging, datadir, |_| false)?;
    fs::remove_file(marker)
        .map_err(|e| SstError::io(format!("removing {}", marker.display()), e))?;
    remove_tree(staging)?;
    remove_tree(old)?;
    preserved.sort();
    Ok(preserved)
}

/// Finishes a swap an earlier attempt was interrupted in (the staged snapshot was complete
/// and prepared once the swap began). Returns whether there was one.
pub fn finish_interrupted_swap(datadir: &Path) -> Result<bool, SstError> {
    let datadir = Path::new(datadir.to_string_lossy().trim_end_matches('/')).to_path_buf();
    let marker = swap_marker(&datadir);
    let Ok(text) = fs::read_to_string(&marker) else {
        return Ok(false);
    };
    let phase = if text.trim() == "phase=2" { 2 } else { 1 };
    let old = sibling(&datadir, "trireme-old");
    fs::create_dir_all(&old).map_err(|e| SstError::io(format!("creating {}", old.display()), e))?;
    complete_swap(&staging_dir(&datadir), &datadir, &old, &marker, phase)?;
    Ok(true)
}

/// Removes a directory tree if it exists.
pub fn remove_tree(dir: &Path) -> Result<(), SstError> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(SstError::io(format!("removing {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swap_keeps_the_provider_files_and_replaces_the_rest() {
        let root = tempfile::tempdir().unwrap();
        let datadir = root.path().join("data");
        fs::create_dir_all(datadir.join("olddb")).unwrap();
        fs::write(datadir.join("ibdata1"), "old").unwrap();
        fs::write(datadir.join("galera.cache"), "cache").unwrap();
        fs::write(datadir.join("grastate.dat"), "state").unwrap();
        let staging = staging_dir(&datadir);
        fs::create_dir_all(staging.join("newdb")).unwrap();
        fs::write(staging.join("ibdata1"), "new").unwrap();
        check_swap_possible(&datadir).unwrap();
        let kept = swap_into_place(&staging, &datadir).unwrap();
        assert_eq!(kept, vec!["galera.cache", "grastate.dat"]);
        assert_eq!(fs::read_to_string(datadir.join("ibdata1")).unwrap(), "new");
        assert_eq!(
            fs::read_to_string(datadir.join("galera.cache")).unwrap(),
            "cache"
        );
        assert!(datadir.join("newdb").is_dir());
        assert!(!datadir.join("olddb").exists());
        assert!(!staging.exists());
        assert_eq!(
            sibling(Path::new("/a/data/"), "x"),
            PathBuf::from("/a/data.x")
        );
        assert!(!swap_marker(&datadir).exists());
        assert!(!finish_interrupted_swap(&datadir).unwrap());
    }

    #[test]
    fn an_interrupted_swap_is_finished_in_either_phase() {
        for phase in [1, 2] {
            let root = tempfile::tempdir().unwrap();
            let datadir = root.path().join("data");
            let staging = staging_dir(&datadir);
            let old = sibling(&datadir, "trireme-old");
            fs::create_dir_all(&datadir).unwrap();
            fs::create_dir_all(&staging).unwrap();
            fs::create_dir_all(&old).unwrap();
            fs::write(datadir.join("grastate.dat"), "state").unwrap();
            fs::write(staging.join("ibdata1"), "new").unwrap();
            fs::write(staging.join("b.frm"), "new").unwrap();
            if phase == 1 {
                fs::write(datadir.join("ibdata1"), "old").unwrap();
                fs::write(old.join("a.frm"), "old").unwrap();
            } else {
                fs::write(old.join("ibdata1"), "old").unwrap();
                fs::rename(staging.join("b.frm"), datadir.join("b.frm")).unwrap();
            }
            fs::write(swap_marker(&datadir), format!("phase={phase}\n")).unwrap();
            assert!(finish_interrupted_swap(&datadir).unwrap());
            assert_eq!(fs::read_to_string(datadir.join("ibdata1")).unwrap(), "new");
            assert_eq!(fs::read_to_string(datadir.join("b.frm")).unwrap(), "new");
            assert_eq!(
                fs::read_to_string(datadir.join("grastate.dat")).unwrap(),
                "state"
            );
            assert!(!datadir.join("a.frm").exists());
            assert!(!staging.exists() && !old.exists() && !swap_marker(&datadir).exists());
        }
    }
}
