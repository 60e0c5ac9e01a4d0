# Sourced, not run: how ist_pair.sh times an IST and async_ceiling.sh times its ceiling, in one
# place, so that the two rates stay comparable.
#
#   time_catch_up FROM TARGET LIMIT_S PROBE [ARGS...]
#
# Runs PROBE ARGS every 0.1 s (it prints the seqno applied so far, or nothing while the server
# does not answer) until it reports TARGET or more, for LIMIT_S seconds at most. Prints
# "SECONDS RATE": the seconds from the first seqno seen between FROM and TARGET to TARGET, and
# the seqnos applied per second in them; "nan nan" if it never got there.
time_catch_up() {
  local from=$1 target=$2 limit=$3
  shift 3
  local t_first="" t_last="" first_seen="" seqno deadline=$(( $(date +%s) + limit ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    seqno=$("$@" || true)
    if [[ "$seqno" =~ ^[0-9]+$ ]]; then
      if [ -z "$t_first" ] && [ "$seqno" -gt "$from" ] && [ "$seqno" -lt "$target" ]; then
        t_first=$(date +%s.%N); first_seen=$seqno
      fi
      if [ "$seqno" -ge "$target" ]; then t_last=$(date +%s.%N); break; fi
    fi
    sleep 0.1
  done
  if [ -n "$t_first" ] && [ -n "$t_last" ]; then
    awk -v a="$t_first" -v b="$t_last" -v n="$(( target - first_seen ))" \
      'BEGIN { s = b - a; printf "%.3f %.0f\n", s, (s > 0 ? n / s : 0) }'
  else
    echo "nan nan"
  fi
}
