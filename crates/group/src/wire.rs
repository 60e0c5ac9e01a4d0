//! The bytes group members exchange, and their checked decoding.
//!
//! Every message travels in an envelope: magic `TRGM` (4), version (1), kind (1), sender's
//! Raft id (8), body length (4), body, CRC32C (4) of everything before it. A peer that sends
//! garbage, an unknown version or a truncated frame gets a specific [`WireError`]; the
//! receiver logs it and drops the message, and nothing else changes.

use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb;
use serde::{Deserialize, Serialize};

use crate::forced::ForcedFork;
use crate::recovery::RecoveryReport;
use crate::state::{Control, MemberInfo, Submission};

const MAGIC: [u8; 4] = *b"TRGM";
/// The wire protocol version this build speaks.
pub const WIRE_VERSION: u8 = 4;
const HEADER_LEN: usize = 4 + 1 + 1 + 8 + 4;
const TRAILER_LEN: usize = 4;
/// Largest body accepted from a peer; a bigger length field is treated as garbage.
pub const BODY_LEN_MAX: usize = 64 << 20;

/// A message between group members.
#[derive(Clone, Debug, PartialEq)]
pub enum WireMessage {
    /// A Raft protocol message.
    Raft(eraftpb::Message),
    /// Submissions forwarded by a member to the leader for ordering.
    Forward(Vec<Submission>),
    /// A node asks to be added to the group (sent to any member; relayed to the leader).
    Join(MemberInfo),
    /// A member asks the leader to remove it (graceful leave).
    Leave,
    /// The leader's answer to a join request: who the members are and where they listen.
    Welcome(Vec<MemberInfo>),
    /// A control action (flow control, node state) for the leader to order.
    Control(Control),
    /// Tells the node with this Raft id, which sent a Raft message, that it is no longer a
    /// member. The id matters: a restarted node may listen at the same address.
    Removed(u64),
    /// The leader's answer to a join it cannot take yet: the proof a joiner at the address
    /// it named must send back, which only a node that receives there learns.
    Challenge(u64),
    /// A join request with the proof the leader sent to the joiner's address.
    ProvedJoin(MemberInfo, u64),
    /// A node restarted after a crash asks the member at this frame's address where it
    /// stands (see `recovery`): the answer goes to `reply_to`, with `challenge`.
    Probe {
        /// The prober's group address.
        reply_to: String,
        /// Proves the answer came from the address probed.
        challenge: u64,
    },
    /// The answer to a probe.
    Report {
        /// The probe's challenge.
        challenge: u64,
        /// Where the answering node stands.
        report: RecoveryReport,
    },
    /// The founder of a forced primary component (`pc.bootstrap` at runtime) tells a
    /// member of another component of the same history to give way (see `forced`).
    Superseded {
        /// The history (cluster state UUID) forked.
        cluster: base::Uuid,
        /// Where it was forked, and by whom.
        fork: ForcedFork,
    },
    /// A member outside the primary component tells the others it is there, or a member
    /// answers that it is there too (see `node/presence.rs`).
    Presence {
        /// True for an answer, which is never answered in turn.
        reply: bool,
    },
}

/// What follows the envelope of a message other than a Raft one, as it is read.
#[derive(Serialize, Deserialize)]
enum Body {
    Forward(Vec<Submission>),
    Join(MemberInfo),
    Leave,
    Welcome(Vec<MemberInfo>),
    Control(Control),
    Removed(u64),
    Challenge(u64),
    ProvedJoin(MemberInfo, u64),
    Probe(String, u64),
    Report(u64, RecoveryReport),
    Superseded(base::Uuid, ForcedFork),
    Presence(bool),
}

