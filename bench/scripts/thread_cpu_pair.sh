#!/usr/bin/env bash
# Where the CPU goes, by thread, for two providers side by side: two 3-node clusters on
# loopback (A on base port 27300, B on 28300), both up for the whole run, sysbench
# oltp_write_only (8 tables x 10,000 rows) with THREADS client threads spread over the
# nodes (or on node 1 with --node1), APPLIERS appliers per node (wsrep_slave_threads, 2 as in
# bench/run.sh), REPS alternating pairs of SECONDS each (A first in odd pairs, B first in even).
# Around every run it reads each mariadbd thread's CPU time, context switches and time
# runnable but waiting for a core from /proc/<pid>/task/*, and bench/harness/thread_cpu.py
# sums them per thread name (the provider's threads are named trireme-*) per committed
# transaction.
#
# Usage: bench/scripts/thread_cpu_pair.sh PROVIDER_A PROVIDER_B [--reps N] [--seconds N]
#                                         [--threads N] [--appliers N] [--node1]
#                                         [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
declare -A provider=([A]=$(realpath "$1") [B]=$(realpath "$2"))
shift 2
reps=4 seconds=20 threads=8 appliers=2 spread=yes out=""
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --appliers) appliers=$2; shift 2 ;;
    --node1) spread=no; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "thread_cpu_pair.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$reps$seconds$threads$appliers" in
  *[!0-9]*) echo "thread_cpu_pair.sh: --reps, --seconds, --threads and --appliers take whole" \
              "numbers" >&2
            exit 2 ;;
esac
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null

. bench/scripts/pair_clusters.sh
pair_clusters_up threads "wsrep_slave_threads=$appliers"

# One line per thread of the side's servers: node, tid, name, CPU ticks, voluntary and
# involuntary context switches, then nanoseconds on the CPU and waiting for one (schedstat:
# a runnable thread that waits for a core is time the 2 cores cannot give it).
snapshot() {
  local side=$1 n pid task
  for n in 1 2 3; do
    pid=$(cat "$work/$side/node$n/mysqld.pid")
    for task in /proc/"$pid"/task/*; do
      # A thread may end between the listing and the reads: skip it.
      {
        printf 'node%s %s %s ' "$n" "${task##*/}" "$(tr ' ' '_' < "$task/comm")"
        printf '%s ' "$(cut -d' ' -f14,15 "$task/stat")"
        awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{printf "%s %s ", v, n}' \
          "$task/status"
        cut -d' ' -f1,2 "$task/schedstat"
      } 2>/dev/null || true
    done
  done
}

for rep in $(seq 1 "$reps"); do
  order="A B"
  [ $((rep % 2)) = 0 ] && order="B A"
  for side in $order; do
    sockets="$work/$side/node1/mysqld.sock"
    [ "$spread" = yes ] && sockets+=",$work/$side/node2/mysqld.sock,$work/$side/node3/mysqld.sock"
    snapshot "$side" > "$out/$side-r$rep.before"
    timeout $((seconds + 120)) sysbench oltp_write_only "${common[@]}" --threads="$threads" \
      --mysql-socket="$sockets" --time="$seconds" --report-interval=0 \
      --mysql-ignore-errors=1213,1205 run > "$out/$side-r$rep.sysbench.txt"
    snapshot "$side" > "$out/$side-r$rep.after"
    echo "$side r$rep: $(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$out/$side-r$rep.sysbench.txt") tps"
  done
done
python3 bench/harness/thread_cpu.py "$out" | tee "$out/summary.txt"
echo "snapshots and summary in $out"
