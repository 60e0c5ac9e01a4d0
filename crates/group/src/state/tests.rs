//! The group state's rules, case by case.

use super::*;

fn info(raft_id: u64) -> MemberInfo {
    MemberInfo {
        incoming: String::new(),
        raft_id,
        uuid: Uuid([raft_id as u8; 16]),
        name: format!("n{raft_id}"),
        address: format!("a{raft_id}"),
    }
}

#[test]
fn dedup_window_accepts_each_id_once_in_any_order() {
    let mut window = DedupWindow::default();
    assert!(window.insert(2));
    assert!(window.insert(1));
    assert_eq!(window.contiguous, 2);
    assert!(!window.insert(1));
    assert!(!window.insert(2));
    assert!(window.insert(4));
    assert!(!window.insert(4));
    assert!(window.contains(4) && !window.contains(3));
    assert!(window.insert(3));
    assert_eq!((window.contiguous, window.above.len()), (4, 0));
}

#[test]
fn seqnos_are_consecutive_and_duplicates_take_none() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    let submission = |id| Submission::whole(Uuid([1; 16]), id, vec![]);
    assert_eq!(state.order_submission(&submission(1)), Some(Seqno(2)));
    assert_eq!(state.order_submission(&submission(1)), None);
    assert_eq!(state.order_submission(&submission(2)), Some(Seqno(3)));
    let stranger = Submission::whole(Uuid([8; 16]), 1, vec![]);
    assert_eq!(state.order_submission(&stranger), None);
    assert_eq!(state.last_seqno, Seqno(3));
}

#[test]
fn chunks_take_one_seqno_when_the_last_arrives_in_any_order() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    state.add_member(info(2));
    // Every chunk but the last is `CHUNK_BYTES` long; the last has 3 bytes.
    let chunk = |origin: u8, id: u64, index: u32, byte: u8| Submission {
        origin: Uuid([origin; 16]),
        submit_id: id,
        payload: vec![byte; if index == 2 { 3 } else { crate::CHUNK_BYTES }].into(),
        chunk: (index, 3),
    };
    // Write-set 12 of member 1 in chunks 10, 11, 12; the middle one comes last (it was
    // resent), with a whole write-set of member 2 and a duplicate in between.
    assert_eq!(state.accept_submission(chunk(1, 10, 0, b'a')), None);
    assert_eq!(state.accept_submission(chunk(1, 12, 2, b'c')), None);
    let other = state.accept_submission(Submission::whole(Uuid([2; 16]), 1, vec![7]));
    assert_eq!(other.map(|o| o.seqno), Some(Seqno(2)));
    assert_eq!(state.accept_submission(chunk(1, 10, 0, b'a')), None);
    assert!(state.was_ordered(Uuid([1; 16]), 10));
    assert!(!state.was_ordered(Uuid([1; 16]), 11));
    assert_eq!(
        state.accept_submission(chunk(1, 11, 1, b'b')),
        Some(OrderedSubmission {
            seqno: Seqno(3),
            submit_id: 12,
            payload: [
                vec![b'a'; crate::CHUNK_BYTES],
                vec![b'b'; crate::CHUNK_BYTES],
                b"ccc".to_vec()
            ]
            .concat(),
        })
    );
    assert!(state.partial.is_empty());
    // A malformed chunk takes nothing; an unfinished write-set goes with its member.
    let mut bad = chunk(1, 20, 3, b'x');
    assert_eq!(state.accept_submission(bad.clone()), None);
    bad.chunk = (0, 3);
    assert_eq!(state.accept_submission(bad), None);
    assert_eq!(state.partial.len(), 1);
    // A middle chunk cut short is dropped: the write-set stays incomplete.
    let mut short = chunk(1, 21, 1, b'y');
    short.payload.truncate(5);
    assert_eq!(state.accept_submission(short), None);
    assert_eq!(state.partial.values().next().unwrap().received(), 1);
    let _ = state.remove_member(1);
    assert!(state.partial.is_empty());
    assert_eq!(state.last_seqno, Seqno(3));
}

