//! The TLS setup against real certificates made by the openssl tool
//! (`scripts/make-test-certs.sh`): checks at load, handshakes, refusals and reload.

// A test of sockets and threads: the shell-crate allowance.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use tls::{Labels, Stream, TlsContext, TlsError, TlsFiles};

/// The test certificates, made once per test binary.
fn certs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("trireme-tls-test-{}", std::process::id()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-test-certs.sh");
        let status = Command::new(script)
            .arg(&dir)
            .status()
            .expect("run make-test-certs.sh");
        assert!(status.success(), "make-test-certs.sh failed");
        dir
    })
}

fn files(key: &str, cert: &str, ca: &str) -> TlsFiles {
    TlsFiles {
        key: certs().join(key),
        cert: certs().join(cert),
        ca: Some(certs().join(ca)),
        password_file: None,
        cipher: None,
        labels: Labels::PROVIDER,
    }
}

fn node() -> TlsContext {
    TlsContext::load(files("node.key", "node.pem", "ca.pem")).expect("node TLS")
}

/// Connects `client` to `server` over loopback; returns both ends' outcomes.
fn handshake(
    client: &TlsContext,
    server: TlsContext,
) -> (
    Result<Stream, tls::HandshakeError>,
    Result<Stream, tls::HandshakeError>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let accepting = thread::spawn(move || {
        let (tcp, peer) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut accepted = server.accept(tcp, &peer.to_string());
        if let Ok(stream) = accepted.as_mut() {
            let mut hello = [0u8; 5];
            if let Err(error) = stream.read_exact(&mut hello) {
                return Err(tls::HandshakeError {
                    peer: peer.to_string(),
                    cause: error.to_string(),
                    refused: tls::is_refusal(&error),
                });
            }
            stream.write_all(b"world").unwrap();
        }
        accepted
    });
    let tcp = TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut connected = client.connect(tcp, &address.to_string());
    if let Ok(stream) = connected.as_mut() {
        // TLS 1.3 finishes the client's handshake before the server has checked the client
        // certificate: a refusal shows on the first read.
        let exchanged = stream.write_all(b"hello").and_then(|()| {
            let mut reply = [0u8; 5];
            stream.read_exact(&mut reply)
        });
        if let Err(error) = exchanged {
            connected = Err(tls::HandshakeError {
                peer: address.to_string(),
                cause: tls::explain(&error),
                refused: tls::is_refusal(&error),
            });
        }
    }
    (connected, accepting.join().unwrap())
}

#[test]
fn nodes_of_one_ca_talk_through_an_intermediate() {
    let client = node();
    let server = TlsContext::load(files("node-b.key", "node-b.pem", "ca.pem")).unwrap();
    let (connected, accepted) = handshake(&client, server);
    let connected = connected.expect("client side");
    let accepted = accepted.expect("server side");
    assert!(connected.is_tls() && accepted.is_tls());
    assert!(connected.peer_subject().unwrap().contains("CN=node-b"));
    assert!(accepted.peer_subject().unwrap().contains("CN=node"));
}

#[test]
fn a_node_of_another_ca_is_refused_on_both_sides() {
    let rogue = TlsContext::load(files("rogue.key", "rogue.pem", "rogue-ca.pem")).unwrap();
    let (connected, accepted) = handshake(&rogue, node());
    let server_side = accepted.expect_err("the node accepted a rogue certificate");
    assert!(server_side.cause.contains("certificate"), "{server_side}");
    assert!(connected.is_err(), "the rogue node was not told");

    let (connected, accepted) = handshake(
        &node(),
        TlsContext::load(files("rogue.key", "rogue.pem", "rogue-ca.pem")).unwrap(),
    );
    let client_side = connected.expect_err("the node trusted a rogue server");
    assert!(client_side.cause.contains("refused"), "{client_side}");
    assert!(client_side.refused, "a certificate refusal counts as one");
    assert!(accepted.is_err());
}

