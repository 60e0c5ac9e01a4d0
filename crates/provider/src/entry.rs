//! The 45 members of `wsrep_t`: one `extern "C"` function per call, each a few lines of
//! argument checking and translation around one replicator call.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base::{KeyType, Seqno};
use options::{InitContext, ProviderOptions};
use replicator::{
    AbortOutcome, CertifyOutcome, FreezePurge, Meta, NodeAddresses, RecvContext, Replicator,
    Settings,
};
use wsrep_sys::*;

use crate::app::{from_c_gtid, to_c_gtid, to_c_uuid, ServerApp, StatsBlock};
use crate::status::{self, Value};
use crate::{buf, bufs, c_str, c_string, lock, with_instance};

/// What Trireme can do, as `wsrep_provider_capabilities` shows it.
pub(crate) const CAPABILITIES: wsrep_cap_t = WSREP_CAP_MULTI_MASTER
    | WSREP_CAP_CERTIFICATION
    | WSREP_CAP_PARALLEL_APPLYING
    | WSREP_CAP_TRX_REPLAY
    | WSREP_CAP_ISOLATION
    | WSREP_CAP_PAUSE
    | WSREP_CAP_CAUSAL_READS
    | WSREP_CAP_INCREMENTAL_WRITESET
    | WSREP_CAP_UNORDERED
    | WSREP_CAP_ANNOTATION
    | WSREP_CAP_STREAMING;

/// Fills every member of the function table.
///
/// # Safety
/// `table` must be the server's `wsrep_t`.
pub unsafe fn fill_function_table(table: &mut wsrep_t) {
    table.version = WSREP_INTERFACE_VERSION.as_ptr();
    table.init = Some(init);
    table.capabilities = Some(capabilities);
    table.options_set = Some(options_set);
    table.options_get = Some(options_get);
    table.enc_set_key = Some(enc_set_key);
    table.connect = Some(connect);
    table.disconnect = Some(disconnect);
    table.recv = Some(recv);
    table.assign_read_view = Some(assign_read_view);
    table.certify = Some(certify);
    table.commit_order_enter = Some(commit_order_enter);
    table.commit_order_leave = Some(commit_order_leave);
    table.release = Some(release);
    table.replay_trx = Some(replay_trx);
    table.abort_certification = Some(abort_certification);
    table.rollback = Some(rollback);
    table.append_key = Some(append_key);
    table.append_data = Some(append_data);
    table.sync_wait = Some(sync_wait);
    table.last_committed_id = Some(last_committed_id);
    table.free_connection = Some(free_connection);
    table.to_execute_start = Some(to_execute_start);
    table.to_execute_end = Some(to_execute_end);
    table.preordered_collect = Some(preordered_collect);
    table.preordered_commit = Some(preordered_commit);
    table.sst_sent = Some(sst_sent);
    table.sst_received = Some(sst_received);
    table.snapshot = Some(snapshot);
    table.stats_get = Some(stats_get);
    table.stats_free = Some(stats_free);
    table.stats_reset = Some(stats_reset);
    table.pause = Some(pause);
    table.resume = Some(resume);
    table.desync = Some(desync);
    table.resync = Some(resync);
    table.lock = Some(lock_fn);
    table.unlock = Some(unlock_fn);
    table.is_locked = Some(is_locked);
    table.provider_name = crate::PROVIDER_NAME.as_ptr();
    table.provider_version = crate::PROVIDER_VERSION.as_ptr();
    table.provider_vendor = crate::PROVIDER_VENDOR.as_ptr();
    table.free = Some(free);
    table.dlh = std::ptr::null_mut();
    table.ctx = std::ptr::null_mut();
}

/// Runs `body` on the instance's replicator: the one guard of the entry points that need
/// it. `not_connected` is what the call answers before `init` made a replicator (each
/// answers as Galera's does); every failure of [`with_instance`] (null handle, freed or
/// poisoned instance, panic) is `WSREP_FATAL`.
fn with_replicator(
    wsrep: *mut wsrep_t,
    not_connected: wsrep_status_t,
    body: impl FnOnce(&Replicator) -> wsrep_status_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_FATAL, |instance| match instance.replicator() {
        Some(replicator) => body(&replicator),
        None => not_connected,
    })
}

