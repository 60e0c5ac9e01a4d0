#!/usr/bin/env bash
# The cost of TLS across hosts, side by side: a 3-host cluster (`trireme cluster up --hosts`:
# one network namespace per node on a bridge, a DBA's my.cnf) in 4 configurations, one after
# another in the same run:
#   Trireme plain, Trireme TLS, Galera plain, Galera TLS
# TLS is mutual TLS for the group traffic and IST, with Galera's options on both providers:
#   socket.ssl_key=node.key; socket.ssl_cert=node.pem; socket.ssl_ca=ca.pem
# where node.pem holds the node's certificate and the intermediate CA that signed it, and
# ca.pem the root only (scripts/make-test-certs.sh, real openssl). Should Galera refuse that
# chain, the refusal is written to the notes and Galera runs again with socket.ssl_ca
# holding the root and the intermediate (ca-chain.pem). SST is MariaDB's rsync, not
# encrypted in any configuration: it runs before the measurement only.
#
# Per configuration: the cluster comes up (every node Synced in a cluster of 3, checked with
# wsrep_cluster_size), sysbench oltp_write_only prepares 4 tables x 10,000 rows and then
# runs with 8 threads across the bridge to all 3 hosts for SECONDS; tps and p95 latency are
# recorded, the cluster size is checked again, and the cluster goes down. A TLS run counts
# only if the TLS is really on: every Trireme node's error log says "TLS ready", every
# Galera node listens at ssl:// (and the plain runs say neither).
# The order reverses from one repetition to the next (odd: Trireme plain, Trireme TLS,
# Galera plain, Galera TLS; even: the other way round), so slow drift of the machine hits
# every configuration alike.
#
#   bench/scripts/hosts_tls_pair.sh [reps=2] [seconds=30]
#
# Provider A is Trireme and B Galera unless TLS_PROVIDER_A / TLS_PROVIDER_B say otherwise.
# TRIREME_BENCH_NO_BUILD=1 uses the binaries in target/release as they are (no cargo build).
# Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/hosts_tls.tsv, notes (TLS
# evidence, Galera's verdict on the chain, failures) to hosts_tls-notes.txt and sysbench's
# output and the TLS clusters' my.cnf to hosts_tls/.
# Needs root (namespaces); uses only the namespaces tri1..3 and the bridge tribr0. The host
# network holds one cluster at a time: run it under `flock /tmp/trireme-hosts.lock` (the
# caller takes the lock; this script does not, so that bench/run.sh can run it under the
# caller's lock). Takes about 15 s per configuration plus SECONDS: 2 x 4 x (15 + 30) s,
# about 6.5 min, by default (measured on a busy 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-2}
seconds=${2:-30}
trireme=$PWD/target/release/trireme
if [ "${TRIREME_BENCH_NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p provider -p cli -p sst
fi
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out/hosts_tls"
tsv=$out/hosts_tls.tsv
notes=$out/hosts_tls-notes.txt
printf 'provider\ttls\trep\ttps\tp95_ms\ttransactions\terrors_per_s\tcluster_size_after\tca\tseconds\n' >"$tsv"
: >"$notes"
provider_a=${TLS_PROVIDER_A:-$PWD/target/release/libtrireme.so}
provider_b=${TLS_PROVIDER_B:-/usr/lib/galera/libgalera_smm.so}
work=$(mktemp -d /tmp/trireme-hosts-tls.XXXXXX)
chmod 755 "$work"   # the servers run as the unprivileged user trireme
certs=$work/certs
dir=""
failed=0

cleanup() {
  [ -n "$dir" ] && "$trireme" cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

note() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$notes" >&2; }

scripts/make-test-certs.sh "$certs"
cat "$certs/ca.pem" "$certs/intermediate.pem" >"$certs/ca-chain.pem"
chmod 755 "$certs"
chmod 644 "$certs"/*

status() { # node var
  timeout 5 mariadb --no-defaults -S "$dir/node$1/mysqld.sock" -uroot -N -B \
    -e "SHOW STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'
}

# The smallest wsrep_cluster_size the 3 nodes report (0 for a node that does not answer).
cluster_size() {
  local n size min=3
  for n in 1 2 3; do
    size=$(status "$n" wsrep_cluster_size)
    [ "${size:-0}" -lt "$min" ] && min=${size:-0}
  done
  echo "$min"
}

# Until the 3 nodes have committed the same seqno (the prepare is applied everywhere), at
# most $1 seconds.
wait_quiet() {
  local end=$(( $(date +%s) + $1 )) a b c
  while [ "$(date +%s)" -lt "$end" ]; do
    a=$(status 1 wsrep_last_committed); b=$(status 2 wsrep_last_committed)
    c=$(status 3 wsrep_last_committed)
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$b" = "$c" ] && return 0
    sleep 0.5
  done
  return 1
}

provider_options() { # tls ca
  local options="gcache.size=256M"
  if [ "$1" = on ]; then
    options+="; socket.ssl_key=$certs/node.key; socket.ssl_cert=$certs/node.pem"
    options+="; socket.ssl_ca=$certs/$2"
  fi
  echo "$options"
}

# Brings the cluster in $dir up; on failure leaves it down and removed and returns 1.
up() { # provider tls ca log
  if timeout 600 "$trireme" cluster up --hosts --dir "$dir" --provider "$1" --timeout 180 \
      --provider-options "$(provider_options "$2" "$3")" >"$4" 2>&1; then
    return 0
  fi
  # The error logs tell why (kept for the caller in $work/failed-*.log).
  local n
  for n in 1 2 3; do
    [ -f "$dir/node$n/error.log" ] && cp "$dir/node$n/error.log" "$work/failed-node$n.log"
  done
  timeout 300 "$trireme" cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  return 1
}

# The SSL/TLS lines of the error logs of the last failed `up`.
tls_errors() {
  grep -hiE 'ssl|tls|certificate|handshake' "$work"/failed-node*.log 2>/dev/null \
    | grep -viE 'not using SSL compression|listening at' | tail -n 5 || true
}

# Whether TLS is on (or off, as $2 says) in every node of the cluster: Trireme says "TLS
# ready" when it loaded the files; Galera listens at ssl:// instead of tcp://.
check_tls() { # label tls
  local n count=0 pattern
  if [ "$1" = trireme ]; then pattern='TLS ready'; else pattern='listening at ssl://'; fi
  for n in 1 2 3; do
    grep -q "$pattern" "$dir/node$n/error.log" && count=$((count + 1))
  done
  if [ "$2" = on ]; then
    note "$1 TLS r$rep: '$pattern' in the error log of $count of 3 nodes"
    [ "$count" = 3 ]
  else
    [ "$count" = 0 ] || note "$1 plain r$rep: '$pattern' in the error log of $count nodes"
    [ "$count" = 0 ]
  fi
}

# Galera's CA file for the TLS runs: ca.pem (root only) unless Galera refused it.
galera_ca=ca.pem

run_one() { # label provider tls
  local label=$1 provider=$2 tls=$3 ca="-" started
  started=$(date +%s)
  dir=$work/$label-$tls-r$rep
  if [ "$tls" = on ]; then ca=ca.pem; [ "$label" = galera ] && ca=$galera_ca; fi
  local upl=$out/hosts_tls/$label-$tls-r$rep.up.log
  if ! up "$provider" "$tls" "$ca" "$upl"; then
    local why
    why=$(tls_errors)
    if [ "$label" = galera ] && [ "$tls" = on ] && [ "$ca" = ca.pem ] && [ -n "$why" ]; then
      note "FINDING: Galera refused node.pem (leaf + intermediate) with socket.ssl_ca=ca.pem" \
        "(root only): $(tr '\n' ' ' <<<"$why")"
      note "Galera runs again with socket.ssl_ca=ca-chain.pem (root + intermediate)"
      galera_ca=ca-chain.pem; ca=$galera_ca
    else
      note "$label TLS $tls r$rep: the cluster did not come up ($(tail -n 1 "$upl")); once more"
      [ -n "$why" ] && note "  TLS lines of the error logs: $(tr '\n' ' ' <<<"$why")"
    fi
    if ! up "$provider" "$tls" "$ca" "$upl"; then
      note "$label TLS $tls r$rep: the cluster did not come up again: skipped"
      why=$(tls_errors)
      [ -n "$why" ] && note "  TLS lines of the error logs: $(tr '\n' ' ' <<<"$why")"
      printf '%s\t%s\t%s\tn/a\tn/a\t0\tn/a\t0\t%s\t%s\n' "$label" "$tls" "$rep" "$ca" \
        "$(( $(date +%s) - started ))" >>"$tsv"
      dir=""; failed=1
      return 0
    fi
  fi
  if [ "$rep" = 1 ] && [ "$tls" = off ]; then
    note "$label: wsrep_provider_version $(status 1 wsrep_provider_version)"
  fi
  if [ "$label" = galera ] && [ "$tls" = on ]; then
    note "galera TLS r$rep: the cluster formed with node.pem (leaf + intermediate) and" \
      "socket.ssl_ca=$ca"
  fi
  local size
  size=$(cluster_size)
  if [ "$size" != 3 ]; then
    note "$label TLS $tls r$rep: wsrep_cluster_size $size after up, not 3"; failed=1
  fi
  if ! check_tls "$label" "$tls"; then
    note "$label TLS $tls r$rep: TLS is not as configured: not counted"; failed=1
    "$trireme" cluster down --dir "$dir" >/dev/null 2>&1 || true
    dir=""
    return 0
  fi
  [ "$tls" = on ] && cp "$dir/node1/my.cnf" "$out/hosts_tls/$label-tls-node1.my.cnf"
  "$trireme" cluster sql 1 "CREATE DATABASE sbtest; \
    CREATE USER 'trireme_load'@'%' IDENTIFIED BY 'trireme-load'; \
    GRANT ALL ON sbtest.* TO 'trireme_load'@'%'" --dir "$dir" >/dev/null
  local sb=(sysbench oltp_write_only --db-driver=mysql --mysql-host=10.213.0.1,10.213.0.2,10.213.0.3
            --mysql-user=trireme_load --mysql-password=trireme-load --mysql-db=sbtest
            --tables=4 --table-size=10000)
  timeout 300 "${sb[@]}" --threads=2 prepare >"$work/prepare.log" 2>&1 \
    || { note "$label TLS $tls r$rep: sysbench prepare failed: $(tail -n 2 "$work/prepare.log")"; failed=1; }
  wait_quiet 60 || note "$label TLS $tls r$rep: the nodes did not agree on a seqno after the prepare"
  local report=$out/hosts_tls/$label-$tls-r$rep.sysbench.txt rc=0
  timeout $((seconds + 120)) "${sb[@]}" --threads=8 --time="$seconds" --percentile=95 \
    --mysql-ignore-errors=1213,1205,1180,1047,2013 run >"$report" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { note "$label TLS $tls r$rep: sysbench exited with $rc"; failed=1; }
  # "transactions:  12345  (411.50 per sec.)", "95th percentile:  25.28",
  # "ignored errors:  12  (0.40 per sec.)"
  local trx tps p95 errs
  trx=$(awk '/transactions:/ { print $2; exit }' "$report")
  tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3; exit }' "$report")
  p95=$(awk '/95th percentile:/ { print $3; exit }' "$report")
  errs=$(awk '/ignored errors:/ { gsub(/\(/, "", $4); print $4; exit }' "$report")
  size=$(cluster_size)
  [ "$size" = 3 ] || { note "$label TLS $tls r$rep: wsrep_cluster_size $size after the run"; failed=1; }
  timeout 300 "$trireme" cluster down --dir "$dir" >/dev/null 2>&1 \
    || note "$label TLS $tls r$rep: the cluster did not stop cleanly"
  dir=""
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$tls" "$rep" "${tps:-n/a}" \
    "${p95:-n/a}" "${trx:-0}" "${errs:-n/a}" "$size" "$ca" "$(( $(date +%s) - started ))" \
    | tee -a "$tsv"
}

note "TLS across hosts: $reps repetition(s) of $seconds s; A=$provider_a B=$provider_b"
for rep in $(seq 1 "$reps"); do
  configs=("trireme $provider_a off" "trireme $provider_a on" "galera $provider_b off" "galera $provider_b on")
  if (( rep % 2 == 0 )); then
    configs=("${configs[3]}" "${configs[2]}" "${configs[1]}" "${configs[0]}")
  fi
  for config in "${configs[@]}"; do
    # shellcheck disable=SC2086
    run_one $config
  done
done

echo
# Medians over the repetitions (of 2: the mean of both).
awk -F'\t' 'NR > 1 && $4 != "n/a" { v[$1 "," $2] = v[$1 "," $2] " " $4 }
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (n == 0) return -1
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    tp = median(v["trireme,off"]); tt = median(v["trireme,on"])
    gp = median(v["galera,off"]); gt = median(v["galera,on"])
    printf "tps (median): Trireme plain %.1f, TLS %.1f; Galera plain %.1f, TLS %.1f\n", tp, tt, gp, gt
    if (tp > 0 && tt > 0) printf "TLS cost: Trireme %.1f %% (target <= 10 %%)\n", (1 - tt / tp) * 100
    if (gp > 0 && gt > 0) printf "TLS cost: Galera %.1f %%\n", (1 - gt / gp) * 100
    if (gt > 0 && tt > 0) printf "Trireme TLS / Galera TLS: %.2f (target >= 1.0)\n", tt / gt
  }' "$tsv"
exit "$failed"