#[test]
fn reassembly_is_bounded_per_origin_and_per_chunk() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    let origin = Uuid([1; 16]);
    // The first chunk of write-set `n` (two chunks, ids 10n + 10 and 10n + 11).
    let first = |n: u64| Submission {
        origin,
        submit_id: 10 * n + 10,
        payload: vec![n as u8; crate::CHUNK_BYTES].into(),
        chunk: (0, 2),
    };
    for n in 0..MAX_REASSEMBLIES_PER_ORIGIN as u64 {
        assert_eq!(state.accept_submission(first(n)), None);
    }
    let over = MAX_REASSEMBLIES_PER_ORIGIN as u64;
    assert_eq!(state.accept_submission(first(over)), None);
    assert!(
        !state.was_ordered(origin, 10 * over + 10),
        "a refused chunk is not marked ordered: its origin sends it again"
    );
    assert_eq!(state.partial.len(), MAX_REASSEMBLIES_PER_ORIGIN);
    // Another origin is not held back, and a finished write-set makes room.
    let other = Submission::whole(Uuid([2; 16]), 1, vec![]);
    state.add_member(info(2));
    assert!(state.accept_submission(other).is_some());
    let second = Submission {
        submit_id: 11,
        payload: vec![0].into(),
        chunk: (1, 2),
        ..first(0)
    };
    assert!(state.accept_submission(second).is_some());
    assert_eq!(state.accept_submission(first(over)), None);
    assert!(state.was_ordered(origin, 10 * over + 10));
    // A chunk larger than a chunk is cut, or ids past the end of the range, take nothing.
    let mut fat = first(100);
    fat.payload = vec![0; crate::CHUNK_BYTES + 1].into();
    let mut last = first(101);
    last.submit_id = u64::MAX;
    for bad in [fat, last] {
        let id = bad.submit_id;
        assert_eq!(state.accept_submission(bad), None);
        assert!(!state.was_ordered(origin, id));
    }
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn a_state_from_the_network_that_would_overflow_later_is_refused() {
    let good = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    assert_eq!(good.check(), Ok(()));
    let mut bad = Vec::new();
    let mut state = good.clone();
    state.last_seqno = Seqno(i64::MAX);
    bad.push(state);
    let mut state = good.clone();
    state.committed.insert(1, Seqno(5));
    bad.push(state);
    let mut state = good.clone();
    state.view_id = u64::MAX;
    bad.push(state);
    let mut state = good.clone();
    state.members.insert(2, state.members[&1].clone());
    bad.push(state);
    let mut state = good.clone();
    state.dedup.insert(
        Uuid([1; 16]),
        DedupWindow {
            contiguous: u64::MAX,
            ..DedupWindow::default()
        },
    );
    bad.push(state);
    let mut state = good.clone();
    let mut complete = Reassembly::new(1);
    complete.take(0, &[1]).unwrap();
    state.partial.insert((Uuid([1; 16]), 3), complete);
    bad.push(state);
    for state in bad {
        assert!(state.check().is_err(), "{state:?}");
    }
    // A member cannot put a value in the state that its snapshot would fail on.
    let mut state = good;
    state.apply_control(&Control::Cached(1, Seqno(i64::MAX)));
    state.apply_control(&Control::Committed(1, Seqno(-7)));
    assert_eq!(state.check(), Ok(()));
    assert!(state.cached_from.is_empty() && state.committed.is_empty());
}

#[test]
fn a_donor_never_pauses_the_group() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    state.add_member(info(2));
    state.apply_control(&Control::State(2, NodeState::Synced));
    state.apply_control(&Control::FlowStop(2));
    assert!(state.is_paused());
    state.apply_control(&Control::State(2, NodeState::Donor));
    assert!(!state.is_paused(), "going DONOR lifts the member's stop");
    state.apply_control(&Control::FlowStop(2));
    assert!(!state.is_paused(), "a donor's stop is ignored");
    state.apply_control(&Control::State(2, NodeState::Joined));
    state.apply_control(&Control::FlowStop(2));
    let _ = state.remove_member(2);
    assert!(!state.is_paused(), "a departed member's stop is lifted");
}

