//! Total order isolation: a statement (DDL) that runs alone, in the total order, on every node.

use engine::CertifyOutcome;
use writeset::flags;

use crate::error::ReplicatorError;
use crate::shared::lock;
use crate::Replicator;

impl Replicator {
    /// Starts a total-order-isolation statement: returns once everything before it has
    /// committed, holding commit order until [`Replicator::to_execute_end`].
    pub fn to_execute_start(
        &self,
        conn_id: u64,
        keys: Vec<Vec<Vec<u8>>>,
        data: &[u8],
        trx_flags: u32,
    ) -> CertifyOutcome {
        let trx_id = toi_trx_id(conn_id);
        lock(&self.shared.inner)
            .engine
            .begin_toi(trx_id, keys, data);
        let outcome = self.replicate(conn_id, trx_id, trx_flags | flags::ISOLATION, true);
        if !matches!(outcome, CertifyOutcome::Committable(_)) {
            self.release(trx_id);
        }
        outcome
    }

    /// Ends a total-order-isolation statement; `failure` is the server's error if the
    /// statement failed here (voted on, as in `commit_order_leave`).
    pub fn to_execute_end(
        &self,
        conn_id: u64,
        failure: Option<&[u8]>,
    ) -> Result<(), ReplicatorError> {
        let seqno = lock(&self.shared.inner).engine.end_toi(conn_id);
        let outcome = match seqno {
            Some(seqno) => self.commit_order_leave(seqno, failure),
            None => Ok(()),
        };
        self.release(toi_trx_id(conn_id));
        outcome
    }
}

/// The transaction id a TOI statement on `conn_id` replicates under (one statement per
/// connection at a time, out of the server's own id range).
fn toi_trx_id(conn_id: u64) -> u64 {
    u64::MAX - conn_id
}
