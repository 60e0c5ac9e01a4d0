//! The replicator's view of MariaDB: [`replicator::Application`] over the server's callbacks.

use std::ffi::{c_char, c_void, CString};
use std::ptr;

use base::{Gtid, Seqno, Uuid};
use replicator::{Application, ApplyAction, LogLevel, RecvContext, ViewInfo};
use wsrep_sys::*;

use crate::c_string;

/// The callbacks and context MariaDB gave `init`.
pub(crate) struct ServerApp {
    app_ctx: *mut c_void,
    logger: wsrep_log_cb_t,
    connected: wsrep_connected_cb_t,
    view: wsrep_view_cb_t,
    sst_request: wsrep_sst_request_cb_t,
    apply: wsrep_apply_cb_t,
    sst_donate: wsrep_sst_donate_cb_t,
    synced: wsrep_synced_cb_t,
}

// SAFETY: app_ctx is the server's object, which the server makes callable from any thread
// (wsrep's contract: callbacks are invoked from provider threads).
unsafe impl Send for ServerApp {}
// SAFETY: as above; the function pointers are plain code pointers.
unsafe impl Sync for ServerApp {}

impl ServerApp {
    /// Takes the callbacks from the init arguments.
    pub(crate) fn from_init_args(args: &wsrep_init_args) -> ServerApp {
        ServerApp {
            app_ctx: args.app_ctx,
            logger: args.logger_cb,
            connected: args.connected_cb,
            view: args.view_cb,
            sst_request: args.sst_request_cb,
            apply: args.apply_cb,
            sst_donate: args.sst_donate_cb,
            synced: args.synced_cb,
        }
    }

    /// Writes one line to the server's error log.
    pub(crate) fn log_raw(&self, level: wsrep_log_level_t, message: &str) {
        let text = c_string(message);
        match self.logger {
            // SAFETY: the server's logger takes a level and a NUL-terminated string.
            Some(logger) => unsafe { logger(level, text.as_ptr()) },
            None => eprintln!("WSREP (Trireme): {message}"),
        }
    }
}

pub(crate) fn to_c_uuid(uuid: Uuid) -> wsrep_uuid_t {
    wsrep_uuid_t { data: uuid.0 }
}

pub(crate) fn to_c_gtid(gtid: Gtid) -> wsrep_gtid_t {
    wsrep_gtid_t {
        uuid: to_c_uuid(gtid.cluster),
        seqno: gtid.seqno.0,
    }
}

pub(crate) fn from_c_gtid(gtid: &wsrep_gtid_t) -> Gtid {
    Gtid {
        cluster: Uuid(gtid.uuid.data),
        seqno: Seqno(gtid.seqno),
    }
}

/// A `wsrep_view_info_t` with its members, in one 8-byte aligned allocation.
struct CView {
    storage: Vec<u64>,
}

impl CView {
    fn new(view: &ViewInfo) -> CView {
        let size = wsrep_view_info_alloc_size(view.members.len());
        let mut storage = vec![0u64; size.div_ceil(8)];
        let header = storage.as_mut_ptr() as *mut wsrep_view_info_t;
        // SAFETY: storage is zeroed, 8-byte aligned and large enough for the header and
        // `members.len()` member records (wsrep_view_info_alloc_size).
        unsafe {
            (*header).state_id = to_c_gtid(view.state_id);
            (*header).view = view.view_id;
            (*header).status = if view.primary {
                WSREP_VIEW_PRIMARY
            } else {
                WSREP_VIEW_NON_PRIMARY
            };
            (*header).capabilities = crate::entry::CAPABILITIES;
            (*header).my_idx = view.my_index;
            (*header).memb_num = view.members.len() as i32;
            (*header).proto_ver = view.proto_ver;
            let first = wsrep_view_info_members_mut(header);
            let members = std::slice::from_raw_parts_mut(first, view.members.len());
            for (slot, member) in members.iter_mut().zip(&view.members) {
                slot.id = to_c_uuid(member.uuid);
                copy_c_text(&mut slot.name, &member.name);
                copy_c_text(&mut slot.incoming, &member.incoming);
            }
        }
        CView { storage }
    }

    fn as_ptr(&self) -> *const wsrep_view_info_t {
        self.storage.as_ptr() as *const wsrep_view_info_t
    }
}

fn copy_c_text(target: &mut [c_char], text: &str) {
    let bytes = text.as_bytes();
    let length = bytes.len().min(target.len() - 1);
    for (slot, byte) in target.iter_mut().zip(&bytes[..length]) {
        *slot = *byte as c_char;
    }
    target[length] = 0;
}

