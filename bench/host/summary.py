#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""summary.py OUT [--chart FILE] [--reachable] - the tables of bench/host/run (docs/host.md).

From OUT/results.tsv and OUT/agent.tsv: per server and regime the medians over the rounds of throughput,
p99, max, PSS, the huge share and the server's system-time share; the per-round ratio regime / none of each
(paired by round: its median and range, which for the median of 4 rounds is an 87.5 % interval); per host
the geometric mean of the servers' throughput ratios, per round, with and without PostgreSQL; the memory
ratios (MemTotal - MemAvailable, hugetlb pages included where the regime holds a pool; the servers' own
cgroup's anonymous + shared memory; their PSS and RSS summed); the load average the figures were taken at; the agent's CPU against its budget and the host.
From OUT/converge.tsv and OUT/converge_slices.tsv: the time the agent's defaults took to reach the target,
and each server's latency per turn before, while and after the agent works, against issue 19's bound.
--chart FILE draws throughput and p99 per server and regime, relative to none, as an SVG.
--reachable prints the median host huge bytes of the agent regime's rounds (the convergence's 100 %)."""
import csv
import json
import math
import os
import statistics
import sys
from xml.sax.saxutils import escape

SERVERS = ["redis", "postgres", "memcached", "java"]


def value(row, key):
    try:
        v = float(row[key])
        return v if math.isfinite(v) else None
    except (TypeError, ValueError, KeyError):
        return None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def spread(values):
    """(median, min, max) of the values, or None"""
    values = [v for v in values if v is not None]
    return (statistics.median(values), min(values), max(values)) if values else None


class Results:
    def __init__(self, out):
        self.rows = list(csv.DictReader(open(f"{out}/results.tsv"), delimiter="\t"))
        self.regimes = [r for r in dict.fromkeys(row["regime"] for row in self.rows) if r != "none"]

    def series(self, server, regime, key):
        """{round: value}"""
        return {int(r["round"]): value(r, key) for r in self.rows if r["server"] == server and r["regime"] == regime}

    def ratios(self, server, regime, key, base="none"):
        """{round: regime / base}"""
        a, n = self.series(server, regime, key), self.series(server, base, key)
        return {r: a[r] / n[r] for r in a if r in n and a[r] and n[r]}

    def servers_memory(self, regime, key):
        """{round: the four servers' KEY (pss_bytes, rss_bytes) summed}, for the rounds that have all four"""
        per_server = [self.series(s, regime, key) for s in SERVERS]
        return {r: sum(p[r] for p in per_server) for r in per_server[0]
                if all(p.get(r) is not None for p in per_server)}

    def memory_ratios(self, regime, key, base="none"):
        a, n = self.servers_memory(regime, key), self.servers_memory(base, key)
        return {r: a[r] / n[r] for r in a if r in n and n[r]}

    def load(self, regime):
        """(median, min, max) of the 1-minute load average when each of the regime's figures was taken"""
        return spread([float(r["loadavg"].split(",")[0]) for r in self.rows
                       if r["regime"] == regime and r.get("loadavg") and r["loadavg"] != "nan"])

    def host_throughput(self, regime, servers, base="none"):
        """(median, min, max) over the rounds of each round's geometric mean of the servers' ratios"""
        per_server = [self.ratios(s, regime, "throughput", base) for s in servers]
        rounds = set.intersection(*(set(p) for p in per_server)) if per_server else set()
        return spread([geomean([p[r] for p in per_server]) for r in sorted(rounds)])


def text(v, scale=1.0, unit="", digits=3):
    return "-" if v is None else f"{v * scale:.{digits}g}{unit}"


def ratio_text(r):
    return "-" if r is None else f"{r[0]:.2f}x ({r[1]:.2f}-{r[2]:.2f})"


def print_table(table):
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  " + "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))


def system_share(row):
    """the server's system time as a share of its CPU during its load, or None"""
    user, system = value(row, "user_seconds") or 0, value(row, "system_seconds") or 0
    return system / (user + system) if user + system > 0 else None


