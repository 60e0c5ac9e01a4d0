//! `pause` as FLUSH TABLES WITH READ LOCK and an rsync donor need it: it returns only once
//! nothing is applying, with everything up to its point committed, and until `resume`
//! nothing after the point runs: not an applier, not a local commit. Two nodes on loopback;
//! the second node's fake server can hold an applier in the middle of `apply`.

// These tests play MariaDB's applier and client threads.
#![allow(clippy::disallowed_methods)]

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use base::{Gtid, Seqno};
mod common;
use common::{certify_row, commit_certified, commit_in_order, settings, wait_for};
use replicator::{Application, ApplyAction, LogLevel, RecvContext, Replicator, ViewInfo};

/// How long a call must stay blocked for the test to call it held.
const HELD_FOR: Duration = Duration::from_millis(400);

/// A fake server whose applier can be held inside `apply` (after the row changes, before
/// commit order), and whose "SST" hands the donor's position straight to the joiner.
#[derive(Default)]
struct GatedServer {
    applied: Mutex<Vec<i64>>,
    synced: Mutex<bool>,
    /// While true, the next `apply` stops inside until it is set false again.
    hold: Mutex<bool>,
    /// Seqnos currently stopped inside `apply`.
    inside: Mutex<Vec<i64>>,
    changed: Condvar,
    me: OnceLock<Arc<Replicator>>,
    peer: OnceLock<Arc<Replicator>>,
    /// What the provider logged.
    logged: Mutex<Vec<String>>,
}

impl GatedServer {
    fn set_hold(&self, hold: bool) {
        *self.hold.lock().unwrap() = hold;
        self.changed.notify_all();
    }

    fn applied(&self) -> Vec<i64> {
        self.applied.lock().unwrap().clone()
    }
}

impl Application for GatedServer {
    fn connected(&self, _: &ViewInfo) -> bool {
        true
    }
    fn view(&self, _: RecvContext, _: &ViewInfo) -> bool {
        true
    }
    fn apply(&self, _: RecvContext, action: &ApplyAction<'_>, _: &mut bool) -> bool {
        let seqno = action.meta.gtid.seqno;
        let mut hold = self.hold.lock().unwrap();
        if *hold {
            self.inside.lock().unwrap().push(seqno.0);
            self.changed.notify_all();
            while *hold {
                hold = self.changed.wait(hold).unwrap();
            }
            self.inside.lock().unwrap().retain(|s| *s != seqno.0);
        }
        drop(hold);
        commit_in_order(self.me.get().unwrap(), seqno, &self.applied);
        true
    }
    fn synced(&self) {
        *self.synced.lock().unwrap() = true;
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        Some(b"fake\0address\0".to_vec())
    }
    fn sst_donate(&self, _: RecvContext, _: &[u8], state: Gtid, _: bool) -> bool {
        let joiner = self.peer.get().unwrap().clone();
        let donor = self.me.get().unwrap().clone();
        thread::spawn(move || {
            joiner.sst_received(state, 0).unwrap();
            donor.sst_sent(state, 0);
        });
        true
    }
    fn log(&self, _: LogLevel, message: &str) {
        self.logged.lock().unwrap().push(message.to_string());
    }
}

/// Two synced nodes: node 1 founded the cluster, node 2 joined it. Returns the servers, the
/// replicators and their applier threads.
struct Pair {
    apps: [Arc<GatedServer>; 2],
    nodes: [Arc<Replicator>; 2],
    appliers: Vec<thread::JoinHandle<Result<(), replicator::ReplicatorError>>>,
}

impl Pair {
    fn start() -> Pair {
        let apps = [
            Arc::new(GatedServer::default()),
            Arc::new(GatedServer::default()),
        ];
        let first = settings("node1");
        let seed = first.addresses.group_listen.to_string();
        let nodes = [
            Arc::new(Replicator::new(apps[0].clone(), first)),
            Arc::new(Replicator::new(apps[1].clone(), settings("node2"))),
        ];
        for (i, app) in apps.iter().enumerate() {
            let _ = app.me.set(nodes[i].clone());
            let _ = app.peer.set(nodes[1 - i].clone());
        }
        let mut pair = Pair {
            apps,
            nodes,
            appliers: Vec::new(),
        };
        pair.nodes[0]
            .connect("trireme", "gcomm://", "", true)
            .unwrap();
        pair.spawn_appliers(0);
        wait_for("node 1 to sync", || *pair.apps[0].synced.lock().unwrap());
        pair.nodes[1]
            .connect("trireme", &format!("gcomm://{seed}"), "", false)
            .unwrap();
        pair.spawn_appliers(1);
        wait_for("node 2 to sync", || *pair.apps[1].synced.lock().unwrap());
        pair
    }

    fn spawn_appliers(&mut self, node: usize) {
        for i in 0..2 {
            let replicator = self.nodes[node].clone();
            self.appliers.push(thread::spawn(move || {
                replicator.recv(RecvContext(node * 2 + i))
            }));
        }
    }

