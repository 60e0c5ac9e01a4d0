//! gcache append throughput against the disk's sequential write bandwidth, in one run:
//! appends `--mib` MiB of `--record`-byte write-sets to a fresh cache (ring of `--ring-mib`,
//! overflowing into pages when the freeze is on), then writes the same number of bytes with
//! `dd` into the same directory, both followed by an fsync so that the page cache does not
//! flatter either side. Prints both rates and the ratio.
//!
//! ```text
//! cargo run --release -p bench --bin gcache_append -- --dir /var/tmp --mib 2048
//! ```

// A benchmark: it times real writes with the wall clock.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use base::{Seqno, Uuid};
use clap::Parser;
use gcache::{Gcache, GcacheConfig};

#[derive(Parser)]
struct Args {
    /// Directory for the cache and the dd file (on the disk to measure).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// MiB to write, on each side.
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Bytes per write-set.
    #[arg(long, default_value_t = 1024)]
    record: usize,
    /// Size of the cache's ring file, in MiB.
    #[arg(long, default_value_t = 512)]
    ring_mib: u64,
}

fn fsync_dir_files(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)?
                .sync_all()?;
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let work = tempfile_dir(&args.dir)?;
    let cache_dir = work.join("gcache");
    let mut config = GcacheConfig::new(&cache_dir);
    config.size = args.ring_mib << 20;
    config.page_size = 128 << 20;
    let mut cache = Gcache::open(config, Uuid([7; 16]))?;
    let payload: Vec<u8> = (0..args.record).map(|i| (i * 31 % 251) as u8).collect();
    let records = (args.mib << 20) / args.record as u64;
    let started = Instant::now();
    let mut now = 1_700_000_000_000_000_000u64;
    for i in 1..=records {
        now += 1_000;
        cache.append(Seqno(i as i64), 1, &payload, now)?;
    }
    fsync_dir_files(&cache_dir)?;
    let gcache_seconds = started.elapsed().as_secs_f64();
    drop(cache);
    std::fs::remove_dir_all(&cache_dir)?;

    let dd_file = work.join("dd.out");
    let started = Instant::now();
    let status = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", dd_file.display()))
        .args([
            "bs=1M",
            &format!("count={}", args.mib),
            "conv=fsync",
            "status=none",
        ])
        .status()?;
    let dd_seconds = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&work)?;
    if !status.success() {
        return Err(format!("dd failed: {status}").into());
    }
    let mib = args.mib as f64;
    let gcache_rate = mib / gcache_seconds;
    let dd_rate = mib / dd_seconds;
    println!(
        "gcache append: {records} write-sets of {} bytes, {mib:.0} MiB in {gcache_seconds:.2} s \
         = {gcache_rate:.0} MiB/s ({:.0} write-sets/s)",
        args.record,
        records as f64 / gcache_seconds
    );
    println!("dd sequential:  {mib:.0} MiB in {dd_seconds:.2} s = {dd_rate:.0} MiB/s");
    println!("ratio gcache / dd: {:.2}", gcache_rate / dd_rate);
    Ok(())
}

/// A fresh directory under `parent`, removed by the caller.
fn tempfile_dir(parent: &std::path::Path) -> std::io::Result<PathBuf> {
    let dir = parent.join(format!("trireme-gcache-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
