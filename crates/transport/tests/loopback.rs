//! Group members over real TCP on 127.0.0.1: formation, total order, graceful leave and
//! garbage on the wire.

// Tests of the I/O shell run on the real clock.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use base::Seqno;
use group::{Contact, Delivery, GroupConfig};
use transport::{handshake, GroupRunner, Role, TransportOptions, DEFAULT_CLUSTER_NAME};

const WAIT: Duration = Duration::from_secs(10);

fn config() -> GroupConfig {
    GroupConfig {
        tick_interval_ns: 5_000_000,
        ..GroupConfig::default()
    }
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().expect("a socket address")
}

struct Member {
    runner: GroupRunner,
    deliveries: Receiver<Delivery>,
    seen: Vec<Delivery>,
}

impl Member {
    fn start(name: &str, role: Role, seed: u64) -> Member {
        Member::start_with(name, role, seed, TransportOptions::default())
    }

    fn start_with(name: &str, role: Role, seed: u64, options: TransportOptions) -> Member {
        let mut runner = GroupRunner::start_with_options(
            config(),
            role,
            Contact::new(name, ""),
            any_port(),
            seed,
            options,
        )
        .expect("member starts");
        let deliveries = runner.take_deliveries().expect("deliveries are taken once");
        Member {
            runner,
            deliveries,
            seen: Vec::new(),
        }
    }

    fn address(&self) -> String {
        self.runner.local_addr().to_string()
    }

    /// Moves whatever was delivered so far into `seen`.
    fn drain(&mut self) {
        while let Ok(delivery) = self.deliveries.try_recv() {
            self.seen.push(delivery);
        }
    }

    fn write_sets(&self) -> Vec<(Seqno, Vec<u8>)> {
        self.seen
            .iter()
            .filter_map(|d| match d {
                Delivery::WriteSet { seqno, payload, .. } => Some((*seqno, payload.clone())),
                _ => None,
            })
            .collect()
    }

    fn in_primary_view_of(&self, size: usize) -> bool {
        let status = self.runner.status();
        status.primary && status.members == size
    }
}

