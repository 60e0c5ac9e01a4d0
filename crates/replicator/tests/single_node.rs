//! A replicator that founds a cluster on loopback, driven by a fake application: the
//! callback order MariaDB expects, local commits through certification and commit order,
//! TOI, causal waits and a clean disconnect; and a joiner getting state from a donor.

// These tests play MariaDB's applier and SST threads.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base::grastate::FILE_NAME;
use base::{Gtid, KeyType, NodeState, Seqno};
mod common;
use common::{certify_row, commit_certified, commit_in_order, move_group_port, settings, wait_for};
use replicator::{
    Application, ApplyAction, CertifyOutcome, LogLevel, RecvContext, Replicator, ReplicatorError,
    SavedState, Settings, ViewInfo,
};

#[derive(Default)]
struct FakeServer {
    calls: Mutex<Vec<String>>,
}

/// The node's `grastate.dat` in `dir`, if there is one.
fn saved_state(dir: &std::path::Path) -> Option<SavedState> {
    let text = std::fs::read_to_string(dir.join(FILE_NAME)).ok()?;
    Some(SavedState::parse(&text).expect("grastate.dat parses"))
}

/// The calls a fake server received, without the log lines.
fn without_logs(calls: &Mutex<Vec<String>>) -> Vec<String> {
    let calls = calls.lock().unwrap();
    calls
        .iter()
        .filter(|c| !c.starts_with("log "))
        .cloned()
        .collect()
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
    fn sst_request(&self) -> Option<Vec<u8>> {
        Some(b"rsync\x00host:4444/rsync_sst\x00".to_vec())
    }
    fn sst_donate(&self, _: RecvContext, _: &[u8], _: base::Gtid, _: bool) -> bool {
        true
    }
    fn log(&self, _: LogLevel, message: &str) {
        self.calls.lock().unwrap().push(format!("log {message}"));
    }
}

#[test]
fn a_founding_node_commits_local_transactions_in_order() {
    let server = Arc::new(FakeServer::default());
    let state_dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        state_dir: Some(state_dir.path().to_owned()),
        ..settings("node1")
    };
    let replicator = Arc::new(Replicator::new(server.clone(), settings.clone()));
    replicator.connect("trireme", "gcomm://", "", true).unwrap();
    assert!(
        replicator.connect("trireme", "gcomm://", "", true).is_err(),
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
    let calls = without_logs(&server.calls);
    assert_eq!(
        calls[..3],
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
        replicator
            .commit_order_leave(meta.gtid.seqno, None)
            .unwrap();
        replicator.release(trx);
        seqnos.push(meta.gtid.seqno.0);
    }
    assert_eq!(
        seqnos,
        (2..22).collect::<Vec<_>>(),
        "consecutive seqnos after the view at 1"
    );
    assert_eq!(replicator.last_committed().seqno, Seqno(21));
    // Node states take Galera's steps through the transition table, each logged as Galera
    // logs it; desync and resync go through DONOR/DESYNCED and JOINED.
    replicator.desync();
    assert_eq!(replicator.status().state, NodeState::Donor);
    replicator.resync();
    assert_eq!(
        replicator.status().state,
        NodeState::Synced,
        "nothing queued"
    );
    let shifts: Vec<String> = server
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter_map(|c| c.strip_prefix("log Shifting "))
        .map(|s| s.split(" (TO").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        shifts,
        [
            "CLOSED -> OPEN",
            "OPEN -> PRIMARY",
            "PRIMARY -> JOINED",
            "JOINED -> SYNCED",
            "SYNCED -> DONOR/DESYNCED",
            "DONOR/DESYNCED -> JOINED",
            "JOINED -> SYNCED"
        ]
    );
    // TOI: a full barrier that holds commit order until it ends.
    let toi =
        replicator.to_execute_start(7, vec![vec![b"db".to_vec(), b"t".to_vec()]], b"ALTER", 0x41);
    let CertifyOutcome::Committable(meta) = toi else {
        panic!("{toi:?}")
    };
    assert_eq!(meta.depends_on, Seqno(21));
    replicator.to_execute_end(7, None).unwrap();
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
    let status = replicator.status();
    assert_eq!(status.state.comment(), "Synced");
    assert_eq!(status.totals.causal_reads, 1, "the sync_wait above");
    assert_eq!(
        status.totals.repl_keys, 21,
        "20 row keys and the TOI's table key"
    );
    assert_eq!(
        status.totals.repl_data_bytes, 65,
        "20 rows of 3 bytes, ALTER"
    );
    // Independent keys and last_seen right behind: every write-set could apply in parallel
    // with everything since the view.
    let distance = status.apply.deps_distance;
    assert!(distance > 1.0, "cert_deps_distance {distance}");
    assert_eq!(
        (status.send_queue.max, status.send_queue.now),
        (0, 0),
        "each write-set was sent before the next came: nothing held, an empty send queue"
    );
    let latency = &status.replication_latency;
    assert!(latency.ends_with("/21"), "21 write-sets timed: {latency}");
    replicator.reset_stats();
    let status = replicator.status();
    assert_eq!(status.apply.deps_distance, 0.0, "reset");
    assert_eq!(status.replication_latency, "0/0/0/0/0", "reset");
    assert_eq!(
        status.totals.repl_keys, 21,
        "counters are not averages: kept"
    );
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

    // The last member left cleanly: its saved state is complete and safe to bootstrap.
    let saved = saved_state(state_dir.path()).expect("grastate.dat");
    assert_eq!(saved.position.seqno, Seqno(22));
    assert!(saved.safe_to_bootstrap);
    let history = saved.position.cluster;

    // Founding again from that directory continues the history: same UUID, next seqno.
    let server = Arc::new(FakeServer::default());
    let mut again = settings.clone();
    move_group_port(&mut again);
    let replicator = Arc::new(Replicator::new(server.clone(), again));
    replicator.connect("trireme", "gcomm://", "", true).unwrap();
    let running = saved_state(state_dir.path()).expect("grastate.dat");
    assert_eq!(running.position.seqno, Seqno::UNDEFINED, "-1 while running");
    assert!(!running.safe_to_bootstrap);
    let applier = {
        let replicator = replicator.clone();
        std::thread::spawn(move || replicator.recv(RecvContext(1)))
    };
    wait_for("synced again", || {
        server.calls.lock().unwrap().iter().any(|c| c == "synced")
    });
    let position = replicator.last_committed();
    assert_eq!(position.cluster, history, "the same history");
    assert_eq!(
        position.seqno,
        Seqno(23),
        "the founding view follows seqno 22"
    );
    replicator.shutdown();
    let _ = applier.join();

    // A node that was not the last to leave may not found a cluster.
    let not_last = SavedState {
        position: Gtid {
            cluster: history,
            seqno: Seqno(23),
        },
        safe_to_bootstrap: false,
    };
    std::fs::write(state_dir.path().join(FILE_NAME), not_last.render()).unwrap();
    let mut refused = settings;
    move_group_port(&mut refused);
    let replicator = Replicator::new(Arc::new(FakeServer::default()), refused);
    let error = replicator
        .connect("trireme", "gcomm://", "", true)
        .unwrap_err();
    assert!(
        matches!(error, ReplicatorError::UnsafeBootstrap(_)),
        "{error}"
    );
    assert!(
        error.to_string().contains("safe_to_bootstrap: 1"),
        "{error}"
    );
    // Joining is always allowed.
    replicator.shutdown();
}

