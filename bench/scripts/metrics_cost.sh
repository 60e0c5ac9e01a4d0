#!/usr/bin/env bash
# The cost of the metrics endpoint: two 3-node Trireme clusters, one without it and one with
# `metrics.listen_addr` on every node (`cluster up --metrics`), each node's /metrics and
# /status.json scraped once a second meanwhile. sysbench oltp_write_only on node 1 runs on
# them alternately, REPS times each; prints the median tps of each and their ratio (the
# issue's bound: at most 2% lost), with the raw figures in $TRIREME_BENCH_OUT/metrics_cost.tsv.
#
#   bench/scripts/metrics_cost.sh [seconds=20] [reps=3] [threads=8]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}; reps=${2:-3}; threads=${3:-8}
trireme=$PWD/target/release/trireme
cargo build --release --quiet -p provider -p cli
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/metrics_cost.tsv
printf 'side\trep\ttps\n' > "$tsv"
work=$(mktemp -d /tmp/trireme-metrics-cost.XXXXXX)
chmod 755 "$work"
scraper=""
finish() {
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null || true
  for side in off on; do
    [ -d "$work/$side" ] && timeout 120 "$trireme" cluster down --dir "$work/$side" \
      >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap finish EXIT

common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=10000
        --threads="$threads")
"$trireme" cluster up --dir "$work/off" --base-port 24300 >/dev/null
"$trireme" cluster up --dir "$work/on" --base-port 25300 --metrics >/dev/null
for side in off on; do
  "$trireme" cluster sql --dir "$work/$side" 1 "CREATE DATABASE sbtest" >/dev/null
  sysbench oltp_write_only "${common[@]}" --mysql-socket="$work/$side/node1/mysqld.sock" \
    prepare >/dev/null
done
# Every node of the cluster with the endpoint, scraped as Prometheus and the page would:
# once a second, bounded by the run's length.
(
  end=$((SECONDS + 2 * reps * (seconds + 5) + 60))
  while [ "$SECONDS" -lt "$end" ]; do
    for n in 1 2 3; do
      port=$((25300 + 100 + 10 * n + 3))
      curl -sf -m 2 "http://127.0.0.1:$port/metrics" >/dev/null || true
      curl -sf -m 2 "http://127.0.0.1:$port/status.json" >/dev/null || true
    done
    sleep 1
  done
) &
scraper=$!
for rep in $(seq 1 "$reps"); do
  for side in off on; do
    tps=$(sysbench oltp_write_only "${common[@]}" --mysql-socket="$work/$side/node1/mysqld.sock" \
      --time="$seconds" --report-interval=0 --mysql-ignore-errors=1213,1205 run \
      | awk '/transactions:/ {gsub(/[()]/, "", $3); print $3}')
    printf '%s\t%s\t%s\n' "$side" "$rep" "$tps" >> "$tsv"
    echo "metrics $side, rep $rep: $tps tps"
  done
done
median() { awk -v s="$1" '$1 == s {print $3}' "$tsv" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
off=$(median off); on=$(median on)
echo "median tps without the endpoint $off, with it scraped every second $on:" \
  "ratio $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}')"
