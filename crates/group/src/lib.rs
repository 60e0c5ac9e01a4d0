//! Group communication for Trireme: one total order of write-sets across the cluster.
//!
//! A [`GroupNode`] is one member, as a deterministic state machine in the style of raft-rs
//! (which it is built on): the driver feeds it ticks ([`GroupNode::tick`]), received bytes
//! ([`GroupNode::receive`]) and local submissions ([`GroupNode::submit`]), then calls
//! [`GroupNode::poll`] and carries out what comes back: bytes to send and actions to deliver.
//! It does no I/O, reads no clock and draws randomness only from the seeded generator it was
//! given, so a simulator replays a run exactly from its seed.
//!
//! Layout:
//! - `config`: settings, with Galera's option names (`evs.suspect_timeout`, `gcs.fc_limit`).
//! - `wire`: the checked envelope of every message between members.
//! - `check`: what a Raft message from the network must satisfy before raft-rs sees it.
//! - `admission`: the proof that a joiner receives at the address it names.
//! - `state`: the replicated group state; the one place Raft entries become seqnos.
//! - `log`: the in-memory Raft log with group-state snapshots.
//! - `recovery`: the primary component restored after a full crash (the saved last view).
//! - `restart`: the identity a member of two saves to come back as itself after a crash.
//! - `vote`: consistency votes on a write-set that failed to apply on some members.
//! - `node` (this file): the member itself: forwarding to the leader, batching, delivery,
//!   views and the primary component, eviction, joining and leaving, flow control.
//!
//! Words: Raft *orders* (commits) log entries; the database *commits* transactions. A Raft
//! index is not a seqno and a Raft snapshot is not an SST.

pub mod check;
pub mod config;
pub mod forced;
pub mod log;
pub mod recovery;
pub mod restart;
pub mod state;
pub mod vote;
pub mod weights;
pub mod wire;

mod admission;
mod node;

pub use check::RaftRefusal;
pub use config::{
    ConfigError, GroupConfig, QuorumOverride, CATCH_UP_PERIOD_DEFAULT, CATCH_UP_PERIOD_MAX,
    MAX_WS_SIZE_DEFAULT,
};
pub use node::{
    Delivery, FlowCounters, FlowTriggers, ForcedBootstrap, GroupNode, GroupStatus, MemberRow,
    Outgoing, PauseLengths, ReceiveError, View, ViewMember, CHUNK_BYTES, FLOW_STOP_GRACE_NS,
    PAUSE_BUCKET_BOUNDS_NS,
};
pub use state::{Contact, Control, GroupState, MemberInfo, NoDonor, StateRequest, Submission};
