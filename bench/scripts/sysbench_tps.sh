# Sourced, not run: reading sysbench's per-second reports, shared by the scripts that time a
# load around an event (sst_pair.sh, resync_pair.sh).
#
#   tps_median FILE LO HI
#
# Prints the median tps of the report lines ("[ 12s ] thds: 4 tps: 385.88 ...") whose second
# is in (LO, HI], or nan when none is.
tps_median() {
  awk -v lo="$2" -v hi="$3" '$1 == "[" && $3 == "]" {
      s = $2; sub(/s$/, "", s)
      if (s + 0 > lo + 0 && s + 0 <= hi + 0)
        for (i = 4; i < NF; i++) if ($i == "tps:") print $(i + 1)
    }' "$1" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "nan"
          else if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2]
          else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
