#!/usr/bin/env python3
"""Turns the raw results that bench/run.sh left in OUT into OUT/report.md, OUT/results.json
and PNG plots.

    report.py OUT

Every figure is the median over the repetitions of a run with its min and max; a value that
could not be measured (a status variable the provider does not export, a failed run) is
"n/a" and never stops the report.
"""

import difflib
import json
import math
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

SIDES = ("A", "B")
DEADLOCK = 1213
# sysbench prints tps with two decimals: below this a second had no commit at all.
ZERO_TPS = 0.005


# ---- raw files --------------------------------------------------------------------------


def read_env(path):
    """key=value lines (values may contain '=')."""
    env = {}
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                env[key.strip()] = value.strip()
    return env


def read_status(path):
    """SHOW STATUS output: name<TAB>value lines."""
    status = {}
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            name, sep, value = line.partition("\t")
            if sep:
                status[name] = value
    return status


def read_cpu(path):
    """(side, node) -> CPU ticks, from run.sh's cpu_snapshot."""
    cpu = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                cpu[(parts[0], parts[1])] = int(parts[2])
    return cpu


def read_events(path):
    events = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                events[parts[0]] = int(parts[1])
    return events


def to_float(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


HIST_ROW = re.compile(r"^\s*([0-9.]+)\s+\|\**\s+(\d+)\s*$")
SAMPLE = re.compile(
    r"^\[ (\d+)s \] thds: (\d+) tps: ([0-9.]+) .*?err/s:? ([0-9.]+) reconn/s: ([0-9.]+)"
)
ERROR_COUNT = re.compile(r"^bench-error-count errno=(-?\d+) count=(\d+)$")


def parse_sysbench(text):
    """The numbers of one sysbench run; missing ones are absent from the dict."""
    result = {"hist": [], "samples": [], "errors": {}}

    def grab(key, pattern, conv=float):
        m = re.search(pattern, text, re.M)
        if m:
            result[key] = conv(m.group(1))

    grab("transactions", r"^\s*transactions:\s+(\d+)", int)
    grab("tps", r"^\s*transactions:\s+\d+\s+\(([0-9.]+) per sec")
    grab("ignored_errors", r"^\s*ignored errors:\s+(\d+)", int)
    grab("reconnects", r"^\s*reconnects:\s+(\d+)", int)
    grab("total_time", r"^\s*total time:\s+([0-9.]+)s")
    grab("p95_sysbench", r"^\s*95th percentile:\s+([0-9.]+)")
    for line in text.splitlines():
        m = HIST_ROW.match(line)
        if m:
            result["hist"].append((float(m.group(1)), int(m.group(2))))
            continue
        m = SAMPLE.match(line)
        if m:
            result["samples"].append(
                {
                    "t": int(m.group(1)),
                    "thds": int(m.group(2)),
                    "tps": float(m.group(3)),
                    "err": float(m.group(4)),
                    "reconn": float(m.group(5)),
                }
            )
            continue
        m = ERROR_COUNT.match(line)
        if m:
            errno = int(m.group(1))
            result["errors"][errno] = result["errors"].get(errno, 0) + int(m.group(2))
    return result


def hist_percentile(hist, pct):
    """The latency bucket (ms) that holds the pct-th percentile of the events, like
    sysbench's own "95th percentile" (same buckets, so the same 1.8 % resolution)."""
    total = sum(count for _, count in hist)
    if total == 0:
        return None
    rank = math.ceil(pct / 100.0 * total)
    seen = 0
    for value, count in sorted(hist):
        seen += count
        if seen >= rank:
            return value
    return max(hist)[0]


class Run:
    """One sysbench run against one side, as run.sh stored it in runs/<id>/."""

    def __init__(self, path):
        self.path = path
        self.meta = read_env(path / "meta.env")
        sysbench = path / "sysbench.txt"
        text = sysbench.read_text(errors="replace") if sysbench.is_file() else ""
        self.sb = parse_sysbench(text)
        self.nodes = [1] if self.side == "C" else [1, 2, 3]
        self.before = {n: read_status(path / f"status-before-node{n}.txt") for n in self.nodes}
        self.after = {n: read_status(path / f"status-after-node{n}.txt") for n in self.nodes}
        self.cpu_before = read_cpu(path / "cpu-before.txt")
        self.cpu_after = read_cpu(path / "cpu-after.txt")
        self.events = read_events(path / "events.txt")

    @property
    def scenario(self):
        return self.meta.get("scenario", "?")

    @property
    def case(self):
        return self.meta.get("case", "?")

    @property
    def side(self):
        return self.meta.get("side", "?")

    @property
    def ok(self):
        return (
            self.meta.get("skipped") is None
            and self.meta.get("rc") == "0"
            and self.sb.get("transactions") is not None
        )

    def duration_s(self):
        t0, t1 = to_float(self.meta.get("t_before")), to_float(self.meta.get("t_after"))
        if t0 is None or t1 is None or t1 <= t0:
            return None
        return (t1 - t0) / 1e9

    def delta(self, node, name):
        """Growth of a counter on one node during the run; None when not exported or when
        the counter went backwards (the node restarted)."""
        a = to_float(self.before[node].get(name))
        b = to_float(self.after[node].get(name))
        if a is None or b is None or b < a:
            return None
        return b - a

    def delta_sum(self, name):
        values = [self.delta(n, name) for n in self.nodes]
        return None if any(v is None for v in values) else sum(values)

    def cpu_seconds(self, side, clk_tck):
        """CPU seconds the servers of `side` used during the run (nodes seen at both
        snapshots)."""
        total, found = 0, False
        for key, after in self.cpu_after.items():
            before = self.cpu_before.get(key)
            if key[0] == side and before is not None and after >= before:
                total += after - before
                found = True
        return total / clk_tck if found else None

    def offset(self, event):
        """Seconds from sysbench's start to `event`, if it happened."""
        t0 = to_float(self.meta.get("t0"))
        at = self.events.get(event)
        if t0 is None or at is None:
            return None
        return (at - t0) / 1e9


# ---- metrics ----------------------------------------------------------------------------

# (key, label, decimals) in report order.
STEADY_METRICS = [
    ("tps", "tps", 1),
    ("p50", "latency p50 (ms)", 2),
    ("p95", "latency p95 (ms)", 2),
    ("p99", "latency p99 (ms)", 2),
    ("deadlocks", "deadlocks (1213, client saw)", 0),
    ("other_errors", "other errors (client saw)", 0),
    ("cert_failures", "cert failures (Σ nodes)", 0),
    ("bf_aborts", "BF aborts (Σ nodes)", 0),
    ("fc_paused_pct", "flow control paused, worst node (%)", 1),
    ("fc_sent", "flow control messages sent (Σ nodes)", 0),
    ("apply_window", "apply window, nodes 2 and 3 (mean)", 2),
    ("recv_queue_avg", "recv queue average, worst node", 1),
    ("sent_mb_1", "replicated MB sent by node1", 2),
    ("sent_mb_2", "replicated MB sent by node2", 2),
    ("sent_mb_3", "replicated MB sent by node3", 2),
    ("bytes_per_trx", "replicated bytes / transaction", 0),
    ("cpu_ms_per_trx", "server CPU ms / transaction (Σ nodes)", 3),
    ("idle_cpu_pct", "other cluster's CPU while idle (% of a core)", 1),
]

DISTURBANCE_METRICS = [
    ("tps", "tps over the whole run", 1),
    ("pre_tps", "tps before the disturbance (median of seconds)", 1),
    ("zero_run", "longest run of zero-tps seconds (s)", 0),
    ("recovery", "until tps stays ≥ 50 % of before (s)", 0),
    ("rejoin", "until the node is back (s)", 1),
    ("other_errors", "client errors other than deadlocks", 0),
    ("deadlocks", "deadlocks (1213, client saw)", 0),
    ("reconnects", "client reconnects", 0),
    ("p99", "latency p99 (ms)", 2),
    ("max_latency", "latency max, histogram bucket (ms)", 1),
]


def error_counts(run):
    """(deadlocks, other errors) the clients saw."""
    errors = run.sb["errors"]
    # Without the wrapper's lines only sysbench's total is known.
    if not errors and run.sb.get("ignored_errors"):
        return None, None
    deadlocks = errors.get(DEADLOCK, 0)
    other = sum(n for errno, n in errors.items() if errno != DEADLOCK)
    return deadlocks, other


def steady_metrics(run, clk_tck):
    if not run.ok:
        return {}
    sb = run.sb
    m = {"tps": sb.get("tps")}
    for pct in (50, 95, 99):
        m[f"p{pct}"] = hist_percentile(sb["hist"], pct)
    m["deadlocks"], m["other_errors"] = error_counts(run)
    duration = run.duration_s()
    if run.side != "C":
        m["cert_failures"] = run.delta_sum("wsrep_local_cert_failures")
        m["bf_aborts"] = run.delta_sum("wsrep_local_bf_aborts")
        m["fc_sent"] = run.delta_sum("wsrep_flow_control_sent")
        paused = [run.delta(n, "wsrep_flow_control_paused_ns") for n in run.nodes]
        if duration and all(p is not None for p in paused):
            m["fc_paused_pct"] = 100.0 * max(paused) / 1e9 / duration
        # Averages over the run: run.sh flushes the status right before it.
        windows = [to_float(run.after[n].get("wsrep_apply_window")) for n in (2, 3)]
        if all(w is not None for w in windows):
            m["apply_window"] = statistics.mean(windows)
        queues = [to_float(run.after[n].get("wsrep_local_recv_queue_avg")) for n in run.nodes]
        if all(q is not None for q in queues):
            m["recv_queue_avg"] = max(queues)
        sent = {n: run.delta(n, "wsrep_replicated_bytes") for n in run.nodes}
        for n, value in sent.items():
            m[f"sent_mb_{n}"] = None if value is None else value / 1e6
        if all(v is not None for v in sent.values()) and sb.get("transactions"):
            m["bytes_per_trx"] = sum(sent.values()) / sb["transactions"]
    cpu = run.cpu_seconds(run.side, clk_tck)
    if cpu is not None and sb.get("transactions"):
        m["cpu_ms_per_trx"] = 1000.0 * cpu / sb["transactions"]
    other = {"A": "B", "B": "A"}.get(run.side)
    if other and duration:
        idle = run.cpu_seconds(other, clk_tck)
        if idle is not None:
            m["idle_cpu_pct"] = 100.0 * idle / duration
    return m


def load_samples(run):
    """The per-second samples of a run in which every thread was still running: at the end
    of the run sysbench reports a partial second in which some have already stopped."""
    threads = int(run.meta.get("threads", "0") or 0)
    return [s for s in run.sb["samples"] if s["thds"] >= threads]


def longest_zero_run(samples):
    """The most consecutive per-second samples without a single commit, i.e. the longest
    stall of the load in whole seconds."""
    longest = current = 0
    for s in samples:
        current = current + 1 if s["tps"] < ZERO_TPS else 0
        longest = max(longest, current)
    return longest


def disturbance_metrics(run):
    if not run.ok:
        return {}
    sb = run.sb
    m = {"tps": sb.get("tps"), "p99": hist_percentile(sb["hist"], 99)}
    if sb["hist"]:
        m["max_latency"] = max(v for v, _ in sb["hist"])
    m["deadlocks"], m["other_errors"] = error_counts(run)
    m["reconnects"] = sb.get("reconnects")
    hit = run.offset("stop" if run.scenario == "frozen" else "kill")
    if hit is None:
        hit = to_float(run.meta.get("at"))
    samples = load_samples(run)
    if hit is not None and samples:
        before = [s["tps"] for s in samples if 2 <= s["t"] <= hit]
        if before:
            m["pre_tps"] = statistics.median(before)
        m["zero_run"] = longest_zero_run(samples)
        after = [s for s in samples if s["t"] > hit]
        if m.get("pre_tps") and after:
            low = [s for s in after if s["tps"] < 0.5 * m["pre_tps"]]
            if not low:
                m["recovery"] = 0.0
            elif low[-1] is not after[-1]:
                m["recovery"] = max(0.0, low[-1]["t"] - hit)
            # else: not back within the run: n/a.
    since = run.offset("cont" if run.scenario == "frozen" else "kill")
    back = run.offset("rejoined")
    if back is not None and since is not None:
        m["rejoin"] = max(0.0, back - since)
    return m


def summarize(values):
    """(median, min, max, n) over the values that exist, or None."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


def metric_stats(runs, metrics_fn):
    per_run = [metrics_fn(r) for r in runs]
    keys = {k for m in per_run for k in m}
    return {k: summarize([m.get(k) for m in per_run]) for k in keys}


def fmt_num(value, decimals):
    if value is None:
        return "n/a"
    if decimals == 0:
        # Counts: the median of an even number of them may end in .5.
        return f"{value:.0f}" if value == round(value) else f"{value:.1f}"
    return f"{value:.{decimals}f}"


def fmt_stat(stat, decimals):
    if stat is None:
        return "n/a"
    median, low, high, n = stat
    text = fmt_num(median, decimals)
    if n > 1:
        text += f" [{fmt_num(low, decimals)}–{fmt_num(high, decimals)}]"
    return text


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return None
    return a[0] / b[0]


def fmt_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


# ---- helpers for the report ---------------------------------------------------------------


def provider_name(path):
    name = Path(path).name
    if "trireme" in name:
        return "Trireme"
    if "galera" in name:
        return "Galera"
    return name


def describe_case(meta):
    workload = meta.get("workload", "?")
    threads = meta.get("threads", "?")
    placement = meta.get("placement", "node1")
    where = "all load on node 1" if placement == "node1" else "load spread over the 3 nodes"
    return f"{workload}, {threads} threads, {where}"


def fmt_minutes(seconds):
    return "n/a" if seconds is None else f"{seconds / 60:.1f} min"


def normalize_cnf(text, base):
    """A node's my.cnf with its cluster directory and its ports made generic, so that the
    my.cnf of two clusters differ only where their configuration does."""
    text = re.sub(r"/tmp/trireme-bench-[^/\s]+/[ABC]", "DIR", text)
    if base is None:
        return text

    def port(m):
        n = int(m.group(0))
        return f"BASE+{n - int(base)}" if base <= n < base + 200 else m.group(0)

    return re.sub(r"\b\d{4,5}\b", port, text)


def load_runs(out):
    return [Run(meta.parent) for meta in sorted((out / "runs").glob("*/meta.env"))]


def group(runs, scenario):
    """case -> side -> [Run] in repetition order, cases in the order they first ran."""
    cases = {}
    for run in sorted(runs, key=lambda r: to_float(r.meta.get("t_before")) or math.inf):
        if run.scenario == scenario:
            cases.setdefault(run.case, {}).setdefault(run.side, []).append(run)
    for sides in cases.values():
        for side_runs in sides.values():
            side_runs.sort(key=lambda r: int(r.meta.get("rep", "0") or 0))
    return cases


def metric_table(lines, metrics, stats_a, stats_b, names):
    lines.append(f"| metric | A: {names['A']} | B: {names['B']} | A/B |")
    lines.append("|---|---:|---:|---:|")
    for key, label, decimals in metrics:
        a, b = stats_a.get(key), stats_b.get(key)
        lines.append(
            f"| {label} | {fmt_stat(a, decimals)} | {fmt_stat(b, decimals)} | "
            f"{fmt_ratio(ratio(a, b))} |"
        )


def run_counts(runs_by_side):
    parts = []
    for side in SIDES:
        side_runs = runs_by_side.get(side, [])
        ok = sum(r.ok for r in side_runs)
        parts.append(f"{side}: {ok}/{len(side_runs)} runs ok")
    return ", ".join(parts)


def error_breakdown(runs):
    """'errno×count' per side over all runs, deadlocks excluded."""
    parts = []
    for side in SIDES:
        total = {}
        for run in runs:
            if run.side != side:
                continue
            for errno, n in run.sb["errors"].items():
                if errno != DEADLOCK:
                    total[errno] = total.get(errno, 0) + n
        text = ", ".join(f"{e}×{n}" for e, n in sorted(total.items())) or "none"
        parts.append(f"{side} {text}")
    return "; ".join(parts)


# ---- plots ----------------------------------------------------------------------------------

COLORS = {"A": "tab:blue", "B": "tab:orange"}


def plot_write(out, write, overhead, names, clk):
    """Bar charts of tps and latency per case, A next to B, whiskers from min to max."""
    import matplotlib.pyplot as plt

    cases = list(write)
    labels = [c.replace("oltp_", "").replace("-", "\n") for c in cases]
    stats = {
        case: {
            side: metric_stats(write[case].get(side, []), lambda r: steady_metrics(r, clk))
            for side in SIDES
        }
        for case in cases
    }

    def bars(ax, key, title):
        width = 0.38
        for i, side in enumerate(SIDES):
            xs, ys, lo, hi = [], [], [], []
            for x, case in enumerate(cases):
                stat = stats[case][side].get(key)
                if stat is None:
                    continue
                xs.append(x + (i - 0.5) * width)
                ys.append(stat[0])
                lo.append(stat[0] - stat[1])
                hi.append(stat[2] - stat[0])
            drawn = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3,
                           label=f"{side}: {names[side]}", color=COLORS[side])
            ax.bar_label(drawn, fmt="%.3g", fontsize=6, padding=2)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)

    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(cases) + 2), 4.5))
    bars(ax, "tps", "transactions per second (median, whiskers min–max)")
    ceiling_drawn = False
    for x, case in enumerate(cases):
        base = case.rsplit("-", 1)[0]
        runs = overhead.get(base, {}).get("C", [])
        stat = metric_stats(runs, lambda r: steady_metrics(r, clk)).get("tps")
        if stat:
            ax.hlines(stat[0], x - 0.45, x + 0.45, colors="black", linestyles="dashed",
                      label=None if ceiling_drawn else "standalone, wsrep off")
            ceiling_drawn = True
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "write_tps.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(max(9, 2.4 * len(cases) + 3), 4.2))
    for ax, pct in zip(axes, (50, 95, 99)):
        bars(ax, f"p{pct}", f"latency p{pct} (ms)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "write_latency.png", dpi=110)
    plt.close(fig)
    return ["write_tps.png", "write_latency.png"]


def median_offset(runs, event):
    values = [r.offset(event) for r in runs if r.offset(event) is not None]
    return statistics.median(values) if values else None


def ist_ceiling_section(add, tsv, ist_rows, names):
    """The async replica's apply rate per applier count, and each provider's IST rate as a
    fraction of it; None when the ceiling was not measured."""
    if not tsv.is_file():
        add("The async-replica ceiling was not measured (`bench/scripts/async_ceiling.sh`).")
        add("")
        return None
    add("The ceiling: MariaDB's own parallel replication applying oltp_write_only "
        "transactions from a standalone primary's binary log as an async replica "
        "(`slave_parallel_threads` = appliers, `slave_parallel_mode=optimistic`, the binary "
        "log fetched before the apply is timed, the same my.cnf, timed as IST is). Command: "
        "`bench/scripts/async_ceiling.sh`.")
    add("")
    add(f"| appliers | transactions | ceiling s | ceiling /s | {names['A']} IST / ceiling | "
        f"{names['B']} IST / ceiling |")
    add("|---:|---:|---:|---:|---:|---:|")
    ceiling = {}
    for line in tsv.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) != 4:
            continue
        appliers, transactions, seconds, rate = cells
        rate = to_float(rate)
        fractions = {}
        for side in ("A", "B"):
            ist = ist_rows.get((side, appliers))
            fractions[side] = ist[2] / rate if ist and ist[2] and rate else None
        add(f"| {appliers} | {transactions} | {seconds} | {fmt_num(rate, 0)} | "
            f"{fmt_ratio(fractions['A'])} | {fmt_ratio(fractions['B'])} |")
        ceiling[appliers] = {"rate": rate, "A": fractions["A"], "B": fractions["B"]}
    add("")
    return ceiling


def plot_disturbance(out, scenario, runs_by_side, names, title):
    """Per-second tps of every repetition (thin) and their per-second median (thick)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    everything = []
    for side in SIDES:
        runs = [r for r in runs_by_side.get(side, []) if r.ok]
        everything += runs
        by_second = {}
        for run in runs:
            samples = load_samples(run)
            ts = [s["t"] for s in samples]
            ys = [s["tps"] for s in samples]
            ax.plot(ts, ys, color=COLORS[side], alpha=0.25, linewidth=0.8)
            for t, y in zip(ts, ys):
                by_second.setdefault(t, []).append(y)
        if by_second:
            ts = sorted(by_second)
            ax.plot(ts, [statistics.median(by_second[t]) for t in ts], color=COLORS[side],
                    linewidth=2, label=f"{side}: {names[side]} (median of {len(runs)})")
        back = median_offset(runs, "rejoined")
        if back is not None:
            ax.axvline(back, color=COLORS[side], linestyle=":",
                       label=f"{side}: node back (median)")
    if scenario == "frozen":
        stop, cont = median_offset(everything, "stop"), median_offset(everything, "cont")
        if stop is not None and cont is not None:
            ax.axvspan(stop, cont, color="grey", alpha=0.2, label="node 3 frozen (SIGSTOP)")
    else:
        kill = median_offset(everything, "kill")
        if kill is not None:
            ax.axvline(kill, color="red", linestyle="--", label="node 2 SIGKILLed, restarted")
    ax.set_xlabel("seconds since sysbench's threads started (a sample covers the second before)")
    ax.set_ylabel("tps")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"{scenario}_tps.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


# ---- the report ---------------------------------------------------------------------------


def header(add, meta, names):
    started = to_float(meta.get("started_ns"))
    finished = to_float(meta.get("finished_ns"))
    elapsed = (finished - started) / 1e9 if started and finished else None
    when = datetime.fromtimestamp(started / 1e9).strftime("%Y-%m-%d %H:%M") if started else "?"
    add(f"# wsrep providers side by side: A = {names['A']}, B = {names['B']}")
    add("")
    add(f"- Run: {when}, mode **{meta.get('mode', '?')}** (scenarios: {meta.get('only', '?')}), "
        f"{meta.get('reps', '?')} repetition(s), write-path runs of {meta.get('seconds', '?')} s, "
        f"{meta.get('appliers', '2')} appliers per node (`wsrep_slave_threads`).")
    add(f"- Time budget: {fmt_minutes(to_float(meta.get('load_s')))} of load, estimated "
        f"{fmt_minutes(to_float(meta.get('estimate_s')))} in all; cap "
        f"{meta.get('cap_min', '?')} min (no run starts after "
        f"{fmt_minutes(to_float(meta.get('limit_s')))}, waits end a minute before the cap); "
        f"this run took {fmt_minutes(elapsed)}"
        + ("" if elapsed is not None else " (it was cut short)") + ".")
    for side, key in (("A", "provider_a"), ("B", "provider_b")):
        add(f"- {side}: `{meta.get(key, '?')}` (version {meta.get(key + '_version') or 'n/a'}, "
            f"sha256 {meta.get(key + '_sha256', '?')}…, file from {meta.get(key + '_mtime', '?')})")
    add(f"- Host: {meta.get('host', '?')}; load average {meta.get('loadavg_start', '?')} at the "
        f"start, {meta.get('loadavg_end', '?')} at the end (anything else running skews both "
        "sides, not always equally).")
    add(f"- {meta.get('mariadbd_version', '?')}; {meta.get('sysbench_version', '?')}.")
    add(f"- Data: sysbench {meta.get('tables', '?')} tables × {meta.get('table_size', '?')} rows, "
        "prepared once per cluster; 3 nodes on 127.0.0.1 per provider, both clusters up for "
        "the whole run (the idle one's CPU use is reported).")
    add("")
    add("How to read: each cell is the **median over the repetitions [min–max]** (only the "
        "value with one repetition); A/B is the ratio of the medians. A and B run "
        "alternately, A first in odd repetitions and B first in even ones, so slow drift of "
        "the machine and the after-effects of the previous run hit both. Latency percentiles "
        "come from sysbench's latency histogram (`--histogram=on`, buckets 1.8 % wide). "
        "sysbench runs with `--mysql-ignore-errors=all` through a wrapper "
        "(`bench/harness/oltp_counted.lua`) that counts the errors per error number: "
        "deadlocks (1213) are the normal outcome of a certification conflict, every other "
        "error is counted separately; both count failed attempts, and sysbench retries at "
        "once, so a node that refuses queries yields thousands a second. Σ marks deltas of wsrep status counters over the run, "
        "summed over the nodes; n/a means the provider does not export the variable, or the "
        "run failed.")
    add("")


def read_sst(path):
    """sst.tsv (subject, what, value; one line per figure) as {subject: {what: value}}, in the
    order the subjects first appear."""
    figures = {}
    for line in path.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) == 3:
            figures.setdefault(cells[0], {})[cells[1]] = cells[2]
    return figures


