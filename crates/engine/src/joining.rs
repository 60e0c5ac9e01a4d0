//! A join's progress through state transfer, and its decisions: what to ask for, when to
//! ask again or give up, and when the state, the donor's index and what was delivered
//! meanwhile fit together without a hole. Pure: the time comes in as an argument, and the
//! dispatcher (`joiner.rs`) does what it decides.

use base::{Gtid, Nanos, Seqno, Uuid};
use cert::Certifier;

use crate::server_view::ViewInfo;
use crate::LogLevel;

/// How long a joiner waits before it asks again after a failed transfer or no donor, ns.
pub const RETRY_AFTER_NS: u64 = 1_000_000_000;
/// Refusals in a row after which a joiner that can only take IST stops asking: no member
/// holds its gap any more.
pub const REFUSALS_BEFORE_GIVING_UP: u32 = 3;
/// How long a joiner that asked for IST only waits for a donor's stream to begin before it
/// asks again (the chosen donor may have died before it could connect), ns.
pub const IST_START_TIMEOUT_NS: u64 = 30_000_000_000;

const _: () = assert!(RETRY_AFTER_NS < IST_START_TIMEOUT_NS);

/// Progress of the joiner's current transfer.
#[derive(Debug)]
pub struct TransferProgress {
    /// The donor's certification index and its position, once the header arrived.
    pub index: Option<(Seqno, Certifier)>,
    /// Everything up to here is queued for the appliers (or was in the snapshot).
    pub queued_upto: Seqno,
    /// The stream ended and was verified.
    pub done: bool,
    /// The stream failed (or the donor refused); the joiner asks again from `queued_upto`.
    pub failed: Option<String>,
    /// The donor sent (or will send) an SST; the server's snapshot brings the data.
    pub by_sst: bool,
    /// Donors in a row that could not serve the gap (IST-only requests).
    pub refusals: u32,
}

impl Default for TransferProgress {
    fn default() -> Self {
        TransferProgress {
            index: None,
            queued_upto: Seqno::UNDEFINED,
            done: false,
            failed: None,
            by_sst: false,
            refusals: 0,
        }
    }
}

/// How far a join's state transfer has come, for people watching it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferStanding {
    /// The donor sends an SST (the server's snapshot); otherwise IST only.
    pub by_sst: bool,
    /// The position the transfer started from: the snapshot's, or the node's own state;
    /// undefined while the snapshot has not arrived.
    pub from: Seqno,
    /// Everything up to here is in place or queued for the appliers.
    pub queued_upto: Seqno,
    /// The transfer ends here: where the donor's stream stops and the group's order takes
    /// over (the donor's index position, or the seqno before the first delivered).
    pub target: Seqno,
}

/// What a join does next (see [`Joining::next_step`]).
#[derive(Debug)]
pub enum JoinStep {
    /// Nothing to do yet.
    Wait,
    /// Log this line (the join starts over).
    Say(LogLevel, String),
    /// No member can serve the gap any more: the node cannot go on (as Galera's joiner,
    /// it stops; started again, it asks for a full snapshot).
    GiveUp(String),
    /// Ask the group for IST of the seqnos after `from`; `overdue`: the last request's donor
    /// never connected.
    AskForIst {
        /// The last seqno in place.
        from: Seqno,
        /// True when the last request's donor never connected.
        overdue: bool,
    },
    /// Everything is in place: finish the join.
    Finish(Box<FinishedJoin>),
}

/// What a finished join hands to the dispatcher.
#[derive(Debug)]
pub struct FinishedJoin {
    /// Where the server's state stands.
    pub received: Gtid,
    /// The donor's certification index and its position.
    pub index: (Seqno, Certifier),
    /// Everything up to here is queued for the appliers (by IST) or in the snapshot.
    pub queued_upto: Seqno,
    /// The primary view to give the server now, for a readmitted node.
    pub rejoin_view: Option<ViewInfo>,
    /// The first seqno this node was delivered.
    pub join_seqno: Seqno,
    /// The monitors stay where they are (see [`Joining::appliers_behind`]).
    pub appliers_behind: bool,
}

