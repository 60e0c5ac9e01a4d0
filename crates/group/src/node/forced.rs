//! A forced bootstrap at runtime (`pc.bootstrap=YES` on a member outside the primary
//! component), and the notices by which its founder makes the other components of the
//! history give way once it can reach them (the rule is `crate::forced`).

use std::collections::BTreeSet;

use base::NodeState;

use super::delivery::Delivery;
use super::receive::ReceiveError;
use super::GroupNode;
use crate::forced::{ForcedFork, GiveWay};
use crate::wire::WireMessage;

/// How often the founder of a forced component tells the members it superseded, in ticks:
/// once a second, about as often as Galera's members try to reconnect to a lost peer.
const NOTICE_EVERY_TICKS: u64 = 100;

/// The most addresses a founder tells: those of its last view, its seeds and the peers it
/// knew, which a cluster's size bounds well below this.
const NOTIFIED_ADDRESSES_MAX: usize = 64;

/// What a member keeps about forced bootstraps.
#[derive(Default)]
pub(super) struct Forcing {
    /// As the founder of a forced component: the addresses of the members it superseded,
    /// told every [`NOTICE_EVERY_TICKS`] until each is a member of the new component.
    notify: BTreeSet<String>,
    last_notice_tick: Option<u64>,
    /// Set when this member gives way: the founder's address, the only seed of its rejoin
    /// (another seed could still be a member of the component it leaves, and admit it).
    pub(super) rejoin_through: Option<String>,
    /// Set once this member has said its history diverged: the notices keep coming.
    diverged: bool,
}

/// What a request to bootstrap at runtime did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForcedBootstrap {
    /// A primary component of this member alone now continues the history after `fork`.
    Founded(ForcedFork),
    /// This member is in a primary component already: nothing to do (as in Galera).
    AlreadyPrimary,
    /// Not done, for the reason given.
    Refused(&'static str),
}

impl GroupNode {
    /// `pc.bootstrap=YES` at runtime: a member outside any primary component founds one of
    /// its own from the last seqno it was handed, the unsafe step a DBA takes after losing
    /// a majority for good. The members it left behind give way to it once they hear from
    /// it (see `crate::forced`).
    pub fn force_bootstrap(&mut self) -> ForcedBootstrap {
        if let Some(reason) = self.force_refusal() {
            tracing::warn!(target: "wsrep", "pc.bootstrap request not acted on: {reason}");
            return ForcedBootstrap::Refused(reason);
        }
        if self.primary {
            tracing::info!(
                target: "wsrep",
                "pc.bootstrap request ignored: this node is in a primary component already"
            );
            return ForcedBootstrap::AlreadyPrimary;
        }
        base::mark!("group.forced_bootstrap");
        let fork = ForcedFork {
            fork_after: self.last_delivered,
            founder: self.me.raft_id,
        };
        let notify = self.addresses_to_notify();
        // A note, as Galera's is (MariaDB's tests fail on unexpected warnings): the DBA
        // asked for it, and the line says what it risks.
        tracing::info!(
            target: "wsrep",
            "Forced bootstrap (pc.bootstrap=YES): founding a new primary component of this \
             node alone after seqno {} of view {}. This is unsafe if another component is \
             still primary: when they meet, its members leave it and join this one, and \
             those that committed past seqno {} must be restarted to rejoin by SST",
            fork.fork_after,
            self.state.view_id,
            fork.fork_after
        );
        self.found_alone(Some(fork));
        self.forcing.notify = notify;
        ForcedBootstrap::Founded(fork)
    }