#[test]
fn a_plaintext_peer_is_named_as_such() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let writer = thread::spawn(move || {
        let mut tcp = TcpStream::connect(address).unwrap();
        tcp.write_all(b"TRGM plaintext group frame").unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    let (tcp, peer) = listener.accept().unwrap();
    let error = node().accept(tcp, &peer.to_string()).unwrap_err();
    assert!(error.cause.contains("plaintext"), "{error}");
    assert!(error.refused, "plaintext against TLS is a refusal");
    writer.join().unwrap();
}

#[test]
fn broken_configurations_name_the_option_the_file_and_the_problem() {
    let missing = TlsContext::load(files("node.key", "absent.pem", "ca.pem")).unwrap_err();
    assert!(
        matches!(
            missing,
            TlsError::Read {
                option: "socket.ssl_cert",
                ..
            }
        ),
        "{missing}"
    );
    assert!(missing.to_string().contains("absent.pem"), "{missing}");

    let mismatch = TlsContext::load(files("node-b.key", "node.pem", "ca.pem")).unwrap_err();
    assert!(
        matches!(mismatch, TlsError::KeyMismatch { .. }),
        "{mismatch}"
    );
    assert!(mismatch.to_string().contains("CN=node"), "{mismatch}");

    let expired = TlsContext::load(files("expired.key", "expired.pem", "ca.pem")).unwrap_err();
    let text = expired.to_string();
    assert!(matches!(expired, TlsError::OwnCertificate { .. }), "{text}");
    assert!(text.contains("certificate expired"), "{text}");

    let foreign = TlsContext::load(files("rogue.key", "rogue.pem", "ca.pem")).unwrap_err();
    assert!(
        matches!(foreign, TlsError::OwnCertificate { .. }),
        "{foreign}"
    );

    let not_pem = TlsContext::load(files("node.key", "password.txt", "ca.pem")).unwrap_err();
    assert!(
        not_pem.to_string().contains("no PEM certificate"),
        "{not_pem}"
    );
}

#[test]
fn an_encrypted_key_needs_its_password_file() {
    let mut encrypted = files("encrypted.key", "node.pem", "ca.pem");
    let error = TlsContext::load(encrypted.clone()).unwrap_err();
    assert!(
        error.to_string().contains("socket.ssl_password_file"),
        "{error}"
    );

    encrypted.password_file = Some(certs().join("password.txt"));
    let context = TlsContext::load(encrypted.clone()).expect("decrypts with the password");
    let (connected, accepted) = handshake(&context, node());
    connected.expect("client");
    accepted.expect("server");

    encrypted.password_file = Some(certs().join("ca.srl"));
    let wrong = TlsContext::load(encrypted).unwrap_err();
    assert!(wrong.to_string().contains("wrong password"), "{wrong}");
}

#[test]
fn cipher_lists_restrict_the_suites_and_a_disjoint_pair_fails_clearly() {
    let mut tls12 = files("node.key", "node.pem", "ca.pem");
    tls12.cipher = Some("ECDHE-ECDSA-AES256-GCM-SHA384".to_owned());
    let mut tls13 = files("node-b.key", "node-b.pem", "ca.pem");
    tls13.cipher = Some("TLS_AES_128_GCM_SHA256".to_owned());
    let (connected, accepted) = handshake(
        &TlsContext::load(tls12.clone()).unwrap(),
        TlsContext::load(tls12.clone()).unwrap(),
    );
    connected.expect("TLS 1.2 client");
    accepted.expect("TLS 1.2 server");
    let (connected, accepted) = handshake(
        &TlsContext::load(tls12).unwrap(),
        TlsContext::load(tls13).unwrap(),
    );
    assert!(connected.is_err() && accepted.is_err());
}

#[test]
fn reload_swaps_the_certificate_and_keeps_the_old_one_on_error() {
    let dir = certs().join("reload");
    std::fs::create_dir_all(&dir).unwrap();
    let install = |name: &str| {
        std::fs::copy(certs().join(format!("{name}.pem")), dir.join("live.pem")).unwrap();
        std::fs::copy(certs().join(format!("{name}.key")), dir.join("live.key")).unwrap();
    };
    install("node");
    let mut live = files("node.key", "node.pem", "ca.pem");
    live.key = dir.join("live.key");
    live.cert = dir.join("live.pem");
    let context = TlsContext::load(live).unwrap();
    assert!(context.subject().contains("CN=node,") || context.subject().ends_with("CN=node"));
    install("node-b");
    context.reload().unwrap();
    assert!(context.subject().contains("node-b"));
    std::fs::write(dir.join("live.pem"), "garbage").unwrap();
    assert!(context.reload().is_err());
    assert!(
        context.subject().contains("node-b"),
        "a failed reload kept the old files"
    );
    let (connected, accepted) = handshake(&node(), context);
    assert!(connected
        .unwrap()
        .peer_subject()
        .unwrap()
        .contains("node-b"));
    accepted.unwrap();
}