/// Whether `gmcast.isolate` cuts the node off. `2` (Galera's "force quit", which stops
/// its group thread) cuts it off too: the node stays out, not ready, until the server
/// connects it again.
fn isolated_by(isolation: options::value::Isolation) -> bool {
    isolation != options::value::Isolation::Off
}

/// Logs what the option parser wants the operator to know. Notes, not warnings: Galera
/// notes the options it reads, an option that changes nothing harms nothing, and MariaDB's
/// test suites (like a DBA's log watch) treat any provider warning as a fault.
fn log_option_notes(instance: &crate::Instance, warnings: Vec<options::Warning>) {
    for warning in warnings {
        instance.log(WSREP_LOG_INFO, &warning.to_string());
    }
}

/// The error text the server passes when it failed to apply a seqno (or to run a TOI
/// statement); `None` when it succeeded. The members vote on it (`replicator::vote`).
fn server_error<'a>(error: *const wsrep_buf_t) -> Option<&'a [u8]> {
    let error = buf(error);
    (!error.is_empty()).then_some(error)
}

/// Parses the provider options at `init`. A `wsrep_node_address` that does not parse is
/// refused at `connect`, where it matters, not here: MariaDB loads the provider without
/// connecting when `SET GLOBAL wsrep_on=ON` turns wsrep on at runtime, and shows nothing
/// the provider logs until wsrep is on.
fn parse_options(
    instance: &crate::Instance,
    text: &str,
    context: &InitContext<'_>,
) -> Result<(ProviderOptions, Vec<options::Warning>), options::OptionsError> {
    match ProviderOptions::parse_with(text, context) {
        Err(options::OptionsError::InvalidValue {
            option,
            value,
            expected,
        }) if option == "wsrep_node_address" => {
            let reason = format!("invalid value {value:?} for {option}: {expected}");
            instance.log(WSREP_LOG_ERROR, &reason);
            *lock(&instance.refused_node_address) = Some(reason);
            let without_address = InitContext {
                node_address: None,
                ..*context
            };
            ProviderOptions::parse_with(text, &without_address)
        }
        parsed => parsed,
    }
}

