#!/usr/bin/env python3
"""Sums bench/scripts/thread_cpu_pair.sh's snapshots: per thread name, CPU milliseconds,
context switches and milliseconds spent runnable but waiting for a core (schedstat) per
committed transaction, for side A and side B, and their ratio.

Usage: thread_cpu.py DIR   (DIR holds {A,B}-r<N>.before/.after/.sysbench.txt)
"""

import collections
import glob
import os
import re
import sys

# /proc/<pid>/task/<tid>/stat counts CPU time in clock ticks.
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def load(path):
    threads = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) not in (7, 9):
                continue
            node, tid, name = fields[:3]
            utime, stime, voluntary, involuntary = map(int, fields[3:7])
            # Snapshots taken before schedstat was recorded have no wait figure.
            wait_ns = int(fields[8]) if len(fields) == 9 else 0
            threads[(node, tid)] = (name, utime + stime, voluntary, involuntary, wait_ns)
    return threads


def group_name(name):
    """Numbered threads of one kind count as one (trireme-read-3 -> trireme-read-#)."""
    return re.sub(r"\d+$", "#", name)


def side_totals(directory, side):
    totals = collections.defaultdict(float)
    runs = sorted(glob.glob(os.path.join(directory, f"{side}-r*.sysbench.txt")))
    if not runs:
        sys.exit(f"{directory}: no runs of side {side}")
    for report in runs:
        stem = report[: -len(".sysbench.txt")]
        text = open(report).read()
        match = re.search(r"transactions:\s+(\d+)", text)
        if not match:
            sys.exit(f"{report}: sysbench reported no transactions")
        totals["transactions"] += int(match.group(1))
        before, after = load(stem + ".before"), load(stem + ".after")
        for key, (name, cpu, voluntary, involuntary, wait) in after.items():
            _, cpu0, voluntary0, involuntary0, wait0 = before.get(key, (name, 0, 0, 0, 0))
            for kind, value in (
                ("cpu ms", (cpu - cpu0) * TICK_MS),
                ("voluntary switches", voluntary - voluntary0),
                ("involuntary switches", involuntary - involuntary0),
                ("runqueue wait ms", (wait - wait0) / 1e6),
            ):
                totals[(kind, group_name(name))] += value
                totals[(kind, "all threads")] += value
    return totals


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    a, b = side_totals(sys.argv[1], "A"), side_totals(sys.argv[1], "B")
    print(f"transactions: A {a['transactions']:.0f}, B {b['transactions']:.0f}, "
          f"A/B {a['transactions'] / b['transactions']:.3f}")
    keys = sorted(k for k in set(a) | set(b) if k != "transactions")
    print(f"{'per transaction (sum of 3 nodes)':52s} {'A':>9s} {'B':>9s} {'A/B':>6s}")
    for kind, name in keys:
        per_a = a[(kind, name)] / a["transactions"]
        per_b = b[(kind, name)] / b["transactions"]
        if max(per_a, per_b) < 0.005:
            continue
        ratio = f"{per_a / per_b:6.2f}" if per_b else "   n/a"
        print(f"{kind + ', ' + name:52s} {per_a:9.4f} {per_b:9.4f} {ratio}")


if __name__ == "__main__":
    main()
