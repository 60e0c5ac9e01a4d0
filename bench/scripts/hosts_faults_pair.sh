#!/usr/bin/env bash
# Faults across hosts, side by side: the same 3-host cluster (`trireme cluster up --hosts`:
# one network namespace per node on a bridge, a DBA's my.cnf) on Trireme and on Galera.
# sysbench oltp_write_only runs from the machine across the bridge against the hosts that
# stay up, with a report every second, while one fault hits:
#   partition         node 3's link is cut for 25 s
#   partition-leader  the Raft leader's link is cut for 25 s (Galera has none: node 3)
#   frozen            node 3 is stopped (SIGSTOP) for 10 s
#   failover          node 3 is killed (SIGKILL) and started again at once
# and on 2 data hosts plus an arbitrator on a third (`--arbitrator`: trireme-arbitrator, or
# garbd for Galera, with the same settings file):
#   arbitrator-failover         data node 2 is killed and started again at once
#   arbitrator-failover-leader  the data node that leads Raft is killed (Galera: node 2)
#   arbitrator-lost             the arbitrator is killed and started again at once
# Figures per run: seconds at 0 tps, the worst per-second p99 latency during the fault,
# and the seconds from the end of the fault (heal, SIGCONT, restart) until the node is
# Synced in a cluster of 3 again with everything the others had committed by then.
#
#   bench/scripts/hosts_faults_pair.sh [kinds="partition partition-leader frozen failover"]
#   (any of the arbitrator kinds may be named too)
#
# Provider A is Trireme and B Galera unless FAULTS_PROVIDER_A / FAULTS_PROVIDER_B say
# otherwise. Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/hosts_faults.tsv.
# Needs root (namespaces); uses only the namespaces tri1..3 and the bridges tribr0/1.
set -euo pipefail
cd "$(dirname "$0")/../.."
kinds=${1:-"partition partition-leader frozen failover"}
trireme=$PWD/target/release/trireme
cargo build --release --quiet -p provider -p cli -p sst -p arbitrator
export PATH=$PWD/target/release:$PATH   # cluster up --arbitrator finds trireme-arbitrator
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/hosts_faults.tsv
printf 'provider\tscenario\tnode\tzero_tps_seconds\tp99_ms_worst_in_fault\tseconds_back_to_synced\ttransactions\n' >"$tsv"
provider_a=${FAULTS_PROVIDER_A:-$PWD/target/release/libtrireme.so}
provider_b=${FAULTS_PROVIDER_B:-/usr/lib/galera/libgalera_smm.so}
total=60   # seconds of load per run
at=15      # the fault starts this many seconds into the load
cut_s=25
freeze_s=10
work=$(mktemp -d /tmp/trireme-hosts-bench.XXXXXX)
chmod 755 "$work"   # the servers run as the unprivileged user trireme
dir=""

