#!/usr/bin/env bash
# Profiles Trireme's apply and commit pipeline: a 3-node cluster on loopback with
# TRIREME_SEQNO_TRACE_DIR set, sysbench oltp_write_only (8 tables x 10,000 rows) for SECONDS
# with THREADS client threads spread over the nodes (or on node 1 with --node1) and APPLIERS
# appliers per node (wsrep_slave_threads, 2 as in bench/run.sh), then
# `cluster down` (each node writes its per-seqno timeline as it disconnects) and
# bench/harness/seqno_trace.py's summary of the three timelines.
#
# Usage: bench/scripts/seqno_trace.sh [--provider PATH] [--seconds N] [--threads N]
#                                     [--appliers N] [--node1] [--out DIR]
# SERVER_OPTIONS in the environment adds [mysqld] settings to every node, as
# `trireme cluster up --server-options` takes them (e.g. "innodb_flush_log_at_trx_commit=2").
set -euo pipefail
cd "$(dirname "$0")/../.."

provider=$PWD/target/release/libtrireme.so
seconds=20 threads=8 appliers=2 spread=yes out=""
while [ $# -gt 0 ]; do
  case $1 in
    --provider) provider=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --appliers) appliers=$2; shift 2 ;;
    --node1) spread=no; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "seqno_trace.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$seconds$threads$appliers" in
  *[!0-9]*) echo "seqno_trace.sh: --seconds, --threads and --appliers take whole numbers" >&2
            exit 2 ;;
esac
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null

trireme=target/release/trireme
[ -x "$trireme" ] || cargo build --release --quiet -p cli
work=$(mktemp -d /tmp/trireme-trace-XXXXXX)
chmod 755 "$work"
out=${out:-$work/trace}
mkdir -p "$out"
# The server runs as an unprivileged user and writes the timelines itself.
chmod 777 "$out"
cluster=$work/c
cleanup() {
  "$trireme" cluster down --dir "$cluster" >/dev/null 2>&1 || true
  rm -rf "$cluster"
  # Gone unless the timelines were left in it (no --out).
  rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT

TRIREME_SEQNO_TRACE_DIR=$out timeout 600 "$trireme" cluster up --nodes 3 --dir "$cluster" \
  --provider "$provider" --base-port 26300 \
  --server-options "wsrep_slave_threads=$appliers${SERVER_OPTIONS:+; $SERVER_OPTIONS}" >/dev/null
"$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$cluster" >/dev/null
echo "appliers per node: $("$trireme" cluster sql 1 "SELECT @@wsrep_slave_threads" --dir "$cluster")"
common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=8 --table-size=10000)
timeout 600 sysbench oltp_write_only "${common[@]}" --threads=4 \
  --mysql-socket="$cluster/node1/mysqld.sock" prepare >/dev/null
sockets=$cluster/node1/mysqld.sock
if [ "$spread" = yes ]; then
  sockets+=",$cluster/node2/mysqld.sock,$cluster/node3/mysqld.sock"
fi
timeout $((seconds + 120)) sysbench oltp_write_only "${common[@]}" --threads="$threads" \
  --mysql-socket="$sockets" --time="$seconds" --report-interval=0 \
  --mysql-ignore-errors=1213,1205 run > "$out/sysbench.txt"
grep -E 'transactions:' "$out/sysbench.txt"
timeout 300 "$trireme" cluster down --dir "$cluster" >/dev/null
python3 bench/harness/seqno_trace.py "$out"/*.seqnos.csv | tee "$out/summary.txt"
echo "timelines and summary in $out"
