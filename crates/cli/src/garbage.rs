//! A hostile peer for a node's group port, to prove that no input stops a node: many
//! connections at once that send random bytes, length fields announcing huge frames, nothing
//! at all, or well-framed forgeries from a member that does not exist (Raft heartbeats with
//! an absurd commit index, Joins that reuse a real member's address, flow-control stops,
//! write-sets). Every connection ends by a deadline.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use base::Uuid;
use group::wire::{self, WireMessage};
use group::{Control, MemberInfo, Submission};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Most connections one flood opens at once.
pub const CONNECTIONS_MAX: usize = 1_000;

/// Longest a flood may run.
pub const DURATION_MAX: Duration = Duration::from_secs(600);

/// Largest burst of random bytes one write sends.
const RANDOM_BURST_MAX: usize = 64 << 10;

/// What one hostile connection does; connection `i` plays `KINDS[i % KINDS.len()]`.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Random bytes, in bursts.
    RandomBytes,
    /// A frame header announcing a body just under the limit, then a trickle of bytes.
    HugeLengthPrefix,
    /// Connects and sends nothing.
    Idle,
    /// Introduces itself as a member nobody knows, then sends well-framed forgeries.
    ForgedMember,
    /// Introduces itself, then announces a huge frame and trickles.
    IntroducedHugeFrame,
}

const KINDS: [Kind; 5] = [
    Kind::RandomBytes,
    Kind::HugeLengthPrefix,
    Kind::Idle,
    Kind::ForgedMember,
    Kind::IntroducedHugeFrame,
];

/// A flood of hostile connections against one group port.
#[derive(Clone, Debug)]
pub struct Garbage {
    /// Connections kept open at once (each reconnects when closed).
    pub connections: usize,
    /// How long the flood lasts.
    pub duration: Duration,
    /// Seed of the random bytes and choices.
    pub seed: u64,
    /// The cluster name forged members introduce themselves with (without TLS, knowing it
    /// gets past the handshake).
    pub cluster_name: String,
    /// A real member's group address, which forged Joins claim.
    pub victim_address: String,
}

/// What a flood did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GarbageReport {
    /// Connections opened.
    pub connections: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Forged, well-framed group messages written.
    pub forgeries: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    bytes: AtomicU64,
    forgeries: AtomicU64,
}

impl Garbage {
    /// Runs the flood against `target` until `duration` has passed.
    pub fn run(&self, target: SocketAddr) -> GarbageReport {
        assert!(
            self.connections <= CONNECTIONS_MAX,
            "at most {CONNECTIONS_MAX} connections"
        );
        assert!(self.duration <= DURATION_MAX, "at most {DURATION_MAX:?}");
        let deadline = Instant::now() + self.duration;
        let counters = Arc::new(Counters::default());
        let threads: Vec<_> = (0..self.connections)
            .map(|index| {
                let flood = self.clone();
                let counters = Arc::clone(&counters);
                thread::spawn(move || flood.connection_loop(target, index, deadline, &counters))
            })
            .collect();
        for thread in threads {
            let _ = thread.join();
        }
        GarbageReport {
            connections: counters.connections.load(Ordering::Relaxed),
            bytes: counters.bytes.load(Ordering::Relaxed),
            forgeries: counters.forgeries.load(Ordering::Relaxed),
        }
    }

