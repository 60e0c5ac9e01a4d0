//! What the tests that load `libtrireme.so` share.

use std::path::PathBuf;

/// The library under test: `TRIREME_TEST_PROVIDER` if set (scripts/test.sh sets it to the
/// build every test of the run loads, the real-MariaDB ones and MTR too), else the one
/// `cargo build -p provider` left next to the test binaries' directory.
pub(crate) fn library_path() -> PathBuf {
    let path = std::env::var_os("TRIREME_TEST_PROVIDER").map_or_else(
        || {
            let exe = std::env::current_exe().unwrap();
            let deps = exe.parent().unwrap();
            deps.parent().unwrap().join("libtrireme.so")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p provider`, or point TRIREME_TEST_PROVIDER at a \
         build of it",
        path.display()
    );
    path
}
