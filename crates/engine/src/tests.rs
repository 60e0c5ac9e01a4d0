//! The engine's decisions, one case each, driven as a node would drive it: views and
//! deliveries in, tasks and effects out.

use base::grastate::SavedState;
use base::{Gtid, Nanos, NodeState, Seqno, Uuid};
use group::{Delivery, NoDonor, StateRequest, View, ViewMember};

use crate::ist::Outcome;
use crate::{
    ActionCache, ConnectionStart, Effect, EngineConfig, MemoryStateStore, NextTask, NodeEngine,
    StateStore, Task,
};

const CLUSTER: Uuid = Uuid([7; 16]);

fn uuid(n: u8) -> Uuid {
    Uuid([n; 16])
}

fn member(n: u8) -> ViewMember {
    ViewMember {
        uuid: uuid(n),
        name: format!("node{n}"),
        address: format!("a{n}"),
        incoming: String::new(),
        state: NodeState::Synced,
    }
}

/// A view of members `of` in which this node is `own` (if listed), at `seqno`.
fn view(seqno: i64, of: &[u8], own: u8, primary: bool, ordered: bool, membership: u64) -> View {
    View {
        cluster: CLUSTER,
        seqno: Seqno(seqno),
        view_id: 1,
        primary,
        ordered,
        members: of.iter().map(|n| member(*n)).collect(),
        own_index: of.iter().position(|n| *n == own),
        membership,
        founding: false,
    }
}

/// An engine of node 1, connected, that founds the cluster (`bootstrap`) or joins it.
fn connected(bootstrap: bool, store: &MemoryStateStore) -> NodeEngine {
    let config = EngineConfig {
        node_name: "node1".into(),
        incoming_address: String::new(),
        strict_transitions: true,
    };
    let mut engine = NodeEngine::new(config, Box::new(store.clone()), Nanos(0));
    engine.begin_connection("").expect("not connected yet");
    engine.group_started(uuid(1));
    engine.start_connection(ConnectionStart {
        bootstrap,
        start_position: None,
        ist_address: "node1/ist".into(),
    });
    engine
}

fn deliver(engine: &mut NodeEngine, delivery: Delivery) {
    engine.on_delivery(Nanos(1), delivery, &mut ActionCache::disabled());
}

/// Takes every task the appliers may run now, in order (each counted done at once).
fn tasks(engine: &mut NodeEngine) -> Vec<Task> {
    let mut taken = Vec::new();
    while let NextTask::Run(task) = engine.next_task() {
        engine.task_done(task.is_serial());
        taken.push(task);
    }
    taken
}

fn requests(effects: &[Effect]) -> Vec<StateRequest> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::RequestState(request) => Some(request.clone()),
            _ => None,
        })
        .collect()
}

/// Node `joiner`'s request for a snapshot as the order delivers it, with the donor the
/// group chose (node 1 is this node) at commit cut `safe_seqno`.
fn ordered_request(joiner: u8, donor: Result<u64, NoDonor>, safe_seqno: Seqno) -> Delivery {
    let donor_is_me = matches!(donor, Ok(1));
    Delivery::StateRequest {
        joiner: uuid(joiner),
        request: StateRequest {
            joiner: u64::from(joiner),
            request_id: 1,
            donor_names: String::new(),
            sst_request: b"sst".to_vec(),
            ist_from: Seqno::UNDEFINED,
            ist_address: format!("node{joiner}/ist"),
        },
        donor,
        donor_uuid: donor_is_me.then(|| uuid(1)),
        donor_is_me,
        safe_seqno,
    }
}

/// The transfer the engine asked its node to send, if any (the other effects are dropped).
fn transfer_sent(engine: &mut NodeEngine) -> Option<crate::OutgoingTransfer> {
    engine.take_effects().into_iter().find_map(|e| match e {
        Effect::SendTransfer(transfer) => Some(transfer),
        _ => None,
    })
}

