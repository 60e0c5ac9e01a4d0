//! What the replicator and the database server say to each other: the [`Application`]
//! trait the server implements, and the views, write-sets and contexts passed through it.

use base::{Gtid, Seqno, Uuid};
use group::View;

/// The application protocol version MariaDB 10.11 needs in views.
pub const PROTOCOL_VERSION: i32 = 4;

/// An applier thread's context, passed back to the application untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvContext(pub usize);

/// A member as the application sees it in a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberOut {
    /// The member's UUID.
    pub uuid: Uuid,
    /// `wsrep_node_name`.
    pub name: String,
    /// Where clients reach it (`wsrep_node_incoming_address`).
    pub incoming: String,
}

/// A view as the application sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    /// Cluster state UUID and the seqno of this view (last delivered for a non-primary one).
    pub state_id: Gtid,
    /// Configuration number (-1 when not primary).
    pub view_id: i64,
    /// True for a primary component.
    pub primary: bool,
    /// The members.
    pub members: Vec<MemberOut>,
    /// This node's index in `members`, -1 if absent (the final view).
    pub my_index: i32,
    /// The application protocol (always [`PROTOCOL_VERSION`]).
    pub proto_ver: i32,
}

/// The identity and ordering of an ordered write-set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Cluster UUID and seqno (seqno `UNDEFINED` when it was never ordered).
    pub gtid: Gtid,
    /// The originating node.
    pub source: Uuid,
    /// The originator's transaction id.
    pub trx_id: u64,
    /// The originator's connection id.
    pub conn_id: u64,
    /// What it must wait for.
    pub depends_on: Seqno,
}

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

pub(crate) fn view_info(view: &View) -> ViewInfo {
    let members = view
        .members
        .iter()
        .map(|m| MemberOut {
            uuid: m.uuid,
            name: m.name.clone(),
            incoming: m.incoming.clone(),
        })
        .collect();
    ViewInfo {
        state_id: Gtid {
            cluster: view.cluster,
            seqno: view.seqno,
        },
        view_id: if view.primary {
            view.view_id as i64
        } else {
            -1
        },
        primary: view.primary,
        members,
        my_index: view.own_index.map_or(-1, |i| i as i32),
        proto_ver: PROTOCOL_VERSION,
    }
}
