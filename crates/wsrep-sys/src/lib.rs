//! Raw declarations of the wsrep replication API, interface version 26, as the C ABI that
//! MariaDB 10.11 (through wsrep-lib and the wsrep loader) uses to drive a provider library
//! loaded with `wsrep_provider=/path/libtrireme.so`.
//!
//! Scope: x86-64, LP64, System V calling convention. Everything here is a declaration: type
//! aliases, constants, `#[repr(C)]` structs and function-pointer types. There is no
//! behaviour apart from a few `const fn` size/offset helpers for the variable-length
//! `wsrep_view_info_t`.
//!
//! The facts (names, values, member order, sizes and offsets) come from the project's
//! contract notes (`wsrep-contract.md` §2). The unit tests assert every size, alignment and
//! field offset against those numbers.
//!
//! Conventions used throughout:
//! * C `enum` types are plain `c_int` aliases plus constants, never Rust enums: a value
//!   that arrives from C may lie outside the known set, and a Rust enum holding an unknown
//!   discriminant would be undefined behaviour.
//! * Every C function pointer is `Option<unsafe extern "C" fn(..)>`, so that a C `NULL`
//!   is `None` (the niche makes it exactly pointer sized).
//! * `wsrep_bool_t` is Rust `bool`: C99 `_Bool` is one byte and only ever holds 0 or 1.
//! * Where C has a `struct tag` but no typedef, the Rust item keeps the tag name and a
//!   `_t` alias is added for convenience.

// The items keep their C spellings (`wsrep_gtid_t`, `wsrep_st`, ...) so that every
// declaration can be matched against the contract and the C header by name alone.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void, CStr};
use core::marker::{PhantomData, PhantomPinned};
use core::mem::offset_of;

#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------------------
// Scalar types
// ---------------------------------------------------------------------------------------

/// A global sequence number (C `int64_t`). `WSREP_SEQNO_UNDEFINED` (-1) means "none".
pub type wsrep_seqno_t = i64;
/// The application's transaction identifier (C `uint64_t`).
pub type wsrep_trx_id_t = u64;
/// The application's client-connection identifier (C `uint64_t`).
pub type wsrep_conn_id_t = u64;
/// A capability bit set (C `uint32_t`), built from the `WSREP_CAP_*` bits.
pub type wsrep_cap_t = u32;
/// The C99 `_Bool` used in the API: one byte, 0 or 1.
pub type wsrep_bool_t = bool;

// ---------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------

/// The interface version string a v26 provider and application agree on.
pub const WSREP_INTERFACE_VERSION: &CStr = c"26";
/// The `wsrep_provider` value meaning "no provider" (the server uses a built-in dummy).
pub const WSREP_NONE: &CStr = c"none";
/// The seqno value meaning "undefined / not ordered".
pub const WSREP_SEQNO_UNDEFINED: wsrep_seqno_t = -1;
/// Length of the text form of a UUID, without the terminating NUL.
pub const WSREP_UUID_STR_LEN: usize = 36;
/// Minimum length of the text form of a GTID (uuid, ':', 20-digit seqno), without NUL.
pub const WSREP_GTID_STR_LEN: usize = 57;
/// Size of the fixed `name` buffer in `wsrep_member_info_t`.
pub const WSREP_MEMBER_NAME_LEN: usize = 32;
/// Size of the fixed `incoming` address buffer in `wsrep_member_info_t`.
pub const WSREP_INCOMING_LEN: usize = 256;
/// SST request meaning "empty transfer: consider the joiner joined, send no data".
pub const WSREP_STATE_TRANSFER_TRIVIAL: &CStr = c"trivial";
/// SST request meaning "do not transfer state at all".
pub const WSREP_STATE_TRANSFER_NONE: &CStr = c"none";

// Names of the symbols a provider exports and the loader / wsrep-lib looks up with dlsym.

