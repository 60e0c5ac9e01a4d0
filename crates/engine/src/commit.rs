//! A local transaction after its verdict: what the verdict means for it, commit order, its
//! release, its replay after a brute-force abort, and TOI statements. The monitors
//! themselves are the driver's (blocking on a real node); the engine decides and keeps the
//! books of which seqnos it holds in them.

use base::{Gtid, Seqno};
use cert::Verdict;

use crate::outcome::CertifyOutcome;
use crate::server_view::Meta;
use crate::{LogLevel, NodeEngine};

/// What a verdict means for the local transaction that waited for it (see
/// [`NodeEngine::verdict_action`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictAction {
    /// Failed certification: pass the seqno in the apply monitor; the server rolls back.
    Failed(Meta),
    /// Brute-force aborted by an earlier seqno meanwhile: replay.
    Replay(Meta),
    /// Passed: enter the apply monitor after `meta.depends_on` (and, for TOI, commit order
    /// at once, to run alone), then [`NodeEngine::entered_apply`].
    Enter(Meta),
}

/// What `release` leaves the driver to do with the monitors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Nothing: the transaction went through commit order, goes on with another fragment,
    /// or was never ordered.
    Done,
    /// Its seqno never went through commit order: pass it in both monitors, leaving the
    /// apply monitor if it `held_apply` and self-cancelling it there otherwise (only when
    /// it `passed`: a failed seqno was passed at its verdict).
    Consume {
        /// The seqno.
        seqno: Seqno,
        /// It holds its place in the apply monitor.
        held_apply: bool,
        /// Its verdict was a pass.
        passed: bool,
    },
}

/// What a replay needs (see [`NodeEngine::begin_replay`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    /// The transaction's identity and ordering.
    pub meta: Meta,
    /// Its flags.
    pub flags: u32,
    /// Its row data.
    pub data: Vec<u8>,
    /// It holds its place in the apply monitor already (aborted after it entered).
    pub holds_slot: bool,
}

impl NodeEngine {
    /// What the verdict of `trx_id` (ordered at `seqno`) means for it; `toi` for a TOI
    /// statement, which waits for every earlier seqno.
    pub fn verdict_action(
        &mut self,
        trx_id: u64,
        conn_id: u64,
        seqno: Seqno,
        verdict: Verdict,
        toi: bool,
    ) -> VerdictAction {
        let meta = Meta {
            gtid: Gtid {
                cluster: self.view.cluster,
                seqno,
            },
            source: self.view.own,
            trx_id,
            conn_id,
            depends_on: Seqno::UNDEFINED,
        };
        let aborted_by = self.aborted_by(trx_id);
        match verdict {
            Verdict::Fail(_) => {
                self.stats.counters.cert_failures += 1;
                VerdictAction::Failed(meta)
            }
            Verdict::Pass { depends_on } => {
                if aborted_by.is_some_and(|bf| bf < seqno) {
                    base::mark!("engine.replay_after_brute_force_abort");
                    return VerdictAction::Replay(Meta { depends_on, ..meta });
                }
                let depends_on = if toi { seqno.prev() } else { depends_on };
                VerdictAction::Enter(Meta { depends_on, ..meta })
            }
        }
    }

    /// The local transaction ordered at `seqno` entered the apply monitor (`toi`: and commit
    /// order, holding it until `to_execute_end`).
    pub fn entered_apply(&mut self, seqno: Seqno, toi_conn: Option<u64>) {
        self.entered_apply.insert(seqno);
        if let Some(conn_id) = toi_conn {
            self.toi_by_conn.insert(conn_id, seqno);
        }
    }

    /// An applier entered the apply monitor with `seqno`.
    pub fn applier_entered(&mut self, seqno: Seqno) {
        self.entered_apply.insert(seqno);
    }

    /// The seqno left the apply monitor's books; true if the engine held it there (the
    /// driver then leaves the monitor).
    pub fn leave_apply(&mut self, seqno: Seqno) -> bool {
        self.entered_apply.remove(&seqno)
    }

    /// Samples where an applier of `seqno` enters, with `last_applied` the last seqno fully
    /// applied.
    pub fn applier_entering(&mut self, seqno: Seqno, depends_on: Seqno, last_applied: Seqno) {
        let window = &mut self.stats.window;
        window
            .apply_window
            .record(seqno.0.saturating_sub(last_applied.0).max(0) as u64);
        window
            .apply_out_of_order_entry
            .record(seqno > last_applied.next());
        if depends_on > last_applied {
            window.apply_waits += 1;
        }
    }

    /// Samples a seqno entering commit order with `last_committed` the last one committed.
    pub fn entering_commit_order(&mut self, seqno: Seqno, last_committed: Seqno) {
        self.stats
            .window
            .commit_window
            .record(seqno.0.saturating_sub(last_committed.0).max(0) as u64);
    }

    /// `seqno` left commit order. True when it is a local transaction's that holds its place
    /// in the apply monitor, which the driver then leaves: a remote write-set leaves the
    /// apply monitor when its apply callback returns, after the server's whole commit (with
    /// the binary log on, the server leaves commit order before the storage engine's commit
    /// is visible, and a causal read must not count the seqno done before a reader can see
    /// it). `last_applied` is the apply monitor's last seqno, for the out-of-order sample.
    pub fn left_commit_order(&mut self, seqno: Seqno, last_applied: Seqno) -> bool {
        let local = match self
            .trxs
            .values_mut()
            .find(|t| t.outcome.is_some_and(|(s, _)| s == seqno))
        {
            Some(trx) => {
                trx.commit_done = true;
                true
            }
            None => false,
        };
        let entered = local && self.entered_apply.remove(&seqno);
        if entered {
            let out_of_order = last_applied.next() != seqno;
            self.stats
                .window
                .apply_out_of_order_leave
                .record(out_of_order);
        }
        if local {
            self.stats.counters.local_commits += 1;
        }
        entered
    }

