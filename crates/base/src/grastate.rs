//! Galera's `grastate.dat`, the saved position of a node, as text: one format for the node
//! that writes it and the tools that read it (`trireme cluster`, `galera_new_cluster`,
//! the Kubernetes operators).
//!
//! ```text
//! # GALERA saved state
//! version: 2.1
//! uuid:    9acf4d34-acdb-11e6-bcc3-d3e36276629f
//! seqno:   1043
//! safe_to_bootstrap: 1
//! ```
//!
//! `seqno: -1` while the server runs (the file is stale after the first commit) and the
//! last committed seqno after a clean stop; `safe_to_bootstrap: 1` on the last member of
//! the primary component. Reading and writing the file is the caller's: this is the text.

use crate::{Gtid, Seqno, Uuid};

/// The file's name, in the data directory (`base_dir`).
pub const FILE_NAME: &str = "grastate.dat";

/// What `grastate.dat` records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedState {
    /// History UUID and last committed seqno (undefined while running or after a crash).
    pub position: Gtid,
    /// True if this node was the last to leave the primary component.
    pub safe_to_bootstrap: bool,
}

/// A line of `grastate.dat` that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad line {line:?}: {reason}")]
pub struct GrastateError {
    /// The line.
    pub line: String,
    /// What is wrong with it.
    pub reason: &'static str,
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

    /// Parses the file's text. A missing line reads as Galera reads it (no history, seqno
    /// -1, not safe to bootstrap); unknown keys (later versions, Galera 3's `cert_index`)
    /// are ignored.
    pub fn parse(text: &str) -> Result<SavedState, GrastateError> {
        let mut state = SavedState {
            position: Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno::UNDEFINED,
            },
            safe_to_bootstrap: false,
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = |reason| GrastateError {
                line: line.to_owned(),
                reason,
            };
            let Some((key, value)) = line.split_once(':') else {
                return Err(malformed("expected `key: value`"));
            };
            let value = value.trim();
            match key.trim() {
                "uuid" => {
                    state.position.cluster =
                        Uuid::parse(value).map_err(|_| malformed("not a UUID"))?;
                }
                "seqno" => state.position.seqno = parse_seqno(value).map_err(malformed)?,
                "safe_to_bootstrap" => {
                    state.safe_to_bootstrap = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(malformed("expected 0 or 1")),
                    };
                }
                _ => {}
            }
        }
        Ok(state)
    }

    /// True when the file holds a position to continue from: a history and a seqno.
    pub fn has_position(&self) -> bool {
        self.position.cluster != Uuid::NIL && self.position.seqno.is_defined()
    }
}

/// -1, or a seqno that has a successor (the node goes on from it).
fn parse_seqno(value: &str) -> Result<Seqno, &'static str> {
    let seqno: i64 = value.parse().map_err(|_| "not an integer")?;
    if seqno < Seqno::UNDEFINED.0 || seqno == i64::MAX {
        return Err("not a seqno (-1 up to 2^63 - 2)");
    }
    Ok(Seqno(seqno))
}

/// `text` with `safe_to_bootstrap: 1`, replacing that line or adding one; every other line
/// stays as it was (the DBA's manual step before bootstrapping from a chosen node).
pub fn with_safe_to_bootstrap(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 24);
    let mut replaced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("safe_to_bootstrap") {
            out.push_str("safe_to_bootstrap: 1");
            replaced = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !replaced {
        out.push_str("safe_to_bootstrap: 1\n");
    }
    out
}