unsafe extern "C" fn init(wsrep: *mut wsrep_t, args: *const wsrep_init_args) -> wsrep_status_t {
    if wsrep.is_null() || args.is_null() {
        return WSREP_NODE_FAIL;
    }
    // SAFETY: non-null wsrep_t owned by the server.
    let table = unsafe { &mut *wsrep };
    if !table.ctx.is_null() {
        return with_instance(wsrep, WSREP_NODE_FAIL, |instance| {
            instance.log(
                WSREP_LOG_ERROR,
                "init called twice on one provider instance",
            );
            WSREP_NODE_FAIL
        });
    }
    table.ctx = crate::new_instance();
    // SAFETY: the server's init arguments, valid for this call.
    let args = unsafe { &*args };
    with_instance(wsrep, WSREP_NODE_FAIL, |instance| {
        let app = Arc::new(ServerApp::from_init_args(args));
        *lock(&instance.app) = Some(app.clone());
        crate::log_bridge::route_to(args.logger_cb);
        crate::security::abort_on_provider_thread_panic();
        let context = InitContext {
            node_address: c_str(args.node_address).filter(|a| !a.is_empty()),
            data_dir: c_str(args.data_dir).filter(|d| !d.is_empty()),
        };
        let text = c_str(args.options).unwrap_or_default();
        let (options, warnings) = match parse_options(instance, text, &context) {
            Ok(parsed) => parsed,
            Err(error) => {
                instance.log(WSREP_LOG_ERROR, &format!("wsrep_provider_options: {error}"));
                return WSREP_NODE_FAIL;
            }
        };
        log_option_notes(instance, warnings);
        let tls = match crate::security::tls_context(&options) {
            Ok(tls) => tls,
            Err(error) => {
                instance.log(WSREP_LOG_ERROR, &format!("TLS: {error}"));
                return WSREP_NODE_FAIL;
            }
        };
        let addresses = match NodeAddresses::from_options(&options) {
            Ok(addresses) => addresses,
            Err(error) => {
                instance.log(WSREP_LOG_ERROR, &error);
                return WSREP_NODE_FAIL;
            }
        };
        let node_name = c_str(args.node_name).unwrap_or("trireme").to_owned();
        let incoming = c_str(args.node_incoming).unwrap_or_default().to_owned();
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        let settings = Settings {
            node_name,
            incoming_address: incoming,
            addresses,
            group: options.group_config(),
            seed,
            causal_read_timeout: options.repl_causal_read_timeout,
            state_dir: Some(std::path::PathBuf::from(&options.base_dir)),
            gcache: Some(options.gcache_config()),
            tls,
            thread_nice: options.gcomm_thread_nice,
            history: if args.state_id.is_null() {
                None
            } else {
                // SAFETY: non-null, and valid for this call like the rest of `args`.
                Some(from_c_gtid(unsafe { &*args.state_id }))
            },
        };
        let metrics_address = options.metrics_listen_addr;
        let metrics_tls = settings.tls.clone();
        let thread_nice = settings.thread_nice;
        let replicator = Arc::new(Replicator::new(app, settings));
        apply_runtime_options(instance, &replicator, &options);
        *lock(&instance.options) = options;
        if let Some(address) = metrics_address {
            if let Err(error) =
                start_metrics(instance, &replicator, address, metrics_tls, thread_nice)
            {
                instance.log(WSREP_LOG_ERROR, &error.to_string());
                replicator.shutdown();
                return WSREP_NODE_FAIL;
            }
        }
        *lock(&instance.replicator) = Some(replicator);
        instance.log(WSREP_LOG_INFO, "Trireme provider initialised");
        WSREP_OK
    })
}

/// Hands a new replicator the options it also takes at runtime.
fn apply_runtime_options(
    instance: &crate::Instance,
    replicator: &Replicator,
    options: &ProviderOptions,
) {
    replicator.set_max_write_set_bytes(options.repl_max_ws_size);
    replicator.isolate(isolated_by(options.gmcast_isolate));
    replicator.set_log_conflicts(options.cert_log_conflicts);
    if let Err(error) = replicator.set_freeze_purge(options.gcache_freeze_purge_at_seqno) {
        instance.log(WSREP_LOG_WARN, &error.to_string());
    }
}

/// Starts the metrics endpoint `metrics.listen_addr` asks for. A failure (the port is in
/// use) fails `init`: the DBA asked for the endpoint, and a node silently without it would
/// be missed only when someone looks.
fn start_metrics(
    instance: &crate::Instance,
    replicator: &Arc<Replicator>,
    address: std::net::SocketAddr,
    tls: Option<Arc<tls::TlsContext>>,
    thread_nice: u8,
) -> Result<(), metrics::MetricsError> {
    let source =
        crate::monitoring::NodeSource::new(replicator, &replicator.node_name(), thread_nice);
    let server = metrics::MetricsServer::start(address, tls, Arc::new(source))?;
    *lock(&instance.metrics) = Some(server);
    Ok(())
}

unsafe extern "C" fn capabilities(_wsrep: *mut wsrep_t) -> wsrep_cap_t {
    CAPABILITIES
}

