//! What the decoders' fuzz targets share: how many cases a target runs ([`config`]), the ways
//! a valid encoding gets damaged ([`Damage`], drawn by [`Damages`]), and a reader that hands
//! out its bytes a few at a time ([`Trickle`], with [`check_bounded_read`]).
//!
//! For tests only: a crate lists it under `[dev-dependencies]` (`fuzzing.workspace = true`),
//! so neither it nor proptest is linked into the provider.
//!
//! The targets stay beside their decoders, named `fuzz_...`, each with its own default case
//! count; `scripts/fuzz.sh` runs them longer through `PROPTEST_CASES`. What belongs to one
//! format stays with it: where its length fields sit (a target writes a huge value over one
//! with [`write_le`]), which leading bytes to spare ([`Damage::apply_from`]), and how its
//! checksum is resealed after the damage.

use std::io::{self, Read};
use std::ops::Range;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::strategy::Union;
use proptest::test_runner::Config;

/// The proptest configuration of a fuzz target: `default_cases` cases (what a plain
/// `cargo test` runs), unless `PROPTEST_CASES` holds a number (a longer fuzzing run).
pub fn config(default_cases: u32) -> Config {
    let setting = std::env::var("PROPTEST_CASES").ok();
    Config::with_cases(cases(setting.as_deref(), default_cases))
}

/// The cases `PROPTEST_CASES` asks for when it is a number, else `default_cases`.
fn cases(setting: Option<&str>, default_cases: u32) -> u32 {
    setting
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default_cases)
}

/// One way to damage bytes. A position is an [`Index`], resolved against the length of the
/// bytes when the damage is applied, so the same damage fits an input of any length.
#[derive(Clone, Debug)]
pub enum Damage {
    /// One bit of one byte flipped; the bit's number, 0 to 7.
    Flip(Index, u8),
    /// One byte overwritten with a value.
    Set(Index, u8),
    /// The low `width` bytes (8 at the most) of a little-endian value written over whatever
    /// is there, as far as the bytes go: a huge length, where the position falls on a field.
    Wide(Index, u64, usize),
    /// The bytes cut short, by one byte at least.
    Truncate(Index),
    /// Bytes inserted anywhere, the end included.
    Insert(Index, Vec<u8>),
}

impl Damage {
    /// Damages `bytes`. Empty bytes stay empty.
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        self.apply_from(0, bytes);
    }

    /// Damages `bytes[start..]` only, sparing the first `start` bytes (a magic and version
    /// the target means to get past). Bytes no longer than `start` stay as they are.
    pub fn apply_from(&self, start: usize, bytes: &mut Vec<u8>) {
        let len = bytes.len().saturating_sub(start);
        if len == 0 {
            return;
        }
        match self {
            Damage::Flip(at, bit) => bytes[start + at.index(len)] ^= 1 << (bit % 8),
            Damage::Set(at, value) => bytes[start + at.index(len)] = *value,
            Damage::Wide(at, value, width) => {
                write_le(bytes, start + at.index(len), *value, *width);
            }
            Damage::Truncate(at) => bytes.truncate(start + at.index(len)),
            Damage::Insert(at, more) => {
                let at = start + at.index(len + 1);
                bytes.splice(at..at, more.iter().copied());
            }
        }
    }
}

/// Applies each of `damages` to `bytes`, in turn.
pub fn apply(bytes: &mut Vec<u8>, damages: &[Damage]) {
    for damage in damages {
        damage.apply(bytes);
    }
}

/// Writes the low `width` bytes (8 at the most) of `value`, little-endian, at `at`, as far as
/// `bytes` goes: how a target puts a huge value into a length field it knows the offset of.
pub fn write_le(bytes: &mut [u8], at: usize, value: u64, width: usize) {
    let end = at.saturating_add(width.min(8)).min(bytes.len());
    if at < end {
        bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
    }
}

/// Values a length or count field may claim far beyond any input: `u64::MAX`, `u32::MAX`,
/// each of `also` (a format's own limits), or any `u64`, each of these as likely.
pub fn huge(also: &[u64]) -> BoxedStrategy<u64> {
    let mut notable = vec![u64::MAX, u64::from(u32::MAX)];
    notable.extend_from_slice(also);
    let weight = u32::try_from(notable.len()).expect("a few values");
    Union::new_weighted(vec![
        (weight, select(notable).boxed()),
        (1, any::<u64>().boxed()),
    ])
    .boxed()
}

