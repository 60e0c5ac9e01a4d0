//! A short fault campaign on three hosts: bank transfers from every host while nodes are
//! killed, frozen, cut off (the leader too) and restarted, one fault at a time; nothing
//! acknowledged may be lost, nothing invented, money is conserved, balances match the
//! ledger and every node ends equal. `trireme campaign --seconds 3600` runs a long one.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::time::Duration;

use cli::campaign::{self, CampaignOptions};
use cli::Cluster;

mod common;
use common::{preflight, trireme_provider};

/// Seconds of faults: about two minutes, as CI affords (a fault with its calm, hold and
/// recovery takes 20-40 s, so at least four come).
const SECONDS: u64 = 130;

#[test]
fn a_short_fault_campaign_loses_nothing() {
    let provider = trireme_provider();
    preflight(&provider);
    let parent = tempfile::Builder::new()
        .prefix("trireme-campaign-")
        .tempdir()
        .unwrap();
    let dir = parent.path().join("cluster");
    // A different schedule on every run of the suite, printed so that a failure replays.
    let seed = std::env::var("TRIREME_CAMPAIGN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()));
    eprintln!("campaign seed {seed} (TRIREME_CAMPAIGN_SEED replays it)");
    let opts = CampaignOptions {
        dir: dir.clone(),
        provider,
        nodes: 3,
        seed,
        duration: Duration::from_secs(SECONDS),
        clients_per_host: 2,
    };
    let outcome = campaign::run(&opts, &mut |line| eprintln!("campaign: {line}"));
    if let Ok(cluster) = Cluster::open(&dir) {
        if let Err(error) = cluster.down() {
            eprintln!("cleanup: {error:#}");
        }
    }
    let report = outcome.expect("the campaign runs");
    eprintln!("{}", report.summary());
    assert!(report.problems.is_empty(), "{}", report.summary());
    assert!(report.faults.len() >= 4, "{}", report.summary());
    assert!(report.acknowledged >= 1000, "{}", report.summary());
}
