//! `sim --seeds A..B`: runs the deterministic simulator over a range of seeds.
//!
//! Prints one line per failing seed with the command that replays it, a summary line, and
//! exits non-zero if any seed failed.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use sim::{run_seed, SimOptions, SimReport};

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

/// What the passing seeds did, added up for the summary.
#[derive(Default)]
struct Totals {
    committed: i64,
    acknowledged: u64,
    causal_reads: u64,
    joins_by_ist: u64,
    joins_by_sst: u64,
    crashes: u64,
    fragments: u64,
    replays: u64,
    refused: u64,
    /// Mark -> (hits, seeds that hit it).
    marks: BTreeMap<&'static str, (u64, u64)>,
}

impl Totals {
    fn add(&mut self, report: &SimReport) {
        self.committed += report.committed;
        self.acknowledged += report.acknowledged;
        self.causal_reads += report.causal_reads;
        self.joins_by_ist += report.joins_by_ist;
        self.joins_by_sst += report.joins_by_sst;
        self.crashes += report.crashes;
        self.fragments += report.fragments;
        self.replays += report.replays;
        self.refused += report.refused_damaged + report.refused_forgeries + report.refused_streams;
        for (mark, hits) in &report.marks {
            let entry = self.marks.entry(mark).or_default();
            entry.0 += hits;
            entry.1 += 1;
        }
    }

    fn print(&self, seeds: u64, seconds: f64, with_marks: bool) {
        println!(
            "sim: {seeds} seeds, {} seqnos committed, {} client commits acknowledged, {} \
             causal reads checked, {} joins by IST and {} by SST, {} crashes, {} streaming \
             fragments, {} replays, {} bad messages or streams refused, {} marks hit, {seconds:.1} s",
            self.committed,
            self.acknowledged,
            self.causal_reads,
            self.joins_by_ist,
            self.joins_by_sst,
            self.crashes,
            self.fragments,
            self.replays,
            self.refused,
            self.marks.len(),
        );
        if with_marks {
            for (mark, (hits, seeds_hit)) in &self.marks {
                println!("sim: mark {mark}: {hits} hits in {seeds_hit} seeds");
            }
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
    let mut totals = Totals::default();
    let count = seeds.end - seeds.start;
    for seed in seeds {
        match run_seed(seed, &options) {
            Ok(report) => {
                totals.add(&report);
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
    totals.print(count, started.elapsed().as_secs_f64(), arguments.marks);
    println!("sim: {} passed, {failed} failed", count - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
