#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Medians over rounds of collapse_pause.sh's trial lines, one row per lever (markdown).
Usage: collapse_pause_table.py SUMMARY..."""
import re
import statistics
import sys

rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r"^(\S+)\s+r\d+ wall_s=([\d.]+) cpu_s=([\d.]+) \| base max=([\d.]*) run-max=([\d.-]*) p99=([\d.-]*) \| "
                     r"during max=([\d.]*) run-max=([\d.-]*) p99=([\d.-]*) rps=([\d.-]*) \| load ([\d.]+)", line)
        if not m:
            continue
        pause = re.search(r"longest_pause_ms=([\d.]+)", line)
        rows.setdefault(m.group(1), []).append(m.groups()[1:] + (pause.group(1) if pause else "",))


def med(values):
    values = [float(v) for v in values if v not in ("", "-")]
    return statistics.median(values) if values else float("nan")


def ratios(trials, during, base):
    """per trial during/base, so that a noisy trial's baseline travels with it"""
    return [float(t[during]) / float(t[base]) for t in trials if t[during] not in ("", "-") and t[base] not in ("", "-", "0")]


print("| lever | rounds | base max | base p99 | during max | max / base max | during run-max | during p99 | p99 / base p99 "
      "| GET/s | wall s | CPU s | hugify's longest pause | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for lever, trials in rows.items():
    col = list(zip(*trials))
    print(f"| {lever} | {len(trials)} | {med(col[2]):.1f} | {med(col[4]):.1f} | {med(col[5]):.1f} ({min(float(v) for v in col[5] if v):.0f}-{max(float(v) for v in col[5] if v):.0f}) "
          f"| {med(ratios(trials, 5, 2)):.2f} | {med(col[6]):.1f} | {med(col[7]):.1f} | {med(ratios(trials, 7, 4)):.2f} "
          f"| {med(col[8]) / 1e3:.0f} k | {med(col[0]):.2f} | {med(col[1]):.2f} | {med(col[10]):.1f} | {med(col[9]):.1f} |")