cleanup() {
  [ -n "$dir" ] && "$trireme" cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

status() { # node var
  timeout 5 mariadb --no-defaults -S "$dir/node$1/mysqld.sock" -uroot -N -B \
    -e "SHOW STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'
}

# Node $1 is Synced in a cluster of three and has committed up to seqno $2 (what the
# others had committed when the fault ended: a node just thawed still shows its old state).
back_in_three() { # node seqno
  local committed
  committed=$(status "$1" wsrep_last_committed)
  [ "$(status "$1" wsrep_local_state_comment)" = Synced ] \
    && [ "$(status "$1" wsrep_cluster_size)" = 3 ] && [ "${committed:-0}" -ge "$2" ]
}

# Seconds (to 0.1) since $1, a time in nanoseconds.
seconds_since() {
  awk -v ns=$(( $(date +%s%N) - $1 )) 'BEGIN { printf "%.1f", ns / 1e9 }'
}

# Seconds (to 0.1) until node $1 is back (see back_in_three), at most 300.
time_to_synced() {
  local start target other=1
  start=$(date +%s%N)
  [ "$1" = 1 ] && other=2
  target=$(status "$other" wsrep_last_committed)
  for _ in $(seq 1 3000); do
    back_in_three "$1" "${target:-0}" && break
    sleep 0.1
  done
  seconds_since "$start"
}

sysbench_cmd() { # hosts...
  local hosts
  hosts=$(printf '10.213.0.%s,' "$@")
  echo sysbench oltp_write_only --db-driver=mysql "--mysql-host=${hosts%,}" \
    --mysql-user=trireme_load --mysql-password=trireme-load --mysql-db=sbtest \
    --tables=4 --table-size=10000
}

run_one() { # provider_label provider kind
  local label=$1 provider=$2 kind=$3 node=3 others sb report data="1 2 3" shape=()
  case $kind in
    arbitrator-*) data="1 2"; node=2; shape=(--nodes 2 --arbitrator) ;;
  esac
  dir=$work/$label-$kind
  "$trireme" cluster up --hosts --dir "$dir" --provider "$provider" "${shape[@]}" \
    --provider-options "gcache.size=1G" >"$work/up.log" 2>&1 \
    || { echo "$label $kind: the cluster did not come up:"; tail -n 20 "$work/up.log"; exit 1; }
  "$trireme" cluster sql 1 "CREATE DATABASE sbtest; \
    CREATE USER 'trireme_load'@'%' IDENTIFIED BY 'trireme-load'; \
    GRANT ALL ON sbtest.* TO 'trireme_load'@'%'" --dir "$dir" >/dev/null
  if [ "$kind" = partition-leader ] || [ "$kind" = arbitrator-failover-leader ]; then
    for n in $data; do
      [ "$(status "$n" wsrep_raft_leader)" = 1 ] && node=$n
    done
  fi
  [ "$kind" = arbitrator-lost ] && node=arbitrator
  others=$(for n in $data; do [ "$n" = "$node" ] || echo "$n"; done)
  # shellcheck disable=SC2046
  sb=$(sysbench_cmd $others)
  $sb --threads=2 prepare >"$work/prepare.log" 2>&1
  report=$work/$label-$kind.sysbench
  timeout $((total + 120)) $sb --threads=8 --time=$total --report-interval=1 --percentile=99 \
    --mysql-ignore-errors=1213,1205,1180,1047,2013 run >"$report" 2>&1 &
  local load=$!
  until grep -q 'Threads started' "$report" 2>/dev/null; do sleep 0.05; done
  sleep "$at"
  local back start
  case $kind in
    partition|partition-leader)
      "$trireme" cluster net cut "$node" --dir "$dir"
      sleep "$cut_s"
      "$trireme" cluster net heal "$node" --dir "$dir"
      back=$(time_to_synced "$node") ;;
    frozen)
      "$trireme" cluster kill "$node" --signal stop --dir "$dir"
      sleep "$freeze_s"
      "$trireme" cluster kill "$node" --signal cont --dir "$dir"
      back=$(time_to_synced "$node") ;;
    failover|arbitrator-failover|arbitrator-failover-leader)
      "$trireme" cluster kill "$node" --signal kill --dir "$dir"
      start=$(date +%s%N)
      "$trireme" cluster start "$node" --dir "$dir" --timeout 300 >>"$work/start.log" 2>&1
      back=$(seconds_since "$start") ;;
    arbitrator-lost)
      "$trireme" cluster arbitrator kill --dir "$dir" >/dev/null
      start=$(date +%s%N)
      "$trireme" cluster arbitrator start --dir "$dir" >>"$work/start.log" 2>&1
      back=$(seconds_since "$start") ;;
  esac
  wait "$load"
  local hold=$cut_s
  [ "$kind" = frozen ] && hold=$freeze_s
  case $kind in *failover*|arbitrator-lost) hold=10 ;; esac
  # Per-second lines: "[ 17s ] thds: 8 tps: 412.00 qps: ... lat (ms,99%): 30.26 ...".
  local zero p99 trx
  zero=$(awk -v last="$total" '/^\[ *[0-9]+s \]/ { s=$2+0; if (s>1 && s<last && $7+0==0) z++ }
    END { print z+0 }' "$report")
  p99=$(awk -v from="$at" -v to=$((at + hold)) '/^\[ *[0-9]+s \]/ {
      s=$2+0; if (s>from && s<=to+2) { v=$14+0; if (v>w) w=v } } END { printf "%.1f", w }' "$report")
  trx=$(awk '/transactions:/ {print $2; exit}' "$report")
  case $node in [0-9]*) node=node$node ;; esac
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$kind" "$node" "$zero" "$p99" "$back" \
    "${trx:-0}" | tee -a "$tsv"
  # shellcheck disable=SC2086
  "$trireme" cluster compare --dir "$dir" --nodes "$(echo $data | tr ' ' ,)" --tables sbtest.sbtest1,sbtest.sbtest2,sbtest.sbtest3,sbtest.sbtest4 \
    >"$work/compare.log" 2>&1 || { echo "$label $kind: the nodes differ:"; cat "$work/compare.log"; exit 1; }
  "$trireme" cluster down --dir "$dir" >/dev/null 2>&1
  dir=""
}

for kind in $kinds; do
  run_one trireme "$provider_a" "$kind"
  run_one galera "$provider_b" "$kind"
done
echo
echo "ratios (Trireme / Galera):"
awk -F'\t' 'NR>1 { v[$1","$2]=$0; k[$2]=1 }
  END { for (s in k) { split(v["trireme,"s], a, "\t"); split(v["galera,"s], b, "\t");
    printf "  %-17s zero-tps s %s vs %s; worst p99 ms %s vs %s; back to Synced s %s vs %s\n",
      s, a[4], b[4], a[5], b[5], a[6], b[6] } }' "$tsv"
