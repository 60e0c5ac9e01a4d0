//! The primary component found again after a full crash, as Galera's `pc.recovery` does
//! with `gvwstate.dat`.
//!
//! Every data node saves the last primary view it applied ([`LastPrimaryView`]: the
//! members' group addresses, which survive a restart, unlike their Raft ids and UUIDs). The
//! view is saved only once the node has committed everything ordered before it, and it is
//! forgotten at a clean leave. A node that starts with a saved view and finds no primary
//! component probes the members of that view; each answers with a [`RecoveryReport`]: its
//! own saved view, the position its server recovered, and whether it is in a component.
//!
//! [`decide`] is the rule every restarted node applies to the reports, so that all reach the
//! same answer without talking further:
//! - a peer in a primary component: nothing to recover, join it;
//! - the newest saved view of this history is the one to restore; a node outside it joins
//!   once a primary component exists;
//! - every member of that view must have answered, each data holder with a position in
//!   that history; otherwise wait, and say who is missing;
//! - the member with the highest position founds the component, continuing its history;
//!   the others join it, and catch up by IST.
//!
//! Why nothing acknowledged is lost: a transaction acknowledged at node A was committed
//! there, in seqno order. If A is a member of the restored view, the founder's position is
//! at least A's. If A left before that view, its transaction was ordered before the view,
//! and a member that saved the view had committed it. Only a complete view is restored, so
//! the founder is at least as far as every member and has it.

use std::collections::BTreeSet;

use base::{Gtid, Seqno, Uuid};
use serde::{Deserialize, Serialize};

use crate::node::View;

/// The most members a saved view (and so a report) may list.
pub const VIEW_MEMBERS_MAX: usize = 128;

/// The longest member address a saved view may hold, in bytes.
pub const ADDRESS_BYTES_MAX: usize = 1024;

/// The last primary view a data node applied, saved for a restart after a full crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastPrimaryView {
    /// The history (cluster state UUID) the view belongs to.
    pub cluster: Uuid,
    /// The seqno the view took: it orders the views of one history.
    pub seqno: Seqno,
    /// wsrep's view id (how many primary views the cluster has had).
    pub view_id: u64,
    /// This node's group address.
    pub own_address: String,
    /// Every member's group address, this node's included: sorted, each once.
    pub members: Vec<String>,
}

impl LastPrimaryView {
    /// A view of `members` (any order, repeats dropped); `None` unless it is one a node can
    /// save: a defined seqno, this node among at most [`VIEW_MEMBERS_MAX`] members, and no
    /// empty or overlong address.
    pub fn new(
        cluster: Uuid,
        seqno: Seqno,
        view_id: u64,
        own_address: &str,
        members: impl IntoIterator<Item = String>,
    ) -> Option<LastPrimaryView> {
        let members: BTreeSet<String> = members.into_iter().collect();
        let view = LastPrimaryView {
            cluster,
            seqno,
            view_id,
            own_address: own_address.to_owned(),
            members: members.into_iter().collect(),
        };
        view.is_valid().then_some(view)
    }

    /// The view a data node saves from the primary `view` it applied; `None` for a
    /// non-primary one. A primary view lists every member, ordered or not (a joiner's first
    /// view is not: it comes with the group state), and its seqno orders it among the
    /// others: members change only by ordered views.
    pub fn from_view(view: &View) -> Option<LastPrimaryView> {
        let own = view.members.get(view.own_index?)?;
        if !view.primary {
            return None;
        }
        LastPrimaryView::new(
            view.cluster,
            view.seqno,
            view.view_id,
            &own.address,
            view.members.iter().map(|m| m.address.clone()),
        )
    }

    fn is_valid(&self) -> bool {
        let sorted_once = self.members.windows(2).all(|pair| pair[0] < pair[1]);
        let plausible =
            |address: &String| !address.is_empty() && address.len() <= ADDRESS_BYTES_MAX;
        self.seqno.is_defined()
            && self.cluster != Uuid::NIL
            && !self.members.is_empty()
            && self.members.len() <= VIEW_MEMBERS_MAX
            && sorted_once
            && self.members.iter().all(plausible)
            && self.members.contains(&self.own_address)
    }

