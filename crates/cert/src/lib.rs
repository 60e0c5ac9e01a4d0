//! The certification index: decides whether an ordered write-set may commit, and which
//! earlier seqno it must wait for before it is applied.
//!
//! Every node feeds the same totally ordered stream of write-sets (and view changes, through
//! [`Certifier::skip`]) into its own [`Certifier`], so certification must be a pure function of
//! that stream: no clock, no I/O, no randomly seeded hashing. The rules are Galera's (see
//! `wsrep-contract.md` §6.3):
//!
//! - a key `[p1, .., pn]` is indexed at its full path with its own type, and every proper
//!   non-empty prefix `[p1, .., pk]` (k < n) is indexed as a [`KeyType::Shared`] "branch", so
//!   a table-level key `[db, t]` meets every row key `[db, t, pk]`;
//! - the index keeps, for each path and each key type, the latest write-set holding it;
//! - the [conflict matrix](relation) decides whether an entry is a conflict, a dependency or
//!   nothing; a conflict is real only if the entry committed after the incoming write-set's
//!   `last_seen` and comes from another node (or is TOI).
//!
//! Streaming replication: a transaction replicated in fragments orders each fragment as a
//! write-set of its own. Fragments of one transaction never conflict with each other (they
//! share a source), and each fragment after the first depends on the one before it, because
//! every node applies a transaction's fragments in one context, one at a time. The index
//! tracks the open streaming transactions for that, and so that a rollback fragment, which
//! carries no keys, passes without being certified.
//!
//! Key paths are stored as 128-bit hashes, as Galera's default key format (FLAT16) does,
//! so that the hot path allocates nothing per key.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use base::{KeyType, Seqno, Uuid};
use writeset::{flags, Parts, WriteSet};

mod codec;
mod conflict_key;

pub use codec::IndexDecodeError;

/// Galera's default `cert.max_length`.
pub const DEFAULT_MAX_INTERVAL: u64 = 16384;

/// Certification settings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CertConfig {
    /// The longest certification interval (`seqno - last_seen`) accepted; a longer one fails
    /// with [`Conflict::TooLong`]. Galera's `cert.max_length`.
    pub max_interval: u64,
}

impl Default for CertConfig {
    fn default() -> Self {
        CertConfig {
            max_interval: DEFAULT_MAX_INTERVAL,
        }
    }
}

/// The outcome of certifying one write-set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// The write-set commits; it may be applied once every seqno up to `depends_on` has
    /// finished applying.
    Pass {
        /// The highest seqno that must finish applying first (always below the write-set's
        /// own seqno).
        depends_on: Seqno,
    },
    /// The write-set must be rolled back everywhere.
    Fail(Conflict),
}

impl Verdict {
    /// True for [`Verdict::Pass`].
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass { .. })
    }

    /// The seqno to wait for, for a passing write-set.
    pub fn depends_on(&self) -> Option<Seqno> {
        match self {
            Verdict::Pass { depends_on } => Some(*depends_on),
            Verdict::Fail(_) => None,
        }
    }
}

/// Why a write-set failed certification.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Conflict {
    /// A key collides with a write-set that committed after this one's `last_seen`.
    #[error(
        "key conflict with write-set {with} (indexed as {key_type_found:?}, \
         wanted as {key_type_incoming:?})"
    )]
    Key {
        /// The seqno of the write-set already in the index.
        with: Seqno,
        /// The type that write-set held the key with.
        key_type_found: KeyType,
        /// The type the incoming write-set holds the key with (`Shared` for a branch).
        key_type_incoming: KeyType,
    },
    /// `last_seen` lies below the index start: what it conflicts with is no longer known.
    #[error("last_seen {last_seen} is below the start of the certification index ({purged_to})")]
    TooOld {
        /// The write-set's `last_seen`.
        last_seen: Seqno,
        /// Everything up to this seqno has been purged from the index.
        purged_to: Seqno,
    },
    /// The certification interval exceeds [`CertConfig::max_interval`].
    #[error("certification interval {last_seen}..{seqno} is longer than {max_interval}")]
    TooLong {
        /// The write-set's `last_seen`.
        last_seen: Seqno,
        /// The write-set's own seqno.
        seqno: Seqno,
        /// The configured limit.
        max_interval: u64,
    },
}

