#!/usr/bin/env bash
# Installs what Trireme needs on a fresh Debian machine, builds the workspace and starts a
# local 3-node MariaDB cluster on Trireme.
#
# Set TRIREME_SKIP_APT=1 to skip the package installation (everything already present).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

if [ "${TRIREME_SKIP_APT:-0}" != 1 ]; then
  log "installing Debian packages: MariaDB 10.11, mariadb-backup, Galera 4 (for side-by-side benchmarks), sysbench"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # The packaged service is not used: the cluster runs its own mariadbd processes.
  $sudo_cmd apt-get install -y -qq --no-install-recommends \
    mariadb-server mariadb-client mariadb-backup galera-4 sysbench rsync socat >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is not installed; install a stable Rust toolchain first (rustup)" >&2
  exit 1
fi

log "building the workspace (release)"
cargo build --release --workspace

log "starting a local 3-node MariaDB cluster on Trireme"
if [ ! -f target/release/libtrireme.so ]; then
  cat >&2 <<'MSG'
setup: cannot start the cluster yet: the MariaDB provider library (target/release/libtrireme.so)
is not part of this build. The core engine (ordering, certification, monitors, simulator) is
built and tested; the wsrep provider and `trireme cluster up` arrive with the provider issue.
Run ./scripts/test.sh to exercise what exists.
MSG
  exit 3
fi
exec target/release/trireme cluster up
