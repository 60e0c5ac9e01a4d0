//! One connection's life: `connect` (refused twice over), where the server starts from, the
//! engine's regular tick (joins moved on, a caught-up node SYNCED, votes answered, the
//! identity and last primary view for a crash kept), and `disconnect`.

use base::{Gtid, Nanos, NodeState, Seqno};
use group::restart::SavedMembership;

use crate::votes::VoteBook;
use crate::NodeEngine;

/// `connect` on a node that is connected already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlreadyConnected;

/// What a connection starts with (see [`NodeEngine::start_connection`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionStart {
    /// This connection founds the cluster.
    pub bootstrap: bool,
    /// Where the server stands (its own position, or the saved one), if anywhere.
    pub start_position: Option<Gtid>,
    /// Where this node receives state transfer streams.
    pub ist_address: String,
}

impl NodeEngine {
    /// Marks the node connecting (refused if it is connected already); `donor_names` is
    /// `wsrep_sst_donor`.
    pub fn begin_connection(&mut self, donor_names: &str) -> Result<(), AlreadyConnected> {
        if self.life.connected {
            return Err(AlreadyConnected);
        }
        self.life.connected = true;
        self.life.connection += 1;
        self.life.closing = false;
        self.life.leaving = false;
        self.follow_a_new_order();
        self.shift(NodeState::Open);
        self.donor_names = donor_names.to_owned();
        Ok(())
    }

    /// A new connection follows a new order from its first view: what this node made of
    /// the last connection's order (its certification index, held deliveries, what its
    /// server holds, the members it saw) does not carry over. Its server does, with the
    /// local transactions and the pause, which outlive a connection.
    fn follow_a_new_order(&mut self) {
        self.certifier = None;
        self.certifying = None;
        self.held.clear();
        self.in_server_upto = Seqno::UNDEFINED;
        self.last_safe_seqno = Seqno::UNDEFINED;
        self.saved_sole_member = false;
        let view = &mut self.view;
        view.membership = 0;
        view.member_of = None;
        view.view_names.clear();
        view.view_members.clear();
        view.absent.clear();
    }

    /// The connection's settings, once decided. A lost vote of an earlier connection made
    /// the start position empty; this connection starts with no votes (its state comes by a
    /// full snapshot).
    pub fn start_connection(&mut self, start: ConnectionStart) {
        self.life.bootstrap = start.bootstrap;
        self.start_position = start.start_position;
        self.ist_address = start.ist_address;
        self.votes = VoteBook::default();
        self.saved_membership = self.saved_membership();
        // While the server runs, the saved seqno is stale after the first commit: -1 says
        // "recover the position from the storage engine" to whoever reads it after a crash.
        let cluster = start
            .start_position
            .map_or(base::Uuid::NIL, |position| position.cluster);
        self.save_running_state(cluster, false);
    }

    /// The group member started with this identity.
    pub fn group_started(&mut self, own: base::Uuid) {
        self.view.own = own;
    }

    /// `connect` failed after [`NodeEngine::begin_connection`].
    pub fn connection_failed(&mut self) {
        self.life.connected = false;
    }

    /// Whether this node's position was cleared by a lost consistency vote (in this
    /// process, or saved with no history before it).
    pub fn position_cleared(&self) -> bool {
        let saved_cleared = self
            .saved_state()
            .ok()
            .flatten()
            .is_some_and(|s| s.position.cluster == base::Uuid::NIL);
        self.votes.inconsistent || saved_cleared
    }

    /// The time the driver last gave.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The engine's regular step, after every delivery and at least every 50 ms: moves a
    /// join on, turns a caught-up node SYNCED, answers votes on what is committed
    /// (`committed`), keeps the identity saved for a crash in step with the group
    /// member's (`group_primary`, `group_membership`), and saves the last primary view once
    /// `committed` reaches it.
    pub fn tick(
        &mut self,
        now: Nanos,
        committed: Seqno,
        group_primary: bool,
        group_membership: Option<SavedMembership>,
    ) {
        self.now = self.now.max(now);
        self.try_finish_join(now);
        self.maybe_synced();
        self.answer_vote_requests(committed);
        self.keep_membership(group_primary, group_membership);
        self.keep_last_view(committed);
    }

    /// `disconnect` begins: remembers whether this node was the last member of the primary
    /// component (its saved state may then found the cluster again).
    pub fn begin_disconnect(&mut self) -> bool {
        let last = self.life.connected && self.view.primary && self.view.members.len() <= 1;
        if self.life.connected {
            self.life.last_member_on_leave = Some(last);
            self.life.leaving = true;
        }
        last
    }

    /// Whether this node was the last member when it left, once (for the final save after
    /// the appliers are done).
    pub fn take_last_member_on_leave(&mut self) -> Option<bool> {
        self.life.last_member_on_leave.take()
    }

    /// Restarts the averages and the window's counts (`FLUSH STATUS`), with the group
    /// member's flow-control totals now.
    pub fn reset_stats(&mut self, now: Nanos, flow_now: crate::averages::FlowTotals) {
        self.stats.window = crate::averages::Window::new(now, flow_now);
    }

    /// The node's counters and averages.
    pub fn stats(&self) -> &crate::stats::NodeStats {
        &self.stats
    }
}
