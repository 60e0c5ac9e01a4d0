//! A member's part in restoring the primary component after a full crash (the rule is
//! `crate::recovery`): a data node started with a saved view probes that view's members,
//! keeps their verified answers, and founds the component again when the rule says so;
//! every node, member or not, answers probes.

use std::collections::BTreeMap;

use super::receive::ReceiveError;
use super::GroupNode;
use crate::recovery::{
    decide, Decision, NoRecovery, RecoveryReport, RestartState, Standing, VIEW_MEMBERS_MAX,
};
use crate::state::GroupState;
use crate::wire::WireMessage;

/// Probe rounds a report stays fresh: a member that stops answering counts as missing again.
const REPORT_FRESH_PROBES: u64 = 5;

/// How often a restore that waits says what it waits for, in seconds.
const WAITING_SAID_EVERY_SECONDS: u64 = 30;

/// Probe rounds before the first "waiting" line: the members started together answer by then.
const WAITING_FIRST_SAID_AFTER_PROBES: u64 = 3;

/// The most addresses a node answers probes for in one probe round (a probe names where the
/// answer goes, so answers are bounded to keep this node from being used against others).
const ANSWERS_PER_ROUND_MAX: usize = 2 * VIEW_MEMBERS_MAX;

// A report outlives a lost probe or answer; the first "waiting" line comes after members
// started together had a round to answer in.
const _: () = assert!(REPORT_FRESH_PROBES >= 2 && WAITING_FIRST_SAID_AFTER_PROBES >= 2);

/// What a node keeps for a restore.
#[derive(Default)]
pub(super) struct Recovering {
    /// A data node's saved view and position (none for a member without data).
    pub(super) own: Option<RestartState>,
    /// Verified answers by address, with the tick they arrived.
    reports: BTreeMap<String, (RecoveryReport, u64)>,
    /// When this node last probed, and how many rounds it has sent.
    last_probe_tick: Option<u64>,
    probes_sent: u64,
    /// When it last said what the restore waits for.
    last_said_tick: Option<u64>,
    /// The last decision logged, so that each change is said once.
    last_decision: Option<Decision>,
    /// Addresses answered this probe round.
    answered: BTreeMap<String, u64>,
    /// This process has been a member: the view and position it started with are stale
    /// (it committed past them), so it restores nothing from them and reports neither.
    was_member: bool,
}

impl GroupNode {
    /// Makes this member a data node that restarts with `state`: with a saved view, it
    /// takes part in restoring the primary component after a full crash.
    pub fn hold_data(&mut self, state: RestartState) {
        if let Some(view) = &state.last_view {
            tracing::info!(
                view_id = view.view_id,
                seqno = %view.seqno,
                members = view.members.len(),
                "saved primary view found: restoring it if the whole cluster crashed"
            );
        }
        self.recovery.own = Some(state);
    }

    /// Where this node stands, as it answers a probe.
    fn own_report(&self) -> RecoveryReport {
        let own = self.recovery.own.as_ref();
        let current = own.filter(|_| !self.recovery.was_member);
        let standing = match (self.member, self.primary) {
            (true, true) => Standing::Primary,
            (true, false) => Standing::NonPrimary,
            (false, _) => Standing::Outside,
        };
        RecoveryReport {
            address: self.me.address.clone(),
            holds_data: own.is_some(),
            last_view: current.and_then(|own| own.last_view.clone()),
            position: current.and_then(|own| own.position),
            standing,
        }
    }

    /// Answers a probe, to the address it names (at most once per address and round).
    pub(super) fn receive_probe(
        &mut self,
        reply_to: String,
        challenge: u64,
    ) -> Result<(), ReceiveError> {
        if reply_to.is_empty() || reply_to.len() > crate::recovery::ADDRESS_BYTES_MAX {
            return Err(ReceiveError::BadProbe(
                "an empty or overlong address to answer",
            ));
        }
        let round = self.config.join_retry_ticks.max(1);
        let tick = self.tick;
        self.recovery
            .answered
            .retain(|_, answered| tick.saturating_sub(*answered) < round);
        if self.recovery.answered.contains_key(&reply_to) {
            return Ok(());
        }
        if self.recovery.answered.len() >= ANSWERS_PER_ROUND_MAX {
            return Err(ReceiveError::BadProbe(
                "more probes this round than answered",
            ));
        }
        self.recovery.answered.insert(reply_to.clone(), tick);
        let report = self.own_report();
        self.send(None, reply_to, &WireMessage::Report { challenge, report });
        Ok(())
    }

