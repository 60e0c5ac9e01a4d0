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

use core::ffi::{c_int, CStr};

mod callbacks;
mod provider_table;
mod structs;
#[cfg(test)]
mod tests;

pub use callbacks::*;
pub use provider_table::*;
pub use structs::*;

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