def hosts_faults_section(add, tsv, number):
    """The faults-across-hosts section from bench/scripts/hosts_faults_pair.sh's
    hosts_faults.tsv; returns {scenario: {provider: row}}."""
    add(f"## {number}. Faults across hosts")
    add("")
    add("3 hosts in network namespaces on a bridge (`trireme cluster up --hosts`, a my.cnf "
        "with no listen or node address); sysbench oltp_write_only, 8 threads, across the "
        "bridge to the hosts that stay up, 60 s; the fault 15 s in. partition: node 3 cut off "
        "for 25 s; partition-leader: the Raft leader cut off (Galera: node 3); frozen: node 3 "
        "SIGSTOP for 10 s; failover: node 3 SIGKILL and started again. Command: "
        "`bench/scripts/hosts_faults_pair.sh`.")
    add("")
    rows = {}
    for line in tsv.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) == 7:
            rows.setdefault(cells[1], {})[cells[0]] = cells
    add("| scenario | Trireme 0-tps s | Galera 0-tps s | Trireme worst p99 ms | "
        "Galera worst p99 ms | Trireme back to Synced s | Galera back to Synced s |")
    add("|---|---:|---:|---:|---:|---:|---:|")
    for scenario, by in rows.items():
        a = by.get("trireme", ["?"] * 7)
        b = by.get("galera", ["?"] * 7)
        add(f"| {scenario} | {a[3]} | {b[3]} | {a[4]} | {b[4]} | {a[5]} | {b[5]} |")
    add("")
    return rows


