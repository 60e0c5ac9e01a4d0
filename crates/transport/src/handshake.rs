//! The first exchange on every group connection, after TLS (if configured) and before any
//! frame: the connecting member introduces itself, and the accepting member admits or
//! refuses it, saying why, so that both logs name the problem.
//!
//! Introduction: magic `TRHI` (4), version (1), the sender's Raft id (8), the cluster name's
//! length (2) and the name (`wsrep_cluster_name`). Answer: magic `TRHA` (4), verdict (1:
//! 0 admitted, 1 refused), the reason's length (2) and the reason.
//!
//! A member's Raft id is bound to the address its first admitted connection came from: a
//! connection from elsewhere that claims the id is refused, and every frame on a connection
//! must carry the id it was admitted with. With TLS, only holders of a certificate from the
//! cluster's CA get this far.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::Mutex;

use crate::lock;

const INTRODUCTION_MAGIC: [u8; 4] = *b"TRHI";
const ANSWER_MAGIC: [u8; 4] = *b"TRHA";
/// The handshake version this build speaks.
const HANDSHAKE_VERSION: u8 = 1;
/// Longest cluster name accepted (MariaDB limits `wsrep_cluster_name` far below this).
pub const CLUSTER_NAME_MAX: usize = 1024;
/// Longest refusal reason sent or accepted.
const REASON_MAX: usize = 1024;
/// Raft ids whose address is remembered; the oldest binding is forgotten beyond this.
const BINDINGS_MAX: usize = 4096;

const VERDICT_ADMITTED: u8 = 0;
const VERDICT_REFUSED: u8 = 1;

/// Who the connecting member says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Introduction {
    pub(crate) raft_id: u64,
    pub(crate) cluster: String,
}

/// Why a handshake did not admit a connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The bytes are not an introduction (or answer) of this protocol.
    #[error("not a Trireme group member: {0}")]
    Garbage(String),
    /// The accepting member refused this one.
    #[error("refused by the peer: {0}")]
    Refused(String),
    /// This member refuses the peer.
    #[error("{0}")]
    Refuse(String),
    /// The connection failed or timed out.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// The bytes of an introduction as member `raft_id` of `cluster` (at most
/// [`CLUSTER_NAME_MAX`] bytes). Public for tools and tests that speak to a group port.
pub fn introduction_bytes(raft_id: u64, cluster: &str) -> Vec<u8> {
    let name = cluster.as_bytes();
    assert!(
        name.len() <= CLUSTER_NAME_MAX,
        "cluster name checked at start"
    );
    let mut bytes = Vec::with_capacity(15 + name.len());
    bytes.extend_from_slice(&INTRODUCTION_MAGIC);
    bytes.push(HANDSHAKE_VERSION);
    bytes.extend_from_slice(&raft_id.to_le_bytes());
    bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
    bytes.extend_from_slice(name);
    bytes
}

/// Length of the accepting member's answer when it admits (no reason text).
pub const ADMITTED_ANSWER_LEN: usize = 7;

/// Sends this member's introduction and waits for the verdict.
pub(crate) fn introduce(
    stream: &mut impl ReadWrite,
    introduction: &Introduction,
) -> Result<(), HandshakeError> {
    let bytes = introduction_bytes(introduction.raft_id, &introduction.cluster);
    stream.write_all(&bytes)?;
    stream.flush()?;
    let mut head = [0u8; ADMITTED_ANSWER_LEN];
    stream.read_exact(&mut head)?;
    if head[..4] != ANSWER_MAGIC {
        return Err(HandshakeError::Garbage(
            "the peer's answer has no TRHA magic".into(),
        ));
    }
    let reason = read_text(stream, &head[5..7], REASON_MAX)?;
    match head[4] {
        VERDICT_ADMITTED => Ok(()),
        VERDICT_REFUSED => Err(HandshakeError::Refused(reason)),
        other => Err(HandshakeError::Garbage(format!("unknown verdict {other}"))),
    }
}

