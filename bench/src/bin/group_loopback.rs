//! Group-layer benchmark over real loopback TCP.
//!
//! Starts three members on 127.0.0.1 (one bootstraps, two join), waits for a 3-member
//! primary view, then runs one closed-loop submitter per member: each keeps `K` write-sets
//! of its own in flight and submits a new one whenever one of its own is delivered. It
//! measures ordered write-sets per second (deliveries on the first member, after a warm-up)
//! and submit-to-delivery latency at the origin.
//!
//! ```text
//! cargo run --release -p bench --bin group_loopback -- [--seconds N] [--payload BYTES]
//!     [--inflight K[,K...]] [--tick-ms MS] [--warmup S] [--out PATH]
//! ```

// A benchmark is a shell: it reads the real clock and spawns threads.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::RecvTimeoutError;
use std::thread;
use std::time::{Duration, Instant};

use group::{Delivery, GroupConfig};
use transport::{GroupRunner, Role};

struct Args {
    seconds: u64,
    payload: usize,
    inflight: Vec<usize>,
    tick_ms: u64,
    warmup: u64,
    out: PathBuf,
}

const USAGE: &str = "usage: group_loopback [--seconds N] [--payload BYTES] \
[--inflight K[,K...]] [--tick-ms MS] [--warmup S] [--out PATH]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 10,
        payload: 200,
        inflight: vec![64],
        tick_ms: 5,
        warmup: 1,
        out: PathBuf::from("bench-out/group_loopback.json"),
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {value:?}"))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = number(&value)?,
            "--payload" => args.payload = number(&value)? as usize,
            "--tick-ms" => args.tick_ms = number(&value)?,
            "--warmup" => args.warmup = number(&value)?,
            "--out" => args.out = PathBuf::from(value),
            "--inflight" => {
                args.inflight = value
                    .split(',')
                    .map(|k| number(k.trim()).map(|k| k as usize))
                    .collect::<Result<_, _>>()?;
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if args.seconds <= args.warmup {
        return Err("--seconds must exceed --warmup".to_owned());
    }
    if args.tick_ms == 0 || args.inflight.contains(&0) {
        return Err("--tick-ms and --inflight must be positive".to_owned());
    }
    Ok(args)
}

/// Results of one run.
struct Outcome {
    inflight: usize,
    ordered: u64,
    window_s: f64,
    latencies_ns: Vec<u64>,
    cpu_s: f64,
    leader_changes: bool,
}

impl Outcome {
    fn throughput(&self) -> f64 {
        self.ordered as f64 / self.window_s
    }

    fn percentile_us(&self, p: f64) -> f64 {
        if self.latencies_ns.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * (self.latencies_ns.len() - 1) as f64).round() as usize;
        self.latencies_ns[rank] as f64 / 1_000.0
    }
}

/// CPU time (user + system) this process used so far, from /proc (Linux); 0 elsewhere.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
    let ticks: f64 = fields
        .iter()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    // The clock tick is 100 Hz on every Linux configuration that matters here.
    ticks / 100.0
}

fn group_config(tick_ms: u64) -> GroupConfig {
    GroupConfig {
        tick_interval_ns: tick_ms * 1_000_000,
        ..GroupConfig::default()
    }
}