# Targets of the security issue for TLS across hosts.
TLS_MAX_COST_PCT = 10.0
TLS_MIN_RATIO = 1.0
TLS_CONFIGS = (("trireme", "off", "Trireme plain"), ("trireme", "on", "Trireme TLS"),
               ("galera", "off", "Galera plain"), ("galera", "on", "Galera TLS"))


def hosts_tls_section(add, tsv, notes, number):
    """The TLS-across-hosts section from bench/scripts/hosts_tls_pair.sh's hosts_tls.tsv
    (and its notes); returns the figures."""
    add(f"## {number}. TLS across hosts")
    add("")
    add("3 hosts in network namespaces on a bridge (`trireme cluster up --hosts`), in 4 "
        "configurations one after another: each provider without and with mutual TLS for "
        "the group traffic and IST (`socket.ssl_key`, `socket.ssl_cert` = leaf + "
        "intermediate CA, `socket.ssl_ca` = root; the same options on both). sysbench "
        "oltp_write_only, 4 tables × 10,000 rows, 8 threads across the bridge to all 3 "
        "hosts; the order reverses every repetition. A TLS run counts only if every node "
        "logged it (Trireme: \"TLS ready\"; Galera: listening at ssl://). Command: "
        "`bench/scripts/hosts_tls_pair.sh`.")
    add("")
    rows = []
    for line in tsv.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) >= 8:
            rows.append(cells)
    by = {}
    for cells in rows:
        by.setdefault((cells[0], cells[1]), []).append(cells)
    stats = {}
    add("| configuration | tps | p95 ms | ignored errors/s | runs | CA file |")
    add("|---|---:|---:|---:|---:|---|")
    for provider, tls, label in TLS_CONFIGS:
        runs = by.get((provider, tls), [])
        tps = summarize([to_float(c[3]) for c in runs])
        p95 = summarize([to_float(c[4]) for c in runs])
        errs = summarize([to_float(c[6]) for c in runs])
        stats[(provider, tls)] = {"tps": tps, "p95_ms": p95, "errors_per_s": errs}
        counted = sum(1 for c in runs if to_float(c[3]) is not None)
        cas = ", ".join(sorted({c[8] for c in runs if len(c) > 8 and c[8] != "-"})) or "–"
        add(f"| {label} | {fmt_stat(tps, 1)} | {fmt_stat(p95, 2)} | {fmt_stat(errs, 2)} | "
            f"{counted}/{len(runs)} | {cas} |")
    add("")

    def cost(provider):
        r = ratio(stats[(provider, "on")]["tps"], stats[(provider, "off")]["tps"])
        return None if r is None else (1 - r) * 100

    def per_rep_cost(provider):
        plain = {c[2]: to_float(c[3]) for c in by.get((provider, "off"), [])}
        tls = {c[2]: to_float(c[3]) for c in by.get((provider, "on"), [])}
        return ", ".join(f"r{rep} {(1 - tls[rep] / plain[rep]) * 100:.1f} %"
                         for rep in sorted(plain, key=int)
                         if plain[rep] and tls.get(rep) is not None)

    def verdict(ok):
        return "n/a" if ok is None else ("**met**" if ok else "**missed**")

    cost_t, cost_g = cost("trireme"), cost("galera")
    ratio_tls = ratio(stats[("trireme", "on")]["tps"], stats[("galera", "on")]["tps"])
    ratio_plain = ratio(stats[("trireme", "off")]["tps"], stats[("galera", "off")]["tps"])
    add("| figure (medians) | value | target | |")
    add("|---|---:|---:|---|")
    add(f"| TLS cost, Trireme (1 − TLS tps / plain tps) | "
        f"{'n/a' if cost_t is None else f'{cost_t:.1f} %'} | ≤ {TLS_MAX_COST_PCT:.0f} % | "
        f"{verdict(None if cost_t is None else cost_t <= TLS_MAX_COST_PCT)} |")
    add(f"| TLS cost, Galera | {'n/a' if cost_g is None else f'{cost_g:.1f} %'} | "
        "(reference) | |")
    add(f"| Trireme TLS / Galera TLS tps | {fmt_ratio(ratio_tls)} | "
        f"≥ {TLS_MIN_RATIO:.1f} | "
        f"{verdict(None if ratio_tls is None else ratio_tls >= TLS_MIN_RATIO)} |")
    add(f"| Trireme plain / Galera plain tps | {fmt_ratio(ratio_plain)} | (reference) | |")
    add("")
    for provider, name in (("trireme", "Trireme"), ("galera", "Galera")):
        reps = per_rep_cost(provider)
        if reps:
            add(f"- TLS cost of {name} per repetition (plain and TLS of the same "
                f"repetition): {reps}.")
    if notes.is_file():
        # What the reader must know: findings, Galera's verdict on the chain, failures.
        # The same note of every repetition once, with the repetitions it came from.
        keep = {}
        for line in notes.read_text().splitlines():
            text = line.split(" ", 1)[-1]
            if not re.search(r"FINDING|formed with|in the error log of|did not|not counted|"
                             r"failed|exited|cluster_size|not as configured|once more|"
                             r"provider_version", text):
                continue
            rep = re.search(r" (r\d+):", text)
            key = re.sub(r" r\d+:", ":", text)
            keep.setdefault(key, []).append(rep.group(1) if rep else "")
        for text, reps in keep.items():
            reps = [r for r in reps if r]
            add(f"- {text}" + (f" ({', '.join(reps)})" if reps else ""))
    add("")
    return {"configs": {f"{p}-{t}": v for (p, t), v in stats.items()},
            "tls_cost_pct": {"trireme": cost_t, "galera": cost_g},
            "trireme_tls_over_galera_tls": ratio_tls,
            "trireme_plain_over_galera_plain": ratio_plain,
            "targets": {"max_cost_pct": TLS_MAX_COST_PCT, "min_ratio": TLS_MIN_RATIO}}