    /// The file's text: `key: value` lines like `grastate.dat`, one `member:` line each.
    pub fn render(&self) -> String {
        let mut text = format!(
            "# Trireme: the last primary view of this node (for recovery after a full crash)\n\
             version: 1\ncluster: {}\nseqno: {}\nview_id: {}\nown_address: {}\n",
            self.cluster, self.seqno.0, self.view_id, self.own_address
        );
        for member in &self.members {
            text.push_str(&format!("member: {member}\n"));
        }
        text
    }

    /// Parses [`LastPrimaryView::render`]'s text; `None` if a field is missing or bad.
    pub fn parse(text: &str) -> Option<LastPrimaryView> {
        let fields: Vec<(&str, &str)> = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_once(':'))
            .map(|(key, value)| (key.trim(), value.trim()))
            .collect();
        let field = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        if field("version")? != "1" {
            return None;
        }
        let members = fields
            .iter()
            .filter(|(key, _)| *key == "member")
            .map(|(_, value)| value.to_string());
        let view = LastPrimaryView {
            cluster: Uuid::parse(field("cluster")?).ok()?,
            seqno: Seqno(field("seqno")?.parse().ok()?),
            view_id: field("view_id")?.parse().ok()?,
            own_address: field("own_address")?.to_owned(),
            members: members.collect(),
        };
        view.is_valid().then_some(view)
    }
}

/// Where a node stands in its group, as it tells a peer that probes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Standing {
    /// In no group yet (restarted, waiting to join or to recover).
    Outside,
    /// A member of a group that lost its primary component (a survivor of the crash).
    NonPrimary,
    /// A member of a primary component.
    Primary,
}

/// What a node answers a peer that probes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Its group address: the one the probe was sent to.
    pub address: String,
    /// False for a member without a database (the arbitrator): it has nothing to lose.
    pub holds_data: bool,
    /// Its saved last primary view.
    pub last_view: Option<LastPrimaryView>,
    /// The position its server recovered (committed), if known.
    pub position: Option<Gtid>,
    /// Where it stands now.
    pub standing: Standing,
}

impl RecoveryReport {
    /// Refuses a report no genuine node sends (it comes from the network).
    pub fn check(&self) -> Result<(), &'static str> {
        if self.address.is_empty() || self.address.len() > ADDRESS_BYTES_MAX {
            return Err("an empty or overlong address");
        }
        if self.last_view.as_ref().is_some_and(|view| !view.is_valid()) {
            return Err("a saved view no node saves");
        }
        if self.last_view.is_some() && !self.holds_data {
            return Err("a saved view from a member without data");
        }
        Ok(())
    }

    /// Its position in history `cluster`, if it knows one there.
    fn position_in(&self, cluster: Uuid) -> Option<Seqno> {
        self.position
            .filter(|position| position.cluster == cluster && position.seqno.is_defined())
            .map(|position| position.seqno)
    }
}

/// What a data node brings to a recovery when it starts: its saved view and its position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestartState {
    /// The last primary view it saved (none after a clean leave).
    pub last_view: Option<LastPrimaryView>,
    /// The position its server recovered, if known.
    pub position: Option<Gtid>,
}

/// Why a node takes no part in a recovery and joins as usual.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoRecovery {
    /// It saved no view (it left cleanly, or never got in).
    NoSavedView,
    /// The member at this address is in a primary component: join it.
    LivePrimary(String),
    /// A newer view of the history does not list this node: it joins once the members of
    /// that view are primary again.
    NotInNewestView(Seqno),
}

/// What a node does about the primary component, from the reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Join as usual.
    Join(NoRecovery),
    /// The view cannot be restored yet.
    Wait(Waiting),
    /// This node founds the component again, continuing its own history.
    Found,
    /// The member at `founder` founds it (from `seqno`); this node joins it.
    Follow {
        /// The founder's address.
        founder: String,
        /// The founder's position.
        seqno: Seqno,
    },
}

/// What a restore of `view` waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The view to restore.
    pub view: LastPrimaryView,
    /// Members that did not answer.
    pub missing: Vec<String>,
    /// Members alive in a group that lost its primary component.
    pub non_primary: Vec<String>,
    /// Data holders whose position in this history is unknown.
    pub unknown_position: Vec<String>,
    /// The most advanced data holder that answered, and its position.
    pub most_advanced: Option<(String, Seqno)>,
}

