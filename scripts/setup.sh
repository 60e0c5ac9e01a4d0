#!/usr/bin/env bash
# Installs what Trireme needs on a fresh Debian machine, builds the workspace and starts a
# local 3-node MariaDB cluster on Trireme (in ./trireme-cluster, or $TRIREME_CLUSTER_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is not installed; install a stable Rust toolchain first (rustup)" >&2
  exit 1
fi

echo "==> building the workspace (release)"
cargo build --release --workspace

echo "==> starting a local 3-node MariaDB cluster on Trireme"
# A new cluster gets each node's metrics endpoint and status page; an existing one restarts
# as it was made.
metrics=()
[ -e "${TRIREME_CLUSTER_DIR:-trireme-cluster}/trireme-cluster.conf" ] || metrics=(--metrics)
exec target/release/trireme cluster up --nodes 3 "${metrics[@]}" "$@"
