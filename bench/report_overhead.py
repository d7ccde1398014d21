#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""report_overhead.py - what the run report's peak tracking costs a program.

Runs one workload under `hugify run` in three ways, interleaved round by round (never back to back):
  no-report   hugify run --heap auto -- CMD
  exit-only   the same with --report and HUGIFY_PEAK_INTERVAL_MS=0 (unmap hooks only, no sampler)
  peak        the same with --report (hooks + the sampler thread, the default)
and prints the median CPU time (user + system, the whole process tree) and wall time of each, the
ratios to no-report, and the sampler's own CPU time as the reports give it.

  bench/report_overhead.py [--rounds N] [--hugify PATH] -- CMD [ARGS...]
  default CMD: build/bench/absl_hash_map --allocator std --repeat 1 --in-process (the seed's 10 M inserts, one process)
"""
import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time


def run_once(argv, env):
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execvpe(argv[0], argv, env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"report_overhead: {' '.join(argv)} failed with status {status}")
    return usage.ru_utime + usage.ru_stime, wall


def report_figures(path):
    """Sampler CPU seconds and process CPU seconds summed over the tree's reports (FILE and FILE.<pid>)."""
    sampler = 0.0
    directory, base = os.path.split(path)
    for name in os.listdir(directory):
        if name == base or name.startswith(base + "."):
            full = os.path.join(directory, name)
            try:
                with open(full) as f:
                    report = json.load(f)
            except (OSError, ValueError):
                continue
            finally:
                os.unlink(full)
            for process in report.get("processes", [report]):
                sampler += process.get("peak", {}).get("sampler_cpu_seconds", 0.0)
    return sampler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--hugify", default="build/bin/hugify")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"] or ["build/bench/absl_hash_map", "--allocator", "std", "--repeat", "1", "--in-process"]
    workdir = tempfile.mkdtemp(prefix="hugify-overhead.")
    report = os.path.join(workdir, "report.json")
    base = [args.hugify, "run", "--heap", "auto"]
    configs = {
        "no-report": (base + ["--"] + command, {}),
        "exit-only": (base + ["--report", report, "--"] + command, {"HUGIFY_PEAK_INTERVAL_MS": "0"}),
        "peak": (base + ["--report", report, "--"] + command, {}),
    }
    cpu = {name: [] for name in configs}
    wall = {name: [] for name in configs}
    sampler = []
    names = list(configs)
    for round_number in range(args.rounds):
        order = names[round_number % len(names):] + names[:round_number % len(names)]
        for name in order:
            argv, extra = configs[name]
            c, w = run_once(argv, dict(os.environ, **extra))
            cpu[name].append(c)
            wall[name].append(w)
            if name != "no-report":
                s = report_figures(report)
                if name == "peak":
                    sampler.append(s)
    os.rmdir(workdir)
    base_cpu, base_wall = statistics.median(cpu["no-report"]), statistics.median(wall["no-report"])
    print(f"workload: {' '.join(command)}; {args.rounds} interleaved rounds; medians")
    print(f"{'config':<10} {'cpu s':>8} {'x':>7} {'wall s':>8} {'x':>7}")
    for name in names:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"{name:<10} {c:8.3f} {c / base_cpu:7.3f} {w:8.3f} {w / base_wall:7.3f}")
    s = statistics.median(sampler)
    print(f"sampler thread CPU (from the reports): {s * 1000:.2f} ms = {100 * s / statistics.median(cpu['peak']):.2f} % "
          f"of the run's CPU time")


if __name__ == "__main__":
    main()
