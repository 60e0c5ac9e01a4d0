//! `sim --seeds A..B`: runs the deterministic simulator over a range of seeds.
//!
//! Prints one line per failing seed with the command that replays it, a summary line, and
//! exits non-zero if any seed failed.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use sim::{run_seed, SimOptions};

/// Deterministic simulation of a Trireme cluster.
#[derive(Parser)]
#[command(name = "sim")]
struct Arguments {
    /// Seeds to run, as START..END (END exclusive) or a single seed.
    #[arg(long, default_value = "0..100")]
    seeds: String,
    /// Run without network faults, partitions, crashes, or damaged and forged messages.
    #[arg(long)]
    no_faults: bool,
    /// Client transactions per seed.
    #[arg(long, default_value_t = 400)]
    transactions: u64,
    /// Print a line for every seed, not just the failing ones.
    #[arg(long)]
    verbose: bool,
    /// Print how often each coverage mark was hit, and in how many seeds.
    #[arg(long)]
    marks: bool,
}

fn parse_seeds(text: &str) -> Result<std::ops::Range<u64>, String> {
    let bad = || format!("--seeds wants START..END or one seed, got {text:?}");
    match text.split_once("..") {
        Some((start, end)) => {
            let start: u64 = start.trim().parse().map_err(|_| bad())?;
            let end: u64 = end.trim().parse().map_err(|_| bad())?;
            if end <= start {
                return Err(bad());
            }
            Ok(start..end)
        }
        None => {
            let seed: u64 = text.trim().parse().map_err(|_| bad())?;
            Ok(seed..seed + 1)
        }
    }
}

#[allow(clippy::disallowed_methods)] // Wall time of the whole sweep, for the summary only.
fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let seeds = match parse_seeds(&arguments.seeds) {
        Ok(seeds) => seeds,
        Err(message) => {
            eprintln!("sim: {message}");
            return ExitCode::from(2);
        }
    };
    let options = SimOptions {
        faults: !arguments.no_faults,
        transactions: arguments.transactions,
        ..SimOptions::default()
    };
    // Panics inside a seed are caught and reported as that seed's failure.
    // A failing seed says why in its line; SIM_TRACE=1 keeps the panic's own report too.
    if std::env::var_os("SIM_TRACE").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let started = Instant::now();
    let mut failed = 0u64;
    let mut committed = 0i64;
    let mut causal_reads = 0u64;
    let mut transfers = 0u64;
    let mut crashes = 0u64;
    // Mark -> (hits, seeds that hit it).
    let mut marks: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    let count = seeds.end - seeds.start;
    for seed in seeds {
        match run_seed(seed, &options) {
            Ok(report) => {
                committed += report.committed;
                causal_reads += report.causal_reads;
                transfers += report.transfers();
                crashes += report.crashes;
                for (mark, hits) in &report.marks {
                    let entry = marks.entry(mark).or_default();
                    entry.0 += hits;
                    entry.1 += 1;
                }
                if arguments.verbose {
                    println!("seed {seed}: ok {report:?}");
                }
            }
            Err(message) => {
                failed += 1;
                let faults = if options.faults { "" } else { " --no-faults" };
                println!(
                    "seed {seed}: FAILED: {message}\n  replay: cargo run --release -p sim -- \
                     --seeds {seed} --transactions {}{faults}",
                    options.transactions
                );
            }
        }
    }
    println!(
        "sim: {count} seeds, {committed} seqnos committed, {causal_reads} causal reads \
         checked, {transfers} state transfers, {crashes} crashes, {} marks hit, {:.1} s",
        marks.len(),
        started.elapsed().as_secs_f64()
    );
    if arguments.marks {
        for (mark, (hits, seeds_hit)) in &marks {
            println!("sim: mark {mark}: {hits} hits in {seeds_hit} seeds");
        }
    }
    println!("sim: {} passed, {failed} failed", count - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
