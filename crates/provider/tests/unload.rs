//! MariaDB unloads the provider (`dlclose`) at shutdown, while server threads that called
//! into it may live on. The library's allocator (jemalloc)
//! leaves a destructor on every thread that allocated through it, run when that thread
//! exits; the library must still be mapped then. Its own process, so that no other test
//! holds the library open.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)] // this test is all FFI
#![allow(clippy::disallowed_methods)] // a thread stands for a server thread

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::thread;

use common::library_path;
use wsrep_sys::*;

/// Whether `path` is mapped into this process.
fn mapped(path: &Path) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let name = path.to_str().unwrap();
    maps.lines().any(|line| line.ends_with(name))
}

type Loader = unsafe extern "C" fn(*mut wsrep_t) -> i32;

#[test]
fn a_thread_that_used_the_provider_exits_safely_after_it_is_unloaded() {
    let path = library_path();
    let library = unsafe { libloading::Library::new(&path) }.unwrap();
    let loader: Loader = *unsafe { library.get::<Loader>(b"wsrep_loader\0") }.unwrap();
    let (used_tx, used_rx) = mpsc::channel();
    let (unloaded_tx, unloaded_rx) = mpsc::channel::<()>();
    // Stands for a server thread: it calls into the provider (which allocates), and exits
    // only after the provider was unloaded.
    let server_thread = thread::spawn(move || {
        let mut table: Box<wsrep_t> = Box::new(unsafe { std::mem::zeroed() });
        assert_eq!(unsafe { loader(&mut *table) }, 0);
        let mut args: wsrep_init_args = unsafe { std::mem::zeroed() };
        args.node_name = c"unload-test".as_ptr();
        args.node_address = c"127.0.0.1".as_ptr();
        args.options = c"".as_ptr();
        args.proto_ver = 4;
        assert_eq!(
            unsafe { (table.init.unwrap())(&mut *table, &args) },
            WSREP_OK
        );
        unsafe { (table.free.unwrap())(&mut *table) };
        used_tx.send(()).unwrap();
        unloaded_rx.recv().unwrap();
    });
    used_rx.recv().unwrap();
    drop(library);
    assert!(
        mapped(&path),
        "dlclose unmapped the provider while a thread it allocated for still runs"
    );
    unloaded_tx.send(()).unwrap();
    // Without the library mapped, this thread's exit runs a destructor in unmapped memory
    // and the process dies here.
    server_thread.join().unwrap();
}
