//! Loads `libtrireme.so` the way MariaDB does (`dlopen`, `wsrep_loader`) and drives the
//! C ABI with bad input: every call must fail with a clear status, never crash.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)] // this test is all FFI

mod common;

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use common::library_path;
use wsrep_sys::*;

struct Loaded {
    _library: libloading::Library,
    table: Box<wsrep_t>,
}

fn load() -> Loaded {
    let library = unsafe { libloading::Library::new(library_path()) }.unwrap();
    let version: libloading::Symbol<*const *const c_char> =
        unsafe { library.get(b"wsrep_interface_version\0") }.unwrap();
    assert_eq!(
        unsafe { CStr::from_ptr(**version) },
        c"26",
        "a pointer to \"26\""
    );
    for symbol in [
        &b"wsrep_init_allowlist_service_v1\0"[..],
        b"wsrep_deinit_allowlist_service_v1\0",
    ] {
        let found: Result<libloading::Symbol<*const c_void>, _> = unsafe { library.get(symbol) };
        assert!(
            found.is_ok(),
            "the allowlist service symbols MariaDB 10.11 requires"
        );
    }
    let loader: libloading::Symbol<unsafe extern "C" fn(*mut wsrep_t) -> i32> =
        unsafe { library.get(b"wsrep_loader\0") }.unwrap();
    let mut table: Box<wsrep_t> = Box::new(unsafe { std::mem::zeroed() });
    assert_eq!(unsafe { loader(&mut *table) }, 0);
    Loaded {
        _library: library,
        table,
    }
}

fn init_args(options: &CStr) -> wsrep_init_args {
    let mut args: wsrep_init_args = unsafe { std::mem::zeroed() };
    args.node_name = c"dlopen-test".as_ptr();
    args.node_address = c"127.0.0.1".as_ptr();
    args.options = options.as_ptr();
    args.proto_ver = 4;
    args
}

#[test]
fn every_slot_is_filled_and_free_is_idempotent() {
    let mut loaded = load();
    let table = &mut *loaded.table;
    assert_eq!(unsafe { CStr::from_ptr(table.version) }, c"26");
    assert_eq!(unsafe { CStr::from_ptr(table.provider_name) }, c"Trireme");
    assert!(table.init.is_some() && table.certify.is_some() && table.free.is_some());
    assert!(table.ctx.is_null(), "no instance before init");
    let free = table.free.unwrap();
    unsafe {
        free(table);
        free(table);
    }
    // A call on a freed (or never initialised) instance is refused, not a crash.
    let connect = table.connect.unwrap();
    let status = unsafe {
        connect(
            table,
            c"c".as_ptr(),
            c"gcomm://".as_ptr(),
            c"".as_ptr(),
            true,
        )
    };
    assert_ne!(status, WSREP_OK);
    let mut gtid: wsrep_gtid_t = unsafe { std::mem::zeroed() };
    let last = table.last_committed_id.unwrap();
    assert_eq!(
        unsafe { last(table, &mut gtid) },
        WSREP_OK,
        "last_committed_id never fails"
    );
    assert_eq!(gtid.seqno, WSREP_SEQNO_UNDEFINED);
    assert_eq!(
        unsafe { (table.init.unwrap())(ptr::null_mut(), ptr::null()) },
        WSREP_NODE_FAIL
    );
}

#[test]
fn bad_options_are_refused_at_init() {
    for options in [c"gcs.fc_factor=2", c"no_equals_sign", c"gcache.sise=1G"] {
        let mut loaded = load();
        let table = &mut *loaded.table;
        let args = init_args(options);
        let status = unsafe { (table.init.unwrap())(table, &args) };
        assert_eq!(status, WSREP_NODE_FAIL, "{options:?} must be refused");
        unsafe { (table.free.unwrap())(table) };
    }
}