/// A joiner's progress through state transfer.
pub struct Joining {
    /// The first seqno this node was delivered in this join.
    pub join_seqno: Seqno,
    /// The position the server reported in `sst_received` (for an IST-only rejoin, the
    /// position this node already had).
    pub received: Option<Gtid>,
    /// What arrived from the donor so far.
    pub transfer: TransferProgress,
    /// The server's snapshot is in place: further requests ask for IST only.
    pub ist_only: bool,
    /// When the last request went to a donor that has not sent its stream's header yet:
    /// one that stays silent too long (it died, or never heard of the request) is asked
    /// for again.
    pub donor_awaited_since: Option<Nanos>,
    /// No donor was free: ask again at this time.
    pub retry_at: Option<Nanos>,
    /// Requests in a row that found no donor.
    pub donorless: u32,
    /// The group must hear the request again (no donor yet, the donor left, a stream failed).
    pub request_again: bool,
    /// For a node readmitted after an eviction: the primary view to give the server once
    /// it caught up.
    pub rejoin_view: Option<ViewInfo>,
    /// IST handed the server a primary view this node is a member of (the one that admitted
    /// it): `rejoin_view` would repeat it, and two consecutive primary views with the same
    /// members make the server roll back every streaming transaction.
    pub member_view_queued: bool,
    /// No member can serve the gap any more: stop asking (see `try_finish_join`).
    gave_up: bool,
    /// The donor the group chose for the last request (its UUID in views).
    pub donor: Option<Uuid>,
    /// The server's request and the position it asked IST from, to send again when no
    /// donor took it or the donor left before the snapshot was in place.
    pub sst_request: Option<(Vec<u8>, Seqno)>,
    /// The group membership (Raft id) the join's requests are made under: a joiner that
    /// the group admits again under another asks again, as the group drops what the old
    /// membership had pending.
    pub membership: u64,
    /// The node fell behind while its appliers still had work queued: its state continues
    /// from what they will have applied, so the monitors stay where they are (moving them to
    /// the position would leave the queued seqnos behind them).
    pub appliers_behind: bool,
}

impl Joining {
    /// The server already holds everything up to `position` of `cluster`'s history (its
    /// own state, no snapshot to wait for): only IST, from there on, is asked for.
    pub fn continue_own_state(&mut self, cluster: Uuid, position: Seqno) {
        self.received = Some(Gtid {
            cluster,
            seqno: position,
        });
        self.ist_only = true;
        self.transfer.queued_upto = position;
    }

    /// How far the transfer has come.
    pub fn standing(&self) -> TransferStanding {
        let index_at = self.transfer.index.as_ref().map(|(position, _)| *position);
        TransferStanding {
            by_sst: self.transfer.by_sst,
            from: self.received.map_or(Seqno::UNDEFINED, |r| r.seqno),
            queued_upto: self.in_place_upto(),
            target: index_at
                .unwrap_or(Seqno::UNDEFINED)
                .max(self.join_seqno.prev()),
        }
    }

    /// Everything up to here is in the server or queued for its appliers: the server's
    /// snapshot, then whatever IST queued after it. A further IST starts after it.
    pub fn in_place_upto(&self) -> Seqno {
        self.received
            .map_or(Seqno::UNDEFINED, |r| r.seqno)
            .max(self.transfer.queued_upto)
    }

    /// With the snapshot and the donor's index in place: `(state, continues_after)` when
    /// the server's state ends before the index position or before the first seqno this
    /// node was delivered, so that the seqnos in between would be missing.
    fn missing_before_delivery(&self) -> Option<(Seqno, Seqno)> {
        let state = self.in_place_upto();
        let index_at = self
            .transfer
            .index
            .as_ref()
            .map(|(position, _)| *position)?;
        let continues_after = index_at.max(self.join_seqno.prev());
        (state < continues_after).then_some((state, continues_after))
    }

    /// A join whose first delivered seqno is `join_seqno`.
    pub fn new(join_seqno: Seqno) -> Joining {
        Joining {
            join_seqno,
            received: None,
            transfer: TransferProgress::default(),
            ist_only: false,
            donor_awaited_since: None,
            retry_at: None,
            donorless: 0,
            request_again: false,
            rejoin_view: None,
            member_view_queued: false,
            gave_up: false,
            donor: None,
            sst_request: None,
            membership: 0,
            appliers_behind: false,
        }
    }