/// `trireme-arbitrator` is a member that holds no data: it announces PRIMARY and never asks
/// for state. Then it is nobody's donor, no ballot waits for it, its flow-control stop is
/// ignored and it never holds back the commit cut.
#[test]
fn a_member_without_data_serves_no_state_casts_no_vote_and_pauses_nothing() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    state.add_member(info(2));
    state.add_member(info(3));
    state.apply_control(&Control::State(2, NodeState::Synced));
    state.apply_control(&Control::State(3, NodeState::Primary));
    state.last_seqno = Seqno(40);
    let request = StateRequest {
        joiner: 2,
        request_id: 1,
        donor_names: String::new(),
        sst_request: vec![],
        ist_from: Seqno(30),
        ist_address: String::new(),
    };
    assert_eq!(
        state.select_donor(&request),
        Ok(1),
        "the arbitrator is no donor"
    );
    let named = StateRequest {
        donor_names: "n3".into(),
        ..request
    };
    assert_eq!(state.select_donor(&named), Err(NoDonor::NotYet));
    let opened = state.cast_vote(1, Seqno(40), 7).unwrap();
    let VoteEvent::Opened { voters, .. } = &opened[0] else {
        panic!("the first vote opens a ballot: {opened:?}");
    };
    assert_eq!(
        voters,
        &BTreeSet::from([1, 2]),
        "the arbitrator does not vote"
    );
    let decided = state.cast_vote(2, Seqno(40), vote::SUCCESS).unwrap();
    assert!(
        matches!(decided.last(), Some(VoteEvent::Decided(_))),
        "the data holders decide alone: {decided:?}"
    );
    state.apply_control(&Control::FlowStop(3));
    assert!(!state.is_paused(), "the arbitrator never pauses the group");
    state.apply_control(&Control::Committed(2, Seqno(33)));
    state.apply_control(&Control::Committed(1, Seqno(35)));
    assert_eq!(
        state.safe_seqno,
        Seqno(33),
        "the data holders' lowest report"
    );
}

#[test]
fn the_commit_cut_is_the_lowest_report_and_only_grows() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    state.add_member(info(2));
    state.last_seqno = Seqno(100);
    state.apply_control(&Control::Committed(1, Seqno(50)));
    assert_eq!(state.safe_seqno, Seqno(50));
    state.apply_control(&Control::Committed(2, Seqno(20)));
    assert_eq!(state.safe_seqno, Seqno(50), "the cut never goes back");
    state.apply_control(&Control::Committed(1, Seqno(90)));
    state.apply_control(&Control::Committed(2, Seqno(70)));
    assert_eq!(state.safe_seqno, Seqno(70));
    state.apply_control(&Control::Committed(2, Seqno(500)));
    assert_eq!(
        state.safe_seqno,
        Seqno(70),
        "a report beyond the ordered position is ignored"
    );
    let _ = state.remove_member(2);
    assert_eq!(state.safe_seqno, Seqno(90));
}

#[test]
fn donor_selection_follows_the_list_and_the_trailing_comma() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    for id in 2..=4 {
        state.add_member(info(id));
    }
    state.apply_control(&Control::State(3, NodeState::Synced));
    let request = |names: &str| StateRequest {
        joiner: 4,
        request_id: 1,
        donor_names: names.into(),
        sst_request: vec![],
        ist_from: Seqno::UNDEFINED,
        ist_address: String::new(),
    };
    assert_eq!(state.select_donor(&request("n3")), Ok(3));
    assert_eq!(
        state.select_donor(&request("n2,n3")),
        Ok(3),
        "n2 is not synced yet"
    );
    assert_eq!(state.select_donor(&request("n2")), Err(NoDonor::NotYet));
    assert_eq!(
        state.select_donor(&request("n2,")),
        Ok(1),
        "trailing comma: anyone"
    );
    assert_eq!(state.select_donor(&request("")), Ok(1));
    assert_eq!(
        state.select_donor(&request("nobody")),
        Err(NoDonor::Unreachable)
    );
    assert_eq!(
        state.select_donor(&request("n4")),
        Err(NoDonor::Unreachable),
        "not itself"
    );
}

