#!/usr/bin/env bash
# Side-by-side benchmark of two wsrep providers (default: Trireme against Galera) on the same
# machine in the same run. Each provider gets its own 3-node cluster on 127.0.0.1; every
# scenario runs against A and B alternately, so slow drift of the machine (other load, page
# cache, thermal) hits both sides alike. This script only drives processes and stores raw
# results under OUT/runs; bench/harness/report.py turns them into OUT/report.md and plots.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/run.sh [--quick] [--provider-a PATH] [--provider-b PATH] [--out DIR]
                    [--only LIST] [--seconds N] [--reps N] [--appliers N]
                    [--base-port-a P] [--base-port-b P] [--base-port-c P]

  --quick          one repetition, oltp_write_only at 8 threads, 10 s runs, short
                   frozen-node and failover runs, a smaller large-trx table (finishes in
                   under 10 minutes, plus about 3 for large-trx)
  --provider-a     provider A (default: target/release/libtrireme.so)
  --provider-b     provider B (default: /usr/lib/galera/libgalera_smm.so)
  --out DIR        where report.md, plots and raw results go (default: bench-out/<timestamp>)
  --only LIST      comma-separated subset of the scenarios
                   write-node1, write-spread, overhead, frozen, failover, ist (node 3
                   catching up by IST at 1, 2 and 4 appliers, and the ceiling: MariaDB's
                   parallel replication applying the same load as an async replica),
                   large-trx (a DELETE of 800,000 of 1,000,000 rows, quick 160,000 of
                   200,000, in one transaction without streaming replication and with
                   fragments of 1000 and 10000 rows, under oltp_write_only on another
                   node; about 8 minutes, quick 3), and sst (SST of provider A under load by the trireme, rsync
                   and mariabackup methods, with tar and cp as ceilings: 2 x 100,000 rows
                   quick, 8 x 1,000,000 rows otherwise, about 15 minutes; not run unless
                   named), and partition (3 hosts in network namespaces, sysbench across
                   the bridge while a host is cut off for 25 s, the Raft leader is cut off,
                   a host is frozen for 10 s and a host is killed and restarted: zero-tps
                   seconds, worst p99 in the fault, time back to Synced; about 12 minutes),
                   and tls (3 hosts, oltp_write_only at 8 threads across the bridge on
                   Trireme and Galera, each with and without TLS for the group traffic:
                   the cost of TLS per provider and Trireme-TLS / Galera-TLS; 2 repetitions
                   of 30 s, about 7 minutes, quick 1 of 20 s, about 3; not run unless
                   named). The host scenarios (partition, tls) need the host network to
                   themselves: run them under `flock /tmp/trireme-hosts.lock bench/run.sh`.
  --seconds N      length of each write-path and standalone run (default 30, quick 10)
  --reps N         repetitions of every run (default 3, quick 1)
  --appliers N     wsrep_slave_threads on every node of both clusters (default 2); the IST
                   scenario sets its own counts
  --base-port-a/b/c P
                   port layouts (see `trireme cluster up --help`) of cluster A, cluster B and
                   the standalone server (default 23300, 24300, 25300; never 13300, which the
                   tests use)

  TRIREME_CLI      the trireme program (default: target/release/trireme)
EOF
}

invocation=$(printf '%q ' "$0" "$@")
root=$(cd "$(dirname "$0")/.." && pwd)
harness=$root/bench/harness
lua=$harness/oltp_counted.lua
trireme=${TRIREME_CLI:-$root/target/release/trireme}
mariadbd=/usr/sbin/mariadbd

quick=0
provider_a=$root/target/release/libtrireme.so
provider_b=/usr/lib/galera/libgalera_smm.so
out=""
only="write-node1,write-spread,overhead,frozen,failover,ist,large-trx,partition"
seconds=""
reps=""
appliers=2
port_a=23300
port_b=24300
port_c=25300

while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --provider-a) provider_a=$2; shift ;;
    --provider-b) provider_b=$2; shift ;;
    --out) out=$2; shift ;;
    --only) only=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --appliers) appliers=$2; shift ;;
    --base-port-a) port_a=$2; shift ;;
    --base-port-b) port_b=$2; shift ;;
    --base-port-c) port_c=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

case $appliers in
  ''|*[!0-9]*|0) echo "run.sh: --appliers takes a whole number of at least 1" >&2; exit 2 ;;
esac
for scenario in ${only//,/ }; do
  case $scenario in
    write-node1|write-spread|overhead|frozen|failover|ist|large-trx|sst|partition|tls) ;;
    *) echo "run.sh: unknown scenario '$scenario' in --only" >&2; exit 2 ;;
  esac
done
selected() { [[ ",$only," == *",$1,"* ]]; }

