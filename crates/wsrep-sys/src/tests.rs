//! Layout and value checks against the numbers in `wsrep-contract.md` §2 (x86-64 LP64).
//!
//! Every expected number below is written out literally from the contract, never computed
//! from the Rust declarations, so a wrong declaration cannot make its own test pass.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{align_of, offset_of, size_of};

use super::*;

/// Asserts size and alignment of a type, then the offset of each listed field.
macro_rules! layout {
    ($ty:ty, size $size:expr, align $align:expr $(, $field:ident @ $off:expr)* $(,)?) => {{
        assert_eq!(size_of::<$ty>(), $size, "size_of::<{}>()", stringify!($ty));
        assert_eq!(align_of::<$ty>(), $align, "align_of::<{}>()", stringify!($ty));
        $(
            assert_eq!(
                offset_of!($ty, $field),
                $off,
                "offset_of!({}, {})",
                stringify!($ty),
                stringify!($field)
            );
        )*
    }};
}

#[test]
fn scalar_sizes() {
    assert_eq!(size_of::<wsrep_seqno_t>(), 8);
    assert_eq!(size_of::<wsrep_trx_id_t>(), 8);
    assert_eq!(size_of::<wsrep_conn_id_t>(), 8);
    assert_eq!(size_of::<wsrep_cap_t>(), 4);
    assert_eq!(size_of::<wsrep_bool_t>(), 1);
    // Every C enum is 4 bytes.
    assert_eq!(size_of::<wsrep_status_t>(), 4);
    assert_eq!(size_of::<wsrep_cb_status_t>(), 4);
    assert_eq!(size_of::<wsrep_log_level_t>(), 4);
    assert_eq!(size_of::<wsrep_member_status_t>(), 4);
    assert_eq!(size_of::<wsrep_view_status_t>(), 4);
    assert_eq!(size_of::<wsrep_var_type_t>(), 4);
    assert_eq!(size_of::<wsrep_key_type_t>(), 4);
    assert_eq!(size_of::<wsrep_data_type_t>(), 4);
    assert_eq!(size_of::<wsrep_enc_direction_t>(), 4);
    assert_eq!(size_of::<wsrep_allowlist_key_t>(), 4);
    assert_eq!(size_of::<wsrep_node_isolation_mode>(), 4);
    assert_eq!(size_of::<wsrep_node_isolation_result>(), 4);
    // Nullable C function pointers are exactly one pointer wide.
    assert_eq!(size_of::<wsrep_log_cb_t>(), 8);
    assert_eq!(size_of::<wsrep_apply_cb_t>(), 8);
    assert_eq!(size_of::<wsrep_allowlist_cb_t>(), 8);
    assert_eq!(size_of::<wsrep_loader_fun>(), 8);
    assert_eq!(size_of::<wsrep_enc_iv_t>(), 32);
}

#[test]
fn string_constants() {
    assert_eq!(WSREP_INTERFACE_VERSION, c"26");
    assert_eq!(WSREP_INTERFACE_VERSION.to_bytes_with_nul(), b"26\0");
    assert_eq!(WSREP_NONE, c"none");
    assert_eq!(WSREP_STATE_TRANSFER_TRIVIAL, c"trivial");
    assert_eq!(WSREP_STATE_TRANSFER_NONE, c"none");
    assert_eq!(WSREP_LOADER_SYMBOL, c"wsrep_loader");
    assert_eq!(WSREP_INTERFACE_VERSION_SYMBOL, c"wsrep_interface_version");
    assert_eq!(
        WSREP_ALLOWLIST_SERVICE_INIT_FUNC_V1,
        c"wsrep_init_allowlist_service_v1"
    );
    assert_eq!(
        WSREP_ALLOWLIST_SERVICE_DEINIT_FUNC_V1,
        c"wsrep_deinit_allowlist_service_v1"
    );
    assert_eq!(
        WSREP_EVENT_SERVICE_INIT_FUNC_V1,
        c"wsrep_init_event_service_v1"
    );
    assert_eq!(
        WSREP_EVENT_SERVICE_DEINIT_FUNC_V1,
        c"wsrep_deinit_event_service_v1"
    );
    assert_eq!(
        WSREP_NODE_ISOLATION_MODE_SET_V1,
        c"wsrep_node_isolation_mode_set_v1"
    );
    assert_eq!(WSREP_CERTIFY_V1, c"wsrep_certify_v1");
}

