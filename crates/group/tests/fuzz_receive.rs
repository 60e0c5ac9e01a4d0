//! `GroupNode::receive` against a running 3-node group: arbitrary bytes, real traffic
//! mangled (with its envelope resealed or not), and forged Raft and group messages with
//! extreme and plausible fields, from members, strangers, nobody and the receiver itself.
//! No node may panic, and the group must still order afterwards.

mod common;

use base::{Seqno, Uuid};
use bincode::Options as _;
use common::{address, Cluster};
use group::check::TERM_MAX;
use group::forced::ForcedFork;
use group::state::{LogEntry, MemberInfo};
use group::wire::{self, WireMessage};
use group::{Control, StateRequest, Submission};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::RngSeed;
use protobuf::{Message as _, ProtobufEnum};
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType,
    Snapshot,
};

/// Cases: each builds a 3-node group, injects up to `FRAMES_MAX` frames and runs it until
/// it orders again, about a millisecond, so this takes a few seconds. `PROPTEST_CASES`
/// overrides it (a longer fuzzing run).
const FUZZ_CASES: u32 = 4096;

/// Frames injected per case.
const FRAMES_MAX: usize = 12;

/// Steps the group gets to order a write-set after the injection: past the suspect timeout
/// (100 steps), so that a forged member is evicted and an evicted one is back.
const RECOVERY_STEPS: usize = 1_000;

/// The seed of the case generator. Fixed, because a forged message from a member's id that
/// happens to be well formed is accepted (the sender is not authenticated at this layer),
/// and an unlucky run could forge its way to two diverged members of three: a fixed seed
/// keeps the test deterministic. Change it to explore other cases.
const SEED: u64 = 0x0074_7269_7265_6d65;

/// Who a forged message claims to come from.
#[derive(Clone, Debug)]
enum Sender {
    Member(Index),
    Stranger(u64),
    Nobody,
    Receiver,
}

#[derive(Clone, Debug)]
enum Data {
    Empty,
    Bytes(Vec<u8>),
    Entry,
    Change(ConfChangeType, Sender),
    State,
}

#[derive(Clone, Debug)]
struct RaftSpec {
    msg_type: MessageType,
    from: Sender,
    term: u64,
    fields: [u64; 5],
    reject: bool,
    entries: Vec<(u64, u64, EntryType, Data)>,
    consecutive: bool,
    snapshot: Option<SnapshotSpec>,
    context: Vec<u8>,
}

#[derive(Clone, Debug)]
struct SnapshotSpec {
    index: u64,
    /// `None`: the message's term, as a leader sends.
    term: Option<u64>,
    /// `None`: the members, as a snapshot's group state lists them.
    voters: Option<Vec<Sender>>,
    data: Data,
}

#[derive(Clone, Debug)]
enum GroupSpec {
    Join(Sender, Sender, Option<Index>),
    Welcome(Sender, Vec<Sender>),
    Leave(Sender),
    /// A member outside the primary component saying it is there.
    Presence(Sender, bool),
    Control(Sender, u8, Sender, u64),
    Forward(Sender, Option<Index>, u64, (u32, u32), usize),
    Removed(Sender, Sender),
    /// A forced bootstrap's notice: sender, founder, fork seqno, of this history or not.
    Superseded(Sender, Sender, u64, bool),
}

#[derive(Clone, Debug)]
enum Frame {
    Bytes(Vec<u8>),
    Mutated {
        pick: Index,
        edits: Vec<(Index, u8)>,
        cut: Option<Index>,
        reseal: bool,
    },
    Raft(Box<RaftSpec>),
    Group(GroupSpec),
}

/// Numbers where raft-rs's arithmetic and checks have their edges, and small ones where a
/// young group's terms and indexes are.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..64u64,
        1 => Just(u64::MAX),
        1 => Just(TERM_MAX),
        1 => Just(TERM_MAX + 1),
        1 => any::<u64>(),
    ]
}

/// A field that is mostly absent (0), as in most genuine messages.
fn field() -> impl Strategy<Value = u64> {
    prop_oneof![2 => Just(0u64), 3 => number()]
}

fn sender() -> impl Strategy<Value = Sender> {
    prop_oneof![
        8 => any::<Index>().prop_map(Sender::Member),
        1 => any::<u64>().prop_map(Sender::Stranger),
        1 => Just(Sender::Nobody),
        1 => Just(Sender::Receiver),
    ]
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        Just(Data::Empty),
        proptest::collection::vec(any::<u8>(), 1..40).prop_map(Data::Bytes),
        Just(Data::Entry),
        (select(ConfChangeType::values()), sender()).prop_map(|(t, s)| Data::Change(t, s)),
        Just(Data::State),
    ]
}

