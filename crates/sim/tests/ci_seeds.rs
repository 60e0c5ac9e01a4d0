//! The CI-sized simulator run: 200 seeds with every kind of fault, each checked by all the
//! checkers (same deliveries, same verdicts, consecutive seqnos, ordered commits, no write
//! applied before one it depends on, no lost acknowledged write, equal synced databases,
//! liveness after the heal, every damaged or forged message and stream that must be refused
//! refused).

use sim::{run_seed, SimOptions};

#[test]
fn two_hundred_seeds_with_faults_pass() {
    let options = SimOptions::default();
    let failures: Vec<String> = (0..200u64)
        .filter_map(|seed| {
            run_seed(seed, &options).err().map(|message| {
                format!("seed {seed}: {message}\n  replay: cargo run --release -p sim -- --seeds {seed}")
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn faults_really_happen_in_the_ci_seeds() {
    // A simulator that injects nothing proves nothing: the same seeds must crash nodes and
    // move state by transfer.
    let options = SimOptions::default();
    let reports: Vec<_> = (0..40u64)
        .map(|seed| run_seed(seed, &options).unwrap())
        .collect();
    assert!(reports.iter().map(|r| r.crashes).sum::<u64>() >= 5);
    assert!(
        reports.iter().any(|r| r.transfers() > r.nodes as u64 - 1),
        "restarted nodes got state"
    );
    let total = |count: fn(&sim::SimReport) -> u64| reports.iter().map(count).sum::<u64>();
    assert!(total(|r| r.joins_by_ist) > 0, "nodes join by IST");
    assert!(total(|r| r.joins_by_sst) > 0, "nodes join by SST");
    assert!(total(|r| r.fragments) > 0, "transactions stream fragments");
    assert!(
        total(|r| r.replays) > 0,
        "brute-force aborted transactions replay"
    );
    assert!(
        total(|r| r.refused_streams) > 0,
        "damaged and cut streams are refused"
    );
    assert!(
        reports.iter().map(|r| r.cert_failures).sum::<u64>() > 0,
        "conflicts happen"
    );
    let with = |count: fn(&sim::SimReport) -> u64| reports.iter().filter(|r| count(r) > 0).count();
    assert!(
        with(|r| r.refused_damaged) >= 30,
        "damaged frames reach most runs"
    );
    assert!(
        with(|r| r.refused_forgeries) >= 20,
        "forged messages reach many runs"
    );
}