    /// Forgets a finished local transaction. An ordered seqno it never took through commit
    /// order (a rollback the server did not order) must be consumed by the driver: a seqno
    /// left behind would stop every later commit.
    ///
    /// After a streaming fragment the transaction stays: wsrep-lib releases the handle after
    /// every fragment and goes on with the same transaction id.
    pub fn release(&mut self, trx_id: u64) -> ReleaseOutcome {
        if let Some(trx) = self
            .trxs
            .get_mut(&trx_id)
            .filter(|t| t.continues_after_release())
        {
            trx.start_next_fragment();
            self.stats.counters.fragments_replicated += 1;
            return ReleaseOutcome::Done;
        }
        let Some(trx) = self.trxs.remove(&trx_id) else {
            return ReleaseOutcome::Done;
        };
        let Some((seqno, verdict)) = trx.outcome.filter(|_| !trx.commit_done) else {
            return ReleaseOutcome::Done;
        };
        let held_apply = self.entered_apply.remove(&seqno);
        // The server rolled it back after it was ordered (a brute-force abort, a streaming
        // rollback): its seqno is passed over in both monitors, so nothing waits on it. A
        // note, as in Galera, where this is routine; but a whole transaction that passed
        // certification is one the other members commit, and this node did not.
        let whole = trx.flags & (writeset::flags::TRX_END | writeset::flags::ISOLATION)
            == writeset::flags::TRX_END;
        let (level, why) = match verdict {
            Verdict::Fail(_) => (LogLevel::Info, "it failed certification"),
            Verdict::Pass { .. } if whole => (
                LogLevel::Warning,
                "it passed certification: the other members commit it",
            ),
            Verdict::Pass { .. } => (LogLevel::Info, "a fragment, rolled back"),
        };
        let message =
            format!("transaction {trx_id} released without committing its seqno {seqno} ({why})");
        self.say(level, message);
        ReleaseOutcome::Consume {
            seqno,
            held_apply,
            passed: verdict.is_pass(),
        }
    }

    /// Begins the replay of the brute-force aborted `trx_id` (again, after a wait): from
    /// here on no seqno may abort it. What the replay needs; `None` when it is not a
    /// transaction that passed certification.
    pub fn begin_replay(&mut self, trx_id: u64) -> Option<ReplayPlan> {
        let trx = self.trxs.get_mut(&trx_id)?;
        let Some((seqno, Verdict::Pass { depends_on })) = trx.outcome else {
            return None;
        };
        trx.replaying = true;
        Some(ReplayPlan {
            meta: Meta {
                gtid: Gtid {
                    cluster: self.view.cluster,
                    seqno,
                },
                source: self.view.own,
                trx_id,
                conn_id: trx.conn_id,
                depends_on,
            },
            flags: trx.flags,
            data: trx.data.clone(),
            // A victim aborted after certification already holds its apply slot; one
            // aborted while waiting for it does not.
            holds_slot: self.entered_apply.contains(&seqno),
        })
    }

    /// A replay ran (through the server's apply).
    pub fn replayed(&mut self) {
        self.stats.counters.replays += 1;
    }

    /// The server failed to replay `trx_id` at `seqno`, a write-set every other member
    /// applies: this node's data is not the cluster's, and it leaves (Galera's replay
    /// failure is an inconsistency too). The message says so.
    pub fn replay_failed(&mut self, trx_id: u64, seqno: Seqno) -> String {
        let at = Gtid {
            cluster: self.view.cluster,
            seqno,
        };
        let message = format!(
            "Inconsistency detected: the server failed to replay local transaction \
             {trx_id} at {at}, which passed certification and which every other member \
             commits; this node leaves the cluster"
        );
        self.declare_inconsistent(&message);
        message
    }

    /// The seqno a TOI statement on `conn_id` holds commit order at, forgotten here: its
    /// statement ended.
    pub fn end_toi(&mut self, conn_id: u64) -> Option<Seqno> {
        self.toi_by_conn.remove(&conn_id)
    }

    /// What this node knows about `seqno`, for stall reports.
    pub fn describe(&self, seqno: Seqno) -> String {
        let local = self.trxs.iter().find_map(|(id, trx)| {
            trx.outcome
                .filter(|(s, _)| *s == seqno)
                .map(|(_, verdict)| {
                    format!(
                        "local transaction {id} ({verdict:?}, aborted by {:?})",
                        trx.aborted_by
                    )
                })
        });
        let queued = self.tasks.position_of(seqno);
        let applying = self.entered_apply.contains(&seqno);
        format!(
            "{}; queued for appliers at {queued:?}; in the apply monitor: {applying}; \
             appliers busy {}, serial event running {}, paused at {:?}",
            local.unwrap_or_else(|| "no local transaction".into()),
            self.tasks.applying_now(),
            self.tasks.serial_running(),
            self.pause.point()
        )
    }
}

impl From<VerdictAction> for CertifyOutcome {
    fn from(action: VerdictAction) -> CertifyOutcome {
        match action {
            VerdictAction::Failed(meta) => CertifyOutcome::Failed(meta),
            VerdictAction::Replay(meta) => CertifyOutcome::BfAborted(meta),
            VerdictAction::Enter(meta) => CertifyOutcome::Committable(meta),
        }
    }
}
