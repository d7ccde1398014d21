#!/usr/bin/env python3
"""summary.py OUT SETTLE SECONDS - the tables of bench/host/run from OUT/results.tsv and OUT/agent.tsv.

Per server and regime: medians over the rounds of throughput, p99, max, PSS and the huge share; the
per-round ratio agent / none of each (paired by round, its median and range); per host: the geometric mean
of the servers' throughput ratios, the memory ratio (MemTotal - MemAvailable), the agent's CPU."""
import csv
import math
import statistics
import sys

out, settle, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = list(csv.DictReader(open(f"{out}/results.tsv"), delimiter="\t"))
agent = list(csv.DictReader(open(f"{out}/agent.tsv"), delimiter="\t"))


def value(row, key):
    try:
        v = float(row[key])
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None


def series(server, regime, key):
    return {int(r["round"]): value(r, key) for r in rows if r["server"] == server and r["regime"] == regime}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(server, key):
    """agent / none per round: its median, min and max."""
    a, n = series(server, "agent", key), series(server, "none", key)
    ratios = [a[r] / n[r] for r in a if r in n and a[r] and n[r]]
    return (statistics.median(ratios), min(ratios), max(ratios)) if ratios else None


def text(v, scale=1.0, unit="", digits=3):
    return "-" if v is None else f"{v * scale:.{digits}g}{unit}"


def ratio_text(r):
    return "-" if r is None else f"{r[0]:.2f}x ({r[1]:.2f}-{r[2]:.2f})"


servers = ["redis", "postgres", "memcached", "java"]
print(f"\nper server, medians over the rounds (none | agent); ratios agent / none per round, median (range)")
header = ("server", "throughput none", "agent", "ratio", "p99 none", "agent", "ratio", "max none", "agent", "ratio",
          "PSS none", "agent", "huge none", "agent")
table = [header]
throughput_ratios = []
for s in servers:
    t = ratio(s, "throughput")
    if t:
        throughput_ratios.append(t[0])
    med = {(k, g): median(series(s, g, k).values()) for k in ("throughput", "p99_seconds", "max_seconds", "pss_bytes",
                                                              "huge_fraction") for g in ("none", "agent")}
    table.append((s, text(med["throughput", "none"], digits=6), text(med["throughput", "agent"], digits=6), ratio_text(t),
                  text(med["p99_seconds", "none"], 1e3, " ms"), text(med["p99_seconds", "agent"], 1e3, " ms"),
                  ratio_text(ratio(s, "p99_seconds")),
                  text(med["max_seconds", "none"], 1e3, " ms"), text(med["max_seconds", "agent"], 1e3, " ms"),
                  ratio_text(ratio(s, "max_seconds")),
                  text(med["pss_bytes", "none"], 2**-20, " MiB", 4), text(med["pss_bytes", "agent"], 2**-20, " MiB", 4),
                  text(med["huge_fraction", "none"], 100, " %", 3), text(med["huge_fraction", "agent"], 100, " %", 3)))
widths = [max(len(row[i]) for row in table) for i in range(len(header))]
for row in table:
    print("  " + "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)))

print("\nper host")
if throughput_ratios:
    geomean = math.exp(sum(math.log(r) for r in throughput_ratios) / len(throughput_ratios))
    print(f"  throughput, geometric mean of the servers' ratios: {geomean:.3f}x over {len(throughput_ratios)} servers")
memory = ratio("host", "pss_bytes")
print(f"  host memory (MemTotal - MemAvailable, after the loads): agent / none {ratio_text(memory)}")
cpu = [float(r["agent_cpu_seconds"]) for r in agent]
if cpu:
    span = settle + 4 * (seconds + 2)
    print(f"  agent CPU: {statistics.median(cpu):.2f} s per round (median; {len(cpu)} rounds), "
          f"{100 * statistics.median(cpu) / span:.1f} % of one core over the ~{span:.0f} s it ran")