#[test]
fn joiners_asking_together_get_a_snapshot_donor_each_or_wait_for_one() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    for id in 2..=4 {
        state.add_member(info(id));
    }
    state.apply_control(&Control::State(2, NodeState::Synced));
    let request = |joiner: u64, ist_from: i64| StateRequest {
        joiner,
        request_id: 1,
        donor_names: String::new(),
        sst_request: b"sst".to_vec(),
        ist_from: Seqno(ist_from),
        ist_address: String::new(),
    };
    // A running server asks IST only: a donor that lacks the gap refuses it, so it reserves
    // no donor (the reservation would never end).
    let ist_only = StateRequest {
        sst_request: Vec::new(),
        ..request(3, 0)
    };
    assert!(state.assign_donor(&ist_only).is_ok());
    assert!(state.donating.is_empty());
    // Two snapshots at once: one donor each, before either donor reports DONOR.
    let first = state.assign_donor(&request(3, -1)).unwrap();
    let second = state.assign_donor(&request(4, -1)).unwrap();
    assert_ne!(first, second);
    assert_eq!(state.donating.len(), 2);
    // A third joiner waits for a free donor; IST from a reserved donor is still fine.
    state.add_member(info(5));
    assert_eq!(state.assign_donor(&request(5, -1)), Err(NoDonor::NotYet));
    state.apply_control(&Control::Cached(first, Seqno(10)));
    assert_eq!(state.assign_donor(&request(5, 20)), Ok(first));
    assert_eq!(state.donating.len(), 2, "an IST reserves nothing");
    // The donor's transfer ends (DONOR, then SYNCED): it is free again.
    state.apply_control(&Control::State(first, NodeState::Donor));
    assert_eq!(state.assign_donor(&request(5, -1)), Err(NoDonor::NotYet));
    state.apply_control(&Control::State(first, NodeState::Synced));
    assert_eq!(state.assign_donor(&request(5, -1)), Ok(first));
    // A joiner that has its state, or leaves, frees its donor too.
    state.apply_control(&Control::State(4, NodeState::Joined));
    let _ = state.remove_member(5);
    assert!(state.donating.is_empty(), "{:?}", state.donating);
}

#[test]
fn a_joiner_asking_again_is_not_kept_waiting_by_its_own_earlier_reservation() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    for id in 2..=3 {
        state.add_member(info(id));
    }
    state.apply_control(&Control::State(2, NodeState::Synced));
    // The joiner pins its donor (`wsrep_sst_donor=n1`, no trailing comma).
    let request = |joiner: u64, request_id: u64| StateRequest {
        joiner,
        request_id,
        donor_names: "n1".into(),
        sst_request: b"sst".to_vec(),
        ist_from: Seqno::UNDEFINED,
        ist_address: String::new(),
    };
    assert_eq!(state.assign_donor(&request(3, 1)), Ok(1));
    // The donor never went DONOR where the group could see it (it stayed silent, or failed
    // within a tick) and the joiner asks again: its earlier request reserves nothing now.
    assert_eq!(state.assign_donor(&request(3, 2)), Ok(1));
    assert_eq!(state.donating.len(), 1, "{:?}", state.donating);
    // Another joiner still waits while the donor is reserved for the first.
    state.add_member(info(4));
    assert_eq!(state.assign_donor(&request(4, 1)), Err(NoDonor::NotYet));
    assert_eq!(state.donating.get(&1), Some(&3));
}