    /// What the join does next, decided from its progress alone at time `now`: wait, say
    /// why it stopped or starts over, ask for (more) IST, or finish.
    pub fn next_step(&mut self, now: Nanos) -> JoinStep {
        if self.retry_at.is_some_and(|at| now >= at) {
            self.retry_at = None;
            self.request_again = true;
        }
        if self.gave_up {
            return JoinStep::Wait;
        }
        if let Some(step) = self.after_failed_transfer(now) {
            return step;
        }
        let overdue = self.transfer.index.is_none()
            && self
                .donor_awaited_since
                .is_some_and(|at| now.since(at) > IST_START_TIMEOUT_NS);
        if overdue {
            base::mark!("engine.silent_donor_asked_for_again");
            self.request_again = true;
            self.donor_awaited_since = None;
            if self.received.is_none() {
                // The applier waiting for the snapshot sends the request again.
                let message = format!(
                    "the chosen donor sent nothing {} s after our state transfer request was \
                     ordered; asking again",
                    IST_START_TIMEOUT_NS / 1_000_000_000
                );
                return JoinStep::Say(LogLevel::Warning, message);
            }
        }
        if self.received.is_some() && std::mem::take(&mut self.request_again) {
            // The server's snapshot is in place: only IST can bring the rest.
            self.ist_only = true;
            self.donor_awaited_since = Some(now);
            return JoinStep::AskForIst {
                from: self.in_place_upto(),
                overdue,
            };
        }
        let ready = self.received.is_some() && self.transfer.index.is_some() && self.transfer.done;
        if !ready {
            return JoinStep::Wait;
        }
        if let Some((state, continues_after)) = self.missing_before_delivery() {
            // The snapshot ends before the donor's index (or before this node's first
            // delivery): the seqnos in between are nowhere here. Continuing would leave a
            // hole in the data; IST brings them (with an index to match).
            self.forget_transfer();
            self.request_again = true;
            let message = format!(
                "the server's state ends at {state} but delivery goes on after \
                 {continues_after}: asking for IST of the seqnos in between"
            );
            return JoinStep::Say(LogLevel::Warning, message);
        }
        JoinStep::Finish(Box::new(FinishedJoin {
            received: self.received.expect("checked"),
            index: self.transfer.index.take().expect("checked"),
            queued_upto: self.transfer.queued_upto,
            rejoin_view: self.rejoin_view.take().filter(|_| !self.member_view_queued),
            join_seqno: self.join_seqno,
            appliers_behind: self.appliers_behind,
        }))
    }

    /// After a failed or refused transfer: give up when no member holds the gap any more,
    /// else ask again in a second. `None` when the last transfer did not fail.
    fn after_failed_transfer(&mut self, now: Nanos) -> Option<JoinStep> {
        let reason = self.transfer.failed.as_ref()?;
        if self.ist_only && self.transfer.refusals >= REFUSALS_BEFORE_GIVING_UP {
            self.gave_up = true;
            let message = format!(
                "Will never receive state. Need to abort. No member holds seqno {} and after in \
                 its gcache any more ({} donors in a row refused): this node cannot catch up by \
                 IST; started again, it asks for a full state transfer (SST)",
                self.in_place_upto().next(),
                self.transfer.refusals
            );
            return Some(JoinStep::GiveUp(message));
        }
        // What was queued stays queued (it is intact and in order); ask again for the
        // rest, from another donor if the group picks one.
        self.donor_awaited_since = None;
        if self.transfer.queued_upto.is_defined() && self.ist_only {
            base::mark!("engine.cut_stream_resumed_from_what_was_queued");
        }
        let message = format!("state transfer incomplete ({reason}); asking again");
        self.transfer.failed = None;
        self.forget_transfer();
        self.retry_at = Some(Nanos(now.0 + RETRY_AFTER_NS));
        Some(JoinStep::Say(LogLevel::Warning, message))
    }