/// How an index entry of one type relates to an incoming key of another type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Relation {
    /// A conflict if the entry is newer than `last_seen` and foreign (or TOI); otherwise a
    /// dependency.
    Conflict,
    /// The incoming write-set must be applied after the entry's.
    Depend,
    /// Independent.
    None,
}

/// The conflict matrix: how an entry held as `found` relates to an incoming `incoming` key.
///
/// ```text
/// found \ incoming  EX UP RE SH
/// EX                C  C  C  C
/// UP                C  C  D  D
/// RE                C  D  N  N
/// SH                D  D  N  N
/// ```
///
/// Both rows and columns are monotonic in key strength, which is why holding one path with
/// several types in a single write-set needs no special treatment.
pub fn relation(found: KeyType, incoming: KeyType) -> Relation {
    use KeyType::{Exclusive as EX, Reference as RE, Shared as SH, Update as UP};
    match (found, incoming) {
        (EX, _) | (UP, EX | UP) | (RE, EX) => Relation::Conflict,
        (UP, RE | SH) | (RE, UP) | (SH, EX | UP) => Relation::Depend,
        (RE, RE | SH) | (SH, RE | SH) => Relation::None,
    }
}

/// Index entry types in the order they are examined, which decides which conflict is reported
/// when there are several.
const STRONGEST_FIRST: [KeyType; 4] = [
    KeyType::Exclusive,
    KeyType::Update,
    KeyType::Reference,
    KeyType::Shared,
];

/// A key path reduced to 128 bits.
type PathHash = u128;

/// The running hash of a key path, one part at a time, so that every prefix's hash falls out
/// of hashing the full key.
///
/// Two independent 64-bit lanes of folded multiplication, finished with a Feistel mix. It is
/// fixed (no per-process seed) because every node must index identically. It is not
/// collision-resistant against crafted keys; an accidental 128-bit collision is negligible.
#[derive(Clone, Copy)]
struct PathState {
    a: u64,
    b: u64,
}

impl PathState {
    /// The empty path.
    const ROOT: PathState = PathState {
        a: 0x243f_6a88_85a3_08d3,
        b: 0x1319_8a2e_0370_7344,
    };

    fn word(&mut self, w: u64) {
        self.a = fold_mul(self.a ^ w, 0x9e37_79b9_7f4a_7c15);
        self.b = fold_mul(self.b ^ w.rotate_left(29), 0xc2b2_ae3d_27d4_eb4f);
    }

    fn part(mut self, part: &[u8]) -> PathState {
        // The length first keeps part boundaries apart: ["ab","c"] is not ["a","bc"], and the
        // zero padding of the last word is unambiguous.
        self.word(part.len() as u64);
        let mut chunks = part.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.word(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(word));
        }
        self
    }

    fn finish(self) -> PathHash {
        let a = self.a ^ fmix(self.b);
        let b = self.b ^ fmix(a);
        (u128::from(a) << 64) | u128::from(b)
    }
}

fn fold_mul(x: u64, m: u64) -> u64 {
    let product = u128::from(x) * u128::from(m);
    (product as u64) ^ ((product >> 64) as u64)
}

/// MurmurHash3's 64-bit finaliser.
fn fmix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Hashes an already mixed [`PathHash`] for the index map: taking its low half is enough, and
/// being fixed keeps the index layout identical from run to run.
#[derive(Default, Clone)]
struct PathHashHasher(u64);

