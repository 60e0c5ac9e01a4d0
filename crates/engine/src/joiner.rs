//! A joiner's side of state transfer: its request, its progress ([`Joining`]), the server's
//! snapshot reported, and the moment its state, the donor's certification index and the
//! held deliveries meet.

use base::{Gtid, Nanos, NodeState, Seqno, Uuid};
use group::{Delivery, NoDonor, StateRequest};

use crate::effects::Effect;
use crate::joining::{FinishedJoin, JoinStep, Joining, IST_START_TIMEOUT_NS, RETRY_AFTER_NS};
use crate::server_view::ViewInfo;
use crate::task::Task;
use crate::{LogLevel, NodeEngine, PROTOCOL_VERSION};

/// Requests without a donor (one a second) before the joiner warns that it still has none.
const DONORLESS_REQUESTS_BEFORE_WARNING: u32 = 30;

/// Where the applier that sent this node's state request stands (see
/// [`NodeEngine::poll_state_request`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestWait {
    /// The server's snapshot is in place, or the join is over: the applier goes on.
    Done,
    /// Still waiting for the snapshot.
    Wait,
}

/// Why the server's report of its snapshot was refused (see [`NodeEngine::sst_received`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotRefusal {
    /// The node is not joining.
    NotJoining,
    /// The server's script failed: the node cannot go on (a fatal stop is on its way).
    Failed(i32),
    /// The report does not fit this cluster's history; the joiner asks again.
    Mismatch,
}

impl NodeEngine {
    /// The server's state transfer request (`None`: the server could not prepare one) for
    /// the applier that runs [`Task::RequestState`]: sends it to the group, with this
    /// node's position for IST. Then the applier waits ([`NodeEngine::poll_state_request`]).
    /// False when nothing was sent: the node cannot join (a fatal stop is on its way).
    pub fn send_state_request(&mut self, sst_request: Option<Vec<u8>>) -> bool {
        let Some(sst_request) = sst_request else {
            // Galera's first words, which DBAs and the test suites look for.
            self.emit(Effect::Fatal(
                "Will never receive state. Need to abort. The server could not prepare a \
                 state transfer (see its error above): this node cannot join without one; fix \
                 the cause and restart it"
                    .to_owned(),
            ));
            return false;
        };
        // IST can continue the server's own position if it is in this cluster's history.
        let cluster = self.view.cluster;
        let ist_from = self
            .start_position
            .filter(|h| h.cluster == cluster && h.seqno.is_defined())
            .map_or(Seqno::UNDEFINED, |h| h.seqno);
        if ist_from.is_defined() {
            let message = format!("asking for state from {ist_from} (IST if a donor holds it)");
            self.say(LogLevel::Info, message);
        }
        if sst_request.is_empty() && !self.take_own_state(cluster, ist_from) {
            return false;
        }
        if let Some(joining) = self.joining.as_mut() {
            joining.sst_request = Some((sst_request.clone(), ist_from));
        }
        self.request_state(sst_request, ist_from);
        true
    }

    /// Whether the applier that sent the state request may go on: once the server reports
    /// its snapshot (or the join is over, or the node closes). A request the group must
    /// hear again (no donor was free, or the donor left) is sent again from here.
    pub fn poll_state_request(&mut self) -> RequestWait {
        let Some(joining) = self.joining.as_mut() else {
            return RequestWait::Done;
        };
        if joining.received.is_some() {
            return RequestWait::Done;
        }
        if std::mem::take(&mut joining.request_again) {
            if let Some((sst_request, ist_from)) = joining.sst_request.clone() {
                self.request_state(sst_request, ist_from);
            }
            return RequestWait::Wait;
        }
        if self.stopped() {
            return RequestWait::Done;
        }
        RequestWait::Wait
    }

    /// A server that is already running (connected again at runtime) asks for no snapshot:
    /// its own state is the snapshot, and only IST can bring the rest. False, after a fatal
    /// stop, when this node has no position in the cluster's history to continue by IST.
    fn take_own_state(&mut self, cluster: Uuid, position: Seqno) -> bool {
        if !position.is_defined() {
            self.emit(Effect::Fatal(
                "the running server asked for no snapshot (its SST method cannot run on a \
                 live server) and this node has no position in this cluster's history to \
                 continue by IST; restart it to join by SST"
                    .to_owned(),
            ));
            return false;
        }
        // The server turns JOINED on a primary view at or past the position it connected
        // at; with no snapshot to report, that view is given once IST caught up.
        let own = self.view.own;
        let my_index = self
            .view
            .members
            .iter()
            .position(|m| m.uuid == own)
            .map_or(-1, |i| i as i32);
        let view = ViewInfo {
            state_id: Gtid {
                cluster,
                seqno: self.joining.as_ref().map_or(position, |j| j.join_seqno),
            },
            view_id: self.view.view_id,
            primary: true,
            members: self.view.members.clone(),
            my_index,
            proto_ver: PROTOCOL_VERSION,
        };
        if let Some(joining) = self.joining.as_mut() {
            joining.continue_own_state(cluster, position);
            joining.rejoin_view = Some(view);
        }
        true
    }