/// Polls `done` until it holds, draining deliveries meanwhile; panics after [`WAIT`].
fn wait_until(members: &mut [Member], what: &str, done: impl Fn(&[Member]) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        for member in members.iter_mut() {
            member.drain();
        }
        if done(members) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn three_members() -> Vec<Member> {
    let first = Member::start("node1", Role::Bootstrap, 1);
    let seeds = vec![first.address()];
    let second = Member::start(
        "node2",
        Role::Join {
            seeds: seeds.clone(),
            restart: None,
        },
        2,
    );
    let third = Member::start(
        "node3",
        Role::Join {
            seeds,
            restart: None,
        },
        3,
    );
    let mut members = vec![first, second, third];
    wait_until(&mut members, "a 3-member primary view", |m| {
        m.iter().all(|member| member.in_primary_view_of(3))
    });
    members
}

/// Submits `count` write-sets round robin and waits until every member delivered them all;
/// returns the payloads.
fn order_write_sets(members: &mut [Member], count: usize, tag: &str) -> BTreeSet<Vec<u8>> {
    let before: Vec<usize> = members.iter().map(|m| m.write_sets().len()).collect();
    let mut submitted = BTreeMap::new();
    for i in 0..count {
        let origin = i % members.len();
        let payload = format!("{tag}-{i}").into_bytes();
        let submit_id = members[origin]
            .runner
            .submit(payload.clone())
            .expect("running");
        submitted.insert((origin, submit_id), payload);
    }
    wait_until(members, "every write-set delivered everywhere", |m| {
        m.iter()
            .zip(&before)
            .all(|(member, before)| member.write_sets().len() >= before + count)
    });
    // Each origin sees its own write-sets as local, under the number submit() returned.
    for (origin, member) in members.iter().enumerate() {
        for delivery in &member.seen {
            if let Delivery::WriteSet {
                local: true,
                submit_id,
                payload,
                ..
            } = delivery
            {
                if let Some(expected) = submitted.get(&(origin, *submit_id)) {
                    assert_eq!(
                        payload, expected,
                        "submit id {submit_id} on member {origin}"
                    );
                }
            }
        }
    }
    let local = members
        .iter()
        .map(|m| {
            m.seen
                .iter()
                .filter(|d| matches!(d, Delivery::WriteSet { local: true, .. }))
                .count()
        })
        .sum::<usize>();
    assert!(
        local >= count,
        "only {local} local deliveries for {count} submissions"
    );
    submitted.into_values().collect()
}

fn assert_same_order(members: &[Member]) {
    let reference = members[0].write_sets();
    for (index, member) in members.iter().enumerate() {
        assert_eq!(
            member.write_sets(),
            reference,
            "member {index} delivered another sequence"
        );
        // Write-sets and ordered views share one seqno sequence, without gaps.
        let first = reference
            .first()
            .map_or(Seqno::UNDEFINED, |(seqno, _)| *seqno);
        let ordered: Vec<Seqno> = member
            .seen
            .iter()
            .filter_map(|d| match d {
                Delivery::WriteSet { seqno, .. } => Some(*seqno),
                Delivery::View(view) if view.ordered => Some(view.seqno),
                _ => None,
            })
            .filter(|seqno| *seqno >= first)
            .collect();
        for pair in ordered.windows(2) {
            assert_eq!(
                pair[1],
                pair[0].next(),
                "consecutive seqnos on member {index}"
            );
        }
    }
}

#[test]
fn three_members_order_the_same_sequence_and_one_leaves() {
    let mut members = three_members();
    let payloads = order_write_sets(&mut members, 300, "ws");
    assert_same_order(&members);
    let delivered: BTreeSet<Vec<u8>> = members[0]
        .write_sets()
        .into_iter()
        .map(|(_, payload)| payload)
        .collect();
    assert_eq!(delivered, payloads, "each write-set delivered once");
    assert_eq!(members[0].write_sets().len(), 300);

    // The commit cut: once every member reports its last seqno committed, later write-sets
    // carry it as their safe seqno.
    let cut = members[0].write_sets().last().expect("write-sets").0;
    for member in &members {
        member.runner.report_committed(cut).expect("running");
    }
    let deadline = Instant::now() + WAIT;
    let mut round = 0;
    loop {
        order_write_sets(&mut members, 3, &format!("cut-{round}"));
        round += 1;
        let safe = members[0].seen.iter().rev().find_map(|d| match d {
            Delivery::WriteSet { safe_seqno, .. } => Some(*safe_seqno),
            _ => None,
        });
        if safe >= Some(cut) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the commit cut never reached {cut:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_same_order(&members);

    members[2].runner.leave().expect("running");
    wait_until(
        &mut members,
        "a 2-member primary view after the leave",
        |m| {
            m[..2].iter().all(|member| member.in_primary_view_of(2))
                && m[2].seen.iter().any(|d| matches!(d, Delivery::Closed))
        },
    );
    for member in &members[..2] {
        let last_view = member.seen.iter().rev().find_map(|d| match d {
            Delivery::View(view) if view.ordered => Some(view),
            _ => None,
        });
        let view = last_view.expect("an ordered view");
        assert_eq!(view.members.len(), 2);
        assert!(view.primary);
        assert!(view.members.iter().all(|m| m.name != "node3"));
    }

    // The two that stay still order.
    let mut staying: Vec<Member> = members.drain(..2).collect();
    order_write_sets(&mut staying, 30, "after");
    assert_same_order(&staying);

    for mut member in members.into_iter().chain(staying) {
        member.runner.shutdown();
        assert!(
            member.runner.submit(b"late".to_vec()).is_err(),
            "stopped members refuse work"
        );
    }
}

/// Connects to `address`, sends `bytes` and reports whether the member closed the
/// connection (within a second).
fn closed_after_sending(address: SocketAddr, bytes: &[u8]) -> bool {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.write_all(bytes).expect("write");
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let mut buffer = [0u8; 16];
    match stream.read(&mut buffer) {
        Ok(0) => true,
        Ok(_) => panic!("a member never answers on an inbound connection"),
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn garbage_on_the_wire_is_refused_and_the_group_keeps_ordering() {
    let first = Member::start("node1", Role::Bootstrap, 11);
    let second = Member::start(
        "node2",
        Role::Join {
            seeds: vec![first.address()],
            restart: None,
        },
        12,
    );
    let mut members = vec![first, second];
    wait_until(&mut members, "a 2-member primary view", |m| {
        m.iter().all(|member| member.in_primary_view_of(2))
    });
    let target = members[0].runner.local_addr();

    // Not a group frame at all: the connection is closed.
    assert!(
        closed_after_sending(target, &[0xAB; 64]),
        "bad magic closes the connection"
    );
    // A length field beyond the limit: closed before anything is allocated.
    let mut huge = b"TRGM".to_vec();
    huge.extend_from_slice(&[1, 1]);
    huge.extend_from_slice(&7u64.to_le_bytes());
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(
        closed_after_sending(target, &huge),
        "an oversized frame closes the connection"
    );

    // A well-framed message with a bad checksum: the node refuses it, the connection stays.
    let mut corrupt = b"TRGM".to_vec();
    corrupt.extend_from_slice(&[1, 1]);
    corrupt.extend_from_slice(&7u64.to_le_bytes());
    corrupt.extend_from_slice(&4u32.to_le_bytes());
    corrupt.extend_from_slice(&[1, 2, 3, 4]);
    corrupt.extend_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    let mut stream = TcpStream::connect(target).expect("connect");
    // Past the handshake, as member 7 of the cluster.
    stream
        .write_all(&handshake::introduction_bytes(7, DEFAULT_CLUSTER_NAME))
        .expect("introduce");
    let mut answer = [0u8; handshake::ADMITTED_ANSWER_LEN];
    stream.read_exact(&mut answer).expect("admitted");
    for _ in 0..10 {
        stream
            .write_all(&corrupt)
            .expect("the member keeps the connection open");
    }
    // The connection is still open: a read waits instead of seeing the end of the stream.
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut buffer = [0u8; 16];
    let still_open = match stream.read(&mut buffer) {
        Err(error) => {
            matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        }
        Ok(_) => false,
    };
    assert!(
        still_open,
        "a well-framed bad message does not cost the connection"
    );
    // A truncated frame followed by silence: nothing happens until the peer goes away.
    stream.write_all(&corrupt[..10]).expect("write");
    drop(stream);

    order_write_sets(&mut members, 100, "after-garbage");
    assert_same_order(&members);
    assert!(members.iter().all(|m| m.in_primary_view_of(2)));
}

#[test]
fn a_member_that_cannot_reach_its_seed_keeps_trying_and_stops_cleanly() {
    // Nobody listens on the seed's port: the joiner retries in the background, and
    // shutdown still returns promptly.
    let unused = std::net::TcpListener::bind(any_port()).expect("bind");
    let seed = unused.local_addr().expect("address").to_string();
    drop(unused);
    let mut joiner = Member::start(
        "lonely",
        Role::Join {
            seeds: vec![seed],
            restart: None,
        },
        21,
    );
    std::thread::sleep(Duration::from_millis(200));
    joiner.drain();
    assert!(!joiner.runner.status().primary);
    let started = Instant::now();
    joiner.runner.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown took {:?}",
        started.elapsed()
    );
}

/// The test certificates (`scripts/make-test-certs.sh`), made once per test binary.
fn certs() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("trireme-transport-certs-{}", std::process::id()));
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scripts/make-test-certs.sh");
        let status = std::process::Command::new(script)
            .arg(&dir)
            .status()
            .expect("openssl script");
        assert!(status.success(), "make-test-certs.sh failed");
        dir
    })
}

