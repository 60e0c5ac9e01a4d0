//! Marks `libtrireme.so` never to be unmapped (`-z nodelete`): its allocator leaves a
//! destructor on every thread that allocated through it, and MariaDB unloads the provider
//! at shutdown while such threads may live on.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
