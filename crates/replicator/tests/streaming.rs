//! Streaming replication through the replicator, driven the way wsrep-lib drives it: one
//! transaction certified in fragments, released after each, then rolled back by a rollback
//! write-set that every node (this one included) applies; and the write-set size limit.

// These tests play MariaDB's applier threads.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex, OnceLock, Weak};

use base::{KeyType, Seqno};
mod common;
use common::{settings, wait_for};
use replicator::{
    Application, ApplyAction, CertifyOutcome, LogLevel, RecvContext, Replicator, ViewInfo,
};
use writeset::flags;

/// A server that records what it applies and passes commit order as MariaDB does.
#[derive(Default)]
struct Server {
    replicator: OnceLock<Weak<Replicator>>,
    applied: Mutex<Vec<(u64, u32)>>,
    synced: Mutex<bool>,
}

impl Application for Server {
    fn connected(&self, _: &ViewInfo) -> bool {
        true
    }
    fn view(&self, _: RecvContext, _: &ViewInfo) -> bool {
        true
    }
    fn apply(&self, _: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        let replicator = self.replicator.get().and_then(Weak::upgrade).unwrap();
        let seqno = action.meta.gtid.seqno;
        replicator.commit_order_enter(seqno).unwrap();
        self.applied
            .lock()
            .unwrap()
            .push((action.meta.trx_id, action.flags));
        replicator.commit_order_leave(seqno, None).unwrap();
        true
    }
    fn synced(&self) {
        *self.synced.lock().unwrap() = true;
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        None
    }
    fn sst_donate(&self, _: RecvContext, _: &[u8], _: base::Gtid, _: bool) -> bool {
        true
    }
    fn log(&self, _: LogLevel, _: &str) {}
}

fn row_key(replicator: &Replicator, trx: u64, row: u64) {
    replicator.append_key(
        trx,
        vec![b"db".to_vec(), b"t".to_vec(), row.to_le_bytes().to_vec()],
        KeyType::Exclusive,
    );
}

/// Certifies what `trx` holds with `trx_flags`, passes commit order and releases it, as
/// wsrep-lib does for a fragment or a commit.
fn replicate(replicator: &Replicator, trx: u64, trx_flags: u32) -> replicator::Meta {
    let outcome = replicator.certify(3, trx, trx_flags);
    let CertifyOutcome::Committable(meta) = outcome else {
        panic!("{outcome:?}")
    };
    replicator.commit_order_enter(meta.gtid.seqno).unwrap();
    replicator
        .commit_order_leave(meta.gtid.seqno, None)
        .unwrap();
    replicator.release(trx);
    meta
}

#[test]
fn fragments_continue_one_transaction_and_its_rollback_is_applied_everywhere() {
    let server = Arc::new(Server::default());
    let settings = settings("node1");
    let replicator = Arc::new(Replicator::new(server.clone(), settings));
    server
        .replicator
        .set(Arc::downgrade(&replicator))
        .unwrap_or_else(|_| unreachable!());
    replicator.connect("trireme", "gcomm://", "", true).unwrap();
    let applier = {
        let replicator = replicator.clone();
        std::thread::spawn(move || replicator.recv(RecvContext(1)))
    };
    wait_for("synced", || *server.synced.lock().unwrap());

    // Two fragments on unrelated rows: the second still depends on the first, and the
    // transaction stays open across the releases.
    row_key(&replicator, 1, 1);
    replicator.append_data(1, b"fragment one");
    let first = replicate(&replicator, 1, flags::TRX_START);
    assert_eq!(replicator.status().open_transactions, 1);
    assert_eq!(replicator.status().streaming_transactions, 1);
    // An unrelated transaction in between.
    row_key(&replicator, 2, 99);
    let other = replicate(&replicator, 2, flags::TRX_START | flags::TRX_END);
    row_key(&replicator, 1, 2);
    replicator.append_data(1, b"fragment two");
    let second = replicate(&replicator, 1, 0);
    assert!(second.gtid.seqno > other.gtid.seqno);
    assert_eq!(
        second.depends_on, first.gtid.seqno,
        "a fragment waits for the previous fragment of its transaction, nothing else"
    );
    assert_eq!(replicator.status().totals.fragments_replicated, 2);
    assert_eq!(replicator.status().streaming_fragments, 2);

    // The server rolls it back: the rollback write-set comes back through the appliers
    // with the originator's transaction id, and the transaction is forgotten on release.
    replicator.rollback(1, b"").unwrap();
    wait_for("the rollback write-set applied", || {
        server
            .applied
            .lock()
            .unwrap()
            .contains(&(1, flags::ROLLBACK | flags::PA_UNSAFE))
    });
    replicator.release(1);
    assert_eq!(replicator.status().open_transactions, 0);
    assert_eq!(replicator.status().streaming_transactions, 0);
    assert_eq!(replicator.status().totals.streaming_rollbacks, 1);
    let after_rollback = replicator.last_committed().seqno;
    assert_eq!(after_rollback, second.gtid.seqno.next());

    // repl.max_ws_size: an oversized write-set is refused before it is ordered.
    replicator.set_max_write_set_bytes(1_000);
    row_key(&replicator, 3, 3);
    replicator.append_data(3, &[7u8; 2_000]);
    let refused = replicator.certify(3, 3, flags::TRX_START | flags::TRX_END);
    assert!(
        matches!(refused, CertifyOutcome::SizeExceeded { size, limit: 1_000 } if size > 2_000),
        "{refused:?}"
    );
    replicator.release(3);
    assert_eq!(replicator.status().totals.size_exceeded, 1);
    assert_eq!(replicator.last_committed().seqno, after_rollback);
    // A transaction within the limit still commits.
    row_key(&replicator, 4, 4);
    let small = replicate(&replicator, 4, flags::TRX_START | flags::TRX_END);
    assert_eq!(small.gtid.seqno, after_rollback.next());
    assert_eq!(replicator.last_committed().seqno, Seqno(small.gtid.seqno.0));

    replicator.disconnect();
    applier.join().unwrap().unwrap_err();
}
