//! The node's saved position, in Galera's `grastate.dat` format, so that the tools DBAs use
//! with Galera (`galera_new_cluster`, `galera_recovery`, `trireme cluster up`) find it where
//! they look: the history UUID, the last committed seqno (-1 while the server runs, since
//! the file is stale the moment a commit happens), and whether this node may found a new
//! primary component from its data.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base::{Gtid, Seqno, Uuid};

/// The file name, inside the data directory (`base_dir`).
pub(crate) const FILE_NAME: &str = "grastate.dat";

/// What `grastate.dat` records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedState {
    /// History UUID and last committed seqno (undefined while running or after a crash).
    pub position: Gtid,
    /// True if this node was the last to leave the primary component.
    pub safe_to_bootstrap: bool,
}

/// Why a `grastate.dat` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SavedStateError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A line that does not parse.
    #[error("{path}: bad line {line:?}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The offending line.
        line: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl SavedState {
    /// The file's text.
    pub fn render(&self) -> String {
        format!(
            "# GALERA saved state\nversion: 2.1\nuuid:    {}\nseqno:   {}\nsafe_to_bootstrap: {}\n",
            self.position.cluster,
            self.position.seqno.0,
            u8::from(self.safe_to_bootstrap)
        )
    }

    /// Parses the file's text; unknown keys (later format versions) are ignored.
    pub fn parse(path: &Path, text: &str) -> Result<SavedState, SavedStateError> {
        let malformed = |line: &str, reason| SavedStateError::Malformed {
            path: path.to_owned(),
            line: line.to_owned(),
            reason,
        };
        let mut state = SavedState {
            position: Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: false,
        };
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                return Err(malformed(line, "expected `key: value`"));
            };
            let value = value.trim();
            match key.trim() {
                "uuid" => {
                    state.position.cluster =
                        Uuid::parse(value).map_err(|_| malformed(line, "not a UUID"))?;
                }
                "seqno" => {
                    state.position.seqno = Seqno(
                        value
                            .parse()
                            .map_err(|_| malformed(line, "not an integer"))?,
                    );
                }
                "safe_to_bootstrap" => {
                    state.safe_to_bootstrap = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(malformed(line, "expected 0 or 1")),
                    };
                }
                _ => {}
            }
        }
        Ok(state)
    }

    /// Reads `dir/grastate.dat`; `None` if there is none.
    pub fn load(dir: &Path) -> Result<Option<SavedState>, SavedStateError> {
        let path = dir.join(FILE_NAME);
        match fs::read_to_string(&path) {
            Ok(text) => SavedState::parse(&path, &text).map(Some),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SavedStateError::Read { path, source }),
        }
    }

    /// Writes `dir/grastate.dat` whole or not at all (a temporary file renamed over it), so
    /// a crash mid-write never leaves half a file.
    pub fn store(&self, dir: &Path) -> io::Result<()> {
        let path = dir.join(FILE_NAME);
        let temporary = dir.join(format!("{FILE_NAME}.tmp"));
        let mut file = fs::File::create(&temporary)?;
        file.write_all(self.render().as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, &path)
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(SavedState::load(dir.path()).unwrap(), None);
        state(1401932, true).store(dir.path()).unwrap();
        let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(
            text,
            "# GALERA saved state\nversion: 2.1\nuuid:    08ba0d64-e568-11f1-865e-373fdabda5af\n\
             seqno:   1401932\nsafe_to_bootstrap: 1\n"
        );
        assert_eq!(
            SavedState::load(dir.path()).unwrap(),
            Some(state(1401932, true))
        );
        state(-1, false).store(dir.path()).unwrap();
        assert_eq!(
            SavedState::load(dir.path()).unwrap(),
            Some(state(-1, false))
        );
    }

    #[test]
    fn a_bad_file_is_a_specific_error() {
        let path = Path::new("/data/grastate.dat");
        for (text, reason) in [
            ("uuid: nope\n", "not a UUID"),
            ("seqno: 12x\n", "not an integer"),
            ("safe_to_bootstrap: yes\n", "expected 0 or 1"),
            ("garbage\n", "expected `key: value`"),
        ] {
            let error = SavedState::parse(path, text).unwrap_err().to_string();
            assert!(
                error.contains(reason) && error.contains("/data/grastate.dat"),
                "{error}"
            );
        }
        let galera =
            "# GALERA saved state\nversion: 2.1\nuuid: 08ba0d64-e568-11f1-865e-373fdabda5af\n\
                      seqno: -1\nsafe_to_bootstrap: 0\nfuture_key: 7\n";
        assert_eq!(SavedState::parse(path, galera).unwrap(), state(-1, false));
    }
}