unsafe extern "C" fn options_set(wsrep: *mut wsrep_t, conf: *const c_char) -> wsrep_status_t {
    with_instance(wsrep, WSREP_NODE_FAIL, |instance| {
        let Some(text) = c_str(conf) else {
            return WSREP_NODE_FAIL;
        };
        let mut options = lock(&instance.options);
        let weight_before = options.pc_weight;
        match options.set_runtime(text) {
            Ok(warnings) => {
                log_option_notes(instance, warnings);
                let group = options.group_config();
                let causal_read_timeout = options.repl_causal_read_timeout;
                let freeze = options.gcache_freeze_purge_at_seqno;
                let max_write_set_bytes = options.repl_max_ws_size;
                let isolation = options.gmcast_isolate;
                let reload_tls = options.take_ssl_reload();
                let force_bootstrap = options.take_pc_bootstrap();
                let weight = options.pc_weight;
                let log_conflicts = options.cert_log_conflicts;
                drop(options);
                if let Some(replicator) = instance.replicator() {
                    replicator.set_log_conflicts(log_conflicts);
                    replicator.set_max_write_set_bytes(max_write_set_bytes);
                    replicator.isolate(isolated_by(isolation));
                    if let Err(error) = replicator.reconfigure(group, causal_read_timeout) {
                        instance.log(WSREP_LOG_ERROR, &format!("wsrep_provider_options: {error}"));
                        return WSREP_NODE_FAIL;
                    }
                    if weight != weight_before {
                        replicator.await_weight_in_force(weight);
                    }
                    if let Err(error) = replicator.set_freeze_purge(freeze) {
                        instance.log(WSREP_LOG_ERROR, &format!("wsrep_provider_options: {error}"));
                        return WSREP_NODE_FAIL;
                    }
                    // After the links (`gmcast.isolate=0; pc.bootstrap=1` founds, then tells).
                    if force_bootstrap {
                        replicator.force_bootstrap();
                    }
                    // `now` reads back as the seqno it froze at, as the cache resolved it.
                    let effective = match replicator.freeze_purge() {
                        FreezePurge::At(seqno) if !seqno.is_defined() => FreezePurge::Off,
                        frozen => frozen,
                    };
                    lock(&instance.options).gcache_freeze_purge_at_seqno = effective;
                    // Last, so that a failed reload does not keep the other options of the
                    // same SET from taking effect.
                    if reload_tls {
                        if let Err(error) = replicator.reload_tls() {
                            instance.log(WSREP_LOG_ERROR, &format!("socket.ssl_reload: {error}"));
                            return WSREP_NODE_FAIL;
                        }
                    }
                }
                WSREP_OK
            }
            Err(error) => {
                // Worded as Galera words it (`Unknown parameter 'x'`): scripts and MariaDB's
                // tests match the text.
                instance.log(WSREP_LOG_ERROR, &error.to_string());
                WSREP_NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn options_get(wsrep: *mut wsrep_t) -> *mut c_char {
    with_instance(wsrep, std::ptr::null_mut(), |instance| {
        crate::malloc_c_string(&lock(&instance.options).render())
    })
}

unsafe extern "C" fn enc_set_key(
    _wsrep: *mut wsrep_t,
    _key: *const wsrep_enc_key_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn connect(
    wsrep: *mut wsrep_t,
    cluster_name: *const c_char,
    cluster_url: *const c_char,
    state_donor: *const c_char,
    bootstrap: wsrep_bool_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_NODE_FAIL, |instance| {
        let Some(replicator) = instance.replicator() else {
            return WSREP_NODE_FAIL;
        };
        let url = c_str(cluster_url).unwrap_or_default();
        let donors = c_str(state_donor).unwrap_or_default();
        let name = c_str(cluster_name).unwrap_or(transport::DEFAULT_CLUSTER_NAME);
        if let Some(reason) = lock(&instance.refused_node_address).clone() {
            instance.log(
                WSREP_LOG_ERROR,
                &format!("connect to {url:?} refused: {reason}"),
            );
            return WSREP_NODE_FAIL;
        }
        let bootstrap = bootstrap || lock(&instance.options).take_pc_bootstrap();
        match replicator.connect(name, url, donors, bootstrap) {
            Ok(()) => WSREP_OK,
            // Said as Galera says it (DBAs and test suites look for its first words).
            Err(error @ replicator::ReplicatorError::UnsafeBootstrap(_)) => {
                instance.log(WSREP_LOG_ERROR, &error.to_string());
                WSREP_NODE_FAIL
            }
            Err(error) => {
                instance.log(
                    WSREP_LOG_ERROR,
                    &format!("connect to {url:?} failed: {error}"),
                );
                WSREP_NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn disconnect(wsrep: *mut wsrep_t) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_NODE_FAIL, |replicator| {
        replicator.disconnect();
        WSREP_OK
    })
}

unsafe extern "C" fn recv(wsrep: *mut wsrep_t, recv_ctx: *mut c_void) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_NODE_FAIL, |replicator| {
        match replicator.recv(RecvContext(recv_ctx as usize)) {
            Ok(()) => WSREP_OK,
            // As Galera's: the node left because its data differs from the cluster's.
            Err(replicator::ReplicatorError::Inconsistent(_)) => WSREP_NODE_FAIL,
            Err(_) => WSREP_CONN_FAIL,
        }
    })
}

unsafe extern "C" fn assign_read_view(
    _wsrep: *mut wsrep_t,
    _handle: *mut wsrep_ws_handle_t,
    _rv: *const wsrep_gtid_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

fn fill_meta(meta: *mut wsrep_trx_meta_t, value: &Meta) {
    if meta.is_null() {
        return;
    }
    // SAFETY: a non-null meta is the caller's out-parameter.
    let meta = unsafe { &mut *meta };
    meta.gtid = to_c_gtid(value.gtid);
    meta.stid = wsrep_stid_t {
        node: to_c_uuid(value.source),
        trx: value.trx_id,
        conn: value.conn_id,
    };
    meta.depends_on = value.depends_on.0;
}

fn certify_status(outcome: CertifyOutcome, meta: *mut wsrep_trx_meta_t) -> wsrep_status_t {
    match outcome {
        CertifyOutcome::Committable(value) => {
            fill_meta(meta, &value);
            WSREP_OK
        }
        CertifyOutcome::Failed(value) => {
            fill_meta(meta, &value);
            WSREP_TRX_FAIL
        }
        CertifyOutcome::BfAborted(value) => {
            fill_meta(meta, &value);
            WSREP_BF_ABORT
        }
        CertifyOutcome::NotOrdered => WSREP_TRX_FAIL,
        CertifyOutcome::SizeExceeded { .. } => WSREP_SIZE_EXCEEDED,
    }
}

unsafe extern "C" fn certify(
    wsrep: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    ws_handle: *mut wsrep_ws_handle_t,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_FATAL, |instance| {
        if ws_handle.is_null() {
            return WSREP_NODE_FAIL;
        }
        let Some(replicator) = instance.replicator() else {
            return WSREP_CONN_FAIL;
        };
        // SAFETY: checked non-null, the caller's handle.
        let trx_id = unsafe { (*ws_handle).trx_id };
        match replicator.certify(conn_id, trx_id, flags) {
            // A streaming fragment before the last cannot be replayed: it fails, and the
            // server rolls the whole transaction back (Galera answers the same).
            CertifyOutcome::BfAborted(value) if flags & WSREP_FLAG_TRX_END == 0 => {
                fill_meta(meta, &value);
                WSREP_TRX_FAIL
            }
            outcome => certify_status(outcome, meta),
        }
    })
}

fn seqno_of(meta: *const wsrep_trx_meta_t) -> Option<Seqno> {
    if meta.is_null() {
        return None;
    }
    // SAFETY: a non-null meta is valid for the call.
    let seqno = unsafe { (*meta).gtid.seqno };
    (seqno >= 0).then_some(Seqno(seqno))
}

unsafe extern "C" fn commit_order_enter(
    wsrep: *mut wsrep_t,
    _ws_handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_FATAL, |instance| {
        let (Some(replicator), Some(seqno)) = (instance.replicator(), seqno_of(meta)) else {
            return WSREP_TRX_MISSING;
        };
        match replicator.commit_order_enter(seqno) {
            Ok(()) => WSREP_OK,
            Err(_) => WSREP_BF_ABORT,
        }
    })
}

unsafe extern "C" fn commit_order_leave(
    wsrep: *mut wsrep_t,
    _ws_handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
    error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_FATAL, |instance| {
        let (Some(replicator), Some(seqno)) = (instance.replicator(), seqno_of(meta)) else {
            return WSREP_TRX_MISSING;
        };
        match replicator.commit_order_leave(seqno, server_error(error)) {
            Ok(()) => WSREP_OK,
            Err(_) => WSREP_NODE_FAIL,
        }
    })
}

unsafe extern "C" fn release(
    wsrep: *mut wsrep_t,
    ws_handle: *mut wsrep_ws_handle_t,
) -> wsrep_status_t {
    with_instance(wsrep, WSREP_FATAL, |instance| {
        if let (Some(replicator), false) = (instance.replicator(), ws_handle.is_null()) {
            // SAFETY: checked non-null.
            replicator.release(unsafe { (*ws_handle).trx_id });
        }
        WSREP_OK
    })
}

unsafe extern "C" fn replay_trx(
    wsrep: *mut wsrep_t,
    ws_handle: *const wsrep_ws_handle_t,
    trx_ctx: *mut c_void,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        if ws_handle.is_null() {
            return WSREP_TRX_MISSING;
        }
        // SAFETY: checked non-null.
        let trx_id = unsafe { (*ws_handle).trx_id };
        match replicator.replay(trx_id, RecvContext(trx_ctx as usize)) {
            Ok(()) => WSREP_OK,
            Err(_) => WSREP_TRX_FAIL,
        }
    })
}

unsafe extern "C" fn abort_certification(
    wsrep: *mut wsrep_t,
    bf_seqno: wsrep_seqno_t,
    victim_trx: wsrep_trx_id_t,
    victim_seqno: *mut wsrep_seqno_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_OK, |replicator| {
        match replicator.abort_certification(Seqno(bf_seqno), victim_trx) {
            AbortOutcome::Aborted => WSREP_OK,
            AbortOutcome::NotAllowed(seqno) => {
                if !victim_seqno.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *victim_seqno = seqno.0 };
                }
                WSREP_NOT_ALLOWED
            }
        }
    })
}

