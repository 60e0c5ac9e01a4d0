#!/usr/bin/env bash
# Runs MariaDB's own wsrep test suites (mariadb-test-run from the Debian package mariadb-test)
# against Trireme and against Galera, and writes a side-by-side report.
#
#   scripts/mtr.sh                      the five suites on both providers (before a release)
#   scripts/mtr.sh --ci                 the CI subset (scripts/mtr-ci.list, big tests included)
#                                       on Trireme; fails if any of its tests fails
#   scripts/mtr.sh galera.galera_ftwrl galera_sr    chosen tests or whole suites
#
# Options:
#   --provider trireme|galera|both   which provider(s) to run (default both; --ci: trireme)
#   --list FILE        read test and suite names from FILE (one per line; # starts a comment
#                      at the start of a line or after a blank)
#   --parallel N       MTR workers per provider (default 2)
#   --retry N          MTR retries of a failed test (default 1; a test that passes on a retry
#                      is reported as "pass*", flaky)
#   --out DIR          where results and report.md go (default target/mtr)
#   --report           only rebuild the report from the MTR logs already in --out
#   -- OPTIONS         pass the rest to mariadb-test-run (for example --nowarnings)
#
# The Trireme library is TRIREME_TEST_PROVIDER when set (scripts/test.sh sets it to the build
# the other tests load), else target/release/libtrireme.so.
#
# MTR runs as the unprivileged user trireme-mtr (created if missing): as root, the rsync SST's
# daemon drops to nobody and cannot write the joiner's data directory. Run as root, each
# provider's servers live in a network namespace of their own with only loopback.
# Exit status: 0 when every Trireme result passes, or, when both providers ran, when every test
# that passes on Galera passes on Trireme or is listed in docs/compatibility.md; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

readonly MTR_HOME=/usr/share/mysql/mysql-test
readonly MTR_USER=trireme-mtr
readonly GALERA_LIB=/usr/lib/galera/libgalera_smm.so
trireme_lib="${TRIREME_TEST_PROVIDER:-$repo/target/release/libtrireme.so}"
readonly ALL_SUITES=(galera galera_sr galera_3nodes galera_3nodes_sr wsrep)
# A test that takes longer than this (minutes) has hung; MTR's default is 15.
readonly TESTCASE_TIMEOUT_MIN=6
# Lines of a failure kept in the report.
readonly FAILURE_LINES=4

providers=both
parallel=2
retry=1
out="$repo/target/mtr"
report_only=0
ci=0
tests=()
mtr_options=()

die() { echo "mtr.sh: $*" >&2; exit 2; }

read_list() {
  [ -r "$1" ] || die "cannot read the test list $1"
  while read -r line; do
    # A comment starts a line or follows a blank: test names may hold '#'
    # (galera.galera-features#117).
    line="${line%%[[:space:]]#*}"
    case "$line" in \#*) line="" ;; esac
    line="${line//[[:space:]]/}"
    [ -n "$line" ] && tests+=("$line")
  done <"$1"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --provider) providers="${2:?--provider needs trireme, galera or both}"; shift 2 ;;
    --list) read_list "${2:?--list needs a file}"; shift 2 ;;
    --parallel) parallel="${2:?--parallel needs a number}"; shift 2 ;;
    --retry) retry="${2:?--retry needs a number}"; shift 2 ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --report) report_only=1; shift ;;
    --ci) ci=1; shift ;;
    --) shift; mtr_options+=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) tests+=("$1"); shift ;;
  esac
