//! `trireme-arbitrator` beside two nodes on loopback: it joins under the nodes' TLS, and an
//! arbitrator without TLS is refused, with the reason in both logs.

#![allow(clippy::disallowed_methods)] // a shell test: real processes and the wall clock

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cli::{Cluster, SstMethod, UpOptions};

mod common;
use common::{make_certs, new_cluster_dir, preflight, trireme_provider, wait_for};

/// The arbitrator's program on PATH (`scripts/test.sh` puts its build directory there).
fn arbitrator_program() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("trireme-arbitrator"))
        .find(|path| path.is_file())
        .expect(
            "trireme-arbitrator on PATH: put the directory of a `cargo build -p arbitrator` there",
        )
}

fn certs_for_the_server_user(dir: &Path) {
    make_certs(dir);
    fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn an_arbitrator_joins_under_the_nodes_tls_and_one_without_it_is_refused() {
    let (guard, base_port) = new_cluster_dir();
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = certs_dir.path();
    certs_for_the_server_user(certs);
    let provider = trireme_provider();
    preflight(&provider);
    let mut opts = UpOptions::new(guard.path());
    opts.nodes = Some(2);
    opts.arbitrator = Some(true);
    opts.base_port = Some(base_port);
    opts.provider = Some(provider);
    opts.sst_method = Some(SstMethod::Rsync);
    opts.provider_options = Some(format!(
        "socket.ssl_key={}; socket.ssl_cert={}; socket.ssl_ca={}",
        certs.join("node.key").display(),
        certs.join("node.pem").display(),
        certs.join("ca.pem").display()
    ));
    // `up` waits until both nodes count the arbitrator: 3 members.
    let cluster = Cluster::up(&opts).expect("two TLS nodes and their arbitrator come up");
    for node in 1..=2 {
        assert_eq!(cluster.node_status(node).cluster_size(), Some(3));
    }
    let log = fs::read_to_string(cluster.config().arbitrator_log()).unwrap();
    assert!(
        log.contains("TLS ready"),
        "the arbitrator does not say it runs TLS:\n{log}"
    );

    let plain_log = guard.path().join("plaintext-arbitrator.log");
    let listen = format!("gmcast.listen_addr=tcp://127.0.0.1:{}", base_port + 190);
    let mut plain = Command::new(arbitrator_program())
        .args([
            "-a",
            &cluster.config().cluster_address(),
            "-g",
            "trireme",
            "-n",
            "plain",
        ])
        .args(["-o", &listen])
        .arg("-l")
        .arg(&plain_log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("trireme-arbitrator starts");
    let refused = "runs TLS (socket.ssl_key, socket.ssl_cert) and the peer speaks plaintext";
    wait_for(
        "the plaintext arbitrator told why it is refused",
        Duration::from_secs(20),
        || fs::read_to_string(&plain_log).is_ok_and(|log| log.contains(refused)),
    );
    let node_log = cluster.error_log_tail(1, usize::MAX);
    assert!(
        node_log.contains("speaks plaintext"),
        "node1 does not log the plaintext peer it refused"
    );
    for node in 1..=2 {
        assert_eq!(
            cluster.node_status(node).cluster_size(),
            Some(3),
            "the plaintext arbitrator got in"
        );
    }
    plain.kill().unwrap();
    plain.wait().unwrap();
    cluster.down().unwrap();
    assert!(
        cluster.arbitrator_pid().is_none(),
        "down stops the arbitrator"
    );
}
