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

echo "==> building the release binaries (libtrireme.so, trireme, the SST script, the arbitrator"
echo "    and the simulator)"
# One release build of them all: built one package at a time, each would resolve the
# dependencies' features its own way and compile them again.
cargo build --release --quiet -p provider -p cli -p sst -p arbitrator -p sim
# The tests that load the provider (dlopen and the real-MariaDB tests) take the optimised
# one: what a user runs, a faster test, and no second build of it (with debug settings, the
# library alone would compile every dependency again with its own features).
export TRIREME_TEST_PROVIDER="$PWD/target/release/libtrireme.so"
# Servers started with --sst-method trireme find wsrep_sst_trireme on their PATH, and
# `cluster up --arbitrator` finds trireme-arbitrator there.
export PATH="$PWD/target/release:$PATH"

echo "==> cargo test"
cargo test --workspace

# Every decoder's fuzz target again, with more inputs than the plain run above gives it.
PROPTEST_CASES="${TRIREME_FUZZ_CASES:-20000}" ./scripts/fuzz.sh

echo "==> simulator sweep with faults (release)"
./target/release/sim --seeds "${TRIREME_SIM_SEEDS:-0..500}"

# MariaDB's own galera tests, a subset covering every area (scripts/mtr-ci.list), on Trireme.
echo "==> MariaDB's wsrep test suites: the CI subset"
./scripts/mtr.sh --ci