def sst_section(add, path, number):
    """The SST section from bench/scripts/sst_pair.sh's sst.tsv; returns its figures."""
    figures = read_sst(path)
    run = figures.get("run", {})
    methods = [s for s in figures if s not in ("run", "tar", "cp", "ratio")]
    donor = run.get("donor_pin", "?")
    add(f"## {number}. Full state transfer (SST) under load")
    add("")
    add(f"One 3-node cluster on {provider_name(run.get('provider', '?'))}, "
        f"{run.get('tables', '?')} sysbench "
        f"tables of {run.get('table_size', '?')} rows, the SST methods one after another "
        "(wsrep_sst_method switched at runtime). oltp_write_only runs on node 1 (4 "
        "threads, unthrottled); after 10 s node 3 is stopped and its datadir emptied (a "
        "brand-new member: no saved position, so no IST), 10 s later the page cache is "
        "dropped and node 3 is started. Seconds from `trireme cluster start 3` until node 3 "
        "is Synced (polled every 0.2 s); MB/s = node 1's datadir / those seconds (MB = 10^6 "
        "bytes); tps = median of node 1's 1-s reports in the 10 s before the start (node 3 "
        "lost) and during the transfer; the whole cluster = the first 10 s, with node 3 "
        "Synced (on one machine its applying costs the donor's clients CPU too); donor "
        f"requested: {'any' if donor in ('', 'any') else donor}. "
        "Checksums: after the load, `trireme cluster compare` of every table on the three "
        "nodes at rest (all Synced at one unchanging seqno, then CHECKSUM TABLE). "
        "Command: `bench/scripts/sst_pair.sh`.")
    add("")
    add("| method | result | seconds to Synced | datadir MB | MB/s | donor | tps before | "
        "tps during | during/before | tps, whole cluster | during/whole | checksums equal |")
    add("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for method in methods:
        f = figures[method]
        size = to_float(f.get("datadir_bytes"))
        add(f"| {method} | {f.get('result', 'n/a')} | "
            f"{fmt_num(to_float(f.get('sst_seconds')), 2)} | "
            f"{fmt_num(None if size is None else size / 1e6, 1)} | "
            f"{fmt_num(to_float(f.get('sst_mb_per_s')), 1)} | {f.get('donor', 'n/a')} | "
            f"{fmt_num(to_float(f.get('tps_before')), 1)} | "
            f"{fmt_num(to_float(f.get('tps_during')), 1)} | "
            f"{fmt_ratio(to_float(f.get('tps_ratio')))} | "
            f"{fmt_num(to_float(f.get('tps_full_cluster')), 1)} | "
            f"{fmt_ratio(to_float(f.get('tps_ratio_full_cluster')))} | "
            f"{f.get('checksums_equal', 'n/a')} |")
    add("")
    catch_ups = [m for m in methods if "joined_to_synced_seconds" in figures[m]]
    for method in catch_ups:
        f = figures[method]
        add(f"{method}: JOINED to Synced (the catch-up after the transfer) in "
            f"{fmt_num(to_float(f['joined_to_synced_seconds']), 2)} s, node 1's tps meanwhile "
            f"{fmt_num(to_float(f.get('tps_catching_up')), 1)} "
            f"({fmt_ratio(to_float(f.get('tps_catching_up_ratio')))} of before).")
        add("")
    for method in [m for m in methods if "tps_transferring" in figures[m]]:
        f = figures[method]
        add(f"{method}: from the start to JOINED (copy, preparation, the server's start), "
            f"node 1's tps {fmt_num(to_float(f['tps_transferring']), 1)} "
            f"({fmt_ratio(to_float(f.get('tps_transferring_ratio')))} of before).")
        add("")
    copies = [m for m in methods if "copy_mb_per_s" in figures[m]]
    for method in copies:
        f = figures[method]
        add(f"{method}'s joiner logged its data copy: {f.get('copy_bytes', '?')} bytes in "
            f"{f.get('copy_seconds', '?')} s ({fmt_num(to_float(f['copy_mb_per_s']), 1)} MB/s).")
        add("")
    ceilings = [c for c in ("tar", "cp") if c in figures]
    if ceilings:
        add("The I/O ceiling on the same data: node 2's datadir (node 2 cleanly stopped) "
            "copied from a cold page cache by `tar -cf - . | tar -xf -` and by `cp -r`; "
            "MB/s over the time until the command returned.")
        add("")
        add("| copy | MB | seconds | MB/s | seconds with the final sync |")
        add("|---|---:|---:|---:|---:|")
        for name in ceilings:
            f = figures[name]
            size = to_float(f.get("bytes"))
            add(f"| `{name}` | {fmt_num(None if size is None else size / 1e6, 1)} | "
                f"{fmt_num(to_float(f.get('seconds')), 2)} | "
                f"{fmt_num(to_float(f.get('mb_per_s')), 1)} | "
                f"{fmt_num(to_float(f.get('seconds_synced')), 2)} |")
        add("")
    labels = {
        "rsync_over_trireme_seconds": "rsync seconds / trireme seconds",
        "mariabackup_over_trireme_seconds": "mariabackup seconds / trireme seconds",
        "trireme_copy_over_tar_rate": "trireme data-copy MB/s / tar MB/s",
    }
    ratios = figures.get("ratio", {})
    if ratios:
        add("Ratios: " + "; ".join(f"{labels.get(k, k)} {fmt_ratio(to_float(v))}"
                                   for k, v in ratios.items()) + ".")
        add("")
    return figures


# Targets of the streaming-replication issue for a large transaction.
SR_TIME_TARGET = 1.1
ZERO_RUN_TARGET = 0


def read_large_trx(path):
    """large-trx.tsv (side, variant, what, value) as {(side, variant): {what: value}}; the
    parameters are under ("run", "-")."""
    figures = {}
    for line in path.read_text().splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) == 4:
            figures.setdefault((cells[0], cells[1]), {})[cells[2]] = cells[3]
    return figures