#[test]
fn numeric_constants() {
    assert_eq!(WSREP_SEQNO_UNDEFINED, -1);
    assert_eq!(WSREP_UUID_STR_LEN, 36);
    assert_eq!(WSREP_GTID_STR_LEN, 57);
    assert_eq!(WSREP_MEMBER_NAME_LEN, 32);
    assert_eq!(WSREP_INCOMING_LEN, 256);
    assert_eq!(WSREP_UUID_UNDEFINED.data, [0u8; 16]);
    assert_eq!(WSREP_GTID_UNDEFINED.uuid, WSREP_UUID_UNDEFINED);
    assert_eq!(WSREP_GTID_UNDEFINED.seqno, -1);
    assert!(WSREP_PO_INITIALIZER.opaque.is_null());
}

#[test]
fn enum_values() {
    let log: [(wsrep_log_level_t, c_int); 5] = [
        (WSREP_LOG_FATAL, 0),
        (WSREP_LOG_ERROR, 1),
        (WSREP_LOG_WARN, 2),
        (WSREP_LOG_INFO, 3),
        (WSREP_LOG_DEBUG, 4),
    ];
    let status: [(wsrep_status_t, c_int); 11] = [
        (WSREP_OK, 0),
        (WSREP_WARNING, 1),
        (WSREP_TRX_MISSING, 2),
        (WSREP_TRX_FAIL, 3),
        (WSREP_BF_ABORT, 4),
        (WSREP_SIZE_EXCEEDED, 5),
        (WSREP_CONN_FAIL, 6),
        (WSREP_NODE_FAIL, 7),
        (WSREP_FATAL, 8),
        (WSREP_NOT_IMPLEMENTED, 9),
        (WSREP_NOT_ALLOWED, 10),
    ];
    let cb: [(wsrep_cb_status_t, c_int); 2] = [(WSREP_CB_SUCCESS, 0), (WSREP_CB_FAILURE, 1)];
    let member: [(wsrep_member_status_t, c_int); 7] = [
        (WSREP_MEMBER_UNDEFINED, 0),
        (WSREP_MEMBER_JOINER, 1),
        (WSREP_MEMBER_DONOR, 2),
        (WSREP_MEMBER_JOINED, 3),
        (WSREP_MEMBER_SYNCED, 4),
        (WSREP_MEMBER_ERROR, 5),
        (WSREP_MEMBER_MAX, 6),
    ];
    let view: [(wsrep_view_status_t, c_int); 4] = [
        (WSREP_VIEW_PRIMARY, 0),
        (WSREP_VIEW_NON_PRIMARY, 1),
        (WSREP_VIEW_DISCONNECTED, 2),
        (WSREP_VIEW_MAX, 3),
    ];
    let var: [(wsrep_var_type_t, c_int); 3] = [
        (WSREP_VAR_STRING, 0),
        (WSREP_VAR_INT64, 1),
        (WSREP_VAR_DOUBLE, 2),
    ];
    let key: [(wsrep_key_type_t, c_int); 4] = [
        (WSREP_KEY_SHARED, 0),
        (WSREP_KEY_REFERENCE, 1),
        (WSREP_KEY_UPDATE, 2),
        (WSREP_KEY_EXCLUSIVE, 3),
    ];
    let data: [(wsrep_data_type_t, c_int); 3] = [
        (WSREP_DATA_ORDERED, 0),
        (WSREP_DATA_UNORDERED, 1),
        (WSREP_DATA_ANNOTATION, 2),
    ];
    let enc: [(wsrep_enc_direction_t, c_int); 2] = [(WSREP_ENC, 0), (WSREP_DEC, 1)];
    let allow: [(wsrep_allowlist_key_t, c_int); 2] =
        [(WSREP_ALLOWLIST_KEY_IP, 0), (WSREP_ALLOWLIST_KEY_SSL, 1)];
    let iso_mode: [(wsrep_node_isolation_mode, c_int); 3] = [
        (WSREP_NODE_ISOLATION_NOT_ISOLATED, 0),
        (WSREP_NODE_ISOLATION_ISOLATED, 1),
        (WSREP_NODE_ISOLATION_FORCE_DISCONNECT, 2),
    ];
    let iso_result: [(wsrep_node_isolation_result, c_int); 2] = [
        (WSREP_NODE_ISOLATION_SUCCESS, 0),
        (WSREP_NODE_ISOLATION_INVALID_VALUE, 1),
    ];
    for table in [
        &log[..],
        &status[..],
        &cb[..],
        &member[..],
        &view[..],
        &var[..],
        &key[..],
        &data[..],
        &enc[..],
        &allow[..],
        &iso_mode[..],
        &iso_result[..],
    ] {
        for &(got, want) in table {
            assert_eq!(got, want);
        }
    }
}

