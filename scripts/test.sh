#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and simulation tests (including a 200-seed
# simulator sweep with faults), real 3-node MariaDB clusters on Trireme and on Galera, then a
# wider simulator sweep, then a subset of MariaDB's own galera test suites (MTR).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

# A whole run builds everything once: incremental compilation's bookkeeping would only
# add to it (a developer's own `cargo` commands keep it).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "==> building everything once: libraries, libtrireme.so, the programs and the tests"
# One build with the test settings (opt-level 1, debug assertions on) serves every step: the
# unit tests, the real-MariaDB tests, the simulator sweep and MTR. `--all-targets` resolves
# the dependencies' features as `cargo test --workspace` does, so the test run that follows
# compiles nothing again; a separate release build would compile every dependency twice.
cargo build --workspace --all-targets --quiet
# The tests that load the provider (dlopen, the real-MariaDB tests and MTR) take this build,
# whose invariant checks stay on while real servers drive it.
export TRIREME_TEST_PROVIDER="$PWD/target/debug/libtrireme.so"
# Servers started with --sst-method trireme find wsrep_sst_trireme on their PATH, and
# `cluster up --arbitrator` finds trireme-arbitrator there.
export PATH="$PWD/target/debug:$PATH"
# The benchmark harness's own test runs bench/run.sh with this build too.
export TRIREME_CLI="$PWD/target/debug/trireme"

echo "==> cargo test"
cargo test --workspace

# Every decoder's fuzz target again, with more inputs than the plain run above gives it.
PROPTEST_CASES="${TRIREME_FUZZ_CASES:-20000}" ./scripts/fuzz.sh

echo "==> simulator sweep with faults"
./target/debug/sim --seeds "${TRIREME_SIM_SEEDS:-0..500}"

# MariaDB's own galera tests, a subset covering every area (scripts/mtr-ci.list), on Trireme.
echo "==> MariaDB's wsrep test suites: the CI subset"
./scripts/mtr.sh --ci
