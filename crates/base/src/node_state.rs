//! The node state machine, as an explicit transition table.
//!
//! The states are Galera's: a DBA reads them in `wsrep_local_state_comment`. Every change of
//! state goes through [`NodeState::transition`], which refuses anything not in
//! [`NodeState::ALLOWED`]; the caller turns the error into a loud failure, because an illegal
//! transition means the node's idea of its own state is wrong.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A JOINED node with at most this many write-sets queued has caught up and turns SYNCED
/// (Galera's default `gcs.fc_limit`: from there on its queue is flow control's business).
pub const SYNCED_QUEUE_MAX: u64 = 16;

/// Where a node stands with respect to the cluster and its own data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeState {
    /// Not connected to any group (before `connect`, after shutdown).
    Closed,
    /// Connected, but not part of a primary component.
    Open,
    /// In a primary component; state exchange decides whether a transfer is needed.
    Primary,
    /// Waiting for, or receiving, a state transfer (IST or SST).
    Joiner,
    /// Has the state; applying what was ordered during the transfer.
    Joined,
    /// Caught up and in step with the cluster.
    Synced,
    /// Serving a state transfer or desynced by the operator: it applies late and never
    /// triggers flow control.
    Donor,
}

impl NodeState {
    /// Every allowed transition (from, to). Anything else is a bug.
    pub const ALLOWED: &'static [(NodeState, NodeState)] = &[
        (NodeState::Closed, NodeState::Open),
        (NodeState::Open, NodeState::Primary),
        (NodeState::Open, NodeState::Closed),
        (NodeState::Primary, NodeState::Joiner),
        (NodeState::Primary, NodeState::Joined),
        (NodeState::Primary, NodeState::Open),
        (NodeState::Primary, NodeState::Closed),
        (NodeState::Joiner, NodeState::Joined),
        (NodeState::Joiner, NodeState::Open),
        (NodeState::Joiner, NodeState::Closed),
        (NodeState::Joined, NodeState::Synced),
        (NodeState::Joined, NodeState::Donor),
        (NodeState::Joined, NodeState::Joiner),
        (NodeState::Joined, NodeState::Open),
        (NodeState::Joined, NodeState::Closed),
        (NodeState::Synced, NodeState::Donor),
        (NodeState::Synced, NodeState::Joiner),
        (NodeState::Synced, NodeState::Open),
        (NodeState::Synced, NodeState::Closed),
        (NodeState::Donor, NodeState::Joined),
        (NodeState::Donor, NodeState::Joiner),
        (NodeState::Donor, NodeState::Open),
        (NodeState::Donor, NodeState::Closed),
    ];

    /// Moves to `to` if the table allows it.
    pub fn transition(&mut self, to: NodeState) -> Result<(), IllegalTransition> {
        if NodeState::ALLOWED.contains(&(*self, to)) {
            *self = to;
            Ok(())
        } else {
            Err(IllegalTransition { from: *self, to })
        }
    }

    /// The text Galera shows in `wsrep_local_state_comment`.
    pub fn comment(self) -> &'static str {
        match self {
            NodeState::Closed | NodeState::Open => "Initialized",
            NodeState::Primary => "Joining",
            NodeState::Joiner => "Joining: receiving State Transfer",
            NodeState::Joined => "Joined",
            NodeState::Synced => "Synced",
            NodeState::Donor => "Donor/Desynced",
        }
    }

    /// The `wsrep_member_status_t` value reported as `wsrep_local_state`.
    pub fn wsrep_member_status(self) -> u32 {
        match self {
            NodeState::Closed | NodeState::Open | NodeState::Primary => 0,
            NodeState::Joiner => 1,
            NodeState::Donor => 2,
            NodeState::Joined => 3,
            NodeState::Synced => 4,
        }
    }

    /// True if this node's apply queue may pause the cluster by flow control: when SYNCED,
    /// and when JOINED, as in Galera, so that a node working off what was ordered during its
    /// state transfer catches up in a bounded time under any load (its limit starts above
    /// that backlog and glides down: the group crate's catch-up). It turns SYNCED once its
    /// queue is at most [`SYNCED_QUEUE_MAX`].
    pub fn may_send_flow_control(self) -> bool {
        matches!(self, NodeState::Synced | NodeState::Joined)
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            NodeState::Closed => "CLOSED",
            NodeState::Open => "OPEN",
            NodeState::Primary => "PRIMARY",
            NodeState::Joiner => "JOINER",
            NodeState::Joined => "JOINED",
            NodeState::Synced => "SYNCED",
            NodeState::Donor => "DONOR/DESYNCED",
        };
        f.write_str(name)
    }
}

/// A transition the table does not allow.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
#[error("illegal node state transition {from} -> {to}")]
pub struct IllegalTransition {
    /// The state the node was in.
    pub from: NodeState,
    /// The state it was asked to enter.
    pub to: NodeState,
}

#[cfg(test)]
mod tests {
    use super::*;
    const ALL: [NodeState; 7] = [
        NodeState::Closed,
        NodeState::Open,
        NodeState::Primary,
        NodeState::Joiner,
        NodeState::Joined,
        NodeState::Synced,
        NodeState::Donor,
    ];

    #[test]
    fn the_usual_join_path_is_allowed() {
        let mut state = NodeState::Closed;
        for next in [
            NodeState::Open,
            NodeState::Primary,
            NodeState::Joiner,
            NodeState::Joined,
            NodeState::Synced,
            NodeState::Donor,
            NodeState::Joined,
            NodeState::Synced,
            NodeState::Closed,
        ] {
            state.transition(next).unwrap();
            assert_eq!(state, next);
        }
    }

    #[test]
    fn every_pair_outside_the_table_is_refused_and_leaves_state_alone() {
        let mut refused = 0;
        for from in ALL {
            for to in ALL {
                let mut state = from;
                let result = state.transition(to);
                if NodeState::ALLOWED.contains(&(from, to)) {
                    assert_eq!(result, Ok(()));
                    assert_eq!(state, to);
                } else {
                    assert_eq!(result, Err(IllegalTransition { from, to }));
                    assert_eq!(state, from);
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 49 - NodeState::ALLOWED.len());
    }

    #[test]
    fn specific_illegal_transitions() {
        // A joiner cannot claim to be synced without passing through JOINED.
        assert!(NodeState::Joiner
            .clone()
            .transition(NodeState::Synced)
            .is_err());
        // Nothing re-enters CLOSED's successor without connecting first.
        assert!(NodeState::Closed
            .clone()
            .transition(NodeState::Synced)
            .is_err());
        // A node that is not primary cannot start a state transfer.
        assert!(NodeState::Open
            .clone()
            .transition(NodeState::Joiner)
            .is_err());
    }

    #[test]
    fn only_synced_and_joined_nodes_send_flow_control() {
        for state in ALL {
            let expected = matches!(state, NodeState::Synced | NodeState::Joined);
            assert_eq!(state.may_send_flow_control(), expected, "{state}");
        }
    }
}