/// A joiner at its first primary view, its request sent: what a node is while its state
/// transfer runs.
fn waiting_joiner(store: &MemoryStateStore) -> NodeEngine {
    let mut engine = connected(false, store);
    deliver(
        &mut engine,
        Delivery::View(view(5, &[1, 2], 1, true, true, 10)),
    );
    assert!(matches!(
        tasks(&mut engine)[..],
        [Task::Connected(_), Task::RequestState]
    ));
    assert!(engine.send_state_request(Some(b"sst".to_vec())));
    engine.take_effects();
    engine
}

#[test]
fn a_founder_holds_the_state_at_once_and_may_bootstrap_again() {
    let store = MemoryStateStore::default();
    let mut engine = connected(true, &store);
    deliver(
        &mut engine,
        Delivery::View(view(1, &[1], 1, true, true, 10)),
    );
    assert_eq!(engine.state(), NodeState::Synced);
    let effects = engine.take_effects();
    assert!(effects.contains(&Effect::ResetMonitors(Seqno(0))));
    let taken = tasks(&mut engine);
    assert!(matches!(
        taken[..],
        [
            Task::Connected(_),
            Task::View { ordered: true, .. },
            Task::Synced
        ]
    ));
    let saved = store.load().unwrap().expect("saved");
    assert_eq!(
        saved,
        SavedState {
            position: Gtid {
                cluster: CLUSTER,
                seqno: Seqno::UNDEFINED
            },
            safe_to_bootstrap: true
        }
    );
}

#[test]
fn a_joiner_whose_member_founded_again_after_a_crash_holds_the_state_at_once() {
    let store = MemoryStateStore::default();
    let mut engine = connected(false, &store);
    let founding = View {
        founding: true,
        ..view(41, &[1], 1, true, true, 10)
    };
    deliver(&mut engine, Delivery::View(founding));
    assert_eq!(engine.state(), NodeState::Synced, "no state transfer");
    assert!(engine
        .take_effects()
        .contains(&Effect::ResetMonitors(Seqno(40))));
    assert!(!tasks(&mut engine)
        .iter()
        .any(|task| matches!(task, Task::RequestState)));
}

#[test]
fn the_last_primary_view_is_saved_once_committed_and_forgotten_at_a_clean_leave() {
    let store = MemoryStateStore::default();
    let mut engine = connected(true, &store);
    deliver(
        &mut engine,
        Delivery::View(view(1, &[1], 1, true, true, 10)),
    );
    engine.tick(Nanos(1), Seqno(0), true, None);
    assert_eq!(
        store.load_view(),
        Ok(None),
        "not committed up to the view yet"
    );
    engine.tick(Nanos(2), Seqno(1), true, None);
    let saved = store.load_view().unwrap().expect("saved once committed");
    assert_eq!((saved.seqno, saved.own_address.as_str()), (Seqno(1), "a1"));
    deliver(
        &mut engine,
        Delivery::View(view(2, &[1, 2], 1, true, true, 10)),
    );
    engine.tick(Nanos(3), Seqno(2), true, None);
    assert_eq!(
        store.load_view().unwrap().unwrap().members,
        vec!["a1", "a2"]
    );
    // A view this node is not in, or a non-primary one, is not saved.
    deliver(
        &mut engine,
        Delivery::View(view(2, &[1, 2], 1, false, false, 10)),
    );
    engine.tick(Nanos(4), Seqno(9), true, None);
    assert_eq!(store.load_view().unwrap().unwrap().seqno, Seqno(2));
    engine.forget_last_view();
    assert_eq!(store.load_view(), Ok(None));
}

#[test]
fn a_joiner_evicted_while_it_waits_asks_again_once_readmitted() {
    let store = MemoryStateStore::default();
    let mut engine = waiting_joiner(&store);
    // Evicted, then readmitted under another membership: the group dropped the request.
    deliver(
        &mut engine,
        Delivery::View(view(5, &[2], 1, false, false, 10)),
    );
    deliver(
        &mut engine,
        Delivery::View(view(8, &[1, 2], 1, true, true, 11)),
    );
    engine.take_effects();
    assert_eq!(engine.poll_state_request(), crate::RequestWait::Wait);
    let asked = requests(&engine.take_effects());
    assert_eq!(asked.len(), 1, "asked again");
    assert_eq!(asked[0].sst_request, b"sst");
    // The same membership again is no reason to ask.
    deliver(
        &mut engine,
        Delivery::View(view(8, &[1, 2], 1, true, false, 11)),
    );
    engine.poll_state_request();
    assert!(requests(&engine.take_effects()).is_empty());
}

