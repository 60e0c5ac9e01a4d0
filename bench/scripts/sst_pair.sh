#!/usr/bin/env bash
# Full state transfer (SST) under load, one SST method after another, in one run on this
# machine. One 3-node cluster (on Trireme unless SST_PROVIDER says otherwise), the sysbench
# tables prepared once on node 1; for each method, wsrep_sst_method is switched and
# oltp_write_only (4 threads, unthrottled) starts on node 1; 10 s later node 3 is stopped and
# its datadir emptied, and 10 s after that node 3 is started again and has to receive the
# whole datadir. Timed from `trireme cluster start 3` until node 3 reports Synced (polled every
# 0.2 s); sysbench's 1-s reports give node 1's tps with the whole cluster, in the 10 s before
# the start (node 3 lost), up to node 3's first JOINED poll (the transfer), during the transfer,
# and from JOINED until Synced (the catch-up; also timed, joined_to_synced_seconds). Once sysbench is
# stopped, `trireme cluster compare` compares the three nodes at rest (all Synced at one
# unchanging seqno, then CHECKSUM TABLE; a difference names the first differing rows). Last, node 2 is stopped and its datadir copied with tar and
# with cp: what the disk does here with no database in between, the ceiling a transfer could
# reach.
#
#   bench/scripts/sst_pair.sh [tables=8] [table_size=1000000] [methods="trireme rsync mariabackup"]
#
#   SST_PROVIDER   provider library (default target/release/libtrireme.so)
#   SST_PORT       base port of the cluster (default 28300)
#   SST_DONOR      wsrep_sst_donor of node 3 (default node1, the loaded node, so that every
#                  method is measured with the same donor; empty: the group picks)
#   SST_TIMEOUT    seconds node 3 may take to become Synced (default 1800)
#   SST_OPTIONS    settings for the [sst] group of every node's my.cnf, separated by ";"
#                  (for example "parallel=2"; default none)
#
# Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/sst.tsv, one line per measured
# thing (subject, what, value; MB = 10^6 bytes), sysbench's output to sst-load-METHOD.txt, the
# tool output to sst-METHOD.log and the three error logs from the start of node 3 on to
# sst-METHOD-errorlogs.txt; a summary goes to stdout. Exits 1 if a method failed or its
# checksums differed.
#
# Time: on a 2-core machine (64 MB buffer pool, three servers applying) prepare took 31 s for
# 1 table of 1M rows and 49 s for 2 (two at a time); each 1M-row table adds about 235 MB to
# a 156 MB empty datadir. The default 8 x 1M rows (about 2 GB) so takes 3-4 minutes to
# prepare, before the transfers and one comparison (three CHECKSUM TABLE passes) per method.
set -euo pipefail
cd "$(dirname "$0")/../.."
tables=${1:-8}; table_size=${2:-1000000}; methods=${3:-"trireme rsync mariabackup"}
target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$PWD/$target
trireme=$target/release/trireme
provider=${SST_PROVIDER:-$target/release/libtrireme.so}
base_port=${SST_PORT:-28300}
donor_pin=${SST_DONOR-node1}
limit=${SST_TIMEOUT:-1800}
sst_options=${SST_OPTIONS:-}
# The trireme method runs wsrep_sst_trireme, which `trireme cluster` finds next to itself;
# it is the `sst` package's binary, which building cli alone does not produce.
packages=(-p provider -p cli)
if [[ " $methods " == *" trireme "* ]] && [ -f crates/sst/Cargo.toml ]; then packages+=(-p sst); fi
cargo build --release --quiet "${packages[@]}"
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null
if [[ " $methods " == *" mariabackup "* ]]; then
  command -v mariadb-backup >/dev/null || apt-get install -y mariadb-backup >/dev/null
fi
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/sst.tsv
printf 'subject\twhat\tvalue\n' > "$tsv"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$tsv"; }
record run tables "$tables"
record run table_size "$table_size"
record run donor_pin "${donor_pin:-any}"
record run sst_options "${sst_options:-none}"
record run provider "$provider"

now() { date +%s.%N; }
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# MB/s of $1 bytes in $2 seconds; nan when there is no time to divide by.
mb_per_s() {
  awk -v b="$1" -v s="$2" 'BEGIN { if (s + 0 > 0) printf "%.1f", b / 1e6 / s; else print "nan" }'
}
# $1 / $2 with two decimals, or nan.
ratio_of() {
  awk -v a="$1" -v b="$2" \
    'BEGIN { if (a != "nan" && b != "nan" && b + 0 > 0) printf "%.2f", a / b; else print "nan" }'
}
status_of() { # socket variable
  { timeout 5 mariadb --no-defaults -S "$1" -uroot -N -B -e "SHOW STATUS LIKE '$2'" \
      2>/dev/null | cut -f2; } || true
}

