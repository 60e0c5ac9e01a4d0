# Sourced, not run: two 3-node clusters on loopback side by side, as thread_cpu_pair.sh and
# provider_share.sh compare two providers, in one place so that both measure the same setup.
#
#   pair_clusters_up NAME [SERVER_OPTIONS]
#
# Needs the associative array `provider` (A and B: the libraries) and `out` (may be empty).
# Sets `trireme`, `work` (a fresh /tmp/trireme-NAME-* directory), `out` (default
# $work/out, created), `port` (A 27300, B 28300) and `common` (sysbench's options for
# oltp_write_only on 8 tables x 10,000 rows); brings up both clusters with those tables
# prepared, and takes both down (and removes them) when the script exits. SERVER_OPTIONS are
# [mysqld] settings for every node of both clusters, as `trireme cluster up --server-options`
# takes them.
pair_clusters_up() {
  local name=$1 options=${2:-} side
  trireme=target/release/trireme
  [ -x "$trireme" ] || cargo build --release --quiet -p cli
  work=$(mktemp -d "/tmp/trireme-$name-XXXXXX")
  chmod 755 "$work"
  out=${out:-$work/out}
  mkdir -p "$out"
  declare -gA port=([A]=27300 [B]=28300)
  trap pair_clusters_down EXIT
  common=(--db-driver=mysql --mysql-user=root --mysql-db=sbtest --tables=8 --table-size=10000)
  for side in A B; do
    timeout 600 "$trireme" cluster up --nodes 3 --dir "$work/$side" \
      --provider "${provider[$side]}" --base-port "${port[$side]}" \
      ${options:+--server-options "$options"} >/dev/null
    "$trireme" cluster sql 1 "CREATE DATABASE sbtest" --dir "$work/$side" >/dev/null
    timeout 600 sysbench oltp_write_only "${common[@]}" --threads=4 \
      --mysql-socket="$work/$side/node1/mysqld.sock" prepare >/dev/null
  done
}

pair_clusters_down() {
  local side
  for side in A B; do
    "$trireme" cluster down --dir "$work/$side" >/dev/null 2>&1 || true
  done
  rm -rf "$work/A" "$work/B"
  # Gone unless the results were left in it (no --out).
  rmdir "$work" 2>/dev/null || true
}
