//! `trireme status`'s reader against a metrics endpoint that speaks TLS (a node with
//! `socket.ssl` on): with a certificate of the cluster's CA it reads; in clear, or as a
//! client of another CA, it reads nothing.
//! Certificates by `scripts/make-test-certs.sh`; the endpoint is the provider's own server.

#![allow(clippy::disallowed_methods)] // a socket test

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cli::endpoint::Reader;
use metrics::families::{single, Kind};
use metrics::{MetricFamily, MetricsServer, Source};
use tls::{Labels, TlsContext, TlsFiles};

struct Node;

impl Source for Node {
    fn metrics(&self) -> Vec<MetricFamily> {
        vec![single(Kind::Gauge, "wsrep_cluster_size", "Members.", 3.0)]
    }
    fn status_json(&self) -> String {
        r#"{"node":"node1","members":[]}"#.to_owned()
    }
    fn sample(&self) {}
}

fn context(dir: &Path, key: &str, cert: &str, ca: &str) -> TlsContext {
    TlsContext::load(TlsFiles {
        key: dir.join(key),
        cert: dir.join(cert),
        ca: Some(dir.join(ca)),
        password_file: None,
        cipher: None,
        labels: Labels::CLI,
    })
    .unwrap()
}

#[test]
fn a_tls_endpoint_is_read_with_a_certificate_of_the_cluster_ca_only() {
    let dir: PathBuf = tempfile::tempdir().unwrap().keep();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-test-certs.sh");
    assert!(Command::new(script).arg(&dir).status().unwrap().success());
    let node = Arc::new(context(&dir, "node.key", "node.pem", "ca.pem"));
    let server =
        MetricsServer::start("127.0.0.1:0".parse().unwrap(), Some(node), Arc::new(Node)).unwrap();
    let address = server.local_addr().to_string();

    let reader = Reader::tls(&context(&dir, "node-b.key", "node-b.pem", "ca.pem"));
    let scrape = reader.scrape(&address).unwrap();
    assert_eq!(scrape.value("wsrep_cluster_size"), Some(3.0));
    assert_eq!(reader.status_json(&address).unwrap()["node"], "node1");

    assert!(
        Reader::plain().scrape(&address).is_err(),
        "no answer in clear"
    );
    let stranger = Reader::tls(&context(&dir, "rogue.key", "rogue.pem", "rogue-ca.pem"));
    assert!(
        stranger.scrape(&address).is_err(),
        "a client of another CA reads nothing"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
