//! The `#[repr(C)]` structs passed across the ABI, and the helpers for the variable-length
//! `wsrep_view_info_t`.

use core::ffi::{c_char, c_int, c_void};
use core::mem::offset_of;

use crate::*;

/// A 16-byte unique identifier (node, history, ...).
///
/// In C this is a union of `uint8_t[16]` and a `size_t`, so it is 8-byte aligned; the
/// `align(8)` reproduces that. Comparison is byte-wise, as in the C helpers.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct wsrep_uuid_t {
    /// The 16 raw bytes, in text order.
    pub data: [u8; 16],
}

/// The undefined (all-zero) UUID.
pub const WSREP_UUID_UNDEFINED: wsrep_uuid_t = wsrep_uuid_t { data: [0; 16] };

/// A global transaction id: history UUID plus seqno.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_gtid_t {
    /// The group history this seqno belongs to.
    pub uuid: wsrep_uuid_t,
    /// The position in that history.
    pub seqno: wsrep_seqno_t,
}

/// The undefined GTID: zero UUID, seqno -1.
pub const WSREP_GTID_UNDEFINED: wsrep_gtid_t = wsrep_gtid_t {
    uuid: WSREP_UUID_UNDEFINED,
    seqno: WSREP_SEQNO_UNDEFINED,
};

/// Where a transaction came from: originating node, its trx id and connection id there.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_stid_t {
    /// Originating node.
    pub node: wsrep_uuid_t,
    /// Transaction id on the originating node.
    pub trx: wsrep_trx_id_t,
    /// Connection id on the originating node.
    pub conn: wsrep_conn_id_t,
}

/// Ordering metadata of a write set.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_trx_meta_t {
    /// The GTID assigned by ordering.
    pub gtid: wsrep_gtid_t,
    /// The originating transaction.
    pub stid: wsrep_stid_t,
    /// Highest seqno this write set may depend on (parallel-apply barrier).
    pub depends_on: wsrep_seqno_t,
}

/// A borrowed byte buffer: pointer and length.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct wsrep_buf_t {
    /// Start of the bytes (may be NULL when `len` is 0).
    pub ptr: *const c_void,
    /// Number of bytes.
    pub len: usize,
}

/// The per-transaction handle the application passes to provider calls.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct wsrep_ws_handle_t {
    /// The application's transaction id.
    pub trx_id: wsrep_trx_id_t,
    /// Provider-owned per-transaction pointer; NULL for a fresh transaction. The
    /// application stores what the provider writes and hands it back on later calls.
    pub opaque: *mut c_void,
}

/// A certification key: an array of key parts (each one a buffer).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct wsrep_key_t {
    /// First element of the key-part array.
    pub key_parts: *const wsrep_buf_t,
    /// Number of key parts.
    pub key_parts_num: usize,
}

/// One member of a group view.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_member_info_t {
    /// The member's node UUID.
    pub id: wsrep_uuid_t,
    /// Node name, NUL-terminated if shorter than the buffer.
    pub name: [c_char; WSREP_MEMBER_NAME_LEN],
    /// Client-facing address, NUL-terminated if shorter than the buffer.
    pub incoming: [c_char; WSREP_INCOMING_LEN],
}

/// A group view (configuration change), followed in memory by `memb_num` members.
///
/// C declares `members[1]`, so C's `sizeof` is [`WSREP_VIEW_INFO_C_SIZE`] (360). Here the
/// trailing array has length 0 and `size_of` is the header only (56); use
/// [`wsrep_view_info_alloc_size`] to size an allocation and [`wsrep_view_info_members`]
/// to reach the members through a raw pointer to the whole allocation.
#[repr(C)]
#[derive(Debug)]
pub struct wsrep_view_info_t {
    /// History UUID and the seqno of this configuration change.
    pub state_id: wsrep_gtid_t,
    /// View (configuration) number; -1 for non-primary.
    pub view: wsrep_seqno_t,
    /// PRIMARY / NON_PRIMARY / DISCONNECTED (`WSREP_VIEW_*`).
    pub status: wsrep_view_status_t,
    /// Capabilities agreed for this view.
    pub capabilities: wsrep_cap_t,
    /// Index of this node in `members`, or -1.
    pub my_idx: c_int,
    /// Number of entries in `members`.
    pub memb_num: c_int,
    /// Application protocol version agreed by the group.
    pub proto_ver: c_int,
    /// Start of the flexible member array (4 bytes of padding precede it).
    pub members: [wsrep_member_info_t; 0],
}

