//! Write-sets on their way into the order: submissions cut into chunks, forwarded to the
//! leader, batched into one Raft entry, resent until seen ordered, or given up.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::delivery::Delivery;
use super::GroupNode;
use crate::state::{LogEntry, Submission};
use crate::wire::WireMessage;

pub(super) struct PendingSubmission {
    /// The write-set, or one chunk of it: a view of the write-set's one buffer, so that
    /// cutting a 160 MB write-set into chunks copies nothing.
    pub(super) payload: Bytes,
    /// Sent even while flow control is in force (a streaming rollback).
    urgent: bool,
    /// Tick and leader of the last send, if sent.
    pub(super) sent: Option<(u64, u64)>,
    /// Sends to the current leader so far.
    pub(super) sends: u32,
    /// `(index, count)` of a chunk of a large write-set (see [`Submission::chunk`]).
    pub(super) chunk: (u32, u32),
}

impl PendingSubmission {
    /// Whether it is due to be sent (again) to `leader` at `tick`.
    fn resend_due(&self, leader: u64, tick: u64, resend_ticks: u64) -> bool {
        let Some((sent_tick, sent_leader)) = self.sent else {
            return true;
        };
        if sent_leader != leader {
            return true;
        }
        let doublings = self.sends.saturating_sub(1).min(MAX_RESEND_DOUBLINGS);
        tick >= sent_tick + (resend_ticks << doublings)
    }
}

/// Write-sets larger than this travel and are ordered in chunks of this size, so that no
/// single message holds up heartbeats (a 100 MB write-set in one message costs elections)
/// and ordering interleaves with other members' work, as Galera cuts actions into
/// `gcs.max_packet_size` fragments.
pub const CHUNK_BYTES: usize = 256 << 10;

/// At most this many payload bytes go out per poll: the rest of a large write-set follows
/// on the next polls instead of queueing ahead of every other message to the leader.
const SEND_BYTES_PER_POLL: usize = 4 << 20;

/// At most this many bytes of chunks are sent and not yet seen in the order at once; a
/// large write-set's further chunks wait until earlier ones are ordered. An origin could
/// otherwise push a whole large write-set into the leader's log faster than the followers
/// take it, and every write-set ordered meanwhile, from any member, would wait behind that
/// backlog (a 160 MB DELETE stopped the other nodes' commits for the 4 s of its transfer).
/// Whole write-sets never wait for this window: they pass a large one being ordered.
const CHUNKS_IN_FLIGHT_BYTES: usize = 8 * CHUNK_BYTES;

const _: () = assert!(CHUNK_BYTES <= CHUNKS_IN_FLIGHT_BYTES);
const _: () = assert!(CHUNKS_IN_FLIGHT_BYTES <= SEND_BYTES_PER_POLL);

/// The wait before a resend doubles with each send to the same leader, up to this many
/// times: over a live connection a resend is rarely needed at all, and while a large
/// write-set is being ordered early resends only add copies for the leader to drop.
const MAX_RESEND_DOUBLINGS: u32 = 5;

/// What this member sends to be ordered, until it is.
pub(super) struct Submissions {
    /// The id of the next submission.
    pub(super) next_id: u64,
    /// Sent (or to be sent) and not yet seen in the order, by id.
    pub(super) pending: BTreeMap<u64, PendingSubmission>,
    /// Leader only: submissions waiting to be proposed.
    pub(super) batch: Vec<Submission>,
}

impl Submissions {
    /// Write-sets not yet wholly sent to the leader (held by flow control, by the chunk
    /// window, or not polled out yet): Galera's send queue, `wsrep_local_send_queue`. One
    /// sent and waiting for its order is not in it.
    pub(super) fn waiting_to_send(&self) -> u64 {
        let last_chunks_unsent = self
            .pending
            .values()
            .filter(|p| p.chunk.0 + 1 == p.chunk.1 && p.sent.is_none());
        last_chunks_unsent.count() as u64
    }

    /// Bytes of chunks sent and not yet seen ordered.
    pub(super) fn chunk_bytes_in_flight(&self) -> usize {
        self.pending
            .values()
            .filter(|p| p.chunk.1 > 1 && p.sent.is_some())
            .map(|p| p.payload.len())
            .sum()
    }
}