/// Reads a peer's introduction and checks it against `cluster` and the id bindings; answers
/// either way. Returns the admitted introduction.
pub(crate) fn admit(
    stream: &mut impl ReadWrite,
    from: IpAddr,
    cluster: &str,
    bindings: &Bindings,
) -> Result<Introduction, HandshakeError> {
    let introduction = read_introduction(stream)?;
    let verdict = if introduction.cluster != cluster {
        Err(format!(
            "wsrep_cluster_name differs: the connecting node is in cluster {:?}, the accepting \
             node in {cluster:?}",
            introduction.cluster
        ))
    } else {
        bindings.bind(introduction.raft_id, from)
    };
    let (code, reason) = match &verdict {
        Ok(()) => (VERDICT_ADMITTED, ""),
        Err(reason) => (VERDICT_REFUSED, reason.as_str()),
    };
    stream.write_all(&answer(code, reason))?;
    stream.flush()?;
    verdict.map_err(HandshakeError::Refuse)?;
    Ok(introduction)
}

/// Sends a refusal with `reason` (best effort: the connection is closed next anyway).
pub(crate) fn refuse(stream: &mut impl Write, reason: &str) {
    let _ = stream.write_all(&answer(VERDICT_REFUSED, reason));
    let _ = stream.flush();
}

/// The bytes of an answer.
fn answer(code: u8, reason: &str) -> Vec<u8> {
    let reason = &reason.as_bytes()[..reason.len().min(REASON_MAX)];
    let mut answer = Vec::with_capacity(ADMITTED_ANSWER_LEN + reason.len());
    answer.extend_from_slice(&ANSWER_MAGIC);
    answer.push(code);
    answer.extend_from_slice(&(reason.len() as u16).to_le_bytes());
    answer.extend_from_slice(reason);
    answer
}

fn read_introduction(stream: &mut impl Read) -> Result<Introduction, HandshakeError> {
    let mut head = [0u8; 15];
    stream.read_exact(&mut head)?;
    if head[..4] != INTRODUCTION_MAGIC {
        return Err(HandshakeError::Garbage(
            "the first bytes are not a member's introduction (TRHI)".into(),
        ));
    }
    if head[4] != HANDSHAKE_VERSION {
        return Err(HandshakeError::Garbage(format!(
            "handshake version {} (this build speaks {HANDSHAKE_VERSION})",
            head[4]
        )));
    }
    let raft_id = u64::from_le_bytes(head[5..13].try_into().expect("8 bytes"));
    let cluster = read_text(stream, &head[13..15], CLUSTER_NAME_MAX)?;
    Ok(Introduction { raft_id, cluster })
}

/// Reads a text whose little-endian u16 length is `length`, refusing more than `max`
/// before reading it.
fn read_text(stream: &mut impl Read, length: &[u8], max: usize) -> Result<String, HandshakeError> {
    let len = u16::from_le_bytes([length[0], length[1]]) as usize;
    if len > max {
        return Err(HandshakeError::Garbage(format!(
            "a {len}-byte text (most {max})"
        )));
    }
    let mut text = vec![0u8; len];
    stream.read_exact(&mut text)?;
    String::from_utf8(text).map_err(|_| HandshakeError::Garbage("text is not UTF-8".into()))
}

/// A stream both ways.
pub(crate) trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Which address each member id was first admitted from.
#[derive(Default)]
pub(crate) struct Bindings {
    inner: Mutex<BindingsInner>,
}

#[derive(Default)]
struct BindingsInner {
    by_id: HashMap<u64, IpAddr>,
    /// Oldest binding first; a binding moves to the back when it is used again.
    order: VecDeque<u64>,
    /// Ids with open connections, and how many: their bindings are never forgotten.
    held: HashMap<u64, usize>,
}

