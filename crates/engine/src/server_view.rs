//! What the database server is told of views and ordered write-sets: [`ViewInfo`] (a view as
//! wsrep hands it over), its members, and the [`Meta`] of an ordered write-set.

use base::{Gtid, Seqno, Uuid};
use group::View;

/// The application protocol version MariaDB 10.11 needs in views.
pub const PROTOCOL_VERSION: i32 = 4;

/// A member as the server sees it in a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberOut {
    /// The member's UUID.
    pub uuid: Uuid,
    /// `wsrep_node_name`.
    pub name: String,
    /// Where clients reach it (`wsrep_node_incoming_address`).
    pub incoming: String,
}

/// A view as the server sees it.
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

impl ViewInfo {
    /// The view a group member's [`View`] is for the server.
    pub fn of(view: &View) -> ViewInfo {
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

    /// The final view of a node that left `cluster` after `seqno`: no members, not primary.
    pub fn disconnected(cluster: Uuid, seqno: Seqno) -> ViewInfo {
        ViewInfo {
            state_id: Gtid { cluster, seqno },
            view_id: -1,
            primary: false,
            members: Vec::new(),
            my_index: -1,
            proto_ver: PROTOCOL_VERSION,
        }
    }
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
