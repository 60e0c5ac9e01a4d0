//! Total order isolation: a statement (DDL) that runs alone, in the total order, on every node.

use base::KeyType;
use writeset::{flags, Key};

use crate::error::{CertifyOutcome, ReplicatorError};
use crate::local_trx::new_trx;
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
        let trx_id = u64::MAX - conn_id;
        {
            let mut inner = lock(&self.shared.inner);
            let trx = inner.trxs.entry(trx_id).or_insert_with(new_trx);
            trx.keys = keys
                .into_iter()
                .map(|parts| Key {
                    parts,
                    key_type: KeyType::Exclusive,
                })
                .collect();
            trx.data = data.to_vec();
        }
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
        let seqno = lock(&self.shared.inner).toi_by_conn.remove(&conn_id);
        let outcome = match seqno {
            Some(seqno) => self.commit_order_leave(seqno, failure),
            None => Ok(()),
        };
        self.release(u64::MAX - conn_id);
        outcome
    }
}