    /// One hostile connection, reopened whenever the node closes it, until the deadline.
    fn connection_loop(
        &self,
        target: SocketAddr,
        index: usize,
        deadline: Instant,
        counters: &Counters,
    ) {
        let kind = KINDS[index % KINDS.len()];
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ (index as u64).rotate_left(17));
        while Instant::now() < deadline {
            let Ok(mut stream) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else {
                thread::sleep(Duration::from_millis(100));
                continue;
            };
            counters.connections.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            self.play(kind, &mut stream, &mut rng, deadline, counters);
            // Closed by the node (or the deadline): wait a little, as a real attacker
            // would not get a faster answer anyway.
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn play(
        &self,
        kind: Kind,
        stream: &mut TcpStream,
        rng: &mut ChaCha8Rng,
        deadline: Instant,
        counters: &Counters,
    ) {
        let mut send = |bytes: &[u8]| -> bool {
            let sent = stream.write_all(bytes).is_ok();
            if sent {
                counters
                    .bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            sent
        };
        let fake_id = rng.gen_range(1_000_000..u64::MAX / 2);
        match kind {
            Kind::RandomBytes => {
                while Instant::now() < deadline {
                    let mut burst = vec![0u8; rng.gen_range(1..RANDOM_BURST_MAX)];
                    rng.fill_bytes(&mut burst);
                    if !send(&burst) {
                        return;
                    }
                }
            }
            Kind::HugeLengthPrefix => {
                if send(&huge_frame_header(fake_id)) {
                    trickle(&mut send, deadline);
                }
            }
            Kind::Idle => {
                while Instant::now() < deadline && stream.peek(&mut [0u8; 1]).is_err() {
                    thread::sleep(Duration::from_millis(200));
                }
            }
            Kind::ForgedMember => {
                let introduction =
                    transport::handshake::introduction_bytes(fake_id, &self.cluster_name);
                if !send(&introduction) {
                    return;
                }
                while Instant::now() < deadline {
                    for message in self.forgeries(fake_id, rng) {
                        if !send(&wire::encode(fake_id, &message)) {
                            return;
                        }
                        counters.forgeries.fetch_add(1, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(20));
                }
            }
            Kind::IntroducedHugeFrame => {
                let introduction =
                    transport::handshake::introduction_bytes(fake_id, &self.cluster_name);
                if send(&introduction) && send(&huge_frame_header(fake_id)) {
                    trickle(&mut send, deadline);
                }
            }
        }
    }

    /// One round of well-framed lies from member `fake_id`.
    fn forgeries(&self, fake_id: u64, rng: &mut ChaCha8Rng) -> Vec<WireMessage> {
        let mut heartbeat = raft::eraftpb::Message::default();
        heartbeat.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
        heartbeat.from = fake_id;
        heartbeat.to = rng.gen_range(1..u64::MAX);
        heartbeat.term = u64::MAX / 2;
        heartbeat.commit = u64::MAX / 2;
        let mut append = heartbeat.clone();
        append.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
        append.index = rng.gen();
        append.log_term = rng.gen();
        let impostor = MemberInfo {
            raft_id: fake_id,
            uuid: Uuid(rng.gen()),
            name: "impostor".to_owned(),
            address: self.victim_address.clone(),
            incoming: String::new(),
        };
        let mut payload = vec![0u8; rng.gen_range(0..4096)];
        rng.fill_bytes(&mut payload);
        vec![
            WireMessage::Raft(heartbeat),
            WireMessage::Raft(append),
            WireMessage::Join(impostor),
            WireMessage::Control(Control::FlowStop(fake_id)),
            WireMessage::Control(Control::FlowStop(rng.gen_range(1..u64::MAX))),
            WireMessage::Forward(vec![Submission {
                origin: Uuid(rng.gen()),
                submit_id: 1,
                payload: payload.into(),
                chunk: (0, 1),
            }]),
            WireMessage::Leave,
        ]
    }
}

/// A group frame header from `from` announcing a body just under the limit.
fn huge_frame_header(from: u64) -> Vec<u8> {
    let mut frame = wire::encode(from, &WireMessage::Leave);
    let body_len = u32::try_from(wire::BODY_LEN_MAX - 1).expect("limit fits in u32");
    frame[14..18].copy_from_slice(&body_len.to_le_bytes());
    frame
}

/// Sends one byte a second until the deadline or the connection closes.
fn trickle(send: &mut impl FnMut(&[u8]) -> bool, deadline: Instant) {
    while Instant::now() < deadline && send(&[0x5A]) {
        thread::sleep(Duration::from_secs(1));
    }
}
