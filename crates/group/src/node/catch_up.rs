//! A JOINED member's catch-up: the write-sets the group ordered during its state transfer
//! are worked off within a bounded time, and the group is paused only as much as that needs.
//!
//! A JOINED member takes part in flow control (as in Galera), but its limit starts above the
//! backlog it had when it turned JOINED and glides down to the SYNCED limit over
//! `gcs.catch_up_period` (a minute unless set). A node that applies faster than the cluster
//! writes works the backlog off before the glide reaches it and never pauses anyone. A
//! slower one pauses the group just enough to keep under the glide, and so turns SYNCED at
//! most one period (and one pause) after it turned JOINED, under any load: the slower it
//! is, the more the others' clients pay for that bound; a longer period costs them less.
//! Galera's JOINED node keeps its backlog from growing but never has to shrink it: under a
//! load its appliers cannot outrun, it stays JOINED for good.

use std::time::Duration;

use base::{Nanos, NodeState, SYNCED_QUEUE_MAX};

use super::flow::FLOW_STOP_AT_ONCE_LIMITS;
use super::GroupNode;

/// The catch-up of this member while it is JOINED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CatchUp {
    /// When the member turned JOINED.
    began: Nanos,
    /// Its apply queue then.
    backlog: u64,
}

impl CatchUp {
    /// The part of the backlog still allowed at `now`: all of it when JOINED began, none
    /// once `period` has passed, linearly in between.
    pub(super) fn allowance(&self, now: Nanos, period: Duration) -> u64 {
        let period = period.as_nanos().max(1);
        let left = period.saturating_sub(u128::from(now.since(self.began)));
        let allowed = u128::from(self.backlog) * left / period;
        u64::try_from(allowed).expect("at most the backlog")
    }
}

/// The queue lengths at which this member asks the group to pause, and lets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FlowLimits {
    /// A queue longer than this asks for a stop.
    pub(super) stop_above: u64,
    /// A queue at or below this lifts the stop.
    pub(super) resume_at_or_below: u64,
    /// A queue longer than this asks for a stop at once, without the grace (`flow.rs`).
    pub(super) stop_at_once_above: u64,
}

impl GroupNode {
    /// This member's flow-control limits now. SYNCED: `gcs.fc_limit` (scaled) and
    /// `gcs.fc_factor`. JOINED: the same plus what the catch-up still allows, and a resume
    /// level no higher than the queue at which the node turns SYNCED, so that a pause takes
    /// it there once the allowance is spent.
    pub(super) fn flow_limits(&self) -> FlowLimits {
        let members = self.state.members.len();
        let stop_above = self.config.fc_stop_above(members);
        let resume_at = self.config.fc_resume_at(members);
        debug_assert!(resume_at <= stop_above, "gcs.fc_factor is at most 1");
        let at_once_margin = stop_above * FLOW_STOP_AT_ONCE_LIMITS;
        match self.flow.catch_up {
            None => FlowLimits {
                stop_above,
                resume_at_or_below: resume_at,
                stop_at_once_above: stop_above + at_once_margin,
            },
            Some(catch_up) => {
                let allowance = catch_up.allowance(self.now, self.config.catch_up_period);
                FlowLimits {
                    stop_above: stop_above + allowance,
                    resume_at_or_below: resume_at.min(SYNCED_QUEUE_MAX) + allowance,
                    stop_at_once_above: stop_above + allowance + at_once_margin,
                }
            }
        }
    }

    /// Starts the catch-up when this member turns JOINED (its backlog is the apply queue it
    /// reported last) and ends it when it leaves JOINED, saying how it went.
    pub(super) fn follow_catch_up(&mut self, before: NodeState, now: NodeState) {
        if now == NodeState::Joined && before != NodeState::Joined {
            let backlog = self.flow.apply_queue_len;
            self.flow.catch_up = Some(CatchUp {
                began: self.now,
                backlog,
            });
            tracing::info!(
                target: "wsrep",
                "JOINED with {backlog} write-sets to apply: flow control lets this backlog \
                 shrink to nothing within gcs.catch_up_period ({} s)",
                self.config.catch_up_period.as_secs_f64()
            );
        } else if now != NodeState::Joined {
            if let Some(catch_up) = self.flow.catch_up.take() {
                tracing::info!(
                    target: "wsrep",
                    "{now} after {} ms JOINED (a backlog of {} write-sets when it began)",
                    self.now.since(catch_up.began) / 1_000_000,
                    catch_up.backlog
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_glides_from_the_whole_backlog_to_nothing() {
        let catch_up = CatchUp {
            began: Nanos(1_000),
            backlog: 3_000,
        };
        let period = Duration::from_secs(30);
        let at = |seconds: u64| Nanos(1_000 + seconds * 1_000_000_000);
        assert_eq!(catch_up.allowance(at(0), period), 3_000);
        assert_eq!(catch_up.allowance(at(10), period), 2_000);
        assert_eq!(catch_up.allowance(at(10), period * 2), 2_500);
        assert_eq!(catch_up.allowance(at(30), period), 0);
        assert_eq!(catch_up.allowance(Nanos(u64::MAX), period), 0);
    }
}