/// Exported entry point `int wsrep_loader(wsrep_t*)` that fills the `wsrep_t` table.
pub const WSREP_LOADER_SYMBOL: &CStr = c"wsrep_loader";
/// Exported data symbol: a `const char*` variable that points at `"26"`.
pub const WSREP_INTERFACE_VERSION_SYMBOL: &CStr = c"wsrep_interface_version";
/// Exported function that receives the application's allowlist service table.
pub const WSREP_ALLOWLIST_SERVICE_INIT_FUNC_V1: &CStr = c"wsrep_init_allowlist_service_v1";
/// Exported function called after `free` to drop the allowlist service table.
pub const WSREP_ALLOWLIST_SERVICE_DEINIT_FUNC_V1: &CStr = c"wsrep_deinit_allowlist_service_v1";
/// Exported function that receives the application's event service table.
pub const WSREP_EVENT_SERVICE_INIT_FUNC_V1: &CStr = c"wsrep_init_event_service_v1";
/// Exported function that drops the event service table.
pub const WSREP_EVENT_SERVICE_DEINIT_FUNC_V1: &CStr = c"wsrep_deinit_event_service_v1";
/// Optional exported function that cuts the node off the cluster (signal-safe).
pub const WSREP_NODE_ISOLATION_MODE_SET_V1: &CStr = c"wsrep_node_isolation_mode_set_v1";
/// Optional exported extended `certify` that takes a sequencing callback.
pub const WSREP_CERTIFY_V1: &CStr = c"wsrep_certify_v1";

// ---------------------------------------------------------------------------------------
// Enumerations (4-byte C enums, declared as c_int + constants)
// ---------------------------------------------------------------------------------------

/// Severity of a provider log message (first argument of the logger callback).
pub type wsrep_log_level_t = c_int;
/// Unrecoverable error: the application must stop.
pub const WSREP_LOG_FATAL: wsrep_log_level_t = 0;
/// An operation failed.
pub const WSREP_LOG_ERROR: wsrep_log_level_t = 1;
/// Something unexpected happened but nothing failed.
pub const WSREP_LOG_WARN: wsrep_log_level_t = 2;
/// Informational message.
pub const WSREP_LOG_INFO: wsrep_log_level_t = 3;
/// Debug message.
pub const WSREP_LOG_DEBUG: wsrep_log_level_t = 4;

/// Result code of most provider calls.
pub type wsrep_status_t = c_int;
/// Success.
pub const WSREP_OK: wsrep_status_t = 0;
/// A minor problem; it has been logged.
pub const WSREP_WARNING: wsrep_status_t = 1;
/// The provider does not know the transaction.
pub const WSREP_TRX_MISSING: wsrep_status_t = 2;
/// The transaction failed (e.g. certification) and must roll back; the server goes on.
pub const WSREP_TRX_FAIL: wsrep_status_t = 3;
/// The transaction was brute-force aborted (the application may replay it).
pub const WSREP_BF_ABORT: wsrep_status_t = 4;
/// The write set is larger than the provider accepts.
pub const WSREP_SIZE_EXCEEDED: wsrep_status_t = 5;
/// Client-connection level failure: the connection must be closed.
pub const WSREP_CONN_FAIL: wsrep_status_t = 6;
/// Node-level failure: the provider must be re-initialised.
pub const WSREP_NODE_FAIL: wsrep_status_t = 7;
/// Fatal failure: the server must abort.
pub const WSREP_FATAL: wsrep_status_t = 8;
/// The call is not implemented by this provider.
pub const WSREP_NOT_IMPLEMENTED: wsrep_status_t = 9;
/// The operation is not allowed (also: allowlist rejection, BF abort refused).
pub const WSREP_NOT_ALLOWED: wsrep_status_t = 10;

/// Result code of the application's callbacks; any non-zero value is a failure.
pub type wsrep_cb_status_t = c_int;
/// The callback succeeded.
pub const WSREP_CB_SUCCESS: wsrep_cb_status_t = 0;
/// The callback failed unrecoverably.
pub const WSREP_CB_FAILURE: wsrep_cb_status_t = 1;