def server_table(res, regime):
    print(f"\nper server, medians over the rounds (none | {regime}); ratios {regime} / none per round: median (range)")
    table = [("server", "throughput none", regime, "ratio", "p99 none", regime, "ratio", "max none", regime, "ratio",
              "PSS none", regime, "huge none", regime, "sys share none", regime)]
    for s in SERVERS:
        med = {(k, g): median(res.series(s, g, k).values())
               for k in ("throughput", "p99_seconds", "max_seconds", "pss_bytes", "huge_fraction") for g in ("none", regime)}
        sys_share = {g: median([system_share(r) for r in res.rows if r["server"] == s and r["regime"] == g])
                     for g in ("none", regime)}
        table.append((s, text(med["throughput", "none"], digits=6), text(med["throughput", regime], digits=6),
                      ratio_text(spread(res.ratios(s, regime, "throughput").values())),
                      text(med["p99_seconds", "none"], 1e3, " ms"), text(med["p99_seconds", regime], 1e3, " ms"),
                      ratio_text(spread(res.ratios(s, regime, "p99_seconds").values())),
                      text(med["max_seconds", "none"], 1e3, " ms"), text(med["max_seconds", regime], 1e3, " ms"),
                      ratio_text(spread(res.ratios(s, regime, "max_seconds").values())),
                      text(med["pss_bytes", "none"], 2**-20, " MiB", 4), text(med["pss_bytes", regime], 2**-20, " MiB", 4),
                      text(med["huge_fraction", "none"], 100, " %"), text(med["huge_fraction", regime], 100, " %"),
                      text(sys_share["none"], 100, " %"), text(sys_share[regime], 100, " %")))
    print_table(table)


def host_lines(res, regime, agent_rows):
    print(f"\nper host, {regime} / none")
    both = res.host_throughput(regime, SERVERS)
    without = res.host_throughput(regime, [s for s in SERVERS if s != "postgres"])
    print(f"  throughput, geometric mean of the servers' ratios, per round: {ratio_text(both)} with PostgreSQL, "
          f"{ratio_text(without)} without")
    print(f"  host memory (MemTotal - MemAvailable after the loads): {ratio_text(spread(res.ratios('host', regime, 'pss_bytes').values()))}"
          f"; huge pages on the host {text(median(res.series('host', regime, 'huge_fraction').values()), 2**-20, ' MiB', 4)}")
    cgroup = spread(res.ratios("host", regime, "rss_bytes").values())
    if cgroup:
        print(f"  the servers' memory (their cgroup's anonymous + shared memory): {ratio_text(cgroup)} "
              f"({text(median(res.series('host', 'none', 'rss_bytes').values()), 2**-20, ' MiB', 4)} -> "
              f"{text(median(res.series('host', regime, 'rss_bytes').values()), 2**-20, ' MiB', 4)})")
    for key, name in (("pss_bytes", "PSS"), ("rss_bytes", "RSS")):
        if res.servers_memory(regime, key):
            print(f"  the four servers' {name} summed: {ratio_text(spread(res.memory_ratios(regime, key).values()))} "
                  f"({text(median(res.servers_memory('none', key).values()), 2**-20, ' MiB', 4)} -> "
                  f"{text(median(res.servers_memory(regime, key).values()), 2**-20, ' MiB', 4)})")
    load = res.load(regime)
    if load:
        print(f"  load average (1 min) when the figures were taken: {load[0]:.1f} ({load[1]:.1f}-{load[2]:.1f}); "
              f"under none {res.load('none')[0]:.1f} ({res.load('none')[1]:.1f}-{res.load('none')[2]:.1f})")
    if regime == "agent" and agent_rows:
        cpu = median([float(r["agent_cpu_seconds"]) for r in agent_rows])
        wall = median([float(r["wall_seconds"]) for r in agent_rows])
        budget = median([float(r["budget_percent"]) for r in agent_rows])
        cores = os.cpu_count() or 1
        print(f"  agent CPU: {cpu:.2f} s a round (median of {len(agent_rows)}) over the {wall:.0f} s it ran: "
              f"{100 * cpu / wall:.2f} % of one core (budget {budget:g} %), {100 * cpu / wall / cores:.2f} % of the "
              f"host's {cores} CPUs")


