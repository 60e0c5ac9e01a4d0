//! A JOINED member's catch-up: its flow-control limit starts above the backlog it had when
//! it turned JOINED and glides down to the SYNCED limits over `gcs.catch_up_period`.

mod common;

use base::{NodeState, SYNCED_QUEUE_MAX};
use common::{Cluster, TICK_NS};
use group::{FlowTriggers, CATCH_UP_PERIOD_DEFAULT};

/// The test members' catch-up period: the default.
const CATCH_UP_NS: u64 = CATCH_UP_PERIOD_DEFAULT.as_nanos() as u64;

/// The test members' `gcs.fc_limit` of 4, scaled for 3 members (as `GroupConfig` does).
const STOP_ABOVE: u64 = 7;

/// A 3-member group, all SYNCED but node 1, which turns JOINED with `backlog` queued.
fn joined_with(backlog: u64) -> Cluster {
    let mut cluster = Cluster::new(3);
    for index in 0..3 {
        cluster.node(index).set_local_state(NodeState::Synced);
    }
    cluster.node(1).set_local_state(NodeState::Joiner);
    cluster.run(10);
    cluster.node(1).report_apply_queue(backlog);
    cluster.node(1).set_local_state(NodeState::Joined);
    cluster.run(10);
    cluster
}

fn ticks(nanos: u64) -> usize {
    usize::try_from(nanos / TICK_NS).unwrap()
}

#[test]
fn a_joined_member_pauses_the_group_only_to_stay_under_its_gliding_limit() {
    let backlog = 1_000;
    let mut cluster = joined_with(backlog);
    assert!(
        !cluster.node(0).status().paused,
        "its whole backlog is allowed when JOINED begins"
    );
    let stop_above = cluster.node(1).flow_triggers().stop_above.unwrap();
    assert!(
        (STOP_ABOVE + backlog - 5..=STOP_ABOVE + backlog).contains(&stop_above),
        "{stop_above}"
    );
    // Halfway through, with nothing worked off, it is over the limit: it stops the group.
    cluster.run(ticks(CATCH_UP_NS / 2));
    assert!(cluster.node(0).status().paused);
    assert_eq!(cluster.node(0).status().paused_by, ["node1"]);
    // Worked off down to what the glide allows by now: it lets go.
    let allowed = backlog / 2 - 10;
    cluster.node(1).report_apply_queue(allowed);
    cluster.run(10);
    assert!(!cluster.node(0).status().paused);
    let stop_above = cluster.node(1).flow_triggers().stop_above.unwrap();
    assert!(stop_above < STOP_ABOVE + backlog / 2, "{stop_above}");
}

#[test]
fn once_the_glide_ends_a_joined_member_pauses_until_its_queue_is_short_enough_to_sync() {
    let mut cluster = joined_with(1_000);
    // Still JOINED (the engine has not turned it SYNCED yet), its queue never over the
    // glide, whose end is the SYNCED limit.
    cluster.node(1).report_apply_queue(STOP_ABOVE);
    cluster.run(ticks(CATCH_UP_NS) + 10);
    assert!(
        !cluster.node(0).status().paused,
        "under the glide all along"
    );
    assert_eq!(
        cluster.node(1).flow_triggers().stop_above,
        Some(STOP_ABOVE),
        "the SYNCED limit"
    );
    cluster.node(1).report_apply_queue(STOP_ABOVE + 1);
    cluster.run(10);
    assert!(cluster.node(0).status().paused);
    let resume_at = cluster.node(1).flow_triggers().resume_at_or_below.unwrap();
    assert!(resume_at <= SYNCED_QUEUE_MAX, "{resume_at}");
    cluster.node(1).report_apply_queue(resume_at);
    cluster.run(10);
    assert!(!cluster.node(0).status().paused);
}

#[test]
fn a_member_that_turns_synced_drops_its_catch_up_allowance() {
    let mut cluster = joined_with(1_000);
    cluster.node(1).report_apply_queue(3);
    cluster.node(1).set_local_state(NodeState::Synced);
    cluster.run(10);
    assert_eq!(
        cluster.node(1).flow_triggers(),
        FlowTriggers {
            stop_above: Some(STOP_ABOVE),
            resume_at_or_below: None
        }
    );
    cluster.node(1).report_apply_queue(STOP_ABOVE + 1);
    cluster.run(10);
    assert!(cluster.node(0).status().paused, "the SYNCED limit holds");
}

#[test]
fn a_shorter_catch_up_period_set_at_runtime_takes_effect_at_once() {
    let mut cluster = joined_with(1_000);
    let mut shorter = common::config();
    shorter
        .apply_option("gcs.catch_up_period", "PT10S")
        .unwrap();
    cluster.node(1).reconfigure(&shorter);
    cluster.node(1).report_apply_queue(STOP_ABOVE);
    cluster.run(ticks(10_000_000_000) + 10);
    assert_eq!(
        cluster.node(1).flow_triggers().stop_above,
        Some(STOP_ABOVE),
        "10 s after JOINED began, the glide is over"
    );
}
