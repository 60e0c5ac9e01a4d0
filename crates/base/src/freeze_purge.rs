//! `gcache.freeze_purge_at_seqno` (from Percona's Galera): keep every write-set from a seqno
//! on, so that a node planned to go down can later rejoin by IST from this donor. One type
//! for the option, the engine and the cache.

use std::fmt;

use crate::Seqno;

/// `gcache.freeze_purge_at_seqno`: `-1`, a seqno, or `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FreezePurge {
    /// `-1`: purge as usual.
    #[default]
    Off,
    /// Keep this seqno and everything after it.
    At(Seqno),
    /// `now`: keep everything cached at the moment it is set. The cache resolves it to
    /// [`FreezePurge::At`] its lowest cached seqno, and reports it that way afterwards.
    Now,
}

impl FreezePurge {
    /// Parses the option's text: `-1`, `now` (any case) or a seqno (0 and up); `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<FreezePurge> {
        let text = text.trim();
        if text == "-1" {
            return Some(FreezePurge::Off);
        }
        if text.eq_ignore_ascii_case("now") {
            return Some(FreezePurge::Now);
        }
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse::<i64>()
            .ok()
            .map(|seqno| FreezePurge::At(Seqno(seqno)))
    }
}

impl fmt::Display for FreezePurge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreezePurge::Off => f.write_str("-1"),
            FreezePurge::At(seqno) => write!(f, "{seqno}"),
            FreezePurge::Now => f.write_str("now"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms_and_refuses_the_rest() {
        assert_eq!(FreezePurge::parse("-1"), Some(FreezePurge::Off));
        assert_eq!(FreezePurge::parse(" now "), Some(FreezePurge::Now));
        assert_eq!(FreezePurge::parse("NOW"), Some(FreezePurge::Now));
        assert_eq!(
            FreezePurge::parse("12345"),
            Some(FreezePurge::At(Seqno(12345)))
        );
        for bad in ["", "-2", "+1", "1e3", "later", "9223372036854775808"] {
            assert_eq!(FreezePurge::parse(bad), None, "{bad}");
        }
        for value in [
            FreezePurge::Off,
            FreezePurge::Now,
            FreezePurge::At(Seqno(7)),
        ] {
            assert_eq!(FreezePurge::parse(&value.to_string()), Some(value));
        }
    }
}
