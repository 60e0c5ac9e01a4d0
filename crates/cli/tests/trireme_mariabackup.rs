//! A node joins a Trireme cluster through MariaDB's own `wsrep_sst_mariabackup` script:
//! a hot backup of the donor streamed over socat, with the donor DONOR/DESYNCED meanwhile
//! and SYNCED again after. Writes made while the joiner was away reach it.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{assert_equal_at_rest, new_cluster_dir, preflight, trireme_provider, value};

#[test]
fn a_joiner_gets_its_data_by_mariabackup() {
    let provider = trireme_provider();
    preflight(&provider);
    let (guard, base_port) = new_cluster_dir();
    let mut options = UpOptions::new(guard.path());
    options.nodes = Some(2);
    options.provider = Some(provider);
    options.base_port = Some(base_port);
    options.sst_method = Some(SstMethod::Mariabackup);
    let cluster = Cluster::up(&options).unwrap_or_else(|e| panic!("cluster up: {e:#}"));
    assert!(
        cluster
            .error_log_tail(2, 400)
            .contains("wsrep_sst_mariabackup"),
        "node 2 joined through the mariabackup script"
    );
    cluster
        .sql(
            1,
            "CREATE DATABASE mb; CREATE TABLE mb.t (id INT PRIMARY KEY, v INT); \
             INSERT INTO mb.t SELECT seq, seq FROM mb.seq_1_to_5000",
        )
        .unwrap();
    cluster.stop_node(2).unwrap();
    cluster
        .sql(1, "INSERT INTO mb.t SELECT seq, 0 FROM mb.seq_5001_to_6000")
        .unwrap();
    cluster
        .start_node(2)
        .unwrap_or_else(|e| panic!("node 2 rejoins by mariabackup: {e:#}"));
    assert_equal_at_rest(&cluster, &["mb.t"]);
    assert_eq!(
        value(&cluster, 2, "SELECT COUNT(*) FROM mb.t"),
        "6000",
        "the rows written while node 2 was away arrived"
    );
    assert!(
        cluster.node_status(1).is_synced(),
        "the donor is SYNCED again"
    );
    cluster.down().unwrap();
    drop(guard);
}