    /// Sends a state request to the group.
    fn request_state(&mut self, sst_request: Vec<u8>, ist_from: Seqno) {
        let request = StateRequest {
            joiner: 0,
            request_id: 0,
            donor_names: self.donor_names.clone(),
            sst_request,
            ist_from,
            ist_address: self.ist_address.clone(),
        };
        self.emit(Effect::RequestState(request));
    }

    /// The joiner's server has its snapshot, at `state` (`rcode` 0), or failed to get it.
    pub fn sst_received(&mut self, state: Gtid, rcode: i32) -> Result<(), SnapshotRefusal> {
        let cluster = self.view.cluster;
        let Some(joining) = self.joining.as_mut() else {
            return Err(SnapshotRefusal::NotJoining);
        };
        if rcode != 0 && !joining.ist_only {
            // The server's snapshot script failed: no state will come from it, and asking
            // again cannot restart the server's receiving side.
            let message = format!(
                "state transfer failed (code {rcode}): this node cannot continue without the \
                 cluster's state; fix the cause named above and restart it"
            );
            self.emit(Effect::Fatal(message));
            return Err(SnapshotRefusal::Failed(rcode));
        }
        if rcode != 0 || state.cluster != cluster || !state.seqno.is_defined() {
            let message = format!(
                "state transfer failed (code {rcode}, position {state}, cluster {cluster}); \
                 asking again"
            );
            self.say(LogLevel::Error, message);
            return Err(SnapshotRefusal::Mismatch);
        }
        joining.received = Some(state);
        Ok(())
    }

    /// This joiner's donor could not send its snapshot: it will never arrive, and the
    /// server's receiving side cannot be restarted in place. Stops, as Galera's joiner does,
    /// after leaving the group (a joiner that died must not keep its vote).
    pub(crate) fn on_transfer_failed(&mut self, donor: &str) {
        let waiting = self
            .joining
            .as_ref()
            .is_some_and(|joining| joining.received.is_none());
        if !waiting {
            return;
        }
        let message = format!(
            "Will never receive state. Need to abort. The state transfer from {donor} \
             failed on the donor (see its error log)."
        );
        self.emit(Effect::Fatal(message));
    }

    /// The order jumped past this node: stop certifying, hold what comes, and catch up by
    /// IST from `position` (what this server already has).
    pub(crate) fn fall_behind(
        &mut self,
        cluster: Uuid,
        join_seqno: Seqno,
        position: Seqno,
        view: Option<ViewInfo>,
    ) {
        // The server may hold more than was certified here (a snapshot that ends past the
        // index it came with): what it holds is not asked for again.
        let position = position.max(self.in_server_upto);
        self.certifier = None;
        self.withdraw_waiting();
        self.shift(NodeState::Joiner);
        let mut joining = Joining::new(join_seqno);
        joining.continue_own_state(cluster, position);
        joining.rejoin_view = view;
        joining.donor_awaited_since = Some(self.now);
        joining.appliers_behind = true;
        joining.membership = self.view.membership;
        self.joining = Some(joining);
        let message = format!(
            "this node missed seqnos {}..={} while it was out of the primary component; \
             catching up by IST",
            position.next(),
            join_seqno.prev()
        );
        self.say(LogLevel::Info, message);
        self.request_state(Vec::new(), position);
    }