def agent_against_always(res):
    """The operator's question: does madvise plus the agent give what `always` gives, without its bloat?
    Yes when, as medians over the rounds: the servers' throughput (geometric mean of agent / always) >= 0.98x,
    the host's memory <= always's and <= 1.03x none's, and no server's p99 worse than always's beyond the
    rounds' spread (every round's agent / always above 1)."""
    print("\nagent / always (madvise plus hugify agent against THP always with khugepaged), per round")
    p99_worse = []
    for s in SERVERS:
        p99 = spread(res.ratios(s, 'agent', 'p99_seconds', 'always').values())
        if p99 and p99[1] > 1:
            p99_worse.append(f"{s} {ratio_text(p99)}")
        print(f"  {s}: throughput {ratio_text(spread(res.ratios(s, 'agent', 'throughput', 'always').values()))}, "
              f"p99 {ratio_text(p99)}, PSS {ratio_text(spread(res.ratios(s, 'agent', 'pss_bytes', 'always').values()))}, "
              f"RSS {ratio_text(spread(res.ratios(s, 'agent', 'rss_bytes', 'always').values()))}")
    throughput = res.host_throughput("agent", SERVERS, "always")
    host = {pair: spread(res.ratios("host", pair[0], "pss_bytes", pair[1]).values())
            for pair in (("agent", "always"), ("always", "none"), ("agent", "none"))}
    cgroup = {pair: spread(res.ratios("host", pair[0], "rss_bytes", pair[1]).values()) for pair in host}
    servers_pss = spread(res.memory_ratios("agent", "pss_bytes", "always").values())
    print(f"  host: throughput {ratio_text(throughput)} (geometric mean of the servers); "
          f"MemTotal - MemAvailable {ratio_text(host['agent', 'always'])} (always / none {ratio_text(host['always', 'none'])}); "
          f"the servers' cgroup {ratio_text(cgroup['agent', 'always'])} (always / none {ratio_text(cgroup['always', 'none'])}); "
          f"the servers' PSS summed {ratio_text(servers_pss)}")
    # The memory the answer weighs: the servers' own cgroup where the run had one (the host's figure counts
    # whatever else runs on the machine, and `always` gives their processes huge pages too), else the host's.
    memory, name = (cgroup, "the servers' memory (cgroup)") if cgroup["agent", "always"] else (host, "host memory")
    if throughput and memory["agent", "always"] and memory["agent", "none"]:
        checks = [(f"throughput >= 0.98x always: {throughput[0]:.2f}x", throughput[0] >= 0.98),
                  (f"{name} <= always: {memory['agent', 'always'][0]:.2f}x", memory["agent", "always"][0] <= 1.0),
                  (f"{name} <= 1.03x none: {memory['agent', 'none'][0]:.2f}x", memory["agent", "none"][0] <= 1.03),
                  ("p99 no worse than always beyond the rounds' spread: "
                   + (", ".join(p99_worse) + " worse in every round" if p99_worse else "every server"), not p99_worse)]
        print(f"  answer: {'yes' if all(ok for _, ok in checks) else 'no'} (medians over the rounds):")
        for what, ok in checks:
            print(f"    {'met' if ok else 'NOT met'}: {what}")


def json_objects(path):
    """the JSON documents of a file written by hugify agent --json (one per pass)"""
    try:
        data = open(path).read()
    except OSError:
        return []
    decoder, at, objects = json.JSONDecoder(), 0, []
    while True:
        while at < len(data) and data[at].isspace():
            at += 1
        if at >= len(data):
            return objects
        try:
            obj, at = decoder.raw_decode(data, at)
        except ValueError:
            return objects
        objects.append(obj)


