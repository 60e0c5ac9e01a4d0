//! Galera's `grastate.dat`: the saved cluster position of a stopped node.
//!
//! ```text
//! # GALERA saved state
//! version: 2.1
//! uuid:    9acf4d34-acdb-11e6-bcc3-d3e36276629f
//! seqno:   1043
//! safe_to_bootstrap: 1
//! ```
//!
//! Galera writes `seqno: -1` while the node runs and the real position on a clean shutdown;
//! it sets `safe_to_bootstrap: 1` on the last node of the cluster to stop cleanly.

use anyhow::{anyhow, bail, Result};

/// The uuid every unknown state has.
pub const UNDEFINED_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// The fields of `grastate.dat` that matter for choosing the node to bootstrap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraState {
    /// The cluster state uuid.
    pub uuid: String,
    /// The last committed seqno, or -1 when unknown (the node ran or crashed).
    pub seqno: i64,
    /// Whether Galera marked this node as safe to bootstrap the cluster from.
    pub safe_to_bootstrap: bool,
}

impl GraState {
    /// Parses the text of `grastate.dat`. A missing `safe_to_bootstrap` (old versions)
    /// reads as false.
    pub fn parse(text: &str) -> Result<GraState> {
        let mut uuid = None;
        let mut seqno = None;
        let mut safe_to_bootstrap = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "uuid" => uuid = Some(value.to_string()),
                "seqno" => {
                    seqno = Some(
                        value
                            .parse::<i64>()
                            .map_err(|e| anyhow!("bad seqno {value:?}: {e}"))?,
                    );
                }
                "safe_to_bootstrap" => safe_to_bootstrap = value == "1",
                _ => {}
            }
        }
        let (Some(uuid), Some(seqno)) = (uuid, seqno) else {
            bail!("grastate.dat lacks a uuid or a seqno line");
        };
        Ok(GraState {
            uuid,
            seqno,
            safe_to_bootstrap,
        })
    }

    /// Whether the file holds a usable position (a real uuid and a seqno).
    pub fn has_position(&self) -> bool {
        self.seqno >= 0 && self.uuid != UNDEFINED_UUID
    }
}

/// Returns `text` with `safe_to_bootstrap: 1`, replacing the existing line or appending
/// one; every other line is kept as it was.
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

/// Finds the position in the output of `mariadbd --wsrep-recover`, from the line
/// `... [Note] WSREP: Recovered position: <uuid>:<seqno>`.
pub fn parse_recovered_position(log: &str) -> Option<(String, i64)> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("WSREP: Recovered position:"))?;
    let position = line.rsplit("Recovered position:").next()?.trim();
    let (uuid, seqno) = position.rsplit_once(':')?;
    let seqno = seqno.trim().parse().ok()?;
    Some((uuid.trim().to_string(), seqno))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "# GALERA saved state\nversion: 2.1\n\
                         uuid:    9acf4d34-acdb-11e6-bcc3-d3e36276629f\nseqno:   1043\n\
                         safe_to_bootstrap: 1\n";

    #[test]
    fn parses_a_clean_shutdown() {
        let g = GraState::parse(CLEAN).unwrap();
        assert_eq!(g.uuid, "9acf4d34-acdb-11e6-bcc3-d3e36276629f");
        assert_eq!(g.seqno, 1043);
        assert!(g.safe_to_bootstrap);
        assert!(g.has_position());
    }

    #[test]
    fn parses_a_running_or_crashed_node() {
        let text = CLEAN
            .replace("1043", "-1")
            .replace("safe_to_bootstrap: 1", "safe_to_bootstrap: 0");
        let g = GraState::parse(&text).unwrap();
        assert_eq!(g.seqno, -1);
        assert!(!g.safe_to_bootstrap);
        assert!(!g.has_position());
    }

    #[test]
    fn old_files_without_the_flag_are_not_safe() {
        let text =
            "# GALERA saved state\nversion: 2.1\nuuid: 9acf4d34-acdb-11e6-bcc3-d3e36276629f\n\
                    seqno: 7\ncert_index:\n";
        let g = GraState::parse(text).unwrap();
        assert_eq!(g.seqno, 7);
        assert!(!g.safe_to_bootstrap);
    }

    #[test]
    fn rejects_garbage() {
        assert!(GraState::parse("").is_err());
        assert!(GraState::parse("uuid: x\nseqno: many\n").is_err());
        let undefined = format!("uuid: {UNDEFINED_UUID}\nseqno: 5\n");
        assert!(!GraState::parse(&undefined).unwrap().has_position());
    }

    #[test]
    fn marking_safe_keeps_the_rest() {
        let unsafe_text = CLEAN.replace("safe_to_bootstrap: 1", "safe_to_bootstrap: 0");
        let marked = with_safe_to_bootstrap(&unsafe_text);
        assert_eq!(marked, CLEAN);
        assert!(GraState::parse(&marked).unwrap().safe_to_bootstrap);
        let without = "uuid: 9acf4d34-acdb-11e6-bcc3-d3e36276629f\nseqno: 3\n";
        let marked = with_safe_to_bootstrap(without);
        assert_eq!(marked, format!("{without}safe_to_bootstrap: 1\n"));
    }

    #[test]
    fn finds_the_recovered_position() {
        let log = "2026-01-01  0:00:00 0 [Note] InnoDB: Starting\n\
                   2026-01-01  0:00:01 0 [Note] WSREP: Recovered position: \
                   9acf4d34-acdb-11e6-bcc3-d3e36276629f:1077\n";
        assert_eq!(
            parse_recovered_position(log),
            Some(("9acf4d34-acdb-11e6-bcc3-d3e36276629f".to_string(), 1077))
        );
        let none = format!("[Note] WSREP: Recovered position: {UNDEFINED_UUID}:-1\n");
        assert_eq!(
            parse_recovered_position(&none),
            Some((UNDEFINED_UUID.to_string(), -1))
        );
        assert_eq!(parse_recovered_position("nothing here"), None);
    }
}