fn raft_spec() -> impl Strategy<Value = RaftSpec> {
    let entry = (number(), number(), select(EntryType::values()), data());
    let voters = prop_oneof![
        // All the members (and only them): what a snapshot's group state lists.
        3 => Just(None),
        1 => proptest::collection::vec(sender(), 0..4).prop_map(Some),
    ];
    // The snapshot's term: mostly the message's own (`None`), as a leader's is.
    let snapshot_term = prop_oneof![2 => Just(None), 1 => number().prop_map(Some)];
    let snapshot =
        (number(), snapshot_term, voters, data()).prop_map(|(index, term, voters, data)| {
            SnapshotSpec {
                index,
                term,
                voters,
                data,
            }
        });
    (
        (select(MessageType::values()), sender(), number()),
        ([field(), field(), field(), field(), field()], any::<bool>()),
        proptest::collection::vec(entry, 0..4),
        any::<bool>(),
        proptest::option::weighted(0.8, snapshot),
        proptest::collection::vec(any::<u8>(), 0..12),
    )
        .prop_map(
            |(
                (msg_type, from, term),
                (fields, reject),
                entries,
                consecutive,
                snapshot,
                context,
            )| {
                RaftSpec {
                    msg_type,
                    from,
                    term,
                    fields,
                    reject,
                    entries,
                    consecutive,
                    snapshot,
                    context,
                }
            },
        )
}

fn group_spec() -> impl Strategy<Value = GroupSpec> {
    let chunk = prop_oneof![Just((0u32, 1u32)), (0..4u32, 0..4u32), any::<(u32, u32)>()];
    prop_oneof![
        (sender(), sender(), proptest::option::of(any::<Index>()))
            .prop_map(|(f, id, at)| GroupSpec::Join(f, id, at)),
        (sender(), proptest::collection::vec(sender(), 0..4))
            .prop_map(|(f, m)| GroupSpec::Welcome(f, m)),
        sender().prop_map(GroupSpec::Leave),
        (sender(), any::<bool>()).prop_map(|(f, reply)| GroupSpec::Presence(f, reply)),
        (sender(), 0..7u8, sender(), number())
            .prop_map(|(f, k, id, n)| GroupSpec::Control(f, k, id, n)),
        (
            sender(),
            proptest::option::of(any::<Index>()),
            number(),
            chunk,
            0..64usize
        )
            .prop_map(|(f, o, id, c, len)| GroupSpec::Forward(f, o, id, c, len)),
        (sender(), sender()).prop_map(|(f, id)| GroupSpec::Removed(f, id)),
        (sender(), sender(), number(), any::<bool>())
            .prop_map(|(f, founder, n, same)| GroupSpec::Superseded(f, founder, n, same)),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    let mutated = (
        any::<Index>(),
        proptest::collection::vec((any::<Index>(), any::<u8>()), 1..4),
        proptest::option::of(any::<Index>()),
        any::<bool>(),
    )
        .prop_map(|(pick, edits, cut, reseal)| Frame::Mutated {
            pick,
            edits,
            cut,
            reseal,
        });
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Frame::Bytes),
        3 => mutated,
        4 => raft_spec().prop_map(|spec| Frame::Raft(Box::new(spec))),
        3 => group_spec().prop_map(Frame::Group),
    ]
}

/// What the generator needs to know of the running group to build a frame.
struct Context<'a> {
    /// The members other than the receiver (the receiver has a sender of its own).
    others: Vec<u64>,
    members: Vec<u64>,
    uuids: Vec<Uuid>,
    receiver: u64,
    cluster: Uuid,
    state: Vec<u8>,
    traffic: &'a [Vec<u8>],
}

