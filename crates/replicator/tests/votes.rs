//! Consistency votes through three replicators on loopback: the node whose server fails to
//! apply a write-set that the others applied loses the vote, leaves the cluster and clears
//! its saved position (so that it comes back only by a full snapshot); a failure shared by
//! a majority wins, and the node that succeeded alone is the one that leaves.

// These tests play MariaDB's applier threads.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;

use base::{Seqno, Uuid};
mod common;
use common::{certify_row, commit_certified, settings, wait_for};
use replicator::{
    Application, ApplyAction, LogLevel, RecvContext, Replicator, ReplicatorError, ViewInfo,
};

/// The node waiting for its snapshot, for the donor to hand it over.
type Joiner = Arc<Mutex<Option<Weak<Replicator>>>>;

/// A server whose applier fails every write-set when `failing` is set, with this error. Its
/// "snapshot" is only the position, which the donor hands straight to the joiner.
#[derive(Default)]
struct Server {
    replicator: OnceLock<Weak<Replicator>>,
    joiner: Joiner,
    failing: Option<&'static [u8]>,
    synced: Mutex<bool>,
    last_view_members: Mutex<usize>,
    errors: Mutex<Vec<String>>,
}

impl Application for Server {
    fn connected(&self, view: &ViewInfo) -> bool {
        *self.last_view_members.lock().unwrap() = view.members.len();
        true
    }
    fn view(&self, _: RecvContext, view: &ViewInfo) -> bool {
        *self.last_view_members.lock().unwrap() = view.members.len();
        true
    }
    fn apply(&self, _: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        let replicator = self.replicator.get().and_then(Weak::upgrade).unwrap();
        let seqno = action.meta.gtid.seqno;
        replicator.commit_order_enter(seqno).unwrap();
        replicator.commit_order_leave(seqno, self.failing).is_ok()
    }
    fn synced(&self) {
        *self.synced.lock().unwrap() = true;
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        Some(b"position only".to_vec())
    }
    fn sst_donate(&self, _: RecvContext, _: &[u8], state: base::Gtid, _: bool) -> bool {
        let donor = self.replicator.get().and_then(Weak::upgrade).unwrap();
        let joiner = self.joiner.lock().unwrap().take().and_then(|j| j.upgrade());
        std::thread::spawn(move || {
            if let Some(joiner) = joiner {
                joiner.sst_received(state, 0).unwrap();
            }
            donor.sst_sent(state, 0);
        });
        true
    }
    fn log(&self, level: LogLevel, message: &str) {
        if level == LogLevel::Error {
            self.errors.lock().unwrap().push(message.to_owned());
        }
    }
}

struct Node {
    server: Arc<Server>,
    replicator: Arc<Replicator>,
    applier: JoinHandle<Result<(), ReplicatorError>>,
    state_dir: tempfile::TempDir,
}

/// Starts a node (the first bootstraps, the others join it) and waits until it is synced.
fn start(
    name: &str,
    failing: Option<&'static [u8]>,
    seed: Option<&str>,
    joiner: &Joiner,
) -> (Node, String) {
    let state_dir = tempfile::tempdir().unwrap();
    let mut settings = settings(name);
    settings.state_dir = Some(state_dir.path().to_owned());
    let address = format!("{}", settings.addresses.group_listen);
    let server = Arc::new(Server {
        failing,
        joiner: joiner.clone(),
        ..Server::default()
    });
    let replicator = Arc::new(Replicator::new(server.clone(), settings));
    server
        .replicator
        .set(Arc::downgrade(&replicator))
        .unwrap_or_else(|_| unreachable!());
    *joiner.lock().unwrap() = Some(Arc::downgrade(&replicator));
    let url = seed.map_or_else(|| "gcomm://".to_owned(), |s| format!("gcomm://{s}"));
    replicator
        .connect("trireme", &url, "", seed.is_none())
        .unwrap();
    let applier = {
        let replicator = replicator.clone();
        std::thread::spawn(move || replicator.recv(RecvContext(1)))
    };
    wait_for("synced", || *server.synced.lock().unwrap());
    let node = Node {
        server,
        replicator,
        applier,
        state_dir,
    };
    (node, address)
}