/// How likely each kind of [`Damage`] is, relative to the others; 0 leaves a kind out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weights {
    /// Of [`Damage::Flip`].
    pub flip: u32,
    /// Of [`Damage::Set`].
    pub set: u32,
    /// Of [`Damage::Wide`].
    pub wide: u32,
    /// Of [`Damage::Truncate`].
    pub truncate: u32,
    /// Of [`Damage::Insert`].
    pub insert: u32,
}

impl Weights {
    /// Every kind as likely as the others.
    pub const EVEN: Weights = Weights {
        flip: 1,
        set: 1,
        wide: 1,
        truncate: 1,
        insert: 1,
    };

    /// Mostly damage that keeps the length: flips 3, overwrites 2 and wide values 2, to
    /// cuts 1 and insertions 1.
    pub const MOSTLY_IN_PLACE: Weights = Weights {
        flip: 3,
        set: 2,
        wide: 2,
        truncate: 1,
        insert: 1,
    };

    /// No kind at all: the base for naming only the kinds wanted,
    /// `Weights { set: 1, ..Weights::NONE }`.
    pub const NONE: Weights = Weights {
        flip: 0,
        set: 0,
        wide: 0,
        truncate: 0,
        insert: 0,
    };
}

impl Default for Weights {
    fn default() -> Self {
        Weights::EVEN
    }
}

/// The damage one target does: which kinds and how likely ([`Weights`]), which huge values
/// and field widths a [`Damage::Wide`] writes, and how many bytes a [`Damage::Insert`]
/// inserts. [`Damages::strategy`] draws one [`Damage`].
#[derive(Clone, Debug)]
pub struct Damages {
    weights: Weights,
    huge: Vec<u64>,
    widths: Vec<usize>,
    insert_lengths: Range<usize>,
}

impl Default for Damages {
    /// Every kind as likely; only [`huge`]'s own values, 4 or 8 bytes wide; 1 to 15 bytes
    /// inserted.
    fn default() -> Self {
        Damages {
            weights: Weights::EVEN,
            huge: Vec::new(),
            widths: vec![4, 8],
            insert_lengths: 1..16,
        }
    }
}

impl Damages {
    /// How likely each kind is.
    pub fn weights(mut self, weights: Weights) -> Self {
        self.weights = weights;
        self
    }

    /// The format's own limits, for [`Damage::Wide`] to claim besides [`huge`]'s values.
    pub fn huge(mut self, also: &[u64]) -> Self {
        self.huge = also.to_vec();
        self
    }

    /// The widths of the format's length fields, one of which a [`Damage::Wide`] writes.
    pub fn widths(mut self, widths: &[usize]) -> Self {
        self.widths = widths.to_vec();
        self
    }

    /// How many bytes a [`Damage::Insert`] inserts.
    pub fn insert_lengths(mut self, lengths: Range<usize>) -> Self {
        self.insert_lengths = lengths;
        self
    }

    /// A strategy drawing one [`Damage`] of the kinds with a weight.
    ///
    /// # Panics
    /// If every weight is 0, or [`Damage::Wide`] has a weight and no widths, or inserts
    /// have a weight and an empty range of lengths.
    pub fn strategy(&self) -> BoxedStrategy<Damage> {
        let Weights {
            flip,
            set,
            wide,
            truncate,
            insert,
        } = self.weights;
        let mut options: Vec<(u32, BoxedStrategy<Damage>)> = Vec::new();
        if flip > 0 {
            let flips = (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip(at, bit));
            options.push((flip, flips.boxed()));
        }
        if set > 0 {
            let sets = (any::<Index>(), any::<u8>()).prop_map(|(at, v)| Damage::Set(at, v));
            options.push((set, sets.boxed()));
        }
        if wide > 0 {
            assert!(!self.widths.is_empty(), "wide damage needs a field width");
            let wides = (
                any::<Index>(),
                huge(&self.huge),
                select(self.widths.clone()),
            )
                .prop_map(|(at, value, width)| Damage::Wide(at, value, width));
            options.push((wide, wides.boxed()));
        }
        if truncate > 0 {
            options.push((truncate, any::<Index>().prop_map(Damage::Truncate).boxed()));
        }
        if insert > 0 {
            assert!(
                !self.insert_lengths.is_empty(),
                "an insertion needs a length"
            );
            let bytes = proptest::collection::vec(any::<u8>(), self.insert_lengths.clone());
            let inserts = (any::<Index>(), bytes).prop_map(|(at, more)| Damage::Insert(at, more));
            options.push((insert, inserts.boxed()));
        }
        assert!(!options.is_empty(), "no kind of damage has a weight");
        Union::new_weighted(options).boxed()
    }
}

