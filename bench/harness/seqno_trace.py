#!/usr/bin/env python3
"""Summarises the per-seqno timelines Trireme writes with TRIREME_SEQNO_TRACE_DIR set.

Usage: seqno_trace.py NODE.seqnos.csv [...]

For each node, and separately for its own write-sets (local) and the others' (remote): how
long each step of the pipeline took (median, p95, p99 in microseconds), how many seqnos were
in each step on average (Little's law over the traced span), and how the group delivered
them (seqnos per delivery burst). A step a seqno skipped (a failed certification, say) is
left out of that step's figures.
"""

import csv
import statistics
import sys


# Each step: its name, and the stages it runs between.
STEPS = [
    ("order (own write-sets)", "submitted_us", "delivered_us"),
    ("certify", "delivered_us", "certified_us"),
    ("wait for apply monitor", "certified_us", "apply_entered_us"),
    ("  of which in the queue", "certified_us", "picked_us"),
    ("  of which in the monitor", "picked_us", "apply_entered_us"),
    ("apply rows", "apply_entered_us", "commit_asked_us"),
    ("wait for commit order", "commit_asked_us", "commit_entered_us"),
    ("commit", "commit_entered_us", "commit_left_us"),
    ("server after commit", "commit_left_us", "apply_returned_us"),
    ("delivered to committed", "delivered_us", "commit_left_us"),
    ("submitted to committed", "submitted_us", "commit_left_us"),
]

# Deliveries closer than this belong to one burst (one Raft entry handed out in a row).
BURST_GAP_US = 50


def load(path):
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows.append(
                {
                    "seqno": int(row["seqno"]),
                    "local": row["local"] == "1",
                    # Every other column is a stage's time, blank where the seqno
                    # did not reach it (the trace's header names them).
                    **{
                        stage: int(value) if value else None
                        for stage, value in row.items()
                        if stage.endswith("_us")
                    },
                }
            )
    if not rows:
        sys.exit(f"{path}: no seqnos traced")
    return rows


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def step_line(rows, name, start, end, span_us):
    took = [r[end] - r[start] for r in rows if r[start] is not None and r[end] is not None]
    if not took:
        return f"  {name:24s} (no seqno passed it)"
    busy = sum(took) / span_us if span_us else 0.0
    return (
        f"  {name:24s} n {len(took):7d}  p50 {percentile(took, 0.5):7d}  "
        f"p95 {percentile(took, 0.95):7d}  p99 {percentile(took, 0.99):7d}  "
        f"mean in step {busy:6.2f}"
    )


def bursts(rows):
    times = sorted(r["delivered_us"] for r in rows if r["delivered_us"] is not None)
    sizes, size = [], 1
    for before, after in zip(times, times[1:]):
        if after - before <= BURST_GAP_US:
            size += 1
        else:
            sizes.append(size)
            size = 1
    sizes.append(size)
    return sizes


def handoffs(rows):
    """With one applier: between committing a remote seqno and admitting the next one that
    was already queued, where the applier's time goes."""
    remote = [r for r in rows if not r["local"] and r["apply_returned_us"] is not None]
    parts = {"server after commit": [], "provider between tasks": [], "apply monitor": []}
    for before, after in zip(remote, remote[1:]):
        if after["seqno"] != before["seqno"] + 1 or after["picked_us"] is None:
            continue
        if after["apply_entered_us"] is None or after["certified_us"] > before["commit_left_us"]:
            continue
        if after["picked_us"] < before["apply_returned_us"]:
            continue  # taken by another applier
        parts["server after commit"].append(before["apply_returned_us"] - before["commit_left_us"])
        parts["provider between tasks"].append(after["picked_us"] - before["apply_returned_us"])
        parts["apply monitor"].append(after["apply_entered_us"] - after["picked_us"])
    return parts


def summarise(path):
    rows = load(path)
    delivered = [r["delivered_us"] for r in rows if r["delivered_us"] is not None]
    span_us = max(delivered) - min(delivered) if delivered else 0
    print(f"{path}: seqnos {rows[0]['seqno']}..{rows[-1]['seqno']}, {len(rows)} traced "
          f"over {span_us / 1e6:.1f} s")
    for label, local in (("local", True), ("remote", False)):
        part = [r for r in rows if r["local"] == local]
        print(f" {label}: {len(part)} seqnos")
        for name, start, end in STEPS:
            print(step_line(part, name, start, end, span_us))
    for name, took in handoffs(rows).items():
        if took:
            print(
                f" applier hand-off, {name:24s} n {len(took):7d}  p50 {percentile(took, 0.5):7d}"
                f"  p95 {percentile(took, 0.95):7d}  total {sum(took) / 1e6:6.2f} s"
            )
    sizes = bursts(rows)
    print(
        f" delivery bursts (gap > {BURST_GAP_US} us): {len(sizes)}, seqnos per burst "
        f"mean {statistics.mean(sizes):.2f}, p95 {percentile(sizes, 0.95)}, "
        f"max {max(sizes)}"
    )


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        summarise(path)


if __name__ == "__main__":
    main()
