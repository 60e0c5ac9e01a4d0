#!/usr/bin/env bash
# Writes DIR/report.md from the results scripts/mtr.sh left in DIR/trireme and DIR/galera:
# a count per suite, then every test side by side with the first lines of each failure.
# Exit status: with both providers' results, 1 if a test that passes on Galera does not pass
# on Trireme and is not listed in docs/compatibility.md; with Trireme's only, 1 if any of its
# tests failed; 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: mtr-report.sh DIR}"
trireme="$out/trireme/results.tsv"
galera="$out/galera/results.tsv"
[ -f "$trireme" ] || [ -f "$galera" ] || { echo "mtr-report: no results in $out" >&2; exit 2; }
# A provider that did not run reads as an empty result file.
empty="$out/.empty"
: >"$empty"
[ -f "$trireme" ] || trireme="$empty"
[ -f "$galera" ] || galera="$empty"

# Tests docs/compatibility.md accounts for: the first column of its tables, as `suite.test`.
listed="$out/.listed"
{ grep -oE '^\| `[a-z0-9_]+\.[A-Za-z0-9_#-]+`' docs/compatibility.md || true; } | tr -d '|` ' \
  | sort -u >"$listed"

# One row per test: test, Trireme's result, Galera's, Trireme's failure, Galera's failure,
# and whether docs/compatibility.md lists it.
joined="$out/.joined"
awk -F'\t' -v OFS='\t' '
  FILENAME == ARGV[1] { listed[$1] = 1; next }
  FILENAME == ARGV[2] { t[$1] = $2; tf[$1] = ($2 == "skipped" ? $3 : $4); names[$1] = 1; next }
  { g[$1] = $2; gf[$1] = ($2 == "skipped" ? $3 : $4); names[$1] = 1 }
  END {
    for (n in names)
      print n, (n in t ? t[n] : "-"), (n in g ? g[n] : "-"), tf[n], gf[n], (n in listed ? "listed" : "")
  }' "$listed" "$trireme" "$galera" | sort >"$joined"

have_galera=0; [ -s "$galera" ] && have_galera=1

report="$out/report.md"
{
  echo "# MariaDB's wsrep test suites: Trireme and Galera"
  echo
  echo "Generated $(date -u '+%Y-%m-%d %H:%M UTC') by scripts/mtr.sh. \`pass*\` passed on a retry."
  echo
  echo "| suite | tests | Galera passes | Trireme passes | Galera passes, Trireme not | of those, in docs/compatibility.md | not run on one side | Trireme / Galera |"
  echo "|---|---|---|---|---|---|---|---|"
  awk -F'\t' '
    function ok(r) { return r == "pass" || r == "pass*" }
    { split($1, p, "."); s = p[1]; suites[s] = 1; n[s]++; n["all"]++
      if ($2 == "-" || $3 == "-") { gone[s]++; gone["all"]++ }
      if (ok($3)) { gp[s]++; gp["all"]++ }
      if (ok($2)) { tp[s]++; tp["all"]++ }
      if (ok($3) && $2 != "-" && !ok($2)) {
        miss[s]++; miss["all"]++; if ($6 == "listed") { lst[s]++; lst["all"]++ } }
      if (ok($3) && $2 != "-") { both[s]++; both["all"]++ } }
    END {
      for (s in suites) order[++k] = s
      order[++k] = "all"
      for (i = 1; i <= k; i++) { s = order[i]
        ratio = both[s] ? sprintf("%.1f%%", 100 * (both[s] - miss[s]) / both[s]) : "-"
        printf "| %s | %d | %d | %d | %d | %d | %d | %s |\n", s, n[s], gp[s], tp[s], miss[s], lst[s], gone[s], ratio }
    }' "$joined"
  echo
  echo "The last column is the share of the tests that pass on Galera, and ran on Trireme, that"
  echo "also pass on Trireme. A test not run on one side (\`-\`) is one the run did not reach."
  echo
  echo "## Tests whose results differ"
  echo
  echo "| test | Trireme | Galera | listed | Trireme's failure | Galera's failure |"
  echo "|---|---|---|---|---|---|"
  awk -F'\t' '$2 != $3 { gsub(/\|/, "\\|", $4); gsub(/\|/, "\\|", $5)
    printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $6, $4, $5 }' "$joined"
  echo
  echo "## Every test"
  echo
  echo "| test | Trireme | Galera |"
  echo "|---|---|---|"
  awk -F'\t' '{ printf "| %s | %s | %s |\n", $1, $2, $3 }' "$joined"
} >"$report"

# The verdict, and its evidence on the console.
sed -n '5,/^The last column/p' "$report" | head -n -2
# awk, not `read`: a tab is whitespace to `read`, which would merge empty fields.
verdict="$(awk -F'\t' -v both="$have_galera" '
  function ok(r) { return r == "pass" || r == "pass*" }
  both == 1 && ok($3) && !ok($2) && $2 != "-" && $6 != "listed" {
    print "REGRESSION " $1 ": passes on Galera, " $2 " on Trireme: " $4 }
  both == 0 && $2 == "fail" { print "FAIL " $1 ": " $4 }' "$joined")"
failed=0
if [ -n "$verdict" ]; then
  echo "$verdict"
  failed=1
fi
echo "report: $report"
exit "$failed"