unsafe extern "C" fn rollback(
    wsrep: *mut wsrep_t,
    trx: wsrep_trx_id_t,
    data: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        match replicator.rollback(trx, buf(data)) {
            Ok(()) => WSREP_OK,
            Err(_) => WSREP_CONN_FAIL,
        }
    })
}

unsafe extern "C" fn append_key(
    wsrep: *mut wsrep_t,
    ws_handle: *mut wsrep_ws_handle_t,
    keys: *const wsrep_key_t,
    count: usize,
    key_type: wsrep_key_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        let Some(kind) = u8::try_from(key_type).ok().and_then(KeyType::from_u8) else {
            return WSREP_NODE_FAIL;
        };
        if ws_handle.is_null() || (keys.is_null() && count > 0) {
            return WSREP_NODE_FAIL;
        }
        // SAFETY: checked non-null.
        let trx_id = unsafe { (*ws_handle).trx_id };
        let keys = if count == 0 {
            &[][..]
        } else {
            // SAFETY: the caller passes `count` keys at a non-null `keys`.
            unsafe { std::slice::from_raw_parts(keys, count) }
        };
        for key in keys {
            let parts = bufs(key.key_parts, key.key_parts_num)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect();
            replicator.append_key(trx_id, parts, kind);
        }
        WSREP_OK
    })
}