/// A node's membership state, as the provider reports it in its own status variables.
pub type wsrep_member_status_t = c_int;
/// State not known yet.
pub const WSREP_MEMBER_UNDEFINED: wsrep_member_status_t = 0;
/// Missing state; a state transfer was requested.
pub const WSREP_MEMBER_JOINER: wsrep_member_status_t = 1;
/// Complete state; currently serving a state transfer.
pub const WSREP_MEMBER_DONOR: wsrep_member_status_t = 2;
/// Complete state, still catching up.
pub const WSREP_MEMBER_JOINED: wsrep_member_status_t = 3;
/// Complete state and in sync with the group.
pub const WSREP_MEMBER_SYNCED: wsrep_member_status_t = 4;
/// Provider-specific error state (this value and above).
pub const WSREP_MEMBER_ERROR: wsrep_member_status_t = 5;
/// One past the last member state.
pub const WSREP_MEMBER_MAX: wsrep_member_status_t = 6;

/// Kind of a group configuration (`wsrep_view_info_t::status`).
pub type wsrep_view_status_t = c_int;
/// A primary component (quorum present).
pub const WSREP_VIEW_PRIMARY: wsrep_view_status_t = 0;
/// A non-primary component (quorum lost).
pub const WSREP_VIEW_NON_PRIMARY: wsrep_view_status_t = 1;
/// Not connected to any group.
pub const WSREP_VIEW_DISCONNECTED: wsrep_view_status_t = 2;
/// One past the last view status.
pub const WSREP_VIEW_MAX: wsrep_view_status_t = 3;

/// Type tag of a status variable's value (`wsrep_stats_var::type`).
pub type wsrep_var_type_t = c_int;
/// The value is a NUL-terminated string (`value._string`).
pub const WSREP_VAR_STRING: wsrep_var_type_t = 0;
/// The value is a signed 64-bit integer (`value._int64`).
pub const WSREP_VAR_INT64: wsrep_var_type_t = 1;
/// The value is a double (`value._double`).
pub const WSREP_VAR_DOUBLE: wsrep_var_type_t = 2;

/// How a certification key is used by the transaction (argument of `append_key`).
pub type wsrep_key_type_t = c_int;
/// Shared use of a higher-level resource (e.g. a table).
pub const WSREP_KEY_SHARED: wsrep_key_type_t = 0;
/// Referenced but not modified (e.g. a parent row).
pub const WSREP_KEY_REFERENCE: wsrep_key_type_t = 1;
/// Modified.
pub const WSREP_KEY_UPDATE: wsrep_key_type_t = 2;
/// Created or deleted.
pub const WSREP_KEY_EXCLUSIVE: wsrep_key_type_t = 3;

/// Kind of a payload buffer (argument of `append_data`).
pub type wsrep_data_type_t = c_int;
/// State change to apply and commit in order (the only kind wsrep-lib sends).
pub const WSREP_DATA_ORDERED: wsrep_data_type_t = 0;
/// Optional action that need not run in order.
pub const WSREP_DATA_UNORDERED: wsrep_data_type_t = 1;
/// Human-readable annotation.
pub const WSREP_DATA_ANNOTATION: wsrep_data_type_t = 2;

/// Direction of the encryption callback.
pub type wsrep_enc_direction_t = c_int;
/// Encrypt.
pub const WSREP_ENC: wsrep_enc_direction_t = 0;
/// Decrypt.
pub const WSREP_DEC: wsrep_enc_direction_t = 1;

/// What an allowlist check is about (second argument of the allowlist callback).
pub type wsrep_allowlist_key_t = c_int;
/// The value is a peer IP address (NUL-terminated, no port).
pub const WSREP_ALLOWLIST_KEY_IP: wsrep_allowlist_key_t = 0;
/// The value identifies a peer SSL certificate.
pub const WSREP_ALLOWLIST_KEY_SSL: wsrep_allowlist_key_t = 1;

/// Requested isolation of this node from the cluster (C `enum wsrep_node_isolation_mode`).
pub type wsrep_node_isolation_mode = c_int;
/// Not isolated.
pub const WSREP_NODE_ISOLATION_NOT_ISOLATED: wsrep_node_isolation_mode = 0;
/// Cut every network connection and accept no new ones.
pub const WSREP_NODE_ISOLATION_ISOLATED: wsrep_node_isolation_mode = 1;
/// Isolated, and additionally deliver a DISCONNECTED view.
pub const WSREP_NODE_ISOLATION_FORCE_DISCONNECT: wsrep_node_isolation_mode = 2;

