#!/usr/bin/env bash
# mysqld_exporter side by side: Debian's prometheus-mysqld-exporter scrapes node 1 of a
# 3-node cluster on Trireme and of one on Galera, after the same short write load, and the
# `mysql_global_status_wsrep_*` and `mysql_galera_*` series each exports are compared: the names only Galera's
# node gives are what Trireme is missing (printed, and written to
# $TRIREME_BENCH_OUT/exporter.tsv with both values of every series).
#
#   bench/scripts/exporter_pair.sh
#
# Clusters on base ports EXPORTER_PORT_A / EXPORTER_PORT_B (28300, 29300); the exporter
# listens on 127.0.0.1:EXPORTER_LISTEN (28999).
set -euo pipefail
cd "$(dirname "$0")/../.."
trireme=$PWD/target/release/trireme
cargo build --release --quiet -p provider -p cli
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
listen=127.0.0.1:${EXPORTER_LISTEN:-28999}
work=$(mktemp -d /tmp/trireme-exporter.XXXXXX)
chmod 755 "$work"
exporter_pid=""
finish() {
  [ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null || true
  for c in "$work"/a "$work"/b; do
    [ -d "$c" ] && timeout 120 "$trireme" cluster down --dir "$c" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap finish EXIT

# scrape NAME PROVIDER PORT: starts the cluster, writes, scrapes node 1, keeps the wsrep series.
scrape() {
  local name=$1 provider=$2 port=$3 dir=$work/$1
  timeout 300 "$trireme" cluster up --dir "$dir" --provider "$provider" --base-port "$port" \
    >/dev/null
  "$trireme" cluster sql --dir "$dir" 1 \
    "CREATE DATABASE x; CREATE TABLE x.t (id INT PRIMARY KEY, v INT);
     INSERT INTO x.t VALUES (1,1),(2,2),(3,3); UPDATE x.t SET v = v + 1;" >/dev/null
  # Version 0.14 reads a password-less account only from DATA_SOURCE_NAME.
  DATA_SOURCE_NAME="root@unix($dir/node1/mysqld.sock)/" \
    prometheus-mysqld-exporter --web.listen-address="$listen" \
    > "$work/$name.exporter.log" 2>&1 &
  exporter_pid=$!
  local tries=0
  until curl -sf "http://$listen/metrics" > "$work/$name.prom"; do
    tries=$((tries + 1)); [ "$tries" -lt 50 ] || { cat "$work/$name.exporter.log"; exit 1; }
    sleep 0.2
  done
  kill "$exporter_pid"; wait "$exporter_pid" 2>/dev/null || true; exporter_pid=""
  grep -E '^(mysql_global_status_wsrep_|mysql_galera_)' "$work/$name.prom" | sort > "$work/$name.wsrep"
  timeout 120 "$trireme" cluster down --dir "$dir" >/dev/null
}

scrape a "$PWD/target/release/libtrireme.so" "${EXPORTER_PORT_A:-28300}"
scrape b /usr/lib/galera/libgalera_smm.so "${EXPORTER_PORT_B:-29300}"
series() { awk '{print $1}' "$1" | sed 's/{.*//' | sort -u; }
series "$work/a.wsrep" > "$work/a.names"
series "$work/b.wsrep" > "$work/b.names"
{
  printf 'series\ttrireme\tgalera\n'
  join -a1 -a2 -e '-' -o 0,1.2,2.2 <(awk '{print $1"\t"$2}' "$work/a.wsrep" | sort) \
    <(awk '{print $1"\t"$2}' "$work/b.wsrep" | sort) -t $'\t'
} > "$out/exporter.tsv"
echo "series exported for Galera: $(wc -l < "$work/b.names"), for Trireme: $(wc -l < "$work/a.names")"
echo "missing on Trireme (exported for Galera only):"
comm -13 "$work/a.names" "$work/b.names" | sed 's/^/  /'
echo "exported for Trireme only:"
comm -23 "$work/a.names" "$work/b.names" | sed 's/^/  /'
echo "values: $out/exporter.tsv"