# The TLS-across-hosts scenario keeps its own defaults (2 repetitions of 30 s, quick 1 of
# 20 s) unless --reps or --seconds are given.
tls_reps=$reps; tls_seconds=$seconds
# Run lengths. The full plan is 2 workloads x 2 thread counts x 2 placements x 2 providers
# x 3 repetitions x 30 s (24 min) + standalone ceiling 2 x 2 x 3 x 30 s (6 min) + frozen and
# failover 2 x 2 x 3 x 25 s (5 min) = 35 min of load; setup, quiescing and rejoins add about
# 13 min (48 min in all). The large transaction comes on top, with a time budget of its own
# (large_s, added to limit_s and, half as much again, to the cap). No run starts after
# limit_s, and every wait ends 60 s before the cap at the latest (see capped), which leaves
# time for the teardown and the report.
if [ "$quick" = 1 ]; then
  reps=${reps:-1}; seconds=${seconds:-10}
  workloads=(oltp_write_only); thread_counts=(8)
  frozen_total=18; frozen_at=5; frozen_hold=5
  failover_total=15; failover_at=5
  limit_s=480; cap_min=10; rejoin_s=60
  ist_write_sets=20000; ist_appliers="1 4"
  sst_tables=2; sst_table_size=100000
  # Measured on a 2-core machine: 2.5 min.
  large_rows=200000; large_from=40000; large_s=300
  tls_reps=${tls_reps:-1}; tls_seconds=${tls_seconds:-20}
else
  reps=${reps:-3}; seconds=${seconds:-30}
  workloads=(oltp_write_only oltp_read_write); thread_counts=(8 32)
  frozen_total=25; frozen_at=10; frozen_hold=5
  failover_total=25; failover_at=10
  limit_s=3300; cap_min=60; rejoin_s=120
  ist_write_sets=100000; ist_appliers="1 2 4"
  sst_tables=8; sst_table_size=1000000
  # Measured on a 2-core machine: 7.6 min, one cluster rebuilt after a failed DELETE included.
  large_rows=1000000; large_from=200000; large_s=780
  tls_reps=${tls_reps:-2}; tls_seconds=${tls_seconds:-30}
fi
# About 15 s per configuration to bring the hosts up, prepare and tear down (measured on a
# busy 2-core machine: 2 repetitions of 30 s took 6.5 min), 4 configurations per repetition.
tls_s=$(( tls_reps * 4 * (20 + tls_seconds) ))
large_variants="none rows1000 rows10000"
if selected large-trx; then
  limit_s=$(( limit_s + large_s )); cap_min=$(( cap_min + large_s * 3 / 2 / 60 ))
fi
if selected tls; then
  limit_s=$(( limit_s + tls_s )); cap_min=$(( cap_min + tls_s * 3 / 2 / 60 ))
fi
placements=()
selected write-node1 && placements+=(node1)
selected write-spread && placements+=(spread)
tables=8; table_size=10000

# ---- preflight -----------------------------------------------------------------------------

die() { echo "run.sh: $*" >&2; exit 1; }

[ -x "$trireme" ] || die "$trireme is missing: cargo build --release -p provider -p cli"
# Absolute, but symlinks kept: the report names the paths as the user gave them.
provider_a=$(realpath -es "$provider_a") || die "provider A not found"
provider_b=$(realpath -es "$provider_b") || die "provider B not found"
[ -x "$mariadbd" ] || die "$mariadbd is missing: run scripts/setup.sh"
command -v mariadb >/dev/null || die "the mariadb client is missing: run scripts/setup.sh"

apt_install() {
  [ "$(id -u)" = 0 ] || die "$1 is missing and only root can install it: apt-get install $1"
  echo "run.sh: installing $1" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >&2 \
    || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >&2; }
}

command -v sysbench >/dev/null || apt_install sysbench || die "cannot install sysbench"

# The first python3 on PATH may be a pyenv one that cannot see Debian's matplotlib, so try
# the system interpreter too before installing.
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import matplotlib' 2>/dev/null; then
    python=$candidate; break
  fi
done
if [ -z "$python" ]; then
  apt_install python3-matplotlib || echo "run.sh: no matplotlib: the report will have no plots" >&2
  if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then python=/usr/bin/python3; else python=python3; fi
fi

