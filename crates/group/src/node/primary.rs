//! Views and the primary component: when this member is in it, when it continues alone
//! (a component of two), and the views it delivers.

use std::collections::BTreeSet;

use base::{NodeState, Seqno};

use super::delivery::{Delivery, View, ViewMember};
use super::membership::DEPARTED_REMEMBERED;
use super::GroupNode;
use crate::config::QuorumOverride;
use crate::forced::ForcedFork;
use crate::state::GroupState;

impl GroupNode {
    pub(super) fn deliver(&mut self, delivery: Delivery) {
        if let Delivery::WriteSet { seqno, .. }
        | Delivery::View(View {
            seqno,
            ordered: true,
            ..
        }) = &delivery
        {
            assert_eq!(
                *seqno,
                self.last_delivered.next(),
                "seqno gap or repeat in delivery on member {}",
                self.me.raft_id
            );
            self.last_delivered = *seqno;
        }
        if let Delivery::View(view) = &delivery {
            self.current_view = Some(view.clone());
        }
        self.deliveries.push_back(delivery);
    }

    pub(super) fn deliver_view(&mut self, view: View) {
        self.current_view = Some(view.clone());
        self.deliveries.push_back(Delivery::View(view));
    }

    pub(super) fn view(&self, primary: bool, ordered: bool, seqno: Seqno) -> View {
        // Outside the primary component a member sees only who it still hears from, as in
        // Galera: a node cut off alone reports a cluster of one. An ordered view lists the
        // whole membership: it takes the same seqno on every member, and must be the same
        // action there, even on a member that applies it just before it notices that it is
        // back in contact.
        let members: Vec<ViewMember> = self
            .state
            .members_by_uuid()
            .into_iter()
            .filter(|m| primary || ordered || self.still_heard(m.info.raft_id))
            .map(|m| ViewMember {
                uuid: m.info.uuid,
                name: m.info.name.clone(),
                address: m.info.address.clone(),
                incoming: m.info.incoming.clone(),
                state: m.state,
            })
            .collect();
        let own_index = members.iter().position(|m| m.uuid == self.me.uuid);
        View {
            cluster: self.state.cluster,
            seqno,
            view_id: self.state.view_id,
            primary,
            ordered,
            members,
            own_index,
            membership: self.me.raft_id,
            founding: false,
        }
    }

    pub(super) fn close(&mut self) {
        if self.closed {
            return;
        }
        self.abandon_pending();
        self.closed = true;
        self.primary = false;
        self.deliveries.push_back(Delivery::Closed);
    }

    pub(super) fn track_leadership(&mut self) {
        let leader = self.is_leader();
        if leader && !self.was_leader {
            // A new leader gives every member a full suspect timeout before judging it.
            let tick = self.tick;
            for id in self.state.members.keys() {
                self.roster.last_heard.insert(*id, tick);
            }
        }
        if !leader && self.was_leader {
            self.submissions.batch.clear();
            self.roster.conf_queue.clear();
        }
        self.was_leader = leader;
    }

    /// How long a member may go unheard and still count as in contact: a short hiccup must
    /// not flap the server between ready and not ready; a real partition outlasts it.
    pub(super) fn contact_window(&self) -> u64 {
        (2 * self.config.election_ticks as u64).max(self.config.suspect_ticks() / 2)
    }

    /// Whether member `raft_id` is this node or was heard from within the contact window.
    /// Outside a partition followers hear only the leader, but a partitioned minority
    /// campaigns, and so hears its own side.
    fn still_heard(&self, raft_id: u64) -> bool {
        raft_id == self.me.raft_id
            || self
                .roster
                .last_heard
                .get(&raft_id)
                .is_some_and(|heard| self.tick.saturating_sub(*heard) <= self.contact_window())
    }

    pub(super) fn update_primary(&mut self) {
        // A follower stays primary for a while without leader contact, even across a
        // pre-vote round (which clears raft-rs's leader id).
        let window = self.contact_window();
        // A leader is in contact with itself: a leader that steps down (check-quorum under
        // load) gets the same window as any follower, counted from then, instead of going
        // non-primary at once for lack of a message from a leader it never needed.
        if self.is_leader() {
            self.leader_contact_tick = self.tick;
        }
        let contact =
            self.is_leader() || self.tick.saturating_sub(self.leader_contact_tick) <= window;
        let in_contact = self.member && contact;
        if in_contact || !self.member {
            self.non_primary_since = None;
        } else if self.non_primary_since.is_none() {
            self.non_primary_since = Some(self.tick);
        }
        // `pc.ignore_sb` (or `pc.ignore_quorum`): as in Galera, a primary component that
        // lost its peers stays primary until its view of this node alone forms
        // (`maybe_continue_alone`), so that writes in flight wait for it rather than fail
        // on a non-primary view.
        let holding = self.config.goes_on_without_quorum().is_some()
            && self.primary
            && self.member
            && self.leaving.is_none()
            && !self.closed
            && !self.rejoin_due;
        let primary = in_contact || holding;
        if primary == self.primary {
            if !primary && self.member {
                self.refresh_non_primary_view();
            }
            return;
        }
        self.primary = primary;
        if !primary {
            // Galera fails what waits for its order at a non-primary view. Here only what
            // never left this node is certain never to be ordered: that is given up now.
            // What was sent may still be ordered (the leader may have it), and is waited
            // for: it arrives in order, or the node falls behind and is readmitted.
            self.abandon_unsent();
        }
        let view = self.view(primary, false, self.last_delivered);
        self.deliver_view(view);
    }

