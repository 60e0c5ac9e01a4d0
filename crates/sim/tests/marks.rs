//! The simulator reaches the rare branches it is meant to test: every coverage mark below
//! is hit within the first [`SEEDS`] seeds of the fault sweep. A mark that stops being hit
//! means a change made the simulator blind to that branch (or removed the branch).

use std::collections::BTreeMap;

use sim::{run_seed, SimOptions};

/// Seeds of the default fault sweep that must hit every mark.
const SEEDS: u64 = 200;

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
        "a stop from a member not SYNCED is ignored",
    ),
    (
        "group.flow_stop_lifted_for_silence",
        "the stop of a member gone silent is lifted",
    ),
    ("sim.two_nodes_crashed_at_once", "a double failure"),
    ("sim.node_made_slow", "a slow node"),
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