#[test]
fn donor_selection_prefers_a_member_whose_cache_holds_the_gap() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    for id in 2..=4 {
        state.add_member(info(id));
        state.apply_control(&Control::State(id, NodeState::Synced));
    }
    state.apply_control(&Control::Cached(1, Seqno(500)));
    state.apply_control(&Control::Cached(2, Seqno(90)));
    state.apply_control(&Control::Cached(3, Seqno(101)));
    let request = |names: &str, ist_from: i64| StateRequest {
        joiner: 4,
        request_id: 1,
        donor_names: names.into(),
        sst_request: vec![],
        ist_from: Seqno(ist_from),
        ist_address: String::new(),
    };
    assert_eq!(
        state.select_donor(&request("", 100)),
        Ok(2),
        "1 lacks the gap"
    );
    assert_eq!(
        state.select_donor(&request("n3,", 100)),
        Ok(3),
        "the listed donor first when it holds the gap (101 is the first seqno needed)"
    );
    assert_eq!(
        state.select_donor(&request("n1,", 99)),
        Ok(2),
        "a listed donor without the gap yields to any other that has it"
    );
    assert_eq!(
        state.select_donor(&request("n1", 99)),
        Ok(1),
        "without the trailing comma only n1 may serve: SST from it"
    );
    assert_eq!(
        state.select_donor(&request("", 10)),
        Ok(1),
        "nobody holds the gap: SST from the first synced member"
    );
    assert_eq!(state.select_donor(&request("", -1)), Ok(1), "no IST asked");
    let _ = state.remove_member(2);
    assert!(
        !state.cached_from.contains_key(&2),
        "a leaver's cache is forgotten"
    );
}

#[test]
fn the_donor_is_a_member_without_client_writes_unless_one_is_named() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    for id in [2, 3] {
        state.add_member(info(id));
        state.members.get_mut(&id).unwrap().state = NodeState::Synced;
    }
    let write = |state: &mut GroupState, id: u8, n: u64| {
        state.order_submission(&Submission::whole(Uuid([id; 16]), n, vec![]))
    };
    for n in 1..=10 {
        write(&mut state, 1, n).unwrap();
        write(&mut state, 2, n).unwrap();
    }
    let request = |names: &str| StateRequest {
        joiner: 4,
        request_id: 1,
        donor_names: names.to_string(),
        sst_request: vec![],
        ist_from: Seqno::UNDEFINED,
        ist_address: String::new(),
    };
    assert_eq!(
        state.select_donor(&request("")),
        Ok(3),
        "n3 serves no writes"
    );
    assert_eq!(
        state.select_donor(&request("n1,")),
        Ok(1),
        "a named donor comes first"
    );
    for n in 11..=(10 + CLIENT_WRITES_WINDOW as u64) {
        write(&mut state, 3, n).unwrap();
    }
    assert_eq!(
        state.select_donor(&request("")),
        Ok(1),
        "n1 and n2 wrote nothing for a window's worth of seqnos; n3 now serves writes"
    );
    let _ = state.remove_member(3);
    assert!(
        !state.last_write.contains_key(&Uuid([3; 16])),
        "a leaver is forgotten"
    );
}

#[test]
fn a_resent_state_request_is_served_once() {
    let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    state.add_member(info(2));
    let request = |request_id| StateRequest {
        joiner: 2,
        request_id,
        donor_names: String::new(),
        sst_request: vec![],
        ist_from: Seqno::UNDEFINED,
        ist_address: String::new(),
    };
    assert!(state.record_state_request(&request(1)));
    assert!(!state.record_state_request(&request(1)), "a resend");
    assert!(state.record_state_request(&request(2)), "a new request");
    assert!(
        !state.record_state_request(&request(1)),
        "an old resend, late"
    );
    let _ = state.remove_member(2);
    assert!(
        state.record_state_request(&request(1)),
        "a new membership starts over"
    );
}