    /// Keeps a peer's answer, once its challenge proves it came from the address probed.
    pub(super) fn receive_report(
        &mut self,
        challenge: u64,
        report: RecoveryReport,
    ) -> Result<(), ReceiveError> {
        if !self.probing() && !self.stranded_without_data() {
            return Ok(());
        }
        report.check().map_err(ReceiveError::BadReport)?;
        if challenge
            != self
                .admission
                .challenge_key
                .probe_challenge(&report.address)
        {
            return Err(ReceiveError::UnprovenReport);
        }
        if report.address == self.me.address {
            return Err(ReceiveError::BadReport("an answer in this node's name"));
        }
        let full = self.recovery.reports.len() >= 2 * VIEW_MEMBERS_MAX;
        if full && !self.recovery.reports.contains_key(&report.address) {
            return Err(ReceiveError::BadReport("more members than a view holds"));
        }
        let address = report.address.clone();
        self.recovery.reports.insert(address, (report, self.tick));
        Ok(())
    }

    /// Whether this node takes part in a restore: a data node with a saved view that has
    /// not been a member in this process (a member of two waiting to be brought back takes
    /// part too: the component it would come back into may be gone).
    fn probing(&self) -> bool {
        let saved = self
            .recovery
            .own
            .as_ref()
            .is_some_and(|own| own.last_view.is_some());
        self.config.recover_primary
            && saved
            && !self.recovery.was_member
            && !self.member
            && !self.closed
            && self.leaving.is_none()
    }

    /// Whether this member holds no data (the arbitrator) and has been outside the primary
    /// component for a suspect timeout.
    fn stranded_without_data(&self) -> bool {
        let long = self
            .non_primary_since
            .is_some_and(|since| self.tick.saturating_sub(since) >= self.config.suspect_ticks());
        self.recovery.own.is_none() && self.member && long && !self.closed && self.leaving.is_none()
    }

    /// A probe round when due, then the rule, and what it decides: found, or say why not.
    pub(super) fn drive_recovery(&mut self) {
        if self.member {
            self.recovery.was_member = true;
        }
        if self.stranded_without_data() {
            self.drive_stranded();
            return;
        }
        if !self.probing() {
            return;
        }
        if self.probe_due() {
            self.probe_round();
        }
        self.forget_stale_reports();
        let own = self.own_report();
        let peers: Vec<&RecoveryReport> = self.recovery.reports.values().map(|(r, _)| r).collect();
        let decision = decide(&own, &peers);
        self.act_on(decision);
    }

    /// A member without data left outside the primary component probes the other members
    /// of its group: once each answers from outside any non-primary component (its process
    /// restarted, and restored the component or is about to; or it is primary in a
    /// component this member is no longer part of), the group this member is in is gone for
    /// good, and it starts over as a new member to join the live one. It holds nothing, so
    /// starting over loses nothing. A member still in the old group answers non-primary and
    /// keeps it there, and so does silence (a partition); the answers are proven by their
    /// challenges, so a forger cannot make it leave.
    fn drive_stranded(&mut self) {
        let others: Vec<String> = self
            .state
            .members
            .values()
            .filter(|m| m.info.raft_id != self.me.raft_id)
            .map(|m| m.info.address.clone())
            .collect();
        if self.probe_due() {
            self.recovery.last_probe_tick = Some(self.tick);
            self.send_probes(others.clone());
        }
        self.forget_stale_reports();
        let restarted = |address: &String| {
            self.recovery
                .reports
                .get(address)
                .is_some_and(|(report, _)| report.standing != Standing::NonPrimary)
        };
        if others.is_empty() || !others.iter().all(restarted) {
            return;
        }
        tracing::info!(
            target: "wsrep",
            "every other member of this arbitrator's group restarted after a crash: starting \
             over as a new member, to join the primary component they restore"
        );
        self.recovery.reports.clear();
        self.rejoin_due = true;
    }

    fn probe_due(&self) -> bool {
        let round = self.config.join_retry_ticks.max(1);
        self.recovery
            .last_probe_tick
            .is_none_or(|last| self.tick >= last + round)
    }

    fn forget_stale_reports(&mut self) {
        let fresh_for = REPORT_FRESH_PROBES * self.config.join_retry_ticks.max(1);
        let tick = self.tick;
        self.recovery
            .reports
            .retain(|_, (_, heard)| tick.saturating_sub(*heard) <= fresh_for);
    }

    /// Probes every member of the newest view known (this node's, or a newer one a peer
    /// reported).
    fn probe_round(&mut self) {
        self.recovery.last_probe_tick = Some(self.tick);
        self.recovery.probes_sent += 1;
        let own_view = self
            .recovery
            .own
            .as_ref()
            .and_then(|own| own.last_view.as_ref());
        let mut targets: Vec<String> = own_view.map(|v| v.members.clone()).unwrap_or_default();
        for (report, _) in self.recovery.reports.values() {
            if let Some(view) = &report.last_view {
                targets.extend(view.members.iter().cloned());
            }
        }
        self.send_probes(targets);
    }