    /// `pc.ignore_sb` or `pc.ignore_quorum`: a member outside any primary component for a
    /// suspect timeout goes on alone (see [`GroupNode::continue_alone`]).
    pub(super) fn maybe_continue_alone(&mut self) {
        let Some(since) = self.non_primary_since else {
            return;
        };
        let waited = self.tick.saturating_sub(since) >= self.config.suspect_ticks();
        if self.config.goes_on_without_quorum().is_some()
            && waited
            && self.member
            && self.leaving.is_none()
            && !self.closed
            && !self.rejoin_due
        {
            self.continue_alone();
        }
    }

    /// Becomes a primary component of this member alone: a new Raft group, this member its
    /// only voter, that continues the same history from the last seqno delivered here. The
    /// members left behind are told they were removed when next they speak, and rejoin as
    /// new members by state transfer. With the other side doing the same, the cluster is
    /// split in two: what `pc.ignore_sb` accepts.
    fn continue_alone(&mut self) {
        base::mark!("group.continued_alone");
        // Galera's words (target `wsrep`: logged without the module path), which operators
        // and MariaDB's tests look for.
        let allowed_by = self
            .config
            .goes_on_without_quorum()
            .unwrap_or(QuorumOverride::IgnoreSplitBrain);
        tracing::warn!(
            target: "wsrep",
            "Ignoring {} (allowed by configuration) from view: {} (seqno {}); going on as a \
             primary component of this node alone ({})",
            allowed_by.ignored(),
            self.state.view_id,
            self.last_delivered,
            allowed_by.option()
        );
        self.found_alone(None);
    }

    /// The primary component of this member alone that [`GroupNode::continue_alone`] and a
    /// forced bootstrap found: `forced` is the fork of the latter.
    pub(super) fn found_alone(&mut self, forced: Option<ForcedFork>) {
        let mut state = GroupState::genesis(
            self.state.cluster,
            self.last_delivered.next(),
            self.me.clone(),
        );
        state.view_id = self.state.view_id + 1;
        state.forced = forced;
        // What this member submitted and saw ordered must not be ordered again.
        if let Some(window) = self.state.dedup.get(&self.me.uuid) {
            state.dedup.insert(self.me.uuid, window.clone());
        }
        let mut alone = GroupNode::found(
            self.config.clone(),
            self.me.clone(),
            self.rng.clone(),
            state,
            self.now,
            false,
        );
        alone.roster.departed = std::mem::take(&mut self.roster.departed);
        for (id, record) in &self.state.members {
            if *id != self.me.raft_id {
                alone.roster.departed.push_back(record.info.clone());
            }
        }
        while alone.roster.departed.len() > DEPARTED_REMEMBERED {
            alone.roster.departed.pop_front();
        }
        alone.tick = self.tick;
        alone.admission.seeds = std::mem::take(&mut self.admission.seeds);
        alone.admission.known_addresses = std::mem::take(&mut self.admission.known_addresses);
        alone.flow.counters = std::mem::take(&mut self.flow.counters);
        // What was delivered before goes first, then the new component's view.
        let founding = std::mem::take(&mut alone.deliveries);
        alone.deliveries = std::mem::take(&mut self.deliveries);
        alone.deliveries.extend(founding);
        alone.outbox = std::mem::take(&mut self.outbox);
        alone.isolated = self.isolated;
        alone.recovery = std::mem::take(&mut self.recovery);
        alone.cached_from = self.cached_from;
        alone.committed = self.committed;
        alone.local_state = self.local_state;
        alone.flow.apply_queue_len = self.flow.apply_queue_len;
        alone.submissions.next_id = self.submissions.next_id;
        alone.requesting.last_id = self.requesting.last_id;
        alone.requesting.first_id = self.requesting.first_id;
        // Unordered submissions go to the new leader, this member.
        alone.submissions.pending = std::mem::take(&mut self.submissions.pending);
        for pending in alone.submissions.pending.values_mut() {
            pending.sent = None;
        }
        // Causal reads asked meanwhile are answered by the new component, asked again at
        // once (a reader waits for the component, as in Galera, not for its timeout).
        let due = self.tick.saturating_sub(self.config.election_ticks as u64);
        alone.causal.asked = std::mem::take(&mut self.causal.asked)
            .into_keys()
            .map(|id| (id, due))
            .collect();
        *self = alone;
    }

    /// Outside the primary component, a new view whenever the set of members this node
    /// hears from changes.
    fn refresh_non_primary_view(&mut self) {
        let view = self.view(false, false, self.last_delivered);
        let same = self
            .current_view
            .as_ref()
            .is_some_and(|current| !current.primary && current.members == view.members);
        if !same {
            self.deliver_view(view);
        }
    }

    /// True if a member outside `evicted` holds the database state. The last such member is
    /// never evicted: members still waiting for a state transfer would be left with no
    /// donor, and the cluster's data with no holder. It stays a member, and catches up from
    /// the log once it is heard from again.
    pub(super) fn holders_remain_without(&self, evicted: &BTreeSet<u64>) -> bool {
        self.state.members.iter().any(|(id, record)| {
            !evicted.contains(id)
                && matches!(
                    record.state,
                    NodeState::Synced | NodeState::Joined | NodeState::Donor
                )
        })
    }
}
