#!/usr/bin/env python3
"""Where a streaming transaction's time goes on its origin, fragment by fragment.

Usage: fragment_trace.py NODE.seqnos.csv

Reads the per-seqno timeline Trireme writes with TRIREME_SEQNO_TRACE_DIR set (see
seqno_trace.py) of the node whose client ran one large transaction with
wsrep_trx_fragment_size set, and nothing else of its own: its local seqnos are then the
fragments, one after the other, because the server replicates the next fragment only once
the previous one has committed. A pause of more than STREAM_GAP_US between one local
seqno's commit and the next one's submission starts another stream.

Per stream, each fragment's time from the previous fragment's commit to its own is cut
into: the server's work before it replicates (executing the rows, writing the fragment to
its streaming log), ordering, certification, the server's work before it asks for commit
order, the wait for commit order (earlier seqnos, the other nodes' write-sets among them,
committing on this node) and the commit. Totals say what the stream spent on each part;
the median and p95 say what one fragment did.
"""

import sys

from seqno_trace import load, percentile

# A longer pause between fragments than this starts a new stream (another statement).
STREAM_GAP_US = 2_000_000

# Each part of a fragment's time: its name, and the stages it runs between ("previous
# commit" is the commit of the fragment before it).
PARTS = [
    ("server before replicating", "previous_commit_left_us", "submitted_us"),
    ("order", "submitted_us", "delivered_us"),
    ("certify", "delivered_us", "certified_us"),
    ("server before commit order", "certified_us", "commit_asked_us"),
    ("wait for commit order", "commit_asked_us", "commit_entered_us"),
    ("commit", "commit_entered_us", "commit_left_us"),
]

STAGES_NEEDED = ["submitted_us", "delivered_us", "certified_us", "commit_asked_us",
                 "commit_entered_us", "commit_left_us"]


def streams(rows):
    """The local seqnos that reached every stage, cut into streams; each fragment after
    the first of its stream carries the commit time of the one before it."""
    local = [r for r in rows if r["local"] and all(r[s] is not None for s in STAGES_NEEDED)]
    found, current = [], []
    for row in local:
        if current and row["submitted_us"] - current[-1]["commit_left_us"] > STREAM_GAP_US:
            found.append(current)
            current = []
        if current:
            row["previous_commit_left_us"] = current[-1]["commit_left_us"]
        current.append(row)
    if current:
        found.append(current)
    return [stream for stream in found if len(stream) > 1]


def summarise_stream(stream):
    first, last = stream[0], stream[-1]
    span = last["commit_left_us"] - first["commit_left_us"]
    fragments = stream[1:]
    print(f" stream of {len(stream)} fragments, seqnos {first['seqno']}..{last['seqno']}: "
          f"{span / 1e6:.2f} s from the first fragment's commit to the last one's, "
          f"{span / len(fragments) / 1000:.2f} ms per fragment")
    for name, start, end in PARTS:
        took = [f[end] - f[start] for f in fragments]
        print(f"  {name:28s} total {sum(took) / 1e6:7.2f} s ({100 * sum(took) / span:5.1f} %)"
              f"  per fragment p50 {percentile(took, 0.5) / 1000:7.2f} ms"
              f"  p95 {percentile(took, 0.95) / 1000:7.2f} ms")
    between = [b["seqno"] - a["seqno"] - 1 for a, b in zip(stream, fragments)]
    print(f"  other seqnos ordered between two fragments: p50 {percentile(between, 0.5)}, "
          f"p95 {percentile(between, 0.95)}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = streams(load(sys.argv[1]))
    if not found:
        sys.exit(f"{sys.argv[1]}: no run of two or more local seqnos (no streaming transaction)")
    for stream in found:
        summarise_stream(stream)


if __name__ == "__main__":
    main()
