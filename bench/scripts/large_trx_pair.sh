#!/usr/bin/env bash
# One large transaction with and without streaming replication (SR), side by side: the same
# 3-node MariaDB cluster on provider A (Trireme) and provider B (Galera), both up for the
# whole run. Table sr.t holds ROWS rows; for each variant (no SR, SR by 1000 rows, SR by
# 10000 rows) oltp_write_only runs on node 2 (8 threads, 1-s reports) while node 1 deletes
# every row with id >= FROM in one autocommit statement. The variants alternate A/B (A
# first for the 1st and 3rd variant, B first for the 2nd) so that drift of the machine hits
# both providers alike.
#
#   bench/scripts/large_trx_pair.sh [rows=1000000] [from=200000] [variants="none rows1000 rows10000"]
#
#   LARGE_PROVIDER_A / LARGE_PROVIDER_B   provider libraries (default target/release/libtrireme.so,
#                                         /usr/lib/galera/libgalera_smm.so)
#   LARGE_PORT_A / LARGE_PORT_B           base ports of the clusters (default 26300, 27300)
#   TRIREME_CLI                           the trireme binary (default target/release/trireme)
#   LARGE_PRE / LARGE_POST                seconds of load before the DELETE and after it (5, 5)
#   LARGE_DELETE_TIMEOUT                  seconds the DELETE may take (default 1200)
#   LARGE_SERVER_OPTIONS                  [mysqld] settings of every node of both clusters
#                                         (default innodb_buffer_pool_size=1G: with the CLI's
#                                         64M, sr.t and the streaming log do not fit, and the
#                                         server's own reads from disk, not replication, set
#                                         the times; "" keeps 64M)
#
# Per variant and provider: the DELETE's wall time; the apply tail (from the DELETE's end
# until nodes 2 and 3 reach the wsrep_last_committed node 1 had at that moment, polled every
# 0.1 s); the write-sets node 1 replicated during the DELETE (its fragments); flow control
# over the whole load (ms node 2 saw the group paused, pause requests each node sent); row
# counts and `trireme cluster compare` of sr.t at rest once the nodes are quiet (waited for up
# to 120 s). The load runs on until 5 s after the DELETE and at least 2 s after the apply tail
# ended, so that a stall of the load while the other nodes apply is seen whole. The per-second
# tps (and the longest run of zero-tps seconds from the DELETE's start on) are worked out by
# bench/harness/report.py from the sysbench output.
#
# A commit that waits for a group which has gone on without node 1 never returns, so the
# DELETE's client is stopped if node 2 sees fewer than 3 members (or node 1's server is gone)
# for 10 s in a row; the DELETE then counts as failed. A cluster that is not 3 Synced nodes
# before a variant is built anew (new datadirs, table filled again), so that one failure does
# not take the variants after it along.
#
# Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/large-trx.tsv (side, variant,
# what, value; side "run" for the parameters), sysbench's output to
# large-trx-load-SIDE-VARIANT.txt, the DELETE client's output to large-trx-SIDE-VARIANT-delete.txt
# and the error-log lines the three nodes wrote during the variant to
# large-trx-SIDE-VARIANT-errorlogs.txt. Exits 1 if a DELETE failed or the nodes ended different.
#
# Nothing is built here: the trireme binary and the providers must exist.
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-1000000}; from=${2:-200000}; variants=${3:-"none rows1000 rows10000"}
target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$PWD/$target
trireme=${TRIREME_CLI:-$target/release/trireme}
declare -A provider=([A]=${LARGE_PROVIDER_A:-$target/release/libtrireme.so}
                     [B]=${LARGE_PROVIDER_B:-/usr/lib/galera/libgalera_smm.so})
declare -A port=([A]=${LARGE_PORT_A:-26300} [B]=${LARGE_PORT_B:-27300})
pre_s=${LARGE_PRE:-5}; post_s=${LARGE_POST:-5}
delete_limit=${LARGE_DELETE_TIMEOUT:-1200}
server_options=${LARGE_SERVER_OPTIONS-innodb_buffer_pool_size=1G}
tail_limit=600; converge_limit=120; chunk=100000
sb_threads=8; sb_tables=4; sb_size=10000