#[test]
fn state_and_entries_round_trip() {
    let state = GroupState::genesis(Uuid([9; 16]), Seqno(1), info(1));
    assert_eq!(GroupState::decode(&state.encode()), Ok(state));
    let entry = LogEntry::Control(Control::State(3, NodeState::Joined));
    assert!(LogEntry::decodes(&entry.encode()));
    assert_eq!(LogEntry::decode(&entry.encode()), Ok(entry));
    assert!(LogEntry::decode(&[0xff, 0xff, 0xff]).is_err());
    assert!(!LogEntry::decodes(&[0xff, 0xff, 0xff]));
    // A batch of chunks, as checked on arrival without copying them; one byte short is not.
    let chunk = Submission {
        origin: Uuid([4; 16]),
        submit_id: 12,
        payload: vec![5; crate::CHUNK_BYTES].into(),
        chunk: (0, 2),
    };
    let bytes = LogEntry::Batch(vec![Submission::whole(Uuid([3; 16]), 1, vec![]), chunk]).encode();
    assert!(LogEntry::decodes(&bytes));
    assert!(!LogEntry::decodes(&bytes[..bytes.len() - 1]));
    // Decoded in place, the payloads are views of the entry, equal to a copying decode.
    let shared = bytes::Bytes::from(bytes.clone());
    let decoded = LogEntry::decode_shared(&shared).expect("decodes in place");
    assert_eq!(Ok(&decoded), LogEntry::decode(&bytes).as_ref());
    let LogEntry::Batch(submissions) = decoded else {
        panic!("a batch decodes as a batch");
    };
    let entry_range = shared.as_ptr_range();
    assert!(entry_range.contains(&submissions[1].payload.as_ptr()));
    assert!(LogEntry::decode_shared(&shared.slice(..shared.len() - 1)).is_err());
}

mod fuzz {
    use super::*;
    use fuzzing::Damage;
    use proptest::prelude::*;
    use proptest::sample::Index;

    /// Cases per target: a case decodes a few hundred bytes and runs a few dozen
    /// operations, about ten microseconds, so this takes about a second.
    const FUZZ_CASES: u32 = 100_000;

    /// A state with something in every field: members in every node state, delivery
    /// records, a reassembly, reports, requests and a donation.
    fn rich_state() -> GroupState {
        let mut state = GroupState::genesis(Uuid([9; 16]), Seqno(40), info(1));
        for id in 2..=4 {
            state.add_member(info(id));
        }
        state.apply_control(&Control::State(2, NodeState::Synced));
        state.apply_control(&Control::State(3, NodeState::Joiner));
        state.apply_control(&Control::FlowStop(2));
        state.apply_control(&Control::Committed(2, Seqno(30)));
        state.apply_control(&Control::Cached(2, Seqno(5)));
        for id in 1..5 {
            state.accept_submission(Submission::whole(Uuid([1; 16]), id, vec![id as u8]));
        }
        state.accept_submission(Submission::whole(Uuid([2; 16]), 7, vec![7]));
        state.accept_submission(Submission {
            origin: Uuid([2; 16]),
            submit_id: 9,
            payload: vec![1, 2, 3].into(),
            chunk: (0, 3),
        });
        let request = StateRequest {
            joiner: 3,
            request_id: 1,
            donor_names: "n2,".into(),
            sst_request: b"rsync".to_vec(),
            ist_from: Seqno(3),
            ist_address: "n3:4568".into(),
        };
        state.record_state_request(&request);
        let _ = state.assign_donor(&request);
        state
    }

