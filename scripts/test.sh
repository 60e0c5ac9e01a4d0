#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and integration tests (including the
# CI-sized simulator sweep of 200 seeds with faults), then a wider simulator sweep.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "==> cargo test"
cargo test --workspace

echo "==> simulator sweep with faults (release)"
cargo run --release --quiet -p sim -- --seeds "${TRIREME_SIM_SEEDS:-0..500}"