done
case "$providers" in trireme|galera|both) ;; *) die "--provider must be trireme, galera or both, not $providers" ;; esac
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] || die "--parallel must be a positive number, not $parallel"
[[ "$retry" =~ ^[0-9]+$ ]] || die "--retry must be a number, not $retry"
if [ "$ci" = 1 ]; then
  [ ${#tests[@]} -eq 0 ] || die "--ci runs scripts/mtr-ci.list; give no tests with it"
  read_list "$repo/scripts/mtr-ci.list"
  [ "$providers" = both ] && providers=trireme
  out="$repo/target/mtr-ci"
  # Some listed tests are MTR "big tests" (a whole-cluster crash): run them, not skip them.
  mtr_options+=(--big-test)
fi
[ ${#tests[@]} -gt 0 ] || tests=("${ALL_SUITES[@]}")
case "$providers" in both) run_providers=(trireme galera) ;; *) run_providers=("$providers") ;; esac
mkdir -p "$out"

# Parses one MTR console log into tab-separated rows: test, result, time in ms or the skip
# reason, and the first lines of a failure (joined with " | ").
parse_log() {
  awk -v keep="$FAILURE_LINES" '
    function flush() {
      if (name != "") print name "\t" result "\t" detail "\t" failure
      name = ""; failure = ""; kept = 0
    }
    /^[a-z0-9_]+\.[A-Za-z0-9_#-]+ .*\[ [a-z-]+ \]/ {
      flush()
      # A test run in several combinations is named with each: suite.test,combination.
      name = $1
      if ($2 ~ /^\047/) { combination = $2; gsub(/\047/, "", combination); name = name "," combination }
      match($0, /\[ [a-z-]+ \]/)
      result = substr($0, RSTART + 2, RLENGTH - 4)
      detail = substr($0, RSTART + RLENGTH)
      gsub(/^[ \t]+|[ \t]+$/, "", detail)
      collecting = (result == "fail" || result == "retry-fail")
      next
    }
    /^(-----|The servers were|Spent |Completed:|Failed |Failing test)/ { flush(); collecting = 0; next }
    collecting && kept < keep {
      line = $0
      gsub(/\t/, " ", line); gsub(/^ +| +$/, "", line)
      # Keep what explains the failure: the error, the differing lines, the warnings.
      if (line == "" || line ~ /^(line|ok|< snip >)$/) next
      if (line ~ /^(Test ended at|CURRENT_TEST:|- saving|Retrying test|worker\[|--- \/|\+\+\+ \/|@@ |\^ Found warnings|The result from queries just before)/) next
      failure = failure (kept ? " | " : "") substr(line, 1, 200); kept++
    }
    END { flush() }
  ' "$1"
}

# The final result of each test: MTR prints a retried test again, and the last line wins.
final_results() {
  parse_log "$1" | awk -F'\t' '
    { if (!($1 in row)) order[n++] = $1
      if ($2 == "pass" && ($1 in row) && row[$1] ~ /\tfail\t/) $2 = "pass*"
      if ($2 == "retry-pass") $2 = "pass*"
      if ($2 == "retry-fail") $2 = "fail"
      row[$1] = $1 "\t" $2 "\t" $3 "\t" $4 }
    END { for (i = 0; i < n; i++) print row[order[i]] }' OFS='\t'
}

ensure_user() {
  id "$MTR_USER" >/dev/null 2>&1 && return
  useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$MTR_USER" \
    || die "cannot create the user $MTR_USER; run as root or create it"
}

# The network namespace of the run in progress, if any.
netns=""

# Removes the run's namespace, by name, with whatever MTR left running in it.
drop_netns() {
  [ -n "$netns" ] || return 0
  ip netns pids "$netns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$netns" 2>/dev/null || true
  netns=""
}

run_provider() {
  local provider="$1" lib work log
  # A directory of its own, so that runs side by side do not share one; short, because
  # MTR puts unix socket paths (at most 107 bytes) under it.
  work="$(mktemp -d /tmp/mtr-XXXXXX)"
  case "$provider" in
    trireme)
      [ -f "$trireme_lib" ] \
        || die "$trireme_lib is missing: cargo build --release -p provider, or point TRIREME_TEST_PROVIDER at a build"
      lib="$work/lib/libtrireme.so" ;;
    galera)
      [ -f "$GALERA_LIB" ] || die "$GALERA_LIB is missing: scripts/install-deps.sh"
      lib="$GALERA_LIB" ;;
  esac
  mkdir -p "$work/lib" "$out/$provider"
  # A copy, so that a rebuild during a long run does not change the library under test.
  [ "$provider" = trireme ] && cp "$trireme_lib" "$lib"
  local runner=()
  if [ "$(id -u)" -eq 0 ]; then
    ensure_user
    chown -R "$MTR_USER:" "$work"
    # The suites' servers listen on every address (Galera's default): inside a network
    # namespace with only loopback, that reaches nothing beyond this run, and runs side
    # by side cannot take each other's ports.
    netns="trimtr-${work##*-}"
    ip netns add "$netns"
    trap drop_netns EXIT
    trap 'exit 143' TERM INT
    ip -n "$netns" link set lo up
    runner=(ip netns exec "$netns" runuser -u "$MTR_USER" --)
  fi
  chmod -R a+rX "$work"
  # MTR takes whole suites through --suite and single tests as arguments.
  local suites=() names=()
  for name in "${tests[@]}"; do
    case "$name" in *.*) names+=("$name") ;; *) suites+=("$name") ;; esac
  done
  if [ ${#suites[@]} -gt 0 ]; then
    names+=("--suite=$(IFS=,; echo "${suites[*]}")")
  fi
  log="$out/$provider/mtr.log"
  echo "==> MTR on $provider: ${tests[*]} ($parallel workers; log $log)"
  # MTR's own status is ignored: the parsed results decide.
  # In the background, so that a signal to this script (whose traps wait for a foreground
  # command) takes the namespace and everything in it down at once.
  (cd "$MTR_HOME" && "${runner[@]}" env WSREP_PROVIDER="$lib" perl mariadb-test-run \
      --vardir="$work/var" --tmpdir="$work/tmp" --parallel="$parallel" --force \
      --max-test-fail=0 --retry="$retry" --testcase-timeout="$TESTCASE_TIMEOUT_MIN" \
      "${mtr_options[@]}" "${names[@]}") >"$log" 2>&1 &
  wait $! || true
  drop_netns
  # The logs MTR kept of failed tests; the servers' data is not needed.
  rm -rf "$out/$provider/logs"
  [ -d "$work/var/log" ] && cp -r "$work/var/log" "$out/$provider/logs"
  # The servers' error logs, each test's part marked with CURRENT_TEST.
  for err in "$work"/var/*/log/mysqld.*.err "$work"/var/log/mysqld.*.err; do
    [ -f "$err" ] || continue
    local worker="${err#"$work"/var/}"
    worker="${worker%%/*}"
    mkdir -p "$out/$provider/logs/errors-$worker"
    cp "$err" "$out/$provider/logs/errors-$worker/"
  done
  rm -rf "$work"
  [ -n "$(parse_log "$log")" ] || { tail -n 20 "$log" >&2; die "MTR on $provider ran no test"; }
}

if [ "$report_only" = 0 ]; then
  [ -x "$MTR_HOME/mariadb-test-run" ] || die "MariaDB's test suites are missing: scripts/install-deps.sh"
  for provider in "${run_providers[@]}"; do run_provider "$provider"; done
fi
for provider in trireme galera; do
  log="$out/$provider/mtr.log"
  [ -f "$log" ] && final_results "$log" >"$out/$provider/results.tsv"
done
exec "$repo/scripts/mtr-report.sh" "$out"
