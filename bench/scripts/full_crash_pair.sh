#!/usr/bin/env bash
# A full crash, side by side: `trireme crash-drill` on Trireme and on Galera, the same 3-node
# local cluster and bank load. Each round SIGKILLs every node at once under bank transfers,
# then starts them all as an init system would (each with the position --wsrep-recover
# finds, none told to bootstrap): Trireme restores the primary component from its saved
# views, Galera from gvwstate.dat (pc.recovery). Figures per provider: the seconds from the
# start of each restart (the --wsrep-recover runs included) until all three are Synced
# together, and whether the bank kept every acknowledged transfer.
#
#   bench/scripts/full_crash_pair.sh [rounds=10]
#
# Raw figures go to $TRIREME_BENCH_OUT (default bench-out)/full_crash.tsv.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-10}
cargo build --release --quiet -p provider -p cli -p sst
trireme=$PWD/target/release/trireme
out=${TRIREME_BENCH_OUT:-bench-out}
mkdir -p "$out"
tsv=$out/full_crash.tsv
printf 'provider\tround\tseconds_back\n' >"$tsv"
work=$(mktemp -d /tmp/trireme-crash-bench.XXXXXX)
chmod 755 "$work"   # the servers run as the unprivileged user trireme
trap 'rm -rf "$work"' EXIT

run() { # name provider
  local log=$work/$1.log
  if ! "$trireme" crash-drill --dir "$work/$1" --rounds "$rounds" --provider "$2" \
    >"$work/$1.summary" 2>"$log"; then
    echo "$1: the drill failed:" >&2
    cat "$work/$1.summary" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  sed -n 's/.*round \([0-9]*\): all Synced again \([0-9.]*\) s after the start/\1\t\2/p' "$log" |
    while IFS=$'\t' read -r round seconds; do
      printf '%s\t%s\t%s\n' "$1" "$round" "$seconds" >>"$tsv"
    done
  printf '%-8s %s' "$1" "$(cat "$work/$1.summary")"
  echo
}

run trireme "$PWD/target/release/libtrireme.so"
run galera /usr/lib/galera/libgalera_smm.so
awk -F'\t' 'NR > 1 { s[$1] += $3; n[$1]++ }
  END { t = s["trireme"] / n["trireme"]; g = s["galera"] / n["galera"]
        printf "mean seconds back: trireme %.2f, galera %.2f (trireme/galera %.2fx)\n", t, g, t / g }' "$tsv"