out=${out:-$root/bench-out/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(realpath "$out")
[ -z "$(ls -A "$out")" ] || die "$out is not empty: choose another --out"
mkdir -p "$out/runs" "$out/config"
log_file=$out/run.log

# ---- helpers -------------------------------------------------------------------------------

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$log_file" >&2; }
incident() { log "INCIDENT: $*"; printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >>"$out/incidents.txt"; }
now_ns() { date +%s%N; }
sleep_until_ns() {
  local d=$(( $1 - $(now_ns) ))
  (( d > 0 )) || return 0
  sleep "$((d / 1000000000)).$(printf '%09d' $((d % 1000000000)))"
}
kv() { printf '%s=%s\n' "$2" "$3" >>"$1"; }
record_cmd() { local label=$1; shift; printf '%s\t%s\n' "$label" "$(printf '%q ' "$@")" >>"$out/config/commands.txt"; }

started_ns=$(now_ns)
deadline_ns=$(( started_ns + limit_s * 1000000000 ))
hard_deadline_ns=$(( started_ns + (cap_min * 60 - 60) * 1000000000 ))
# Whether a run of $1 seconds (plus waits) may still start.
budget_allows() { (( $(now_ns) + ($1 + 30) * 1000000000 < deadline_ns )); }
# $1 seconds, or fewer if the hard deadline comes first (but at least 5): a cluster that never
# recovers must not push the run past its cap.
capped() {
  local left=$(( (hard_deadline_ns - $(now_ns)) / 1000000000 ))
  (( left >= 5 )) || left=5
  echo $(( $1 < left ? $1 : left ))
}

# Children started in the background and not yet waited for. Only these are killed on exit:
# an unreaped child keeps its pid, so the pid cannot have been reused by another process.
bg_pids=()
forget_pid() {
  local p keep=()
  for p in "${bg_pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  bg_pids=("${keep[@]+"${keep[@]}"}")
}
# Runs a command in the background under `timeout` and waits for it: a foreground child would
# delay the INT/TERM traps (and so the teardown) until it ends. Returns the command's status.
run_bounded() {
  local limit=$1 output=$2; shift 2
  timeout "$limit" "$@" >>"$output" 2>&1 &
  local pid=$!
  bg_pids+=("$pid")
  local rc=0
  wait "$pid" || rc=$?
  forget_pid "$pid"
  return "$rc"
}

work=$(mktemp -d /tmp/trireme-bench-XXXXXX)
# mariadbd runs as the unprivileged user trireme and must reach its datadir through here.
chmod 755 "$work"
standalone_pid=""
report_written=0

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  for pid in "${bg_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  # Not a bare `wait`: the standalone server is a child too and is stopped below.
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null; done
  for side in A B C; do
    [ -f "$work/$side/trireme-cluster.conf" ] || continue
    # A node stuck as a joiner may ignore SIGTERM for minutes; its data is thrown away anyway.
    timeout 150 "$trireme" cluster down --dir "$work/$side" >>"$log_file" 2>&1 \
      || { log "cluster $side did not stop cleanly: killing it"; kill_cluster "$side"; }
  done
  # `cluster down` finds the standalone server through its pid file; this is the fallback
  # for one that died before writing it.
  if [ -n "$standalone_pid" ] && kill -0 "$standalone_pid" 2>/dev/null \
      && grep -qF "$work/C" "/proc/$standalone_pid/cmdline" 2>/dev/null; then
    kill -TERM "$standalone_pid"
    timeout 120 tail --pid="$standalone_pid" -f /dev/null || kill -KILL "$standalone_pid"
  fi
  # Whatever still runs from the work dir (an SST helper that outlived its server) is ours.
  local leftover
  for leftover in $(pgrep -f -- "$work/" || true); do
    [ "$leftover" = "$$" ] || kill -KILL "$leftover" 2>/dev/null
  done
  rm -rf "$work"
  # An aborted run still gets a report of what it measured.
  if [ "$report_written" = 0 ] && [ -d "$out/runs" ]; then
    log "writing the report of the partial run"
    MPLBACKEND=Agg timeout 300 "$python" "$harness/report.py" "$out" >&2 \
      || log "report.py failed"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sock() { echo "$work/$1/node$2/mysqld.sock"; }
nodes_of() { if [ "$1" = C ]; then echo 1; else echo 1 2 3; fi; }

# SQL on one node; bounded so that a frozen or dying server cannot hang the harness.
sql() {
  local side=$1 node=$2; shift 2
  timeout 30 mariadb --no-defaults -S "$(sock "$side" "$node")" -uroot --connect-timeout=5 \
    -N -B -e "$*"
}
# The node's wsrep status as "name<TAB>value" lines; nothing if it does not answer.
node_vars() {
  timeout 10 mariadb --no-defaults -S "$(sock "$1" "$2")" -uroot --connect-timeout=3 \
    -N -B -e "SHOW GLOBAL STATUS LIKE 'wsrep%'" 2>/dev/null || true
}
var_of() { awk -F'\t' -v k="$1" '$1 == k { print $2 }'; }

# Given a node's status lines: Synced, ready, connected and in a primary component.
# (wsrep_connected may be missing; only an explicit OFF counts.)
vars_ok() {
  [ "$(var_of wsrep_local_state_comment <<<"$1")" = Synced ] \
    && [ "$(var_of wsrep_ready <<<"$1")" = ON ] \
    && [ "$(var_of wsrep_connected <<<"$1")" != OFF ] \
    && [ "$(var_of wsrep_cluster_status <<<"$1")" = Primary ]
}
# ... and in a component of 3 nodes.
node_synced() {
  local vars
  vars=$(node_vars "$1" "$2")
  vars_ok "$vars" && [ "$(var_of wsrep_cluster_size <<<"$vars")" = 3 ]
}
seqno_of() { node_vars "$1" "$2" | var_of wsrep_last_committed; }

wait_healthy() {
  local side=$1 end=$(( $(now_ns) + $2 * 1000000000 )) n ok
  while :; do
    ok=1
    for n in 1 2 3; do node_synced "$side" "$n" || { ok=0; break; }; done
    [ "$ok" = 1 ] && return 0
    (( $(now_ns) < end )) || return 1
    sleep 0.5
  done
}

# Until every node has applied everything (empty receive queue, equal last_committed), so
# that one run's backlog does not slow the next.
wait_quiet() {
  local side=$1 end=$(( $(now_ns) + $2 * 1000000000 )) n vars seqnos queues s1 s2 s3
  [ "$side" = C ] && return 0
  while :; do
    seqnos=""; queues=""
    for n in 1 2 3; do
      vars=$(node_vars "$side" "$n")
      seqnos+="$(var_of wsrep_last_committed <<<"$vars") "
      queues+="$(var_of wsrep_local_recv_queue <<<"$vars") "
    done
    read -r s1 s2 s3 <<<"$seqnos"
    if [ -n "${s3:-}" ] && [ "$s1" = "$s2" ] && [ "$s2" = "$s3" ] && [ "$queues" = "0 0 0 " ]; then
      return 0
    fi
    if (( $(now_ns) >= end )); then
      log "cluster $side not quiet after $2 s (last_committed: $seqnos; receive queues: $queues)"
      return 1
    fi
    sleep 0.5
  done
}

prepare_data() {
  local side=$1
  sql "$side" 1 "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
  local cmd=(sysbench oltp_write_only --db-driver=mysql --mysql-user=root --mysql-db=sbtest
             --tables=$tables --table-size=$table_size --threads=2
             --mysql-socket="$(sock "$side" 1)" prepare)
  record_cmd "prepare $side" "${cmd[@]}"
  run_bounded 900 "$out/config/prepare-$side.log" "${cmd[@]}" \
    || die "sysbench prepare on $side failed: see $out/config/prepare-$side.log"
  wait_quiet "$side" "$(capped 300)" || true
}

setup_cluster() {
  local side=$1 provider=$2 port=$3
  local cmd=("$trireme" cluster up --nodes 3 --dir "$work/$side" --provider "$provider"
             --base-port "$port" --timeout 180
             --server-options "wsrep_slave_threads=$appliers")
  record_cmd "cluster $side" "${cmd[@]}"
  log "starting cluster $side ($provider, base port $port)"
  run_bounded 900 "$log_file" "${cmd[@]}" || die "cluster $side did not come up: see $log_file"
  prepare_data "$side"
}

kill_cluster() {
  local n
  for n in 1 2 3; do
    timeout 60 "$trireme" cluster kill "$n" --signal kill --dir "$work/$1" >>"$log_file" 2>&1 || true
  done
}

# `trireme cluster start`, retried while it refuses because the node's ports are still taken:
# a killed node's group port stays bound for a while by the half-closed connections that its
# peers have not closed yet.
start_node() {
  local side=$1 node=$2 end=$(( $(now_ns) + $3 * 1000000000 )) output=$4 rc
  while :; do
    rc=0
    run_bounded $(( (end - $(now_ns)) / 1000000000 + 1 )) "$output" \
      "$trireme" cluster start "$node" --dir "$work/$side" || rc=$?
    [ "$rc" = 0 ] && return 0
    tail -n 5 "$output" | grep -q 'is in use' || return "$rc"
    (( $(now_ns) < end )) || return "$rc"
    sleep 1
  done
}

# The ceiling: one MariaDB with the same my.cnf but wsrep off and no provider loaded. The
# datadir comes from a 1-node cluster, stopped cleanly right away.
setup_standalone() {
  local dir=$work/C
  log "starting the standalone server (wsrep off)"
  run_bounded 600 "$log_file" "$trireme" cluster up --nodes 1 --dir "$dir" \
    --provider "$provider_a" --base-port "$port_c" || die "cannot create the standalone datadir"
  run_bounded 300 "$log_file" "$trireme" cluster down --dir "$dir" || die "cannot stop node C"
  local user args
  user=$(sed -n 's/^user=//p' "$dir/trireme-cluster.conf")
  args=(--defaults-file="$dir/node1/my.cnf" --wsrep-on=OFF --wsrep-provider=none)
  [ -n "$user" ] && args+=(--user="$user")
  record_cmd "standalone" "$mariadbd" "${args[@]}"
  (cd "$dir/node1" && exec "$mariadbd" "${args[@]}") >>"$dir/node1/standalone.out" 2>&1 &
  standalone_pid=$!
  local end=$(( $(now_ns) + 120 * 1000000000 ))
  until sql C 1 "SELECT 1" >/dev/null 2>&1; do
    kill -0 "$standalone_pid" 2>/dev/null || die "the standalone server exited: see $dir/node1/error.log"
    (( $(now_ns) < end )) || die "the standalone server did not answer within 120 s"
    sleep 0.5
  done
  [ "$(sql C 1 'SELECT @@wsrep_on')" = 0 ] || die "the standalone server has wsrep on"
  prepare_data C
}

# Restores a cluster to 3 Synced nodes after a disturbance left it otherwise: restarts the
# nodes that are not Synced in a primary component (SIGKILL, start: their data may be stale
# anyway), and rebuilds the cluster from scratch if that does not help.
ensure_healthy() {
  local side=$1 n
  wait_healthy "$side" "$(capped 30)" && return 0
  incident "cluster $side is not 3 Synced nodes before a run: restarting the nodes that are not Synced"
  for n in 1 2 3; do
    vars_ok "$(node_vars "$side" "$n")" && continue
    timeout 60 "$trireme" cluster kill "$n" --signal kill --dir "$work/$side" >>"$log_file" 2>&1 || true
    start_node "$side" "$n" "$(capped 120)" "$log_file" || true
  done
  wait_healthy "$side" "$(capped 60)" && return 0
  incident "cluster $side still unhealthy: rebuilding it (new datadirs, new data)"
  kill_cluster "$side"
  rm -rf "${work:?}/$side"
  if [ "$side" = A ]; then setup_cluster A "$provider_a" "$port_a"; else setup_cluster B "$provider_b" "$port_b"; fi
}

# CPU ticks (utime + stime) of every server, so the report can show the CPU cost per
# transaction and what the idle cluster burns while the other one runs.
cpu_snapshot() {
  local file=$1 side n pid
  for side in A B C; do
    for n in 1 2 3; do
      pid=$(cat "$work/$side/node$n/mysqld.pid" 2>/dev/null) || continue
      [ -r "/proc/$pid/stat" ] || continue
      # utime and stime are fields 14 and 15; counted after the ")" that ends the name.
      awk -v s="$side" -v n="$n" '{ sub(/.*\) /, ""); print s, n, $12 + $13 }' "/proc/$pid/stat" >>"$file" || true
    done
  done
}

snapshot() {
  local side=$1 dir=$2 when=$3 n
  for n in $(nodes_of "$side"); do node_vars "$side" "$n" >"$dir/status-$when-node$n.txt"; done
  cpu_snapshot "$dir/cpu-$when.txt"
  kv "$dir/meta.env" "t_$when" "$(now_ns)"
}

# The providers' averages (apply and commit windows, queue lengths) run from the last
# FLUSH STATUS: flushed right before a run, the snapshot after it holds that run's own.
reset_averages() {
  local side=$1 n
  for n in $(nodes_of "$side"); do sql "$side" "$n" "FLUSH STATUS" >/dev/null 2>&1 || true; done
}

sockets_for() {
  local side=$1 placement=$2
  if [ "$placement" = spread ]; then
    echo "$(sock "$side" 1),$(sock "$side" 2),$(sock "$side" 3)"
  else
    sock "$side" 1
  fi
}

sb_common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=$tables
           --table-size=$table_size --mysql-ignore-errors=all)

