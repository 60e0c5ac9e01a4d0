//! `libtrireme.so`: the wsrep v26 provider library MariaDB loads with `wsrep_provider=`.
//!
//! This crate only translates: C arguments into Rust values for [`replicator::Replicator`],
//! and the replicator's [`replicator::Application`] calls into MariaDB's callbacks. Every
//! entry point checks its pointers and runs inside `catch_unwind`: a panic never crosses
//! into `mariadbd`; it poisons the instance, returns `WSREP_FATAL`, and every later call on
//! that instance is refused.
//!
//! Exported symbols: `wsrep_loader`, `wsrep_interface_version` (a pointer to `"26"`), and
//! the allowlist service pair `wsrep_init_allowlist_service_v1` /
//! `wsrep_deinit_allowlist_service_v1`, without which MariaDB 10.11 refuses to start.

#![allow(unsafe_code)]
#![allow(clippy::disallowed_methods)] // The shell reads the clock for its random seed.

mod allocator;
mod app;
mod entry;
mod history;
mod log_bridge;
mod monitoring;
mod security;
mod status;
mod status_page;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use options::ProviderOptions;
use replicator::Replicator;
use wsrep_sys::*;

pub use entry::fill_function_table;

/// The library's own allocations (the server keeps its allocator): see `allocator.rs`.
#[global_allocator]
static PROVIDER_ALLOCATOR: allocator::ProviderAllocator = allocator::ProviderAllocator;

/// The provider's name, version and vendor, as MariaDB shows them.
pub const PROVIDER_NAME: &CStr = c"Trireme";
/// The provider version.
pub const PROVIDER_VERSION: &CStr = c"0.1.0";
/// The provider vendor.
pub const PROVIDER_VENDOR: &CStr = c"Trireme";

/// A pointer that may live in a `static`: the string it points to is immutable.
#[repr(transparent)]
pub struct StaticCStr(*const c_char);

// SAFETY: the pointer refers to a string literal that is never written.
unsafe impl Sync for StaticCStr {}

/// `wsrep_interface_version`: a data symbol whose value points at `"26"`.
#[no_mangle]
#[used]
pub static wsrep_interface_version: StaticCStr = StaticCStr(c"26".as_ptr());

/// One loaded provider instance (`wsrep_t::ctx`).
pub(crate) struct Instance {
    /// Set after a panic or a fatal error: every later call is refused.
    poisoned: AtomicBool,
    pub(crate) options: Mutex<ProviderOptions>,
    pub(crate) replicator: Mutex<Option<Arc<Replicator>>>,
    pub(crate) app: Mutex<Option<Arc<app::ServerApp>>>,
    /// Arrays handed out by `stats_get`, until `stats_free`.
    pub(crate) stats: Mutex<HashMap<usize, app::StatsBlock>>,
    /// Why `wsrep_node_address` was refused at `init`; `connect` fails with it.
    pub(crate) refused_node_address: Mutex<Option<String>>,
    /// The metrics endpoint, when `metrics.listen_addr` asks for one.
    pub(crate) metrics: Mutex<Option<metrics::MetricsServer>>,
}

impl Instance {
    fn new() -> Instance {
        Instance {
            poisoned: AtomicBool::new(false),
            options: Mutex::new(ProviderOptions::default()),
            replicator: Mutex::new(None),
            app: Mutex::new(None),
            stats: Mutex::new(HashMap::new()),
            refused_node_address: Mutex::new(None),
            metrics: Mutex::new(None),
        }
    }

    pub(crate) fn replicator(&self) -> Option<Arc<Replicator>> {
        lock(&self.replicator).clone()
    }