#[test]
fn flag_bits() {
    let flags: [(u32, u32); 10] = [
        (WSREP_FLAG_TRX_END, 0x001),
        (WSREP_FLAG_ROLLBACK, 0x002),
        (WSREP_FLAG_ISOLATION, 0x004),
        (WSREP_FLAG_PA_UNSAFE, 0x008),
        (WSREP_FLAG_COMMUTATIVE, 0x010),
        (WSREP_FLAG_NATIVE, 0x020),
        (WSREP_FLAG_TRX_START, 0x040),
        (WSREP_FLAG_TRX_PREPARE, 0x080),
        (WSREP_FLAG_SNAPSHOT, 0x100),
        (WSREP_FLAG_IMPLICIT_DEPS, 0x200),
    ];
    let mut all = 0;
    for (got, want) in flags {
        assert_eq!(got, want);
        all |= got;
    }
    assert_eq!(WSREP_FLAGS_LAST, WSREP_FLAG_IMPLICIT_DEPS);
    assert_eq!(WSREP_FLAGS_MASK, 0x3FF);
    assert_eq!(all, WSREP_FLAGS_MASK);
}

#[test]
fn capability_bits() {
    let caps: [(wsrep_cap_t, u32); 18] = [
        (WSREP_CAP_MULTI_MASTER, 0),
        (WSREP_CAP_CERTIFICATION, 1),
        (WSREP_CAP_PARALLEL_APPLYING, 2),
        (WSREP_CAP_TRX_REPLAY, 3),
        (WSREP_CAP_ISOLATION, 4),
        (WSREP_CAP_PAUSE, 5),
        (WSREP_CAP_CAUSAL_READS, 6),
        (WSREP_CAP_CAUSAL_TRX, 7),
        (WSREP_CAP_INCREMENTAL_WRITESET, 8),
        (WSREP_CAP_SESSION_LOCKS, 9),
        (WSREP_CAP_DISTRIBUTED_LOCKS, 10),
        (WSREP_CAP_CONSISTENCY_CHECK, 11),
        (WSREP_CAP_UNORDERED, 12),
        (WSREP_CAP_ANNOTATION, 13),
        (WSREP_CAP_PREORDERED, 14),
        (WSREP_CAP_STREAMING, 15),
        (WSREP_CAP_SNAPSHOT, 16),
        (WSREP_CAP_NBO, 17),
    ];
    for (got, bit) in caps {
        assert_eq!(got, 1u32 << bit);
    }
}