#[test]
fn a_donor_without_state_refuses_at_once() {
    let store = MemoryStateStore::default();
    let mut engine = waiting_joiner(&store);
    deliver(&mut engine, ordered_request(3, Ok(1), Seqno::UNDEFINED));
    let refusal = transfer_sent(&mut engine).expect("the joiner is told");
    assert_eq!(refusal.address, "node3/ist");
    assert_eq!(refusal.header.outcome, Outcome::Refused);
    assert_eq!(refusal.pin, None);
}

#[test]
fn a_request_no_donor_took_is_asked_again_a_second_later() {
    let store = MemoryStateStore::default();
    let mut engine = waiting_joiner(&store);
    engine.on_delivery(
        Nanos(1_000),
        ordered_request(1, Err(NoDonor::NotYet), Seqno::UNDEFINED),
        &mut ActionCache::disabled(),
    );
    engine.tick(Nanos(500_000_000), Seqno::UNDEFINED, true, None);
    engine.poll_state_request();
    assert!(requests(&engine.take_effects()).is_empty(), "not yet");
    engine.tick(Nanos(1_000_001_000), Seqno::UNDEFINED, true, None);
    engine.poll_state_request();
    assert_eq!(requests(&engine.take_effects()).len(), 1);
}

/// A donor's index leaves out what every member committed by the time of the request,
/// although no write-set was certified since (a bulk load, then a quiet spell); its
/// verdicts stay those of a member that kept the keys.
#[test]
fn a_donor_sends_its_index_purged_to_the_commit_cut_of_the_request() {
    let store = MemoryStateStore::default();
    let mut engine = connected(true, &store);
    deliver(
        &mut engine,
        Delivery::View(view(1, &[1, 2], 1, true, true, 10)),
    );
    for seqno in 2..=4 {
        let row = format!("r{seqno}");
        deliver(&mut engine, remote_write_set_at_cut(seqno, &row, Seqno(1)));
    }
    tasks(&mut engine);
    engine.take_effects();
    let kept = engine.certifier.clone().expect("a founder certifies");
    deliver(&mut engine, ordered_request(3, Ok(1), Seqno(3)));
    let sent = transfer_sent(&mut engine).expect("a donation");
    let index = cert::Certifier::decode(&sent.header.index).unwrap();
    assert_eq!((index.position(), index.purged_to()), (Seqno(4), Seqno(3)));
    assert_eq!(
        kept.purged_to(),
        Seqno(1),
        "the write-sets alone did not purge it"
    );
    assert_eq!(
        index.index_len() + 2,
        kept.index_len(),
        "the rows of seqnos 2 and 3 are gone (their table's keys stay, for seqno 4)"
    );
    // The next write-set carries that cut or a later one: both indexes judge it alike.
    let next = writeset::WriteSet {
        source: uuid(2),
        conn_id: 1,
        trx_id: 5,
        last_seen: Seqno(3),
        flags: writeset::flags::TRX_START | writeset::flags::TRX_END,
        keys: vec![writeset::Key::new(
            &["db", "t", "r4"],
            base::KeyType::Exclusive,
        )]
        .into(),
        data: Vec::new().into(),
    };
    let (mut sent, mut kept) = (index, kept);
    for cert in [&mut sent, &mut kept] {
        cert.purge_to(Seqno(3));
    }
    assert_eq!(
        format!("{:?}", sent.certify(Seqno(5), &next)),
        format!("{:?}", kept.certify(Seqno(5), &next))
    );
}

/// A founder that ordered one write-set of node 2 at seqno 2.
fn founder_with_one_write_set(store: &MemoryStateStore) -> NodeEngine {
    let mut engine = connected(true, store);
    deliver(
        &mut engine,
        Delivery::View(view(1, &[1, 2], 1, true, true, 10)),
    );
    deliver(&mut engine, remote_write_set(2, "r"));
    tasks(&mut engine);
    engine.take_effects();
    engine
}