/// A fake server whose "SST" hands the donor's position straight to the joiner.
#[derive(Default)]
struct TransferServer {
    name: &'static str,
    calls: Mutex<Vec<String>>,
    applied: Mutex<Vec<i64>>,
    peer: std::sync::OnceLock<Arc<Replicator>>,
    me: std::sync::OnceLock<Arc<Replicator>>,
}

impl Application for TransferServer {
    fn connected(&self, view: &ViewInfo) -> bool {
        self.calls
            .lock()
            .unwrap()
            .push(format!("connected {}", view.state_id.seqno.0));
        true
    }
    fn view(&self, _: RecvContext, view: &ViewInfo) -> bool {
        self.calls
            .lock()
            .unwrap()
            .push(format!("view {}", view.members.len()));
        true
    }
    fn apply(&self, _: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        let me = self.me.get().unwrap();
        commit_in_order(me, action.meta.gtid.seqno, &self.applied);
        true
    }
    fn synced(&self) {
        self.calls.lock().unwrap().push("synced".into());
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        self.calls.lock().unwrap().push("sst_request".into());
        Some(b"fake\0address\0".to_vec())
    }
    fn sst_donate(&self, _: RecvContext, request: &[u8], state: base::Gtid, bypass: bool) -> bool {
        assert_eq!(
            request, b"fake\0address\0",
            "the request reaches the donor byte for byte"
        );
        assert!(!bypass);
        self.calls
            .lock()
            .unwrap()
            .push(format!("donate {}", state.seqno.0));
        let joiner = self.peer.get().unwrap().clone();
        let donor = self.me.get().unwrap().clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            joiner.sst_received(state, 0).unwrap();
            donor.sst_sent(state, 0);
        });
        true
    }
    fn log(&self, _: LogLevel, message: &str) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("log {} {message}", self.name));
    }
}

