//! Views in the ordered stream: membership and primary component, the founding view of a
//! bootstrap and the first view of a joiner, the streaming transactions of members that
//! left, the gaps absent members will need, and what is saved for a crash.

use base::{NodeState, Seqno, Uuid};
use cert::{CertConfig, Certifier};
use group::{Delivery, View};
use writeset::Bytes;

use crate::cache::ActionCache;
use crate::effects::Effect;
use crate::ist::ActionKind;
use crate::joining::Joining;
use crate::server_view::{MemberOut, ViewInfo};
use crate::task::Task;
use crate::{view_record, LogLevel, NodeEngine};

impl NodeEngine {
    /// Takes a view: membership, primary component, and the server's view in order.
    pub(crate) fn on_view(&mut self, view: View, cache: &mut ActionCache) {
        self.view.membership = view.membership;
        self.track_absent_members(&view, cache);
        let (info, was_primary) = self.record_view(&view);
        self.note_primary_view(&view);
        self.check_donor_present(&view);
        if !self.has_state() {
            self.on_view_before_state(view, info);
            return;
        }
        let position = self
            .certifier
            .as_ref()
            .map_or(Seqno::UNDEFINED, Certifier::position);
        // Another membership in a view means the group admitted this node again as a new
        // member (after an eviction) since its certification state was built.
        let in_view = view.own_index.and_then(|i| view.members.get(i)).is_some();
        let readmitted = in_view && Some(view.membership) != self.view.member_of;
        if self.view.primary && (readmitted || (view.ordered && view.seqno > position.next())) {
            // Readmitted as a new member after an eviction: the cluster ordered seqnos this
            // node never saw. Everything up to `position` is here; the rest comes by IST.
            // The server hears of the new membership now and of the primary view once the
            // node caught up.
            base::mark!("engine.readmitted_member_catches_up");
            self.tasks.push(Task::Connected(info.clone()));
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

    /// Keeps, within the gcache's disk budget, what members that left the primary view
    /// need to come back by IST: everything after the commit cut when they left (they had
    /// committed at least that far). A member that is back (by name) needs it until its
    /// state request is served (see `on_state_request`).
    fn track_absent_members(&mut self, view: &View, cache: &mut ActionCache) {
        if !view.primary || view.own_index.is_none() {
            return;
        }
        let names: Vec<String> = view.members.iter().map(|m| m.name.clone()).collect();
        let own = self.config().node_name.clone();
        let gone: Vec<String> = self
            .view
            .view_names
            .iter()
            .filter(|n| !names.contains(n) && **n != own)
            .filter(|n| !self.view.absent.contains_key(*n))
            .cloned()
            .collect();
        for gone in gone {
            let from = self.last_safe_seqno.next();
            let message = if cache.keeps_for_absent_members() {
                format!(
                    "{gone} left the primary view: keeping seqnos from {from} in the gcache \
                     (within gcache.max_disk_bytes) so that it can rejoin by IST"
                )
            } else {
                format!(
                    "{gone} left the primary view: it can rejoin by IST while some member's \
                     gcache still holds seqno {from} (gcache.size bounds that; set \
                     gcache.max_disk_bytes to keep more for absent members)"
                )
            };
            self.say(LogLevel::Info, message);
            self.view.absent.insert(gone, from);
        }
        self.view.view_names = names;
        self.view.view_members = view
            .members
            .iter()
            .map(|m| (m.uuid, m.name.clone()))
            .collect();
        cache.set_absent_floor(self.view.absent.values().min().copied());
    }

    /// Takes the view's membership into the node's state; returns the view as the server
    /// will see it, and whether the node was in the primary component before it.
    fn record_view(&mut self, view: &View) -> (ViewInfo, bool) {
        let mut info = ViewInfo::of(view);
        let own_uuid = view
            .own_index
            .and_then(|i| view.members.get(i))
            .map(|m| m.uuid);
        if !view.primary && view.own_index.is_none() {
            // Out of the group (left, or evicted and rejoining): the server must see a
            // component of this node alone, as Galera shows it. A view with no members is
            // the final one, which only `disconnect` delivers.
            info.members = vec![MemberOut {
                uuid: self.view.own,
                name: self.config().node_name.clone(),
                incoming: self.config().incoming_address.clone(),
            }];
            info.my_index = 0;
        }
        // The identity this node has in the group now (it changes when the group admits
        // it again); state requests and local write-sets are recognised by it.
        if let Some(uuid) = own_uuid {
            self.view.own = uuid;
        }
        self.view.cluster = view.cluster;
        self.view.members = info.members.clone();
        self.view.view_id = info.view_id;
        let was_primary = self.view.primary;
        self.view.primary = view.primary && view.own_index.is_some();
        if was_primary && !self.view.primary {
            // Out of the primary component the node is desynced in any case; a `wsrep_desync`
            // from before does not carry over to its return (Galera clears it the same way).
            self.desync_count = 0;
        }
        if view.ordered {
            self.view.last_ordered = view.seqno;
        }
        (info, was_primary)
    }

    /// A joiner whose donor is gone from the primary view before the state arrived asks
    /// again: the transfer will never finish, and the group picks another donor.
    fn check_donor_present(&mut self, view: &View) {
        let Some(joining) = self.joining.as_mut() else {
            return;
        };
        let donor_gone = joining
            .donor
            .is_some_and(|donor| view.primary && !view.members.iter().any(|m| m.uuid == donor));
        let transfer_done = joining.transfer.done && joining.received.is_some();
        if donor_gone && !transfer_done {
            joining.donor = None;
            joining.request_again = true;
            base::mark!("engine.donor_left_before_the_transfer_finished");
            self.say(
                LogLevel::Warning,
                "our donor left the cluster before the state transfer finished; asking again",
            );
        }
    }

    /// A view before this node holds the cluster's state: the founding view of a bootstrap,
    /// the first primary view of a joiner (which starts its state transfer), or one that
    /// waits with the other deliveries until the transfer is in place.
    fn on_view_before_state(&mut self, view: View, info: ViewInfo) {
        if !self.view.primary || self.joining.is_some() {
            self.ask_again_if_readmitted(&view);
            if self.joining.is_some() && view.ordered {
                self.held.push(Delivery::View(view));
            }
            return;
        }
        self.tasks.push(Task::Connected(info.clone()));
        self.shift(NodeState::Primary);
        // A joiner whose group member founded the component again after a full crash holds
        // the state as a bootstrap does.
        if !self.life.bootstrap && !view.founding {
            // Everything up to the join view comes by state transfer; what is ordered
            // from here on is held until the transfer is in place.
            self.shift(NodeState::Joiner);
            let mut joining = Joining::new(view.seqno);
            joining.membership = view.membership;
            self.joining = Some(joining);
            self.tasks.push(Task::RequestState);
            return;
        }
        self.certifier = Some(Certifier::starting_at(CertConfig::default(), view.seqno));
        self.view.member_of = Some(view.membership);
        self.emit(Effect::ResetMonitors(view.seqno.prev()));
        // The founder holds the whole state at once: JOINED and SYNCED in one step.
        self.shift(NodeState::Joined);
        self.shift(NodeState::Synced);
        self.tasks.push(Task::View {
            view: info,
            ordered: true,
        });
        self.tasks.push(Task::Synced);
        self.save_running_state(view.cluster, true);
        self.saved_sole_member = true;
        self.cache_view(&view);
    }

    /// A joiner the group admitted again under another membership (it was evicted while it
    /// waited): the group dropped its pending request with the old membership, so it asks
    /// again.
    fn ask_again_if_readmitted(&mut self, view: &View) {
        let in_view = view.primary && view.own_index.is_some();
        let Some(joining) = self.joining.as_mut().filter(|_| in_view) else {
            return;
        };
        if joining.membership == view.membership {
            return;
        }
        joining.membership = view.membership;
        joining.donor = None;
        joining.request_again = true;
        base::mark!("engine.joiner_readmitted_asks_again");
        self.say(
            LogLevel::Info,
            "admitted again while waiting for state: asking for it again",
        );
    }

    /// Hands a view to the server in order: certification closes the streaming
    /// transactions of members that left, and a node back in the primary component while
    /// SYNCED tells the server again.
    fn pass_view_on(&mut self, view: &View, info: ViewInfo, was_primary: bool) {
        let ordered = view.ordered && view.primary;
        let mut closed_streams = 0;
        if let Some(cert) = self.certifier.as_mut().filter(|_| view.primary) {
            // The servers roll back the streaming transactions of members that are gone.
            let members: Vec<Uuid> = view.members.iter().map(|m| m.uuid).collect();
            closed_streams = cert.close_streams_absent_from(&members);
            self.stats.open_streams = cert.open_streams();
        }
        self.queue_view(view, info);
        if self.view.primary && !was_primary && self.state == NodeState::Synced {
            self.tasks.push(Task::Synced);
        }
        if closed_streams > 0 {
            base::mark!("engine.streams_of_departed_members_closed");
            let message = format!(
                "{closed_streams} streaming transaction(s) of members that left the primary \
                 component end here; the server rolls them back"
            );
            self.say(LogLevel::Info, message);
        }
        if ordered {
            self.note_sole_member(view.cluster, view.members.len() == 1);
        }
        if view.ordered {
            self.view_in_order(view);
        }
    }

    /// Queues a view for the server. A primary view in the order passes the monitors at its
    /// seqno; an ordered view this member saw while out of the primary component is told to
    /// the server as a view of its own, and its seqno passes the monitors on its own (or
    /// every later commit would wait for it).
    pub(crate) fn queue_view(&mut self, view: &View, info: ViewInfo) {
        let ordered = view.ordered && view.primary;
        self.tasks.push(Task::View {
            view: info,
            ordered,
        });
        if view.ordered && !view.primary {
            base::mark!("engine.ordered_view_seen_outside_the_primary_component");
            self.tasks.push(Task::Skip { seqno: view.seqno });
        }
    }

    /// Passes an ordered view through certification and into the cache; a view at or
    /// before the index's position (delivered after a snapshot that holds it) is a repeat.
    pub(crate) fn view_in_order(&mut self, view: &View) {
        if let Some(cert) = self.certifier.as_mut() {
            if view.seqno <= cert.position() {
                base::mark!("engine.view_delivered_after_its_snapshot");
                return;
            }
            cert.skip(view.seqno);
        }
        self.cache_view(view);
    }

    /// Caches an ordered view: a primary one with what a joiner's server needs to hear of it
    /// (`view_record`: IST hands it over at its seqno, as Galera's does), any other as a
    /// seqno that carries nothing.
    pub(crate) fn cache_view(&mut self, view: &View) {
        let seqno = view.seqno;
        if view.primary {
            let body = view_record::encode(&ViewInfo::of(view));
            self.cache_action(seqno, ActionKind::View, seqno.0 - 1, Bytes::from(body));
        } else {
            self.cache_action(seqno, ActionKind::Skip, seqno.0 - 1, Bytes::new());
        }
    }

    /// The name of the member `uuid` in the latest primary view.
    pub(crate) fn member_name(&self, uuid: Uuid) -> String {
        self.view
            .view_members
            .iter()
            .find(|(id, _)| *id == uuid)
            .map_or_else(|| uuid.to_string(), |(_, name)| name.clone())
    }
}