/// Node 2's write-set ordered at `seqno`, writing row `row`.
fn remote_write_set(seqno: i64, row: &str) -> Delivery {
    remote_write_set_at_cut(seqno, row, Seqno(1))
}

/// The same, ordered when every member had committed up to `safe_seqno`.
fn remote_write_set_at_cut(seqno: i64, row: &str, safe_seqno: Seqno) -> Delivery {
    let write_set = writeset::WriteSet {
        source: uuid(2),
        conn_id: 1,
        trx_id: seqno as u64,
        last_seen: Seqno(1),
        flags: writeset::flags::TRX_START | writeset::flags::TRX_END,
        keys: vec![writeset::Key::new(
            &["db", "t", row],
            base::KeyType::Exclusive,
        )]
        .into(),
        data: Vec::new().into(),
    };
    Delivery::WriteSet {
        seqno: Seqno(seqno),
        origin: uuid(2),
        submit_id: seqno as u64,
        local: false,
        safe_seqno,
        payload: write_set.to_bytes(),
    }
}

#[test]
fn an_ordered_view_seen_outside_the_primary_component_still_passes_its_seqno() {
    let store = MemoryStateStore::default();
    let mut engine = founder_with_one_write_set(&store);
    deliver(
        &mut engine,
        Delivery::View(view(3, &[1, 2], 1, false, true, 10)),
    );
    let taken = tasks(&mut engine);
    assert!(
        matches!(
            taken[..],
            [
                Task::View { ordered: false, .. },
                Task::Skip { seqno: Seqno(3) }
            ]
        ),
        "{taken:?}"
    );
}

#[test]
fn a_gap_in_the_log_is_caught_up_by_ist_at_once() {
    let store = MemoryStateStore::default();
    let mut engine = founder_with_one_write_set(&store);
    deliver(
        &mut engine,
        Delivery::StateGap {
            last_delivered: Seqno(2),
            resume_after: Seqno(9),
        },
    );
    assert_eq!(engine.state(), NodeState::Joiner);
    let asked = requests(&engine.take_effects());
    assert_eq!(asked.len(), 1);
    assert!(asked[0].sst_request.is_empty(), "IST only: the server runs");
    assert_eq!(asked[0].ist_from, Seqno(2));
    assert!(engine.joining().is_some_and(|j| j.appliers_behind));
}

/// Chosen as donor while synced, the node falls behind before its applier starts the
/// snapshot: it refuses then, telling the joiner, and never goes DONOR from JOINER.
#[test]
fn a_donor_that_fell_behind_before_its_snapshot_started_refuses() {
    let store = MemoryStateStore::default();
    let mut engine = founder_with_one_write_set(&store);
    deliver(&mut engine, ordered_request(3, Ok(1), Seqno(2)));
    let donate = tasks(&mut engine)
        .into_iter()
        .find_map(|task| match task {
            Task::Donate { request, .. } => Some(request),
            _ => None,
        })
        .expect("a snapshot to serve");
    engine.take_effects();
    deliver(
        &mut engine,
        Delivery::StateGap {
            last_delivered: Seqno(3),
            resume_after: Seqno(9),
        },
    );
    assert_eq!(engine.state(), NodeState::Joiner);
    engine.take_effects();
    assert!(
        !engine.donation_starts(&donate),
        "nothing consistent to send"
    );
    assert_eq!(engine.state(), NodeState::Joiner);
    let refusal = transfer_sent(&mut engine).expect("the joiner is told");
    assert_eq!(refusal.address, "node3/ist");
    assert_eq!(refusal.header.outcome, Outcome::Refused);
}