/// Result of setting the isolation mode (C `enum wsrep_node_isolation_result`).
pub type wsrep_node_isolation_result = c_int;
/// The mode was set.
pub const WSREP_NODE_ISOLATION_SUCCESS: wsrep_node_isolation_result = 0;
/// The mode value was not recognised.
pub const WSREP_NODE_ISOLATION_INVALID_VALUE: wsrep_node_isolation_result = 1;

// ---------------------------------------------------------------------------------------
// Write-set flags (the `uint32_t flags` of certify, to_execute_start and apply_cb)
// ---------------------------------------------------------------------------------------

/// Last fragment: commit the transaction.
pub const WSREP_FLAG_TRX_END: u32 = 1 << 0;
/// Roll the transaction back, earlier fragments included.
pub const WSREP_FLAG_ROLLBACK: u32 = 1 << 1;
/// Total-order isolation: apply and commit with nothing else running.
pub const WSREP_FLAG_ISOLATION: u32 = 1 << 2;
/// Must not be applied in parallel with any earlier write set.
pub const WSREP_FLAG_PA_UNSAFE: u32 = 1 << 3;
/// Application order does not matter (not used by MariaDB).
pub const WSREP_FLAG_COMMUTATIVE: u32 = 1 << 4;
/// The payload is in the provider's own format (not used by MariaDB).
pub const WSREP_FLAG_NATIVE: u32 = 1 << 5;
/// First fragment of a transaction.
pub const WSREP_FLAG_TRX_START: u32 = 1 << 6;
/// Fragment that prepares the transaction (XA; never produced by MariaDB 10.11).
pub const WSREP_FLAG_TRX_PREPARE: u32 = 1 << 7;
/// Read-view snapshot (not used by MariaDB).
pub const WSREP_FLAG_SNAPSHOT: u32 = 1 << 8;
/// Depends on everything seen so far.
pub const WSREP_FLAG_IMPLICIT_DEPS: u32 = 1 << 9;
/// The highest defined flag bit.
pub const WSREP_FLAGS_LAST: u32 = WSREP_FLAG_IMPLICIT_DEPS;
/// All defined flag bits.
pub const WSREP_FLAGS_MASK: u32 = (WSREP_FLAGS_LAST << 1) - 1;

// ---------------------------------------------------------------------------------------
// Capability bits (`wsrep_cap_t`; C spells them as 64-bit constants, the type is 32-bit)
// ---------------------------------------------------------------------------------------

/// Every node may accept writes.
pub const WSREP_CAP_MULTI_MASTER: wsrep_cap_t = 1 << 0;
/// Write sets are certified.
pub const WSREP_CAP_CERTIFICATION: wsrep_cap_t = 1 << 1;
/// Write sets may be applied in parallel (`depends_on`).
pub const WSREP_CAP_PARALLEL_APPLYING: wsrep_cap_t = 1 << 2;
/// Brute-force-aborted transactions can be replayed.
pub const WSREP_CAP_TRX_REPLAY: wsrep_cap_t = 1 << 3;
/// Total-order isolation is supported.
pub const WSREP_CAP_ISOLATION: wsrep_cap_t = 1 << 4;
/// `pause` / `resume` are supported.
pub const WSREP_CAP_PAUSE: wsrep_cap_t = 1 << 5;
/// Causal reads (`sync_wait`) are supported.
pub const WSREP_CAP_CAUSAL_READS: wsrep_cap_t = 1 << 6;
/// Causal transactions.
pub const WSREP_CAP_CAUSAL_TRX: wsrep_cap_t = 1 << 7;
/// Write sets may be built incrementally.
pub const WSREP_CAP_INCREMENTAL_WRITESET: wsrep_cap_t = 1 << 8;
/// Session locks.
pub const WSREP_CAP_SESSION_LOCKS: wsrep_cap_t = 1 << 9;
/// Distributed locks.
pub const WSREP_CAP_DISTRIBUTED_LOCKS: wsrep_cap_t = 1 << 10;
/// Consistency checks.
pub const WSREP_CAP_CONSISTENCY_CHECK: wsrep_cap_t = 1 << 11;
/// Unordered payloads.
pub const WSREP_CAP_UNORDERED: wsrep_cap_t = 1 << 12;
/// Annotation payloads.
pub const WSREP_CAP_ANNOTATION: wsrep_cap_t = 1 << 13;
/// Preordered actions.
pub const WSREP_CAP_PREORDERED: wsrep_cap_t = 1 << 14;
/// Streaming replication (fragments).
pub const WSREP_CAP_STREAMING: wsrep_cap_t = 1 << 15;
/// Read-view snapshots.
pub const WSREP_CAP_SNAPSHOT: wsrep_cap_t = 1 << 16;
/// Non-blocking operations.
pub const WSREP_CAP_NBO: wsrep_cap_t = 1 << 17;