unsafe extern "C" fn append_data(
    wsrep: *mut wsrep_t,
    ws_handle: *mut wsrep_ws_handle_t,
    data: *const wsrep_buf_t,
    count: usize,
    data_type: wsrep_data_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        if ws_handle.is_null() {
            return WSREP_NODE_FAIL;
        }
        if data_type != WSREP_DATA_ORDERED {
            return WSREP_OK;
        }
        // SAFETY: checked non-null.
        let trx_id = unsafe { (*ws_handle).trx_id };
        for piece in bufs(data, count) {
            replicator.append_data(trx_id, piece);
        }
        WSREP_OK
    })
}

unsafe extern "C" fn sync_wait(
    wsrep: *mut wsrep_t,
    upto: *mut wsrep_gtid_t,
    tout: c_int,
    gtid: *mut wsrep_gtid_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        let target = if upto.is_null() {
            None
        } else {
            // SAFETY: non-null in-parameter.
            Some(Seqno(unsafe { (*upto).seqno }))
        };
        let timeout = (tout >= 0).then(|| Duration::from_secs(tout as u64));
        match replicator.sync_wait(target, timeout) {
            Ok(reached) => {
                if !gtid.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *gtid = to_c_gtid(reached) };
                }
                WSREP_OK
            }
            Err(replicator::ReplicatorError::NoStateYet) => WSREP_TRX_MISSING,
            Err(_) => WSREP_TRX_FAIL,
        }
    })
}

