//! A timeline per seqno, for profiling the apply and commit pipeline: when each write-set
//! was handed to the group (this node's own), delivered in order (or received by IST), certified and handed out, taken by an
//! applier, admitted by the apply monitor, applied (the server asks for commit order),
//! admitted to commit order, let out of it, and done with on the applier.
//!
//! Off unless the server's environment names a directory in [`TRACE_DIR_VARIABLE`] (a
//! profiling tool, like `RUST_LOG`, not a setting a DBA keeps in my.cnf). The node then
//! writes `<wsrep_node_name>.seqnos.csv` there when it disconnects: one line per seqno of
//! the last [`TRACE_CAPACITY`], in microseconds since the replicator was made.
//!
//! Recording is a few relaxed atomic stores into a ring allocated once: no lock, so that
//! watching the pipeline does not serialise it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use base::Seqno;

/// The environment variable naming the directory traces go to.
pub const TRACE_DIR_VARIABLE: &str = "TRIREME_SEQNO_TRACE_DIR";

/// Seqnos the ring holds: minutes of a benchmark's load (80 bytes each, about 20 MB).
pub const TRACE_CAPACITY: usize = 1 << 18;

/// The points of a seqno's way through this node, in the order it passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// This node's client handed its write-set to the group (local write-sets only; known
    /// once the seqno is, so recorded after [`Stage::Delivered`] with its own time).
    Submitted,
    /// The dispatcher took the ordered write-set from the group (or the IST receiver read
    /// it from its donor's stream).
    Delivered,
    /// Certified, and handed to its waiting client or queued for the appliers (an IST
    /// record: queued, with the verdict its donor reached).
    Certified,
    /// An applier took it from the queue (remote write-sets only).
    Picked,
    /// The apply monitor let it in (its dependencies have committed).
    ApplyEntered,
    /// The server asked for its turn in commit order (its rows are applied).
    CommitAsked,
    /// Its turn in commit order came.
    CommitEntered,
    /// It left commit order: committed.
    CommitLeft,
    /// The server's apply call returned, after its commit (remote write-sets only).
    ApplyReturned,
}

/// How many stages a seqno is timed at.
const STAGES: usize = 9;
// A stage indexes its slot's times and the CSV's columns: the last one must be the last.
const _: () = assert!(Stage::ApplyReturned as usize + 1 == STAGES);

/// The CSV's column of each stage, in [`Stage`] order.
const STAGE_NAMES: [&str; STAGES] = [
    "submitted_us",
    "delivered_us",
    "certified_us",
    "picked_us",
    "apply_entered_us",
    "commit_asked_us",
    "commit_entered_us",
    "commit_left_us",
    "apply_returned_us",
];

/// No time recorded at this stage.
const UNSET: u64 = u64::MAX;

/// One seqno's times.
struct Slot {
    /// The seqno the times belong to; `Seqno::UNDEFINED` while the slot is unused.
    seqno: AtomicI64,
    /// Whether this node's client wrote it.
    local: AtomicBool,
    /// Nanoseconds since the trace began, per [`Stage`]; [`UNSET`] if not reached.
    at: [AtomicU64; STAGES],
}

impl Slot {
    fn unused() -> Slot {
        Slot {
            seqno: AtomicI64::new(Seqno::UNDEFINED.0),
            local: AtomicBool::new(false),
            at: std::array::from_fn(|_| AtomicU64::new(UNSET)),
        }
    }
}

/// The ring of seqno timelines of one connection.
pub(crate) struct SeqnoTrace {
    file: PathBuf,
    began: Instant,
    slots: Box<[Slot]>,
}

impl SeqnoTrace {
    /// A trace for node `node_name`, if the environment asks for one (an empty value does
    /// not: it would write into whatever directory the server runs in).
    pub(crate) fn from_environment(node_name: &str) -> Option<SeqnoTrace> {
        let dir = std::env::var_os(TRACE_DIR_VARIABLE).filter(|dir| !dir.is_empty())?;
        Some(SeqnoTrace::new(Path::new(&dir), node_name))
    }

    fn new(dir: &Path, node_name: &str) -> SeqnoTrace {
        SeqnoTrace {
            file: dir.join(format!("{node_name}.seqnos.csv")),
            began: Instant::now(),
            slots: (0..TRACE_CAPACITY).map(|_| Slot::unused()).collect(),
        }
    }

    fn slot(&self, seqno: Seqno) -> &Slot {
        &self.slots[seqno.0.rem_euclid(TRACE_CAPACITY as i64) as usize]
    }

    fn since_began(&self) -> u64 {
        u64::try_from(self.began.elapsed().as_nanos()).unwrap_or(UNSET - 1)
    }