def find_key(obj, key):
    """the values of KEY anywhere in a JSON document"""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield v
            yield from find_key(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from find_key(v, key)


def convergence(out):
    try:
        lines = open(f"{out}/converge.tsv").read().splitlines()
        slices = list(csv.DictReader(open(f"{out}/converge_slices.tsv"), delimiter="\t"))
    except OSError:
        return
    marks = {}
    for line in lines:
        if line.startswith("#"):
            words = line[1:].split()
            marks.update({words[i]: float(words[i + 1]) for i in range(0, len(words) - 1, 2)})
    samples = [tuple(float(x) for x in line.split("\t")) for line in lines[1:] if line and not line.startswith("#")]
    target = marks.get("target_bytes", 0)
    reached = next(((s, h, c) for s, h, c in samples if h >= target), None)
    passes = json_objects(f"{out}/agent-converge.json")
    collapsed = passes[-1].get("collapsed_bytes", 0) if passes else 0  # the pass objects' count is cumulative
    longest = max([v for p in passes for v in find_key(p, "longest_call_seconds") if isinstance(v, (int, float))] or [0])
    print("\nconvergence: the agent's defaults, every server under load in turns")
    if reached:
        print(f"  {target / 2**20:.0f} MiB huge (90 % of what the agent rounds reached) after {reached[0]:.0f} s, "
              f"the agent having used {reached[2]:.2f} s of CPU")
    elif samples:
        last = samples[-1]
        print(f"  not reached in {last[0]:.0f} s: {last[1] / 2**20:.0f} MiB of the {target / 2**20:.0f} MiB target "
              f"({100 * last[1] / target if target else 0:.0f} %), the agent having used {last[2]:.2f} s of CPU")
    print(f"  the agent collapsed {collapsed / 2**20:.0f} MiB; its longest call {1e3 * longest:.1f} ms")
    start, done = marks.get("agent_started", 0), marks.get("agent_done", math.inf)
    phases = {"before": lambda s: float(s["end"]) <= start,
              "while": lambda s: float(s["start"]) >= start and float(s["end"]) <= done,
              "after": lambda s: float(s["start"]) >= done}
    table = [("server", "turns before/while/after", "max before", "max while", "max after", "bound", "within",
              "p99 before (median turn)", "while", "after", "while / before")]
    for server in SERVERS:
        got = {p: [s for s in slices if s["server"] == server and f(s)] for p, f in phases.items()}
        worst = {p: max([value(s, "max_seconds") or 0 for s in got[p]] or [0]) for p in got}
        p99 = {p: median([value(s, "p99_seconds") for s in got[p]]) for p in got}
        bound = max(2 * worst["before"], worst["before"] + longest)
        table.append((server, "/".join(str(len(got[p])) for p in phases),
                      *(text(worst[p], 1e3, " ms") for p in phases), text(bound, 1e3, " ms"),
                      "yes" if worst["while"] <= bound else "NO", *(text(p99[p], 1e3, " ms") for p in phases),
                      f"{p99['while'] / p99['before']:.2f}x" if p99["while"] and p99["before"] else "-"))
    print_table(table)


def chart(res, path):
    """throughput and p99 per server, every regime relative to none's median: the median of the rounds with a
    bar from the lowest to the highest round"""
    regimes = ["none"] + res.regimes
    colors = ["#888888", "#1f77b4", "#d62728", "#2ca02c"]
    panels = [("throughput", "throughput relative to none (higher is better)"),
              ("p99_seconds", "p99 latency relative to none (lower is better)")]
    width, panel_h, left, top = 820, 300, 70, 60
    height = top + len(panels) * (panel_h + 60) + 20
    plot_w = width - left - 150
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="system-ui, Helvetica, Arial, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="26" font-size="15" font-weight="bold">One host, four servers: '
           f'{", ".join(res.regimes)} against none</text>',
           f'<text x="{left}" y="44" fill="#555">median of {len(set(r["round"] for r in res.rows))} rounds, bars from the '
           f'lowest to the highest round; each server relative to its own median under none</text>']
    for p, (key, title) in enumerate(panels):
        y0 = top + p * (panel_h + 60) + 20
        points = {}
        for s in SERVERS:
            base = median(res.series(s, "none", key).values())
            for g in regimes:
                values = [v / base for v in res.series(s, g, key).values() if v is not None and base]
                if values:
                    points[s, g] = spread(values)
        top_value = max([v[2] for v in points.values()] + [1.0]) * 1.05
        step = next(st for st in (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10) if top_value / st <= 10)
        hi = step * math.ceil(top_value / step)

        def y(v):
            return y0 + panel_h * (1 - v / hi)

        out.append(f'<text x="{left}" y="{y0 - 6}" font-weight="bold">{escape(title)}</text>')
        for k in range(0, round(hi / step) + 1):
            tick = step * k
            out.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
        out.append(f'<line x1="{left}" y1="{y(1):.1f}" x2="{left + plot_w}" y2="{y(1):.1f}" stroke="#444" '
                   f'stroke-dasharray="4 3"/>')
        column = plot_w / len(SERVERS)
        for i, s in enumerate(SERVERS):
            out.append(f'<text x="{left + column * (i + 0.5):.1f}" y="{y0 + panel_h + 18}" text-anchor="middle">{s}</text>')
            for j, g in enumerate(regimes):
                if (s, g) not in points:
                    continue
                mid, low, high = points[s, g]
                x = left + column * i + column * (j + 1) / (len(regimes) + 1)
                color = colors[j % len(colors)]
                out.append(f'<line x1="{x:.1f}" y1="{y(low):.1f}" x2="{x:.1f}" y2="{y(high):.1f}" stroke="{color}" '
                           f'stroke-width="2"/>')
                out.append(f'<circle cx="{x:.1f}" cy="{y(mid):.1f}" r="5" fill="{color}"/>')
    for j, g in enumerate(regimes):
        out.append(f'<circle cx="{left + plot_w + 24}" cy="{top + 30 + 20 * j}" r="5" fill="{colors[j % len(colors)]}"/>')
        out.append(f'<text x="{left + plot_w + 36}" y="{top + 34 + 20 * j}">{escape(g)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out = args[0]
    res = Results(out)
    if "--reachable" in args:
        print(f"{median(res.series('host', 'agent', 'huge_fraction').values()) or 0:.0f}")
        return
    try:
        agent_rows = list(csv.DictReader(open(f"{out}/agent.tsv"), delimiter="\t"))
    except OSError:
        agent_rows = []
    for regime in res.regimes:
        server_table(res, regime)
        host_lines(res, regime, agent_rows)
    if {"agent", "always"} <= set(res.regimes):
        agent_against_always(res)
    convergence(out)
    if "--chart" in args:
        chart(res, args[args.index("--chart") + 1])
        print(f"\nchart: {args[args.index('--chart') + 1]}")


if __name__ == "__main__":
    main()
