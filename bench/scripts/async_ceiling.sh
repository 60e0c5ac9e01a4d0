#!/usr/bin/env bash
# The ceiling for IST: MariaDB's own parallel replication applying the same kind of
# transactions as an asynchronous replica. A standalone primary (wsrep off, binary log on)
# takes the IST scenario's load (sysbench oltp_write_only on 8 tables x 10,000 rows, 8
# threads, WRITE_SETS transactions). A replica made from the primary's datadir before the
# load first fetches the whole binary log (IO thread only), then applies it with
# slave_parallel_threads=N and slave_parallel_mode=optimistic, once per N, from the same
# starting datadir each time. Both servers keep the cluster's my.cnf otherwise (no binary log
# on the replica, a redo flush at every commit, as on an IST joiner). The rate is timed as
# ist_pair.sh times IST: gtid_slave_pos polled every 0.1 s, transactions applied / seconds
# from the first to the last one.
#
#   bench/scripts/async_ceiling.sh [write_sets=100000] [appliers="1 2 4"]
#
# CEILING_PROVIDER names the provider library `trireme cluster up` writes into the my.cnf
# (never loaded here: both servers run with --wsrep-provider=none), CEILING_PORT the base
# port (default 28300). Prints one line per applier count; raw figures go to
# $TRIREME_BENCH_OUT (default bench-out)/ist_ceiling.tsv.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/catch_up.sh
write_sets=${1:-100000}; appliers=${2:-"1 2 4"}
build=${CARGO_TARGET_DIR:-target}
[[ $build == /* ]] || build=$PWD/$build
trireme=${TRIREME_CLI:-$build/release/trireme}
provider=${CEILING_PROVIDER:-$build/release/libtrireme.so}
base_port=${CEILING_PORT:-28300}
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
[ -x "$trireme" ] || cargo build --release --quiet -p cli
command -v sysbench >/dev/null || apt-get install -y sysbench >/dev/null
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/ist_ceiling.tsv
printf 'appliers\ttransactions\tseconds\ttransactions_per_s\n' > "$tsv"
# How long the replica may take to fetch the binary log, and to apply it.
fetch_limit=600; apply_limit=1800

dir=$(mktemp -d /tmp/trireme-ceiling-XXXXXX)
chmod 755 "$dir"
primary_pid=""; replica_pid=""
stop_server() { # pid
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1"
  timeout 120 tail --pid="$1" -f /dev/null || kill -KILL "$1"
}
finish() {
  stop_server "$replica_pid"; stop_server "$primary_pid"
  rm -rf "$dir"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The datadir and my.cnf of a 1-node cluster, stopped cleanly at once.
"$trireme" cluster up --nodes 1 --dir "$dir/c" --provider "$provider" --base-port "$base_port" \
  >/dev/null 2>&1
"$trireme" cluster down --dir "$dir/c" >/dev/null 2>&1
user=$(sed -n 's/^user=//p' "$dir/c/trireme-cluster.conf")
cnf=$dir/c/node1/my.cnf
primary_port=$(sed -n 's/^port=//p' "$cnf")
replica_port=$(( base_port + 50 ))
# The servers' files (sockets, pid files, logs) go where their unprivileged user may write.
srv=$dir/srv
mkdir "$srv"
[ -n "$user" ] && chown "$user" "$srv"
cp -a "$dir/c/node1/data" "$dir/primary"

# Starts mariadbd (wsrep off) on datadir NAME with its own socket, port and logs; waits
# until it answers.
start_server() { # name port extra-args... ; sets started_pid
  local name=$1 port=$2; shift 2
  local args=(--defaults-file="$cnf" --wsrep-on=OFF --wsrep-provider=none
              --datadir="$dir/$name" --socket="$srv/$name.sock" --port="$port"
              --bind-address=127.0.0.1 --pid-file="$srv/$name.pid"
              --log-error="$srv/$name.err" "$@")
  [ -n "$user" ] && args+=(--user="$user")
  "$mariadbd" "${args[@]}" >>"$srv/$name.out" 2>&1 &
  started_pid=$!
  local i
  for i in $(seq 1 240); do
    sql "$name" "SELECT 1" >/dev/null 2>&1 && return 0
    kill -0 "$started_pid" 2>/dev/null || { echo "$name exited:" >&2; tail -n 20 "$srv/$name.err" >&2; exit 1; }
    sleep 0.5
  done
  echo "$name did not answer within 120 s" >&2; exit 1
}
sql() { # name statement
  timeout 30 mariadb --no-defaults -S "$srv/$1.sock" -uroot -N -B -e "$2"
}
# The seqno of a server's last GTID in domain 0 (a GTID list is domain-server-seqno,...).
gtid_seqno() { # gtid-list
  tr ',' '\n' <<<"$1" | awk -F- '$1 == 0 { print $3 }' | tail -n 1
}
# The last transaction the replica applied.
replica_seqno() {
  gtid_seqno "$(sql replica "SELECT @@gtid_slave_pos" || true)"
}

start_server primary "$primary_port" --log-bin=primary-bin --server-id=1
primary_pid=$started_pid
sql primary "CREATE DATABASE sbtest; CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'ceiling';
             GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'"
common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=8 --table-size=10000
        --mysql-socket="$srv/primary.sock")
sysbench oltp_write_only "${common[@]}" --threads=4 prepare >/dev/null
start_gtid=$(sql primary "SELECT @@gtid_binlog_pos")
stop_server "$primary_pid"
# The replica starts from the primary's data as it was after the prepare.
cp -a "$dir/primary" "$dir/replica.kept"
start_server primary "$primary_port" --log-bin=primary-bin --server-id=1
primary_pid=$started_pid
sysbench oltp_write_only "${common[@]}" --threads=8 --events="$write_sets" --time=0 \
  --mysql-ignore-errors=1213,1205 run > "$out/ist_ceiling-load.txt"
read -r binlog_file binlog_pos _ < <(sql primary "SHOW MASTER STATUS")
end_gtid=$(sql primary "SELECT @@gtid_binlog_pos")
from=$(gtid_seqno "$start_gtid"); target=$(gtid_seqno "$end_gtid")
[ -n "$from" ] && [ -n "$target" ] && [ "$target" -gt "$from" ] \
  || { echo "no transactions in the primary's binary log ($start_gtid .. $end_gtid)" >&2; exit 1; }

for n in $appliers; do
  rm -rf "$dir/replica"
  cp -a "$dir/replica.kept" "$dir/replica"
  start_server replica "$replica_port" --server-id=2 --skip-log-bin --skip-slave-start \
    --relay-log=replica-relay --slave-parallel-threads="$n" --slave-parallel-mode=optimistic
  replica_pid=$started_pid
  sql replica "SET GLOBAL gtid_slave_pos='$start_gtid';
               CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary_port,
                 MASTER_USER='repl', MASTER_PASSWORD='ceiling', MASTER_USE_GTID=slave_pos;
               START SLAVE IO_THREAD"
  fetched=""
  for _ in $(seq 1 $(( fetch_limit * 10 ))); do
    status=$(timeout 30 mariadb --no-defaults -S "$srv/replica.sock" -uroot -e \
      "SHOW SLAVE STATUS\G")
    file=$(awk '/ Master_Log_File:/ { print $2 }' <<<"$status")
    pos=$(awk '/ Read_Master_Log_Pos:/ { print $2 }' <<<"$status")
    if [ "$file" = "$binlog_file" ] && [ "$pos" = "$binlog_pos" ]; then fetched=1; break; fi
    sleep 0.1
  done
  [ -n "$fetched" ] || { echo "the replica did not fetch the binary log in ${fetch_limit} s" >&2; exit 1; }
  sql replica "START SLAVE SQL_THREAD"
  read -r seconds rate < <(time_catch_up "$from" "$target" "$apply_limit" replica_seqno)
  printf '%s\t%s\t%s\t%s\n' "$n" "$(( target - from ))" "$seconds" "$rate" >> "$tsv"
  printf 'async replica, slave_parallel_threads %s  transactions %7s  %7s s  %8s per s\n' \
    "$n" "$(( target - from ))" "$seconds" "$rate"
  stop_server "$replica_pid"; replica_pid=""
  [ "$rate" != nan ] || { echo "the replica did not apply the binary log in ${apply_limit} s" >&2; exit 1; }
done
