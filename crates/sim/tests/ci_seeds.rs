//! The CI-sized simulator run: 200 seeds with every kind of fault, each checked by all the
//! checkers (same deliveries, same verdicts, consecutive seqnos, ordered commits, no lost
//! acknowledged write, equal synced databases, liveness after the heal, every damaged or
//! forged message that must be refused refused).

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
        reports.iter().any(|r| r.transfers > r.nodes as u64 - 1),
        "restarted nodes got state"
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
