//! Driving raft-rs: the clock, messages out, entries applied in order (write-sets, control
//! actions, membership changes), snapshots and log compaction.

use base::Nanos;
use raft::eraftpb::{Entry, EntryType, Message, MessageType, Snapshot};
use raft::SnapshotStatus;
use rand::Rng;

use super::delivery::{Delivery, Outgoing};
use super::GroupNode;
use crate::config;
use crate::log::ByteBudget;
use crate::state::{Control, GroupState, LogEntry};
use crate::wire;
use crate::wire::WireMessage;

/// Compaction of the order log into Raft snapshots.
pub(super) struct Snapshots {
    /// The Raft index of the last snapshot taken.
    pub(super) last_index: u64,
    /// A snapshot was due (a membership change) but put off while a chunked write-set was
    /// being reassembled: taken at the first chance.
    pub(super) due: bool,
}

impl GroupNode {
    /// Advances logical time by one tick.
    pub fn tick(&mut self, now: Nanos) {
        if self.closed {
            return;
        }
        self.advance_clock(now);
        self.tick += 1;
        if !self.tick_returning() {
            self.raw.tick();
        }
        self.pin_election_timeout();
    }

    /// Runs Raft and the group logic; returns what to send and what to deliver.
    pub fn poll(&mut self, now: Nanos) -> (Vec<Outgoing>, Vec<Delivery>) {
        if !self.closed {
            self.advance_clock(now);
            self.drive_raft();
            self.after_raft();
            self.drive_raft();
            if std::mem::take(&mut self.rejoin_due) {
                self.rejoin();
            }
        }
        (
            std::mem::take(&mut self.outbox),
            self.deliveries.drain(..).collect(),
        )
    }

    pub(super) fn advance_clock(&mut self, now: Nanos) {
        assert!(
            now >= self.now,
            "time went backwards: {now:?} after {:?}",
            self.now
        );
        self.now = now;
    }

    /// Queues a message for the node at `address`.
    pub(super) fn send(&mut self, to_raft_id: Option<u64>, address: String, message: &WireMessage) {
        let bytes = wire::encode(self.me.raft_id, message);
        self.outbox.push(Outgoing {
            to_raft_id,
            address,
            bytes,
        });
    }

    /// Queues a message for the current leader; dropped if there is none (or its address is
    /// unknown): every caller repeats what matters until it sees the effect.
    pub(super) fn send_to_leader(&mut self, message: &WireMessage) {
        let leader = self.raw.raft.leader_id;
        if let Some(address) = self.address_of(leader) {
            self.send(Some(leader), address, message);
        }
    }

    fn send_raft(&mut self, messages: Vec<Message>) {
        for message in messages {
            let to = message.to;
            if message.get_msg_type() == MessageType::MsgSnapshot {
                // The snapshot travels whole inside the message, so it is "sent" now. If the
                // network loses it, the follower's next rejection makes the leader send it
                // again; without this report the leader would wait for it forever.
                self.raw.report_snapshot(to, SnapshotStatus::Finish);
            }
            match self.address_of(to) {
                Some(address) => self.send(Some(to), address, &WireMessage::Raft(message)),
                None => tracing::debug!(to, "no address for Raft peer; message dropped"),
            }
        }
    }

    /// Pins the election timeout to a value from the seeded generator. raft-rs draws it from
    /// an unseeded thread RNG whenever it resets the timer; overwriting it right after every
    /// call keeps a run reproducible.
    pub(super) fn pin_election_timeout(&mut self) {
        if self.raw.raft.election_elapsed == 0 {
            let low = self.config.election_ticks;
            let timeout = self.rng.gen_range(low..2 * low);
            self.raw.raft.set_randomized_election_timeout(timeout);
        }
    }