/// [`Body`] as it is written: the same variants in the same order, borrowing what they
/// carry. bincode writes a variant by its index and a slice as a sequence, so both give
/// the same bytes (`a_borrowed_body_encodes_as_the_owned_one`); encoding needs no copy of
/// the write-sets a `Forward` carries.
#[derive(Serialize)]
enum BodyRef<'a> {
    Forward(&'a [Submission]),
    Join(&'a MemberInfo),
    Leave,
    Welcome(&'a [MemberInfo]),
    Control(&'a Control),
    Removed(u64),
    Challenge(u64),
    ProvedJoin(&'a MemberInfo, u64),
    Probe(&'a str, u64),
    Report(u64, &'a RecoveryReport),
    Superseded(base::Uuid, &'a ForcedFork),
    Presence(bool),
}

impl<'a> BodyRef<'a> {
    /// The body of `message`, which is not a Raft message.
    fn of(message: &'a WireMessage) -> BodyRef<'a> {
        match message {
            WireMessage::Raft(_) => unreachable!("a Raft message has a protobuf body"),
            WireMessage::Forward(submissions) => BodyRef::Forward(submissions),
            WireMessage::Join(info) => BodyRef::Join(info),
            WireMessage::Leave => BodyRef::Leave,
            WireMessage::Welcome(members) => BodyRef::Welcome(members),
            WireMessage::Control(control) => BodyRef::Control(control),
            WireMessage::Removed(raft_id) => BodyRef::Removed(*raft_id),
            WireMessage::Challenge(proof) => BodyRef::Challenge(*proof),
            WireMessage::ProvedJoin(info, proof) => BodyRef::ProvedJoin(info, *proof),
            WireMessage::Probe {
                reply_to,
                challenge,
            } => BodyRef::Probe(reply_to, *challenge),
            WireMessage::Report { challenge, report } => BodyRef::Report(*challenge, report),
            WireMessage::Superseded { cluster, fork } => BodyRef::Superseded(*cluster, fork),
            WireMessage::Presence { reply } => BodyRef::Presence(*reply),
        }
    }
}

const KIND_RAFT: u8 = 1;
const KIND_OTHER: u8 = 2;

/// Why received bytes were not accepted as a group message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the envelope says.
    #[error("truncated group message: {got} of {needed} bytes")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes received.
        got: usize,
    },
    /// Bytes that do not start like a group message.
    #[error("not a group message (bad magic)")]
    BadMagic,
    /// A protocol version this build does not speak.
    #[error("group message version {0} is unknown (this build speaks {WIRE_VERSION})")]
    UnknownVersion(u8),
    /// A message kind this build does not know.
    #[error("unknown group message kind {0}")]
    UnknownKind(u8),
    /// A length field beyond [`BODY_LEN_MAX`].
    #[error("group message body of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The CRC32C does not match.
    #[error("group message checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Checksum sent.
        stored: u32,
        /// Checksum of what arrived.
        computed: u32,
    },
    /// The envelope is fine but the body does not decode.
    #[error("malformed group message body: {0}")]
    Malformed(String),
    /// Bytes after the end of the message.
    #[error("{0} unexpected bytes after the group message")]
    TrailingBytes(usize),
}

/// Encodes a message from member `from` (its Raft id).
pub fn encode(from: u64, message: &WireMessage) -> Vec<u8> {
    match message {
        WireMessage::Raft(raft_message) => frame(
            from,
            KIND_RAFT,
            raft_message.compute_size() as usize,
            |out| {
                raft_message
                    .write_to_vec(out)
                    .expect("protobuf encoding of a Raft message")
            },
        ),
        other => {
            use bincode::Options;
            let body = BodyRef::of(other);
            frame(from, KIND_OTHER, body_size(&body), |out| {
                bincode_options()
                    .serialize_into(out, &body)
                    .expect("bincode encoding of an in-memory value")
            })
        }
    }
}

/// The envelope around a body of `body_len` bytes that `write_body` appends. The body is
/// written straight into the frame: a large write-set's chunks are a megabyte per message,
/// and every copy of them is fresh memory for the kernel to clear.
fn frame(from: u64, kind: u8, body_len: usize, write_body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body_len + TRAILER_LEN);
    out.extend_from_slice(&MAGIC);
    out.push(WIRE_VERSION);
    out.push(kind);
    out.extend_from_slice(&from.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(body_len)
            .expect("body under 4 GiB")
            .to_le_bytes(),
    );
    write_body(&mut out);
    assert_eq!(
        out.len(),
        HEADER_LEN + body_len,
        "the body's size as computed"
    );
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The encoded size of a body other than a Raft message.
fn body_size(body: &BodyRef<'_>) -> usize {
    use bincode::Options;
    let size = bincode_options()
        .serialized_size(body)
        .expect("bincode sizing of an in-memory value");
    usize::try_from(size).expect("a body held in memory")
}

/// Length of the complete frame at the start of `bytes`, once its header has arrived.
/// Lets a stream transport cut frames without decoding them.
pub fn frame_len(bytes: &[u8]) -> Result<Option<usize>, WireError> {
    if bytes.len() < HEADER_LEN {
        return Ok(None);
    }
    if bytes[..4] != MAGIC {
        return Err(WireError::BadMagic);
    }
    let body_len = u32::from_le_bytes(bytes[14..18].try_into().expect("4 bytes")) as usize;
    if body_len > BODY_LEN_MAX {
        return Err(WireError::TooLarge(body_len));
    }
    Ok(Some(HEADER_LEN + body_len + TRAILER_LEN))
}

/// The sender's Raft id in the envelope at the start of `frame`, once its header has
/// arrived. Lets a transport check that a connection carries only one member's frames.
pub fn frame_sender(frame: &[u8]) -> Option<u64> {
    let id = frame.get(6..14)?;
    Some(u64::from_le_bytes(id.try_into().expect("8 bytes")))
}

/// Decodes one message that fills `bytes` exactly; returns the sender's Raft id with it.
pub fn decode(bytes: &[u8]) -> Result<(u64, WireMessage), WireError> {
    decode_frame(bytes, None)
}

/// [`decode`] of a frame held in a shared buffer: the entries of a Raft message are views
/// of `frame`, not copies (a follower's appends carry every write-set, a large one's
/// chunks a megabyte at a time).
pub fn decode_shared(frame: &Bytes) -> Result<(u64, WireMessage), WireError> {
    decode_frame(frame, Some(frame))
}

fn decode_frame(bytes: &[u8], shared: Option<&Bytes>) -> Result<(u64, WireMessage), WireError> {
    let needed = frame_len(bytes)?.ok_or(WireError::Truncated {
        needed: HEADER_LEN + TRAILER_LEN,
        got: bytes.len(),
    })?;
    if bytes[4] != WIRE_VERSION {
        return Err(WireError::UnknownVersion(bytes[4]));
    }
    if bytes.len() < needed {
        return Err(WireError::Truncated {
            needed,
            got: bytes.len(),
        });
    }
    if bytes.len() > needed {
        return Err(WireError::TrailingBytes(bytes.len() - needed));
    }
    let (covered, trailer) = bytes.split_at(needed - TRAILER_LEN);
    let stored = u32::from_le_bytes(trailer.try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(covered);
    if stored != computed {
        return Err(WireError::ChecksumMismatch { stored, computed });
    }
    let from = u64::from_le_bytes(bytes[6..14].try_into().expect("8 bytes"));
    let body = &covered[HEADER_LEN..];
    let message = match bytes[5] {
        KIND_RAFT => {
            let parsed = match shared {
                Some(frame) => eraftpb::Message::parse_from_carllerche_bytes(
                    &frame.slice(HEADER_LEN..needed - TRAILER_LEN),
                ),
                None => eraftpb::Message::parse_from_bytes(body),
            };
            let raft_message = parsed.map_err(|e| WireError::Malformed(e.to_string()))?;
            if raft_message.from != from {
                return Err(WireError::Malformed(format!(
                    "Raft message claims sender {} inside an envelope from {from}",
                    raft_message.from
                )));
            }
            WireMessage::Raft(raft_message)
        }
        KIND_OTHER => match bincode_decode::<Body>(body)? {
            Body::Forward(submissions) => WireMessage::Forward(submissions),
            Body::Join(info) => WireMessage::Join(info),
            Body::Leave => WireMessage::Leave,
            Body::Welcome(members) => WireMessage::Welcome(members),
            Body::Control(control) => WireMessage::Control(control),
            Body::Removed(raft_id) => WireMessage::Removed(raft_id),
            Body::Challenge(proof) => WireMessage::Challenge(proof),
            Body::ProvedJoin(info, proof) => WireMessage::ProvedJoin(info, proof),
            Body::Probe(reply_to, challenge) => WireMessage::Probe {
                reply_to,
                challenge,
            },
            Body::Report(challenge, report) => WireMessage::Report { challenge, report },
            Body::Superseded(cluster, fork) => WireMessage::Superseded { cluster, fork },
            Body::Presence(reply) => WireMessage::Presence { reply },
        },
        other => return Err(WireError::UnknownKind(other)),
    };
    Ok((from, message))
}

fn bincode_options() -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_limit(BODY_LEN_MAX as u64)
        .reject_trailing_bytes()
}

/// Serializes a value with the bounded options every group codec uses.
pub(crate) fn bincode_encode<T: Serialize>(value: &T) -> Vec<u8> {
    use bincode::Options;
    bincode_options()
        .serialize(value)
        .expect("bincode encoding of an in-memory value")
}

/// Serializes a value with the bounded options; an error if it exceeds [`BODY_LEN_MAX`].
pub(crate) fn bincode_try_encode<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    use bincode::Options;
    bincode_options()
        .serialize(value)
        .map_err(|e| WireError::Malformed(e.to_string()))
}

/// Deserializes a value, refusing oversized lengths and trailing bytes.
pub(crate) fn bincode_decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, WireError> {
    use bincode::Options;
    bincode_options()
        .deserialize(bytes)
        .map_err(|e| WireError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::Uuid;

    fn samples() -> Vec<WireMessage> {
        let mut raft_message = eraftpb::Message::default();
        raft_message.from = 7;
        raft_message.to = 9;
        raft_message.term = 3;
        raft_message.set_msg_type(eraftpb::MessageType::MsgHeartbeat);
        vec![
            WireMessage::Raft(raft_message),
            WireMessage::Forward(vec![Submission {
                origin: Uuid([5; 16]),
                submit_id: 3,
                payload: vec![1, 2, 3].into(),
                chunk: (1, 2),
            }]),
            WireMessage::Join(MemberInfo {
                raft_id: 7,
                uuid: Uuid([1; 16]),
                name: "node-a".into(),
                address: "127.0.0.1:4567".into(),
                incoming: "127.0.0.1:3306".into(),
            }),
            WireMessage::Leave,
            WireMessage::Presence { reply: false },
            WireMessage::Presence { reply: true },
            WireMessage::Welcome(vec![]),
            WireMessage::Control(Control::FlowStop(3)),
            WireMessage::Removed(7),
            WireMessage::Challenge(u64::MAX - 5),
            WireMessage::ProvedJoin(
                MemberInfo {
                    raft_id: 8,
                    uuid: Uuid([2; 16]),
                    name: "node-b".into(),
                    address: "127.0.0.1:4568".into(),
                    incoming: String::new(),
                },
                77,
            ),
            WireMessage::Probe {
                reply_to: "127.0.0.1:4570".into(),
                challenge: 99,
            },
            WireMessage::Report {
                challenge: 99,
                report: RecoveryReport {
                    address: "127.0.0.1:4571".into(),
                    holds_data: true,
                    last_view: None,
                    position: None,
                    standing: crate::recovery::Standing::NonPrimary,
                },
            },
            WireMessage::Superseded {
                cluster: Uuid([3; 16]),
                fork: ForcedFork {
                    fork_after: base::Seqno(41),
                    founder: 7,
                },
            },
            WireMessage::Raft(append_sample()),
            WireMessage::Raft(snapshot_sample()),
        ]
    }

    /// An append with two entries, to give the protobuf decoder nested messages to chew on.
    fn append_sample() -> eraftpb::Message {
        let mut message = eraftpb::Message::default();
        message.set_msg_type(eraftpb::MessageType::MsgAppend);
        message.from = 7;
        message.to = 9;
        message.term = 4;
        message.index = 10;
        message.log_term = 4;
        message.commit = 9;
        for index in 11..13 {
            let mut entry = eraftpb::Entry::default();
            entry.index = index;
            entry.term = 4;
            entry.data = vec![index as u8; 40].into();
            message.mut_entries().push(entry);
        }
        message
    }

    fn snapshot_sample() -> eraftpb::Message {
        let mut message = eraftpb::Message::default();
        message.set_msg_type(eraftpb::MessageType::MsgSnapshot);
        message.from = 7;
        message.to = 9;
        message.term = 4;
        let snapshot = message.mut_snapshot();
        snapshot.data = vec![0x5a; 64].into();
        snapshot.mut_metadata().index = 30;
        snapshot.mut_metadata().term = 4;
        snapshot.mut_metadata().mut_conf_state().voters = vec![7, 9, 11];
        message
    }

    #[test]
    fn every_kind_round_trips() {
        for message in samples() {
            let bytes = encode(7, &message);
            assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
            assert_eq!(decode(&bytes), Ok((7, message)));
        }
    }

    #[test]
    fn a_shared_frame_decodes_as_a_copied_one_and_its_entries_are_views() {
        for message in samples() {
            let bytes = Bytes::from(encode(7, &message));
            assert_eq!(decode_shared(&bytes), decode(&bytes));
        }
        let frame = Bytes::from(encode(7, &WireMessage::Raft(append_sample())));
        let Ok((_, WireMessage::Raft(decoded))) = decode_shared(&frame) else {
            panic!("an append decodes");
        };
        let frame_range = frame.as_ptr_range();
        for entry in decoded.get_entries() {
            assert!(
                frame_range.contains(&entry.data.as_ptr()),
                "entry data is a view"
            );
        }
    }

    #[test]
    fn truncation_corruption_and_versions_are_named() {
        for message in samples() {
            let bytes = encode(7, &message);
            for len in 0..bytes.len() {
                assert!(decode(&bytes[..len]).is_err(), "prefix {len} accepted");
            }
            for index in 0..bytes.len() {
                let mut corrupt = bytes.clone();
                corrupt[index] ^= 0x04;
                assert!(decode(&corrupt).is_err(), "flip at {index} accepted");
            }
            let mut newer = bytes.clone();
            newer[4] = WIRE_VERSION + 1;
            assert_eq!(
                decode(&newer),
                Err(WireError::UnknownVersion(WIRE_VERSION + 1))
            );
        }
    }

    /// The owned body of a message other than a Raft one, as a decoder reads it.
    fn owned_body(message: &WireMessage) -> Body {
        match message.clone() {
            WireMessage::Raft(_) => unreachable!("Raft messages have no bincode body"),
            WireMessage::Forward(submissions) => Body::Forward(submissions),
            WireMessage::Join(info) => Body::Join(info),
            WireMessage::Leave => Body::Leave,
            WireMessage::Welcome(members) => Body::Welcome(members),
            WireMessage::Control(control) => Body::Control(control),
            WireMessage::Removed(raft_id) => Body::Removed(raft_id),
            WireMessage::Challenge(proof) => Body::Challenge(proof),
            WireMessage::ProvedJoin(info, proof) => Body::ProvedJoin(info, proof),
            WireMessage::Probe {
                reply_to,
                challenge,
            } => Body::Probe(reply_to, challenge),
            WireMessage::Report { challenge, report } => Body::Report(challenge, report),
            WireMessage::Superseded { cluster, fork } => Body::Superseded(cluster, fork),
            WireMessage::Presence { reply } => Body::Presence(reply),
        }
    }

    #[test]
    fn a_borrowed_body_encodes_as_the_owned_one() {
        let bodies = samples()
            .into_iter()
            .filter(|message| !matches!(message, WireMessage::Raft(_)))
            .collect::<Vec<_>>();
        assert!(bodies.len() >= 12, "every kind of body is sampled");
        for message in &bodies {
            let borrowed = bincode_encode(&BodyRef::of(message));
            assert_eq!(
                borrowed,
                bincode_encode(&owned_body(message)),
                "{message:?}"
            );
            assert_eq!(body_size(&BodyRef::of(message)), borrowed.len());
        }
    }

    #[test]
    fn a_forged_raft_sender_is_refused() {
        let mut raft_message = eraftpb::Message::default();
        raft_message.from = 8;
        let bytes = encode(7, &WireMessage::Raft(raft_message));
        assert!(matches!(decode(&bytes), Err(WireError::Malformed(_))));
    }

    #[test]
    fn a_huge_length_field_is_refused_before_allocation() {
        let mut bytes = encode(7, &WireMessage::Leave);
        bytes[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            frame_len(&bytes),
            Err(WireError::TooLarge(u32::MAX as usize))
        );
    }

    mod fuzz {
        use super::*;
        use fuzzing::{Damage, Damages, Weights};
        use proptest::prelude::*;
        use proptest::sample::Index;

        /// Cases per target: a case takes a few microseconds, so this is under a second.
        const FUZZ_CASES: u32 = 100_000;

        /// A well-formed envelope around `body`: right magic, version, length and checksum,
        /// so that the body decoders are what gets exercised.
        fn seal(kind: u8, from: u64, body: &[u8]) -> Vec<u8> {
            let mut out = MAGIC.to_vec();
            out.extend_from_slice(&[WIRE_VERSION, kind]);
            out.extend_from_slice(&from.to_le_bytes());
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(body);
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
            out
        }

        /// A decoded message must be one that encodes and decodes back to itself.
        fn accepted_round_trips(bytes: &[u8]) -> Result<(), TestCaseError> {
            let decoded = decode(bytes);
            let framed = frame_len(bytes);
            if let Ok((from, message)) = decoded {
                prop_assert_eq!(framed, Ok(Some(bytes.len())));
                prop_assert_eq!(decode(&encode(from, &message)), Ok((from, message)));
            }
            Ok(())
        }

        /// One way to damage a frame: a bit flipped, a byte overwritten, a cut or an
        /// insertion.
        fn damage() -> impl Strategy<Value = Damage> {
            Damages::default()
                .weights(Weights {
                    wide: 0,
                    ..Weights::EVEN
                })
                .insert_lengths(1..8)
                .strategy()
        }

        proptest! {
            #![proptest_config(fuzzing::config(FUZZ_CASES))]

            /// Arbitrary bytes, most of them in a well-formed envelope of either kind (or
            /// behind the right magic) so that more than the header check is exercised.
            #[test]
            fn fuzz_wire_decode_arbitrary_bytes(
                body in proptest::collection::vec(any::<u8>(), 0..300),
                framing in 0..3u8,
                kind in prop_oneof![Just(KIND_RAFT), Just(KIND_OTHER), any::<u8>()],
                from in any::<u64>(),
            ) {
                let bytes = match framing {
                    0 => body,
                    1 => MAGIC.iter().copied().chain([WIRE_VERSION]).chain(body).collect(),
                    _ => seal(kind, from, &body),
                };
                accepted_round_trips(&bytes)?;
            }

            /// Real frames of every kind with bytes flipped, overwritten, cut and inserted,
            /// then resealed (a well-formed envelope around a mangled body) or not.
            #[test]
            fn fuzz_wire_decode_mutated(
                sample in any::<Index>(),
                damages in proptest::collection::vec(damage(), 1..4),
                reseal in any::<bool>(),
            ) {
                let samples = samples();
                let original = encode(7, &samples[sample.index(samples.len())]);
                let mut bytes = original.clone();
                if reseal {
                    let mut body = bytes[HEADER_LEN..bytes.len() - TRAILER_LEN].to_vec();
                    fuzzing::apply(&mut body, &damages);
                    bytes = seal(bytes[5], 7, &body);
                } else {
                    fuzzing::apply(&mut bytes, &damages);
                }
                accepted_round_trips(&bytes)?;
                if !reseal && damages.len() == 1 && matches!(damages[0], Damage::Flip(..)) {
                    prop_assert!(decode(&bytes).is_err(), "a flipped bit passed the checksum");
                }
            }
        }
    }
}