    /// Every operation the ordered log can apply, with extreme values; afterwards the
    /// state must still pass its own check (what a member applies, a joiner accepts).
    fn exercise(state: &mut GroupState) -> Result<(), TestCaseError> {
        let ids: Vec<u64> = state.members.keys().copied().collect();
        let uuids: Vec<Uuid> = state.members.values().map(|m| m.info.uuid).collect();
        let extremes = [
            Seqno(i64::MIN),
            Seqno::UNDEFINED,
            Seqno(i64::MAX),
            state.last_seqno,
        ];
        for (id, seqno) in ids.iter().flat_map(|id| extremes.map(|s| (*id, s))) {
            for control in [
                Control::Committed(id, seqno),
                Control::Cached(id, seqno),
                Control::FlowStop(id),
                Control::State(id, NodeState::Donor),
            ] {
                state.apply_control(&control);
            }
            let request = StateRequest {
                joiner: id,
                request_id: u64::MAX,
                donor_names: ",".into(),
                sst_request: vec![],
                ist_from: seqno,
                ist_address: String::new(),
            };
            if state.record_state_request(&request) {
                let _ = state.assign_donor(&request);
            }
        }
        for (uuid, id) in uuids
            .iter()
            .flat_map(|u| [0, 1, u64::MAX - 1, u64::MAX].map(|i| (*u, i)))
        {
            if state.last_seqno.0 + 2 >= SEQNO_MAX {
                break;
            }
            state.accept_submission(Submission::whole(uuid, id, vec![1]));
            let chunk = (MAX_CHUNKS - 1, MAX_CHUNKS);
            state.accept_submission(Submission {
                origin: uuid,
                submit_id: id,
                payload: vec![2].into(),
                chunk,
            });
        }
        prop_assert_eq!(state.check(), Ok(()));
        let decoded = GroupState::decode(&state.encode());
        prop_assert_eq!(decoded, Ok(state.clone()));
        for id in ids {
            let _ = state.remove_member(id);
        }
        prop_assert_eq!(state.check(), Ok(()));
        Ok(())
    }

    fn mutated(mut bytes: Vec<u8>, edits: &[Damage], cut: Option<Index>) -> Vec<u8> {
        fuzzing::apply(&mut bytes, edits);
        if let Some(at) = cut {
            bytes.truncate(at.index(bytes.len() + 1));
        }
        bytes
    }

    proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Arbitrary bytes, and a real state with bytes overwritten (length prefixes
        /// among them) and cut: decoding never panics, and a state that passes its
        /// check survives every operation and still passes it.
        #[test]
        fn fuzz_group_state_decode(
            arbitrary in proptest::collection::vec(any::<u8>(), 0..300),
            real in any::<bool>(),
            edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
            cut in proptest::option::of(any::<Index>()),
        ) {
            let bytes = if real {
                mutated(rich_state().encode(), &edits, cut)
            } else {
                arbitrary
            };
            if let Ok(mut state) = GroupState::decode(&bytes) {
                if state.check().is_ok() {
                    exercise(&mut state)?;
                }
            }
        }

        /// Arbitrary and mangled log entries: decoding never panics, and applying what
        /// decodes keeps a good state good.
        #[test]
        fn fuzz_log_entry_decode(
            arbitrary in proptest::collection::vec(any::<u8>(), 0..200),
            sample in 0..3usize,
            edits in proptest::collection::vec(fuzzing::overwrite(), 0..4),
            cut in proptest::option::of(any::<Index>()),
        ) {
            let samples = [
                LogEntry::Batch(vec![
                    Submission::whole(Uuid([1; 16]), 9, vec![1, 2]),
                    Submission { origin: Uuid([2; 16]), submit_id: 11, payload: vec![3].into(), chunk: (2, 3) },
                ]),
                LogEntry::Control(Control::Committed(2, Seqno(35))),
                LogEntry::Control(Control::StateRequest(StateRequest {
                    joiner: 4,
                    request_id: 2,
                    donor_names: String::new(),
                    sst_request: vec![1],
                    ist_from: Seqno(20),
                    ist_address: String::new(),
                })),
            ];
            let bytes = if edits.is_empty() && cut.is_none() {
                arbitrary
            } else {
                mutated(samples[sample].encode(), &edits, cut)
            };
            // The check on arrival accepts exactly what decodes.
            prop_assert_eq!(LogEntry::decodes(&bytes), LogEntry::decode(&bytes).is_ok());
            let Ok(entry) = LogEntry::decode(&bytes) else {
                return Ok(());
            };
            let mut state = rich_state();
            match entry {
                LogEntry::Batch(submissions) => {
                    for submission in submissions {
                        state.accept_submission(submission);
                    }
                }
                LogEntry::Control(Control::StateRequest(request)) => {
                    if state.record_state_request(&request) {
                        let _ = state.assign_donor(&request);
                    }
                }
                LogEntry::Control(control) => state.apply_control(&control),
            }
            prop_assert_eq!(state.check(), Ok(()));
        }
    }
}
