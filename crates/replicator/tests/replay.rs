//! The replay of a brute-force aborted local transaction on one replicator over loopback,
//! with the server's calls in the order wsrep-lib makes them: a transaction aborted after
//! certification and before it asked for commit order never asks for it, and goes to
//! replay; the replay commits through commit order like an applier. That replay commits
//! whatever aborts the first execution saw, cannot itself be aborted, and, if the server
//! fails it, takes this node out of the cluster rather than leave its data behind the
//! others'.

// These tests play MariaDB's client and applier threads.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;

use base::Seqno;
mod common;
use common::{certify_row, commit_certified, settings, wait_for};
use replicator::{
    AbortOutcome, Application, ApplyAction, CertifyOutcome, LogLevel, RecvContext, Replicator,
    ReplicatorError, ViewInfo,
};

/// What the server's replay does besides committing.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum ReplayBehaviour {
    /// Applies and commits.
    #[default]
    Commits,
    /// An earlier seqno tries to abort it while it applies, then it commits.
    AbortedWhileApplying,
    /// Fails to apply, as a server whose rows differ does.
    Fails,
}

/// A server whose applies commit in order; what a replay sees is recorded.
#[derive(Default)]
struct Server {
    replicator: OnceLock<Weak<Replicator>>,
    behaviour: ReplayBehaviour,
    committed: Mutex<Vec<i64>>,
    abort_while_replaying: Mutex<Option<AbortOutcome>>,
    synced: Mutex<bool>,
    members: Mutex<usize>,
    errors: Mutex<Vec<String>>,
}

impl Server {
    fn replicator(&self) -> Arc<Replicator> {
        self.replicator.get().and_then(Weak::upgrade).unwrap()
    }
}

impl Application for Server {
    fn connected(&self, view: &ViewInfo) -> bool {
        *self.members.lock().unwrap() = view.members.len();
        true
    }
    fn view(&self, _: RecvContext, view: &ViewInfo) -> bool {
        *self.members.lock().unwrap() = view.members.len();
        true
    }
    fn apply(&self, ctx: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        let replicator = self.replicator();
        let seqno = action.meta.gtid.seqno;
        let replaying = ctx == REPLAYER;
        if replaying && self.behaviour == ReplayBehaviour::AbortedWhileApplying {
            let outcome = replicator.abort_certification(seqno.prev(), action.meta.trx_id);
            *self.abort_while_replaying.lock().unwrap() = Some(outcome);
        }
        if replaying && self.behaviour == ReplayBehaviour::Fails {
            return false;
        }
        if replicator.commit_order_enter(seqno).is_err() {
            return false;
        }
        self.committed.lock().unwrap().push(seqno.0);
        replicator.commit_order_leave(seqno, None).is_ok()
    }
    fn synced(&self) {
        *self.synced.lock().unwrap() = true;
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        Some(b"unused".to_vec())
    }
    fn sst_donate(&self, _: RecvContext, _: &[u8], _: base::Gtid, _: bool) -> bool {
        true
    }
    fn log(&self, level: LogLevel, message: &str) {
        if level == LogLevel::Error {
            self.errors.lock().unwrap().push(message.to_owned());
        }
    }
}

/// The context the client thread replays with (the applier has another).
const REPLAYER: RecvContext = RecvContext(7);

struct Node {
    server: Arc<Server>,
    replicator: Arc<Replicator>,
    applier: JoinHandle<Result<(), ReplicatorError>>,
}

/// A founding node with one applier, synced.
fn start(behaviour: ReplayBehaviour) -> Node {
    let server = Arc::new(Server {
        behaviour,
        ..Server::default()
    });
    let replicator = Arc::new(Replicator::new(server.clone(), settings("replay")));
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
    Node {
        server,
        replicator,
        applier,
    }
}

/// Certifies transaction `trx`, then has it aborted by an earlier seqno before it asks for
/// commit order (wsrep-lib then goes straight to replay). Returns its seqno.
fn certified_then_aborted(node: &Node, trx: u64) -> Seqno {
    let CertifyOutcome::Committable(meta) = certify_row(&node.replicator, trx) else {
        panic!("transaction {trx} did not pass certification");
    };
    let seqno = meta.gtid.seqno;
    assert_eq!(
        node.replicator.abort_certification(seqno.prev(), trx),
        AbortOutcome::Aborted
    );
    seqno
}

fn stop(node: Node) {
    node.replicator.shutdown();
    node.applier.join().unwrap().ok();
}

#[test]
fn a_replay_commits_although_the_first_execution_was_interrupted() {
    let node = start(ReplayBehaviour::Commits);
    let before = commit_certified(&node.replicator, 1, certify_row(&node.replicator, 1));
    let seqno = certified_then_aborted(&node, 2);
    node.replicator.replay(2, REPLAYER).unwrap();
    node.replicator.release(2);
    assert!(node.server.committed.lock().unwrap().contains(&seqno.0));
    assert_eq!(node.replicator.last_committed().seqno, seqno);
    // What follows commits as usual.
    let after = commit_certified(&node.replicator, 3, certify_row(&node.replicator, 3));
    assert_eq!((before.next(), seqno.next()), (seqno, after));
    assert!(node.server.errors.lock().unwrap().is_empty());
    stop(node);
}

#[test]
fn a_replaying_transaction_cannot_be_aborted_again() {
    let node = start(ReplayBehaviour::AbortedWhileApplying);
    let seqno = certified_then_aborted(&node, 1);
    node.replicator.replay(1, REPLAYER).unwrap();
    node.replicator.release(1);
    assert_eq!(
        *node.server.abort_while_replaying.lock().unwrap(),
        Some(AbortOutcome::NotAllowed(seqno))
    );
    assert_eq!(node.replicator.last_committed().seqno, seqno);
    stop(node);
}

#[test]
fn a_replay_the_server_fails_takes_the_node_out_of_the_cluster() {
    let node = start(ReplayBehaviour::Fails);
    let seqno = certified_then_aborted(&node, 1);
    let error = node.replicator.replay(1, REPLAYER).unwrap_err();
    assert!(matches!(error, ReplicatorError::Inconsistent(_)), "{error}");
    let errors = node.server.errors.lock().unwrap().clone();
    assert!(
        errors.iter().any(
            |e| e.starts_with("Inconsistency detected") && e.contains(&format!(":{}", seqno.0))
        ),
        "{errors:?}"
    );
    // The server rolls the replay back through commit order and releases it, as wsrep-lib
    // does; the node is out by then and its appliers return.
    node.replicator.commit_order_enter(seqno).ok();
    node.replicator.commit_order_leave(seqno, None).ok();
    node.replicator.release(1);
    wait_for("the node out of the cluster", || {
        *node.server.members.lock().unwrap() == 0
    });
    stop(node);
}