    fn drive_raft(&mut self) {
        if !self.raw.has_ready() {
            return;
        }
        let mut ready = self.raw.ready();
        self.send_raft(ready.take_messages());
        for read in ready.take_read_states() {
            let Ok(id) = <[u8; 8]>::try_from(read.request_ctx.as_slice()) else {
                continue;
            };
            let id = u64::from_be_bytes(id);
            // A repeated ask can be answered twice; the first answer counts.
            if self.causal.asked.remove(&id).is_some() {
                self.causal.ready.push((id, read.index));
            }
        }
        if !ready.snapshot().is_empty() {
            self.install_snapshot(ready.snapshot().clone());
        }
        let committed = ready.take_committed_entries();
        self.apply_entries(committed);
        if !ready.entries().is_empty() {
            self.watch_for_own_removal(ready.entries());
            self.raw.mut_store().append(ready.take_entries());
        }
        if let Some(hard_state) = ready.hs() {
            self.raw.mut_store().set_hard_state(hard_state.clone());
        }
        self.send_raft(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit);
        }
        self.send_raft(light.take_messages());
        let committed = light.take_committed_entries();
        self.apply_entries(committed);
        self.raw.advance_apply();
        self.answer_causal_reads();
        self.pin_election_timeout();
        self.maybe_compact();
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) {
        // raft-rs has taken the snapshot: the log must follow it whatever its content.
        self.raw.mut_store().install_snapshot(snapshot.clone());
        self.snapshots.last_index = snapshot.get_metadata().index;
        let state = match GroupState::decode(snapshot.get_data()) {
            Ok(state) if !self.member || state.last_seqno >= self.last_delivered => state,
            // Checked on receipt (`check_snapshot`), so only a bug gets here; a member cannot
            // go on with a state it cannot read, nor with one behind what it delivered.
            other => {
                tracing::error!(
                    error = ?other.err(),
                    "a Raft snapshot that cannot be installed: rejoining as a new member"
                );
                self.rejoin_due = true;
                return;
            }
        };
        let was_member = self.member;
        self.state = state;
        self.roster.unheard.clear();
        let in_view = self.state.members.contains_key(&self.me.raft_id);
        if was_member && in_view && self.state.last_seqno > self.last_delivered {
            base::mark!("group.state_gap_after_a_raft_snapshot");
            self.deliveries.push_back(Delivery::StateGap {
                last_delivered: self.last_delivered,
                resume_after: self.state.last_seqno,
            });
            self.last_delivered = self.state.last_seqno;
        } else if !was_member && in_view {
            // The view that added us is already inside the snapshot: we start from it.
            base::mark!("group.admitted_inside_a_raft_snapshot");
            self.member = true;
            self.last_delivered = self.state.last_seqno;
            let view = self.view(true, false, self.state.last_seqno);
            self.deliver_view(view);
        } else if was_member && !in_view {
            self.lose_membership();
        }
        self.update_pause_clock();
    }

    pub(super) fn apply_entries(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            match entry.get_entry_type() {
                EntryType::EntryNormal if entry.data.is_empty() => {}
                // Entries are checked on receipt (`check`), so only a bug gets past here; every
                // member skips the same entry, so the members stay identical.
                EntryType::EntryNormal => match LogEntry::decode_shared(&entry.data) {
                    Ok(log_entry) => self.apply_log_entry(log_entry),
                    Err(error) => {
                        tracing::error!(index = entry.index, %error, "entry skipped");
                    }
                },
                EntryType::EntryConfChangeV2 => {
                    if self.apply_conf_change(&entry) {
                        self.take_snapshot(entry.index, entry.term);
                    }
                }
                EntryType::EntryConfChange => {
                    tracing::error!(index = entry.index, "version 1 conf change skipped");
                }
            }
        }
    }

    fn apply_log_entry(&mut self, log_entry: LogEntry) {
        match log_entry {
            LogEntry::Batch(submissions) => {
                for submission in submissions {
                    let origin = submission.origin;
                    let sent_id = submission.submit_id;
                    let local = origin == self.me.uuid;
                    let ordered = self.state.accept_submission(submission);
                    if local && self.state.was_ordered(origin, sent_id) {
                        // This chunk (or whole write-set) is in the order: stop resending it.
                        self.submissions.pending.remove(&sent_id);
                    }
                    let Some(ordered) = ordered else {
                        continue;
                    };
                    if self.member {
                        self.deliver(Delivery::WriteSet {
                            seqno: ordered.seqno,
                            origin,
                            submit_id: ordered.submit_id,
                            local,
                            safe_seqno: self.state.safe_seqno,
                            payload: ordered.payload,
                        });
                    }
                }
            }
            LogEntry::Control(Control::StateRequest(request)) => {
                if request.joiner == self.me.raft_id
                    && self
                        .requesting
                        .unordered
                        .as_ref()
                        .is_some_and(|(pending, _)| pending.request_id <= request.request_id)
                {
                    self.requesting.unordered = None;
                }
                // A request ordered after its joiner left is not recorded: the record of a
                // departed member would never be cleared.
                let Some(joiner) = self.state.members.get(&request.joiner) else {
                    return;
                };
                let joiner = joiner.info.uuid;
                if !self.state.record_state_request(&request) {
                    return;
                }
                let donor = self.state.assign_donor(&request);
                // This joiner's own request is delivered here only if this process made it:
                // one of an earlier process that came back as this member was answered then.
                let stale = request.joiner == self.me.raft_id
                    && self
                        .requesting
                        .first_id
                        .is_none_or(|first| request.request_id < first);
                if stale {
                    base::mark!("group.earlier_process_request_not_delivered");
                }
                if self.member && !stale {
                    let donor_is_me = donor == Ok(self.me.raft_id);
                    let donor_uuid = donor
                        .as_ref()
                        .ok()
                        .and_then(|id| self.state.members.get(id))
                        .map(|m| m.info.uuid);
                    self.deliveries.push_back(Delivery::StateRequest {
                        joiner,
                        request,
                        donor,
                        donor_uuid,
                        donor_is_me,
                        safe_seqno: self.state.safe_seqno,
                    });
                }
            }
            LogEntry::Control(Control::Vote(member, seqno, code)) => {
                self.apply_vote(member, seqno, code);
            }
            LogEntry::Control(Control::TransferFailed(donor, joiner)) => {
                if joiner == self.me.raft_id && self.member {
                    let donor = self.member_name(donor);
                    self.deliveries
                        .push_back(Delivery::TransferFailed { donor });
                }
            }
            LogEntry::Control(Control::Weight(member, weight)) => self.apply_weight(member, weight),
            LogEntry::Control(control) => {
                let paused_before = self.state.paused_by.clone();
                self.state.apply_control(&control);
                // As Galera's `wsrep_flow_control_recv`: the stops, not the resumes.
                if matches!(control, Control::FlowStop(_)) {
                    self.flow.counters.recv += 1;
                }
                self.note_pause_change(&paused_before);
            }
        }
    }

    /// Everything that runs after Raft's output was handled.
    fn after_raft(&mut self) {
        self.track_leadership();
        self.update_primary();
        self.maybe_continue_alone();
        self.announce_presence();
        self.notify_superseded();
        self.request_join();
        self.drive_recovery();
        self.progress_leave();
        self.send_controls();
        self.log_long_pause();
        self.send_state_request();
        self.send_submissions();
        self.repeat_causal_reads();
        if self.is_leader() {
            self.evict_silent_members();
            self.propose_conf_change();
            self.reconcile_voters();
            self.remind_departed();
            self.propose_batch();
        }
    }

    /// Snapshots the group state at `index`, unless chunks of a write-set are being
    /// reassembled: the snapshot would carry them (up to a whole write-set, past what one
    /// message may hold), so it waits until they are complete (`snapshots.due`).
    fn take_snapshot(&mut self, index: u64, term: u64) {
        if !self.state.partial.is_empty() {
            base::mark!("group.snapshot_put_off_for_a_chunked_write_set");
            self.snapshots.due = true;
            return;
        }
        match self.state.try_encode() {
            Ok(data) => {
                self.raw.mut_store().record_snapshot(index, term, data);
                self.snapshots.last_index = index;
                self.snapshots.due = false;
            }
            Err(error) => {
                tracing::error!(%error, index, "group state snapshot not taken");
                self.snapshots.due = true;
            }
        }
    }

    fn maybe_compact(&mut self) {
        let applied = self.raw.raft.raft_log.applied;
        let store = self.raw.store();
        // Saturating: a snapshot installed from the leader can sit past what this member
        // has applied until raft-rs catches `applied` up to it.
        let bytes_since_snapshot = store
            .bytes_after(self.snapshots.last_index)
            .saturating_sub(store.bytes_after(applied));
        let snapshot_bytes = self.config.log_retain_bytes / config::SNAPSHOTS_PER_RETAINED_BYTES;
        if self.snapshots.due
            || applied >= self.snapshots.last_index + self.config.snapshot_interval_entries
            || bytes_since_snapshot > snapshot_bytes
        {
            let term =
                raft::Storage::term(self.raw.store(), applied).expect("applied is in the log");
            self.take_snapshot(applied, term);
        }
        // Neither rule cuts past what a live follower has: it would be sent a snapshot, and
        // so a state transfer, for entries on their way to it. Followers that lag together
        // (learners behind a leader that commits alone) would all need a donor at once.
        let cut_limit = self.slowest_live_follower().unwrap_or(applied);
        let keep_from = applied
            .saturating_sub(self.config.log_retain_entries)
            .min(cut_limit);
        let budget = ByteBudget {
            bytes_max: self.config.log_retain_bytes,
            cut_limit,
        };
        self.raw.mut_store().compact_to(keep_from, budget);
    }

    /// On a leader, the least any follower it heard from lately (within the contact window)
    /// has of the log: the entries after it are still being sent. Not raft-rs's
    /// `recent_active`, which every check of the quorum clears for every follower at once.
    fn slowest_live_follower(&self) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        let me = self.me.raft_id;
        let window = self.contact_window();
        let live = |id: &u64| {
            self.roster
                .last_heard
                .get(id)
                .is_some_and(|heard| self.tick.saturating_sub(*heard) <= window)
        };
        self.raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != me && live(id))
            .map(|(_, progress)| progress.matched)
            .min()
    }
}