die() { echo "large_trx_pair.sh: $*" >&2; exit 1; }
[ -x "$trireme" ] || die "$trireme is missing: cargo build --release -p provider -p cli"
for side in A B; do [ -f "${provider[$side]}" ] || die "provider $side (${provider[$side]}) is missing"; done
command -v sysbench >/dev/null || die "sysbench is missing: apt-get install sysbench"
(( from > 1 && from <= rows )) || die "from ($from) must lie in 2..rows ($rows)"
for v in $variants; do
  [[ $v == none || $v =~ ^rows[1-9][0-9]*$ || $v =~ ^bytes[1-9][0-9]*$ ]] \
    || die "unknown variant $v (none, rowsN or bytesN)"
done

out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/large-trx.tsv
printf 'side\tvariant\twhat\tvalue\n' > "$tsv"
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$tsv"; }
record run - rows "$rows"
record run - delete_from "$from"
record run - variants "$variants"
record run - load "oltp_write_only ${sb_threads} threads on node 2, $sb_tables x $sb_size rows"
record run - load_threads "$sb_threads"
record run - pre_s "$pre_s"
record run - post_s "$post_s"
record run - server_options "$server_options"

now_ns() { date +%s%N; }
# Seconds from ns timestamp $1 to $2, three decimals.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
sleep_until_ns() {
  local d=$(( $1 - $(now_ns) ))
  (( d > 0 )) || return 0
  sleep "$((d / 1000000000)).$(printf '%09d' $((d % 1000000000)))"
}

work=$(mktemp -d /tmp/trireme-largetrx-bench-XXXXXX)
# mariadbd runs as the unprivileged user trireme and must reach its datadir through here.
chmod 755 "$work"

# Children in the background that are not reaped yet: only those are signalled on exit, so
# a pid cannot have been reused by someone else's process.
bg_pids=()
forget_pid() {
  local p keep=()
  for p in "${bg_pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  bg_pids=("${keep[@]+"${keep[@]}"}")
}
stop_pid() { # SIGTERM, up to 10 s, then SIGKILL
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget_pid "$pid"
}
# A command under `timeout`, in the background and waited for: a foreground child would
# hold back the TERM trap (and so the teardown) until it ended.
bounded() { # seconds output command...
  local limit=$1 output=$2 rc=0; shift 2
  timeout "$limit" "$@" >>"$output" 2>&1 &
  local pid=$!
  bg_pids+=("$pid")
  wait "$pid" || rc=$?
  forget_pid "$pid"
  return "$rc"
}

finish() {
  local rc=$? side pid
  set +e
  trap - EXIT INT TERM
  for pid in "${bg_pids[@]}"; do stop_pid "$pid"; done
  for side in A B; do
    [ -f "$work/$side/trireme-cluster.conf" ] || continue
    timeout 300 "$trireme" cluster down --dir "$work/$side" >/dev/null 2>&1
    # A server the tool lost track of is found by its own my.cnf path, which only this
    # run's servers have.
    for pid in $(pgrep -f -- "--defaults-file=$work/$side/node[0-9]/my.cnf" || true); do
      kill -KILL "$pid" 2>/dev/null
    done
  done
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sock() { echo "$work/$1/node$2/mysqld.sock"; }
sql() { # side node limit statements
  timeout "$3" mariadb --no-defaults -S "$(sock "$1" "$2")" -uroot --connect-timeout=5 \
    -N -B -e "$4"
}
status_of() { # side node variable; empty when the node does not answer
  { sql "$1" "$2" 5 "SHOW GLOBAL STATUS LIKE '$3'" 2>/dev/null | cut -f2; } || true
}

# Until process $3 ends (and for at most an hour): t (s from $2), node, recv queue, last
# committed, flow-control paused ns, a line per node 2 and 3 every 0.25 s.
sample_nodes() { # side t0 pid
  local side=$1 t0=$2 pid=$3 n line end=$(( $(now_ns) + 3600 * 1000000000 ))
  printf 't_s\tnode\trecv_queue\tlast_committed\tfc_paused_ns\n'
  while kill -0 "$pid" 2>/dev/null && (( $(now_ns) < end )); do
    for n in 2 3; do
      line=$(sql "$side" "$n" 2 "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME
        DESC SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN
        ('WSREP_LOCAL_RECV_QUEUE', 'WSREP_LAST_COMMITTED', 'WSREP_FLOW_CONTROL_PAUSED_NS')" \
        2>/dev/null) || line=""
      # The client escapes a tab inside a value, so the values come space-separated.
      [ -n "$line" ] && printf '%s\t%s\t%s\n' "$(secs "$t0" "$(now_ns)")" "$n" "${line// /$'\t'}"
    done
    sleep 0.25
  done
}

# Rows lo..hi of sr.t, 100,000 per autocommit INSERT (each one transaction, no SR); rows
# already there are kept. Deterministic content, so that every refill writes the same bytes.
fill() { # side lo hi
  local side=$1 lo=$2 hi=$3 a b
  for (( a = lo; a <= hi; a += chunk )); do
    b=$(( a + chunk - 1 )); (( b <= hi )) || b=$hi
    bounded 900 "$out/large-trx-setup-$side.log" mariadb --no-defaults -S "$(sock "$side" 1)" \
      -uroot --connect-timeout=5 -N -B -e "USE sr; INSERT IGNORE INTO t
        SELECT seq, seq % 10007, CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2), LEFT(MD5(seq + 3), 24)),
               CONCAT(MD5(-seq), LEFT(MD5(seq * 2), 28))
        FROM seq_${a}_to_${b}" || return 1
  done
}