# Every copy and every transfer starts with a cold page cache: what the donor reads comes
# from the disk, for each method alike (sync first, so that dirty pages are written and
# dropped too). Needs root; `cold` in sst.tsv says whether it worked.
cold=no
drop_caches() {
  sync
  if { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then cold=yes; else cold=no; fi
}

# What is running, stopped and removed on any exit (also when interrupted).
current=""; load_pid=""; starter_pid=""
stop_pid() { # pid: SIGTERM, up to 10 s, then SIGKILL; only for our own children
  local pid=$1 i
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
finish() {
  if [ -n "$load_pid" ]; then stop_pid "$load_pid"; load_pid=""; fi
  if [ -n "$starter_pid" ]; then stop_pid "$starter_pid"; starter_pid=""; fi
  if [ -n "$current" ]; then
    timeout 300 "$trireme" cluster down --dir "$current/c" >/dev/null 2>&1 || true
    # A server the tool lost track of (say, killed while starting it) is found by its own
    # my.cnf path, which only this run's servers have, and stopped by pid.
    local pid
    for pid in $(pgrep -f -- "--defaults-file=$current/c/node[0-9]/my.cnf" || true); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$current"
    current=""
  fi
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. bench/scripts/sysbench_tps.sh

# Copies node 2's datadir (node 2 cleanly stopped) with `tar | tar` and with `cp -r`, each from
# a cold page cache. "seconds" ends when the command returns (the data may still sit in the
# page cache, as after an SST); "seconds_synced" also includes the sync that writes it out.
copy_ceilings() { # cluster dir
  local c=$1/c bytes t0 t1 t2 how
  step "$trireme" cluster stop 2 --dir "$c" || return 1
  bytes=$(du -sb "$c/node2/data" | cut -f1)
  for how in tar cp; do
    rm -rf "$1/copy"
    drop_caches
    t0=$(now)
    if [ "$how" = tar ]; then
      mkdir "$1/copy"
      tar -C "$c/node2/data" -cf - . | tar -C "$1/copy" -xf - || return 1
    else
      cp -r "$c/node2/data" "$1/copy" || return 1
    fi
    t1=$(now)
    sync
    t2=$(now)
    record "$how" bytes "$bytes"
    record "$how" seconds "$(seconds_between "$t0" "$t1")"
    record "$how" seconds_synced "$(seconds_between "$t0" "$t2")"
    record "$how" mb_per_s "$(mb_per_s "$bytes" "$(seconds_between "$t0" "$t1")")"
    record "$how" cold "$cold"
    rm -rf "$1/copy"
  done
}

# Runs a command with its output into the method's log; on failure says which and returns 1
# (run_method runs under `||`, where set -e does not act, so every step is checked).
step() {
  "$@" >>"$log" 2>&1 && return 0
  echo "failed: $* (see $log)" >&2
  return 1
}

# Compares the sysbench tables on the three nodes at rest (`trireme cluster compare`: every
# node Synced at one unchanging seqno, then CHECKSUM TABLE, and the first differing rows if
# any). Prints yes, no (the report goes to stderr and $2) or "not at rest".
compare_at_rest() { # method report
  local list="" i rc=0
  for i in $(seq 1 "$tables"); do list+="sbtest.sbtest$i,"; done
  "$trireme" cluster compare --dir "$c" --tables "${list%,}" --timeout 1200 >"$2" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo yes
  elif grep -q 'differ$' "$2"; then
    echo "$1: the nodes differ:" >&2
    cat "$2" >&2
    echo no
  else
    echo "$1: no comparison: $(tail -n 1 "$2")" >&2
    echo "not at rest"
  fi
}

failed=0
log=/dev/null
# One cluster for every method (the dataset is prepared once): created with the first
# method; each method is then switched on at runtime on nodes 1 and 2 (wsrep_sst_method is
# dynamic) and in node 3's my.cnf.
c=""; bytes=""; prepare_seconds=""
setup_cluster() { # first-method port
  local method=$1 port=$2 dir
  dir=$(mktemp -d /tmp/trireme-sst-bench-XXXXXX)
  chmod 755 "$dir"
  current=$dir
  c=$dir/c
  log=$out/sst-setup.log
  : > "$log"
  echo "a 3-node cluster in $c, base port $port" >&2
  if ! step "$trireme" cluster up --nodes 3 --dir "$c" --provider "$provider" \
      --base-port "$port" --sst-method "$method"; then
    tail -n 5 "$log" >&2
    return 1
  fi
  if [ -n "$donor_pin" ]; then
    sed -i "s/^wsrep_sst_method=.*/&\nwsrep_sst_donor=$donor_pin/" "$c/node3/my.cnf"
  fi
  if [ -n "$sst_options" ]; then
    local f setting settings
    IFS=';' read -ra settings <<< "$sst_options"
    for f in "$c"/node*/my.cnf; do
      printf '\n[sst]\n' >> "$f"
      for setting in "${settings[@]}"; do echo "$setting" | xargs >> "$f"; done
    done
  fi
  # mariadb-backup and trireme log into the donor with these credentials.
  grep -q '^wsrep_sst_auth=' "$c/node3/my.cnf" \
    || sed -i "s/^wsrep_sst_method=.*/&\nwsrep_sst_auth=root:/" "$c"/node*/my.cnf
  step "$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$c" || return 1
  common+=(--mysql-socket="$c/node1/mysqld.sock")
  local t0 t1
  t0=$(now)
  step sysbench oltp_write_only "${common[@]}" --threads=2 prepare || return 1
  t1=$(now)
  bytes=$(du -sb "$c/node1/data" | cut -f1)
  prepare_seconds=$(seconds_between "$t0" "$t1")
  echo "prepared $tables x $table_size rows in $prepare_seconds s, node 1's datadir $bytes bytes" >&2
}

run_method() { # method
  local method=$1 n
  log=$out/sst-$method.log
  : > "$log"
  record "$method" prepare_seconds "$prepare_seconds"
  record "$method" datadir_bytes "$bytes"
  for n in 1 2; do
    step "$trireme" cluster sql "$n" "SET GLOBAL wsrep_sst_method='$method'" --dir "$c" \
      || return 1
  done
  sed -i "s/^wsrep_sst_method=.*/wsrep_sst_method=$method/" "$c"/node*/my.cnf

  local load_out=$out/sst-load-$method.txt t_load
  t_load=$(now)
  # Bounded by --time (the whole wait for node 3 and some slack), stopped by pid once node 3
  # is Synced. stdbuf: every report line reaches the file at once, also when killed.
  stdbuf -oL sysbench oltp_write_only "${common[@]}" --threads=4 --rate=0 \
    --time=$(( limit + 120 )) --report-interval=1 --mysql-ignore-errors=1213,1205 run \
    > "$load_out" 2>&1 &
  load_pid=$!
  # The load runs first on the whole cluster (node 3 Synced), then on the two nodes left once
  # node 3 is lost: on one machine the third server's applying costs the donor's clients CPU,
  # so both are baselines for what the transfer costs them.
  sleep 10
  local t_full
  t_full=$(now)
  # Forcing a full SST: node 3 becomes a brand-new member. Its datadir is emptied but kept
  # (owner trireme, mode 0750), exactly the state `trireme cluster up` leaves nodes 2 and 3
  # in before they first join: no grastate.dat, so no saved position (IST is impossible and
  # `cluster start` runs no --wsrep-recover), no gcache, no tables. The server starts on an
  # empty datadir as those nodes did; only a full transfer can give it the data.
  if ! step "$trireme" cluster stop 3 --dir "$c"; then
    # The load started already: the next method must not find it running.
    stop_pid "$load_pid"
    load_pid=""
    return 1
  fi
  find "$c/node3/data" -mindepth 1 -delete
  sleep 10
  if ! kill -0 "$load_pid" 2>/dev/null; then
    echo "$method: sysbench stopped early; see $load_out" >&2
    record "$method" result "load failed"
    return 1
  fi
  local t_before n
  t_before=$(now)
  local s_before
  s_before=$(seconds_between "$t_load" "$t_before")
  local log_from=()
  for n in 1 2 3; do log_from[n]=$(wc -l < "$c/node$n/error.log"); done
  drop_caches
  record "$method" cold "$cold"

  local t_start t_end="" t_joined="" result=timeout donor="" state rc deadline
  t_start=$(now)
  "$trireme" cluster start 3 --dir "$c" --timeout "$limit" >>"$log" 2>&1 &
  starter_pid=$!
  deadline=$(( $(date +%s) + limit + 30 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    state=$(status_of "$c/node3/mysqld.sock" wsrep_local_state_comment)
    if [ "$state" = Synced ]; then t_end=$(now); result=synced; break; fi
    # The transfer is over at JOINED; from there to Synced the node works off what the
    # cluster ordered meanwhile (a poll may miss a short JOINED: then it is not timed).
    if [ "$state" = Joined ] && [ -z "$t_joined" ]; then t_joined=$(now); fi
    # The donor shows Donor/Desynced for as long as it serves the transfer.
    if [ -z "$donor" ]; then
      for n in 1 2; do
        case $(status_of "$c/node$n/mysqld.sock" wsrep_local_state_comment) in
          Donor*) donor=node$n ;;
        esac
      done
    fi
    # `cluster start` returns 0 once node 3 is Synced (seen on the next round) or fails.
    if [ -n "$starter_pid" ] && ! kill -0 "$starter_pid" 2>/dev/null; then
      rc=0; wait "$starter_pid" || rc=$?
      starter_pid=""
      if [ "$rc" -ne 0 ]; then result=failed; break; fi
    fi
    sleep 0.2
  done
  stop_pid "$load_pid"
  load_pid=""
  if [ -n "$starter_pid" ]; then
    if [ "$result" = synced ]; then wait "$starter_pid" || true; else stop_pid "$starter_pid"; fi
    starter_pid=""
  fi
  {
    for n in 1 2 3; do
      echo "==== node$n error.log from the start of node 3 on"
      tail -n +"$(( log_from[n] + 1 ))" "$c/node$n/error.log"
    done
  } > "$out/sst-$method-errorlogs.txt"
  if [ -z "$donor" ]; then
    # Missed by the polls (a very short transfer): the server runs its SST script as donor
    # with "--role 'donor'" and logs that command line.
    for n in 1 2; do
      tail -n +"$(( log_from[n] + 1 ))" "$c/node$n/error.log" | grep -q "role 'donor'" \
        && donor=node$n
    done
  fi

  local sst_seconds=nan before during joiner_bytes=nan equal=n/a
  [ "$result" = synced ] && sst_seconds=$(seconds_between "$t_start" "$t_end")
  before=$(tps_median "$load_out" "$(awk -v s="$s_before" 'BEGIN { print s - 10 }')" \
    "$s_before")
  during=$(tps_median "$load_out" "$(seconds_between "$t_load" "$t_start")" \
    "$(seconds_between "$t_load" "${t_end:-$(now)}")")
  record "$method" result "$result"
  record "$method" sst_seconds "$sst_seconds"
  record "$method" sst_mb_per_s "$(mb_per_s "$bytes" "$sst_seconds")"
  record "$method" donor "${donor:-unknown}"
  record "$method" tps_before "$before"
  record "$method" tps_during "$during"
  record "$method" tps_ratio "$(ratio_of "$during" "$before")"
  local full
  full=$(tps_median "$load_out" 0 "$(seconds_between "$t_load" "$t_full")")
  record "$method" tps_full_cluster "$full"
  record "$method" tps_ratio_full_cluster "$(ratio_of "$during" "$full")"
  if [ -n "$t_joined" ]; then
    # From the start to JOINED: the snapshot's copy, its preparation and the server's start.
    local transferring
    transferring=$(tps_median "$load_out" "$(seconds_between "$t_load" "$t_start")" \
      "$(seconds_between "$t_load" "$t_joined")")
    record "$method" tps_transferring "$transferring"
    record "$method" tps_transferring_ratio "$(ratio_of "$transferring" "$before")"
  fi
  if [ "$result" = synced ] && [ -n "$t_joined" ]; then
    local catching_up
    catching_up=$(tps_median "$load_out" "$(seconds_between "$t_load" "$t_joined")" \
      "$(seconds_between "$t_load" "$t_end")")
    record "$method" joined_to_synced_seconds "$(seconds_between "$t_joined" "$t_end")"
    record "$method" tps_catching_up "$catching_up"
    record "$method" tps_catching_up_ratio "$(ratio_of "$catching_up" "$before")"
  fi

  if [ "$result" = synced ]; then
    equal=$(compare_at_rest "$method" "$out/sst-$method-compare.txt")
    joiner_bytes=$(du -sb "$c/node3/data" | cut -f1)
  else
    echo "$method: node 3 did not become Synced ($result); last lines of its error log:" >&2
    tail -n 15 "$c/node3/error.log" >&2 || true
  fi
  record "$method" checksums_equal "$equal"
  record "$method" joiner_bytes "$joiner_bytes"
  # The trireme method's joiner logs its data-copy phase as "copied <bytes> bytes in <s> s".
  local copied
  copied=$(tail -n +"$(( log_from[3] + 1 ))" "$c/node3/error.log" \
    | grep -o 'copied [0-9]* bytes in [0-9.]* s' | tail -n 1 || true)
  if [ -n "$copied" ]; then
    local copy_bytes copy_seconds
    copy_bytes=$(echo "$copied" | awk '{ print $2 }')
    copy_seconds=$(echo "$copied" | awk '{ print $5 }')
    record "$method" copy_bytes "$copy_bytes"
    record "$method" copy_seconds "$copy_seconds"
    record "$method" copy_mb_per_s "$(mb_per_s "$copy_bytes" "$copy_seconds")"
  fi
  echo "$method: $result, SST $sst_seconds s, donor ${donor:-unknown}, tps $before -> $during," \
    "checksums equal: $equal" >&2

  [ "$result" = synced ] && [ "$equal" = yes ]
}

common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables="$tables"
        --table-size="$table_size")
first=${methods%% *}
if setup_cluster "$first" "$base_port"; then
  for method in $methods; do
    run_method "$method" || failed=1
  done
  # Last: the ceilings stop node 2.
  copy_ceilings "$current" || failed=1
else
  record setup result "cluster up failed"
  failed=1
fi
finish

# The value of one figure from sst.tsv, or nan.
value() {
  awk -F'\t' -v s="$1" -v w="$2" '$1 == s && $2 == w { v = $3 }
    END { print (v == "" ? "nan" : v) }' "$tsv"
}
# Bytes as MB with one decimal.
mb() { awk -v b="$1" 'BEGIN { if (b == "nan") print b; else printf "%.1f", b / 1e6 }'; }
for method in rsync mariabackup; do
  if [[ " $methods " == *" $method "* && " $methods " == *" trireme "* ]]; then
    record ratio "${method}_over_trireme_seconds" \
      "$(ratio_of "$(value "$method" sst_seconds)" "$(value trireme sst_seconds)")"
  fi
done
if [ "$(value trireme copy_mb_per_s)" != nan ]; then
  record ratio trireme_copy_over_tar_rate \
    "$(ratio_of "$(value trireme copy_mb_per_s)" "$(value tar mb_per_s)")"
fi

echo "SST under load: $tables tables x $table_size rows, oltp_write_only 4 threads on node 1," \
  "donor requested: ${donor_pin:-any}"
printf '%-12s %9s %10s %8s %7s %6s %10s %10s %6s %9s %5s\n' method prepare_s datadir_MB sst_s \
  MB/s donor tps_before tps_during ratio checksums cold
for method in $methods; do
  printf '%-12s %9s %10s %8s %7s %6s %10s %10s %6s %9s %5s\n' "$method" \
    "$(value "$method" prepare_seconds)" \
    "$(mb "$(value "$method" datadir_bytes)")" \
    "$(value "$method" sst_seconds)" "$(value "$method" sst_mb_per_s)" \
    "$(value "$method" donor)" "$(value "$method" tps_before)" \
    "$(value "$method" tps_during)" "$(value "$method" tps_ratio)" \
    "$(value "$method" checksums_equal)" "$(value "$method" cold)"
done
echo "donor tps: before = the 10 s before the start (node 3 lost); the whole cluster = the 10 s"
echo "with node 3 Synced, before it was stopped; during = from the start to Synced (medians)"
for method in $methods; do
  echo "$method: the whole cluster $(value "$method" tps_full_cluster), during/whole" \
    "$(value "$method" tps_ratio_full_cluster); up to JOINED $(value "$method" tps_transferring)" \
    "($(value "$method" tps_transferring_ratio) of before)"
done
for method in $methods; do
  if [ "$(value "$method" joined_to_synced_seconds)" != nan ]; then
    echo "$method catch-up: JOINED to Synced in $(value "$method" joined_to_synced_seconds) s," \
      "tps $(value "$method" tps_catching_up) ($(value "$method" tps_catching_up_ratio) of before)"
  fi
done
if [ "$(value trireme copy_mb_per_s)" != nan ]; then
  echo "trireme data copy (joiner's log): $(value trireme copy_bytes) bytes in" \
    "$(value trireme copy_seconds) s, $(value trireme copy_mb_per_s) MB/s"
fi
echo "I/O ceilings (node 2's datadir, cold cache):"
for how in tar cp; do
  printf '  %-4s %s bytes  %s s  %s MB/s  (%s s with the final sync)\n' "$how" \
    "$(value "$how" bytes)" "$(value "$how" seconds)" "$(value "$how" mb_per_s)" \
    "$(value "$how" seconds_synced)"
done
echo "ratios:"
awk -F'\t' '$1 == "ratio" { printf "  %s: %s\n", $2, $3; n++ }
  END { if (!n) print "  (none: they need a trireme run)" }' "$tsv"
exit "$failed"