    /// The dispatcher took `seqno`: its slot starts over for it.
    pub(crate) fn delivered(&self, seqno: Seqno, local: bool) {
        let slot = self.slot(seqno);
        // Claim the slot first, so that a late stage of the seqno it held before cannot
        // write into the new timeline.
        slot.seqno.store(seqno.0, Ordering::Release);
        slot.local.store(local, Ordering::Relaxed);
        for at in &slot.at {
            at.store(UNSET, Ordering::Relaxed);
        }
        slot.at[Stage::Delivered as usize].store(self.since_began(), Ordering::Relaxed);
    }

    /// `seqno` reached `stage` now. Ignored if its slot holds another seqno (it was never
    /// delivered in this trace, or the ring has moved on).
    pub(crate) fn reached(&self, seqno: Seqno, stage: Stage) {
        self.reached_at(seqno, stage, Instant::now());
    }

    /// `seqno` reached `stage` at `at`, an instant already past (as [`SeqnoTrace::reached`]).
    pub(crate) fn reached_at(&self, seqno: Seqno, stage: Stage, at: Instant) {
        let slot = self.slot(seqno);
        if slot.seqno.load(Ordering::Acquire) == seqno.0 {
            let nanos = at.saturating_duration_since(self.began).as_nanos();
            let nanos = u64::try_from(nanos).unwrap_or(UNSET - 1);
            slot.at[stage as usize].store(nanos, Ordering::Relaxed);
        }
    }

    /// The trace as CSV, by seqno.
    fn render(&self) -> String {
        let mut rows: Vec<(i64, bool, [u64; STAGES])> = self
            .slots
            .iter()
            .filter(|slot| slot.seqno.load(Ordering::Acquire) >= 0)
            .map(|slot| {
                let at = std::array::from_fn(|i| slot.at[i].load(Ordering::Relaxed));
                (
                    slot.seqno.load(Ordering::Relaxed),
                    slot.local.load(Ordering::Relaxed),
                    at,
                )
            })
            .collect();
        rows.sort_unstable_by_key(|row| row.0);
        let mut text = format!("seqno,local,{}\n", STAGE_NAMES.join(","));
        for (seqno, local, at) in rows {
            let _ = write!(text, "{seqno},{}", u8::from(local));
            for nanos in at {
                if nanos == UNSET {
                    text.push(',');
                } else {
                    let _ = write!(text, ",{}", nanos / 1_000);
                }
            }
            text.push('\n');
        }
        text
    }

    /// Writes the trace to its file; says where, or why not.
    pub(crate) fn write(&self) -> Result<PathBuf, String> {
        std::fs::write(&self.file, self.render())
            .map(|()| self.file.clone())
            .map_err(|error| format!("cannot write {}: {error}", self.file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seqno_is_timed_at_each_stage_it_reaches_and_blank_at_the_others() {
        let trace = SeqnoTrace::new(Path::new("/nonexistent"), "n1");
        let submitted = Instant::now();
        trace.delivered(Seqno(7), true);
        trace.reached_at(Seqno(7), Stage::Submitted, submitted);
        trace.reached(Seqno(7), Stage::Certified);
        trace.reached(Seqno(7), Stage::CommitLeft);
        // Never delivered: not traced.
        trace.reached(Seqno(8), Stage::ApplyEntered);
        let text = trace.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let fields: Vec<&str> = lines[1].split(',').collect();
        assert_eq!(fields[..2], ["7", "1"]);
        let time = |i: usize| fields[i].parse::<u64>().unwrap();
        assert!(time(2) <= time(3), "submitted before delivered: {text}");
        assert!(time(3) <= time(4) && time(4) <= time(9), "{text}");
        assert_eq!(fields[5..9], ["", "", "", ""]);
        assert_eq!(fields[10], "");
    }

    #[test]
    fn a_slot_taken_over_by_a_later_seqno_forgets_the_earlier_one() {
        let trace = SeqnoTrace::new(Path::new("/nonexistent"), "n1");
        let first = Seqno(3);
        let later = Seqno(3 + TRACE_CAPACITY as i64);
        trace.delivered(first, false);
        trace.reached(first, Stage::ApplyEntered);
        trace.delivered(later, false);
        trace.reached(first, Stage::CommitLeft);
        let text = trace.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[1].starts_with(&format!("{},0,", later.0)));
        assert!(lines[1].ends_with(",,,,,,,"), "{}", lines[1]);
    }

    #[test]
    fn a_trace_that_cannot_be_written_says_where_it_went_wrong() {
        let trace = SeqnoTrace::new(Path::new("/nonexistent/dir"), "n1");
        let error = trace.write().unwrap_err();
        assert!(error.contains("/nonexistent/dir/n1.seqnos.csv"), "{error}");
    }
}
