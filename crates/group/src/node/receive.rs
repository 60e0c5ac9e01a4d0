//! Messages from peers: checked (sender, term, membership) before Raft or the group state
//! sees them, with the reason for each refusal ([`ReceiveError`]).

use base::Nanos;
use bytes::Bytes;
use raft::eraftpb::Message;

use super::submit::CHUNK_BYTES;
use super::GroupNode;
use crate::check::RaftRefusal;
use crate::state::{Control, LogEntry, Submission};
use crate::wire::{WireError, WireMessage};
use crate::{check, wire};

/// Why a received message was refused. The message is dropped; nothing else changes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReceiveError {
    /// The bytes are not a valid group message.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The sender is not a member of this node's view.
    #[error("message from Raft id {from}, which is not in the current view")]
    NotInView {
        /// The sender's Raft id.
        from: u64,
    },
    /// The message is addressed to another Raft id.
    #[error("message for Raft id {to}, but this member is {me}")]
    WrongRecipient {
        /// The addressee.
        to: u64,
        /// This member.
        me: u64,
    },
    /// Raft refused the message.
    #[error("Raft refused a message from {from}: {reason}")]
    Raft {
        /// The sender's Raft id.
        from: u64,
        /// raft-rs's error text.
        reason: String,
    },
    /// A forwarded submission that does not come from its claimed origin.
    #[error("member {from} forwarded a submission of another origin")]
    ForeignSubmission {
        /// The sender's Raft id.
        from: u64,
    },
    /// A message that claims to come from this member, or from no member (id 0).
    #[error("message claims to come from Raft id {from}, which is this member or nobody")]
    ForgedSender {
        /// The sender id claimed.
        from: u64,
    },
    /// A Raft message raft-rs must not see (it would panic on it, or it is one no member
    /// sends); see [`RaftRefusal`].
    #[error("Raft message from {from} refused: {refusal}")]
    RaftRefused {
        /// The sender's Raft id.
        from: u64,
        /// Why.
        refusal: RaftRefusal,
    },
    /// A control message (flow control, node state, a state request) in another member's
    /// name: a member speaks for itself only.
    #[error("member {from} sent a control message about another member")]
    ForeignControl {
        /// The sender's Raft id.
        from: u64,
    },
    /// A forwarded submission over `repl.max_ws_size` or with an impossible chunk position.
    #[error("member {from} forwarded submission {submit_id}, refused: {reason}")]
    BadSubmission {
        /// The sender's Raft id.
        from: u64,
        /// The submission's number.
        submit_id: u64,
        /// Why.
        reason: &'static str,
    },
    /// A join request this member does not act on (it may be asked again).
    #[error("join of Raft id {raft_id} refused: {reason}")]
    JoinRefused {
        /// The joiner's Raft id.
        raft_id: u64,
        /// Why.
        reason: &'static str,
    },
    /// A welcome this joining node does not take.
    #[error("welcome from Raft id {from} refused: {reason}")]
    BadWelcome {
        /// The sender's Raft id.
        from: u64,
        /// Why.
        reason: &'static str,
    },
    /// This node has left the group.
    #[error("this member has left the group")]
    Closed,
    /// A recovery probe this node does not answer.
    #[error("recovery probe refused: {0}")]
    BadProbe(&'static str),
    /// An answer to a recovery probe that is not taken.
    #[error("recovery report refused: {0}")]
    BadReport(&'static str),
    /// A notice of a forced bootstrap that is not taken.
    #[error("forced bootstrap notice refused: {0}")]
    BadNotice(&'static str),
    /// An answer with a challenge this process never sent: to the probe of an earlier
    /// process at this address (routine around a restart), or forged. Dropped.
    #[error("recovery report without this process's challenge")]
    UnprovenReport,
}

impl ReceiveError {
    /// Whether this refusal is part of normal membership churn rather than a fault: a
    /// message that crossed a view change or a leader change, a join asked again before its
    /// proof arrived, traffic after this member left, or traffic still meant for the earlier
    /// incarnation of a node restarted at the same address.
    pub fn is_routine(&self) -> bool {
        matches!(
            self,
            ReceiveError::NotInView { .. }
                | ReceiveError::JoinRefused { .. }
                | ReceiveError::Closed
                | ReceiveError::WrongRecipient { .. }
                | ReceiveError::UnprovenReport
                | ReceiveError::RaftRefused {
                    refusal: RaftRefusal::FromEarlierTerm { .. },
                    ..
                }
        )
    }
}

impl GroupNode {
    /// Handles bytes received from a peer.
    pub fn receive(&mut self, now: Nanos, bytes: &[u8]) -> Result<(), ReceiveError> {
        self.receive_with(now, || wire::decode(bytes))
    }

    /// [`GroupNode::receive`] of a frame in a shared buffer: the Raft entries it carries
    /// stay views of it (`wire::decode_shared`).
    pub fn receive_shared(&mut self, now: Nanos, frame: &Bytes) -> Result<(), ReceiveError> {
        self.receive_with(now, || wire::decode_shared(frame))
    }

    fn receive_with(
        &mut self,
        now: Nanos,
        decode: impl FnOnce() -> Result<(u64, WireMessage), WireError>,
    ) -> Result<(), ReceiveError> {
        if self.closed {
            return Err(ReceiveError::Closed);
        }
        self.advance_clock(now);
        let (from, message) = decode()?;
        if from == 0 || from == self.me.raft_id {
            return Err(ReceiveError::ForgedSender { from });
        }
        match message {
            WireMessage::Raft(raft_message) => self.receive_raft(from, raft_message),
            WireMessage::Forward(submissions) => self.receive_forward(from, submissions),
            WireMessage::Join(info) => self.receive_join(from, info, None),
            WireMessage::ProvedJoin(info, proof) => self.receive_join(from, info, Some(proof)),
            WireMessage::Challenge(proof) => {
                // Anyone can send one; a wrong one only costs this joiner another round.
                if !self.member {
                    self.admission.join_proof = Some(proof);
                    self.admission.last_join_tick = None;
                }
                Ok(())
            }
            WireMessage::Welcome(members) => self.receive_welcome(from, members),
            WireMessage::Leave => {
                self.require_member(from)?;
                // Queued once however often it is asked: the queue holds no duplicates.
                if self.is_leader() {
                    self.roster.asked_to_leave.insert(from);
                    self.queue_removal(from);
                }
                Ok(())
            }
            WireMessage::Control(control) => self.receive_control(from, control),
            WireMessage::Probe {
                reply_to,
                challenge,
            } => self.receive_probe(reply_to, challenge),
            WireMessage::Report { challenge, report } => self.receive_report(challenge, report),
            WireMessage::Superseded { cluster, fork } => {
                self.receive_superseded(from, cluster, fork)
            }
            WireMessage::Presence { reply } => {
                self.receive_presence(from, reply);
                Ok(())
            }
            WireMessage::Removed(raft_id) => {
                // Whoever sends it: the member that tells may have been admitted after this
                // one lost contact, under a Raft id it never saw (a learner cut off hears it
                // from nobody else). A member says it only of a Raft id its history removed,
                // and ids are never reused; a peer that lies makes a member outside the
                // primary component rejoin, which costs a state transfer and loses nothing.
                let rejoin = self.member && !self.primary && from != self.me.raft_id;
                // A member whose data diverged from a forced component must not rejoin by IST.
                if raft_id == self.me.raft_id && rejoin && !self.has_diverged() {
                    // A member of the primary component says we were evicted while we could
                    // not hear it: start over as a new member.
                    // Routine after a partition, a note as in Galera (whose merge is one).
                    tracing::info!(me = self.me.raft_id, "evicted from the primary component");
                    self.rejoin_due = true;
                }
                Ok(())
            }
        }
    }

    /// A member's control message, for the leader to order: only about the member itself.
    fn receive_control(&mut self, from: u64, control: Control) -> Result<(), ReceiveError> {
        self.require_member(from)?;
        let concerns_sender = match control {
            Control::FlowStop(id)
            | Control::FlowResume(id)
            | Control::State(id, _)
            | Control::Committed(id, _)
            | Control::Cached(id, _)
            | Control::Vote(id, ..)
            | Control::TransferFailed(id, _)
            | Control::Weight(id, _) => id == from,
            Control::StateRequest(ref request) => request.joiner == from,
        };
        if !concerns_sender {
            return Err(ReceiveError::ForeignControl { from });
        }
        if self.is_leader() {
            self.propose_entry(&LogEntry::Control(control));
        }
        Ok(())
    }

    fn require_member(&self, from: u64) -> Result<(), ReceiveError> {
        if self.state.members.contains_key(&from) {
            Ok(())
        } else {
            Err(ReceiveError::NotInView { from })
        }
    }

    fn receive_raft(&mut self, from: u64, message: Message) -> Result<(), ReceiveError> {
        if message.to != self.me.raft_id {
            return Err(ReceiveError::WrongRecipient {
                to: message.to,
                me: self.me.raft_id,
            });
        }
        let conf = self.raw.store().conf_state();
        let in_conf = [&conf.voters, &conf.learners, &conf.voters_outgoing]
            .iter()
            .any(|ids| ids.contains(&from));
        // A node that is not a member yet takes Raft traffic from anyone: that is how the
        // leader brings it in. A member only listens to the current configuration.
        if self.member && !in_conf && !self.state.members.contains_key(&from) {
            self.tell_if_departed(from);
            return Err(ReceiveError::NotInView { from });
        }
        check::check_message(&message, &self.raw.raft, self.member)
            .map_err(|refusal| ReceiveError::RaftRefused { from, refusal })?;
        // Only members are timed: a joiner takes Raft traffic from anyone, and must not keep
        // a record per sender.
        if in_conf || self.state.members.contains_key(&from) {
            self.roster.last_heard.insert(from, self.tick);
        }
        self.roster.unheard.remove(&from);
        self.flow.stops_lifted.remove(&from);
        let term = message.term;
        let result = self.raw.step(message);
        if from == self.raw.raft.leader_id && term >= self.raw.raft.term {
            self.leader_contact_tick = self.tick;
        }
        self.pin_election_timeout();
        result.map_err(|e| ReceiveError::Raft {
            from,
            reason: e.to_string(),
        })
    }

    fn receive_forward(
        &mut self,
        from: u64,
        submissions: Vec<Submission>,
    ) -> Result<(), ReceiveError> {
        self.require_member(from)?;
        let origin = self.state.members[&from].info.uuid;
        if submissions.iter().any(|s| s.origin != origin) {
            return Err(ReceiveError::ForeignSubmission { from });
        }
        let mut refused = None;
        for submission in submissions {
            match self.check_submission(&submission) {
                // A follower drops it: the origin resends to whoever leads once it notices.
                Ok(()) if self.is_leader() => self.submissions.batch.push(submission),
                Ok(()) => {}
                Err(reason) => {
                    tracing::warn!(
                        from,
                        submit_id = submission.submit_id,
                        reason,
                        "submission refused"
                    );
                    refused.get_or_insert(ReceiveError::BadSubmission {
                        from,
                        submit_id: submission.submit_id,
                        reason,
                    });
                }
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// Refuses a write-set over `repl.max_ws_size` (whole, or by its chunk count) and a
    /// chunk the origin could not have cut, before it is ordered and held for reassembly.
    fn check_submission(&self, submission: &Submission) -> Result<(), &'static str> {
        let (index, count) = submission.chunk;
        let limit = self.config.max_ws_size;
        if count <= 1 {
            return match submission.payload.len() as u64 <= limit {
                true => Ok(()),
                false => Err("larger than repl.max_ws_size"),
            };
        }
        let chunks_max = limit.div_ceil(CHUNK_BYTES as u64);
        if u64::from(count) > chunks_max {
            return Err("more chunks than repl.max_ws_size allows");
        }
        // Every chunk but the last is cut exactly `CHUNK_BYTES` long (see `submit_with`): the
        // reassembly puts each at its place by its index alone.
        let len = submission.payload.len();
        let length_ok = match index.checked_add(1) == Some(count) {
            true => (1..=CHUNK_BYTES).contains(&len),
            false => len == CHUNK_BYTES,
        };
        if index >= count || !length_ok {
            return Err("a chunk its origin could not have cut");
        }
        Ok(())
    }
}