#[test]
fn a_joiner_gets_state_from_a_donor_then_applies_what_followed() {
    let donor_app = Arc::new(TransferServer {
        name: "node1",
        ..TransferServer::default()
    });
    let joiner_app = Arc::new(TransferServer {
        name: "node2",
        ..TransferServer::default()
    });
    let donor_settings = settings("node1");
    let seed_address = donor_settings.addresses.group_listen.to_string();
    let donor = Arc::new(Replicator::new(donor_app.clone(), donor_settings));
    let joiner = Arc::new(Replicator::new(joiner_app.clone(), settings("node2")));
    for (app, me, peer) in [
        (&donor_app, &donor, &joiner),
        (&joiner_app, &joiner, &donor),
    ] {
        let _ = app.me.set(me.clone());
        let _ = app.peer.set(peer.clone());
    }
    donor.connect("trireme", "gcomm://", "", true).unwrap();
    let spawn_appliers = |replicator: &Arc<Replicator>, first: usize| -> Vec<_> {
        (first..first + 2)
            .map(|i| {
                let replicator = replicator.clone();
                std::thread::spawn(move || replicator.recv(RecvContext(i)))
            })
            .collect()
    };
    // As in MariaDB, appliers start once the node is connected.
    let mut appliers = spawn_appliers(&donor, 0);
    wait_for("the founder to sync", || {
        donor_app
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c == "synced")
    });
    // Some history before the joiner arrives.
    let commit = |replicator: &Replicator, trx: u64| {
        commit_certified(replicator, trx, certify_row(replicator, trx))
    };
    for trx in 1..=10 {
        commit(&donor, trx);
    }
    joiner
        .connect(
            "trireme",
            &format!("gcomm://{seed_address}"),
            "node1",
            false,
        )
        .unwrap();
    appliers.extend(spawn_appliers(&joiner, 2));
    let synced = (0..1_000).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        joiner_app
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c == "synced")
    });
    assert!(
        synced,
        "the joiner did not sync: joiner {:?} donor {:?}",
        joiner_app.calls.lock().unwrap(),
        donor_app.calls.lock().unwrap()
    );
    let calls = without_logs(&joiner_app.calls);
    assert!(calls[0].starts_with("connected"), "{calls:?}");
    assert_eq!(calls[1], "sst_request", "{calls:?}");
    assert!(donor_app
        .calls
        .lock()
        .unwrap()
        .iter()
        .any(|c| c.starts_with("donate")));
    // Writes on both nodes now reach the other one.
    let on_donor = commit(&donor, 100);
    let on_joiner = commit(&joiner, 200);
    wait_for("both nodes to apply each other's write", || {
        joiner_app.applied.lock().unwrap().contains(&on_donor.0)
            && donor_app.applied.lock().unwrap().contains(&on_joiner.0)
    });
    assert_eq!(donor.last_committed(), joiner.last_committed());
    joiner.shutdown();
    donor.shutdown();
    for applier in appliers {
        let _ = applier.join();
    }
}

/// A node that founds a cluster of its own, synced, with one applier thread running.
fn synced_founding_node() -> (
    Arc<Replicator>,
    std::thread::JoinHandle<Result<(), ReplicatorError>>,
) {
    let server = Arc::new(FakeServer::default());
    let replicator = Arc::new(Replicator::new(server.clone(), settings("node1")));
    replicator.connect("trireme", "gcomm://", "", true).unwrap();
    let applier = {
        let replicator = replicator.clone();
        std::thread::spawn(move || replicator.recv(RecvContext(1)))
    };
    wait_for("synced", || {
        server.calls.lock().unwrap().iter().any(|c| c == "synced")
    });
    (replicator, applier)
}

#[test]
fn concurrent_local_transactions_are_each_woken_by_their_own_certification() {
    const CLIENTS: u64 = 16;
    const EACH: u64 = 25;
    let (replicator, applier) = synced_founding_node();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let replicator = replicator.clone();
            std::thread::spawn(move || {
                (0..EACH)
                    .map(|n| {
                        let trx = 1 + client * EACH + n;
                        let outcome = certify_row(&replicator, trx);
                        commit_certified(&replicator, trx, outcome).0
                    })
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut seqnos: Vec<i64> = clients
        .into_iter()
        .flat_map(|client| client.join().unwrap())
        .collect();
    seqnos.sort_unstable();
    let count = (CLIENTS * EACH) as i64;
    assert_eq!(
        seqnos,
        (2..2 + count).collect::<Vec<_>>(),
        "every one ordered once"
    );
    // Each waiter sleeps on its own condvar; had its certification not woken it, it would
    // have found its verdict only on the periodic recheck.
    assert_eq!(replicator.verdicts_found_late(), 0);
    replicator.shutdown();
    let _ = applier.join();
}

#[test]
fn a_node_whose_clients_write_everything_still_moves_the_commit_cut() {
    const LOAD: u64 = 300;
    // Well under the load: what is left once the cut has passed it.
    const PURGED_BELOW: u64 = 20;
    const _: () = assert!(PURGED_BELOW < LOAD);
    let (replicator, applier) = synced_founding_node();
    // One key per transaction, all of them local: the applier has nothing to apply, so
    // only the node's own commits can tell the group how far it has committed.
    for trx in 1..=LOAD {
        let outcome = certify_row(&replicator, trx);
        commit_certified(&replicator, trx, outcome);
    }
    // Had the cut stayed where the node last applied something (its first view), the index
    // would keep all LOAD keys and more. It is purged as a write-set is certified after the
    // cut reached the group, which takes a few ticks to be reported and ordered.
    let mut trx = LOAD;
    wait_for("the certification index to be purged", || {
        trx += 1;
        let outcome = certify_row(&replicator, trx);
        commit_certified(&replicator, trx, outcome);
        replicator.status().apply.cert_index_size < PURGED_BELOW
    });
    replicator.shutdown();
    let _ = applier.join();
}