impl Bindings {
    /// Binds `raft_id` to `from` (IPv4-mapped addresses read as IPv4), or refuses if it is
    /// bound elsewhere.
    pub(crate) fn bind(&self, raft_id: u64, from: IpAddr) -> Result<(), String> {
        let from = from.to_canonical();
        let mut inner = lock(&self.inner);
        match inner.by_id.get(&raft_id) {
            Some(bound) if *bound == from => {
                inner.order.retain(|id| *id != raft_id);
                inner.order.push_back(raft_id);
                Ok(())
            }
            Some(bound) => Err(format!(
                "member id {raft_id} connects from {bound}; a connection from {from} may not \
                 claim it"
            )),
            None => {
                if inner.order.len() >= BINDINGS_MAX {
                    inner.forget_oldest_unheld();
                }
                inner.by_id.insert(raft_id, from);
                inner.order.push_back(raft_id);
                Ok(())
            }
        }
    }

    /// Notes an open connection of `raft_id`.
    pub(crate) fn hold(&self, raft_id: u64) {
        *lock(&self.inner).held.entry(raft_id).or_insert(0) += 1;
    }

    /// Notes that a connection of `raft_id` closed.
    pub(crate) fn release(&self, raft_id: u64) {
        let mut inner = lock(&self.inner);
        if let Some(count) = inner.held.get_mut(&raft_id) {
            *count -= 1;
            if *count == 0 {
                inner.held.remove(&raft_id);
            }
        }
    }
}