    /// A joiner's side of its own ordered request: the donor it went to (watched until
    /// the transfer is done), or none free yet, and then it asks again in a second.
    pub(crate) fn note_own_request(
        &mut self,
        now: Nanos,
        joiner: Uuid,
        donor: &Result<u64, NoDonor>,
        donor_uuid: Option<Uuid>,
    ) {
        let own_request = joiner == self.view.own;
        let name = donor_uuid.map_or_else(|| "?".to_owned(), |u| self.member_name(u));
        let Some(joining) = self.joining.as_mut().filter(|_| own_request) else {
            return;
        };
        let (level, message) = match donor {
            Ok(_) => {
                joining.donor = donor_uuid;
                // Its stream's header comes at once; a donor that never sends it (it
                // died, or was cut off and never heard of the request) is asked for again.
                if joining.transfer.index.is_none() {
                    joining.donor_awaited_since = Some(now);
                }
                let message = format!("our state transfer request is ordered: donor {name}");
                (LogLevel::Info, message)
            }
            Err(reason) => {
                joining.retry_at = Some(Nanos(now.0 + RETRY_AFTER_NS));
                joining.donorless += 1;
                let message =
                    format!("no donor for our state transfer yet: {reason}; asking again in 1 s");
                // A donor busy for a moment (another joiner's snapshot) is routine; one
                // missing for long is worth a warning, repeated at the same pace.
                let long = joining.donorless % DONORLESS_REQUESTS_BEFORE_WARNING == 0;
                let level = if long {
                    LogLevel::Warning
                } else {
                    LogLevel::Info
                };
                (level, message)
            }
        };
        self.say(level, message);
    }

    /// Moves a join on (see [`Joining::next_step`]); once the server has its state and the
    /// donor's index arrived, resumes delivery.
    pub(crate) fn try_finish_join(&mut self, now: Nanos) {
        let step = match self.joining.as_mut() {
            Some(joining) => joining.next_step(now),
            None => return,
        };
        match step {
            JoinStep::Wait => {}
            JoinStep::Say(level, message) => {
                if level == LogLevel::Warning {
                    base::mark!("engine.join_starts_over");
                }
                self.say(level, message)
            }
            JoinStep::GiveUp(message) => {
                base::mark!("engine.join_gave_up_for_want_of_a_donor");
                self.emit(Effect::Fatal(message));
            }
            JoinStep::AskForIst { from, overdue } => {
                if overdue {
                    base::mark!("engine.ist_asked_again_after_a_silent_donor");
                    let message = format!(
                        "no donor stream {} s after asking for IST; asking again",
                        IST_START_TIMEOUT_NS / 1_000_000_000
                    );
                    self.say(LogLevel::Warning, message);
                }
                self.request_state(Vec::new(), from);
            }
            JoinStep::Finish(join) => self.finish_join(*join),
        }
    }

    /// The server's state, the donor's index and the held deliveries meet: certification
    /// continues from the index, what was held is certified (and applied where the state
    /// does not hold it yet), and the node is JOINED.
    fn finish_join(&mut self, join: FinishedJoin) {
        let FinishedJoin {
            received,
            index: (position, cert),
            queued_upto,
            rejoin_view,
            join_seqno,
            appliers_behind,
        } = join;
        let applied_upto = received.seqno.max(queued_upto);
        assert!(
            applied_upto >= position && applied_upto >= join_seqno.prev(),
            "a join finished with a hole: state up to {applied_upto}, index at {position}, \
             joined at {join_seqno}"
        );
        self.in_server_upto = applied_upto;
        self.certifier = Some(cert);
        self.view.member_of = Some(self.view.membership);
        if !appliers_behind {
            self.emit(Effect::MonitorsAt(received.seqno));
        }
        if let Some(view) = rejoin_view {
            self.tasks.push(Task::View {
                view,
                ordered: false,
            });
        }
        self.release_held(position, applied_upto);
        self.joining = None;
        self.shift(NodeState::Joined);
        let cluster = self.view.cluster;
        self.save_running_state(cluster, false);
        self.saved_sole_member = false;
    }

    /// Certifies what was held during the transfer after the index's `position`, and
    /// queues for the appliers what comes after `applied_upto`.
    fn release_held(&mut self, position: Seqno, applied_upto: Seqno) {
        for delivery in std::mem::take(&mut self.held) {
            match delivery {
                Delivery::WriteSet {
                    seqno,
                    local,
                    safe_seqno,
                    payload,
                    ..
                } if seqno > position => {
                    self.last_safe_seqno = self.last_safe_seqno.max(safe_seqno);
                    self.certify_now(seqno, local, safe_seqno, payload.into());
                }
                Delivery::View(view) if view.ordered && view.seqno > position => {
                    self.view_in_order(&view);
                    if view.seqno > applied_upto {
                        let info = ViewInfo::of(&view);
                        self.queue_view(&view, info);
                    }
                }
                _ => {}
            }
        }
    }
}
