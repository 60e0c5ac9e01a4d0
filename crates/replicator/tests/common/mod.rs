//! Helpers shared by the replicator's loopback tests.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::TcpListener;
use std::sync::Mutex;
use std::time::Duration;

use base::{KeyType, Seqno};
use group::GroupConfig;
use replicator::{CertifyOutcome, NodeAddresses, Replicator, Settings};

/// A port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Settings of a node named `name` on free loopback ports, with a fast group tick.
pub(crate) fn settings(name: &str) -> Settings {
    let mut group = GroupConfig::default();
    group.tick_interval_ns = 5_000_000;
    let ist_address = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let listen = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    Settings {
        node_name: name.into(),
        incoming_address: "127.0.0.1:3306".into(),
        addresses: NodeAddresses::loopback(listen, ist_address),
        group,
        seed: name.bytes().map(u64::from).sum(),
        causal_read_timeout: Duration::from_secs(5),
        state_dir: None,
        history: None,
        gcache: None,
        tls: None,
        thread_nice: transport::priority::PROVIDER_THREAD_NICE_DEFAULT,
    }
}

/// Moves the group layer of `settings` to a free loopback port (the old one may linger).
pub(crate) fn move_group_port(settings: &mut Settings) {
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    settings.addresses.group_listen = listen;
    settings.addresses.group_port = listen.port();
}

/// Polls `done` every 10 ms; panics after 10 s.
pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

/// What a fake server's applier does with a write-set: commits it in order and records its
/// seqno in `applied`.
pub(crate) fn commit_in_order(node: &Replicator, seqno: Seqno, applied: &Mutex<Vec<i64>>) {
    node.commit_order_enter(seqno).unwrap();
    applied.lock().unwrap().push(seqno.0);
    node.commit_order_leave(seqno, None).unwrap();
}

/// Certifies a one-row transaction on `node`. A node that is not primary at that instant
/// refuses, as MariaDB's clients see; like them, this tries again (for at most 2 s).
pub(crate) fn certify_row(node: &Replicator, trx: u64) -> CertifyOutcome {
    node.append_key(
        trx,
        vec![b"db".to_vec(), b"t".to_vec(), trx.to_le_bytes().to_vec()],
        KeyType::Update,
    );
    node.append_data(trx, b"row");
    let flags = writeset::flags::TRX_START | writeset::flags::TRX_END;
    let mut outcome = CertifyOutcome::NotOrdered;
    for _ in 0..100 {
        outcome = node.certify(1, trx, flags);
        if outcome != CertifyOutcome::NotOrdered {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    outcome
}

/// Commits a certified local transaction the way the server does; returns its seqno.
pub(crate) fn commit_certified(node: &Replicator, trx: u64, outcome: CertifyOutcome) -> Seqno {
    let CertifyOutcome::Committable(meta) = outcome else {
        panic!("transaction {trx}: {outcome:?}")
    };
    node.commit_order_enter(meta.gtid.seqno).unwrap();
    node.commit_order_leave(meta.gtid.seqno, None).unwrap();
    node.release(trx);
    meta.gtid.seqno
}