impl Context<'_> {
    fn id(&self, sender: &Sender) -> u64 {
        match sender {
            // A node between memberships knows no other member: someone, then.
            Sender::Member(at) => self
                .others
                .get(at.index(self.others.len() + 1))
                .map_or(1, |id| *id),
            Sender::Stranger(id) => *id,
            Sender::Nobody => 0,
            Sender::Receiver => self.receiver,
        }
    }

    fn bytes(&self, frame: &Frame) -> Vec<u8> {
        match frame {
            Frame::Bytes(bytes) => bytes.clone(),
            Frame::Mutated {
                pick,
                edits,
                cut,
                reseal,
            } => self.mutated(pick, edits, *cut, *reseal),
            Frame::Raft(spec) => {
                let message = self.raft(spec);
                wire::encode(message.from, &WireMessage::Raft(message))
            }
            Frame::Group(spec) => self.group(spec),
        }
    }

    fn mutated(
        &self,
        pick: &Index,
        edits: &[(Index, u8)],
        cut: Option<Index>,
        reseal: bool,
    ) -> Vec<u8> {
        let mut bytes = self.traffic[pick.index(self.traffic.len())].clone();
        // The envelope's header (18 bytes) and checksum (4) stay put when resealing.
        let body = if reseal {
            18..bytes.len() - 4
        } else {
            0..bytes.len()
        };
        for (at, value) in edits {
            if !body.is_empty() {
                bytes[body.start + at.index(body.len())] = *value;
            }
        }
        if let Some(at) = cut {
            bytes.truncate(at.index(bytes.len() + 1));
        }
        if reseal && bytes.len() >= 22 {
            let len = (bytes.len() - 22) as u32;
            bytes[14..18].copy_from_slice(&len.to_le_bytes());
            let end = bytes.len() - 4;
            let crc = crc32c::crc32c(&bytes[..end]);
            bytes[end..].copy_from_slice(&crc.to_le_bytes());
        }
        bytes
    }

    fn raft(&self, spec: &RaftSpec) -> Message {
        let mut m = Message::default();
        m.set_msg_type(spec.msg_type);
        m.from = self.id(&spec.from);
        m.to = self.receiver;
        m.term = spec.term;
        [
            m.index,
            m.log_term,
            m.commit,
            m.reject_hint,
            m.request_snapshot,
        ] = spec.fields;
        m.reject = spec.reject;
        m.context = spec.context.clone().into();
        for (position, (index, term, entry_type, data)) in spec.entries.iter().enumerate() {
            let mut entry = Entry::default();
            (entry.index, entry.term) = match spec.consecutive {
                true => (m.index.wrapping_add(position as u64 + 1), m.term),
                false => (*index, *term),
            };
            entry.set_entry_type(*entry_type);
            let (data, context) = self.data(data);
            (entry.data, entry.context) = (data.into(), context.into());
            m.mut_entries().push(entry);
        }
        if let Some(spec) = &spec.snapshot {
            let mut snapshot = Snapshot::default();
            snapshot.mut_metadata().index = spec.index;
            snapshot.mut_metadata().term = spec.term.unwrap_or(m.term);
            let voters = match &spec.voters {
                Some(voters) => voters.iter().map(|s| self.id(s)).collect(),
                None => self.members.clone(),
            };
            snapshot.mut_metadata().mut_conf_state().voters = voters;
            snapshot.data = self.data(&spec.data).0.into();
            m.set_snapshot(snapshot);
        }
        m
    }

    /// Entry (or snapshot) data and context.
    fn data(&self, data: &Data) -> (Vec<u8>, Vec<u8>) {
        match data {
            Data::Empty => (Vec::new(), Vec::new()),
            Data::Bytes(bytes) => (bytes.clone(), bytes.clone()),
            Data::Entry => {
                let origin = self.uuids.first().copied().unwrap_or(Uuid([1; 16]));
                let batch = LogEntry::Batch(vec![Submission::whole(origin, 1 << 20, vec![1])]);
                (batch.encode(), Vec::new())
            }
            Data::Change(change_type, node) => self.change(*change_type, self.id(node)),
            Data::State => (self.state.clone(), Vec::new()),
        }
    }

    fn change(&self, change_type: ConfChangeType, node_id: u64) -> (Vec<u8>, Vec<u8>) {
        let mut single = ConfChangeSingle::default();
        single.set_change_type(change_type);
        single.node_id = node_id;
        let mut change = ConfChangeV2::default();
        change.mut_changes().push(single);
        let info = identity(node_id, Uuid([0x66; 16]), "forged:1".into());
        let context = bincode::DefaultOptions::new().serialize(&info).unwrap();
        (change.write_to_bytes().unwrap(), context)
    }

    fn group(&self, spec: &GroupSpec) -> Vec<u8> {
        let (from, message) = match spec {
            GroupSpec::Join(from, id, at) => {
                let address = at.map_or("forged:2".into(), |at| address(at.index(3)));
                let uuid = Uuid([0x77; 16]);
                (
                    from,
                    WireMessage::Join(identity(self.id(id), uuid, address)),
                )
            }
            GroupSpec::Welcome(from, members) => {
                let members = members
                    .iter()
                    .map(|m| identity(self.id(m), Uuid([8; 16]), "nowhere:1".into()));
                (from, WireMessage::Welcome(members.collect()))
            }
            GroupSpec::Leave(from) => (from, WireMessage::Leave),
            GroupSpec::Presence(from, reply) => (from, WireMessage::Presence { reply: *reply }),
            GroupSpec::Control(from, kind, id, n) => (
                from,
                WireMessage::Control(self.control(*kind, self.id(id), *n)),
            ),
            GroupSpec::Forward(from, origin, submit_id, chunk, len) => {
                let member = |at: Index| self.uuids.get(at.index(self.uuids.len() + 1)).copied();
                let origin = origin.and_then(member).unwrap_or(Uuid([9; 16]));
                let submission = Submission {
                    origin,
                    submit_id: *submit_id,
                    payload: vec![0x5a; *len].into(),
                    chunk: *chunk,
                };
                (from, WireMessage::Forward(vec![submission]))
            }
            GroupSpec::Removed(from, id) => (from, WireMessage::Removed(self.id(id))),
            GroupSpec::Superseded(from, founder, n, same_history) => {
                let cluster = if *same_history {
                    self.cluster
                } else {
                    Uuid([0x55; 16])
                };
                let fork = ForcedFork {
                    fork_after: Seqno(*n as i64),
                    founder: self.id(founder),
                };
                (from, WireMessage::Superseded { cluster, fork })
            }
        };
        wire::encode(self.id(from), &message)
    }

    fn control(&self, kind: u8, id: u64, n: u64) -> Control {
        let seqno = Seqno(n as i64);
        match kind {
            0 => Control::FlowStop(id),
            1 => Control::FlowResume(id),
            2 => Control::State(id, base::NodeState::Donor),
            3 => Control::Committed(id, seqno),
            4 => Control::Cached(id, seqno),
            5 => Control::Weight(id, n as u8),
            _ => Control::StateRequest(StateRequest {
                joiner: id,
                request_id: n,
                donor_names: ",".into(),
                sst_request: vec![1],
                ist_from: seqno,
                ist_address: String::new(),
            }),
        }
    }
}