#[test]
fn a_node_address_that_does_not_parse_is_refused_at_connect() {
    // MariaDB loads the provider without connecting when `SET GLOBAL wsrep_on=ON` turns
    // wsrep on at runtime (and logs nothing of ours until then): the load must succeed,
    // and the address is refused where it would be used.
    let mut loaded = load();
    let table = &mut *loaded.table;
    let mut args = init_args(c"");
    args.node_address = c"127.0.0.1:@OPT.port".as_ptr();
    assert_eq!(unsafe { (table.init.unwrap())(table, &args) }, WSREP_OK);
    let connect = table.connect.unwrap();
    let status = unsafe {
        connect(
            table,
            c"c".as_ptr(),
            c"gcomm://".as_ptr(),
            c"".as_ptr(),
            true,
        )
    };
    assert_eq!(status, WSREP_NODE_FAIL, "a port that is no number");
    unsafe { (table.free.unwrap())(table) };
}

#[test]
fn a_second_connect_is_refused_and_runtime_options_are_checked() {
    let mut loaded = load();
    let table = &mut *loaded.table;
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ist = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The node keeps grastate.dat and its gcache in base_dir: a directory of its own, not
    // the crate the test runs in.
    let base_dir = std::env::temp_dir().join(format!("trireme-dlopen-{}", std::process::id()));
    std::fs::create_dir_all(&base_dir).unwrap();
    let options = format!(
        "base_dir={}; gmcast.listen_addr=tcp://127.0.0.1:{listen}; \
         ist.recv_addr=127.0.0.1:{ist}\0",
        base_dir.display()
    );
    let args = init_args(CStr::from_bytes_with_nul(options.as_bytes()).unwrap());
    assert_eq!(unsafe { (table.init.unwrap())(table, &args) }, WSREP_OK);
    let connect = table.connect.unwrap();
    let first = unsafe {
        connect(
            table,
            c"c".as_ptr(),
            c"gcomm://".as_ptr(),
            c"".as_ptr(),
            true,
        )
    };
    assert_eq!(first, WSREP_OK);
    let second = unsafe {
        connect(
            table,
            c"c".as_ptr(),
            c"gcomm://".as_ptr(),
            c"".as_ptr(),
            true,
        )
    };
    assert_eq!(second, WSREP_NODE_FAIL, "a second connect is an error");
    let set = table.options_set.unwrap();
    assert_eq!(unsafe { set(table, c"gcs.fc_limit=64".as_ptr()) }, WSREP_OK);
    assert_eq!(
        unsafe { set(table, c"gcache.size=1G".as_ptr()) },
        WSREP_NODE_FAIL,
        "not at runtime"
    );
    assert_eq!(
        unsafe { set(table, c"gcs.fc_limit=-3".as_ptr()) },
        WSREP_NODE_FAIL
    );
    let listing = unsafe { (table.options_get.unwrap())(table) };
    let text = unsafe { CStr::from_ptr(listing) }
        .to_string_lossy()
        .into_owned();
    assert!(text.contains("gcs.fc_limit = 64"), "{text}");
    extern "C" {
        fn free(pointer: *mut c_void);
    }
    unsafe { free(listing as *mut c_void) };
    let stats = unsafe { (table.stats_get.unwrap())(table) };
    assert!(!stats.is_null());
    let mut names = Vec::new();
    let mut entry = stats;
    while !unsafe { (*entry).name }.is_null() {
        names.push(
            unsafe { CStr::from_ptr((*entry).name) }
                .to_string_lossy()
                .into_owned(),
        );
        entry = unsafe { entry.add(1) };
    }
    assert!(
        names.iter().any(|n| n == "local_state_comment"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "last_committed"));
    unsafe { (table.stats_free.unwrap())(table, stats) };
    assert_eq!(unsafe { (table.disconnect.unwrap())(table) }, WSREP_OK);
    let free_fn = table.free.unwrap();
    unsafe {
        free_fn(table);
        free_fn(table);
    }
    std::fs::remove_dir_all(&base_dir).unwrap();
}