    pub(crate) fn log(&self, level: wsrep_log_level_t, message: &str) {
        match lock(&self.app).as_ref() {
            Some(app) => app.log_raw(level, message),
            None => eprintln!("WSREP (Trireme): {message}"),
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `body` on the instance behind `wsrep`, turning a null handle, a freed or poisoned
/// instance, and a panic into `failure` (a panic also poisons the instance).
pub(crate) fn with_instance<T>(
    wsrep: *mut wsrep_t,
    failure: T,
    body: impl FnOnce(&Instance) -> T,
) -> T {
    if wsrep.is_null() {
        return failure;
    }
    // SAFETY: MariaDB passes the wsrep_t it allocated and handed to wsrep_loader; it stays
    // valid until after the last call. `ctx` is null or a leaked Box<Instance> of ours.
    let ctx = unsafe { (*wsrep).ctx };
    if ctx.is_null() {
        return failure;
    }
    // SAFETY: ctx came from Box::into_raw in init and is only freed by `free`, which the
    // server calls after every other call has returned.
    let instance = unsafe { &*(ctx as *const Instance) };
    if instance.poisoned.load(Ordering::Acquire) {
        return failure;
    }
    match catch_unwind(AssertUnwindSafe(|| body(instance))) {
        Ok(value) => value,
        Err(panic) => {
            instance.poisoned.store(true, Ordering::Release);
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "unknown panic".to_owned());
            let message = format!("internal error, provider disabled: {what}");
            let _ = catch_unwind(AssertUnwindSafe(|| instance.log(WSREP_LOG_FATAL, &message)));
            failure
        }
    }
}

/// Reads a C string argument; `None` for null or invalid UTF-8.
pub(crate) fn c_str<'a>(pointer: *const c_char) -> Option<&'a str> {
    if pointer.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated string that outlives the call.
    unsafe { CStr::from_ptr(pointer) }.to_str().ok()
}

/// Reads a buffer argument; empty for null.
pub(crate) fn buf<'a>(buffer: *const wsrep_buf_t) -> &'a [u8] {
    if buffer.is_null() {
        return &[];
    }
    // SAFETY: a non-null wsrep_buf_t is valid for the call.
    let buffer = unsafe { &*buffer };
    if buffer.ptr.is_null() || buffer.len == 0 {
        return &[];
    }
    // SAFETY: ptr/len describe memory the caller owns for the duration of the call.
    unsafe { std::slice::from_raw_parts(buffer.ptr as *const u8, buffer.len) }
}

/// Reads an array of buffers.
pub(crate) fn bufs<'a>(buffers: *const wsrep_buf_t, count: usize) -> Vec<&'a [u8]> {
    if buffers.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller passes `count` consecutive buffers.
    let all = unsafe { std::slice::from_raw_parts(buffers, count) };
    all.iter().map(|b| buf(b)).collect()
}

/// A string for C that C frees with `free()` (what `options_get` returns).
pub(crate) fn malloc_c_string(text: &str) -> *mut c_char {
    extern "C" {
        fn malloc(size: usize) -> *mut c_void;
    }
    let bytes = text.as_bytes();
    // SAFETY: malloc of len+1 bytes; null is checked.
    let pointer = unsafe { malloc(bytes.len() + 1) } as *mut u8;
    if pointer.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the allocation holds len+1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), pointer, bytes.len());
        *pointer.add(bytes.len()) = 0;
    }
    pointer as *mut c_char
}

/// Frees memory the application allocated with `malloc` (the SST request).
pub(crate) fn c_free(pointer: *mut c_void) {
    extern "C" {
        fn free(pointer: *mut c_void);
    }
    if !pointer.is_null() {
        // SAFETY: the pointer came from the application's malloc and is freed once.
        unsafe { free(pointer) }
    }
}

/// A C string for names and values handed to the server.
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).expect("NULs were replaced")
}

/// Fills the function table. MariaDB calls this right after `dlopen`.
///
/// # Safety
/// `wsrep` must point to a writable `wsrep_t`.
#[no_mangle]
pub unsafe extern "C" fn wsrep_loader(wsrep: *mut wsrep_t) -> c_int {
    if wsrep.is_null() {
        return 22; // EINVAL
    }
    let filled = catch_unwind(|| {
        // SAFETY: checked non-null; the server owns a 360-byte wsrep_t for us.
        unsafe { fill_function_table(&mut *wsrep) };
    });
    if filled.is_ok() {
        0
    } else {
        22
    }
}

/// Keeps the allowlist service the server offers. Trireme lets every peer in for now, so
/// it only records that the service was offered.
///
/// # Safety
/// `service` may be null or point to the server's service struct.
#[no_mangle]
pub unsafe extern "C" fn wsrep_init_allowlist_service_v1(
    service: *mut wsrep_allowlist_service_v1_t,
) -> c_int {
    ALLOWLIST_OFFERED.store(!service.is_null(), Ordering::Release);
    0
}

/// Forgets the allowlist service.
#[no_mangle]
pub extern "C" fn wsrep_deinit_allowlist_service_v1() {
    ALLOWLIST_OFFERED.store(false, Ordering::Release);
}

static ALLOWLIST_OFFERED: AtomicBool = AtomicBool::new(false);

/// Creates the instance behind a freshly loaded `wsrep_t`.
pub(crate) fn new_instance() -> *mut c_void {
    Box::into_raw(Box::new(Instance::new())) as *mut c_void
}

/// Destroys the instance; the pointer must not be used afterwards.
pub(crate) fn drop_instance(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: ctx came from new_instance and the caller cleared every other reference.
    let instance = unsafe { Box::from_raw(ctx as *mut Instance) };
    // First, so that no request reads the replicator while it shuts down.
    drop(lock(&instance.metrics).take());
    let replicator = lock(&instance.replicator).take();
    if let Some(replicator) = replicator {
        replicator.shutdown();
    }
}