/// One flipped bit: a [`Damage::Flip`].
pub fn flip() -> BoxedStrategy<Damage> {
    let flips = Weights {
        flip: 1,
        ..Weights::NONE
    };
    Damages::default().weights(flips).strategy()
}

/// One overwritten byte: a [`Damage::Set`].
pub fn overwrite() -> BoxedStrategy<Damage> {
    let sets = Weights {
        set: 1,
        ..Weights::NONE
    };
    Damages::default().weights(sets).strategy()
}

/// A reader that hands out at most `step` bytes per call, as a socket may.
#[derive(Clone, Debug)]
pub struct Trickle<'a> {
    /// What is left to read.
    pub bytes: &'a [u8],
    /// The most one call hands out.
    pub step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.step).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Cases for [`check_bounded_read`], as `(claim, available, step)`: a claim of one of
/// `limits` (a format's largest lengths) or of under 300 000 bytes, each as likely; under
/// 300 000 bytes available; handed out all at once or under 5000 bytes at a time.
pub fn bounded_reads(limits: &[usize]) -> BoxedStrategy<(usize, usize, usize)> {
    let claim = if limits.is_empty() {
        (0usize..300_000).boxed()
    } else {
        let weight = u32::try_from(limits.len()).expect("a few limits");
        Union::new_weighted(vec![
            (weight, select(limits.to_vec()).boxed()),
            (1, (0usize..300_000).boxed()),
        ])
        .boxed()
    };
    let step = prop_oneof![Just(usize::MAX), 1usize..5000];
    (claim, 0usize..300_000, step).boxed()
}