log_result() {
  log "$1: $(grep -oE 'transactions: +[0-9]+ +\([0-9.]+ per sec\.\)' "$2" | tr -s ' ' || echo 'no result')"
}

# One steady-load run. Latency percentiles come from sysbench's histogram (report.py).
run_steady() {
  local scenario=$1 side=$2 workload=$3 threads=$4 placement=$5 rep=$6
  local case_id=$workload-${threads}t
  [ "$scenario" = write ] && case_id+=-$placement
  local id=$scenario.$case_id.$side.r$rep dir
  dir=$out/runs/$id
  mkdir -p "$dir"
  local m=$dir/meta.env
  kv "$m" scenario "$scenario"; kv "$m" case "$case_id"; kv "$m" side "$side"; kv "$m" rep "$rep"
  kv "$m" workload "$workload"; kv "$m" threads "$threads"; kv "$m" placement "$placement"
  kv "$m" seconds "$seconds"
  if ! budget_allows "$seconds"; then
    incident "skipped $id: the time budget is spent"; kv "$m" skipped budget; return 0
  fi
  [ "$side" = C ] || ensure_healthy "$side"
  wait_quiet "$side" "$(capped 120)" || true
  local cmd=(env BENCH_WORKLOAD="$workload" sysbench "$lua" "${sb_common[@]}"
             --threads="$threads" --time="$seconds" --mysql-socket="$(sockets_for "$side" "$placement")"
             --histogram=on --percentile=95 run)
  kv "$m" cmd "$(printf '%q ' "${cmd[@]}")"
  reset_averages "$side"
  snapshot "$side" "$dir" before
  local rc=0
  run_bounded $((seconds + 120)) "$dir/sysbench.txt" "${cmd[@]}" || rc=$?
  snapshot "$side" "$dir" after
  kv "$m" rc "$rc"
  [ "$rc" = 0 ] || incident "$id: sysbench exited with $rc (see $dir/sysbench.txt)"
  log_result "$id" "$dir/sysbench.txt"
}

