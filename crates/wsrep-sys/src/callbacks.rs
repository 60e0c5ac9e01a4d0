//! The application callbacks carried in `wsrep_init_args`, the services the application
//! hands the provider through exported init functions, and the signatures of the symbols a
//! provider exports.

use core::ffi::{c_char, c_int, c_void};
use core::marker::{PhantomData, PhantomPinned};

use crate::*;

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