/// The position in the output of `mariadbd --wsrep-recover`, from its last line
/// `... [Note] WSREP: Recovered position: <uuid>:<seqno>`.
pub fn parse_recovered_position(log: &str) -> Option<Gtid> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("WSREP: Recovered position:"))?;
    let position = line.rsplit("Recovered position:").next()?.trim();
    let (uuid, seqno) = position.rsplit_once(':')?;
    Some(Gtid {
        cluster: Uuid::parse(uuid.trim()).ok()?,
        seqno: parse_seqno(seqno.trim()).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "# GALERA saved state\nversion: 2.1\n\
                         uuid:    9acf4d34-acdb-11e6-bcc3-d3e36276629f\nseqno:   1043\n\
                         safe_to_bootstrap: 1\n";

    fn state(seqno: i64, safe: bool) -> SavedState {
        SavedState {
            position: Gtid {
                cluster: Uuid::parse("9acf4d34-acdb-11e6-bcc3-d3e36276629f").unwrap(),
                seqno: Seqno(seqno),
            },
            safe_to_bootstrap: safe,
        }
    }

    #[test]
    fn renders_and_parses_galeras_format() {
        assert_eq!(state(1043, true).render(), CLEAN);
        assert_eq!(SavedState::parse(CLEAN), Ok(state(1043, true)));
        assert!(state(1043, true).has_position());
        let running = CLEAN
            .replace("1043", "-1")
            .replace("safe_to_bootstrap: 1", "safe_to_bootstrap: 0");
        let running = SavedState::parse(&running).unwrap();
        assert_eq!(running, state(-1, false));
        assert!(!running.has_position());
    }

    #[test]
    fn old_and_partial_files_read_as_galera_reads_them() {
        let old = "# GALERA saved state\nversion: 2.1\n\
                   uuid: 9acf4d34-acdb-11e6-bcc3-d3e36276629f\nseqno: 7\ncert_index:\n";
        assert_eq!(SavedState::parse(old), Ok(state(7, false)));
        let empty = SavedState::parse("").unwrap();
        assert!(!empty.has_position() && !empty.safe_to_bootstrap);
        let nil = format!("uuid: {}\nseqno: 5\n", Uuid::NIL);
        assert!(!SavedState::parse(&nil).unwrap().has_position());
    }

    #[test]
    fn a_bad_line_is_named_with_its_reason() {
        for (text, reason) in [
            ("uuid: nope\n", "not a UUID"),
            ("seqno: 12x\n", "not an integer"),
            ("seqno: -2\n", "not a seqno"),
            ("safe_to_bootstrap: yes\n", "expected 0 or 1"),
            ("garbage\n", "expected `key: value`"),
        ] {
            let error = SavedState::parse(text).unwrap_err();
            assert!(error.reason.starts_with(reason), "{error}");
            assert_eq!(format!("{}\n", error.line), text);
        }
    }

    #[test]
    fn marking_safe_keeps_every_other_line() {
        let unsafe_text = CLEAN.replace("safe_to_bootstrap: 1", "safe_to_bootstrap: 0");
        let marked = with_safe_to_bootstrap(&unsafe_text);
        assert_eq!(marked, CLEAN);
        let without = "uuid: 9acf4d34-acdb-11e6-bcc3-d3e36276629f\nseqno: 3\n";
        let marked = with_safe_to_bootstrap(without);
        assert_eq!(marked, format!("{without}safe_to_bootstrap: 1\n"));
        assert!(SavedState::parse(&marked).unwrap().safe_to_bootstrap);
    }

    #[test]
    fn finds_the_recovered_position() {
        let log = "2026-01-01  0:00:00 0 [Note] InnoDB: Starting\n\
                   2026-01-01  0:00:01 0 [Note] WSREP: Recovered position: \
                   9acf4d34-acdb-11e6-bcc3-d3e36276629f:1077\n";
        assert_eq!(
            parse_recovered_position(log),
            Some(state(1077, false).position)
        );
        let none = format!("[Note] WSREP: Recovered position: {}:-1\n", Uuid::NIL);
        assert_eq!(
            parse_recovered_position(&none),
            Some(Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno::UNDEFINED
            })
        );
        assert_eq!(parse_recovered_position("nothing here"), None);
        let garbled = "WSREP: Recovered position: not-a-uuid:12\n";
        assert_eq!(parse_recovered_position(garbled), None);
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
        if let Ok(state) = SavedState::parse(text) {
            prop_assert!(state.position.seqno.0 >= -1 && state.position.seqno.0 < i64::MAX);
            prop_assert_eq!(SavedState::parse(&state.render()).ok(), Some(state));
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
            let parsed = SavedState::parse(&rendered);
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
