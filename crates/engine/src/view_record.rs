//! A primary view as the write-set cache keeps it and IST carries it. A joiner that missed
//! configuration changes hands them to its server at their seqnos, as Galera's IST does, so
//! that the server's history of primary views is the one the other members went through: the
//! server decides from consecutive views which streaming transactions survive (an SR
//! transaction whose originator is still a member goes on; one whose originator left is
//! rolled back), and a joiner that saw only the view that admitted it back would compare it
//! with the view it left and roll back transactions that are still going on.
//!
//! ```text
//! body   := view_id:i64 member_count:u16 member*
//! member := uuid:16 name_len:u16 name incoming_len:u16 incoming
//! ```
//!
//! Integers are little-endian; the record's seqno and the stream's cluster UUID complete the
//! view. A body that does not decode exactly is a specific [`ViewRecordError`].

use base::{Gtid, Seqno, Uuid};

use crate::{MemberOut, ViewInfo, PROTOCOL_VERSION};

/// The most members a view record may list (a primary component that large is far beyond
/// what the group admits).
pub const MEMBERS_MAX: usize = 1024;

/// Why a view record was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ViewRecordError {
    /// The body ends inside the named field.
    #[error("the view record ends inside its {0}")]
    Truncated(&'static str),
    /// More members than [`MEMBERS_MAX`].
    #[error("the view record lists {0} members (at most {MEMBERS_MAX})")]
    TooManyMembers(usize),
    /// A name or address that is not UTF-8.
    #[error("the view record's {0} is not UTF-8")]
    NotText(&'static str),
    /// Bytes after the last member.
    #[error("the view record has {0} bytes after its last member")]
    Trailing(usize),
    /// A configuration number below zero.
    #[error("the view record's configuration number {0} is negative")]
    NegativeViewId(i64),
}

/// The cache body of a primary view.
pub fn encode(view: &ViewInfo) -> Vec<u8> {
    assert!(view.primary, "only primary views are cached as views");
    assert!(
        view.members.len() <= MEMBERS_MAX,
        "a view beyond MEMBERS_MAX"
    );
    let mut body = Vec::with_capacity(10 + view.members.len() * 64);
    body.extend_from_slice(&view.view_id.to_le_bytes());
    body.extend_from_slice(&(view.members.len() as u16).to_le_bytes());
    for member in &view.members {
        body.extend_from_slice(&member.uuid.0);
        put_text(&mut body, &member.name);
        put_text(&mut body, &member.incoming);
    }
    body
}

/// Writes a length-prefixed text; a name or address longer than a u16 length is cut at a
/// character boundary (the group refuses members with such long names anyway).
fn put_text(body: &mut Vec<u8>, text: &str) {
    let mut end = text.len().min(u16::MAX as usize);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    body.extend_from_slice(&(end as u16).to_le_bytes());
    body.extend_from_slice(&text.as_bytes()[..end]);
}

/// The view a record at `seqno` of `cluster` holds, as the server of the node whose identity
/// is `own` sees it (absent, index -1, in a view from before it was a member).
pub fn decode(
    cluster: Uuid,
    seqno: Seqno,
    body: &[u8],
    own: Uuid,
) -> Result<ViewInfo, ViewRecordError> {
    let mut input = body;
    let view_id = i64::from_le_bytes(take::<8>(&mut input, "configuration number")?);
    if view_id < 0 {
        return Err(ViewRecordError::NegativeViewId(view_id));
    }
    let count = u16::from_le_bytes(take::<2>(&mut input, "member count")?) as usize;
    if count > MEMBERS_MAX {
        return Err(ViewRecordError::TooManyMembers(count));
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let uuid = Uuid(take::<16>(&mut input, "member UUID")?);
        let name = take_text(&mut input, "member name")?;
        let incoming = take_text(&mut input, "member address")?;
        members.push(MemberOut {
            uuid,
            name,
            incoming,
        });
    }
    if !input.is_empty() {
        return Err(ViewRecordError::Trailing(input.len()));
    }
    let my_index = members
        .iter()
        .position(|m| m.uuid == own)
        .map_or(-1, |i| i as i32);
    Ok(ViewInfo {
        state_id: Gtid { cluster, seqno },
        view_id,
        primary: true,
        members,
        my_index,
        proto_ver: PROTOCOL_VERSION,
    })
}

fn take<const N: usize>(input: &mut &[u8], what: &'static str) -> Result<[u8; N], ViewRecordError> {
    if input.len() < N {
        return Err(ViewRecordError::Truncated(what));
    }
    let (head, rest) = input.split_at(N);
    *input = rest;
    Ok(head.try_into().expect("N bytes"))
}

fn take_text(input: &mut &[u8], what: &'static str) -> Result<String, ViewRecordError> {
    let len = u16::from_le_bytes(take::<2>(input, what)?) as usize;
    if input.len() < len {
        return Err(ViewRecordError::Truncated(what));
    }
    let (head, rest) = input.split_at(len);
    *input = rest;
    String::from_utf8(head.to_vec()).map_err(|_| ViewRecordError::NotText(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(byte: u8, name: &str) -> MemberOut {
        MemberOut {
            uuid: Uuid([byte; 16]),
            name: name.into(),
            incoming: format!("10.0.0.{byte}:3306"),
        }
    }

    fn view() -> ViewInfo {
        ViewInfo {
            state_id: Gtid {
                cluster: Uuid([9; 16]),
                seqno: Seqno(42),
            },
            view_id: 7,
            primary: true,
            members: vec![member(1, "node1"), member(2, "nöde2")],
            my_index: 0,
            proto_ver: PROTOCOL_VERSION,
        }
    }

    #[test]
    fn a_view_comes_back_as_the_joiner_sees_it() {
        let original = view();
        let body = encode(&original);
        let cluster = original.state_id.cluster;
        let seqno = original.state_id.seqno;
        let joiner = Uuid([3; 16]);
        let decoded = decode(cluster, seqno, &body, joiner).unwrap();
        assert_eq!(decoded.my_index, -1, "the joiner was not a member then");
        assert_eq!(
            ViewInfo {
                my_index: 0,
                ..decoded
            },
            original
        );
        let member = decode(cluster, seqno, &body, Uuid([2; 16])).unwrap();
        assert_eq!(member.my_index, 1);
    }

    #[test]
    fn every_cut_of_a_body_is_refused() {
        let body = encode(&view());
        for len in 0..body.len() {
            let result = decode(Uuid::NIL, Seqno(1), &body[..len], Uuid::NIL);
            assert!(
                matches!(result, Err(ViewRecordError::Truncated(_))),
                "{len}: {result:?}"
            );
        }
    }

    #[test]
    fn damaged_bodies_are_refused_with_the_reason() {
        let mut long = encode(&view());
        long.push(0);
        assert_eq!(
            decode(Uuid::NIL, Seqno(1), &long, Uuid::NIL),
            Err(ViewRecordError::Trailing(1))
        );
        let mut negative = encode(&view());
        negative[..8].copy_from_slice(&(-1i64).to_le_bytes());
        assert_eq!(
            decode(Uuid::NIL, Seqno(1), &negative, Uuid::NIL),
            Err(ViewRecordError::NegativeViewId(-1))
        );
        let mut crowded = encode(&view());
        crowded[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            decode(Uuid::NIL, Seqno(1), &crowded, Uuid::NIL),
            Err(ViewRecordError::TooManyMembers(u16::MAX as usize))
        );
        let mut garbled = encode(&view());
        // The first byte of the first member's name.
        garbled[10 + 16 + 2] = 0xFF;
        assert_eq!(
            decode(Uuid::NIL, Seqno(1), &garbled, Uuid::NIL),
            Err(ViewRecordError::NotText("member name"))
        );
    }
}

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(fuzzing::config(2000))]

        /// No body panics the decoder, and what it accepts is exactly what a donor would
        /// have written for that view.
        #[test]
        fn any_body_is_refused_or_read_back_exactly(
            body in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            if let Ok(view) = decode(Uuid::NIL, Seqno(5), &body, Uuid::NIL) {
                prop_assert_eq!(encode(&view), body);
            }
        }
    }
}