# Until $node is back: Synced in a 3-node primary component, node 1 (which kept running)
# sees 3 members too, and $node has applied at least up to seqno $4 (node 1's position when
# the disturbance ended). A node just resumed from SIGSTOP may still show its old "Synced"
# view; the position tells whether it really follows the cluster again.
wait_rejoined() {
  local side=$1 node=$2 end=$(( $(now_ns) + $3 * 1000000000 )) target=${4:-0} seqno
  while :; do
    if node_synced "$side" "$node" && [ "$(node_vars "$side" 1 | var_of wsrep_cluster_size)" = 3 ]; then
      seqno=$(seqno_of "$side" "$node")
      [ -n "$seqno" ] && (( seqno >= target )) && return 0
    fi
    (( $(now_ns) < end )) || return 1
    sleep 0.5
  done
}

# A load on node 1 (oltp_write_only, 8 threads, per-second reports) while one node is frozen
# (SIGSTOP, then SIGCONT) or crashes (SIGKILL, then restarted at once).
run_disturbance() {
  local kind=$1 side=$2 rep=$3 total at hold=0 node
  if [ "$kind" = frozen ]; then total=$frozen_total; at=$frozen_at; hold=$frozen_hold; node=3
  else total=$failover_total; at=$failover_at; node=2; fi
  local id=$kind.oltp_write_only-8t-node1.$side.r$rep dir
  dir=$out/runs/$id
  mkdir -p "$dir"
  local m=$dir/meta.env ev=$dir/events.txt
  kv "$m" scenario "$kind"; kv "$m" case oltp_write_only-8t-node1; kv "$m" side "$side"
  kv "$m" rep "$rep"; kv "$m" workload oltp_write_only; kv "$m" threads 8
  kv "$m" placement node1; kv "$m" seconds "$total"; kv "$m" at "$at"; kv "$m" hold "$hold"
  kv "$m" node "$node"
  if ! budget_allows $((total + rejoin_s)); then
    incident "skipped $id: the time budget is spent"; kv "$m" skipped budget; return 0
  fi
  ensure_healthy "$side"
  wait_quiet "$side" "$(capped 120)" || true
  local cmd=(env BENCH_WORKLOAD=oltp_write_only sysbench "$lua" "${sb_common[@]}"
             --threads=8 --time="$total" --mysql-socket="$(sock "$side" 1)"
             --report-interval=1 --histogram=on --percentile=95 run)
  kv "$m" cmd "$(printf '%q ' "${cmd[@]}")"
  snapshot "$side" "$dir" before
  timeout $((total + 120)) "${cmd[@]}" >"$dir/sysbench.txt" 2>&1 &
  local sb=$!
  bg_pids+=("$sb")
  # sysbench's per-second samples count from the moment its threads start, so the schedule
  # is anchored there rather than at the launch.
  local end=$(( $(now_ns) + 30 * 1000000000 ))
  until grep -q 'Threads started' "$dir/sysbench.txt" 2>/dev/null; do
    kill -0 "$sb" 2>/dev/null && (( $(now_ns) < end )) || break
    sleep 0.05
  done
  local t0
  t0=$(now_ns)
  kv "$m" t0 "$t0"
  sleep_until_ns $(( t0 + at * 1000000000 ))
  local restart="" target
  if [ "$kind" = frozen ]; then
    echo "stop $(now_ns)" >>"$ev"
    timeout 30 "$trireme" cluster kill "$node" --signal stop --dir "$work/$side" >>"$log_file" 2>&1 \
      || incident "$id: SIGSTOP failed"
    sleep_until_ns $(( t0 + (at + hold) * 1000000000 ))
    echo "cont $(now_ns)" >>"$ev"
    timeout 30 "$trireme" cluster kill "$node" --signal cont --dir "$work/$side" >>"$log_file" 2>&1 \
      || incident "$id: SIGCONT failed"
  else
    echo "kill $(now_ns)" >>"$ev"
    timeout 60 "$trireme" cluster kill "$node" --signal kill --dir "$work/$side" >>"$log_file" 2>&1 \
      || incident "$id: SIGKILL failed"
    echo "restart $(now_ns)" >>"$ev"
    # In a subshell so that the load keeps being watched meanwhile; on TERM it ends its own
    # `trireme cluster start` (the parent's list of children means nothing in there).
    (
      bg_pids=()
      trap 'for p in "${bg_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; exit 143' TERM
      start_node "$side" "$node" "$(capped "$rejoin_s")" "$dir/start.log"
    ) &
    restart=$!
    bg_pids+=("$restart")
  fi
  target=$(seqno_of "$side" 1)
  kv "$m" target_seqno "$target"
  if wait_rejoined "$side" "$node" "$(capped "$rejoin_s")" "${target:-0}"; then
    echo "rejoined $(now_ns)" >>"$ev"
  else
    incident "$id: node$node was not back (Synced, caught up, 3 members) within $rejoin_s s"
  fi
  if [ -n "$restart" ]; then
    local rc_start=0
    wait "$restart" || rc_start=$?
    forget_pid "$restart"
    kv "$m" rc_start "$rc_start"
    [ "$rc_start" = 0 ] || incident "$id: trireme cluster start $node failed (see $dir/start.log)"
  fi
  local rc=0
  wait "$sb" || rc=$?
  forget_pid "$sb"
  snapshot "$side" "$dir" after
  kv "$m" rc "$rc"
  [ "$rc" = 0 ] || incident "$id: sysbench exited with $rc (see $dir/sysbench.txt)"
  log_result "$id" "$dir/sysbench.txt"
}