impl Default for Submissions {
    fn default() -> Self {
        // Ids start at 1: the group's duplicate window counts 0 as seen from the start.
        Submissions {
            next_id: 1,
            pending: BTreeMap::new(),
            batch: Vec::new(),
        }
    }
}

impl GroupNode {
    /// Queues a write-set for ordering; returns its submission number. A member outside the
    /// primary component gives it up at once ([`Delivery::Abandoned`] follows), as it gives
    /// up what it had not sent when it left the component.
    pub fn submit(&mut self, payload: Vec<u8>) -> u64 {
        self.submit_with(payload, false)
    }

    /// Queues a write-set that flow control does not hold back, as Galera sends a streaming
    /// transaction's rollback: other nodes hold that transaction's locks until it arrives,
    /// and their appliers may be what keeps flow control in force.
    pub fn submit_urgent(&mut self, payload: Vec<u8>) -> u64 {
        self.submit_with(payload, true)
    }

    fn submit_with(&mut self, payload: Vec<u8>, urgent: bool) -> u64 {
        let count = payload.len().div_ceil(CHUNK_BYTES).max(1);
        let count = u32::try_from(count).expect("a write-set below 2^32 chunks");
        // An empty write-set is one empty chunk; every chunk but the last is `CHUNK_BYTES`.
        let whole = Bytes::from(payload);
        let chunks = (0..count as usize).map(|index| {
            let start = index * CHUNK_BYTES;
            whole.slice(start..(start + CHUNK_BYTES).min(whole.len()))
        });
        self.continue_numbering();
        let mut submit_id = self.submissions.next_id;
        for (index, chunk) in chunks.enumerate() {
            submit_id = self.submissions.next_id;
            self.submissions.next_id += 1;
            self.submissions.pending.insert(
                submit_id,
                PendingSubmission {
                    payload: chunk,
                    urgent,
                    sent: None,
                    sends: 0,
                    chunk: (index as u32, count),
                },
            );
        }
        if self.member && !self.primary {
            self.abandon_unsent();
        }
        // The write-set is known by its last chunk's id, the one its delivery carries.
        submit_id
    }

    /// Local write-sets submitted and not yet wholly sent to the leader (see
    /// [`Submissions::waiting_to_send`]).
    pub fn write_sets_waiting_to_send(&self) -> u64 {
        self.submissions.waiting_to_send()
    }

    /// Withdraws a submission that was never sent to the leader (flow control held it
    /// back); true if withdrawn, false if it is on its way to being ordered, or unknown.
    /// A brute-force aborted transaction uses this to give up without leaving a write-set
    /// behind that would still be ordered.
    pub fn cancel(&mut self, submit_id: u64) -> bool {
        let Some(last) = self.submissions.pending.get(&submit_id) else {
            return false;
        };
        let first = submit_id - u64::from(last.chunk.0);
        let unsent = (first..=submit_id).all(|id| {
            self.submissions
                .pending
                .get(&id)
                .is_some_and(|p| p.sent.is_none())
        });
        if unsent {
            for id in first..=submit_id {
                self.submissions.pending.remove(&id);
            }
        }
        unsent
    }

    /// `gmcast.isolate` on or off: the transport cuts this node's links, and the node sends
    /// no submission meanwhile (a frame sent into the cut is lost; one never sent can be
    /// given up for certain, or sent once the links are back).
    pub fn set_isolated(&mut self, isolated: bool) {
        self.isolated = isolated;
    }

    pub(super) fn abandon_pending(&mut self) {
        let mut submit_ids: Vec<u64> = std::mem::take(&mut self.submissions.pending)
            .into_iter()
            .map(|(id, p)| id + u64::from(p.chunk.1.saturating_sub(1) - p.chunk.0))
            .collect();
        submit_ids.dedup();
        if !submit_ids.is_empty() {
            self.deliveries
                .push_back(Delivery::Abandoned { submit_ids });
        }
    }

    /// Gives up the submissions no part of which left this node ([`Delivery::Abandoned`]):
    /// nobody else has them, so they are never ordered.
    pub(super) fn abandon_unsent(&mut self) {
        let mut unsent: BTreeMap<u64, bool> = BTreeMap::new();
        for (id, pending) in &self.submissions.pending {
            let last = id + u64::from(pending.chunk.1.saturating_sub(1) - pending.chunk.0);
            *unsent.entry(last).or_insert(true) &= pending.sent.is_none();
        }
        let submit_ids: Vec<u64> = unsent
            .into_iter()
            .filter_map(|(last, unsent)| unsent.then_some(last))
            .collect();
        if submit_ids.is_empty() {
            return;
        }
        self.submissions.pending.retain(|id, pending| {
            let last = id + u64::from(pending.chunk.1.saturating_sub(1) - pending.chunk.0);
            !submit_ids.contains(&last)
        });
        base::mark!("group.unsent_submissions_abandoned");
        self.deliveries
            .push_back(Delivery::Abandoned { submit_ids });
    }

