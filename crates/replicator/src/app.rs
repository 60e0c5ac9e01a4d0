//! What the replicator and the database server say to each other: the [`Application`]
//! trait the server implements, and the views, write-sets and contexts passed through it.

use base::Gtid;

pub use engine::{LogLevel, MemberOut, Meta, ViewInfo, PROTOCOL_VERSION};

/// An applier thread's context, passed back to the application untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvContext(pub usize);

/// A write-set handed to the application to apply.
#[derive(Debug)]
pub struct ApplyAction<'a> {
    /// Identity and ordering.
    pub meta: Meta,
    /// wsrep flags, plus ROLLBACK for a write-set that failed certification.
    pub flags: u32,
    /// The row data.
    pub data: &'a [u8],
}

/// What the replicator needs from the database server. Every call may block.
pub trait Application: Send + Sync {
    /// The node joined a primary component (first view).
    fn connected(&self, view: &ViewInfo) -> bool;
    /// A view change, on an applier thread.
    fn view(&self, recv: RecvContext, view: &ViewInfo) -> bool;
    /// Applies one write-set; the application calls `commit_order_enter/leave` inside.
    fn apply(&self, recv: RecvContext, action: &ApplyAction<'_>, exit_loop: &mut bool) -> bool;
    /// The node caught up with the cluster.
    fn synced(&self);
    /// The server's state transfer request (method and address), or `None` on failure.
    fn sst_request(&self) -> Option<Vec<u8>>;
    /// This node was chosen as donor: start sending a snapshot at `state` (or, with
    /// `bypass`, only the position). The server later calls `sst_sent`.
    fn sst_donate(&self, recv: RecvContext, request: &[u8], state: Gtid, bypass: bool) -> bool;
    /// A log line for the server's error log.
    fn log(&self, level: LogLevel, message: &str);
    /// The node cannot go on (its state transfer failed): stop the server, as Galera
    /// does. The default only logs, for embedders that stop on their own.
    fn fatal(&self, message: &str) {
        self.log(LogLevel::Error, message);
    }
}