// ---------------------------------------------------------------------------------------
// Structures
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Application callbacks (carried in wsrep_init_args)
// ---------------------------------------------------------------------------------------

/// Logger: receives every provider log line with its severity.
pub type wsrep_log_cb_t =
    Option<unsafe extern "C" fn(level: wsrep_log_level_t, msg: *const c_char)>;

/// Called once when this node first sees a primary view after `connect`.
pub type wsrep_connected_cb_t = Option<
    unsafe extern "C" fn(app_ctx: *mut c_void, view: *const wsrep_view_info_t) -> wsrep_cb_status_t,
>;

/// Delivers a view, in total order, on a `recv` thread with that thread's `recv_ctx`.
pub type wsrep_view_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        recv_ctx: *mut c_void,
        view: *const wsrep_view_info_t,
        state: *const c_char,
        state_len: usize,
    ) -> wsrep_cb_status_t,
>;

/// Asks the application for an SST request; it returns a `malloc`ed buffer the provider
/// must `free`.
pub type wsrep_sst_request_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        sst_req: *mut *mut c_void,
        sst_req_len: *mut usize,
    ) -> wsrep_cb_status_t,
>;

/// Encrypts or decrypts a buffer; returns bytes written or a negative error. NULL in
/// MariaDB 10.11.
pub type wsrep_encrypt_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        enc_ctx: *mut wsrep_enc_ctx_t,
        input: *const wsrep_buf_t,
        output: *mut c_void,
        direction: wsrep_enc_direction_t,
        last: bool,
    ) -> c_int,
>;

/// Applies one ordered write set (on a `recv` thread, or the caller of `replay_trx`).
pub type wsrep_apply_cb_t = Option<
    unsafe extern "C" fn(
        recv_ctx: *mut c_void,
        ws_handle: *const wsrep_ws_handle_t,
        flags: u32,
        data: *const wsrep_buf_t,
        meta: *const wsrep_trx_meta_t,
        exit_loop: *mut wsrep_bool_t,
    ) -> wsrep_cb_status_t,
>;

/// Runs an unordered action. NULL in MariaDB 10.11.
pub type wsrep_unordered_cb_t = Option<
    unsafe extern "C" fn(recv_ctx: *mut c_void, data: *const wsrep_buf_t) -> wsrep_cb_status_t,
>;

/// Asks this node to serve a state transfer to a joiner.
pub type wsrep_sst_donate_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        recv_ctx: *mut c_void,
        str_msg: *const wsrep_buf_t,
        state_id: *const wsrep_gtid_t,
        state: *const wsrep_buf_t,
        bypass: wsrep_bool_t,
    ) -> wsrep_cb_status_t,
>;

/// Tells the application that this node is synced with the group.
pub type wsrep_synced_cb_t =
    Option<unsafe extern "C" fn(app_ctx: *mut c_void) -> wsrep_cb_status_t>;