/// C's `sizeof(wsrep_view_info_t)`: the header plus the one member C declares.
pub const WSREP_VIEW_INFO_C_SIZE: usize = 360;

/// Bytes to allocate for a view with `memb_num` members (never less than C's `sizeof`).
pub const fn wsrep_view_info_alloc_size(memb_num: usize) -> usize {
    let needed = offset_of!(wsrep_view_info_t, members)
        + memb_num * core::mem::size_of::<wsrep_member_info_t>();
    if needed < WSREP_VIEW_INFO_C_SIZE {
        WSREP_VIEW_INFO_C_SIZE
    } else {
        needed
    }
}

/// Pointer to the first member of the view at `view`, keeping `view`'s provenance (so it
/// may be used to reach all `memb_num` members of the allocation).
pub const fn wsrep_view_info_members(view: *const wsrep_view_info_t) -> *const wsrep_member_info_t {
    view.wrapping_byte_add(offset_of!(wsrep_view_info_t, members))
        .cast()
}

/// Mutable variant of [`wsrep_view_info_members`].
pub const fn wsrep_view_info_members_mut(view: *mut wsrep_view_info_t) -> *mut wsrep_member_info_t {
    view.wrapping_byte_add(offset_of!(wsrep_view_info_t, members))
        .cast()
}

/// The value of a status variable; which field is valid is given by the `type` tag.
///
/// C declares this union anonymously inside `struct wsrep_stats_var`; the name is ours.
#[repr(C)]
#[derive(Clone, Copy)]
pub union wsrep_stats_value {
    /// Valid when the tag is `WSREP_VAR_INT64`.
    pub _int64: i64,
    /// Valid when the tag is `WSREP_VAR_DOUBLE`.
    pub _double: f64,
    /// Valid when the tag is `WSREP_VAR_STRING`: a NUL-terminated string.
    pub _string: *const c_char,
}

impl core::fmt::Debug for wsrep_stats_value {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Which field is live depends on the enclosing tag, so the bits are not shown.
        f.write_str("wsrep_stats_value { .. }")
    }
}

/// One status variable; `stats_get` returns an array ended by an entry with NULL `name`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_stats_var {
    /// Variable name (without the `wsrep_` prefix the server adds), or NULL at the end.
    pub name: *const c_char,
    /// Which union field of `value` is valid (`WSREP_VAR_*`). C name `type`.
    pub r#type: wsrep_var_type_t,
    /// The value.
    pub value: wsrep_stats_value,
}

/// Convenience alias for `struct wsrep_stats_var` (C has no such typedef).
pub type wsrep_stats_var_t = wsrep_stats_var;

/// An encryption key: an opaque application-defined buffer.
pub type wsrep_enc_key_t = wsrep_buf_t;

/// An encryption initialisation vector / nonce: 32 bytes.
pub type wsrep_enc_iv_t = [c_char; 32];

/// State of one streaming encryption operation.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_enc_ctx_t {
    /// The key in use.
    pub key: *const wsrep_enc_key_t,
    /// The initialisation vector the operation started with.
    pub iv: *const wsrep_enc_iv_t,
    /// Callback-owned state; NULL starts a new operation.
    pub ctx: *mut c_void,
}

/// Handle for preordered actions (unused by MariaDB); start from [`WSREP_PO_INITIALIZER`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct wsrep_po_handle_t {
    /// Provider-owned pointer.
    pub opaque: *mut c_void,
}

/// The initial (NULL) preordered handle.
pub const WSREP_PO_INITIALIZER: wsrep_po_handle_t = wsrep_po_handle_t {
    opaque: core::ptr::null_mut(),
};

/// Callback for `wsrep_certify_v1`, run once sequential consistency is guaranteed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_seq_cb_t {
    /// Caller-defined context passed to `fn`.
    pub ctx: *mut c_void,
    /// The function to call with `ctx` (C field name `fn`).
    pub r#fn: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}
