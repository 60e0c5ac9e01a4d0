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
                    let seqno: i64 = value
                        .parse()
                        .map_err(|_| malformed(line, "not an integer"))?;
                    // -1 or a seqno that has a successor: the node goes on from it.
                    if seqno < Seqno::UNDEFINED.0 || seqno == i64::MAX {
                        return Err(malformed(line, "not a seqno (-1 up to 2^63 - 2)"));
                    }
                    state.position.seqno = Seqno(seqno);
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

/// Fuzz target for [`SavedState::parse`]: no text panics it, and what it accepts renders to
/// a file that parses back the same. `scripts/fuzz.sh` runs it longer.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    /// Cases per target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5000;

    fn check(text: &str) -> Result<(), TestCaseError> {
        let path = Path::new("grastate.dat");
        if let Ok(state) = SavedState::parse(path, text) {
            prop_assert!(state.position.seqno.0 >= -1 && state.position.seqno.0 < i64::MAX);
            let again = SavedState::parse(path, &state.render());
            prop_assert_eq!(again.ok(), Some(state));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary text, and real files with lines replaced, values changed and bytes
        /// flipped (kept as text by lossy repair).
        #[test]
        fn fuzz_saved_state_parse(
            text in "(.{0,30}\\n?){0,5}",
            uuid in any::<[u8; 16]>(),
            seqno in prop_oneof![any::<i64>(), Just(i64::MAX), Just(i64::MIN), -2i64..3],
            safe in any::<bool>(),
            value in "[-+0-9a-fA-F: ]{0,40}",
            line in 0usize..6,
            flips in proptest::collection::vec(fuzzing::flip(), 0..3),
        ) {
            check(&text)?;
            let state = SavedState {
                position: Gtid { cluster: Uuid(uuid), seqno: Seqno(seqno) },
                safe_to_bootstrap: safe,
            };
            let rendered = state.render();
            let parsed = SavedState::parse(Path::new("grastate.dat"), &rendered);
            prop_assert_eq!(parsed.is_ok(), (-1..i64::MAX).contains(&seqno));
            check(&rendered)?;
            let mut lines: Vec<String> = rendered.lines().map(str::to_owned).collect();
            if let Some((key, _)) = lines.get(line).and_then(|l| l.split_once(':')) {
                lines[line] = format!("{key}: {value}");
            }
            let mut bytes = lines.join("\n").into_bytes();
            fuzzing::apply(&mut bytes, &flips);
            check(&String::from_utf8_lossy(&bytes))?;
        }
    }
}
