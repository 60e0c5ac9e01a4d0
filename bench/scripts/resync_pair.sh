#!/usr/bin/env bash
# A node that stood aside under load, catching up: how long it stays JOINED and what that
# costs the clients, side by side on each provider in one run. Per provider: a 3-node
# cluster, oltp_write_only (THREADS threads, unthrottled, 1-s reports) on node 1; after PRE
# seconds node 3 runs FLUSH TABLES WITH READ LOCK for HOLD seconds (the server desyncs the
# node and pauses its appliers, as for a backup; the cluster goes on without it), then
# UNLOCK TABLES: node 3 is JOINED with the backlog of HOLD seconds of writes and must work
# it off while the load goes on. Timed from the UNLOCK until node 3 reports Synced (polled
# every 0.2 s, LIMIT seconds at most); the load runs on POST seconds more, then the nodes are
# compared at rest (`trireme cluster compare`).
#
#   bench/scripts/resync_pair.sh [hold_s=20] [threads=8] [NAME=LIBRARY ...]
#
# Without NAME=LIBRARY pairs: trireme=target/release/libtrireme.so and
# galera=/usr/lib/galera/libgalera_smm.so. RESYNC_PRE (10), RESYNC_POST (10), RESYNC_LIMIT
# (120), RESYNC_PORT (29300; each provider takes the next 100), RESYNC_NODE3_APPLIERS (node 3's
# wsrep_slave_threads, set before the load; default: the cluster's 2). With fewer appliers
# than the others, node 3 cannot outrun the load once it no longer holds the cluster back:
# RESYNC_NODE3_PROVIDER_OPTIONS is set on node 3 with SET GLOBAL wsrep_provider_options before
# the load (say gcs.catch_up_period=PT60S; an option one provider lacks fails its run).
# RESYNC_NODE3_CPU (a fraction of a core, say 0.5) caps node 3's server with a cgroup (v1
# cpu controller, /sys/fs/cgroup/cpu/trireme-resync-node3, removed at the end): a slower
# host. Either way node 3 may be unable to outrun the load once it no longer holds the
# cluster back: the case where catching up needs the cluster to slow down for it.
#
# Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/resync.tsv (provider, what,
# value), sysbench's output to resync-load-NAME.txt; a summary goes to stdout. tps figures
# are medians of sysbench's 1-s reports over the window: before the hold, during it, from
# the UNLOCK until Synced (catching up), and after. Exits 1 if a node did not sync or the
# nodes differ.
set -euo pipefail
cd "$(dirname "$0")/../.."
hold_s=${1:-20}; threads=${2:-8}
shift $(( $# < 2 ? $# : 2 ))
providers=("$@")
[ ${#providers[@]} -gt 0 ] || providers=("trireme=$PWD/target/release/libtrireme.so"
                                          "galera=/usr/lib/galera/libgalera_smm.so")
pre_s=${RESYNC_PRE:-10}; post_s=${RESYNC_POST:-10}; limit_s=${RESYNC_LIMIT:-120}
port=${RESYNC_PORT:-29300}
trireme=$PWD/target/release/trireme
[ -x "$trireme" ] || cargo build --release --quiet -p cli
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/resync.tsv
printf 'provider\twhat\tvalue\n' > "$tsv"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$tsv"; }
record run hold_s "$hold_s"
record run threads "$threads"
record run node3_appliers "${RESYNC_NODE3_APPLIERS:-cluster default}"
record run node3_cpu "${RESYNC_NODE3_CPU:-uncapped}"
record run node3_provider_options "${RESYNC_NODE3_PROVIDER_OPTIONS:-}"

now() { date +%s.%N; }
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", b - a }'; }
status_of() { # socket var
  timeout 5 mariadb --no-defaults -S "$1" -uroot -N -B -e "SHOW STATUS LIKE '$2'" 2>/dev/null \
    | awk '{print $2}'
}
. bench/scripts/sysbench_tps.sh

# The cluster directory, the load and the cgroup in use, stopped and removed on any exit.
current=""; load_pid=""; holder_pid=""
cgroup=/sys/fs/cgroup/cpu/trireme-resync-node3
cap_node3() { # cluster-dir
  local quota
  quota=$(awk -v f="$RESYNC_NODE3_CPU" 'BEGIN { printf "%d\n", f * 100000 }')
  [ "$quota" -gt 0 ] || { echo "RESYNC_NODE3_CPU must be above 0" >&2; exit 2; }
  mkdir -p "$cgroup"
  echo 100000 > "$cgroup/cpu.cfs_period_us"
  echo "$quota" > "$cgroup/cpu.cfs_quota_us"
  echo "$(cat "$1/node3/mysqld.pid")" > "$cgroup/cgroup.procs"
}
uncap_node3() {
  [ -d "$cgroup" ] || return 0
  local pid
  # A cgroup with processes in it cannot be removed: hand them back to the root group.
  for pid in $(cat "$cgroup/cgroup.procs"); do
    echo "$pid" > /sys/fs/cgroup/cpu/cgroup.procs 2>/dev/null || true
  done
  rmdir "$cgroup"
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
finish() {
  [ -n "$load_pid" ] && stop_pid "$load_pid"
  [ -n "$holder_pid" ] && stop_pid "$holder_pid"
  load_pid=""; holder_pid=""
  uncap_node3
  if [ -n "$current" ]; then
    timeout 120 "$trireme" cluster down --dir "$current/c" >/dev/null 2>&1 || true
    rm -rf "$current"
  fi
  current=""
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failed=0
run_provider() { # name library port
  local name=$1 library=$2 base_port=$3 dir c
  dir=$(mktemp -d /tmp/trireme-resync-bench-XXXXXX)
  chmod 755 "$dir"
  current=$dir; c=$dir/c
  "$trireme" cluster up --nodes 3 --dir "$c" --provider "$library" --base-port "$base_port" \
    >"$out/resync-setup-$name.log" 2>&1
  "$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$c" >/dev/null
  local common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=8
                --table-size=10000 --mysql-socket="$c/node1/mysqld.sock")
  sysbench oltp_write_only "${common[@]}" --threads=4 prepare >/dev/null
  if [ -n "${RESYNC_NODE3_APPLIERS:-}" ]; then
    "$trireme" cluster sql 3 "SET GLOBAL wsrep_slave_threads=$RESYNC_NODE3_APPLIERS" --dir "$c" \
      >/dev/null
  fi
  if [ -n "${RESYNC_NODE3_PROVIDER_OPTIONS:-}" ]; then
    "$trireme" cluster sql 3 "SET GLOBAL wsrep_provider_options='$RESYNC_NODE3_PROVIDER_OPTIONS'" \
      --dir "$c" >/dev/null
  fi
  [ -z "${RESYNC_NODE3_CPU:-}" ] || cap_node3 "$c"
  local load_out=$out/resync-load-$name.txt t_load
  t_load=$(now)
  stdbuf -oL sysbench oltp_write_only "${common[@]}" --threads="$threads" --rate=0 \
    --time=$(( pre_s + hold_s + limit_s + post_s + 30 )) --report-interval=1 \
    --mysql-ignore-errors=1213,1205 run > "$load_out" 2>&1 &
  load_pid=$!
  sleep "$pre_s"
  local t_hold t_release t_synced="" state backlog deadline
  t_hold=$(now)
  timeout $(( hold_s + 60 )) mariadb --no-defaults -S "$c/node3/mysqld.sock" -uroot -e \
    "FLUSH TABLES WITH READ LOCK; SELECT SLEEP($hold_s); UNLOCK TABLES" >/dev/null &
  holder_pid=$!
  wait "$holder_pid" || { echo "$name: the FLUSH TABLES WITH READ LOCK session failed" >&2; }
  holder_pid=""
  t_release=$(now)
  backlog=$(status_of "$c/node3/mysqld.sock" wsrep_local_recv_queue)
  deadline=$(( $(date +%s) + limit_s ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    state=$(status_of "$c/node3/mysqld.sock" wsrep_local_state_comment)
    if [ "$state" = Synced ]; then t_synced=$(now); break; fi
    sleep 0.2
  done
  sleep "$post_s"
  stop_pid "$load_pid"; load_pid=""
  local t_end at_hold at_release at_synced at_end joined_s=nan
  t_end=$(now)
  at_hold=$(seconds_between "$t_load" "$t_hold")
  at_release=$(seconds_between "$t_load" "$t_release")
  at_synced=$(seconds_between "$t_load" "${t_synced:-$t_end}")
  at_end=$(seconds_between "$t_load" "$t_end")
  [ -n "$t_synced" ] && joined_s=$(seconds_between "$t_release" "$t_synced")
  local before during_hold catching_up after=nan
  before=$(tps_median "$load_out" 2 "$at_hold")
  during_hold=$(tps_median "$load_out" "$at_hold" "$at_release")
  catching_up=$(tps_median "$load_out" "$at_release" "$at_synced")
  [ -n "$t_synced" ] && after=$(tps_median "$load_out" "$at_synced" "$at_end")
  local list="" i equal=yes
  for i in $(seq 1 8); do list+="sbtest.sbtest$i,"; done
  "$trireme" cluster compare --dir "$c" --tables "${list%,}" --timeout 300 \
    >"$out/resync-compare-$name.txt" 2>&1 || equal=no
  record "$name" library "$library"
  record "$name" backlog_at_release "${backlog:-nan}"
  record "$name" joined_to_synced_seconds "$joined_s"
  record "$name" tps_before "$before"
  record "$name" tps_during_hold "$during_hold"
  record "$name" tps_catching_up "$catching_up"
  record "$name" tps_after "$after"
  record "$name" checksums_equal "$equal"
  printf '%-10s backlog %7s  JOINED->Synced %7s s  tps before %7s  hold %7s  catching up %7s  after %7s  equal %s\n' \
    "$name" "${backlog:-nan}" "$joined_s" "$before" "$during_hold" "$catching_up" "$after" "$equal"
  if [ -z "$t_synced" ]; then
    echo "$name: node 3 was not Synced ${limit_s} s after UNLOCK TABLES" >&2
    failed=1
  fi
  [ "$equal" = yes ] || { echo "$name: see $out/resync-compare-$name.txt" >&2; failed=1; }
  finish
}

for pair in "${providers[@]}"; do
  run_provider "${pair%%=*}" "${pair#*=}" "$port"
  port=$(( port + 100 ))
done
exit "$failed"
