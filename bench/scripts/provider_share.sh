#!/usr/bin/env bash
# What the provider itself costs on the write path, and so the most any provider could give
# on this machine. Two 3-node clusters on loopback (A on base port 27300, B on 28300), both
# up for the whole run; sysbench oltp_write_only (8 tables x 10,000 rows) with THREADS
# client threads spread over the nodes, REPS alternating pairs of SECONDS each. In the
# middle of every run (the first and last 5 s left out) `perf record -a -e cpu-clock`
# samples every core, idle or not, and bench/harness/provider_share.py splits the samples:
# idle, the provider (its own threads, named trireme-*, whatever code they run, and its
# library's code on the server's threads), and everything else (the server, sysbench, the
# kernel on their behalf).
#
# Per side, the most a provider that cost nothing could reach: tps x (all cores) /
# (busy - provider), every core kept busy with the same work per transaction. Galera's own
# threads are not named apart, so for Galera only its library's code counts as its share.
#
# Usage: bench/scripts/provider_share.sh PROVIDER_A PROVIDER_B [--reps N] [--seconds N]
#                                        [--threads N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

[ $# -ge 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
declare -A provider=([A]=$(realpath "$1") [B]=$(realpath "$2"))
shift 2
reps=2 seconds=30 threads=8 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "provider_share.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$reps$seconds$threads" in
  *[!0-9]*) echo "provider_share.sh: --reps, --seconds and --threads take whole numbers" >&2
            exit 2 ;;
esac
(( seconds >= 15 )) || { echo "provider_share.sh: --seconds must be 15 or more" >&2; exit 2; }
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null
command -v perf >/dev/null || { echo "provider_share.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }

. bench/scripts/pair_clusters.sh
pair_clusters_up share

window=$(( seconds - 10 ))
for rep in $(seq 1 "$reps"); do
  order="A B"
  [ $((rep % 2)) = 0 ] && order="B A"
  for side in $order; do
    run=$out/$side-r$rep
    sockets="$work/$side/node1/mysqld.sock,$work/$side/node2/mysqld.sock,$work/$side/node3/mysqld.sock"
    timeout $((seconds + 120)) sysbench oltp_write_only "${common[@]}" --threads="$threads" \
      --mysql-socket="$sockets" --time="$seconds" --report-interval=0 \
      --mysql-ignore-errors=1213,1205 run > "$run.sysbench.txt" &
    load=$!
    sleep 5
    timeout $((window + 60)) perf record -a -e cpu-clock -F 499 -o "$run.perf.data" -- sleep "$window" \
      > "$run.perf.log" 2>&1
    wait "$load"
    perf report -i "$run.perf.data" --sort comm,dso --stdio -F overhead,sample,comm,dso \
      > "$run.report.txt" 2>/dev/null
    # The provider's hottest functions, by thread, for where to look next.
    perf report -i "$run.perf.data" --sort comm,dso,sym --stdio --percent-limit 0.3 \
      > "$run.symbols.txt" 2>/dev/null
    rm -f "$run.perf.data"
    echo "$side r$rep: $(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$run.sysbench.txt") tps"
  done
done
python3 bench/harness/provider_share.py "$out" "$(nproc)" \
  "$(basename "${provider[A]}")" "$(basename "${provider[B]}")" | tee "$out/summary.txt"
echo "reports and summary in $out"
