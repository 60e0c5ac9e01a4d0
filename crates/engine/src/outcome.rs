//! How a local transaction's replication ends when it does not simply succeed: the outcomes
//! of certification, of a submission refused before it left, and of brute-force aborts.

use base::Seqno;

use crate::server_view::Meta;

/// How `certify` (or `to_execute_start`) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertifyOutcome {
    /// Ordered and certified: go on to commit.
    Committable(Meta),
    /// Ordered, failed certification: roll back; the seqno must still pass commit order.
    Failed(Meta),
    /// Never ordered (aborted before, or nothing to replicate).
    NotOrdered,
    /// Ordered and certified, but brute-force aborted meanwhile: replay.
    BfAborted(Meta),
    /// Larger than `repl.max_ws_size`: refused before anything left this node.
    SizeExceeded {
        /// The encoded write-set's size in bytes.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
}

/// Why a submission was not handed to the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitRefusal {
    /// Not a member of a primary component that serves writes, an unknown transaction, or
    /// one brute-force aborted already.
    NotOrdered,
    /// Larger than `repl.max_ws_size`.
    SizeExceeded {
        /// The encoded write-set's size in bytes.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
}

impl From<SubmitRefusal> for CertifyOutcome {
    fn from(refusal: SubmitRefusal) -> CertifyOutcome {
        match refusal {
            SubmitRefusal::NotOrdered => CertifyOutcome::NotOrdered,
            SubmitRefusal::SizeExceeded { size, limit } => {
                CertifyOutcome::SizeExceeded { size, limit }
            }
        }
    }
}

/// A local transaction was brute-force aborted while it waited at this seqno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("brute-force aborted while waiting to commit {0}")]
pub struct BfAborted(pub Seqno);

/// How `abort_certification` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortOutcome {
    /// The victim will abort (or was unknown).
    Aborted,
    /// The victim is ordered before the aborter and goes on; the aborter must wait for it.
    NotAllowed(Seqno),
}