def large_trx_metrics(out, f, threads):
    """What the load on node 2 did around one DELETE: sysbench's samples (counted from its
    threads' start; sample t covers second t-1..t) against the DELETE's offsets."""
    m = {}
    for key in ("delete_ms", "apply_tail_s", "node1_writesets", "node1_bytes"):
        m[key] = to_float(f.get(key))
    if m["delete_ms"] is not None:
        m["delete_s"] = m["delete_ms"] / 1000.0
    start, end = to_float(f.get("delete_start_s")), to_float(f.get("delete_end_s"))
    load = out / f.get("load_file", "-")
    if start is None or end is None or not load.is_file():
        return m
    samples = [s for s in parse_sysbench(load.read_text(errors="replace"))["samples"]
               if s["thds"] >= threads]
    before = [s["tps"] for s in samples if 2 <= s["t"] <= start]
    if before:
        m["tps_before"] = statistics.median(before)
    # Every second that overlaps the DELETE, so that a DELETE shorter than a second still
    # has one.
    during = [s["tps"] for s in samples if s["t"] > start and s["t"] - 1 < end]
    if during:
        m["tps_during"] = statistics.mean(during)
    window = [s for s in samples if s["t"] > start]
    if window:
        m["zero_run"] = longest_zero_run(window)
        m["window_s"] = len(window)
        m["errors"] = sum(s["err"] for s in window)
    return m


