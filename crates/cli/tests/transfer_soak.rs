//! The transfer soak's short form on real MariaDB servers: one round of each state transfer
//! (trireme, rsync and mariabackup SST of an emptied node, IST after a clean stop, a rejoin
//! after a freeze past eviction) under sysbench on node 1 and large transactions on node 2,
//! each followed by a comparison of the three nodes at rest. Round 1 pins the donor to
//! node 1, the loaded node: the rsync donor pauses its provider under FLUSH TABLES WITH READ
//! LOCK while sysbench keeps committing there. `trireme soak` runs the long form.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::time::Duration;

use cli::load::LoadOptions;
use cli::soak::{Soak, SoakOptions, TransferKind};
use cli::RestOptions;

mod common;
use common::{new_cluster_dir, preflight, trireme_provider};

#[test]
fn every_transfer_under_load_leaves_the_nodes_equal_at_rest() {
    let provider = trireme_provider();
    preflight(&provider);
    cli::sst_script_dir().expect("wsrep_sst_trireme is built (scripts/test.sh builds it)");
    let (guard, base_port) = new_cluster_dir();
    let opts = SoakOptions {
        dir: guard.path().to_path_buf(),
        provider: Some(provider),
        base_port,
        server_options: None,
        load: LoadOptions {
            tables: 2,
            table_size: 20_000,
            threads: 4,
            large_rows: 20_000,
            sysbench_node: 1,
            large_node: 2,
        },
        rounds: 1,
        kinds: TransferKind::ALL.to_vec(),
        transfer_timeout: Duration::from_secs(300),
        warmup: Duration::from_secs(3),
        rest: RestOptions {
            settle: Duration::from_secs(1),
            timeout: Duration::from_secs(180),
        },
    };
    let mut soak = Soak::create(opts).unwrap_or_else(|e| panic!("soak cluster: {e:#}"));
    let outcome = soak.run(&mut |line| eprintln!("{line}"));
    eprint!("{}", soak.summary());
    if let Err(error) = outcome {
        panic!("{error:#}");
    }
    let records = soak.records();
    assert_eq!(
        records.iter().map(|r| r.kind).collect::<Vec<_>>(),
        TransferKind::ALL,
        "one round of every transfer"
    );
    assert!(
        records.iter().all(|r| r.donor == 1),
        "round 1 pins the loaded node as donor"
    );
    assert!(
        records.windows(2).all(|w| w[1].seqno > w[0].seqno),
        "the load committed during every round: {records:?}"
    );
    assert!(
        records.iter().all(|r| r.load.transactions > 0),
        "sysbench committed in every round: {records:?}"
    );
    assert!(
        records.iter().any(|r| r.load.large.committed > 0),
        "large transactions committed: {records:?}"
    );
    soak.remove().unwrap_or_else(|e| panic!("{e:#}"));
    drop(guard);
}
