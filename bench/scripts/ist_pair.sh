#!/usr/bin/env bash
# IST side by side: the same 3-node MariaDB cluster on Trireme and on Galera. Node 3 is
# stopped (its datadir kept aside), sysbench oltp_write_only commits WRITE_SETS transactions
# on node 1, then node 3 is started from the kept datadir once per applier count and catches
# up by IST from a donor's gcache. The IST rate is timed from wsrep_last_committed on node 3
# (polled every 0.1 s): write-sets applied / seconds from the first to the last one.
#
#   bench/scripts/ist_pair.sh [write_sets=300000] [appliers="1 2 4"]
#
# Provider A is Trireme and B Galera unless IST_PROVIDER_A / IST_PROVIDER_B say otherwise;
# their clusters use base ports IST_PORT_A / IST_PORT_B (26300, 27300). Prints one line per
# provider and applier count, then the ratios; raw figures go to
# $TRIREME_BENCH_OUT (default bench-out)/ist.tsv.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/catch_up.sh
write_sets=${1:-300000}; appliers=${2:-"1 2 4"}
trireme=$PWD/target/release/trireme
cargo build --release --quiet -p provider -p cli
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/ist.tsv
printf 'provider\tappliers\twrite_sets\tseconds\twrite_sets_per_s\thow\n' > "$tsv"
# About 1.2 KB per oltp_write_only write-set: the donors' caches hold the whole gap.
gcache_mb=$(( write_sets * 2 / 1000 + 64 ))

status_of() { # socket var
  timeout 5 mariadb --no-defaults -S "$1" -uroot -N -B -e "SHOW STATUS LIKE '$2'" 2>/dev/null \
    | awk '{print $2}'
}

# The cluster directory in use, stopped and removed on any exit (also when interrupted).
current=""
finish() {
  if [ -n "$current" ]; then
    timeout 120 "$trireme" cluster down --dir "$current/c" >/dev/null 2>&1 || true
    rm -rf "$current"
  fi
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_provider() {
  local name=$1 provider=$2 port=$3 dir
  dir=$(mktemp -d /tmp/trireme-ist-bench-XXXXXX)
  chmod 755 "$dir"
  current=$dir
  "$trireme" cluster up --nodes 3 --dir "$dir/c" --provider "$provider" --base-port "$port" \
    --provider-options "gcache.size=${gcache_mb}M" >/dev/null 2>&1
  "$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$dir/c" >/dev/null
  local common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=8
                --table-size=10000 --mysql-socket="$dir/c/node1/mysqld.sock")
  sysbench oltp_write_only "${common[@]}" --threads=4 prepare >/dev/null
  "$trireme" cluster stop 3 --dir "$dir/c" >/dev/null 2>&1
  cp -a "$dir/c/node3/data" "$dir/node3-data.kept"
  local from
  from=$(status_of "$dir/c/node1/mysqld.sock" wsrep_last_committed)
  sysbench oltp_write_only "${common[@]}" --threads=8 --events="$write_sets" --time=0 \
    --mysql-ignore-errors=1213,1205 run > "$out/ist-load-$name.txt"
  local target
  target=$(status_of "$dir/c/node1/mysqld.sock" wsrep_last_committed)
  local gap=$(( target - from ))
  local n
  for n in $appliers; do
    rm -rf "$dir/c/node3/data"
    cp -a "$dir/node3-data.kept" "$dir/c/node3/data"
    sed -i "s/^wsrep_slave_threads=.*/wsrep_slave_threads=$n/" "$dir/c/node3/my.cnf"
    local log_lines
    log_lines=$(wc -l < "$dir/c/node3/error.log")
    "$trireme" cluster start 3 --dir "$dir/c" >/dev/null 2>&1 &
    local starter=$! seconds rate
    read -r seconds rate < <(time_catch_up "$from" "$target" 1800 \
      status_of "$dir/c/node3/mysqld.sock" wsrep_last_committed)
    wait "$starter" || true
    # Trireme and Galera each name the transfer in the joiner's log.
    local how=SST
    tail -n +"$log_lines" "$dir/c/node3/error.log" \
      | grep -q "receiving IST of seqnos\|Receiving IST:" && how=IST
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$n" "$gap" "$seconds" "$rate" "$how" >> "$tsv"
    printf '%s (%s) appliers %s  gap %7s  IST %7s s  %8s write-sets/s  (%s)\n' \
      "$name" "$(basename "$provider")" "$n" "$gap" "$seconds" "$rate" "$how"
    "$trireme" cluster stop 3 --dir "$dir/c" >/dev/null 2>&1
  done
  finish
  current=""
}

run_provider A "${IST_PROVIDER_A:-$PWD/target/release/libtrireme.so}" "${IST_PORT_A:-26300}"
run_provider B "${IST_PROVIDER_B:-/usr/lib/galera/libgalera_smm.so}" "${IST_PORT_B:-27300}"
echo "ratios (A / B write-sets/s):"
awk -F'\t' 'NR > 1 { rate[$1 "/" $2] = $5; n[$2] = 1 }
  END { for (a in n) if (rate["B/" a] > 0)
          printf "  appliers %s: %.2fx\n", a, rate["A/" a] / rate["B/" a] }' "$tsv"