# Until the three nodes have applied everything (equal wsrep_last_committed, empty receive
# queues; conv_s is how long that took), then `trireme cluster compare` of sr.t at rest
# (every node Synced at one unchanging seqno, CHECKSUM TABLE, the first differing rows if
# any). Sets conv_equal (yes/no), conv_s, conv_detail and conv_rows (node 1's row count).
converge() { # side limit_s
  local side=$1 t0 end n vars=() s q rc=0 report=$work/compare-$1.txt
  t0=$(now_ns); end=$(( t0 + $2 * 1000000000 ))
  conv_equal=no; conv_s=nan; conv_detail=""
  while :; do
    vars=()
    for n in 1 2 3; do
      s=$(status_of "$side" "$n" wsrep_last_committed)
      q=$(status_of "$side" "$n" wsrep_local_recv_queue)
      vars+=("$s/$q")
    done
    conv_detail="last_committed/recv_queue ${vars[*]}"
    if [[ ${vars[0]} =~ ^[0-9]+/0$ ]] && [ "${vars[0]}" = "${vars[1]}" ] \
        && [ "${vars[1]}" = "${vars[2]}" ]; then
      conv_s=$(secs "$t0" "$(now_ns)")
      break
    fi
    (( $(now_ns) < end )) || return 1
    sleep 1
  done
  "$trireme" cluster compare --dir "$work/$side" --tables sr.t --timeout "$2" \
    >"$report" 2>&1 || rc=$?
  conv_detail=$(tr '\n' ' ' < "$report")
  [ "$rc" = 0 ] || return 1
  conv_equal=yes
  conv_rows=("$(sql "$side" 1 600 "SELECT COUNT(*) FROM sr.t" 2>/dev/null || echo "?")")
}

# Every node Synced and ready in a 3-node primary component, as each of them sees it: a node
# whose provider broke may still claim all that while the others have moved on without it.
healthy() { # side
  local n vars
  for n in 1 2 3; do
    vars=$(sql "$1" "$n" 5 "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state_comment',
      'wsrep_ready', 'wsrep_cluster_status', 'wsrep_cluster_size')" 2>/dev/null | LC_ALL=C sort | cut -f2 \
      | tr '\n' ' ') || return 1
    # Sorted by name: cluster_size, cluster_status, local_state_comment, ready.
    [ "$vars" = "3 Primary Synced ON " ] || return 1
  done
}