fn identity(raft_id: u64, uuid: Uuid, address: String) -> MemberInfo {
    MemberInfo {
        raft_id,
        uuid,
        name: "forged".into(),
        address,
        incoming: String::new(),
    }
}

/// A running group that has ordered a little, and what was sent meanwhile.
fn running_group() -> (Cluster, Vec<Vec<u8>>) {
    let mut cluster = Cluster::new(3);
    cluster.captured = Some(Vec::new());
    for index in 0..3 {
        cluster.node(index).submit(vec![index as u8; 3]);
    }
    cluster.run(5);
    let traffic = cluster.captured.take().unwrap();
    (cluster, traffic)
}

fn context<'a>(cluster: &mut Cluster, receiver: usize, traffic: &'a [Vec<u8>]) -> Context<'a> {
    let node = cluster.node(receiver);
    let me = node.me().raft_id;
    let members = &node.group_state().members;
    Context {
        others: members.keys().copied().filter(|id| *id != me).collect(),
        members: members.keys().copied().collect(),
        uuids: members.values().map(|m| m.info.uuid).collect(),
        receiver: me,
        cluster: node.group_state().cluster,
        state: node.group_state().encode(),
        traffic,
    }
}

/// Some write-set submitted after the injection is delivered by two nodes of three.
fn orders_again(cluster: &mut Cluster) -> bool {
    cluster.run(20);
    let payloads: Vec<Vec<u8>> = (0..3).map(|i| vec![0xee, i as u8]).collect();
    for (index, payload) in payloads.iter().enumerate() {
        cluster.node(index).submit(payload.clone());
    }
    let texts: Vec<String> = payloads.iter().map(|p| format!("ws:{p:?}")).collect();
    let quorum = |c: &Cluster| {
        texts.iter().any(|text| {
            (0..3)
                .filter(|i| c.ordered(*i).values().any(|v| v == text))
                .count()
                >= 2
        })
    };
    for _ in 0..RECOVERY_STEPS {
        if quorum(cluster) {
            return true;
        }
        cluster.step();
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig {
        rng_seed: RngSeed::Fixed(SEED),
        ..fuzzing::config(FUZZ_CASES)
    })]

    #[test]
    fn fuzz_receive_against_a_running_group(
        frames in proptest::collection::vec((0..3usize, frame()), 1..=FRAMES_MAX),
    ) {
        let (mut cluster, traffic) = running_group();
        for (receiver, frame) in &frames {
            let bytes = context(&mut cluster, *receiver, &traffic).bytes(frame);
            // Refused or taken, it must not stop anything; a panic fails the case.
            let _ = cluster.inject(*receiver, &bytes);
            cluster.step();
        }
        prop_assert!(orders_again(&mut cluster), "the group no longer orders");
    }
}
