//! The pause point: what `pause` (FLUSH TABLES WITH READ LOCK, BACKUP STAGE, an rsync
//! donor's "flush tables") lets finish and what it holds back.
//!
//! A server that pauses its provider is about to read its own data as one consistent state
//! (an rsync snapshot copies the files, a backup records its position). That state must be
//! exactly "every seqno up to the pause point committed, nothing after it started". So the
//! point is the highest seqno anything was already allowed to start on (an applier took it,
//! or a local transaction got its verdict): those must finish, and everything after the
//! point waits for `resume`, whoever would run it (an applier, a local commit, a replay,
//! a TOI statement, a view).

use base::Seqno;

/// The pause state of one node, and the highest seqno released to run so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseGate {
    /// Everything up to here was released: an applier took it or a local transaction was
    /// told its verdict. It never goes back.
    started_upto: Seqno,
    /// While paused: the point. Nothing after it may start.
    point: Option<Seqno>,
}

impl Default for PauseGate {
    fn default() -> Self {
        PauseGate {
            started_upto: Seqno::UNDEFINED,
            point: None,
        }
    }
}

impl PauseGate {
    /// Records that `seqno` may now run (taken by an applier, or handed to its local
    /// transaction). A paused gate never releases a seqno after its point.
    pub fn started(&mut self, seqno: Seqno) {
        assert!(
            !self.holds(seqno),
            "seqno {seqno} started after the pause point {:?}",
            self.point
        );
        self.started_upto = self.started_upto.max(seqno);
    }

    /// Pauses at the highest seqno released so far or `committed`, whichever is later, and
    /// returns the point. A gate that is already paused keeps its point (wsrep-lib pauses
    /// once at a time; a repeated call must not move the point under the first caller).
    pub fn pause(&mut self, committed: Seqno) -> Seqno {
        let point = *self.point.get_or_insert(self.started_upto.max(committed));
        assert!(
            point >= self.started_upto,
            "the pause point {point} is behind a released seqno {}",
            self.started_upto
        );
        point
    }

    /// Lifts the pause.
    pub fn resume(&mut self) {
        self.point = None;
    }

    /// The point while paused.
    pub fn point(&self) -> Option<Seqno> {
        self.point
    }

    /// Whether `seqno` must wait for `resume`.
    pub fn holds(&self, seqno: Seqno) -> bool {
        self.point.is_some_and(|point| seqno > point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_point_covers_everything_released_and_committed() {
        let mut gate = PauseGate::default();
        gate.started(Seqno(7));
        gate.started(Seqno(5));
        assert_eq!(
            gate.pause(Seqno(3)),
            Seqno(7),
            "released but not committed yet"
        );
        assert!(!gate.holds(Seqno(7)), "a released seqno finishes");
        assert!(gate.holds(Seqno(8)));
        gate.resume();
        assert!(!gate.holds(Seqno(8)));
        assert_eq!(
            gate.pause(Seqno(9)),
            Seqno(9),
            "committed beyond the released"
        );
    }

    #[test]
    fn a_second_pause_keeps_the_first_point() {
        let mut gate = PauseGate::default();
        gate.started(Seqno(4));
        assert_eq!(gate.pause(Seqno(4)), Seqno(4));
        gate.started(Seqno(2));
        assert_eq!(gate.pause(Seqno(10)), Seqno(4));
        assert_eq!(gate.point(), Some(Seqno(4)));
    }

    #[test]
    #[should_panic(expected = "started after the pause point")]
    fn nothing_after_the_point_may_start() {
        let mut gate = PauseGate::default();
        gate.pause(Seqno(1));
        gate.started(Seqno(2));
    }

    #[test]
    fn an_unpaused_gate_holds_nothing() {
        let gate = PauseGate::default();
        assert!(!gate.holds(Seqno(i64::MAX)));
        assert_eq!(gate.point(), None);
    }
}
