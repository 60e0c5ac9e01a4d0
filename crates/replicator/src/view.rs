//! Views on the dispatcher thread: membership and primary component, the streaming
//! transactions of members that left, the gaps absent members will need, and what is
//! saved for a crash.

use std::sync::Arc;

use base::{NodeState, Seqno, Uuid};
use cert::{CertConfig, Certifier};
use group::{Delivery, View};

use crate::app::{view_info, LogLevel, MemberOut, ViewInfo};
use crate::applier::RecvEvent;
use crate::dispatcher::Dispatcher;
use crate::joining::Joining;
use crate::membership_file;
use crate::persisted::save_running_state;
use crate::shared::{lock, Monitors};

impl Dispatcher {
    /// Keeps, within the gcache's disk budget, what members that left the primary view
    /// need to come back by IST: everything after the commit cut when they left (they had
    /// committed at least that far). A member that is back (by name) needs it until its
    /// state request is served (see `on_state_request`).
    fn track_absent_members(&mut self, view: &View) {
        if !view.primary || view.own_index.is_none() {
            return;
        }
        let names: Vec<String> = view.members.iter().map(|m| m.name.clone()).collect();
        let own = &self.shared.settings.node_name;
        for gone in self
            .view_names
            .iter()
            .filter(|n| !names.contains(n) && *n != own)
        {
            if !self.absent.contains_key(gone) {
                let from = self.last_safe_seqno.next();
                let message = if lock(&self.shared.cache).keeps_for_absent_members() {
                    format!(
                        "{gone} left the primary view: keeping seqnos from {from} in the \
                         gcache (within gcache.max_disk_bytes) so that it can rejoin by IST"
                    )
                } else {
                    format!(
                        "{gone} left the primary view: it can rejoin by IST while some member's \
                         gcache still holds seqno {from} (gcache.size bounds that; set \
                         gcache.max_disk_bytes to keep more for absent members)"
                    )
                };
                self.shared.app.log(LogLevel::Info, &message);
                self.absent.insert(gone.clone(), from);
            }
        }
        self.view_names = names;
        self.view_members = view
            .members
            .iter()
            .map(|m| (m.uuid, m.name.clone()))
            .collect();
        let floor = self.absent.values().min().copied();
        lock(&self.shared.cache).set_absent_floor(floor);
    }

    pub(crate) fn on_view(&mut self, view: View) {
        self.membership = view.membership;
        self.track_absent_members(&view);
        let (info, was_primary) = self.record_view(&view);
        self.check_donor_present(&view);
        if self.certifier.is_none() {
            self.on_view_before_state(view, info);
            return;
        }
        let position = self
            .certifier
            .as_ref()
            .map_or(Seqno::UNDEFINED, Certifier::position);
        let primary = lock(&self.shared.inner).primary;
        // Another membership in a view means the group admitted this node again as a new
        // member (after an eviction) since its certification state was built.
        let in_view = view.own_index.and_then(|i| view.members.get(i)).is_some();
        let readmitted = in_view && Some(view.membership) != self.member_of;
        if primary && (readmitted || (view.ordered && view.seqno > position.next())) {
            // Readmitted as a new member after an eviction: the cluster ordered seqnos this
            // node never saw. Everything up to `position` is here; the rest comes by IST.
            // The server hears of the new membership now and of the primary view once the
            // node caught up.
            lock(&self.shared.inner)
                .queue
                .push_back(RecvEvent::Connected(info.clone()));
            self.fall_behind(view.cluster, view.seqno, position, Some(info));
            if view.ordered {
                self.held.push(Delivery::View(view));
            }
            return;
        }
        if view.ordered && view.seqno <= self.in_server_upto {
            // Delivered after a snapshot that already holds it: the server has moved past
            // this seqno, which only passes certification and the cache.
            self.view_in_order(&view);
            return;
        }
        self.pass_view_on(&view, info, was_primary);
    }

    /// Takes the view's membership into the node's state; returns the view as the server
    /// will see it, and whether the node was in the primary component before it.
    fn record_view(&mut self, view: &View) -> (ViewInfo, bool) {
        let mut info = view_info(view);
        let own_uuid = view
            .own_index
            .and_then(|i| view.members.get(i))
            .map(|m| m.uuid);
        let mut inner = lock(&self.shared.inner);
        if !view.primary && view.own_index.is_none() {
            // Out of the group (left, or evicted and rejoining): the server must see a
            // component of this node alone, as Galera shows it. A view with no members is
            // the final one, which only `disconnect` delivers.
            let settings = &self.shared.settings;
            info.members = vec![MemberOut {
                uuid: inner.own,
                name: settings.node_name.clone(),
                incoming: settings.incoming_address.clone(),
            }];
            info.my_index = 0;
        }
        // The identity this node has in the group now (it changes when the group admits
        // it again); state requests and local write-sets are recognised by it.
        if let Some(uuid) = own_uuid {
            inner.own = uuid;
        }
        inner.cluster = view.cluster;
        inner.members = info.members.clone();
        inner.view_id = info.view_id;
        let was_primary = inner.primary;
        inner.primary = view.primary && view.own_index.is_some();
        if was_primary && !inner.primary {
            // Out of the primary component the node is desynced in any case; a `wsrep_desync`
            // from before does not carry over to its return (Galera clears it the same way).
            inner.desync_count = 0;
        }
        if view.ordered {
            inner.last_ordered = view.seqno;
        }
        (info, was_primary)
    }