teardown() { # side
  local side=$1 pid
  [ -f "$work/$side/trireme-cluster.conf" ] || return 0
  timeout 120 "$trireme" cluster down --dir "$work/$side" >>"$out/large-trx-setup-$side.log" 2>&1 \
    || echo "cluster $side did not stop cleanly: killing what is left of it" >&2
  for pid in $(pgrep -f -- "--defaults-file=$work/$side/node[0-9]/my.cnf" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "${work:?}/$side"
}

declare -A up=()
setup() { # side
  local side=$1 log=$out/large-trx-setup-$1.log t0 try
  echo "cluster $side: ${provider[$side]}, base port ${port[$side]}" >&2
  # A torn-down cluster's ports may stay taken for a moment by connections still closing.
  for try in 1 2 3; do
    bounded 900 "$log" "$trireme" cluster up --nodes 3 --dir "$work/$side" \
      --provider "${provider[$side]}" --base-port "${port[$side]}" --timeout 180 \
      --server-options "$server_options" && break
    if [ "$try" = 3 ] || ! tail -n 5 "$log" | grep -q 'is in use'; then
      echo "cluster $side did not come up: see $log" >&2
      return 1
    fi
    teardown "$side"
    sleep 10
  done
  record "$side" - provider "${provider[$side]}"
  record "$side" - provider_version "$(status_of "$side" 1 wsrep_provider_version)"
  t0=$(now_ns)
  sql "$side" 1 60 "CREATE DATABASE sr; CREATE TABLE sr.t (id INT PRIMARY KEY, k INT,
      c CHAR(120), pad CHAR(60)) ENGINE=InnoDB" >>"$log" 2>&1 || return 1
  if ! fill "$side" 1 "$rows"; then
    local n
    for n in 1 2 3; do
      cp "$work/$side/node$n/error.log" "$out/large-trx-setup-$side-node$n-error.log" 2>/dev/null || true
    done
    echo "filling sr.t on $side failed: see $log and large-trx-setup-$side-node*-error.log" >&2
    return 1
  fi
  record "$side" - fill_s "$(secs "$t0" "$(now_ns)")"
  sql "$side" 2 60 "CREATE DATABASE sbtest" >>"$log" 2>&1 || return 1
  bounded 600 "$log" sysbench oltp_write_only --db-driver=mysql --mysql-user=root \
    --mysql-db=sbtest --tables=$sb_tables --table-size=$sb_size --threads=2 \
    --mysql-socket="$(sock "$side" 2)" prepare || return 1
  converge "$side" 300 || echo "cluster $side not equal after setup: $conv_detail" >&2
  echo "cluster $side: sr.t filled with $rows rows in $(secs "$t0" "$(now_ns)") s (with sysbench prepare)" >&2
}

failed=0
# Ends the DELETE's client (pid $2) if the cluster loses a member for 10 s in a row while the
# DELETE runs: a commit that waits for a group which has moved on never returns by itself.
# Why it gave up goes to file $3.
watch_delete() { # side pid file
  local side=$1 pid=$2 bad=0 size server
  server=$(cat "$work/$side/node1/mysqld.pid" 2>/dev/null || echo none)
  while kill -0 "$pid" 2>/dev/null; do
    size=$(status_of "$side" 2 wsrep_cluster_size)
    if [ "$size" = 3 ] && kill -0 "$server" 2>/dev/null; then bad=0; else bad=$(( bad + 1 )); fi
    if (( bad >= 20 )); then
      if kill -0 "$server" 2>/dev/null; then
        echo "node 2 has seen a cluster of ${size:-no answer} node(s) for 10 s" > "$3"
      else
        echo "node 1's server is gone" > "$3"
      fi
      grep -q 'DELETE FROM sr.t' "/proc/$pid/cmdline" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
      return 0
    fi
    sleep 0.5
  done
}

