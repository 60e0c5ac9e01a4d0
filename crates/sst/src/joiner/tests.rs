use super::*;

#[test]
fn releases_are_read_from_version_strings() {
    assert_eq!(
        release_of("10.11.19-MariaDB-0+deb12u1").as_deref(),
        Some("10.11.19")
    );
    assert_eq!(
        release_of("mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu").as_deref(),
        Some("10.11.19")
    );
    assert_eq!(release_of("nothing"), None);
}

/// A joiner's listener, as `preflight` makes it.
fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// Starts a donor's side of one connection. The TCP connection is made here, so that
/// it waits in the listener's queue before the joiner looks.
fn donor(session: Session, address: SocketAddr) -> thread::JoinHandle<Result<(), SstError>> {
    let tcp = TcpStream::connect(address).unwrap();
    thread::spawn(move || {
        let mut stream = session.open(tcp, &address.to_string())?;
        let hello = Frame::Hello {
            session: session.secret().session_id(),
            stream: 0,
            streams: 1,
        };
        write_frame(&mut stream, &hello, &[]).map_err(|e| SstError::io("hello", e))?;
        stream.flush().map_err(|e| SstError::io("hello", e))
    })
}

#[test]
fn a_tls_mismatch_is_named_when_no_donor_is_admitted() {
    use crate::session::tests::tls;
    let (listener, address) = listener();
    let secret = Secret::generate().unwrap();
    let joiner = Session::new(secret.clone(), tls("node.key", "node.pem", "ca.pem"));
    let plaintext = donor(Session::new(secret, None), address);
    // The deadline has passed: the queued connection is still handled first.
    let error = accept(
        &listener,
        &mut Admissions::new(),
        &joiner,
        Instant::now(),
        None,
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("turned away"), "{message}");
    assert!(message.contains("connected without TLS"), "{message}");
    let donor_error = plaintext.join().unwrap().unwrap_err().to_string();
    assert!(donor_error.contains("requires TLS"), "{donor_error}");
}

#[test]
fn the_chosen_donor_is_admitted_after_a_stale_one_was_turned_away() {
    let (listener, address) = listener();
    let secret = Secret::generate().unwrap();
    let joiner = Session::new(secret.clone(), None);
    let stale = donor(Session::new(Secret::generate().unwrap(), None), address);
    let chosen = donor(Session::new(secret, None), address);
    // A bound that a passing run never reaches: both connections are queued already.
    let deadline = Instant::now() + Duration::from_secs(600);
    let (_stream, number, streams) =
        accept(&listener, &mut Admissions::new(), &joiner, deadline, None).unwrap();
    assert_eq!((number, streams), (0, 1));
    chosen.join().unwrap().unwrap();
    let stale_error = stale.join().unwrap().unwrap_err().to_string();
    assert!(
        stale_error.contains("did not prove the session secret"),
        "{stale_error}"
    );
}

#[test]
fn a_silent_connection_does_not_hold_up_the_donor() {
    let (listener, address) = listener();
    let secret = Secret::generate().unwrap();
    let joiner = Session::new(secret.clone(), None);
    // Connects first and never sends a byte.
    let silent = TcpStream::connect(address).unwrap();
    let chosen = donor(Session::new(secret, None), address);
    let deadline = Instant::now() + Duration::from_secs(600);
    let (_stream, number, _) =
        accept(&listener, &mut Admissions::new(), &joiner, deadline, None).unwrap();
    assert_eq!(number, 0);
    chosen.join().unwrap().unwrap();
    // The silent connection is still waiting for its own admission: the donor's was
    // not queued behind it.
    silent.set_nonblocking(true).unwrap();
    let pending = std::io::Read::read(&mut &silent, &mut [0u8; 1]);
    assert!(
        matches!(&pending, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
        "the silent connection was already handled: {pending:?}"
    );
}

#[test]
fn listen_addresses_default_the_port() {
    assert_eq!(listen_address("127.0.0.1:5555").unwrap().port(), 5555);
    assert_eq!(listen_address("127.0.0.1").unwrap().port(), DEFAULT_PORT);
}