# The tables must be equal on every node at rest: `trireme cluster compare` waits until the
# three nodes are Synced at one unchanging seqno, then compares CHECKSUM TABLE and names the
# first differing rows.
check_consistency() {
  local side=$1 t list="" rc=0 report=$out/compare-$1.txt
  [ -f "$work/$side/trireme-cluster.conf" ] || return 0
  if ! wait_healthy "$side" "$(capped 30)"; then
    echo "$side not checked (not 3 Synced nodes at the end)" >>"$out/consistency.txt"
    return 0
  fi
  for t in $(seq 1 $tables); do list+="sbtest.sbtest$t,"; done
  "$trireme" cluster compare --dir "$work/$side" --tables "${list%,}" \
    --timeout "$(capped 120)" >"$report" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "$side equal" >>"$out/consistency.txt"
  elif grep -q 'differ$' "$report"; then
    { echo "$side DIFFERENT:"; cat "$report"; } >>"$out/consistency.txt"
    incident "cluster $side: the nodes' tables differ (see $report)"
  else
    echo "$side not checked (not at rest: $(tail -n 1 "$report"))" >>"$out/consistency.txt"
    incident "cluster $side: the nodes never came to rest for a comparison (see $report)"
  fi
}

# ---- the run -------------------------------------------------------------------------------