/// Parameters the application hands to `init` (C `struct wsrep_init_args`, 144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_init_args {
    /// Application context, passed back to the app-level callbacks.
    pub app_ctx: *mut c_void,
    /// This node's name.
    pub node_name: *const c_char,
    /// Address the provider itself should listen on.
    pub node_address: *const c_char,
    /// Address clients use to reach this node.
    pub node_incoming: *const c_char,
    /// Directory where the provider may keep files.
    pub data_dir: *const c_char,
    /// Provider option string.
    pub options: *const c_char,
    /// Highest application protocol version the application speaks.
    pub proto_ver: c_int,
    /// The application's current position.
    pub state_id: *const wsrep_gtid_t,
    /// Initial provider state (NULL from MariaDB).
    pub state: *const wsrep_buf_t,
    /// Logger callback.
    pub logger_cb: wsrep_log_cb_t,
    /// Connected callback.
    pub connected_cb: wsrep_connected_cb_t,
    /// View callback.
    pub view_cb: wsrep_view_cb_t,
    /// SST request callback.
    pub sst_request_cb: wsrep_sst_request_cb_t,
    /// Encryption callback (may be NULL).
    pub encrypt_cb: wsrep_encrypt_cb_t,
    /// Apply callback.
    pub apply_cb: wsrep_apply_cb_t,
    /// Unordered-action callback (may be NULL).
    pub unordered_cb: wsrep_unordered_cb_t,
    /// SST donate callback.
    pub sst_donate_cb: wsrep_sst_donate_cb_t,
    /// Synced callback.
    pub synced_cb: wsrep_synced_cb_t,
}

/// Convenience alias for `struct wsrep_init_args` (C has no such typedef).
pub type wsrep_init_args_t = wsrep_init_args;

// ---------------------------------------------------------------------------------------
// Provider services (passed by the application through exported init functions)
// ---------------------------------------------------------------------------------------

/// Opaque application context of the allowlist service.
#[repr(C)]
pub struct wsrep_allowlist_context_t {
    _opaque: [u8; 0],
    _not_send_sync_unpin: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Asks the application whether a peer may connect: `WSREP_OK` allows,
/// `WSREP_NOT_ALLOWED` rejects.
pub type wsrep_allowlist_cb_t = Option<
    unsafe extern "C" fn(
        context: *mut wsrep_allowlist_context_t,
        key: wsrep_allowlist_key_t,
        value: *const wsrep_buf_t,
    ) -> wsrep_status_t,
>;

/// The allowlist service table the application passes to
/// `wsrep_init_allowlist_service_v1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_allowlist_service_v1_t {
    /// The check callback.
    pub allowlist_cb: wsrep_allowlist_cb_t,
    /// Context to pass as the callback's first argument.
    pub context: *mut wsrep_allowlist_context_t,
}

/// Opaque application context of the event service.
#[repr(C)]
pub struct wsrep_event_context_t {
    _opaque: [u8; 0],
    _not_send_sync_unpin: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Receives a named event with a JSON value.
pub type wsrep_event_cb_t = Option<
    unsafe extern "C" fn(
        context: *mut wsrep_event_context_t,
        name: *const c_char,
        value: *const c_char,
    ),
>;

/// The event service table (not passed by MariaDB 10.11).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_event_service_v1_t {
    /// The event callback.
    pub event_cb: wsrep_event_cb_t,
    /// Context to pass as the callback's first argument.
    pub context: *mut wsrep_event_context_t,
}

// ---------------------------------------------------------------------------------------
// Signatures of the symbols a provider exports (for compile-time checks by the provider)
// ---------------------------------------------------------------------------------------

/// Signature of the exported `wsrep_loader`: fill the table, return 0 or an errno.
pub type wsrep_loader_fun = Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> c_int>;

/// Signature of the exported `wsrep_init_allowlist_service_v1` (our name; no C typedef).
pub type wsrep_init_allowlist_service_v1_fn =
    Option<unsafe extern "C" fn(service: *mut wsrep_allowlist_service_v1_t) -> c_int>;

/// Signature of the exported `wsrep_deinit_allowlist_service_v1` (our name; no C typedef).
pub type wsrep_deinit_allowlist_service_v1_fn = Option<unsafe extern "C" fn()>;

/// Signature of the exported `wsrep_init_event_service_v1` (our name; no C typedef).
pub type wsrep_init_event_service_v1_fn =
    Option<unsafe extern "C" fn(service: *mut wsrep_event_service_v1_t) -> c_int>;