    /// A joiner whose donor is gone from the primary view before the state arrived asks
    /// again: the transfer will never finish, and the group picks another donor.
    fn check_donor_present(&self, view: &View) {
        let mut inner = lock(&self.shared.inner);
        let Some(joining) = inner.joining.as_mut() else {
            return;
        };
        let donor_gone = joining
            .donor
            .is_some_and(|donor| view.primary && !view.members.iter().any(|m| m.uuid == donor));
        let transfer_done = joining.transfer.done && joining.received.is_some();
        if donor_gone && !transfer_done {
            joining.donor = None;
            joining.request_again = true;
            drop(inner);
            self.shared.app.log(
                LogLevel::Warning,
                "our donor left the cluster before the state transfer finished; asking again",
            );
        }
    }

    /// A view before this node holds the cluster's state: the founding view of a bootstrap,
    /// the first primary view of a joiner (which starts its state transfer), or one that
    /// waits with the other deliveries until the transfer is in place.
    fn on_view_before_state(&mut self, view: View, info: ViewInfo) {
        let mut inner = lock(&self.shared.inner);
        if !inner.primary || inner.joining.is_some() {
            if inner.joining.is_some() && view.ordered {
                drop(inner);
                self.held.push(Delivery::View(view));
            }
            return;
        }
        inner.queue.push_back(RecvEvent::Connected(info.clone()));
        let app = &*self.shared.app;
        inner.shift(NodeState::Primary, app);
        if !self.bootstrap {
            // Everything up to the join view comes by state transfer; what is ordered
            // from here on is held until the transfer is in place.
            inner.shift(NodeState::Joiner, app);
            inner.joining = Some(Joining::new(view.seqno));
            inner.queue.push_back(RecvEvent::RequestState);
            return;
        }
        self.certifier = Some(Certifier::starting_at(CertConfig::default(), view.seqno));
        self.member_of = Some(view.membership);
        *lock(&self.shared.monitors) = Some(Arc::new(Monitors::at(view.seqno.prev())));
        // The founder holds the whole state at once: JOINED and SYNCED in one step.
        inner.shift(NodeState::Joined, app);
        inner.shift(NodeState::Synced, app);
        inner.queue.push_back(RecvEvent::View {
            view: info,
            ordered: true,
        });
        inner.queue.push_back(RecvEvent::Synced);
        drop(inner);
        save_running_state(&self.shared, view.cluster, true);
        self.saved_sole_member = true;
        self.cache_view(&view);
    }

    /// Hands a view to the server in order: certification closes the streaming
    /// transactions of members that left, and a node back in the primary component while
    /// SYNCED tells the server again.
    fn pass_view_on(&mut self, view: &View, info: ViewInfo, was_primary: bool) {
        let ordered = view.ordered && view.primary;
        let mut closed_streams = 0;
        let mut inner = lock(&self.shared.inner);
        if let Some(cert) = self.certifier.as_mut().filter(|_| view.primary) {
            // The servers roll back the streaming transactions of members that are gone.
            let members: Vec<Uuid> = view.members.iter().map(|m| m.uuid).collect();
            closed_streams = cert.close_streams_absent_from(&members);
            inner.open_streams = cert.open_streams();
        }
        inner.queue.push_back(RecvEvent::View {
            view: info,
            ordered,
        });
        if inner.primary && !was_primary && inner.state == NodeState::Synced {
            inner.queue.push_back(RecvEvent::Synced);
        }
        drop(inner);
        if closed_streams > 0 {
            let message = format!(
                "{closed_streams} streaming transaction(s) of members that left the primary \
                 component end here; the server rolls them back"
            );
            self.shared.app.log(LogLevel::Info, &message);
        }
        if ordered {
            self.note_sole_member(view.cluster, view.members.len() == 1);
        }
        if view.ordered {
            self.view_in_order(view);
        }
    }

    /// Keeps the identity this node comes back under after a crash (`membership_file`) in
    /// step with the primary component: saved while it is one of two, removed when the
    /// component has another size. Out of the primary component it stays as it was: that is
    /// when it is needed.
    pub(crate) fn save_membership(&mut self) {
        let Some(dir) = self.shared.settings.state_dir.clone() else {
            return;
        };
        let Some(runner) = lock(&self.shared.inner).runner.clone() else {
            return;
        };
        let status = runner.status();
        if !status.primary || status.saved_membership == self.saved_membership {
            return;
        }
        let saved = match &status.saved_membership {
            Some(membership) => membership_file::store(&dir, membership),
            None => membership_file::forget(&dir),
        };
        match saved {
            Ok(()) => self.saved_membership = status.saved_membership,
            Err(error) => {
                let message = format!("cannot keep {}: {error}", membership_file::FILE_NAME);
                self.shared.app.log(LogLevel::Warning, &message);
                self.saved_membership = status.saved_membership;
            }
        }
    }

    /// Keeps `safe_to_bootstrap` in `grastate.dat` true exactly while this node is the whole
    /// primary component: the last member standing may found the cluster again after a
    /// crash, and no other may.
    fn note_sole_member(&mut self, cluster: Uuid, sole: bool) {
        if sole != self.saved_sole_member {
            self.saved_sole_member = sole;
            save_running_state(&self.shared, cluster, sole);
        }
    }
}