    pub(super) fn send_submissions(&mut self) {
        let leader = self.raw.raft.leader_id;
        // An isolated node's frames go nowhere: what it does not send stays unsent, which
        // is what lets it give the submission up for certain if it loses the component. A
        // leader of itself alone (`pc.ignore_sb`, `pc.bootstrap`) sends nothing to order.
        let cut_from_leader = self.isolated && leader != self.me.raft_id;
        if !self.member || leader == 0 || self.submissions.pending.is_empty() || cut_from_leader {
            return;
        }
        let paused = self.state.is_paused();
        let tick = self.tick;
        let resend_ticks = self.config.resend_ticks;
        let mut to_send = Vec::new();
        let mut bytes = 0;
        let mut chunks_in_flight = self.submissions.chunk_bytes_in_flight();
        // The id of the submission looked at last, and whether it has been sent.
        let mut previous: Option<(u64, bool)> = None;
        for (submit_id, pending) in self.submissions.pending.iter_mut() {
            // A later chunk continues a write-set already on its way (its previous chunk was
            // sent, or is ordered and gone from here): flow control does not hold it back,
            // or the write-set would wait for an order a paused group does not give.
            let continues = pending.chunk.0 > 0
                && match previous {
                    Some((id, sent)) if id + 1 == *submit_id => sent,
                    _ => true,
                };
            let due = match pending.sent {
                // Flow control holds back what was never sent; resends still go.
                None => !paused || pending.urgent || continues,
                Some(_) => pending.resend_due(leader, tick, resend_ticks),
            };
            let first_send_of_chunk = pending.sent.is_none() && pending.chunk.1 > 1;
            let window_full = first_send_of_chunk
                && chunks_in_flight + pending.payload.len() > CHUNKS_IN_FLIGHT_BYTES;
            if window_full {
                base::mark!("group.chunk_waits_for_earlier_chunks_ordered");
            }
            let due = due && !window_full;
            if due && first_send_of_chunk {
                chunks_in_flight += pending.payload.len();
            }
            if due {
                if bytes >= SEND_BYTES_PER_POLL {
                    break;
                }
                bytes += pending.payload.len();
                let same_leader = pending.sent.is_some_and(|(_, sent_to)| sent_to == leader);
                if pending.sent.is_some() {
                    base::mark!("group.submission_resent");
                }
                pending.sends = if same_leader { pending.sends + 1 } else { 1 };
                pending.sent = Some((tick, leader));
                to_send.push(Submission {
                    origin: self.me.uuid,
                    submit_id: *submit_id,
                    payload: pending.payload.clone(),
                    chunk: pending.chunk,
                });
            }
            previous = Some((*submit_id, pending.sent.is_some()));
        }
        if to_send.is_empty() {
            return;
        }
        if leader == self.me.raft_id {
            self.submissions.batch.extend(to_send);
        } else {
            self.send_to_leader(&WireMessage::Forward(to_send));
        }
    }

    pub(super) fn propose_batch(&mut self) {
        // Flow control holds write-sets back at their origins, before they are sent (as
        // Galera does): what a member already sent is ordered, so a sender never waits for
        // an order that a paused group would not give.
        if self.submissions.batch.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.submissions.batch);
        while !batch.is_empty() {
            let mut bytes = 0;
            let take = batch
                .iter()
                .take_while(|s| {
                    bytes += s.payload.len();
                    bytes <= self.config.batch_bytes_max
                })
                .count()
                .max(1);
            let rest = batch.split_off(take);
            if !self.propose_entry(&LogEntry::Batch(batch)) {
                // Raft refused (uncommitted limit, leadership transfer): origins resend.
                return;
            }
            batch = rest;
        }
    }

    pub(super) fn propose_entry(&mut self, entry: &LogEntry) -> bool {
        self.raw.propose(Vec::new(), entry.encode()).is_ok()
    }
}
