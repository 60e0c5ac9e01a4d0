//! What the engine asks its driver to do: [`Effect`]s, collected in order as the engine
//! decides and taken by the driver ([`crate::NodeEngine::take_effects`]), which carries them
//! out (on a real node: the group member's thread, the gcache, the server's log; in the
//! simulator: its own group member, cache and log).

use base::{NodeState, Seqno, Uuid};
use group::vote::VoteCode;
use group::StateRequest;
use writeset::Bytes;

use crate::ist::ActionKind;
use crate::ist::Header;

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// The node cannot go on.
    Error,
    /// Something the operator should look at.
    Warning,
    /// Normal operation.
    Info,
}

/// One ordered action to store in the write-set cache, for IST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheWrite {
    /// The history it belongs to.
    pub history: Uuid,
    /// Its seqno.
    pub seqno: Seqno,
    /// What it is.
    pub kind: ActionKind,
    /// Its verdict: the seqno it depends on, or [`crate::cache::FAILED_CERT`].
    pub depends_on: i64,
    /// Its bytes (an encoded write-set or view record).
    pub payload: Bytes,
}

/// A stream to send to a joiner: the header, then (for IST) the cached records
/// `header.first..=header.last`, which `pin` keeps in the cache until the driver unpins it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutgoingTransfer {
    /// Where the joiner receives it (`ist.recv_addr`).
    pub address: String,
    /// What the joiner gets.
    pub header: Header,
    /// The cache pin that keeps the records while they are sent.
    pub pin: Option<u64>,
}

/// Something the engine decided that its driver carries out.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A line for the server's error log.
    Log(LogLevel, String),
    /// Tell the group this node's state (the group counts the data states for flow control
    /// and donor choice).
    AnnounceState(NodeState),
    /// Store an ordered action in the write-set cache.
    Cache(CacheWrite),
    /// Send this node's state request to the group.
    RequestState(StateRequest),
    /// Send a state transfer stream to a joiner.
    SendTransfer(OutgoingTransfer),
    /// Cast this node's verdict in the consistency vote on `seqno`.
    Vote {
        /// The seqno voted on.
        seqno: Seqno,
        /// This node's verdict.
        code: VoteCode,
    },
    /// Tell the group that the snapshot for this joiner (Raft id) will never come.
    TransferFailed {
        /// The joiner's Raft id.
        joiner: u64,
    },
    /// Start the apply and commit monitors over with everything up to this seqno done (a
    /// bootstrap). The driver does it before any task queued in the same step runs.
    ResetMonitors(Seqno),
    /// Make the monitors continue from this seqno if they stand before it (or there are
    /// none): a snapshot moved the node's state there, and the seqnos it jumped over pass
    /// through no monitor. Monitors at or past it stay (IST may have applied beyond the
    /// snapshot already). The driver does it before any task queued in the same step runs.
    MonitorsAt(Seqno),
    /// Leave the group (this node's data differs from the cluster's).
    Leave,
    /// Leave the group, then stop the server with this message: the node cannot go on.
    Fatal(String),
}