/// Transport options with TLS from the test certificate `name` (`node`, `rogue`, ...).
fn tls_options(name: &str, ca: &str) -> TransportOptions {
    let files = tls::TlsFiles {
        key: certs().join(format!("{name}.key")),
        cert: certs().join(format!("{name}.pem")),
        ca: Some(certs().join(ca)),
        password_file: None,
        cipher: None,
        labels: tls::Labels::PROVIDER,
    };
    TransportOptions {
        tls: Some(std::sync::Arc::new(
            tls::TlsContext::load(files).expect("TLS files"),
        )),
        ..TransportOptions::default()
    }
}

#[test]
fn tls_members_order_together_and_strangers_never_get_in() {
    let first = Member::start_with("node1", Role::Bootstrap, 21, tls_options("node", "ca.pem"));
    let seeds = vec![first.address()];
    let join = || Role::Join {
        seeds: seeds.clone(),
        restart: None,
    };
    let second = Member::start_with("node2", join(), 22, tls_options("node-b", "ca.pem"));
    let mut members = vec![first, second];
    wait_until(&mut members, "a 2-member TLS view", |m| {
        m.iter().all(|member| member.in_primary_view_of(2))
    });
    let strangers = [
        Member::start_with("plaintext", join(), 23, TransportOptions::default()),
        Member::start_with("rogue", join(), 24, tls_options("rogue", "rogue-ca.pem")),
        Member::start_with(
            "elsewhere",
            join(),
            25,
            TransportOptions {
                cluster_name: "another cluster".to_owned(),
                ..tls_options("node", "ca.pem")
            },
        ),
    ];
    order_write_sets(&mut members, 50, "tls");
    assert_same_order(&members);
    // Joins are retried every few ticks: this is many chances for each stranger.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        members.iter().all(|m| m.in_primary_view_of(2)),
        "a stranger got in"
    );
    for stranger in &strangers {
        assert!(
            !stranger.runner.status().primary,
            "{} joined",
            stranger.runner.name()
        );
    }
}