fn three_nodes(failing: [Option<&'static [u8]>; 3]) -> Vec<Node> {
    let joiner = Joiner::default();
    let (first, seed) = start("node1", failing[0], None, &joiner);
    let (second, _) = start("node2", failing[1], Some(&seed), &joiner);
    let (third, _) = start("node3", failing[2], Some(&seed), &joiner);
    let nodes = vec![first, second, third];
    wait_for("three members", || {
        nodes
            .iter()
            .all(|n| *n.server.last_view_members.lock().unwrap() == 3)
    });
    nodes
}

fn saved_history(state_dir: &tempfile::TempDir) -> String {
    let text = std::fs::read_to_string(state_dir.path().join("grastate.dat")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("uuid:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Writes one row on `node` and returns its seqno.
fn write_row(node: &Node, trx: u64) -> Seqno {
    let outcome = certify_row(&node.replicator, trx);
    commit_certified(&node.replicator, trx, outcome)
}

#[test]
fn the_node_that_failed_alone_leaves_and_must_come_back_by_snapshot() {
    let mut nodes = three_nodes([None, None, Some(b"Table 't1' doesn't exist, 1146")]);
    let seqno = write_row(&nodes[0], 1);
    let loser = nodes.pop().unwrap();
    wait_for("the loser out of the cluster", || {
        *loser.server.last_view_members.lock().unwrap() == 0
    });
    let Node {
        server,
        replicator,
        applier,
        state_dir,
    } = loser;
    let error = applier.join().unwrap().unwrap_err();
    assert!(matches!(error, ReplicatorError::Inconsistent(_)), "{error}");
    let errors = server.errors.lock().unwrap().clone();
    assert!(
        errors.iter().any(|e| e
            .starts_with("Inconsistency detected: Inconsistent by consensus on")
            && e.ends_with(&format!(":{}", seqno.0))),
        "{errors:?}"
    );
    assert_eq!(saved_history(&state_dir), Uuid::NIL.to_string());
    // The others go on, as two, and commit.
    for node in &nodes {
        wait_for("a view of two", || {
            *node.server.last_view_members.lock().unwrap() == 2
        });
        assert!(node.server.errors.lock().unwrap().is_empty());
        assert!(node.replicator.last_committed().seqno >= seqno);
    }
    write_row(&nodes[1], 2);
    replicator.shutdown();
    assert_eq!(
        saved_history(&state_dir),
        Uuid::NIL.to_string(),
        "a clean shutdown keeps the cleared position"
    );
    for node in nodes {
        node.replicator.shutdown();
        node.applier.join().unwrap().ok();
    }
}

#[test]
fn a_failure_shared_by_the_majority_wins_and_the_lone_success_leaves() {
    let error: &'static [u8] = b"Duplicate entry '3' for key 'PRIMARY', 1062";
    let mut nodes = three_nodes([None, Some(error), Some(error)]);
    // Written on node 1: it committed locally, answers with success, and loses.
    write_row(&nodes[0], 1);
    let loser = nodes.remove(0);
    wait_for("node 1 out of the cluster", || {
        *loser.server.last_view_members.lock().unwrap() == 0
    });
    assert!(loser
        .server
        .errors
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.starts_with("Vote 0 (success) on ")
            && e.ends_with(" is inconsistent with group. Leaving cluster.")));
    for node in &nodes {
        wait_for("a view of two", || {
            *node.server.last_view_members.lock().unwrap() == 2
        });
        assert!(node.server.errors.lock().unwrap().is_empty());
        assert_eq!(saved_history(&node.state_dir).len(), 36);
        assert_ne!(saved_history(&node.state_dir), Uuid::NIL.to_string());
    }
    loser.replicator.shutdown();
    for node in nodes {
        node.replicator.shutdown();
        node.applier.join().unwrap().ok();
    }
}