#[test]
fn a_readmitted_node_keeps_its_monitors_for_what_its_appliers_still_have() {
    let store = MemoryStateStore::default();
    let mut engine = founder_with_one_write_set(&store);
    // Readmitted under another membership, with seqnos 3..=5 ordered meanwhile.
    deliver(
        &mut engine,
        Delivery::View(view(6, &[1, 2], 1, true, true, 11)),
    );
    assert_eq!(engine.state(), NodeState::Joiner);
    engine.take_effects();
    let cert = cert::Certifier::starting_at(cert::CertConfig::default(), Seqno(6));
    let header = crate::ist::Header {
        cluster: CLUSTER,
        outcome: Outcome::Ist,
        first: Seqno(3),
        last: Seqno(6),
        reason: String::new(),
        index: cert.encode(),
    };
    assert_eq!(
        engine.stream_header("node2", &header),
        crate::StreamNext::Records
    );
    assert_eq!(
        engine.snapshot_position(),
        crate::SnapshotWait::Ready(Seqno(2))
    );
    engine.ist_begins(&header, Seqno(2)).unwrap();
    let effects = engine.take_effects();
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::MonitorsAt(_))),
        "{effects:?}"
    );
}

#[test]
fn a_reconnect_founds_anew_from_its_first_view() {
    let store = MemoryStateStore::default();
    let mut engine = founder_with_one_write_set(&store);
    engine.begin_disconnect();
    engine.close_with_final_view();
    tasks(&mut engine);
    // `SET GLOBAL wsrep_cluster_address='gcomm://'`: the same process founds again.
    engine.begin_connection("").expect("disconnected");
    engine.start_connection(ConnectionStart {
        bootstrap: true,
        start_position: Some(Gtid {
            cluster: CLUSTER,
            seqno: Seqno(2),
        }),
        ist_address: "node1/ist".into(),
    });
    deliver(
        &mut engine,
        Delivery::View(view(3, &[1], 1, true, true, 12)),
    );
    assert_eq!(engine.state(), NodeState::Synced);
    let taken = tasks(&mut engine);
    assert!(
        matches!(
            taken[..],
            [
                Task::Connected(_),
                Task::View { ordered: true, .. },
                Task::Synced
            ]
        ),
        "the server is told it connected: {taken:?}"
    );
}

/// A donor that frames its stream correctly but sends a certification index that does not
/// decode is lying or broken: the joiner takes nothing from it, says why, and asks again
/// (it neither stops nor waits for records that would be certified against garbage).
#[test]
fn a_donor_index_that_does_not_decode_is_refused_and_the_joiner_asks_again() {
    let store = MemoryStateStore::default();
    let mut engine = waiting_joiner(&store);
    let header = crate::ist::Header {
        cluster: CLUSTER,
        outcome: Outcome::Ist,
        first: Seqno(3),
        last: Seqno(5),
        reason: String::new(),
        index: vec![0xff; 24],
    };
    let next = engine.stream_header("node2/ist", &header);
    assert_eq!(next, crate::StreamNext::Nothing);
    let joining = engine.joining().expect("still joining");
    assert!(
        joining.transfer.index.is_none(),
        "nothing taken from the stream"
    );
    let failed = joining
        .transfer
        .failed
        .as_deref()
        .expect("the stream failed");
    assert!(
        failed.contains("node2/ist") && failed.contains("does not decode"),
        "{failed}"
    );
    assert_eq!(engine.state(), NodeState::Joiner);

    engine.take_effects();
    engine.tick(Nanos(2), Seqno::UNDEFINED, true, None);
    engine.poll_state_request();
    assert!(requests(&engine.take_effects()).is_empty(), "not at once");
    engine.tick(Nanos(1_000_000_010), Seqno::UNDEFINED, true, None);
    engine.poll_state_request();
    assert_eq!(requests(&engine.take_effects()).len(), 1, "asked again");
}

#[test]
fn the_recv_queue_is_sampled_as_each_remote_write_set_finds_it() {
    let store = MemoryStateStore::default();
    let mut engine = connected(true, &store);
    deliver(
        &mut engine,
        Delivery::View(view(1, &[1, 2], 1, true, true, 10)),
    );
    tasks(&mut engine);
    deliver(&mut engine, remote_write_set(2, "r2"));
    deliver(&mut engine, remote_write_set(3, "r3"));
    // The first found an empty queue, the second found the first: Galera's average is 0.5.
    let queue = &engine.stats().window.recv_queue;
    assert_eq!(queue.mean(), 0.5);
    assert_eq!(engine.tasks().len(), 2);
}
