#!/usr/bin/env bash
# Runs the decoders' fuzz targets (the proptest tests named fuzz_*, beside each decoder) with
# more cases than a plain `cargo test` gives them, for a CI step.
#
#   PROPTEST_CASES   cases per target (default 20000; `cargo test` alone runs each file's
#                    FUZZ_CASES, 1000 to 10000)
#   FUZZ_CRATES      the crates to run (default: every crate of the workspace, in one run
#                    that reuses the workspace's test build)
#
# A failure prints proptest's minimal failing input and leaves it in the crate's
# proptest-regressions/ directory, where later runs try it first.
set -euo pipefail
cd "$(dirname "$0")/.."

export PROPTEST_CASES="${PROPTEST_CASES:-20000}"

if [ -z "${FUZZ_CRATES:-}" ]; then
    echo "==> fuzz targets of every crate, $PROPTEST_CASES cases each"
    start=$SECONDS
    cargo test --quiet --workspace --lib -- fuzz_
    echo "    all fuzz targets: $((SECONDS - start)) s"
    exit 0
fi
for crate in $FUZZ_CRATES; do
    echo "==> fuzz targets of $crate, $PROPTEST_CASES cases each"
    start=$SECONDS
    cargo test --quiet -p "$crate" --lib -- fuzz_
    echo "    $crate: $((SECONDS - start)) s"
done