impl Hasher for PathHashHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if something other than a u128 is hashed; kept correct, not fast.
        for byte in bytes {
            self.0 = fold_mul(self.0 ^ u64::from(*byte), 0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 ^= value as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Index = HashMap<PathHash, Slots, BuildHasherDefault<PathHashHasher>>;

/// No seqno holds this slot.
const EMPTY_SLOT: i64 = i64::MIN;

/// The latest seqno holding one path, per key type (indexed by the key type's ABI value).
#[derive(Clone, Copy)]
struct Slots([i64; 4]);

impl Slots {
    const EMPTY: Slots = Slots([EMPTY_SLOT; 4]);

    fn is_empty(&self) -> bool {
        self.0.iter().all(|s| *s == EMPTY_SLOT)
    }
}

/// What the index needs to know about each seqno still covered by it.
#[derive(Clone, Copy)]
struct Record {
    source: Uuid,
    toi: bool,
    /// How many entries of `Certifier::written` this seqno pushed.
    paths: usize,
}

impl Record {
    /// A seqno that indexed nothing: a failed write-set or a view change.
    const NOTHING: Record = Record {
        source: Uuid::NIL,
        toi: false,
        paths: 0,
    };
}

/// A streaming transaction: its originator and the originator's transaction id.
pub type StreamId = (Uuid, u64);

/// What the index knows of one open streaming transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenStream {
    /// The seqno of its latest certified fragment.
    pub last_fragment: Seqno,
    /// How many fragments it has certified so far.
    pub fragments: u64,
}

/// Scratch vectors larger than this are dropped after use, so that one huge write-set does not
/// pin its memory for the life of the node.
const SCRATCH_KEEP: usize = 1 << 16;

/// The certification index of one node.
///
/// Feed it every ordered action, in seqno order: [`certify`](Certifier::certify) for
/// write-sets, [`skip`](Certifier::skip) for anything else that consumed a seqno. Purge it
/// with [`purge_to`](Certifier::purge_to) as the cluster-wide commit cut advances; the purge
/// points must be the same on every node (they are part of the ordered stream), since they
/// decide [`Conflict::TooOld`].
///
/// A donor hands its index to a joiner with a state transfer through
/// [`encode`](Certifier::encode) and [`decode`](Certifier::decode).
#[derive(Clone)]
pub struct Certifier {
    cfg: CertConfig,
    position: Seqno,
    purged_to: Seqno,
    /// The last passed PA_UNSAFE or TOI write-set: nothing after it may be applied before it.
    last_barrier: Seqno,
    index: Index,
    /// One record per seqno in `purged_to+1 ..= position`.
    history: VecDeque<Record>,
    /// The paths each seqno in `history` indexed, in seqno order: what a purge must visit.
    written: VecDeque<PathHash>,
    /// Reused per call: the (path, type) pairs of the write-set being certified.
    scratch: Vec<(PathHash, KeyType)>,
    /// Reused per call: the hash state after each part of the current key.
    states: Vec<PathState>,
    /// Streaming transactions with certified fragments and no commit or rollback yet. Part
    /// of a state transfer, so that a joiner certifies their next fragments as every other
    /// member does; a fragment of a stream the index never saw open (one that began before
    /// the index did) waits for everything before it.
    streams: HashMap<StreamId, OpenStream, BuildHasherDefault<PathHashHasher>>,
}

impl fmt::Debug for Certifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certifier")
            .field("position", &self.position)
            .field("purged_to", &self.purged_to)
            .field("last_barrier", &self.last_barrier)
            .field("index_len", &self.index.len())
            .field("max_interval", &self.cfg.max_interval)
            .finish()
    }
}

impl Certifier {
    /// An empty index for a cluster's first seqno: the next write-set is seqno 1.
    pub fn new(cfg: CertConfig) -> Self {
        Certifier::starting_at(cfg, Seqno::ZERO)
    }