    /// Sends a probe to each of `targets` (but this node), at most twice a view's worth.
    fn send_probes(&mut self, mut targets: Vec<String>) {
        targets.sort();
        targets.dedup();
        targets.truncate(2 * VIEW_MEMBERS_MAX);
        for target in targets {
            if target == self.me.address {
                continue;
            }
            let challenge = self.admission.challenge_key.probe_challenge(&target);
            let probe = WireMessage::Probe {
                reply_to: self.me.address.clone(),
                challenge,
            };
            self.send(None, target, &probe);
        }
    }

    fn act_on(&mut self, decision: Decision) {
        let changed = self.recovery.last_decision.as_ref() != Some(&decision);
        match &decision {
            Decision::Found => {
                self.found_again();
                return;
            }
            Decision::Follow { founder, seqno } if changed => {
                tracing::info!(
                    %founder,
                    %seqno,
                    "every member of the last primary view is back: the most advanced one \
                     founds the primary component again, and this node joins it"
                );
                self.stop_returning();
            }
            Decision::Join(NoRecovery::LivePrimary(address)) if changed => {
                tracing::info!(%address, "a primary component is alive: joining it");
                self.stop_returning();
            }
            Decision::Join(NoRecovery::NotInNewestView(seqno)) if changed => {
                tracing::info!(
                    %seqno,
                    "a newer primary view does not list this node: it joins once that view's \
                     members are primary again"
                );
            }
            // A member of two that waits to be brought back by the survivor says nothing
            // yet: that is the usual way back, and quick.
            Decision::Wait(_) if self.admission.returning_until.is_some() => {}
            Decision::Wait(waiting) => {
                if !waiting.missing.is_empty() {
                    base::mark!("group.restore_waits_for_a_member");
                }
                let every = self
                    .config
                    .duration_ticks(std::time::Duration::from_secs(WAITING_SAID_EVERY_SECONDS));
                let first = self.recovery.probes_sent > WAITING_FIRST_SAID_AFTER_PROBES;
                let due = self
                    .recovery
                    .last_said_tick
                    .map_or(first, |said| self.tick >= said + every);
                if due {
                    // The first word is a note (members started together are rarely all
                    // up at once); from the second on, a warning.
                    let again = self.recovery.last_said_tick.is_some();
                    self.recovery.last_said_tick = Some(self.tick);
                    if again {
                        tracing::warn!(target: "wsrep", "{}", waiting.describe());
                    } else {
                        tracing::info!(target: "wsrep", "{}", waiting.describe());
                    }
                }
            }
            _ => {}
        }
        self.recovery.last_decision = Some(decision);
    }

    /// A member of two waiting to be brought back gives that up: the component it would
    /// come back into is gone, and it joins the one being restored (or alive) instead.
    fn stop_returning(&mut self) {
        if self.admission.returning_until.is_some() {
            self.admission.returning_until = Some(self.tick);
        }
    }

    /// Founds the primary component again from this node's position: a new Raft group of
    /// this member alone, continuing its history at the next seqno; the others join it.
    fn found_again(&mut self) {
        let own = self.recovery.own.clone().expect("only a data node founds");
        let position = own.position.expect("the founder knows its position");
        let view_id = own.last_view.as_ref().map_or(0, |view| view.view_id);
        base::mark!("group.primary_component_restored_after_a_crash");
        // A note, as Galera's own restore is: it is `pc.recovery` doing its job.
        tracing::info!(
            target: "wsrep",
            "Restoring the primary component after a full crash: every member of the last \
             primary view is back and this node is the most advanced ({position}); founding \
             it again, the others join by state transfer"
        );
        let mut state =
            GroupState::genesis(position.cluster, position.seqno.next(), self.me.clone());
        state.view_id = view_id + 1;
        // What its cache holds goes into the founding state: the first joiners, asking at
        // once, find their gap held rather than wait for this member's first report.
        if self.cached_from.is_defined() {
            state.cached_from.insert(self.me.raft_id, self.cached_from);
        }
        let mut founder = GroupNode::found(
            self.config.clone(),
            self.me.clone(),
            self.rng.clone(),
            state,
            self.now,
            true,
        );
        founder.tick = self.tick;
        founder.local_state = base::NodeState::Synced;
        founder.admission.seeds = std::mem::take(&mut self.admission.seeds);
        founder.admission.known_addresses = std::mem::take(&mut self.admission.known_addresses);
        founder.isolated = self.isolated;
        founder.cached_from = self.cached_from;
        founder.recovery.own = Some(RestartState {
            last_view: None,
            position: Some(position),
        });
        let founding = std::mem::take(&mut founder.deliveries);
        founder.deliveries = std::mem::take(&mut self.deliveries);
        founder.deliveries.extend(founding);
        founder.outbox = std::mem::take(&mut self.outbox);
        *self = founder;
    }
}