    fn force_refusal(&self) -> Option<&'static str> {
        if self.closed || self.leaving.is_some() {
            Some("this node is leaving the group")
        } else if self.recovery.own.is_none() {
            Some("this member holds no data to found a component from")
        } else if !self.member || self.rejoin_due {
            Some("this node is not a member of a component yet: it is joining one")
        } else if !matches!(
            self.local_state,
            NodeState::Synced | NodeState::Donor | NodeState::Joined
        ) {
            Some("this node's data is not the cluster's yet: it is waiting for a state transfer")
        } else {
            None
        }
    }

    /// Every address this member knows of a peer: its view's, its seeds, the peers it met.
    fn addresses_to_notify(&self) -> BTreeSet<String> {
        let members = self.state.members.values().map(|m| m.info.address.clone());
        let departed = self.roster.departed.iter().map(|i| i.address.clone());
        let seeds = self.admission.seeds.iter().cloned();
        let known = self.admission.known_addresses.values().cloned();
        members
            .chain(departed)
            .chain(seeds)
            .chain(known)
            .filter(|address| *address != self.me.address && !address.is_empty())
            .take(NOTIFIED_ADDRESSES_MAX)
            .collect()
    }

    /// The founder of a forced component tells the members it superseded, until each has
    /// joined it.
    pub(super) fn notify_superseded(&mut self) {
        let Some(fork) = self.state.forced else {
            return;
        };
        if self.forcing.notify.is_empty() || !self.member || !self.primary {
            return;
        }
        let due = self
            .forcing
            .last_notice_tick
            .is_none_or(|last| self.tick >= last + NOTICE_EVERY_TICKS);
        if !due {
            return;
        }
        self.forcing.last_notice_tick = Some(self.tick);
        let joined: BTreeSet<String> = self
            .state
            .members
            .values()
            .map(|m| m.info.address.clone())
            .collect();
        self.forcing
            .notify
            .retain(|address| !joined.contains(address));
        let notice = WireMessage::Superseded {
            cluster: self.state.cluster,
            fork,
        };
        for address in self.forcing.notify.clone() {
            self.send(None, address, &notice);
        }
    }

    /// Whether this member learnt that its data diverged from a forced component.
    pub(super) fn has_diverged(&self) -> bool {
        self.forcing.diverged
    }

    /// A notice from the founder of a forced component of this history.
    pub(super) fn receive_superseded(
        &mut self,
        from: u64,
        cluster: base::Uuid,
        fork: ForcedFork,
    ) -> Result<(), ReceiveError> {
        if !self.member || self.closed || self.leaving.is_some() || self.rejoin_due {
            return Ok(());
        }
        if fork.founder != from {
            return Err(ReceiveError::BadNotice("it does not come from its founder"));
        }
        if cluster != self.state.cluster {
            return Err(ReceiveError::BadNotice("it is about another history"));
        }
        let Some(founder_address) = self.address_of(from) else {
            return Err(ReceiveError::BadNotice(
                "its founder was never a peer of this node",
            ));
        };
        let holds_data = self.recovery.own.is_some();
        match fork.give_way(self.state.forced, self.last_delivered, holds_data) {
            GiveWay::Stay => {}
            GiveWay::Rejoin => {
                base::mark!("group.gave_way_to_a_forced_bootstrap");
                tracing::info!(
                    target: "wsrep",
                    "A primary component was bootstrapped by force at {founder_address} after \
                     seqno {}: leaving this component to join it by IST",
                    fork.fork_after
                );
                self.forcing.rejoin_through = Some(founder_address);
                // Out of a primary component cleanly, so that it is not left waiting for a
                // voter that went; out of a non-primary one at once (nobody would order it).
                if self.primary {
                    self.leave();
                } else {
                    self.rejoin_due = true;
                }
            }
            GiveWay::Diverged if !self.forcing.diverged => {
                base::mark!("group.diverged_from_a_forced_bootstrap");
                self.forcing.diverged = true;
                let message = format!(
                    "A primary component was bootstrapped by force (pc.bootstrap) at \
                     {founder_address} after seqno {}, while this node's component went on to \
                     seqno {}: this node's data is no longer the cluster's. Leaving the \
                     cluster; restart this node to rejoin by a full state transfer (SST)",
                    fork.fork_after, self.last_delivered
                );
                self.deliveries
                    .push_back(Delivery::HistoryDiverged { message });
            }
            GiveWay::Diverged => {}
        }
        Ok(())
    }
}