fn wait_for(what: &str, limit: Duration, done: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn run(args: &Args, inflight: usize) -> Result<Outcome, String> {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("a socket address");
    let config = group_config(args.tick_ms);
    let start = |name: &str, role: Role, seed: u64| {
        GroupRunner::start(config.clone(), role, name, any, seed)
            .map_err(|e| format!("starting {name}: {e}"))
    };
    let mut runners = vec![start("node1", Role::Bootstrap, 1)?];
    let seeds = vec![runners[0].local_addr().to_string()];
    runners.push(start(
        "node2",
        Role::Join {
            seeds: seeds.clone(),
            restart: None,
        },
        2,
    )?);
    runners.push(start(
        "node3",
        Role::Join {
            seeds,
            restart: None,
        },
        3,
    )?);
    let mut receivers = Vec::new();
    for runner in &mut runners {
        receivers.push(runner.take_deliveries().ok_or("deliveries already taken")?);
    }
    // Views are delivered while the cluster forms; drain them so nothing backs up.
    wait_for("a 3-member primary view", Duration::from_secs(10), || {
        for receiver in &receivers {
            while receiver.try_recv().is_ok() {}
        }
        runners.iter().all(|r| {
            let status = r.status();
            status.primary && status.members == 3
        })
    })?;
    let leader_before: Vec<bool> = runners.iter().map(|r| r.status().leader).collect();

    let began = Instant::now();
    let measure_from = began + Duration::from_secs(args.warmup);
    let end = began + Duration::from_secs(args.seconds);
    let cpu_before = cpu_seconds();
    let mut threads = Vec::new();
    for (index, (runner, deliveries)) in runners.iter().zip(receivers).enumerate() {
        let handle = runner.handle();
        let payload_len = args.payload;
        let spawned = thread::Builder::new()
            .name(format!("bench-origin-{index}"))
            .spawn(move || -> (u64, Vec<u64>) {
                let payload = vec![0x5a_u8; payload_len];
                let mut in_flight: HashMap<u64, Instant> = HashMap::with_capacity(inflight * 2);
                let mut latencies = Vec::new();
                let mut ordered = 0u64;
                for _ in 0..inflight {
                    match handle.submit(payload.clone()) {
                        Ok(id) => {
                            in_flight.insert(id, Instant::now());
                        }
                        Err(_) => return (ordered, latencies),
                    }
                }
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    let delivery = match deliveries.recv_timeout(end - now) {
                        Ok(delivery) => delivery,
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    let Delivery::WriteSet {
                        local, submit_id, ..
                    } = delivery
                    else {
                        continue;
                    };
                    let now = Instant::now();
                    let in_window = now >= measure_from && now <= end;
                    if index == 0 && in_window {
                        ordered += 1;
                    }
                    if !local {
                        continue;
                    }
                    if let Some(submitted) = in_flight.remove(&submit_id) {
                        if submitted >= measure_from && in_window {
                            latencies.push(now.duration_since(submitted).as_nanos() as u64);
                        }
                    }
                    if now < end {
                        match handle.submit(payload.clone()) {
                            Ok(id) => {
                                in_flight.insert(id, Instant::now());
                            }
                            Err(_) => break,
                        }
                    }
                }
                (ordered, latencies)
            });
        threads.push(spawned.map_err(|e| format!("spawning a submitter: {e}"))?);
    }
    let mut ordered = 0;
    let mut latencies_ns = Vec::new();
    for thread in threads {
        let (count, mut latencies) = thread.join().map_err(|_| "a submitter panicked")?;
        ordered += count;
        latencies_ns.append(&mut latencies);
    }
    let cpu_s = cpu_seconds() - cpu_before;
    let leader_after: Vec<bool> = runners.iter().map(|r| r.status().leader).collect();
    // Sanity: once the submitters stop, every member reaches the same last seqno.
    let converged = wait_for(
        "all members at the same seqno",
        Duration::from_secs(10),
        || {
            let seqnos: Vec<_> = runners.iter().map(|r| r.status().last_delivered).collect();
            seqnos.windows(2).all(|pair| pair[0] == pair[1])
        },
    );
    converged?;
    for runner in &mut runners {
        runner.shutdown();
    }
    latencies_ns.sort_unstable();
    Ok(Outcome {
        inflight,
        ordered,
        window_s: (args.seconds - args.warmup) as f64,
        latencies_ns,
        cpu_s,
        leader_changes: leader_before != leader_after,
    })
}

fn json(args: &Args, outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let number = |v: f64| {
        if v.is_finite() {
            format!("{v:.1}")
        } else {
            "null".to_owned()
        }
    };
    let _ = write!(
        out,
        "{{\n  \"benchmark\": \"group_loopback\",\n  \"members\": 3,\n  \"seconds\": {},\n  \
         \"warmup_seconds\": {},\n  \"payload_bytes\": {},\n  \"tick_ms\": {},\n  \"runs\": [",
        args.seconds, args.warmup, args.payload, args.tick_ms
    );
    for (i, o) in outcomes.iter().enumerate() {
        let _ = write!(
            out,
            "{}\n    {{\"inflight_per_origin\": {}, \"ordered_per_s\": {}, \"ordered\": {}, \
             \"latency_samples\": {}, \"p50_us\": {}, \"p95_us\": {}, \"p99_us\": {}, \
             \"cpu_s\": {:.2}, \"leader_changed\": {}}}",
            if i == 0 { "" } else { "," },
            o.inflight,
            number(o.throughput()),
            o.ordered,
            o.latencies_ns.len(),
            number(o.percentile_us(50.0)),
            number(o.percentile_us(95.0)),
            number(o.percentile_us(99.0)),
            o.cpu_s,
            o.leader_changes
        );
    }
    out.push_str("\n  ]\n}\n");
    out
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let mut outcomes = Vec::new();
    for &inflight in &args.inflight {
        eprintln!(
            "running: 3 members, {inflight} in flight per origin, {} s",
            args.seconds
        );
        match run(&args, inflight) {
            Ok(outcome) => outcomes.push(outcome),
            Err(message) => {
                eprintln!("group_loopback: {message}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "\n3 members on 127.0.0.1, payload {} B, tick {} ms, {} s measured after {} s warm-up\n",
        args.payload,
        args.tick_ms,
        args.seconds - args.warmup,
        args.warmup
    );
    println!(
        "| in flight / origin | ordered write-sets/s | p50 (µs) | p95 (µs) | p99 (µs) | CPU s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for o in &outcomes {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
            o.inflight,
            o.throughput(),
            o.percentile_us(50.0),
            o.percentile_us(95.0),
            o.percentile_us(99.0),
            o.cpu_s
        );
        if o.leader_changes {
            println!(
                "(leadership moved during the run with {} in flight)",
                o.inflight
            );
        }
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(error) = std::fs::create_dir_all(dir) {
            eprintln!("group_loopback: creating {}: {error}", dir.display());
            return ExitCode::FAILURE;
        }
    }
    if let Err(error) = std::fs::write(&args.out, json(&args, &outcomes)) {
        eprintln!("group_loopback: writing {}: {error}", args.out.display());
        return ExitCode::FAILURE;
    }
    println!("\nwrote {}", args.out.display());
    ExitCode::SUCCESS
}