#[test]
fn basic_struct_layouts() {
    layout!(wsrep_uuid_t, size 16, align 8, data @ 0);
    layout!(wsrep_gtid_t, size 24, align 8, uuid @ 0, seqno @ 16);
    layout!(wsrep_stid_t, size 32, align 8, node @ 0, trx @ 16, conn @ 24);
    layout!(wsrep_trx_meta_t, size 64, align 8, gtid @ 0, stid @ 24, depends_on @ 56);
    layout!(wsrep_buf_t, size 16, align 8, ptr @ 0, len @ 8);
    layout!(wsrep_ws_handle_t, size 16, align 8, trx_id @ 0, opaque @ 8);
    layout!(wsrep_key_t, size 16, align 8, key_parts @ 0, key_parts_num @ 8);
    layout!(wsrep_member_info_t, size 304, align 8, id @ 0, name @ 16, incoming @ 48);
    layout!(wsrep_po_handle_t, size 8, align 8, opaque @ 0);
    layout!(wsrep_enc_ctx_t, size 24, align 8, key @ 0, iv @ 8, ctx @ 16);
    layout!(wsrep_seq_cb_t, size 16, align 8, ctx @ 0, r#fn @ 8);
    layout!(wsrep_allowlist_service_v1_t, size 16, align 8, allowlist_cb @ 0, context @ 8);
    layout!(wsrep_event_service_v1_t, size 16, align 8, event_cb @ 0, context @ 8);
}

#[test]
fn stats_var_layout() {
    layout!(wsrep_stats_value, size 8, align 8, _int64 @ 0, _double @ 0, _string @ 0);
    layout!(wsrep_stats_var, size 24, align 8, name @ 0, r#type @ 8, value @ 16);
}

#[test]
fn view_info_layout() {
    // Rust's size is the header only: C's 360 counts the one member C declares.
    layout!(
        wsrep_view_info_t,
        size 56,
        align 8,
        state_id @ 0,
        view @ 24,
        status @ 32,
        capabilities @ 36,
        my_idx @ 40,
        memb_num @ 44,
        proto_ver @ 48,
        members @ 56,
    );
    assert_eq!(WSREP_VIEW_INFO_C_SIZE, 360);
    assert_eq!(WSREP_VIEW_INFO_C_SIZE, 56 + 304);
    assert_eq!(wsrep_view_info_alloc_size(0), 360);
    assert_eq!(wsrep_view_info_alloc_size(1), 360);
    assert_eq!(wsrep_view_info_alloc_size(2), 360 + 304);
    assert_eq!(wsrep_view_info_alloc_size(5), 360 + 4 * 304);

    let base = 0x1000 as *const wsrep_view_info_t;
    assert_eq!(wsrep_view_info_members(base) as usize, 0x1000 + 56);
    let base_mut = 0x2000 as *mut wsrep_view_info_t;
    assert_eq!(wsrep_view_info_members_mut(base_mut) as usize, 0x2000 + 56);
}

#[test]
fn init_args_layout() {
    layout!(
        wsrep_init_args,
        size 144,
        align 8,
        app_ctx @ 0,
        node_name @ 8,
        node_address @ 16,
        node_incoming @ 24,
        data_dir @ 32,
        options @ 40,
        proto_ver @ 48,
        state_id @ 56,
        state @ 64,
        logger_cb @ 72,
        connected_cb @ 80,
        view_cb @ 88,
        sst_request_cb @ 96,
        encrypt_cb @ 104,
        apply_cb @ 112,
        unordered_cb @ 120,
        sst_donate_cb @ 128,
        synced_cb @ 136,
    );
    assert_eq!(size_of::<wsrep_init_args_t>(), 144);
}

#[test]
fn wsrep_t_layout() {
    layout!(
        wsrep_t,
        size 360,
        align 8,
        version @ 0,
        init @ 8,
        capabilities @ 16,
        options_set @ 24,
        options_get @ 32,
        enc_set_key @ 40,
        connect @ 48,
        disconnect @ 56,
        recv @ 64,
        assign_read_view @ 72,
        certify @ 80,
        commit_order_enter @ 88,
        commit_order_leave @ 96,
        release @ 104,
        replay_trx @ 112,
        abort_certification @ 120,
        rollback @ 128,
        append_key @ 136,
        append_data @ 144,
        sync_wait @ 152,
        last_committed_id @ 160,
        free_connection @ 168,
        to_execute_start @ 176,
        to_execute_end @ 184,
        preordered_collect @ 192,
        preordered_commit @ 200,
        sst_sent @ 208,
        sst_received @ 216,
        snapshot @ 224,
        stats_get @ 232,
        stats_free @ 240,
        stats_reset @ 248,
        pause @ 256,
        resume @ 264,
        desync @ 272,
        resync @ 280,
        lock @ 288,
        unlock @ 296,
        is_locked @ 304,
        provider_name @ 312,
        provider_version @ 320,
        provider_vendor @ 328,
        free @ 336,
        dlh @ 344,
        ctx @ 352,
    );
}

// A provider-style table, as `wsrep_loader` would fill it. The struct literal is exhaustive,
// so it stops compiling if a member is added, dropped or renamed; the assignments check that
// ordinary `extern "C"` functions with the contract's parameter types fit their slots.

extern "C" fn fake_stats_get(_: *mut wsrep_t) -> *mut wsrep_stats_var {
    core::ptr::null_mut()
}

extern "C" fn fake_pause(_: *mut wsrep_t) -> wsrep_seqno_t {
    WSREP_SEQNO_UNDEFINED
}

extern "C" fn fake_append_key(
    _: *mut wsrep_t,
    _: *mut wsrep_ws_handle_t,
    _: *const wsrep_key_t,
    _: usize,
    _: wsrep_key_type_t,
    _: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_OK
}

extern "C" fn fake_loader(_: *mut wsrep_t) -> c_int {
    0
}

extern "C" fn fake_view_cb(
    _: *mut c_void,
    _: *mut c_void,
    _: *const wsrep_view_info_t,
    _: *const c_char,
    _: usize,
) -> wsrep_cb_status_t {
    WSREP_CB_SUCCESS
}

extern "C" fn fake_allowlist_cb(
    _: *mut wsrep_allowlist_context_t,
    _: wsrep_allowlist_key_t,
    _: *const wsrep_buf_t,
) -> wsrep_status_t {
    WSREP_NOT_ALLOWED
}

#[test]
fn table_literal_is_exhaustive_and_slots_accept_functions() {
    let version: *const c_char = WSREP_INTERFACE_VERSION.as_ptr();
    let mut table = wsrep_t {
        version,
        init: None,
        capabilities: None,
        options_set: None,
        options_get: None,
        enc_set_key: None,
        connect: None,
        disconnect: None,
        recv: None,
        assign_read_view: None,
        certify: None,
        commit_order_enter: None,
        commit_order_leave: None,
        release: None,
        replay_trx: None,
        abort_certification: None,
        rollback: None,
        append_key: None,
        append_data: None,
        sync_wait: None,
        last_committed_id: None,
        free_connection: None,
        to_execute_start: None,
        to_execute_end: None,
        preordered_collect: None,
        preordered_commit: None,
        sst_sent: None,
        sst_received: None,
        snapshot: None,
        stats_get: None,
        stats_free: None,
        stats_reset: None,
        pause: None,
        resume: None,
        desync: None,
        resync: None,
        lock: None,
        unlock: None,
        is_locked: None,
        provider_name: core::ptr::null(),
        provider_version: core::ptr::null(),
        provider_vendor: core::ptr::null(),
        free: None,
        dlh: core::ptr::null_mut(),
        ctx: core::ptr::null_mut(),
    };
    table.stats_get = Some(fake_stats_get);
    table.pause = Some(fake_pause);
    table.append_key = Some(fake_append_key);
    assert_eq!(table.version, version);
    assert!(table.stats_get.is_some() && table.pause.is_some() && table.append_key.is_some());
    let copy = table;
    let stored = copy.stats_get.map(|f| f as *const ());
    assert_eq!(stored, Some(fake_stats_get as *const ()));
    let loader: wsrep_loader_fun = Some(fake_loader);
    let view_cb: wsrep_view_cb_t = Some(fake_view_cb);
    let service = wsrep_allowlist_service_v1_t {
        allowlist_cb: Some(fake_allowlist_cb),
        context: core::ptr::null_mut(),
    };
    assert!(loader.is_some() && view_cb.is_some() && service.allowlist_cb.is_some());
}