m=$out/meta.env
disturbances=0
selected frozen && disturbances=$((disturbances + 1))
selected failover && disturbances=$((disturbances + 1))
ceiling=0
selected overhead && ceiling=1
runs=$(( reps * ${#workloads[@]} * ${#thread_counts[@]} * (${#placements[@]} * 2 + ceiling) ))
load_s=$(( runs * seconds ))
selected frozen && load_s=$(( load_s + reps * 2 * frozen_total ))
selected failover && load_s=$(( load_s + reps * 2 * failover_total ))
runs=$(( runs + reps * 2 * disturbances ))
# About 30 s per cluster to create and prepare, 5 s of snapshots and quiescing per run and
# 30 s of rejoin per disturbance run (measured on a 2-core machine).
estimate_s=$(( load_s + 30 * (2 + ceiling) + 5 * runs + 30 * reps * 2 * disturbances ))
selected large-trx && estimate_s=$(( estimate_s + large_s ))
selected tls && estimate_s=$(( estimate_s + tls_s ))

kv "$m" mode "$([ "$quick" = 1 ] && echo quick || echo full)"
kv "$m" command "$invocation"
kv "$m" only "$only"
kv "$m" reps "$reps"; kv "$m" seconds "$seconds"; kv "$m" appliers "$appliers"
kv "$m" workloads "${workloads[*]}"; kv "$m" thread_counts "${thread_counts[*]}"
kv "$m" tables "$tables"; kv "$m" table_size "$table_size"
kv "$m" frozen "run $frozen_total s, node 3 SIGSTOP at $frozen_at s, SIGCONT at $((frozen_at + frozen_hold)) s"
kv "$m" failover "run $failover_total s, node 2 SIGKILL at $failover_at s"
kv "$m" rejoin_s "$rejoin_s"
kv "$m" large_trx "DELETE of rows $large_from..$large_rows, variants $large_variants"
kv "$m" provider_a "$provider_a"; kv "$m" provider_b "$provider_b"
kv "$m" provider_a_sha256 "$(sha256sum "$provider_a" | cut -c1-16)"
kv "$m" provider_b_sha256 "$(sha256sum "$provider_b" | cut -c1-16)"
kv "$m" provider_a_mtime "$(date -r "$provider_a" '+%F %T')"
kv "$m" provider_b_mtime "$(date -r "$provider_b" '+%F %T')"
kv "$m" ports "A=$port_a B=$port_b C=$port_c"
kv "$m" load_s "$load_s"; kv "$m" estimate_s "$estimate_s"; kv "$m" limit_s "$limit_s"
kv "$m" cap_min "$cap_min"
kv "$m" started_ns "$started_ns"
kv "$m" host "$(uname -n) $(uname -r), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/^Mem/ { print $2 }') GiB"
kv "$m" loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
kv "$m" mariadbd_version "$("$mariadbd" --version)"
kv "$m" sysbench_version "$(sysbench --version)"
kv "$m" clk_tck "$(getconf CLK_TCK)"

log "benchmark: out $out, estimated $((estimate_s / 60)) min (cap $cap_min min), work dir $work"

if [ "${#placements[@]}" -gt 0 ] || [ "$disturbances" -gt 0 ]; then
  setup_cluster A "$provider_a" "$port_a"
  setup_cluster B "$provider_b" "$port_b"
fi
[ "$ceiling" = 1 ] && setup_standalone
for side in A B C; do
  [ -f "$work/$side/node1/my.cnf" ] && cp "$work/$side/node1/my.cnf" "$out/config/$side-node1.my.cnf"
done
kv "$m" provider_a_version "$(node_vars A 1 | var_of wsrep_provider_version)"
kv "$m" provider_b_version "$(node_vars B 1 | var_of wsrep_provider_version)"
kv "$m" setup_done_ns "$(now_ns)"

# The provider that goes first alternates between repetitions, so that neither always runs
# right after the other (whose background flushing and purge may still be going on).
order_for() { if (( $1 % 2 == 1 )); then echo A B; else echo B A; fi; }

for rep in $(seq 1 "$reps"); do
  for workload in "${workloads[@]}"; do
    for threads in "${thread_counts[@]}"; do
      [ "$ceiling" = 1 ] && run_steady overhead C "$workload" "$threads" node1 "$rep"
      for placement in "${placements[@]+"${placements[@]}"}"; do
        for side in $(order_for "$rep"); do
          run_steady write "$side" "$workload" "$threads" "$placement" "$rep"
        done
      done
    done
  done
done
# Repetitions outermost here too: if a provider keeps failing to recover and eats the time
# budget, every scenario still has its first repetition.
for rep in $(seq 1 "$reps"); do
  for kind in frozen failover; do
    selected "$kind" || continue
    for side in $(order_for "$rep"); do run_disturbance "$kind" "$side" "$rep"; done
  done
done

check_consistency A
check_consistency B

# IST runs its own pair of clusters (bench/scripts/ist_pair.sh), after the others are idle.
if selected ist; then
  log "IST: $ist_write_sets write-sets, appliers $ist_appliers"
  record_cmd "ist" "$root/bench/scripts/ist_pair.sh" "$ist_write_sets" "$ist_appliers"
  TRIREME_BENCH_OUT=$out IST_PROVIDER_A=$provider_a IST_PROVIDER_B=$provider_b \
    IST_PORT_A=$((port_a + 3000)) IST_PORT_B=$((port_b + 3000)) \
    run_bounded "$(capped 1800)" "$log_file" \
    "$root/bench/scripts/ist_pair.sh" "$ist_write_sets" "$ist_appliers" \
    || incident "the IST scenario failed: see run.log"
  log "IST ceiling: an async replica applies $ist_write_sets transactions, appliers $ist_appliers"
  record_cmd "ist-ceiling" "$root/bench/scripts/async_ceiling.sh" "$ist_write_sets" "$ist_appliers"
  TRIREME_BENCH_OUT=$out TRIREME_CLI=$trireme CEILING_PROVIDER=$provider_a \
    CEILING_PORT=$((port_a + 5000)) run_bounded "$(capped 1200)" "$log_file" \
    "$root/bench/scripts/async_ceiling.sh" "$ist_write_sets" "$ist_appliers" \
    || incident "the IST ceiling (async replica) failed: see run.log"
fi

# The large transaction runs a pair of clusters of its own (bench/scripts/large_trx_pair.sh),
# on the IST scenario's ports, which are free again by now.
if selected large-trx && ! budget_allows "$large_s"; then
  incident "skipped the large-transaction scenario: the time budget is spent"
elif selected large-trx; then
  log "large transaction: DELETE of rows $large_from..$large_rows, variants $large_variants"
  record_cmd "large-trx" "$root/bench/scripts/large_trx_pair.sh" "$large_rows" "$large_from" "$large_variants"
  TRIREME_BENCH_OUT=$out TRIREME_CLI=$trireme LARGE_PROVIDER_A=$provider_a \
    LARGE_PROVIDER_B=$provider_b LARGE_PORT_A=$((port_a + 3000)) LARGE_PORT_B=$((port_b + 3000)) \
    run_bounded "$(capped $(( large_s * 3 / 2 )))" "$log_file" \
    "$root/bench/scripts/large_trx_pair.sh" "$large_rows" "$large_from" "$large_variants" \
    || incident "the large-transaction scenario failed or its nodes ended different: see run.log"
fi

# SST runs a cluster of its own (bench/scripts/sst_pair.sh), one method after another.
if selected sst; then
  sst_methods="trireme rsync mariabackup"
  log "SST: $sst_tables tables x $sst_table_size rows, methods $sst_methods"
  record_cmd "sst" "$root/bench/scripts/sst_pair.sh" "$sst_tables" "$sst_table_size" "$sst_methods"
  TRIREME_BENCH_OUT=$out SST_PROVIDER=$provider_a SST_PORT=$((port_a + 5000)) \
    run_bounded "$(capped 3000)" "$log_file" \
    "$root/bench/scripts/sst_pair.sh" "$sst_tables" "$sst_table_size" "$sst_methods" \
    || incident "the SST scenario failed: see run.log"
fi
# Faults across hosts run clusters of their own in network namespaces, one at a time.
if selected partition; then
  log "faults across hosts: partition, partition-leader, frozen, failover"
  record_cmd "partition" "$root/bench/scripts/hosts_faults_pair.sh"
  TRIREME_BENCH_OUT=$out FAULTS_PROVIDER_A=$provider_a FAULTS_PROVIDER_B=$provider_b \
    run_bounded "$(capped 1800)" "$log_file" "$root/bench/scripts/hosts_faults_pair.sh" \
    || incident "the faults-across-hosts scenario failed: see run.log"
fi
# TLS across hosts: 4 clusters in network namespaces, one at a time (Trireme and Galera, each
# without and with TLS), with the binaries as they are (no build in the middle of a run).
if selected tls && ! budget_allows "$tls_s"; then
  incident "skipped the TLS-across-hosts scenario: the time budget is spent"
elif selected tls; then
  log "TLS across hosts: $tls_reps repetition(s) of $tls_seconds s per configuration"
  record_cmd "tls" "$root/bench/scripts/hosts_tls_pair.sh" "$tls_reps" "$tls_seconds"
  TRIREME_BENCH_OUT=$out TRIREME_BENCH_NO_BUILD=1 TLS_PROVIDER_A=$provider_a \
    TLS_PROVIDER_B=$provider_b run_bounded "$(capped $(( tls_s * 3 / 2 )))" "$log_file" \
    "$root/bench/scripts/hosts_tls_pair.sh" "$tls_reps" "$tls_seconds" \
    || incident "the TLS-across-hosts scenario failed or a configuration did not count: see hosts_tls-notes.txt"
fi
kv "$m" loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
kv "$m" finished_ns "$(now_ns)"

log "writing the report"
report_written=1
MPLBACKEND=Agg "$python" "$harness/report.py" "$out"
log "done: $out/report.md"