impl BindingsInner {
    /// Forgets the oldest binding without an open connection. Held ones are bounded by the
    /// connection limits, far below [`BINDINGS_MAX`].
    fn forget_oldest_unheld(&mut self) {
        for _ in 0..self.order.len() {
            let Some(oldest) = self.order.pop_front() else {
                return;
            };
            if self.held.contains_key(&oldest) {
                self.order.push_back(oldest);
            } else {
                self.by_id.remove(&oldest);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// One side's bytes in, the other side's bytes out.
    struct Pipe {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            self.input.read(buffer)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.output.write(bytes)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn pipe(input: Vec<u8>) -> Pipe {
        Pipe {
            input: Cursor::new(input),
            output: Vec::new(),
        }
    }

    /// Runs the handshake between a member introducing `introduction` and one in `cluster`.
    fn exchange(
        introduction: &Introduction,
        cluster: &str,
        from: IpAddr,
        bindings: &Bindings,
    ) -> (
        Result<(), HandshakeError>,
        Result<Introduction, HandshakeError>,
    ) {
        // The introduction the connecting side writes (its read fails: no answer yet).
        let mut connecting = pipe(Vec::new());
        let _ = introduce(&mut connecting, introduction);
        let mut accepting = pipe(connecting.output);
        let admitted = admit(&mut accepting, from, cluster, bindings);
        let mut connecting = pipe(accepting.output);
        let introduced = introduce(&mut connecting, introduction);
        (introduced, admitted)
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_member_of_the_cluster_is_admitted() {
        let me = Introduction {
            raft_id: 7,
            cluster: "prod".into(),
        };
        let (introduced, admitted) = exchange(&me, "prod", ip(1), &Bindings::default());
        introduced.unwrap();
        assert_eq!(admitted.unwrap(), me);
    }

    #[test]
    fn another_cluster_is_refused_on_both_sides_with_both_names() {
        let me = Introduction {
            raft_id: 7,
            cluster: "staging".into(),
        };
        let (introduced, admitted) = exchange(&me, "prod", ip(1), &Bindings::default());
        for text in [
            introduced.unwrap_err().to_string(),
            admitted.unwrap_err().to_string(),
        ] {
            assert!(
                text.contains("\"staging\"") && text.contains("\"prod\""),
                "{text}"
            );
        }
    }

    #[test]
    fn an_id_bound_to_one_address_cannot_be_claimed_from_another() {
        let bindings = Bindings::default();
        let me = Introduction {
            raft_id: 7,
            cluster: "prod".into(),
        };
        exchange(&me, "prod", ip(1), &bindings).1.unwrap();
        exchange(&me, "prod", ip(1), &bindings).1.unwrap();
        let (introduced, admitted) = exchange(&me, "prod", ip(2), &bindings);
        assert!(matches!(introduced, Err(HandshakeError::Refused(_))));
        assert!(admitted.unwrap_err().to_string().contains("10.0.0.1"));
    }

    #[test]
    fn garbage_and_huge_lengths_are_refused_before_allocation() {
        let bindings = Bindings::default();
        let mut garbage = pipe(b"GET / HTTP/1.1\r\n\r\n".to_vec());
        assert!(matches!(
            admit(&mut garbage, ip(1), "prod", &bindings),
            Err(HandshakeError::Garbage(_))
        ));
        let mut huge = INTRODUCTION_MAGIC.to_vec();
        huge.push(HANDSHAKE_VERSION);
        huge.extend_from_slice(&7u64.to_le_bytes());
        huge.extend_from_slice(&u16::MAX.to_le_bytes());
        let mut huge = pipe(huge);
        let error = admit(&mut huge, ip(1), "prod", &bindings).unwrap_err();
        assert!(error.to_string().contains("65535-byte"), "{error}");
    }

    #[test]
    fn a_binding_with_an_open_connection_is_never_forgotten() {
        let bindings = Bindings::default();
        bindings.bind(1, ip(1)).unwrap();
        bindings.hold(1);
        for id in 2..(BINDINGS_MAX as u64 + 100) {
            bindings.bind(id, ip(2)).unwrap();
        }
        let error = bindings.bind(1, ip(2)).unwrap_err();
        assert!(error.contains("10.0.0.1"), "{error}");
        bindings.release(1);
        for id in 5_000..(5_000 + BINDINGS_MAX as u64) {
            bindings.bind(id, ip(2)).unwrap();
        }
        bindings
            .bind(1, ip(2))
            .expect("forgotten once its connection closed");
    }

    #[test]
    fn bindings_are_bounded() {
        let bindings = Bindings::default();
        for id in 0..(BINDINGS_MAX as u64 + 10) {
            bindings.bind(id, ip(1)).unwrap();
        }
        let inner = lock(&bindings.inner);
        assert_eq!(inner.by_id.len(), BINDINGS_MAX);
        assert!(
            !inner.by_id.contains_key(&0),
            "the oldest binding was forgotten"
        );
    }

    /// Cases per fuzz target in a plain `cargo test`; `PROPTEST_CASES` overrides it.
    const FUZZ_CASES: u32 = 5_000;

    proptest::proptest! {
        #![proptest_config(fuzzing::config(FUZZ_CASES))]

        /// Any bytes as an introduction: an admission only of a well-formed one for this
        /// cluster, otherwise a named refusal, never a panic; the answer is always sent
        /// unless the bytes ran out.
        #[test]
        fn fuzz_admit_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut stream = pipe(bytes);
            match admit(&mut stream, ip(1), "prod", &Bindings::default()) {
                Ok(introduction) => proptest::prop_assert_eq!(introduction.cluster, "prod"),
                Err(HandshakeError::Io(_) | HandshakeError::Garbage(_) | HandshakeError::Refuse(_)) => {}
                Err(other) => proptest::prop_assert!(false, "unexpected {other}"),
            }
        }

        /// A valid introduction with bytes flipped or cut is refused or admitted, never
        /// more than the announced lengths are read.
        #[test]
        fn fuzz_admit_mutated_introduction(flip in 0usize..40, bit in 0u8..8, cut in 0usize..40) {
            let mut bytes = introduction_bytes(7, "prod-cluster");
            let index = flip % bytes.len();
            bytes[index] ^= 1 << bit;
            bytes.truncate(bytes.len() - cut % bytes.len());
            let mut stream = pipe(bytes);
            let _ = admit(&mut stream, ip(1), "prod-cluster", &Bindings::default());
        }
    }
}