fn succeeded(status: wsrep_cb_status_t) -> bool {
    status == WSREP_CB_SUCCESS
}

impl Application for ServerApp {
    fn connected(&self, view: &ViewInfo) -> bool {
        let Some(callback) = self.connected else {
            return true;
        };
        let c_view = CView::new(view);
        // SAFETY: the server's callback with its own context and a valid view.
        succeeded(unsafe { callback(self.app_ctx, c_view.as_ptr()) })
    }

    fn view(&self, recv: RecvContext, view: &ViewInfo) -> bool {
        let Some(callback) = self.view else {
            return true;
        };
        let c_view = CView::new(view);
        // SAFETY: recv is the applier context the server passed to `recv` on this thread.
        succeeded(unsafe {
            callback(
                self.app_ctx,
                recv.0 as *mut c_void,
                c_view.as_ptr(),
                ptr::null(),
                0,
            )
        })
    }

    fn apply(&self, recv: RecvContext, action: &ApplyAction<'_>, exit_loop: &mut bool) -> bool {
        let Some(callback) = self.apply else {
            return false;
        };
        let handle = wsrep_ws_handle_t {
            trx_id: action.meta.trx_id,
            opaque: ptr::null_mut(),
        };
        let data = wsrep_buf_t {
            ptr: if action.data.is_empty() {
                ptr::null()
            } else {
                action.data.as_ptr() as *const c_void
            },
            len: action.data.len(),
        };
        let meta = wsrep_trx_meta_t {
            gtid: to_c_gtid(action.meta.gtid),
            stid: wsrep_stid_t {
                node: to_c_uuid(action.meta.source),
                trx: action.meta.trx_id,
                conn: action.meta.conn_id,
            },
            depends_on: action.meta.depends_on.0,
        };
        let mut exit: wsrep_bool_t = false;
        // SAFETY: every pointer refers to a local that outlives the call.
        let status = unsafe {
            callback(
                recv.0 as *mut c_void,
                &handle,
                action.flags,
                &data,
                &meta,
                &mut exit,
            )
        };
        *exit_loop = exit;
        succeeded(status)
    }

    fn synced(&self) {
        if let Some(callback) = self.synced {
            // SAFETY: the server's callback with its own context.
            unsafe { callback(self.app_ctx) };
        }
    }

    fn sst_request(&self) -> Option<Vec<u8>> {
        let callback = self.sst_request?;
        let mut request: *mut c_void = ptr::null_mut();
        let mut length: usize = 0;
        // SAFETY: out-pointers to locals; the server mallocs the request.
        let status = unsafe { callback(self.app_ctx, &mut request, &mut length) };
        if !succeeded(status) {
            return None;
        }
        let bytes = if request.is_null() || length == 0 {
            Vec::new()
        } else {
            // SAFETY: the server returned `length` bytes at `request`.
            unsafe { std::slice::from_raw_parts(request as *const u8, length) }.to_vec()
        };
        crate::c_free(request);
        Some(bytes)
    }

    fn sst_donate(&self, recv: RecvContext, request: &[u8], state: Gtid, bypass: bool) -> bool {
        let Some(callback) = self.sst_donate else {
            return false;
        };
        let message = wsrep_buf_t {
            ptr: request.as_ptr() as *const c_void,
            len: request.len(),
        };
        let gtid = to_c_gtid(state);
        // SAFETY: pointers to locals that outlive the call.
        succeeded(unsafe {
            callback(
                self.app_ctx,
                recv.0 as *mut c_void,
                &message,
                &gtid,
                ptr::null(),
                bypass,
            )
        })
    }

    fn log(&self, level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Error => WSREP_LOG_ERROR,
            LogLevel::Warning => WSREP_LOG_WARN,
            LogLevel::Info => WSREP_LOG_INFO,
        };
        self.log_raw(level, message);
    }

    fn fatal(&self, message: &str) {
        // Galera aborts the server here. Exit instead: the cause is already in the log and
        // a core dump adds nothing; before the storage engines start (rsync, mariabackup,
        // trireme SST) there is nothing to flush either.
        self.log_raw(WSREP_LOG_FATAL, message);
        std::process::exit(1);
    }
}

/// The array `stats_get` returns, with the strings it points into.
pub(crate) struct StatsBlock {
    pub(crate) vars: Vec<wsrep_stats_var>,
    pub(crate) _strings: Vec<CString>,
}

// SAFETY: the raw pointers inside point into `_strings`, owned by the same block.
unsafe impl Send for StatsBlock {}
