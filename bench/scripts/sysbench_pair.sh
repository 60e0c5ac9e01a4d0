#!/usr/bin/env bash
# One side-by-side sysbench measurement: the same 3-node MariaDB cluster on Trireme and on
# Galera, oltp_write_only with the load spread over all three nodes. Prints tps and p95 per
# provider and checks that the nodes end equal.
#
#   bench/scripts/sysbench_pair.sh [seconds=30] [threads=8] [tables=8] [rows=10000]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}; threads=${2:-8}; tables=${3:-8}; rows=${4:-10000}
trireme=target/release/trireme
cargo build --release --quiet -p provider -p cli
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"

run_one() {
  local name=$1 provider=$2 dir
  dir=$(mktemp -d /tmp/trireme-bench-XXXXXX)
  chmod 755 "$dir"
  "$trireme" cluster up --nodes 3 --dir "$dir/c" --provider "$provider" >/dev/null
  local sockets="$dir/c/node1/mysqld.sock,$dir/c/node2/mysqld.sock,$dir/c/node3/mysqld.sock"
  "$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$dir/c" >/dev/null
  local common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables="$tables"
                --table-size="$rows" --threads="$threads")
  sysbench oltp_write_only "${common[@]}" --mysql-socket="$dir/c/node1/mysqld.sock" \
    prepare >/dev/null
  sysbench oltp_write_only "${common[@]}" --mysql-socket="$sockets" --time="$seconds" \
    --report-interval=0 --mysql-ignore-errors=1213,1205 --percentile=95 run \
    > "$out/sysbench-$name.txt"
  # All tables on all nodes, at rest (every node Synced at one unchanging seqno).
  local tables_list="" t equal=no
  for t in $(seq 1 "$tables"); do tables_list+="sbtest.sbtest$t,"; done
  if "$trireme" cluster compare --dir "$dir/c" --tables "${tables_list%,}" \
      > "$out/compare-$name.txt" 2>&1; then
    equal=yes
  else
    cat "$out/compare-$name.txt" >&2
  fi
  "$trireme" cluster down --dir "$dir/c" >/dev/null
  rm -rf "$dir"
  local tps p95 errors
  tps=$(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$out/sysbench-$name.txt")
  p95=$(grep -oP '95th percentile:\s+\K[0-9.]+' "$out/sysbench-$name.txt")
  errors=$(grep -oP 'ignored errors:\s+\K\d+' "$out/sysbench-$name.txt")
  printf '%-8s tps %8s  p95_ms %6s  deadlocks %5s  checksums_equal %s\n' \
    "$name" "$tps" "$p95" "$errors" "$equal"
}

run_one trireme "$PWD/target/release/libtrireme.so"
run_one galera /usr/lib/galera/libgalera_smm.so
