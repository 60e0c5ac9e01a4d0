//! What the tests that load `libtrireme.so` share.

use std::path::PathBuf;

/// The library `cargo build -p provider` left next to the test binaries' directory.
pub(crate) fn library_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let path = deps.parent().unwrap().join("libtrireme.so");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p provider`",
        path.display()
    );
    path
}
