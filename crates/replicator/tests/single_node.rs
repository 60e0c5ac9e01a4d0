//! A replicator that founds a cluster on loopback, driven by a fake application: the
//! callback order MariaDB expects, local commits through certification and commit order,
//! TOI, causal waits and a clean disconnect.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base::{KeyType, Seqno};
use group::GroupConfig;
use replicator::{
    Application, ApplyAction, CertifyOutcome, LogLevel, RecvContext, Replicator, Settings, ViewInfo,
};

#[derive(Default)]
struct FakeServer {
    calls: Mutex<Vec<String>>,
}

impl Application for FakeServer {
    fn connected(&self, view: &ViewInfo) -> bool {
        self.calls
            .lock()
            .unwrap()
            .push(format!("connected {}", view.state_id.seqno.0));
        true
    }
    fn view(&self, _: RecvContext, view: &ViewInfo) -> bool {
        let kind = if view.primary {
            "primary"
        } else {
            "non-primary"
        };
        self.calls
            .lock()
            .unwrap()
            .push(format!("view {kind} {}", view.members.len()));
        true
    }
    fn apply(&self, _: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        self.calls
            .lock()
            .unwrap()
            .push(format!("apply {}", action.meta.gtid.seqno.0));
        true
    }
    fn synced(&self) {
        self.calls.lock().unwrap().push("synced".into());
    }
    fn log(&self, _: LogLevel, message: &str) {
        self.calls.lock().unwrap().push(format!("log {message}"));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_founding_node_commits_local_transactions_in_order() {
    let server = Arc::new(FakeServer::default());
    let mut group = GroupConfig::default();
    group.tick_interval_ns = 5_000_000;
    let settings = Settings {
        node_name: "node1".into(),
        incoming_address: "127.0.0.1:3306".into(),
        listen: format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        group,
        seed: 1,
        causal_read_timeout: Duration::from_secs(5),
    };
    let replicator = Arc::new(Replicator::new(server.clone(), settings));
    replicator.connect("gcomm://", true).unwrap();
    assert!(
        replicator.connect("gcomm://", true).is_err(),
        "a second connect is refused"
    );
    let applier = {
        let replicator = replicator.clone();
        std::thread::spawn(move || replicator.recv(RecvContext(1)))
    };
    // The bootstrap sequence: connected, the primary view, synced.
    for _ in 0..400 {
        if server.calls.lock().unwrap().iter().any(|c| c == "synced") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        server.calls.lock().unwrap()[..3],
        [
            "connected 1".to_owned(),
            "view primary 1".to_owned(),
            "synced".to_owned()
        ]
    );
    let mut seqnos = Vec::new();
    for trx in 1..=20u64 {
        replicator.append_key(
            trx,
            vec![b"db".to_vec(), b"t".to_vec(), trx.to_le_bytes().to_vec()],
            KeyType::Exclusive,
        );
        replicator.append_data(trx, b"row");
        let outcome = replicator.certify(
            7,
            trx,
            writeset::flags::TRX_START | writeset::flags::TRX_END,
        );
        let CertifyOutcome::Committable(meta) = outcome else {
            panic!("{outcome:?}")
        };
        replicator.commit_order_enter(meta.gtid.seqno).unwrap();
        replicator.commit_order_leave(meta.gtid.seqno);
        replicator.release(trx);
        seqnos.push(meta.gtid.seqno.0);
    }
    assert_eq!(
        seqnos,
        (2..22).collect::<Vec<_>>(),
        "consecutive seqnos after the view at 1"
    );
    assert_eq!(replicator.last_committed().seqno, Seqno(21));
    // TOI: a full barrier that holds commit order until it ends.
    let toi =
        replicator.to_execute_start(7, vec![vec![b"db".to_vec(), b"t".to_vec()]], b"ALTER", 0x41);
    let CertifyOutcome::Committable(meta) = toi else {
        panic!("{toi:?}")
    };
    assert_eq!(meta.depends_on, Seqno(21));
    replicator.to_execute_end(7);
    assert_eq!(replicator.sync_wait(None, None).unwrap().seqno, Seqno(22));
    // An unknown victim is "aborted" (wsrep's rule), a transaction with nothing is not ordered.
    assert_eq!(
        replicator.abort_certification(Seqno(5), 999),
        replicator::AbortOutcome::Aborted
    );
    assert_eq!(
        replicator.certify(7, 12345, 0x41),
        CertifyOutcome::NotOrdered
    );
    let stats = replicator.stats();
    assert!(stats
        .iter()
        .any(|(name, value)| *name == "local_state_comment" && value == "Synced"));
    replicator.shutdown();
    assert!(
        applier.join().unwrap().is_err(),
        "recv returns after disconnect"
    );
    assert!(
        server
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c == "view non-primary 0"),
        "final view"
    );
}
