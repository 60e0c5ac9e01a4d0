use super::feeding::cut_pieces;
use super::*;
use crate::joiner::{receive_stream, Receiving};
use crate::session::tests::tls;
use std::net::{Shutdown, TcpListener};

#[test]
fn chunks_are_cut_at_piece_boundaries_of_the_file() {
    let data = vec![7u8; (PIECE_BYTES as usize) * 2 + 10];
    let cuts = cut_pieces(PIECE_BYTES - 5, &data);
    let offsets: Vec<u64> = cuts.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        offsets,
        vec![
            PIECE_BYTES - 5,
            PIECE_BYTES,
            2 * PIECE_BYTES,
            3 * PIECE_BYTES
        ]
    );
    assert_eq!(cuts.iter().map(|(_, d)| d.len()).sum::<usize>(), data.len());
    assert_eq!(cuts[0].1.len(), 5);
}

/// Six pieces of one file, each different.
fn pieces() -> Vec<Vec<u8>> {
    (0..6u8)
        .map(|i| (0..PIECE_BYTES as usize).map(|b| (b as u8) ^ i).collect())
        .collect()
}

/// What one loopback stream delivered.
struct Delivered {
    /// Pieces received or confirmed, bytes resumed, pieces that failed verification.
    counts: (u64, u64, u64),
    totals: Arc<Totals>,
    written: Vec<u8>,
    /// Pieces the joiner wrote past the page cache.
    direct: u64,
    /// The certificate subjects each side saw of the other (TLS only).
    donor_saw: Option<String>,
    joiner_saw: Option<String>,
}

/// How a loopback transfer runs.
#[derive(Default)]
struct Setup {
    /// The pieces (by index) the joiner holds from an earlier attempt.
    held: Vec<usize>,
    /// The data piece the donor corrupts once.
    corrupt: Option<u64>,
    /// Pieces go uncompressed.
    uncompressed: bool,
}

/// One stream from `donor` to `joiner` over loopback TCP, without mariadb-backup: the
/// joiner admits the connection and receives.
fn stream_over_loopback(
    donor: Session,
    joiner: Session,
    data: &[Vec<u8>],
    setup: Setup,
) -> Delivered {
    let Setup {
        held,
        corrupt,
        uncompressed,
    } = setup;
    let staging = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let manifest: Vec<HeldPiece> = held
        .iter()
        .map(|&i| HeldPiece {
            path: "db/t.ibd".into(),
            offset: i as u64 * PIECE_BYTES,
            len: data[i].len() as u32,
            digest: frame::digest(&data[i]),
        })
        .collect();
    let receiving = Arc::new(Receiving::new(
        staging.path().to_path_buf(),
        manifest.clone(),
        None,
    ));
    let joining = {
        let receiving = receiving.clone();
        thread::spawn(move || {
            let (tcp, peer) = listener.accept().unwrap();
            let mut stream = joiner.admit(tcp, &peer.to_string()).unwrap();
            // Stream 1 ends with an error once the donor shuts the connection down.
            let _ = receive_stream(&mut stream, 1, &receiving);
            stream.peer_subject()
        })
    };
    let mut connection = connect(&address, &donor).unwrap();
    let mut sender = Sender::new(&Settings::default(), manifest);
    sender.compress = Arc::new(AtomicBool::new(!uncompressed));
    sender.level = 3;
    sender.corrupt_piece = corrupt;
    let (tx, rx) = bounded(4);
    let feeder = {
        let data = data.to_vec();
        thread::spawn(move || {
            let path: Arc<str> = "db/t.ibd".into();
            tx.send(Work::File { path: path.clone() }).unwrap();
            for (i, piece) in data.into_iter().enumerate() {
                let work = Work::Piece {
                    path: path.clone(),
                    offset: i as u64 * PIECE_BYTES,
                    data: Bytes::from(piece),
                    resends: 0,
                };
                tx.send(work).unwrap();
            }
        })
    };
    run_stream(&mut connection, &rx, &sender, &Failure::default()).unwrap();
    feeder.join().unwrap();
    connection.tcp().shutdown(Shutdown::Both).unwrap();
    let joiner_saw = joining.join().unwrap();
    Delivered {
        counts: receiving.counts(),
        totals: sender.totals.clone(),
        written: std::fs::read(staging.path().join("db/t.ibd")).unwrap(),
        direct: receiving.direct_pieces(),
        donor_saw: connection.peer_subject(),
        joiner_saw,
    }
}

fn plaintext_pair() -> (Session, Session) {
    let secret = Secret::generate().unwrap();
    (
        Session::new(secret.clone(), None),
        Session::new(secret, None),
    )
}