run_variant() { # side variant
  local side=$1 variant=$2 settings pre t_fill
  local tag=$side-$variant
  local load=$out/large-trx-load-$tag.txt delete_out=$out/large-trx-$tag-delete.txt
  case $variant in
    none) settings="SET SESSION wsrep_trx_fragment_size=0;" ;;
    rows*) settings="SET SESSION wsrep_trx_fragment_unit='rows'; SET SESSION wsrep_trx_fragment_size=${variant#rows};" ;;
    bytes*) settings="SET SESSION wsrep_trx_fragment_unit='bytes'; SET SESSION wsrep_trx_fragment_size=${variant#bytes};" ;;
  esac
  record "$side" "$variant" settings "$settings"
  if ! healthy "$side"; then
    sleep 10
    if ! healthy "$side"; then
      echo "$tag: cluster $side is not 3 Synced nodes: building it anew" >&2
      record "$side" "$variant" rebuilt_before yes
      teardown "$side"
      setup "$side" || { record "$side" "$variant" result "rebuild failed"; failed=1; return 1; }
    fi
  fi

  # Untimed: every row back and every node equal before the clock starts.
  t_fill=$(now_ns)
  pre=$(sql "$side" 1 120 "SELECT COUNT(*) FROM sr.t" 2>/dev/null || echo "?")
  if [ "$pre" != "$rows" ]; then
    fill "$side" "$from" "$rows" || { record "$side" "$variant" result "refill failed"; failed=1; return 1; }
  fi
  if ! converge "$side" 600; then
    echo "$tag: nodes not equal before the DELETE ($conv_detail)" >&2
    record "$side" "$variant" result "not equal before: $conv_detail"
    failed=1
    return 1
  fi
  record "$side" "$variant" refill_s "$(secs "$t_fill" "$(now_ns)")"

  local n log_from=()
  for n in 1 2 3; do log_from[n]=$(wc -l < "$work/$side/node$n/error.log"); done

  local load_limit=$(( pre_s + delete_limit + tail_limit + post_s + 60 ))
  timeout "$load_limit" stdbuf -oL sysbench oltp_write_only --db-driver=mysql \
    --mysql-user=root --mysql-db=sbtest --tables=$sb_tables --table-size=$sb_size \
    --mysql-socket="$(sock "$side" 2)" --threads=$sb_threads --report-interval=1 \
    --time="$load_limit" --mysql-ignore-errors=all run > "$load" 2>&1 &
  local sb=$!
  bg_pids+=("$sb")
  # sysbench's per-second reports count from the start of its threads: the anchor.
  local end=$(( $(now_ns) + 30 * 1000000000 ))
  until grep -q 'Threads started' "$load" 2>/dev/null; do
    if ! kill -0 "$sb" 2>/dev/null || (( $(now_ns) >= end )); then
      echo "$tag: sysbench did not start; see $load" >&2
      stop_pid "$sb"
      record "$side" "$variant" result "load failed"
      failed=1
      return 1
    fi
    sleep 0.05
  done
  local t0
  t0=$(now_ns)
  # Flow control over the whole load: the time the group was paused (as node 2, whose load
  # it holds back, saw it) and the pause requests each node sent (who held the group).
  local fc_paused0 fc_sent0=() n
  fc_paused0=$(status_of "$side" 2 wsrep_flow_control_paused_ns)
  for n in 1 2 3; do fc_sent0[n]=$(status_of "$side" "$n" wsrep_flow_control_sent); done
  # Every 0.25 s while the load runs: what nodes 2 and 3 had ordered but not applied, their
  # last committed seqno and the group's paused time, to place a stall in time.
  sample_nodes "$side" "$t0" "$sb" > "$out/large-trx-$tag-trace.tsv" &
  bg_pids+=("$!")
  sleep_until_ns $(( t0 + pre_s * 1000000000 ))

  local repl0 bytes0 t_d0 t_d1 rc=0
  repl0=$(status_of "$side" 1 wsrep_replicated)
  bytes0=$(status_of "$side" 1 wsrep_replicated_bytes)
  # A DELETE that failed certification or was brute-force aborted is rolled back and, as an
  # autocommit statement, retried by the server (wsrep_retry_autocommit): these say so.
  local cert0 bf0
  cert0=$(status_of "$side" 1 wsrep_local_cert_failures)
  bf0=$(status_of "$side" 1 wsrep_local_bf_aborts)
  : > "$delete_out"
  local gave_up=$work/gave-up-$tag watch client
  t_d0=$(now_ns)
  timeout "$delete_limit" mariadb --no-defaults -S "$(sock "$side" 1)" -uroot \
    --connect-timeout=5 -N -B \
    -e "$settings DELETE FROM sr.t WHERE id >= $from; SELECT ROW_COUNT();" >>"$delete_out" 2>&1 &
  client=$!
  bg_pids+=("$client")
  watch_delete "$side" "$client" "$gave_up" &
  watch=$!
  bg_pids+=("$watch")
  wait "$client" || rc=$?
  t_d1=$(now_ns)
  forget_pid "$client"
  stop_pid "$watch"
  if [ -f "$gave_up" ]; then
    echo "$tag: gave up on the DELETE: $(cat "$gave_up")" >&2
    record "$side" "$variant" result "gave up on the DELETE: $(cat "$gave_up")"
  fi
  local last repl1 bytes1
  last=$(status_of "$side" 1 wsrep_last_committed)
  repl1=$(status_of "$side" 1 wsrep_replicated)
  bytes1=$(status_of "$side" 1 wsrep_replicated_bytes)
  local cert1 bf1
  cert1=$(status_of "$side" 1 wsrep_local_cert_failures)
  bf1=$(status_of "$side" 1 wsrep_local_bf_aborts)

  # The apply tail: until nodes 2 and 3 have committed what node 1 had when the DELETE
  # returned (the DELETE itself and whatever the load committed before).
  local tail2=nan tail3=nan t_caught="" s2 s3 limit_ns
  limit_ns=$(( t_d1 + tail_limit * 1000000000 ))
  if [ "$rc" = 0 ] && [[ $last =~ ^[0-9]+$ ]]; then
    while (( $(now_ns) < limit_ns )); do
      if [ "$tail2" = nan ]; then
        s2=$(status_of "$side" 2 wsrep_last_committed)
        [[ $s2 =~ ^[0-9]+$ ]] && (( s2 >= last )) && tail2=$(secs "$t_d1" "$(now_ns)")
      fi
      if [ "$tail3" = nan ]; then
        s3=$(status_of "$side" 3 wsrep_last_committed)
        [[ $s3 =~ ^[0-9]+$ ]] && (( s3 >= last )) && tail3=$(secs "$t_d1" "$(now_ns)")
      fi
      if [ "$tail2" != nan ] && [ "$tail3" != nan ]; then t_caught=$(now_ns); break; fi
      sleep 0.1
    done
  fi
  local stop_at=$(( t_d1 + post_s * 1000000000 ))
  if [ -n "$t_caught" ] && (( t_caught + 2000000000 > stop_at )); then
    stop_at=$(( t_caught + 2000000000 ))
  fi
  sleep_until_ns "$stop_at"
  local t_end
  t_end=$(now_ns)
  stop_pid "$sb"
  local fc_paused1 fc_sent1
  fc_paused1=$(status_of "$side" 2 wsrep_flow_control_paused_ns)
  if [[ $fc_paused0 =~ ^[0-9]+$ && $fc_paused1 =~ ^[0-9]+$ ]]; then
    record "$side" "$variant" fc_paused_ms "$(( (fc_paused1 - fc_paused0) / 1000000 ))"
  fi
  for n in 1 2 3; do
    fc_sent1=$(status_of "$side" "$n" wsrep_flow_control_sent)
    if [[ ${fc_sent0[n]} =~ ^[0-9]+$ && $fc_sent1 =~ ^[0-9]+$ ]]; then
      record "$side" "$variant" "fc_sent_node$n" "$(( fc_sent1 - fc_sent0[n] ))"
    fi
  done

  local ok=yes deleted
  deleted=$(tail -n 1 "$delete_out" | tr -d '[:space:]')
  if [ "$rc" != 0 ] || ! [[ $deleted =~ ^[0-9]+$ ]]; then
    ok=no
    echo "$tag: the DELETE failed (exit $rc): $(tr '\n' ' ' < "$delete_out" | cut -c1-300)" >&2
  fi
  record "$side" "$variant" delete_rc "$rc"
  record "$side" "$variant" deleted_rows "${deleted:-nan}"
  [ "$ok" = yes ] || record "$side" "$variant" delete_error "$(tr '\n\t' '  ' < "$delete_out" | cut -c1-300)"
  record "$side" "$variant" delete_ms "$(( (t_d1 - t_d0) / 1000000 ))"
  record "$side" "$variant" delete_start_s "$(secs "$t0" "$t_d0")"
  record "$side" "$variant" delete_end_s "$(secs "$t0" "$t_d1")"
  record "$side" "$variant" load_end_s "$(secs "$t0" "$t_end")"
  record "$side" "$variant" tail_node2_s "$tail2"
  record "$side" "$variant" tail_node3_s "$tail3"
  local tail=nan
  [ -n "$t_caught" ] && tail=$(awk -v a="$tail2" -v b="$tail3" 'BEGIN { print (a > b ? a : b) }')
  record "$side" "$variant" apply_tail_s "$tail"
  if [[ $repl0 =~ ^[0-9]+$ && $repl1 =~ ^[0-9]+$ ]]; then
    record "$side" "$variant" node1_writesets "$(( repl1 - repl0 ))"
  fi
  if [[ $bytes0 =~ ^[0-9]+$ && $bytes1 =~ ^[0-9]+$ ]]; then
    record "$side" "$variant" node1_bytes "$(( bytes1 - bytes0 ))"
  fi
  if [[ $cert0 =~ ^[0-9]+$ && $cert1 =~ ^[0-9]+$ ]]; then
    record "$side" "$variant" node1_cert_failures "$(( cert1 - cert0 ))"
  fi
  if [[ $bf0 =~ ^[0-9]+$ && $bf1 =~ ^[0-9]+$ ]]; then
    record "$side" "$variant" node1_bf_aborts "$(( bf1 - bf0 ))"
  fi
  record "$side" "$variant" load_file "$(basename "$load")"

  conv_rows=()
  if healthy "$side"; then
    converge "$side" "$converge_limit" || true
  else
    conv_equal=n/a; conv_s=nan; conv_detail="cluster $side not 3 Synced nodes"
    echo "$tag: $conv_detail after the DELETE" >&2
  fi
  record "$side" "$variant" checksums_equal "$conv_equal"
  record "$side" "$variant" converge_s "$conv_s"
  [ "$conv_equal" = yes ] || record "$side" "$variant" not_equal "$conv_detail"
  [ "$conv_equal" = yes ] || failed=1
  [ "$conv_equal" = yes ] && record "$side" "$variant" rows_after "${conv_rows[0]}"
  # Fragments of a finished SR transaction must be gone from every node.
  local left=()
  for n in 1 2 3; do
    left+=("$(sql "$side" "$n" 60 "SELECT COUNT(*) FROM mysql.wsrep_streaming_log" 2>/dev/null || echo "?")")
  done
  record "$side" "$variant" streaming_log_rows "${left[*]}"

  local errlog=$out/large-trx-$tag-errorlogs.txt
  {
    for n in 1 2 3; do
      echo "==== node$n error.log during $tag"
      tail -n +"$(( log_from[n] + 1 ))" "$work/$side/node$n/error.log"
    done
  } > "$errlog"
  record "$side" "$variant" errorlog_errors "$(grep -c '\[ERROR\]' "$errlog" || true)"
  record "$side" "$variant" errorlog_panics "$(grep -c 'panicked at' "$errlog" || true)"
  local first
  first=$(grep -m1 -A1 'panicked at' "$errlog" | tr '\n\t' '  ' | cut -c1-300 || true)
  [ -n "$first" ] && record "$side" "$variant" errorlog_first_panic "$first"
  first=$(grep -m1 '\[ERROR\]' "$errlog" | tr '\t' ' ' | cut -c1-300 || true)
  [ -n "$first" ] && record "$side" "$variant" errorlog_first_error "$first"
  # Stopping sysbench leaves one "Aborted connection" warning per thread: not counted.
  record "$side" "$variant" errorlog_warnings \
    "$(grep '\[Warning\]' "$errlog" | grep -vc 'Aborted connection' || true)"

  echo "$tag: DELETE $(( (t_d1 - t_d0) / 1000000 )) ms (${deleted:-?} rows, $ok)," \
    "node 1 write-sets $(( ${repl1:-0} - ${repl0:-0} )), apply tail $tail s," \
    "checksums equal: $conv_equal" >&2
  [ "$ok" = yes ] && [ "$conv_equal" = yes ] || failed=1
}

