//! The node's saved position on disk: `grastate.dat` in the data directory (`base_dir`), in
//! Galera's format ([`base::grastate`]), so that the tools DBAs use with Galera
//! (`galera_new_cluster`, `galera_recovery`, `trireme cluster up`) find it where they look.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base::grastate::{GrastateError, SavedState, FILE_NAME};

/// Why a `grastate.dat` could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SavedStateError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A line that does not parse.
    #[error("{path}: {error}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line and what is wrong with it.
        error: GrastateError,
    },
}

/// Reads `dir/grastate.dat`; `None` if there is none.
pub(crate) fn load(dir: &Path) -> Result<Option<SavedState>, SavedStateError> {
    let path = dir.join(FILE_NAME);
    match fs::read_to_string(&path) {
        Ok(text) => SavedState::parse(&text)
            .map(Some)
            .map_err(|error| SavedStateError::Malformed { path, error }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SavedStateError::Read { path, source }),
    }
}

/// Writes `dir/grastate.dat` whole or not at all (a temporary file renamed over it), so a
/// crash mid-write never leaves half a file.
pub(crate) fn store(state: &SavedState, dir: &Path) -> io::Result<()> {
    let path = dir.join(FILE_NAME);
    let temporary = dir.join(format!("{FILE_NAME}.tmp"));
    let mut file = fs::File::create(&temporary)?;
    file.write_all(state.render().as_bytes())?;
    file.sync_all()?;
    fs::rename(&temporary, &path)
}

#[cfg(test)]
mod tests {
    use base::{Gtid, Seqno, Uuid};

    use super::*;

    fn state(seqno: i64, safe: bool) -> SavedState {
        SavedState {
            position: Gtid {
                cluster: Uuid::parse("08ba0d64-e568-11f1-865e-373fdabda5af").unwrap(),
                seqno: Seqno(seqno),
            },
            safe_to_bootstrap: safe,
        }
    }

    #[test]
    fn stores_and_loads_galera_format() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        store(&state(1401932, true), dir.path()).unwrap();
        let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(
            text,
            "# GALERA saved state\nversion: 2.1\nuuid:    08ba0d64-e568-11f1-865e-373fdabda5af\n\
             seqno:   1401932\nsafe_to_bootstrap: 1\n"
        );
        assert_eq!(load(dir.path()).unwrap(), Some(state(1401932, true)));
        store(&state(-1, false), dir.path()).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(state(-1, false)));
    }

    #[test]
    fn a_bad_file_is_named_with_the_line_and_why() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), "uuid: nope\n").unwrap();
        let error = load(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("grastate.dat") && error.contains("not a UUID"),
            "{error}"
        );
    }
}