/// zstd-compressed pieces arrive intact, a corrupted piece is rejected and sent again,
/// and a resumed attempt confirms the pieces the joiner holds instead of sending them.
#[test]
fn pieces_cross_loopback_compressed_checked_and_resumed() {
    let data = pieces();
    let (donor, joiner) = plaintext_pair();
    let setup = Setup {
        corrupt: Some(2),
        ..Setup::default()
    };
    let first = stream_over_loopback(donor, joiner, &data, setup);
    assert_eq!(first.counts, (6, 0, 1), "one corrupted piece, resent");
    assert_eq!(first.totals.resent.load(Ordering::Relaxed), 1);
    assert_eq!(
        first.written,
        data.concat(),
        "every byte arrived, decompressed, in place"
    );
    assert_eq!(
        (first.donor_saw, first.joiner_saw),
        (None, None),
        "plaintext"
    );

    let (donor, joiner) = plaintext_pair();
    let setup = Setup {
        held: vec![0, 1, 2],
        ..Setup::default()
    };
    let resumed = stream_over_loopback(donor, joiner, &data, setup);
    let (pieces, resumed_bytes, rejected) = resumed.counts;
    assert_eq!((pieces, rejected), (6, 0));
    assert_eq!(
        resumed_bytes,
        3 * PIECE_BYTES,
        "three pieces confirmed, not sent"
    );
    assert_eq!(resumed.totals.pieces_same.load(Ordering::Relaxed), 3);
    let sent_part = &resumed.written[3 * PIECE_BYTES as usize..];
    assert_eq!(
        sent_part,
        &data[3..].concat()[..],
        "the other three were sent"
    );
}

/// The same transfer under mutual TLS: each side saw the other's certificate, and the
/// resend of a corrupted piece works inside the encrypted stream.
#[test]
fn pieces_cross_loopback_under_tls() {
    let data = pieces();
    let secret = Secret::generate().unwrap();
    let donor = Session::new(secret.clone(), tls("node-b.key", "node-b.pem", "ca.pem"));
    let joiner = Session::new(secret, tls("node.key", "node.pem", "ca.pem"));
    let setup = Setup {
        corrupt: Some(4),
        ..Setup::default()
    };
    let delivered = stream_over_loopback(donor, joiner, &data, setup);
    assert_eq!(delivered.counts, (6, 0, 1));
    assert_eq!(delivered.written, data.concat());
    let donor_saw = delivered.donor_saw.expect("TLS on the donor's side");
    let joiner_saw = delivered.joiner_saw.expect("TLS on the joiner's side");
    assert!(donor_saw.ends_with("CN=node"), "{donor_saw}");
    assert!(joiner_saw.ends_with("CN=node-b"), "{joiner_saw}");
}

/// Uncompressed pieces go out as slices of the backup's chunk, and the joiner writes the
/// aligned ones past the page cache: every whole piece, but not a file's short tail. A
/// corrupted uncompressed piece is still caught and sent again.
#[test]
fn aligned_pieces_are_written_past_the_page_cache() {
    let mut data = pieces();
    data.push((0..1000u32).map(|b| b as u8).collect());
    let (donor, joiner) = plaintext_pair();
    let setup = Setup {
        corrupt: Some(3),
        uncompressed: true,
        ..Setup::default()
    };
    let delivered = stream_over_loopback(donor, joiner, &data, setup);
    assert_eq!(delivered.counts, (7, 0, 1), "one corrupted piece, resent");
    assert_eq!(delivered.written, data.concat(), "every byte in place");
    assert_eq!(delivered.direct, 6, "the six whole pieces, not the tail");
}

#[test]
fn ready_addresses_parse() {
    let secret = Secret::generate().unwrap();
    let text = format!("127.0.0.1:4444/trireme/{}", secret.to_hex());
    let (target, parsed) = parse_ready_address(&text).unwrap();
    assert_eq!(target, "127.0.0.1:4444");
    assert_eq!(parsed.to_hex(), secret.to_hex());
    let error = parse_ready_address("127.0.0.1:4444/xtrabackup_sst//1").unwrap_err();
    assert!(error.to_string().contains("same method"), "{error}");
    // A mangled session is refused without being echoed into the log.
    let mangled = format!("{text}x");
    let error = parse_ready_address(&mangled).unwrap_err().to_string();
    assert!(!error.contains(&secret.to_hex()[..16]), "{error}");
    let old_style = parse_ready_address("127.0.0.1:4444/trireme/00ff").unwrap_err();
    assert!(
        old_style.to_string().contains("64 hex digits"),
        "{old_style}"
    );
}