    fn shutdown(self) {
        for app in &self.apps {
            app.set_hold(false);
        }
        for node in self.nodes.iter().rev() {
            node.shutdown();
        }
        for applier in self.appliers {
            let _ = applier.join();
        }
    }
}

/// A `pause` on node 2 that is still waiting, and what it waits for.
struct PendingPause {
    /// The seqno node 2's applier is held inside `apply` of.
    held: Seqno,
    result: mpsc::Receiver<Result<Seqno, replicator::ReplicatorError>>,
    pauser: thread::JoinHandle<()>,
}

/// Holds node 2's applier inside `apply` of a write-set from node 1, calls `pause` on node 2
/// and checks that it has not returned [`HELD_FOR`] later.
fn pause_while_applying(pair: &Pair) -> PendingPause {
    let (node1, node2, app2) = (&pair.nodes[0], pair.nodes[1].clone(), &pair.apps[1]);
    app2.set_hold(true);
    let held = commit_certified(node1, 1, certify_row(node1, 1));
    wait_for("node 2's applier to be inside apply", || {
        app2.inside.lock().unwrap().contains(&held.0)
    });
    let (paused_tx, result) = mpsc::channel();
    let pauser = thread::spawn(move || paused_tx.send(node2.pause()).unwrap());
    assert!(
        result.recv_timeout(HELD_FOR).is_err(),
        "pause returned while an applier was inside apply of {held}"
    );
    PendingPause {
        held,
        result,
        pauser,
    }
}

#[test]
fn pause_waits_for_an_applier_mid_apply_then_holds_appliers_and_local_commits() {
    let pair = Pair::start();
    let (node1, node2) = (pair.nodes[0].clone(), pair.nodes[1].clone());
    let app2 = pair.apps[1].clone();
    let PendingPause {
        held,
        result: paused_rx,
        pauser,
    } = pause_while_applying(&pair);

    // Released, the applier commits and pause returns exactly its seqno.
    app2.set_hold(false);
    let point = paused_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("pause returns once the applier committed")
        .expect("pause succeeds");
    pauser.join().unwrap();
    assert_eq!(point, held, "paused at the seqno that was being applied");
    assert_eq!(node2.last_committed().seqno, held);

    // While paused: node 1 commits on, node 2 applies nothing after the point...
    let after = commit_certified(&node1, 2, certify_row(&node1, 2));
    assert!(after > point);
    // ...and a local transaction on node 2 is ordered but does not get to commit.
    let (local_tx, local_rx) = mpsc::channel();
    let local = {
        let node2 = node2.clone();
        thread::spawn(move || local_tx.send(certify_row(&node2, 3)).unwrap())
    };
    let early = local_rx.recv_timeout(HELD_FOR);
    assert!(early.is_err(), "a local commit passed the pause: {early:?}");
    assert!(
        !app2.applied().contains(&after.0),
        "node 2 applied {after} while paused at {point}"
    );
    assert_eq!(
        node2.last_committed().seqno,
        point,
        "nothing committed while paused"
    );

    // After resume both go through, and the nodes agree; the log says how long it held.
    node2.resume();
    let resumed = format!("paused at {point}: commits after it waited that long");
    let said = app2.logged.lock().unwrap().clone();
    let line = said.iter().find(|l| l.ends_with(&resumed));
    let line = line.unwrap_or_else(|| panic!("no resume line in {said:?}"));
    assert!(line.starts_with("resumed after "), "{line}");
    let outcome = local_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the local transaction goes on after resume");
    local.join().unwrap();
    let mine = commit_certified(&node2, 3, outcome);
    assert!(mine > after, "ordered after node 1's write-set");
    wait_for("node 2 to apply what was held", || {
        app2.applied().contains(&after.0)
    });
    wait_for("both nodes to commit everything", || {
        node1.last_committed().seqno == mine && node2.last_committed().seqno == mine
    });
    // Each counts its own transactions as local commits, not those it applied.
    assert_eq!(node1.status().totals.local_commits, 2);
    assert_eq!(node2.status().totals.local_commits, 1);
    // Every task node 2 queued woke an applier, the ones held by the pause included.
    assert_eq!(node2.tasks_found_late(), 0);
    pair.shutdown();
}

#[test]
fn pause_fails_instead_of_pretending_when_the_node_closes() {
    let pair = Pair::start();
    let node2 = pair.nodes[1].clone();
    let app2 = pair.apps[1].clone();
    let PendingPause {
        result: paused_rx,
        pauser,
        ..
    } = pause_while_applying(&pair);
    // The node leaves the group while pause still waits: pause reports failure (the
    // server sees -1), it does not return a point it never reached.
    let closer = {
        let node2 = node2.clone();
        thread::spawn(move || node2.disconnect())
    };
    let result = paused_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("pause returns when the node closes");
    assert!(result.is_err(), "pause claimed a point: {result:?}");
    app2.set_hold(false);
    closer.join().unwrap();
    pauser.join().unwrap();
    pair.shutdown();
}
