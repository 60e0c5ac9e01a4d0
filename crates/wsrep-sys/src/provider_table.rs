//! `wsrep_st`: the provider's function table, which the loader allocates and `wsrep_loader`
//! fills.

use core::ffi::{c_char, c_int, c_void};

use crate::*;

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
