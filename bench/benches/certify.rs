//! Certification throughput in a steady state: write-sets of 10 row keys each, from three
//! nodes, with a small `last_seen` lag and periodic purges holding a few thousand seqnos in
//! the index.

use base::{KeyType, Seqno, Uuid};
use cert::{CertConfig, Certifier};
use criterion::{black_box, Criterion, Throughput};
use writeset::{flags, Key, WriteSet};

/// Write-sets certified per benchmark iteration.
const BATCH: usize = 8192;
/// Keys per write-set.
const KEYS: usize = 10;
/// Distinct rows per table: large enough that conflicts are rare, as in a healthy cluster.
const ROWS: u64 = 1 << 20;
/// Seqnos kept in the index between purges.
const WINDOW: i64 = 4096;
/// Seqnos between two purges.
const PURGE_EVERY: i64 = 256;

/// SplitMix64: a fixed input sequence without pulling in a random number crate.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The write-sets and the `last_seen` lag of each.
fn workload() -> Vec<(WriteSet, i64)> {
    let mut rng = Mix(42);
    let tables: [&[u8]; 4] = [b"orders", b"order_lines", b"customers", b"stock"];
    (0..BATCH)
        .map(|i| {
            let table = tables[(rng.next() % 4) as usize];
            let keys = (0..KEYS)
                .map(|_| {
                    let pk = (rng.next() % ROWS).to_be_bytes();
                    let key_type = if rng.next() % 10 < 7 {
                        KeyType::Update
                    } else {
                        KeyType::Exclusive
                    };
                    Key {
                        parts: vec![b"shop".to_vec(), table.to_vec(), pk.to_vec()],
                        key_type,
                    }
                })
                .collect();
            let ws = WriteSet {
                source: Uuid([(i % 3) as u8 + 1; 16]),
                conn_id: 1,
                trx_id: i as u64,
                last_seen: Seqno::UNDEFINED,
                flags: flags::TRX_START | flags::TRX_END,
                keys,
                data: Vec::new().into(),
            };
            (ws, (rng.next() % 4) as i64)
        })
        .collect()
}

fn certify(c: &mut Criterion) {
    let mut batch = workload();
    let mut cert = Certifier::new(CertConfig::default());
    let run = |cert: &mut Certifier, batch: &mut [(WriteSet, i64)]| {
        let mut passed = 0usize;
        for (ws, lag) in batch.iter_mut() {
            let seqno = cert.position().next();
            ws.last_seen = Seqno((seqno.0 - 1 - *lag).max(cert.purged_to().0));
            passed += usize::from(cert.certify(seqno, ws).is_pass());
            if seqno.0 % PURGE_EVERY == 0 {
                cert.purge_to(Seqno(seqno.0 - WINDOW));
            }
        }
        passed
    };
    // Fill the index to its steady-state size before measuring.
    for _ in 0..2 {
        run(&mut cert, &mut batch);
    }

    let mut group = c.benchmark_group("cert");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("certify_10_keys", |b| {
        b.iter(|| black_box(run(&mut cert, &mut batch)));
    });
    group.finish();
    eprintln!("index after the run: {cert:?}");
}

// Written out instead of `criterion_main!`, whose generated `pub fn` has no doc comment.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    certify(&mut criterion);
    criterion.final_summary();
}