for side in A B; do
  if setup "$side"; then up[$side]=1; else record "$side" - result "setup failed"; failed=1; fi
done
i=0
for variant in $variants; do
  i=$(( i + 1 ))
  if (( i % 2 == 1 )); then order="A B"; else order="B A"; fi
  for side in $order; do
    [ -n "${up[$side]:-}" ] || continue
    run_variant "$side" "$variant" || true
  done
done

# The raw figures; zero-tps runs and tps come from report.py.
value() { # side variant what
  awk -F'\t' -v s="$1" -v v="$2" -v w="$3" '$1 == s && $2 == v && $3 == w { x = $4 }
    END { print (x == "" ? "n/a" : x) }' "$tsv"
}
echo "Large transaction: DELETE of rows $from..$rows on node 1, oltp_write_only on node 2"
printf '%-4s %-10s %10s %10s %12s %9s %9s\n' side variant delete_ms rows writesets tail_s equal
for variant in $variants; do
  for side in A B; do
    printf '%-4s %-10s %10s %10s %12s %9s %9s\n' "$side" "$variant" \
      "$(value "$side" "$variant" delete_ms)" "$(value "$side" "$variant" deleted_rows)" \
      "$(value "$side" "$variant" node1_writesets)" "$(value "$side" "$variant" apply_tail_s)" \
      "$(value "$side" "$variant" checksums_equal)"
  done
done
exit "$failed"
