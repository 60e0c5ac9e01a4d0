//! The simulator reaches the rare branches it is meant to test: every coverage mark below
//! is hit within the first [`SEEDS`] seeds of the fault sweep. A mark that stops being hit
//! means a change made the simulator blind to that branch (or removed the branch).

use std::collections::BTreeMap;

use sim::{run_seed, SimOptions};

/// Seeds of the default fault sweep that must hit every mark.
const SEEDS: u64 = 300;

/// The marks the simulator must reach, each with what it stands for.
const EXPECTED: &[(&str, &str)] = &[
    (
        "cert.too_old_to_certify",
        "a write-set whose last_seen is purged fails",
    ),
    (
        "cert.pa_unsafe_write_set_conflicts",
        "a PA_UNSAFE write-set still conflicts",
    ),
    (
        "cert.conflict_with_a_certified_fragment",
        "a write-set conflicts with a fragment of an open streaming transaction",
    ),
    (
        "engine.replay_after_brute_force_abort",
        "a transaction brute-force aborted after its verdict replays",
    ),
    (
        "engine.ordered_transaction_brute_force_aborted",
        "an applier aborts a local transaction that was already ordered",
    ),
    (
        "engine.readmitted_member_catches_up",
        "a member evicted and readmitted catches up by IST",
    ),
    (
        "engine.joiner_readmitted_asks_again",
        "a joiner evicted while it waited is readmitted and asks again",
    ),
    (
        "engine.cut_stream_resumed_from_what_was_queued",
        "a cut IST stream is resumed from what was queued",
    ),
    (
        "engine.donor_left_before_the_transfer_finished",
        "a joiner's donor leaves before the transfer is done",
    ),
    (
        "engine.ist_not_possible_sst_instead",
        "a donor that lacks the gap sends a snapshot",
    ),
    (
        "engine.ist_only_request_refused",
        "a donor refuses an IST-only request it cannot serve",
    ),
    (
        "engine.join_gave_up_for_want_of_a_donor",
        "no member holds a readmitted node's gap: it stops and rejoins by SST",
    ),
    (
        "engine.state_gap_caught_up_by_ist",
        "a member behind the log catches up by IST at once",
    ),
    (
        "engine.streams_of_departed_members_closed",
        "the streams of members that left end",
    ),
    (
        "engine.waiting_transactions_withdrawn",
        "local transactions waiting for an order that will not come fail",
    ),
    ("engine.paused", "a node pauses"),
    (
        "group.admitted_inside_a_raft_snapshot",
        "a joiner learns its admission from a snapshot",
    ),
    (
        "group.state_gap_after_a_raft_snapshot",
        "a member behind the log gets a snapshot and a state gap",
    ),
    (
        "group.causal_read_asked_again",
        "a causal read Raft dropped is asked again",
    ),
    ("group.evicted_member_rejoins", "an evicted member rejoins"),
    (
        "group.joiner_asking_again_freed_its_donor",
        "a joiner asking again frees the donor its earlier request reserved",
    ),
    (
        "group.member_replaced_by_its_restart",
        "a restarted node replaces its old identity",
    ),
    (
        "group.join_put_off_for_an_unheard_member",
        "no admission while a member is unheard",
    ),
    ("group.silent_member_evicted", "a silent member is evicted"),
    (
        "group.submission_resent",
        "a submission is resent to the leader",
    ),
    (
        "group.unsent_submissions_abandoned",
        "a non-primary member gives up what never left it",
    ),
    (
        "group.flow_control_paused_the_group",
        "a slow member pauses the group",
    ),
    (
        "group.flow_stop_of_a_member_not_synced_ignored",
        "a stop from a member neither SYNCED nor JOINED is ignored",
    ),
    (
        "group.flow_grace_drained_without_a_stop",
        "a queue over the flow-control limit drains within its grace: no pause",
    ),
    (
        "group.flow_stop_while_catching_up",
        "a JOINED member over its catch-up limit pauses the group",
    ),
    (
        "group.flow_stop_lifted_for_silence",
        "the stop of a member gone silent is lifted",
    ),
    ("sim.two_nodes_crashed_at_once", "a double failure"),
    (
        "sim.whole_cluster_crashed",
        "a power loss: every node crashes at once",
    ),
    (
        "group.primary_component_restored_after_a_crash",
        "the most advanced member of the last primary view founds it again",
    ),
    (
        "group.restore_waits_for_a_member",
        "a restore waits until every member of the last primary view is back",
    ),
    ("sim.node_made_slow", "a slow node"),
    (
        "sim.donor_died_during_its_stream",
        "a donor dies while its IST stream is on the way",
    ),
    ("sim.stream_cut_on_the_way", "a stream is cut on the way"),
    (
        "sim.stream_damaged_on_the_way",
        "a stream is damaged on the way",
    ),
    (
        "sim.gcache_recovery_dropped_damaged_records",
        "a crash tears or flips gcache records, which recovery drops",
    ),
    ("sim.gcache_frozen", "a gcache freezes its purge"),
    (
        "sim.snapshot_taken_under_a_pause",
        "a donor's snapshot is taken under a pause",
    ),
    (
        "sim.pause_reached_its_point",
        "FLUSH TABLES WITH READ LOCK reaches its pause point",
    ),
    (
        "sim.brute_force_aborted_transaction_replayed",
        "a replay commits",
    ),
    (
        "sim.streaming_transaction_rolled_back",
        "a streaming transaction rolls back everywhere",
    ),
    ("sim.ist_received", "a joiner receives IST"),
    ("sim.joined_by_snapshot", "a joiner installs a snapshot"),
    (
        "sim.node_stopped_by_a_fatal_error",
        "a node stops on a fatal error and is started again",
    ),
];

#[test]
fn every_mark_is_hit_within_the_first_seeds() {
    let options = SimOptions::default();
    let mut hit: BTreeMap<&str, u64> = BTreeMap::new();
    for seed in 0..SEEDS {
        let report = run_seed(seed, &options).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (mark, hits) in report.marks {
            *hit.entry(mark).or_default() += hits;
        }
    }
    let missing: Vec<String> = EXPECTED
        .iter()
        .filter(|(mark, _)| !hit.contains_key(mark))
        .map(|(mark, meaning)| format!("{mark} ({meaning})"))
        .collect();
    assert!(
        missing.is_empty(),
        "marks not hit in {SEEDS} seeds: {missing:?}; hit: {hit:?}"
    );
}
