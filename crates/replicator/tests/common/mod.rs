//! Helpers shared by the replicator's loopback tests.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::TcpListener;
use std::time::Duration;

use group::GroupConfig;
use replicator::Settings;

/// A port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Settings of a node named `name` on free loopback ports, with a fast group tick.
pub(crate) fn settings(name: &str) -> Settings {
    let mut group = GroupConfig::default();
    group.tick_interval_ns = 5_000_000;
    let ist_address = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    Settings {
        node_name: name.into(),
        incoming_address: "127.0.0.1:3306".into(),
        listen: format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        group,
        seed: name.bytes().map(u64::from).sum(),
        causal_read_timeout: Duration::from_secs(5),
        ist_address,
        ist_bind: ist_address,
        state_dir: None,
        history: None,
        gcache: None,
    }
}

/// Polls `done` every 10 ms; panics after 10 s.
pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}