/// Connections that trickle their handshake a byte at a time hold their slots only until
/// the handshake deadline: then a new connection gets in and is admitted.
#[test]
fn a_trickled_handshake_loses_its_slot_at_the_deadline() {
    let options = TransportOptions {
        handshake_timeout: Duration::from_millis(500),
        max_pending_per_source: 2,
        ..TransportOptions::default()
    };
    let member = Member::start_with("node1", Role::Bootstrap, 31, options);
    let target = member.runner.local_addr();
    let introduction = handshake::introduction_bytes(77, DEFAULT_CLUSTER_NAME);
    let trickle = |stream: &mut TcpStream| {
        // One byte now and then: each read returns within the read timeout.
        for byte in &introduction[..4] {
            if stream.write_all(&[*byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(target).unwrap())
        .collect();
    for stream in &mut slow {
        stream.write_all(&introduction[..1]).unwrap();
    }
    // Both slots of this source are taken: a third connection is closed at once.
    let mut refused = TcpStream::connect(target).unwrap();
    refused.set_read_timeout(Some(WAIT)).unwrap();
    let _ = refused.write_all(&introduction);
    assert_eq!(
        refused.read(&mut [0u8; 16]).unwrap_or(0),
        0,
        "a third handshake got a slot"
    );
    for stream in &mut slow {
        trickle(stream);
    }
    // Past the deadline: the next connection reaps the trickling ones and is admitted.
    let mut admitted = TcpStream::connect(target).unwrap();
    admitted.set_read_timeout(Some(WAIT)).unwrap();
    admitted.write_all(&introduction).unwrap();
    let mut answer = [0u8; handshake::ADMITTED_ANSWER_LEN];
    admitted
        .read_exact(&mut answer)
        .expect("admitted after the deadline");
    for stream in &mut slow {
        stream.set_read_timeout(Some(WAIT)).unwrap();
        assert_eq!(
            stream.read(&mut [0u8; 16]).unwrap_or(0),
            0,
            "a trickler kept its slot"
        );
    }
}