    /// An empty index at `position`, for a node that joined with state up to `position`: the
    /// next action is `position + 1`, and write-sets that saw less than `position` fail
    /// with [`Conflict::TooOld`] because what they conflict with is unknown here.
    pub fn starting_at(cfg: CertConfig, position: Seqno) -> Self {
        Certifier {
            cfg,
            position,
            purged_to: position,
            last_barrier: Seqno::UNDEFINED,
            index: Index::default(),
            history: VecDeque::new(),
            written: VecDeque::new(),
            scratch: Vec::new(),
            states: Vec::new(),
            streams: HashMap::default(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> CertConfig {
        self.cfg
    }

    /// The last certified or skipped seqno.
    pub fn position(&self) -> Seqno {
        self.position
    }

    /// Everything up to this seqno has left the index (the index start, at first).
    pub fn purged_to(&self) -> Seqno {
        self.purged_to
    }

    /// The number of key paths in the index (`wsrep_cert_index_size`).
    pub fn index_len(&self) -> usize {
        self.index.len()
    }

    /// The open streaming transactions: how many, and how many fragments they certified.
    pub fn open_streams(&self) -> (usize, u64) {
        let fragments = self.streams.values().map(|s| s.fragments).sum();
        (self.streams.len(), fragments)
    }

    /// Whether `seqno` is, as far as the index tells, a certified fragment of a streaming
    /// transaction still open: its source has an open stream whose last fragment is at or
    /// after it.
    fn is_fragment_of_an_open_stream(&self, seqno: Seqno) -> bool {
        let offset = seqno.0 - self.purged_to.0 - 1;
        let Some(record) = usize::try_from(offset)
            .ok()
            .and_then(|o| self.history.get(o))
        else {
            return false;
        };
        self.streams
            .iter()
            .any(|((source, _), open)| *source == record.source && open.last_fragment >= seqno)
    }

    /// The open streaming transaction `id`, if any.
    pub fn open_stream(&self, id: StreamId) -> Option<OpenStream> {
        self.streams.get(&id).copied()
    }

    /// Forgets the open streaming transactions of sources not in `members` (a primary view
    /// without their originator: the servers roll them back); returns how many.
    pub fn close_streams_absent_from(&mut self, members: &[Uuid]) -> usize {
        let before = self.streams.len();
        self.streams
            .retain(|(source, _), _| members.contains(source));
        before - self.streams.len()
    }

    /// Advances past `seqno` without a write-set (a view change, or any other ordered action).
    ///
    /// # Panics
    /// If `seqno` is not `position() + 1`.
    pub fn skip(&mut self, seqno: Seqno) {
        self.expect_next(seqno, "skip");
        self.history.push_back(Record::NOTHING);
        self.position = seqno;
    }

    /// Certifies the write-set ordered at `seqno` and, if it passes, adds its keys to the
    /// index. A failed write-set still consumes its seqno.
    ///
    /// # Panics
    /// If `seqno` is not `position() + 1`: a gap or a repeat means the caller lost track of
    /// the total order, and going on would let nodes disagree.
    pub fn certify(&mut self, seqno: Seqno, ws: &WriteSet) -> Verdict {
        self.expect_next(seqno, "certify");
        let mut paths = std::mem::take(&mut self.scratch);
        let verdict = self.judge(seqno, ws, &mut paths);
        let stream = (ws.source, ws.trx_id);
        match verdict {
            Verdict::Pass { .. } => {
                self.insert(seqno, ws, &paths);
                if ws.is_toi() || ws.is_pa_unsafe() {
                    self.last_barrier = seqno;
                }
                if ws.is_open_fragment() {
                    let open = self.streams.entry(stream).or_insert(OpenStream {
                        last_fragment: seqno,
                        fragments: 0,
                    });
                    open.last_fragment = seqno;
                    open.fragments += 1;
                } else if !self.streams.is_empty() {
                    self.streams.remove(&stream);
                }
            }
            Verdict::Fail(conflict) => {
                tracing::debug!(%seqno, source = ?ws.source, trx = ws.trx_id, %conflict,
                    "certification failed");
                if let Conflict::Key { with, .. } = conflict {
                    if self.is_fragment_of_an_open_stream(with) {
                        base::mark!("cert.conflict_with_a_certified_fragment");
                    }
                }
                self.history.push_back(Record::NOTHING);
                // Servers roll a streaming transaction back when one of its fragments fails.
                self.streams.remove(&stream);
            }
        }
        self.position = seqno;
        paths.clear();
        if paths.capacity() <= SCRATCH_KEEP {
            self.scratch = paths;
        }
        if self.states.capacity() > SCRATCH_KEEP {
            self.states = Vec::new();
        }
        verdict
    }

    /// Forgets every index entry for seqnos up to `safe`, the seqno every member has
    /// committed. A `safe` below an earlier one is ignored; one above `position()` purges
    /// only up to `position()`.
    ///
    /// Costs time in proportion to the keys of the purged write-sets, not to the index size.
    pub fn purge_to(&mut self, safe: Seqno) {
        let safe = safe.min(self.position);
        if safe <= self.purged_to {
            return;
        }
        let horizon = safe.0;
        let count = (safe.0 - self.purged_to.0) as usize;
        for record in self.history.drain(..count) {
            for path in self.written.drain(..record.paths) {
                if let std::collections::hash_map::Entry::Occupied(mut entry) =
                    self.index.entry(path)
                {
                    // Clears any older slot too, even one a later record wrote: that record
                    // is within this purge and will find nothing left to do.
                    for slot in &mut entry.get_mut().0 {
                        if *slot <= horizon {
                            *slot = EMPTY_SLOT;
                        }
                    }
                    if entry.get().is_empty() {
                        entry.remove();
                    }
                }
            }
        }
        tracing::trace!(%safe, index_len = self.index.len(), "certification index purged");
        self.purged_to = safe;
    }

    fn expect_next(&self, seqno: Seqno, what: &str) {
        assert!(
            seqno == self.position.next(),
            "{what} called with seqno {seqno:?} but the certifier is at {:?}: seqnos must be \
             consecutive",
            self.position
        );
    }

    /// Decides the verdict, leaving the write-set's (path, type) pairs in `paths` if it
    /// passes.
    fn judge(
        &mut self,
        seqno: Seqno,
        ws: &WriteSet,
        paths: &mut Vec<(PathHash, KeyType)>,
    ) -> Verdict {
        let toi = ws.is_toi();
        if ws.is_rollback() {
            // It only undoes what its transaction's fragments did, so it cannot conflict;
            // it runs after everything before it, as Galera orders it.
            paths.clear();
            return Verdict::Pass {
                depends_on: seqno.prev(),
            };
        }
        // A `last_seen` at or past the write-set's own seqno is impossible from an honest
        // source; clamping keeps the verdict deterministic and `depends_on < seqno`.
        let last_seen = ws.last_seen.min(seqno.prev());
        // TOI already runs in isolation on every node, so it cannot fail; the interval rules
        // only matter for write-sets whose conflicts we must find.
        if !toi {
            if last_seen < self.purged_to {
                base::mark!("cert.too_old_to_certify");
                return Verdict::Fail(Conflict::TooOld {
                    last_seen,
                    purged_to: self.purged_to,
                });
            }
            let interval = i128::from(seqno.0) - i128::from(last_seen.0);
            if interval > i128::from(self.cfg.max_interval) {
                return Verdict::Fail(Conflict::TooLong {
                    last_seen,
                    seqno,
                    max_interval: self.cfg.max_interval,
                });
            }
        }

        collect_paths(ws, paths, &mut self.states);

        if toi || ws.is_pa_unsafe() {
            // Exactly seqno-1, so key dependencies cannot change it; but PA_UNSAFE can still
            // conflict.
            if !toi {
                if let Some(conflict) = self.find_conflict(ws, last_seen, paths, &mut 0) {
                    base::mark!("cert.pa_unsafe_write_set_conflicts");
                    return Verdict::Fail(conflict);
                }
            }
            return Verdict::Pass {
                depends_on: seqno.prev(),
            };
        }

        let mut depends = self.purged_to.0.max(self.last_barrier.0);
        if ws.flags & flags::IMPLICIT_DEPS != 0 {
            depends = depends.max(last_seen.0);
        }
        if ws.continues_stream() {
            // After the transaction's previous fragment; a stream this index never saw
            // opened before it started, so wait for everything before.
            let previous = self
                .streams
                .get(&(ws.source, ws.trx_id))
                .map_or(seqno.prev(), |open| open.last_fragment);
            depends = depends.max(previous.0);
        }
        if let Some(conflict) = self.find_conflict(ws, last_seen, paths, &mut depends) {
            return Verdict::Fail(conflict);
        }
        debug_assert!(
            depends < seqno.0,
            "depends_on {depends} not below seqno {seqno}"
        );
        Verdict::Pass {
            depends_on: Seqno(depends),
        }
    }

    /// The first real conflict (keys in write-set order, each key's levels outermost first,
    /// entries strongest first), raising `depends` on the way.
    fn find_conflict(
        &self,
        ws: &WriteSet,
        last_seen: Seqno,
        paths: &[(PathHash, KeyType)],
        depends: &mut i64,
    ) -> Option<Conflict> {
        for &(path, incoming) in paths {
            let Some(slots) = self.index.get(&path) else {
                continue;
            };
            for found in STRONGEST_FIRST {
                let held = slots.0[found as usize];
                if held == EMPTY_SLOT {
                    continue;
                }
                match relation(found, incoming) {
                    Relation::None => continue,
                    Relation::Depend => {}
                    Relation::Conflict => {
                        if held > last_seen.0 {
                            let record = self.record(held);
                            if record.source != ws.source || record.toi {
                                return Some(Conflict::Key {
                                    with: Seqno(held),
                                    key_type_found: found,
                                    key_type_incoming: incoming,
                                });
                            }
                        }
                    }
                }
                *depends = (*depends).max(held);
            }
        }
        None
    }

    fn record(&self, seqno: i64) -> &Record {
        // Every slot left in the index is above `purged_to`, so its record is still here.
        let offset = seqno - self.purged_to.0 - 1;
        &self.history[offset as usize]
    }

    fn insert(&mut self, seqno: Seqno, ws: &WriteSet, paths: &[(PathHash, KeyType)]) {
        // One resize for a large write-set instead of several as it is inserted.
        self.index.reserve(paths.len());
        for &(path, key_type) in paths {
            self.index.entry(path).or_insert(Slots::EMPTY).0[key_type as usize] = seqno.0;
        }
        self.written.extend(paths.iter().map(|(path, _)| *path));
        self.history.push_back(Record {
            source: ws.source,
            toi: ws.is_toi(),
            paths: paths.len(),
        });
    }
}

/// Lists every (path, type) pair `ws` holds: each key's branches as `Shared`, outermost
/// first, then the key itself.
///
/// A branch the previous key already listed is left out (row keys of one table share their
/// `[db]` and `[db, table]` branches); listing it again would change nothing, since checking
/// or indexing the same pair twice is idempotent. Other repeats are rare and kept.
fn collect_paths(ws: &WriteSet, paths: &mut Vec<(PathHash, KeyType)>, states: &mut Vec<PathState>) {
    paths.clear();
    states.clear();
    states.push(PathState::ROOT);
    let mut previous: Option<Parts<'_>> = None;
    for key in ws.keys.iter() {
        let parts = key.parts;
        let depth = parts.len();
        let (common, previous_depth) = previous.map_or((0, 0), |previous| {
            let depth = previous.len();
            let common = parts
                .clone()
                .zip(previous)
                .take_while(|(a, b)| a == b)
                .count();
            (common, depth)
        });
        // Levels below `listed` were branches of the previous key: already in `paths`.
        let listed = common.min(previous_depth.saturating_sub(1)).min(depth) + 1;
        states.truncate(common + 1);
        for part in parts.clone().skip(common) {
            let next = states[states.len() - 1].part(part);
            states.push(next);
        }
        let branches = &states[listed.min(depth)..depth];
        paths.extend(
            branches
                .iter()
                .map(|state| (state.finish(), KeyType::Shared)),
        );
        paths.push((states[depth].finish(), key.key_type));
        previous = Some(parts);
    }
}

#[cfg(test)]
mod tests;