unsafe extern "C" fn last_committed_id(
    wsrep: *mut wsrep_t,
    gtid: *mut wsrep_gtid_t,
) -> wsrep_status_t {
    if gtid.is_null() {
        return WSREP_OK;
    }
    let value = with_instance(wsrep, None, |instance| {
        instance
            .replicator()
            .map(|replicator| replicator.last_committed())
    });
    // SAFETY: the caller's out-parameter; this call never fails (wsrep's rule).
    unsafe {
        *gtid = match value {
            Some(value) => to_c_gtid(value),
            None => WSREP_GTID_UNDEFINED,
        };
    }
    WSREP_OK
}

unsafe extern "C" fn free_connection(
    _wsrep: *mut wsrep_t,
    _conn_id: wsrep_conn_id_t,
) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn to_execute_start(
    wsrep: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    keys: *const wsrep_key_t,
    keys_num: usize,
    action: *const wsrep_buf_t,
    count: usize,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        if keys.is_null() && keys_num > 0 {
            return WSREP_NODE_FAIL;
        }
        let keys = if keys_num == 0 {
            &[][..]
        } else {
            // SAFETY: the caller passes `keys_num` keys at a non-null `keys`.
            unsafe { std::slice::from_raw_parts(keys, keys_num) }
        };
        let keys: Vec<Vec<Vec<u8>>> = keys
            .iter()
            .map(|key| {
                bufs(key.key_parts, key.key_parts_num)
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect()
            })
            .collect();
        let data: Vec<u8> = bufs(action, count).concat();
        certify_status(
            replicator.to_execute_start(conn_id, keys, &data, flags),
            meta,
        )
    })
}

unsafe extern "C" fn to_execute_end(
    wsrep: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        // The statement's own error is the server's to report; a lost vote is logged and
        // the node leaves. Galera's `to_execute_end` succeeds either way, and MariaDB warns
        // of a failed TOI end otherwise.
        let _ = replicator.to_execute_end(conn_id, server_error(error));
        WSREP_OK
    })
}

unsafe extern "C" fn preordered_collect(
    _wsrep: *mut wsrep_t,
    _handle: *mut wsrep_po_handle_t,
    _data: *const wsrep_buf_t,
    _count: usize,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn preordered_commit(
    _wsrep: *mut wsrep_t,
    _handle: *mut wsrep_po_handle_t,
    _source_id: *const wsrep_uuid_t,
    _flags: u32,
    _pa_range: c_int,
    _commit: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn sst_sent(
    wsrep: *mut wsrep_t,
    state_id: *const wsrep_gtid_t,
    rcode: c_int,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        if state_id.is_null() {
            return WSREP_NODE_FAIL;
        }
        // SAFETY: checked non-null.
        replicator.sst_sent(from_c_gtid(unsafe { &*state_id }), rcode);
        WSREP_OK
    })
}

unsafe extern "C" fn sst_received(
    wsrep: *mut wsrep_t,
    state_id: *const wsrep_gtid_t,
    _state: *const wsrep_buf_t,
    rcode: c_int,
) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_CONN_FAIL, |replicator| {
        if state_id.is_null() {
            return WSREP_NODE_FAIL;
        }
        // SAFETY: checked non-null.
        match replicator.sst_received(from_c_gtid(unsafe { &*state_id }), rcode) {
            Ok(()) => WSREP_OK,
            Err(_) => WSREP_CONN_FAIL,
        }
    })
}