impl Waiting {
    /// The log line: what is missing, and what the DBA can do.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "restoring the primary component of view {} (seqno {}, {} members) after a full \
             crash:",
            self.view.view_id,
            self.view.seqno,
            self.view.members.len()
        );
        if !self.missing.is_empty() {
            text.push_str(&format!(
                " waiting for {} to start;",
                self.missing.join(", ")
            ));
        }
        if !self.non_primary.is_empty() {
            text.push_str(&format!(
                " {} still run(s) in a non-primary component: restart it;",
                self.non_primary.join(", ")
            ));
        }
        if !self.unknown_position.is_empty() {
            text.push_str(&format!(
                " the position of {} is unknown: start it with the position `mariadbd \
                 --wsrep-recover` finds (--wsrep-start-position, as the systemd unit does);",
                self.unknown_position.join(", ")
            ));
        }
        text.push_str(
            " nothing is founded until every member of the view is back, so that no \
             acknowledged commit is lost.",
        );
        if let Some((address, seqno)) = &self.most_advanced {
            text.push_str(&format!(
                " If a member is lost for good: the most advanced one here is {address} \
                 (seqno {seqno}); stop it, set safe_to_bootstrap: 1 in its grastate.dat and \
                 start it with --wsrep-new-cluster (and its recovered position, as the systemd \
                 unit passes it); the others then join it."
            ));
        }
        text
    }
}

/// The rule of the module doc: what the node reporting `own` does, given the fresh,
/// verified reports of its peers.
pub fn decide(own: &RecoveryReport, peers: &[&RecoveryReport]) -> Decision {
    if let Some(live) = peers.iter().find(|p| p.standing == Standing::Primary) {
        return Decision::Join(NoRecovery::LivePrimary(live.address.clone()));
    }
    let Some(own_view) = own.last_view.as_ref() else {
        return Decision::Join(NoRecovery::NoSavedView);
    };
    let newest = peers
        .iter()
        .filter_map(|p| p.last_view.as_ref())
        .filter(|view| view.cluster == own_view.cluster && view.seqno > own_view.seqno)
        .max_by_key(|view| view.seqno)
        .unwrap_or(own_view);
    if !newest.members.contains(&own.address) {
        return Decision::Join(NoRecovery::NotInNewestView(newest.seqno));
    }
    let report_of = |address: &String| {
        std::iter::once(own)
            .chain(peers.iter().copied())
            .find(|report| report.address == *address)
    };
    let mut waiting = Waiting {
        view: newest.clone(),
        missing: Vec::new(),
        non_primary: Vec::new(),
        unknown_position: Vec::new(),
        most_advanced: None,
    };
    for address in &newest.members {
        let Some(report) = report_of(address) else {
            waiting.missing.push(address.clone());
            continue;
        };
        // A member without data (the arbitrator) has nothing to lose: whether it restarted
        // or still sits in the old group, it is back enough.
        if !report.holds_data {
            continue;
        }
        if report.standing == Standing::NonPrimary {
            waiting.non_primary.push(address.clone());
        }
        match report.position_in(newest.cluster) {
            None => waiting.unknown_position.push(address.clone()),
            Some(seqno) => {
                let ahead = waiting
                    .most_advanced
                    .as_ref()
                    .is_none_or(|(best, best_seqno)| {
                        (seqno, std::cmp::Reverse(address)) > (*best_seqno, std::cmp::Reverse(best))
                    });
                if ahead {
                    waiting.most_advanced = Some((address.clone(), seqno));
                }
            }
        }
    }
    let complete = waiting.missing.is_empty()
        && waiting.non_primary.is_empty()
        && waiting.unknown_position.is_empty();
    match waiting.most_advanced.clone() {
        Some((founder, _)) if complete && founder == own.address => Decision::Found,
        Some((founder, seqno)) if complete => Decision::Follow { founder, seqno },
        _ => Decision::Wait(waiting),
    }
}

#[cfg(test)]
mod tests;