    /// Drops what the last transfer brought but the queued seqnos: its index is of no use.
    fn forget_transfer(&mut self) {
        self.transfer.index = None;
        self.transfer.done = false;
        self.transfer.by_sst = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cert::CertConfig;

    /// A joiner whose first delivery was `join`, with the server's state at `received`,
    /// IST queued up to `queued` and the donor's index at `index`.
    fn joining(join: i64, received: i64, queued: i64, index: i64) -> Joining {
        let mut joining = Joining::new(Seqno(join));
        joining.received = Some(Gtid {
            cluster: Uuid::NIL,
            seqno: Seqno(received),
        });
        joining.transfer.queued_upto = Seqno(queued);
        let cert = Certifier::starting_at(CertConfig::default(), Seqno(index));
        joining.transfer.index = Some((Seqno(index), cert));
        joining
    }

    #[test]
    fn a_join_never_continues_past_a_hole() {
        // The snapshot ends before the donor's index: 11 and 12 are nowhere.
        assert_eq!(
            joining(5, 10, -1, 12).missing_before_delivery(),
            Some((Seqno(10), Seqno(12)))
        );
        // At or past the index: the held deliveries continue it.
        assert_eq!(joining(5, 12, -1, 12).missing_before_delivery(), None);
        assert_eq!(joining(5, 15, -1, 12).missing_before_delivery(), None);
        // IST queued the rest after the snapshot.
        assert_eq!(joining(5, 10, 14, 14).missing_before_delivery(), None);
        // Deliveries start at 20: the state must reach 19 whatever the index says.
        assert_eq!(
            joining(20, 15, -1, 12).missing_before_delivery(),
            Some((Seqno(15), Seqno(19)))
        );
    }

    fn is_ask(step: &JoinStep, wanted_from: i64, wanted_overdue: bool) -> bool {
        matches!(step, JoinStep::AskForIst { from, overdue }
            if *from == Seqno(wanted_from) && *overdue == wanted_overdue)
    }

    #[test]
    fn a_join_finishes_once_state_index_and_stream_are_in_place() {
        let now = Nanos(1_000_000_000);
        let mut join = joining(5, 12, -1, 12);
        assert!(
            matches!(join.next_step(now), JoinStep::Wait),
            "stream not done"
        );
        join.transfer.done = true;
        join.member_view_queued = true;
        join.rejoin_view = Some(ViewInfo {
            state_id: Gtid {
                cluster: Uuid::NIL,
                seqno: Seqno(5),
            },
            view_id: 1,
            primary: true,
            members: Vec::new(),
            my_index: -1,
            proto_ver: crate::PROTOCOL_VERSION,
        });
        let JoinStep::Finish(finished) = join.next_step(now) else {
            panic!("everything is in place");
        };
        assert_eq!(finished.index.0, Seqno(12));
        assert_eq!(finished.received.seqno, Seqno(12));
        assert!(
            finished.rejoin_view.is_none(),
            "IST gave the server its member view already: never twice"
        );
    }

    #[test]
    fn a_hole_under_the_index_asks_for_ist_of_it() {
        let now = Nanos(1_000_000_000);
        let mut join = joining(5, 10, -1, 12);
        join.transfer.done = true;
        assert!(matches!(
            join.next_step(now),
            JoinStep::Say(LogLevel::Warning, _)
        ));
        assert!(join.transfer.index.is_none(), "that index is of no use");
        assert!(is_ask(&join.next_step(now), 10, false));
        assert!(join.ist_only);
    }

    #[test]
    fn a_failed_transfer_starts_over_a_second_later_from_what_was_queued() {
        let now = Nanos(1_000_000_000);
        let mut join = joining(5, 10, 14, 12);
        join.transfer.failed = Some("stream cut".into());
        let JoinStep::Say(LogLevel::Warning, message) = join.next_step(now) else {
            panic!("the failure is reported");
        };
        assert!(message.contains("stream cut"), "{message}");
        assert!(join.transfer.failed.is_none() && join.transfer.index.is_none());
        let early = Nanos(now.0 + RETRY_AFTER_NS / 2);
        assert!(matches!(join.next_step(early), JoinStep::Wait));
        assert!(is_ask(
            &join.next_step(Nanos(now.0 + RETRY_AFTER_NS)),
            14,
            false
        ));
    }

    #[test]
    fn refusals_in_a_row_make_an_ist_only_joiner_give_up_for_good() {
        let now = Nanos(1_000_000_000);
        let mut join = joining(5, 10, -1, 12);
        join.transfer.index = None;
        join.ist_only = true;
        join.transfer.refusals = REFUSALS_BEFORE_GIVING_UP;
        join.transfer.failed = Some("seqno 11 is purged".into());
        let JoinStep::GiveUp(message) = join.next_step(now) else {
            panic!("the join gives up");
        };
        assert!(message.contains("seqno 11"), "{message}");
        join.request_again = true;
        let later = Nanos(now.0 + RETRY_AFTER_NS * 10);
        assert!(matches!(join.next_step(later), JoinStep::Wait));
    }

    #[test]
    fn a_donor_that_never_connects_is_asked_for_again() {
        let now = Nanos(1_000_000_000);
        let mut join = joining(5, 10, -1, 12);
        join.transfer.index = None;
        join.ist_only = true;
        join.donor_awaited_since = Some(now);
        assert!(matches!(join.next_step(now), JoinStep::Wait));
        let late = Nanos(now.0 + IST_START_TIMEOUT_NS + 1_000_000_000);
        assert!(is_ask(&join.next_step(late), 10, true));
        assert_eq!(join.donor_awaited_since, Some(late));
    }
}
