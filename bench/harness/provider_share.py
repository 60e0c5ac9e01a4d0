#!/usr/bin/env python3
"""Sums up provider_share.sh: per side, the write path's tps, how busy the cores were, the
provider's share of all samples, and the most a provider that cost nothing could reach.

Usage: provider_share.py OUT_DIR CORES LIBRARY_A LIBRARY_B

Reads OUT_DIR/SIDE-rN.sysbench.txt (sysbench's output) and OUT_DIR/SIDE-rN.report.txt
(`perf report --sort comm,dso -F overhead,sample,comm,dso` of `perf record -a`). A sample
is idle when the idle task ("swapper") ran. It is the side's provider's when that
provider's library (LIBRARY_A or LIBRARY_B, file names as perf shows them) ran on any
thread, and, for a Trireme build (any library but Galera's), when one of its own threads
(named trireme-*) ran anything: the other cluster, idle meanwhile, is not counted as this
side's provider.
"""

import pathlib
import re
import statistics
import sys

# A row of the report: overhead, samples, thread name, object.
ROW = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+(.+?)\s{2,}(\S.*?)\s*$")
IDLE_THREAD = "swapper"
GALERA_LIBRARY = "libgalera_smm.so"
# A Trireme build's own threads carry this prefix.
TRIREME_THREADS = "trireme-"


def shares(report, library):
    total = idle = provider = 0
    trireme = library != GALERA_LIBRARY
    for line in report.read_text().splitlines():
        match = ROW.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        samples, thread, code = int(match[1]), match[2].strip(), match[3]
        total += samples
        if thread == IDLE_THREAD:
            idle += samples
        elif code == library or (trireme and thread.startswith(TRIREME_THREADS)):
            provider += samples
    if total == 0:
        sys.exit(f"{report}: no samples")
    return idle / total, provider / total


def tps(sysbench):
    found = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", sysbench.read_text())
    if not found:
        sys.exit(f"{sysbench}: no transaction rate (did the run fail?)")
    return float(found[1])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    out, cores = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    libraries = {"A": sys.argv[3], "B": sys.argv[4]}
    medians = {}
    print(f"{'run':8s} {'tps':>8s} {'busy %':>7s} {'provider %':>11s} {'zero-cost bound':>16s}")
    for side in ("A", "B"):
        rows = []
        for report in sorted(out.glob(f"{side}-r*.report.txt")):
            run = report.name.removesuffix(".report.txt")
            rate = tps(out / f"{run}.sysbench.txt")
            idle, provider = shares(report, libraries[side])
            busy = 1.0 - idle
            # Every core busy with the same work per transaction, minus the provider's.
            bound = rate / (busy - provider)
            rows.append((rate, busy, provider, bound))
            print(f"{run:8s} {rate:8.1f} {100 * busy:7.1f} {100 * provider:11.1f} {bound:16.1f}")
        if rows:
            medians[side] = [statistics.median(column) for column in zip(*rows)]
    for side, (rate, busy, provider, bound) in medians.items():
        print(f"{side} median: {rate:.1f} tps, cores {100 * busy:.1f} % busy of {cores}, "
              f"provider {100 * provider:.1f} % of all samples, zero-cost bound {bound:.1f} tps")
    if len(medians) == 2:
        a, b = medians["A"], medians["B"]
        print(f"A/B tps {a[0] / b[0]:.3f}; A's zero-cost bound / B's tps {a[3] / b[0]:.3f}")


if __name__ == "__main__":
    main()
