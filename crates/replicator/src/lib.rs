//! The replicator: one database node's replication, behind a safe API shaped like wsrep.
//!
//! It composes the group layer (run over TCP by `transport`), certification (`cert`) and the
//! apply and commit monitors (`order`), and talks to the database server only through the
//! [`Application`] trait. The C ABI crate (`provider`) is a thin translation of wsrep calls
//! onto [`Replicator`] and of [`Application`] calls onto MariaDB's callbacks, so everything
//! here is testable without MariaDB.
//!
//! Threads: one dispatcher thread (`dispatcher.rs`) takes the group's deliveries in order,
//! certifies every write-set (the local monitor: certification runs in seqno order, on one
//! thread), hands local verdicts to the client threads waiting in [`Replicator::certify`]
//! (`local_trx.rs`) and queues everything else for the server's applier threads, which sit
//! in [`Replicator::recv`] (`applier.rs`). They share one state behind one lock
//! (`shared.rs`).
//!
//! A joiner gets its state by IST from a donor's gcache, or by the server's SST with the
//! donor's certification index (`joiner.rs`, `donor.rs`, `transfer.rs`; see
//! ARCHITECTURE.md). A causal read (`sync_wait` without a target, `causal.rs`) asks the Raft
//! leader for its read index and waits until this node has committed up to it.

// This crate runs the node: it starts the dispatcher thread and waits with real timeouts.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use transport::GroupRunner;

use crate::shared::Shared;

mod addresses;
mod app;
mod applier;
mod cache;
mod causal;
mod commit;
mod connection;
mod desync;
mod dispatcher;
mod donor;
mod error;
mod joiner;
mod local_trx;
mod persisted;
mod restart_files;
mod runtime_options;
mod saved_state;
mod seqno_trace;
mod settings;
mod shared;
mod status;
mod timings;
mod toi;
mod transfer;
mod vote;

pub use addresses::{AddressError, NodeAddresses, Reachable};
pub use app::{
    Application, ApplyAction, LogLevel, MemberOut, Meta, RecvContext, ViewInfo, PROTOCOL_VERSION,
};
pub use base::grastate::SavedState;
pub use base::FreezePurge;
pub use engine::ist::IstError;
pub use engine::{AbortOutcome, BfAborted, CacheReach, CertifyOutcome, TransferStanding};
pub use error::ReplicatorError;
pub use gcache::GcacheConfig;
pub use group::{MemberRow, PauseLengths, PAUSE_BUCKET_BOUNDS_NS};
pub use local_trx::DEFAULT_MAX_WRITE_SET_BYTES;
pub use seqno_trace::{TRACE_CAPACITY, TRACE_DIR_VARIABLE};
pub use settings::{parse_cluster_address, Settings, DEFAULT_GROUP_PORT};
pub use status::{ApplyStatus, FlowStatus, QueueStatus, Status, Totals, CONFLICT_TABLES_SHOWN};
pub use timings::TIMING_BUCKETS_SECONDS;

/// One node's replication.
pub struct Replicator {
    shared: Arc<Shared>,
    runner: Mutex<Option<GroupRunner>>,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
    /// Other threads of this replicator (the index receiver), joined at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The thread that receives state transfer streams for the current connection.
    ist_receiver: Mutex<Option<JoinHandle<()>>>,
}

impl Replicator {
    /// A replicator that is not connected yet.
    pub fn new(app: Arc<dyn Application>, settings: Settings) -> Replicator {
        Replicator {
            shared: Arc::new(Shared::new(app, settings)),
            runner: Mutex::new(None),
            dispatcher: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            ist_receiver: Mutex::new(None),
        }
    }
}