unsafe extern "C" fn snapshot(
    _wsrep: *mut wsrep_t,
    _msg: *const wsrep_buf_t,
    _donor_spec: *const c_char,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn stats_get(wsrep: *mut wsrep_t) -> *mut wsrep_stats_var {
    with_instance(wsrep, std::ptr::null_mut(), |instance| {
        let values = match instance.replicator() {
            Some(replicator) => status::provider_values(&replicator.status()),
            None => status::unconnected_values(),
        };
        let mut strings = Vec::new();
        let mut vars = Vec::new();
        for (name, value) in values {
            debug_assert!(status::kind_matches(name, &value), "{name}: {value:?}");
            let name = c_string(name);
            let name_ptr = name.as_ptr();
            strings.push(name);
            let (r#type, value) = match value {
                Value::Int(number) => (WSREP_VAR_INT64, wsrep_stats_value { _int64: number }),
                Value::Double(number) => (WSREP_VAR_DOUBLE, wsrep_stats_value { _double: number }),
                Value::Text(text) => {
                    let text = c_string(&text);
                    let text_ptr = text.as_ptr();
                    strings.push(text);
                    (WSREP_VAR_STRING, wsrep_stats_value { _string: text_ptr })
                }
            };
            vars.push(wsrep_stats_var {
                name: name_ptr,
                r#type,
                value,
            });
        }
        vars.push(wsrep_stats_var {
            name: std::ptr::null(),
            r#type: WSREP_VAR_STRING,
            value: wsrep_stats_value { _int64: 0 },
        });
        let mut block = StatsBlock {
            vars,
            _strings: strings,
        };
        let pointer = block.vars.as_mut_ptr();
        lock(&instance.stats).insert(pointer as usize, block);
        pointer
    })
}

unsafe extern "C" fn stats_free(wsrep: *mut wsrep_t, var_array: *mut wsrep_stats_var) {
    with_instance(wsrep, (), |instance| {
        lock(&instance.stats).remove(&(var_array as usize));
    });
}

unsafe extern "C" fn stats_reset(wsrep: *mut wsrep_t) {
    with_instance(wsrep, (), |instance| {
        if let Some(replicator) = instance.replicator() {
            replicator.reset_stats();
        }
    });
}

unsafe extern "C" fn pause(wsrep: *mut wsrep_t) -> wsrep_seqno_t {
    with_instance(wsrep, -1, |instance| {
        // wsrep-lib takes only -1 for a failure: any other negative value would be a seqno.
        instance
            .replicator()
            .and_then(|r| r.pause().ok())
            .map_or(-1, |point| point.0.max(-1))
    })
}

unsafe extern "C" fn resume(wsrep: *mut wsrep_t) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_NODE_FAIL, |replicator| {
        replicator.resume();
        WSREP_OK
    })
}

unsafe extern "C" fn desync(wsrep: *mut wsrep_t) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_NODE_FAIL, |replicator| {
        replicator.desync();
        WSREP_OK
    })
}

unsafe extern "C" fn resync(wsrep: *mut wsrep_t) -> wsrep_status_t {
    with_replicator(wsrep, WSREP_NODE_FAIL, |replicator| {
        replicator.resync();
        WSREP_OK
    })
}

unsafe extern "C" fn lock_fn(
    _wsrep: *mut wsrep_t,
    _name: *const c_char,
    _shared: wsrep_bool_t,
    _owner: u64,
    _tout: i64,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn unlock_fn(
    _wsrep: *mut wsrep_t,
    _name: *const c_char,
    _owner: u64,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn is_locked(
    _wsrep: *mut wsrep_t,
    _name: *const c_char,
    _conn: *mut u64,
    _node: *mut wsrep_uuid_t,
) -> wsrep_bool_t {
    false
}

/// Idempotent: the server calls it twice, the second time just before `dlclose`. Every
/// thread of the instance is joined before it returns.
unsafe extern "C" fn free(wsrep: *mut wsrep_t) {
    if wsrep.is_null() {
        return;
    }
    // SAFETY: the server's wsrep_t; ctx is ours.
    let ctx = unsafe { std::mem::replace(&mut (*wsrep).ctx, std::ptr::null_mut()) };
    let _ = std::panic::catch_unwind(|| crate::drop_instance(ctx));
}
