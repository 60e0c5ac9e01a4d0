//! The endpoint over real sockets: what each path serves, what it refuses, a port in use,
//! a silent client, the sampling, and TLS with the node's certificates (made by
//! `scripts/make-test-certs.sh`).

// A test of sockets and threads: the shell-crate allowance.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use metrics::families::{single, Kind};
use metrics::{MetricFamily, MetricsError, MetricsServer, Source};
use tls::{Labels, TlsContext, TlsFiles};

/// A source with one gauge, counting the samples it is asked for.
#[derive(Default)]
struct Fake {
    samples: AtomicU64,
}

impl Source for Fake {
    fn metrics(&self) -> Vec<MetricFamily> {
        vec![single(Kind::Gauge, "wsrep_local_recv_queue", "Queue.", 7.0)]
    }
    fn status_json(&self) -> String {
        r#"{"node":"n1"}"#.to_owned()
    }
    fn sample(&self) {
        self.samples.fetch_add(1, Ordering::Relaxed);
    }
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn get(address: SocketAddr, path: &str) -> Result<(u16, String), Box<ureq::Error>> {
    let response = ureq::get(&format!("http://{address}{path}"))
        .timeout(Duration::from_secs(5))
        .call()
        .map_err(Box::new)?;
    let status = response.status();
    Ok((status, response.into_string().unwrap()))
}

fn status_of(result: Result<(u16, String), Box<ureq::Error>>) -> u16 {
    match result {
        Ok((status, _)) => status,
        Err(error) => match *error {
            ureq::Error::Status(status, _) => status,
            other => panic!("{other}"),
        },
    }
}

#[test]
fn each_path_serves_its_content_and_the_rest_is_refused() {
    let source = Arc::new(Fake::default());
    let server = MetricsServer::start(loopback(), None, source.clone()).unwrap();
    let address = server.local_addr();
    let (status, text) = get(address, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(text.contains("wsrep_local_recv_queue 7"), "{text}");
    assert_eq!(get(address, "/status.json").unwrap().1, r#"{"node":"n1"}"#);
    let (_, page) = get(address, "/").unwrap();
    assert!(
        page.contains("fetch(\"status.json\""),
        "the page reads its JSON"
    );
    assert_eq!(status_of(get(address, "/nothing-here")), 404);
    let posted = ureq::post(&format!("http://{address}/metrics")).call();
    assert!(
        matches!(posted, Err(ureq::Error::Status(405, _))),
        "{posted:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while source.samples.load(Ordering::Relaxed) < 2 {
        assert!(
            Instant::now() < deadline,
            "the source is sampled once a second"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_port_in_use_is_an_error_that_names_the_option() {
    let first = MetricsServer::start(loopback(), None, Arc::new(Fake::default())).unwrap();
    let taken = first.local_addr();
    match MetricsServer::start(taken, None, Arc::new(Fake::default())) {
        Err(error @ MetricsError::Bind { .. }) => {
            let text = error.to_string();
            assert!(
                text.contains("metrics.listen_addr") && text.contains(&taken.to_string()),
                "{text}"
            );
        }
        Err(other) => panic!("{other}"),
        Ok(second) => panic!("bound {} twice", second.local_addr()),
    }
}

#[test]
fn a_silent_client_is_dropped_and_others_are_served_meanwhile() {
    let server = MetricsServer::start(loopback(), None, Arc::new(Fake::default())).unwrap();
    let address = server.local_addr();
    // Connects and says nothing: it must not hold the endpoint.
    let mut silent = TcpStream::connect(address).unwrap();
    assert_eq!(get(address, "/metrics").unwrap().0, 200);
    silent
        .set_read_timeout(Some(metrics::HEADER_READ_TIMEOUT * 3))
        .unwrap();
    let mut rest = Vec::new();
    let started = Instant::now();
    let _ = silent.read_to_end(&mut rest);
    assert!(
        started.elapsed() < metrics::HEADER_READ_TIMEOUT * 2,
        "closed after {:?}",
        started.elapsed()
    );
}

/// The test certificates, made once per test binary.
fn certs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("trireme-metrics-tls-{}", std::process::id()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-test-certs.sh");
        let status = Command::new(script).arg(&dir).status().unwrap();
        assert!(status.success(), "make-test-certs.sh failed");
        dir
    })
}

fn node_tls() -> TlsContext {
    let dir = certs();
    TlsContext::load(TlsFiles {
        key: dir.join("node.key"),
        cert: dir.join("node.pem"),
        ca: Some(dir.join("ca.pem")),
        password_file: None,
        cipher: None,
        labels: Labels::PROVIDER,
    })
    .unwrap()
}

#[test]
fn with_tls_it_serves_a_client_of_the_cluster_ca_and_nothing_in_clear() {
    let server_tls = Arc::new(node_tls());
    let server =
        MetricsServer::start(loopback(), Some(server_tls), Arc::new(Fake::default())).unwrap();
    let address = server.local_addr();
    let tcp = TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut stream = node_tls().connect(tcp, &address.to_string()).unwrap();
    // A request written out by hand: the test's client is the TLS stream the nodes use.
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("wsrep_local_recv_queue 7"), "{response}");
    // Plain HTTP gets no answer from a TLS endpoint.
    assert!(get(address, "/metrics").is_err());
}