/// Checks a reader of claimed lengths, `read(input, claim, buf)`, which is to read exactly
/// `claim` bytes into `buf` however large the claim: with `available` bytes arriving `step`
/// at a time, `buf` never holds more than `read_ahead` plus twice the bytes available, and
/// the read returns those bytes if they cover the claim, else fails with `UnexpectedEof`.
/// (Pass `read` as a closure written in the call, so that it takes a trickle of any lifetime.)
pub fn check_bounded_read(
    read_ahead: usize,
    claim: usize,
    available: usize,
    step: usize,
    read: impl FnOnce(&mut Trickle<'_>, usize, &mut Vec<u8>) -> io::Result<()>,
) -> Result<(), TestCaseError> {
    let data: Vec<u8> = (0..available).map(|i| i as u8).collect();
    let mut input = Trickle { bytes: &data, step };
    let mut buf = Vec::new();
    let result = read(&mut input, claim, &mut buf);
    prop_assert!(
        buf.capacity() <= read_ahead + 2 * available,
        "{} bytes allocated for a claim of {} with {} available",
        buf.capacity(),
        claim,
        available
    );
    if claim <= available {
        prop_assert!(result.is_ok());
        prop_assert_eq!(&buf[..], &data[..claim]);
    } else {
        prop_assert_eq!(
            result.map_err(|e| e.kind()),
            Err(io::ErrorKind::UnexpectedEof)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    /// An index that resolves to position `at` of `len` (an `Index` is only ever drawn).
    fn at(at: usize, len: usize) -> Index {
        let mut runner = TestRunner::deterministic();
        (0..1000)
            .map(|_| {
                any::<Index>()
                    .new_tree(&mut runner)
                    .expect("index")
                    .current()
            })
            .find(|index| index.index(len) == at)
            .expect("some index lands there")
    }

    #[test]
    fn proptest_cases_overrides_the_default_when_it_is_a_number() {
        assert_eq!(cases(None, 5000), 5000);
        assert_eq!(cases(Some("20000"), 5000), 20_000);
        assert_eq!(cases(Some("many"), 5000), 5000);
    }

    #[test]
    fn each_damage_does_what_it_says() {
        let original: Vec<u8> = (0..10).collect();
        let damaged = |damage: Damage| {
            let mut bytes = original.clone();
            damage.apply(&mut bytes);
            bytes
        };
        let mut want = original.clone();
        want[3] ^= 0x20;
        assert_eq!(damaged(Damage::Flip(at(3, 10), 5)), want);
        let mut want = original.clone();
        want[4] = 0xee;
        assert_eq!(damaged(Damage::Set(at(4, 10), 0xee)), want);
        let mut want = original.clone();
        want[6..10].copy_from_slice(&[0xff; 4]);
        assert_eq!(
            damaged(Damage::Wide(at(6, 10), u64::MAX, 8)),
            want,
            "clipped"
        );
        assert_eq!(damaged(Damage::Truncate(at(7, 10))), &original[..7]);
        let mut want = original.clone();
        want.extend_from_slice(&[1, 2]);
        assert_eq!(damaged(Damage::Insert(at(10, 11), vec![1, 2])), want);
    }

    #[test]
    fn empty_bytes_and_spared_bytes_stay_as_they_are() {
        let mut empty = Vec::new();
        Damage::Insert(at(0, 1), vec![1]).apply(&mut empty);
        assert!(empty.is_empty());
        let mut header = vec![1, 2, 3];
        Damage::Truncate(at(0, 3)).apply_from(3, &mut header);
        assert_eq!(header, [1, 2, 3]);
        let mut bytes = vec![1, 2, 3, 4];
        Damage::Truncate(at(0, 1)).apply_from(3, &mut bytes);
        assert_eq!(bytes, [1, 2, 3]);
    }

    #[test]
    fn write_le_stops_at_the_end() {
        let mut bytes = vec![0; 6];
        write_le(&mut bytes, 2, 0x0102_0304_0506_0708, 4);
        assert_eq!(bytes, [0, 0, 8, 7, 6, 5]);
        write_le(&mut bytes, 4, u64::MAX, 8);
        assert_eq!(bytes, [0, 0, 8, 7, 0xff, 0xff]);
        write_le(&mut bytes, 9, u64::MAX, 8);
        assert_eq!(bytes, [0, 0, 8, 7, 0xff, 0xff]);
    }

    #[test]
    fn only_weighted_kinds_are_drawn() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..200 {
            let damage = overwrite().new_tree(&mut runner).expect("damage").current();
            assert!(matches!(damage, Damage::Set(..)), "{damage:?}");
            let damage = flip().new_tree(&mut runner).expect("damage").current();
            assert!(matches!(damage, Damage::Flip(..)), "{damage:?}");
        }
        let strategy = Damages::default().widths(&[2]).strategy();
        let mut kinds = [0; 5];
        for _ in 0..500 {
            match strategy.new_tree(&mut runner).expect("damage").current() {
                Damage::Flip(_, bit) => {
                    assert!(bit < 8);
                    kinds[0] += 1;
                }
                Damage::Set(..) => kinds[1] += 1,
                Damage::Wide(_, _, width) => {
                    assert_eq!(width, 2);
                    kinds[2] += 1;
                }
                Damage::Truncate(_) => kinds[3] += 1,
                Damage::Insert(_, more) => {
                    assert!((1..16).contains(&more.len()));
                    kinds[4] += 1;
                }
            }
        }
        assert!(kinds.iter().all(|n| *n > 50), "{kinds:?}");
    }

    #[test]
    fn a_trickle_hands_out_step_bytes_at_a_time() {
        let mut input = Trickle {
            bytes: b"abcde",
            step: 2,
        };
        let mut buf = [0; 8];
        assert_eq!(input.read(&mut buf).unwrap(), 2);
        assert_eq!(input.read(&mut buf[2..]).unwrap(), 2);
        assert_eq!(input.read(&mut buf[4..]).unwrap(), 1);
        assert_eq!(input.read(&mut buf[5..]).unwrap(), 0);
        assert_eq!(&buf[..5], b"abcde");
    }

    #[test]
    fn bounded_reads_claim_the_limits_too() {
        let strategy = bounded_reads(&[1 << 28]);
        let mut runner = TestRunner::deterministic();
        let mut limits = 0;
        for _ in 0..200 {
            let (claim, available, step) = strategy.new_tree(&mut runner).expect("case").current();
            assert!(claim == 1 << 28 || claim < 300_000, "{claim}");
            limits += usize::from(claim == 1 << 28);
            assert!(available < 300_000);
            assert!(step == usize::MAX || (1..5000).contains(&step), "{step}");
        }
        assert!((50..150).contains(&limits), "{limits} of 200");
    }

    #[test]
    fn a_reader_that_allocates_the_claim_fails_the_check() {
        let greedy = |input: &mut Trickle<'_>, claim: usize, buf: &mut Vec<u8>| {
            *buf = vec![0; claim];
            input.read_exact(buf)
        };
        assert!(check_bounded_read(4096, 1 << 20, 10, 3, greedy).is_err());
        assert!(check_bounded_read(4096, 10, 10, 3, greedy).is_ok());
    }
}