def large_trx_section(add, out, path, number, names, have_plots, plots):
    """The streaming-replication section from bench/scripts/large_trx_pair.sh's
    large-trx.tsv; returns its figures."""
    figures = read_large_trx(path)
    run = figures.get(("run", "-"), {})
    # Run on its own, without run.sh's meta.env, the script's own record names the providers.
    names = dict(names)
    for side in SIDES:
        recorded = figures.get((side, "-"), {}).get("provider")
        if names[side] == side and recorded:
            names[side] = provider_name(recorded)
    variants = run.get("variants", "").split()
    threads = int(to_float(run.get("load_threads")) or 0)
    rows, start = run.get("rows", "?"), run.get("delete_from", "?")
    add(f"## {number}. Large transaction with and without streaming replication")
    add("")
    add(f"Table `sr.t (id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))` with {rows} "
        f"rows on a 3-node cluster per provider. Per variant, node 1 runs "
        f"`DELETE FROM sr.t WHERE id >= {start}` as one autocommit statement "
        "(none: `wsrep_trx_fragment_size=0`; rowsN: `wsrep_trx_fragment_unit='rows'`, "
        f"`wsrep_trx_fragment_size=N`) while {run.get('load', '?')} runs (stock sysbench "
        "script, `--mysql-ignore-errors=all`, 1-s reports), "
        f"from {run.get('pre_s', '?')} s before the DELETE until {run.get('post_s', '?')} s "
        "after it and at least 2 s after the apply tail. The deleted rows are put back "
        "(untimed) and all nodes checked equal before each variant; the variants alternate "
        "A/B. DELETE s: wall time of the statement (commit included). Longest zero-tps run: "
        "consecutive 1-s samples of the load without a commit, from the DELETE's start to "
        "the end of the load. Apply tail: from the DELETE's end until nodes 2 and 3 have "
        "committed everything node 1 had then (polled every 0.1 s). Write-sets: replicated "
        "by node 1 during the DELETE (the fragments under SR); MB: their bytes "
        "(wsrep_replicated_bytes, 10^6). Checksums: `trireme cluster compare` of sr.t on "
        "the 3 nodes at rest (all Synced at one unchanging seqno, then CHECKSUM TABLE; waited "
        "for up to 120 s). "
        "FC paused: wsrep_flow_control_paused_ns of node 2 over the whole load (ms), and "
        "the pause requests (wsrep_flow_control_sent) of nodes 1/2/3. "
        f"Server settings added to every node's my.cnf: `{run.get('server_options') or 'none'}`. "
        "Command: `bench/scripts/large_trx_pair.sh`.")
    add("")
    add(f"Targets (from the issue): an SR DELETE takes at most {SR_TIME_TARGET}× the no-SR "
        f"DELETE of the same provider, and the concurrent load has {ZERO_RUN_TARGET} "
        "zero-tps seconds.")
    add("")
    metrics = {}
    for side in SIDES:
        for variant in variants:
            f = figures.get((side, variant))
            if f is not None:
                m = metrics[(side, variant)] = large_trx_metrics(out, f, threads)
                # A DELETE that failed or was given up on has no duration to compare.
                m["failed"] = f.get("delete_rc", "0") != "0" or bool(f.get("result"))
                if m["failed"]:
                    m.pop("delete_s", None)
    add("| provider | variant | DELETE s | / no-SR | write-sets | MB | longest zero-tps run (s) "
        "| tps before | tps during DELETE | apply tail (s) | FC paused ms | FC requests "
        "| checksums equal | targets |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for side in SIDES:
        base = metrics.get((side, "none"), {}).get("delete_s")
        for variant in variants:
            f = figures.get((side, variant))
            if f is None:
                add(f"| {names[side]} | {variant} | not run | | | | | | | | | | | |")
                continue
            m = metrics[(side, variant)]
            failed = m["failed"]
            rel = (m["delete_s"] / base
                   if variant != "none" and base and m.get("delete_s") is not None else None)
            m["sr_ratio"] = rel
            verdict = ["DELETE failed"] if failed else []
            if rel is not None:
                verdict.append("time " + ("met" if rel <= SR_TIME_TARGET else "missed"))
            if m.get("zero_run") is not None:
                verdict.append("stall " + ("met" if m["zero_run"] <= ZERO_RUN_TARGET
                                           else "missed"))
            add(f"| {names[side]} | {variant} | {fmt_num(m.get('delete_s'), 2)} | "
                f"{'—' if variant == 'none' else fmt_ratio(rel)} | "
                f"{fmt_num(m.get('node1_writesets'), 0)} | "
                f"{fmt_num(None if m.get('node1_bytes') is None else m['node1_bytes'] / 1e6, 1)} | "
                f"{fmt_num(m.get('zero_run'), 0)} | "
                f"{fmt_num(m.get('tps_before'), 1)} | {fmt_num(m.get('tps_during'), 1)} | "
                f"{fmt_num(m.get('apply_tail_s'), 2)} | {f.get('fc_paused_ms', 'n/a')} | "
                f"{'/'.join(f.get(f'fc_sent_node{n}', '?') for n in (1, 2, 3))} | "
                f"{f.get('checksums_equal', 'n/a')} | "
                f"{', '.join(verdict) or 'n/a'} |")
    add("")
    add(f"{names['A']} / {names['B']} (A/B; below 1 is better for A in every column but tps):")
    add("")
    add("| variant | DELETE s A/B | apply tail A/B | tps during DELETE A/B | "
        "zero-tps run A / B (s) |")
    add("|---|---:|---:|---:|---|")

    def quotient(variant, key):
        a = metrics.get(("A", variant), {}).get(key)
        b = metrics.get(("B", variant), {}).get(key)
        return None if a is None or b is None or b == 0 else a / b

    for variant in variants:
        za = metrics.get(("A", variant), {}).get("zero_run")
        zb = metrics.get(("B", variant), {}).get("zero_run")
        add(f"| {variant} | {fmt_ratio(quotient(variant, 'delete_s'))} | "
            f"{fmt_ratio(quotient(variant, 'apply_tail_s'))} | "
            f"{fmt_ratio(quotient(variant, 'tps_during'))} | "
            f"{fmt_num(za, 0)} / {fmt_num(zb, 0)} |")
    add("")
    notes = []
    for side in SIDES:
        f = figures.get((side, "-"), {})
        if f.get("result"):
            notes.append(f"{names[side]}: {f['result']}")
        for variant in variants:
            f = figures.get((side, variant))
            if f is None:
                continue
            where = f"{names[side]} {variant}"
            if f.get("result"):
                notes.append(f"{where}: {f['result']}")
            if f.get("delete_error"):
                notes.append(f"{where}: the DELETE failed: `{f['delete_error']}`")
            if f.get("checksums_equal") == "no":
                notes.append(f"{where}: nodes not equal after 120 s: {f.get('not_equal', '?')}")
            elif f.get("checksums_equal") == "n/a":
                notes.append(f"{where}: nodes not compared: {f.get('not_equal', '?')}")
            if f.get("rebuilt_before"):
                notes.append(f"{where}: the cluster was not 3 Synced nodes before this variant "
                             "and was built anew (new datadirs, table filled again)")
            if f.get("errorlog_panics", "0") != "0":
                notes.append(f"{where}: {f['errorlog_panics']} panic(s) in the nodes' error "
                             f"logs, the first: `{f.get('errorlog_first_panic', '?').strip()}`")
            if f.get("errorlog_first_error"):
                notes.append(f"{where}: first [ERROR] line: `{f['errorlog_first_error']}`")
            left = f.get("streaming_log_rows", "").split()
            if any(x != "0" for x in left):
                notes.append(f"{where}: rows left in mysql.wsrep_streaming_log per node: "
                             + " ".join(left))
            errs, warns = f.get("errorlog_errors", "0"), f.get("errorlog_warnings", "0")
            if errs != "0" or warns != "0":
                notes.append(f"{where}: the nodes' error logs gained {errs} [ERROR] and "
                             f"{warns} [Warning] lines (other than aborted connections; "
                             f"large-trx-{side}-{variant}-errorlogs.txt)")
            conflicts = [f"{f[key]} {label}" for key, label in
                         (("node1_cert_failures", "certification failure(s)"),
                          ("node1_bf_aborts", "brute-force abort(s)"))
                         if f.get(key, "0") not in ("0", "")]
            if conflicts:
                notes.append(f"{where}: node 1 counted " + " and ".join(conflicts)
                             + " during the DELETE (the server rolls the statement back and "
                             "retries it once: see the write-set count)")
            errors = metrics[(side, variant)].get("errors")
            if errors:
                notes.append(f"{where}: the load saw about {errors:.0f} errors from the "
                             "DELETE's start on (sum of err/s; deadlocks included)")
    fills = [f"{names[s]} {figures[(s, '-')]['fill_s']} s" for s in SIDES
             if "fill_s" in figures.get((s, "-"), {})]
    if fills:
        notes.append("initial fill of sr.t (100,000 rows per transaction): " + ", ".join(fills))
    for side in SIDES:
        version = figures.get((side, "-"), {}).get("provider_version")
        if version:
            notes.append(f"{names[side]} reports wsrep_provider_version {version}")
    if notes:
        for note in notes:
            add(f"- {note}")
        add("")
    if have_plots and metrics:
        plots.append(plot_large_trx(out, figures, variants, threads, names))
        add("![large transaction](large_trx_tps.png)")
        add("")
    return {f"{side}/{variant}": m for (side, variant), m in metrics.items()}


def plot_large_trx(out, figures, variants, threads, names):
    """The load's tps per second around each DELETE, time counted from the DELETE's start;
    the DELETE itself shaded."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(variants), 1, figsize=(9, 2.6 * len(variants) + 0.6),
                             squeeze=False)
    for ax, variant in zip(axes[:, 0], variants):
        for side in SIDES:
            f = figures.get((side, variant))
            start = to_float(f.get("delete_start_s")) if f else None
            end = to_float(f.get("delete_end_s")) if f else None
            load = out / f.get("load_file", "-") if f else None
            if start is None or load is None or not load.is_file():
                continue
            samples = [s for s in parse_sysbench(load.read_text(errors="replace"))["samples"]
                       if s["thds"] >= threads]
            ax.plot([s["t"] - start for s in samples], [s["tps"] for s in samples],
                    color=COLORS[side], label=f"{side}: {names[side]}", marker=".")
            if end is not None:
                ax.axvspan(0, end - start, color=COLORS[side], alpha=0.12)
        ax.set_title(f"{variant}: load on node 2 (DELETE on node 1 shaded)", fontsize=9)
        ax.set_ylabel("tps")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("seconds since the DELETE started (a sample covers the second "
                           "before)")
    fig.tight_layout()
    name = "large_trx_tps.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py OUT")
    out = Path(sys.argv[1])
    meta = read_env(out / "meta.env")
    clk = int(meta.get("clk_tck", "100") or 100)
    runs = load_runs(out)
    names = {
        "A": provider_name(meta.get("provider_a", "A")),
        "B": provider_name(meta.get("provider_b", "B")),
    }
    if names["A"] == names["B"]:
        names = {"A": f"{names['A']} (A)", "B": f"{names['B']} (B)"}
    try:
        import matplotlib

        matplotlib.use("Agg")
        have_plots = True
    except ImportError:
        have_plots = False

    def steady(run):
        return steady_metrics(run, clk)

    write = group(runs, "write")
    overhead = group(runs, "overhead")
    results = {"meta": meta, "write": {}, "overhead": {}, "frozen": {}, "failover": {}}
    plots = []
    lines = []
    add = lines.append
    header(add, meta, names)
    if not have_plots:
        add("(No plots: matplotlib is not installed.)")
        add("")

    incidents = out / "incidents.txt"
    if incidents.is_file() and incidents.read_text().strip():
        add("**Incidents during the run** (details in run.log):")
        add("")
        for line in incidents.read_text().splitlines():
            add(f"- {line}")
        add("")
    consistency = out / "consistency.txt"
    if consistency.is_file():
        checks = [line for line in consistency.read_text().splitlines() if line.strip()]
        add("Data check after all runs (`trireme cluster compare`: every node Synced at one "
            "unchanging seqno, then CHECKSUM TABLE of every table on every node): "
            + "; ".join(checks) + ".")
        add("")

    # 1. Write path
    add("## 1. Write path")
    add("")
    if not write:
        add("Not run.")
        add("")
    else:
        stats = {case: {side: metric_stats(sides.get(side, []), steady) for side in SIDES}
                 for case, sides in write.items()}
        add("| case | A tps | B tps | A/B tps | A p95 ms | B p95 ms | A/B p95 |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for case, s in stats.items():
            a, b = s["A"], s["B"]
            add(f"| `{case}` | {fmt_stat(a.get('tps'), 1)} | {fmt_stat(b.get('tps'), 1)} | "
                f"{fmt_ratio(ratio(a.get('tps'), b.get('tps')))} | "
                f"{fmt_stat(a.get('p95'), 2)} | {fmt_stat(b.get('p95'), 2)} | "
                f"{fmt_ratio(ratio(a.get('p95'), b.get('p95')))} |")
        add("")
        if have_plots:
            plots += plot_write(out, write, overhead, names, clk)
            add("![tps](write_tps.png)")
            add("")
            add("![latency](write_latency.png)")
            add("")
        for case, sides in write.items():
            first = next(r for side_runs in sides.values() for r in side_runs)
            add(f"### `{case}`: {describe_case(first.meta)}")
            add("")
            every = [r for rs in sides.values() for r in rs]
            add(f"{run_counts(sides)}; errors other than deadlocks: {error_breakdown(every)}.")
            add("")
            metric_table(lines, STEADY_METRICS, stats[case]["A"], stats[case]["B"], names)
            add("")
            results["write"][case] = stats[case]

    # 2. Replication overhead
    add("## 2. Replication overhead")
    add("")
    if not overhead:
        add("Not run.")
        add("")
    else:
        add("The ceiling is one MariaDB server with the same my.cnf started with "
            "`--wsrep-on=OFF --wsrep-provider=none`, the same data and the same sysbench "
            "command on its socket. Overhead = 1 − provider tps / ceiling tps.")
        add("")
        ceilings = {base: metric_stats(sides.get("C", []), steady)
                    for base, sides in overhead.items()}
        add("| standalone | tps | p50 ms | p95 ms | p99 ms |")
        add("|---|---:|---:|---:|---:|")
        for base, c in ceilings.items():
            add(f"| `{base}` | {fmt_stat(c.get('tps'), 1)} | {fmt_stat(c.get('p50'), 2)} | "
                f"{fmt_stat(c.get('p95'), 2)} | {fmt_stat(c.get('p99'), 2)} |")
            results["overhead"][base] = {"C": c}
        add("")
        rows = []
        for base, ceiling in ceilings.items():
            for placement in ("node1", "spread"):
                case = f"{base}-{placement}"
                if case not in write:
                    continue
                cells = [f"`{base}`", placement, fmt_stat(ceiling.get("tps"), 1)]
                for side in SIDES:
                    s = metric_stats(write[case].get(side, []), steady)
                    r = ratio(s.get("tps"), ceiling.get("tps"))
                    cells += [fmt_stat(s.get("tps"), 1),
                              "n/a" if r is None else f"{100 * (1 - r):.0f} %"]
                rows.append("| " + " | ".join(cells) + " |")
        if rows:
            add("| workload | placement | ceiling tps | A tps | A overhead | B tps | B overhead |")
            add("|---|---|---:|---:|---:|---:|---:|")
            lines.extend(rows)
            add("")

    # 3 and 4. Disturbances
    for number, scenario, title, text in (
        (3, "frozen", "Frozen node",
         f"Load on node 1 (oltp_write_only, 8 threads, 1 s reports): {meta.get('frozen', '?')} "
         "(times since sysbench's threads started). Recovery: seconds from SIGSTOP until tps "
         "stays at or above half its median before SIGSTOP for the rest of the run (1 s "
         "resolution; n/a: not back within the run). Node back: seconds from SIGCONT until "
         "node 3 is Synced in a 3-node primary component (node 1 agrees) and has applied "
         "everything node 1 had committed at SIGCONT."),
        (4, "failover", "Failover",
         f"Load on node 1 (oltp_write_only, 8 threads, 1 s reports): {meta.get('failover', '?')} "
         "and restarted at once with `trireme cluster start 2` (retried while its ports are "
         "still taken). Recovery as above, from the SIGKILL. Node back: seconds from the "
         "SIGKILL until node 2 is Synced in a 3-node primary component and has applied "
         "everything node 1 had committed at the restart (includes the restart and the state "
         f"transfer; given up after {meta.get('rejoin_s', '?')} s)."),
    ):
        add(f"## {number}. {title}")
        add("")
        all_runs = [r for r in runs if r.scenario == scenario]
        if not all_runs:
            add("Not run.")
            add("")
            continue
        add(text)
        add("")
        by_side = {side: [r for r in all_runs if r.side == side] for side in SIDES}
        add(f"{run_counts(by_side)}; errors other than deadlocks: {error_breakdown(all_runs)}.")
        add("")
        stats = {side: metric_stats(by_side[side], disturbance_metrics) for side in SIDES}
        metric_table(lines, DISTURBANCE_METRICS, stats["A"], stats["B"], names)
        add("")
        results[scenario] = stats
        if have_plots:
            plots.append(plot_disturbance(out, scenario, by_side, names,
                                          f"{title}: tps per second"))
            add(f"![{scenario}]({scenario}_tps.png)")
            add("")

    add("## 5. Incremental state transfer (IST)")
    add("")
    ist_tsv = out / "ist.tsv"
    if not ist_tsv.is_file():
        add("Not run.")
        add("")
    else:
        add("Node 3 stopped, oltp_write_only on node 1 for the number of write-sets below, "
            "then node 3 started from its kept datadir once per applier count "
            "(`wsrep_slave_threads`). Seconds from the first to the last write-set node 3 "
            "applied (wsrep_last_committed polled every 0.1 s). Command: "
            "`bench/scripts/ist_pair.sh`.")
        add("")
        rows = {}
        for line in ist_tsv.read_text().splitlines()[1:]:
            cells = line.split("\t")
            if len(cells) == 6:
                provider, appliers, gap, seconds, rate, how = cells
                rows[(provider, appliers)] = (gap, seconds, to_float(rate), how)
        appliers_seen = sorted({a for _, a in rows}, key=lambda a: int(a))
        add(f"| appliers | write-sets | {names['A']} s | {names['A']} write-sets/s | "
            f"{names['B']} s | {names['B']} write-sets/s | A/B rate | transfer A / B |")
        add("|---:|---:|---:|---:|---:|---:|---:|---|")
        ist_results = {}
        for appliers in appliers_seen:
            a = rows.get(("A", appliers), ("?", "n/a", None, "?"))
            b = rows.get(("B", appliers), ("?", "n/a", None, "?"))
            rate_ratio = a[2] / b[2] if a[2] and b[2] else None
            add(f"| {appliers} | {a[0]} | {a[1]} | {fmt_num(a[2], 0)} | {b[1]} | "
                f"{fmt_num(b[2], 0)} | {fmt_ratio(rate_ratio)} | {a[3]} / {b[3]} |")
            ist_results[appliers] = {"A": a, "B": b}
        add("")
        results["ist"] = ist_results
        results["ist_ceiling"] = ist_ceiling_section(add, out / "ist_ceiling.tsv", rows,
                                                     names)

    number = 6
    sst_tsv = out / "sst.tsv"
    if sst_tsv.is_file():
        results["sst"] = sst_section(add, sst_tsv, number)
        number += 1

    faults_tsv = out / "hosts_faults.tsv"
    if faults_tsv.is_file():
        results["hosts_faults"] = hosts_faults_section(add, faults_tsv, number)
        number += 1

    tls_tsv = out / "hosts_tls.tsv"
    if tls_tsv.is_file():
        results["hosts_tls"] = hosts_tls_section(add, tls_tsv, out / "hosts_tls-notes.txt",
                                                 number)
        number += 1

    large_tsv = out / "large-trx.tsv"
    if large_tsv.is_file():
        results["large_trx"] = large_trx_section(add, out, large_tsv, number, names,
                                                 have_plots, plots)
    else:
        add(f"## {number}. Large transaction with and without streaming replication")
        add("")
        add("Not run (`bench/run.sh --only large-trx`).")
        add("")

    # Command lines and configuration
    add("## Command lines and configuration")
    add("")
    add(f"Harness: `{meta.get('command', '?').strip()}`")
    add("")
    commands = out / "config" / "commands.txt"
    if commands.is_file():
        add("```text")
        for line in commands.read_text().splitlines():
            label, _, command = line.partition("\t")
            add(f"# {label}")
            add(command.strip())
        add("```")
        add("")
    add("The first sysbench run of each case (provider B's use its own sockets):")
    add("")
    add("```text")
    seen = set()
    for run in sorted(runs, key=lambda r: to_float(r.meta.get("t_before")) or math.inf):
        key = (run.scenario, run.case)
        if key in seen or "cmd" not in run.meta:
            continue
        seen.add(key)
        add(f"# {run.scenario} {run.case} ({run.side})")
        add(run.meta["cmd"].strip())
    add("```")
    add("")
    cnf_a = out / "config" / "A-node1.my.cnf"
    cnf_b = out / "config" / "B-node1.my.cnf"
    if cnf_a.is_file():
        add("my.cnf of node 1 of cluster A (written by `trireme cluster up`):")
        add("")
        add("```ini")
        add(cnf_a.read_text().rstrip())
        add("```")
        add("")
    if cnf_a.is_file() and cnf_b.is_file():
        ports = dict(p.split("=", 1) for p in meta.get("ports", "").split() if "=" in p)
        diff = difflib.unified_diff(
            normalize_cnf(cnf_a.read_text(), to_float(ports.get("A"))).splitlines(),
            normalize_cnf(cnf_b.read_text(), to_float(ports.get("B"))).splitlines(),
            "A-node1.my.cnf", "B-node1.my.cnf", lineterm="", n=0)
        add("Cluster B's node 1 has its own directory and base port; apart from those "
            "(written DIR and BASE+k) it differs in:")
        add("")
        add("```diff")
        lines.extend(diff)
        add("```")
        add("")
    add("The standalone server uses the my.cnf of a 1-node cluster made the same way "
        "(config/C-node1.my.cnf) with the options above. Raw results are in runs/*/ "
        "(sysbench output, wsrep status of every node before and after, CPU ticks, event "
        "times); the aggregated numbers are also in results.json.")
    add("")

    (out / "report.md").write_text("\n".join(lines))
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"report.py: wrote {out / 'report.md'}"
          + (f" and {', '.join(plots)}" if plots else ""))


if __name__ == "__main__":
    main()