/// Signature of the exported `wsrep_deinit_event_service_v1` (our name; no C typedef).
pub type wsrep_deinit_event_service_v1_fn = Option<unsafe extern "C" fn()>;

/// Signature of the optional exported `wsrep_node_isolation_mode_set_v1`; it must be
/// async-signal-safe.
pub type wsrep_node_isolation_mode_set_fn_v1 =
    Option<unsafe extern "C" fn(mode: wsrep_node_isolation_mode) -> wsrep_node_isolation_result>;

/// Signature of the optional exported `wsrep_certify_v1`: `certify` plus a sequencing
/// callback.
pub type wsrep_certify_fn_v1 = Option<
    unsafe extern "C" fn(
        wsrep: *mut wsrep_t,
        conn_id: wsrep_conn_id_t,
        ws_handle: *mut wsrep_ws_handle_t,
        flags: u32,
        meta: *mut wsrep_trx_meta_t,
        seq_cb: *const wsrep_seq_cb_t,
    ) -> wsrep_status_t,
>;

// ---------------------------------------------------------------------------------------
// The provider interface table
// ---------------------------------------------------------------------------------------

/// The provider's function table (C `struct wsrep_st`, 360 bytes, 45 members).
///
/// The loader allocates it; `wsrep_loader` must fill every member. `dlh` belongs to the
/// loader and `ctx` to the provider instance.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_st {
    /// Interface version string; must point at `"26"`.
    pub version: *const c_char,
    /// Creates the provider instance from the init arguments (no connecting yet).
    pub init: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, args: *const wsrep_init_args) -> wsrep_status_t,
    >,
    /// Capabilities this provider may offer.
    pub capabilities: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_cap_t>,
    /// Applies a `key=value;...` option string.
    pub options_set:
        Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, conf: *const c_char) -> wsrep_status_t>,
    /// Returns the current options as a `malloc`ed string the caller `free`s.
    pub options_get: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> *mut c_char>,
    /// Installs an encryption key.
    pub enc_set_key: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, key: *const wsrep_enc_key_t) -> wsrep_status_t,
    >,
    /// Joins (or bootstraps) the named cluster.
    pub connect: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            cluster_name: *const c_char,
            cluster_url: *const c_char,
            state_donor: *const c_char,
            bootstrap: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    /// Leaves the cluster.
    pub disconnect: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    /// Applier loop: runs callbacks with `recv_ctx` until told to stop.
    pub recv:
        Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, recv_ctx: *mut c_void) -> wsrep_status_t>,
    /// Assigns a read view to a transaction.
    pub assign_read_view: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_ws_handle_t,
            rv: *const wsrep_gtid_t,
        ) -> wsrep_status_t,
    >,
    /// Orders and certifies a local write set or fragment; fills `meta`.
    pub certify: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            ws_handle: *mut wsrep_ws_handle_t,
            flags: u32,
            meta: *mut wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    /// Waits until every earlier seqno has left commit order.
    pub commit_order_enter: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            meta: *const wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    /// Leaves commit order, optionally reporting an apply error.
    pub commit_order_leave: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            meta: *const wsrep_trx_meta_t,
            error: *const wsrep_buf_t,
        ) -> wsrep_status_t,
    >,
    /// Ends a local transaction or fragment.
    pub release: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *mut wsrep_ws_handle_t,
        ) -> wsrep_status_t,
    >,
    /// Re-applies a BF-aborted, ordered local transaction through `apply_cb(trx_ctx, ..)`.
    pub replay_trx: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            trx_ctx: *mut c_void,
        ) -> wsrep_status_t,
    >,
    /// Brute-force aborts a local transaction on behalf of seqno `bf_seqno`.
    pub abort_certification: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            bf_seqno: wsrep_seqno_t,
            victim_trx: wsrep_trx_id_t,
            victim_seqno: *mut wsrep_seqno_t,
        ) -> wsrep_status_t,
    >,
    /// Replicates a rollback fragment for a streaming transaction.
    pub rollback: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            trx: wsrep_trx_id_t,
            data: *const wsrep_buf_t,
        ) -> wsrep_status_t,
    >,
    /// Adds certification keys to a transaction.
    pub append_key: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *mut wsrep_ws_handle_t,
            keys: *const wsrep_key_t,
            count: usize,
            r#type: wsrep_key_type_t,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    /// Appends payload buffers to a transaction.
    pub append_data: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *mut wsrep_ws_handle_t,
            data: *const wsrep_buf_t,
            count: usize,
            r#type: wsrep_data_type_t,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    /// Causal wait.
    pub sync_wait: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            upto: *mut wsrep_gtid_t,
            tout: c_int,
            gtid: *mut wsrep_gtid_t,
        ) -> wsrep_status_t,
    >,
    /// Reports the last fully committed GTID.
    pub last_committed_id: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, gtid: *mut wsrep_gtid_t) -> wsrep_status_t,
    >,
    /// Forgets a client connection.
    pub free_connection: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, conn_id: wsrep_conn_id_t) -> wsrep_status_t,
    >,
    /// Starts total-order isolation for a connection.
    pub to_execute_start: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            keys: *const wsrep_key_t,
            keys_num: usize,
            action: *const wsrep_buf_t,
            count: usize,
            flags: u32,
            meta: *mut wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    /// Ends total-order isolation for a connection.
    pub to_execute_end: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            error: *const wsrep_buf_t,
        ) -> wsrep_status_t,
    >,
    /// Collects a preordered action.
    pub preordered_collect: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_po_handle_t,
            data: *const wsrep_buf_t,
            count: usize,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    /// Commits (or discards) a collected preordered action.
    pub preordered_commit: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_po_handle_t,
            source_id: *const wsrep_uuid_t,
            flags: u32,
            pa_range: c_int,
            commit: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    /// Donor side: the state transfer finished (`rcode` 0 or -errno).
    pub sst_sent: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            state_id: *const wsrep_gtid_t,
            rcode: c_int,
        ) -> wsrep_status_t,
    >,
    /// Joiner side: the state transfer was received (`rcode` 0 or -errno).
    pub sst_received: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            state_id: *const wsrep_gtid_t,
            state: *const wsrep_buf_t,
            rcode: c_int,
        ) -> wsrep_status_t,
    >,
    /// Requests a snapshot from a donor.
    pub snapshot: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            msg: *const wsrep_buf_t,
            donor_spec: *const c_char,
        ) -> wsrep_status_t,
    >,
    /// Returns the status-variable array (ended by a NULL name), or NULL.
    pub stats_get: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> *mut wsrep_stats_var>,
    /// Frees what `stats_get` returned.
    pub stats_free:
        Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, var_array: *mut wsrep_stats_var)>,
    /// Resets resettable counters.
    pub stats_reset: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t)>,
    /// Stops applying/committing; returns the paused-at seqno or -1 on failure.
    pub pause: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_seqno_t>,
    /// Undoes `pause`.
    pub resume: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    /// Exempts this node from flow control.
    pub desync: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    /// Rejoins flow control.
    pub resync: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    /// Takes a named cluster-wide lock (`tout` in nanoseconds).
    pub lock: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            name: *const c_char,
            shared: wsrep_bool_t,
            owner: u64,
            tout: i64,
        ) -> wsrep_status_t,
    >,
    /// Releases a named lock.
    pub unlock: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            name: *const c_char,
            owner: u64,
        ) -> wsrep_status_t,
    >,
    /// Tells whether a named lock is held, and optionally by whom.
    pub is_locked: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            name: *const c_char,
            conn: *mut u64,
            node: *mut wsrep_uuid_t,
        ) -> wsrep_bool_t,
    >,
    /// Provider name (display only).
    pub provider_name: *const c_char,
    /// Provider version (display only; MTR parses it).
    pub provider_version: *const c_char,
    /// Provider vendor (display only).
    pub provider_vendor: *const c_char,
    /// Tears the instance down; called twice, so it must be idempotent.
    pub free: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t)>,
    /// The loader's `dlopen` handle; the provider leaves it NULL.
    pub dlh: *mut c_void,
    /// The provider instance pointer.
    pub ctx: *mut c_void,
}

/// The provider table type as the API names it (`typedef struct wsrep_st wsrep_t`).
pub type wsrep_t = wsrep_st;
