//! Control actions this member orders for the group (its node state, flow-control wish,
//! commit cut, cache reach), paced so that only a changed wish goes at once.

use base::{NodeState, Seqno};

use super::GroupNode;
use crate::config::GroupConfig;
use crate::state::{Control, LogEntry};
use crate::wire::WireMessage;

/// Ticks between two reports of this member's committed seqno.
const COMMITTED_REPORT_TICKS: u64 = 5;

/// When each kind of control message was last sent, so that a change goes out at once
/// and a repeat waits.
#[derive(Default)]
pub(super) struct ControlPacing {
    pub(super) state: LastSent<NodeState>,
    pub(super) flow: LastSent<bool>,
    weight: LastSent<u8>,
    pub(super) committed: Option<u64>,
    cached: Option<u64>,
    pub(super) votes: Option<u64>,
}

/// The last value sent of one kind of control message, and the tick it went.
pub(super) struct LastSent<T>(Option<(T, u64)>);

impl<T> Default for LastSent<T> {
    fn default() -> Self {
        LastSent(None)
    }
}

impl<T: PartialEq + Copy> LastSent<T> {
    /// The last value sent, if any.
    pub(super) fn last(&self) -> Option<T> {
        self.0.map(|(value, _)| value)
    }

    /// True (and recorded as sent) if `value` differs from the last one sent, or the last
    /// send is `every_ticks` old.
    pub(super) fn due(&mut self, value: T, tick: u64, every_ticks: u64) -> bool {
        let due = match self.0 {
            Some((last, at)) => last != value || tick >= at + every_ticks,
            None => true,
        };
        if due {
            self.0 = Some((value, tick));
        }
        due
    }
}

/// True when an action last done at `last` (never, if `None`) may be repeated at `tick`.
pub(super) fn is_due(last: Option<u64>, tick: u64, every_ticks: u64) -> bool {
    last.is_none_or(|t| tick >= t + every_ticks)
}

impl GroupNode {
    pub(super) fn send_controls(&mut self) {
        if !self.member || !self.primary {
            return;
        }
        let may_pause = self.may_pause_the_group();
        let limits = self.flow_limits();
        let may_ask_stop = may_pause && !self.flow.stop_wanted && !self.paused_by_others();
        if !may_ask_stop {
            // A grace runs only while a stop could follow it; a stale one would keep
            // `flow_deadline` in the past and the loop polling without a pause.
            self.flow.over_limit_since = None;
        }
        if may_ask_stop && self.queue_wants_stop(&limits) {
            self.flow.stop_wanted = true;
            self.flow.over_limit_since = None;
            self.flow.counters.sent += 1;
            if self.flow.catch_up.is_some() {
                base::mark!("group.flow_stop_while_catching_up");
            }
        } else if self.flow.stop_wanted
            && (!may_pause || self.flow.apply_queue_len <= limits.resume_at_or_below)
        {
            // Not counted: Galera's `wsrep_flow_control_sent` counts the stops alone.
            self.flow.stop_wanted = false;
        }
        let me = self.me.raft_id;
        let Some(record) = self.state.members.get(&me) else {
            return;
        };
        let (tick, resend) = (self.tick, self.config.resend_ticks);
        let mut wanted = Vec::new();
        // A changed wish goes out at once; the same wish is repeated only after
        // `resend_ticks`, in case the leader lost it. A resume that waited for the stop's
        // resend timer would pause the whole group for that long.
        if record.state != self.local_state && self.pacing.state.due(self.local_state, tick, resend)
        {
            wanted.push(Control::State(me, self.local_state));
        }
        if let Some(weight) = self.wanted_weight() {
            if record.weight != weight && self.pacing.weight.due(weight, tick, resend) {
                wanted.push(Control::Weight(me, weight));
            }
        }
        if self.flow_wish_due(tick, resend) {
            wanted.push(if self.flow.stop_wanted {
                Control::FlowStop(me)
            } else {
                Control::FlowResume(me)
            });
        }
        let reported = self
            .state
            .committed
            .get(&me)
            .copied()
            .unwrap_or(Seqno::UNDEFINED);
        // The commit cut only drives purging, so progress reports are paced, not immediate.
        if self.committed > reported
            && self.committed <= self.state.last_seqno
            && is_due(self.pacing.committed, tick, COMMITTED_REPORT_TICKS)
        {
            self.pacing.committed = Some(tick);
            wanted.push(Control::Committed(me, self.committed));
        }
        let cached = self.state.cached_from.get(&me).copied();
        if cached != Some(self.cached_from)
            && is_due(self.pacing.cached, tick, COMMITTED_REPORT_TICKS)
        {
            self.pacing.cached = Some(tick);
            wanted.push(Control::Cached(me, self.cached_from));
        }
        wanted.extend(self.votes_due());
        for control in wanted {
            if self.is_leader() {
                self.propose_entry(&LogEntry::Control(control));
            } else {
                self.send_to_leader(&WireMessage::Control(control));
            }
        }
    }

    /// Whether this member's flow-control wish must go to the group now (and, if so, it is
    /// recorded as sent). A wish the group state does not show goes at once if it changed,
    /// and is repeated after `resend` ticks. A wish the state already shows goes too when
    /// the last one sent was its opposite: that one is still on its way to be ordered. A
    /// queue that crossed the limit for a moment has usually drained before its stop is
    /// ordered; sending the resume right behind it, instead of once the stop is ordered,
    /// makes the pause last the gap between the two entries rather than a round through
    /// the leader. (Both go to the leader in order and it orders them in that order; were
    /// they ever swapped, the repeat after `resend` lifts the stop.)
    fn flow_wish_due(&mut self, tick: u64, resend: u64) -> bool {
        let wish = self.flow.stop_wanted;
        let shown = self.state.paused_by.contains(&self.me.raft_id);
        let opposite_on_its_way = self.pacing.flow.last() == Some(!wish);
        (wish != shown || opposite_on_its_way) && self.pacing.flow.due(wish, tick, resend)
    }

    /// Reports the node's last committed seqno (its part of the commit cut).
    pub fn report_committed(&mut self, seqno: Seqno) {
        self.committed = self.committed.max(seqno);
    }

    /// Reports the oldest seqno this node's write-set cache holds (`UNDEFINED`: none), so
    /// that donor selection can prefer a member that can serve a joiner's IST.
    pub fn report_cached(&mut self, seqno: Seqno) {
        self.cached_from = seqno;
    }

    /// Takes new values of the options that may change while running (timeouts, flow control
    /// and `repl.max_ws_size`); the others keep their values. The caller validated `config`.
    pub fn reconfigure(&mut self, config: &GroupConfig) {
        self.config.suspect_timeout = config.suspect_timeout;
        self.config.inactive_timeout = config.inactive_timeout;
        self.config.fc_limit = config.fc_limit;
        self.config.fc_factor = config.fc_factor;
        self.config.catch_up_period = config.catch_up_period;
        self.config.max_ws_size = config.max_ws_size;
        self.config.ignore_split_brain = config.ignore_split_brain;
        self.config.ignore_quorum = config.ignore_quorum;
        self.config.weight = config.weight;
        tracing::info!(
            suspect = ?config.suspect_timeout,
            fc_limit = config.fc_limit,
            fc_factor = config.fc_factor,
            catch_up_period = ?config.catch_up_period,
            max_ws_size = config.max_ws_size,
            ignore_split_brain = config.ignore_split_brain,
            ignore_quorum = config.ignore_quorum,
            "group options changed"
        );
    }
}
