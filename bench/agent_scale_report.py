#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""agent_scale_report.py DIR - the figures and verdicts of a run of bench/agent_scale.sh, from the files it wrote
in DIR (samples.tsv every 10 s, passes.tsv every pass, timed.tsv, state.final.json, host.last, run.txt): a table
per minute, then each target with PASS or MISS. Exit 1 when a target is missed."""
import csv, json, sys

if len(sys.argv) != 2:
    sys.exit("usage: agent_scale_report.py DIR (a directory bench/agent_scale.sh wrote)")
out = sys.argv[1]
hz, ticks, wall, warmup = (float(v) for v in open(f"{out}/run.txt").read().split())
read = lambda name: [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(f"{out}/{name}"), delimiter="\t")]
samples, passes, timed = read("samples.tsv"), read("passes.tsv"), list(csv.DictReader(open(f"{out}/timed.tsv"), delimiter="\t"))
passes.insert(0, {"t": 0, "passes": 0, "cpu_seconds": 0, "collapsed_bytes": 0, "listed": 0, "wall_s": 0})  # its start
state = json.load(open(f"{out}/state.final.json"))
budget, longest_call = state["cpu_budget_fraction"], state["longest_call_seconds"]
# per pass: CPU between two consecutive state files (one pass and what the agent did until the next)
per_pass = [(b["t"], (b["cpu_seconds"] - a["cpu_seconds"]) / (b["passes"] - a["passes"]), b["collapsed_bytes"] > a["collapsed_bytes"],
             b["wall_s"]) for a, b in zip(passes, passes[1:]) if b["passes"] > a["passes"]]
pairs = [(a, b) for a, b in zip(passes, passes[1:]) if b["passes"] > a["passes"]]
a, b = max(pairs, key=lambda ab: (ab[1]["cpu_seconds"] - ab[0]["cpu_seconds"]) / (ab[1]["passes"] - ab[0]["passes"]))
max_pass = (b["collapsed_bytes"] - a["collapsed_bytes"], b["wall_s"])  # what the most expensive pass did
anon = "anon_kb" in samples[0]  # RssAnon, sampled since the second version of the script
print(f"{'min':>4} {'procs':>6} {'cpu %':>7} {'RSS KiB':>8}" + (f" {'anon KiB':>8}" if anon else "") + f" {'fds':>4} {'pass CPU max s':>14} {'pass wall max s':>15} {'series':>6} {'load1':>6}")
prev = samples[0]
for s in samples[1:]:
    if int(s["t"]) // 60 == int(prev["t"]) // 60 and s is not samples[-1]: continue
    span = [(p, w) for t, p, _, w in per_pass if prev["t"] < t <= s["t"]]
    cpu = 100 * (s["ticks"] - prev["ticks"]) / hz / max(s["t"] - prev["t"], 1)
    print(f"{s['t'] / 60:4.1f} {s['live']:6.0f} {cpu:7.2f} {s['rss_kb']:8.0f}" + (f" {s['anon_kb']:8.0f}" if anon else "") + f" {s['fds']:4.0f} "
          f"{max(p for p, _ in span) if span else float('nan'):14.3f} {max(w for _, w in span) if span else float('nan'):15.3f} "
          f"{s['series']:6.0f} {s['load1']:6.2f}")
    prev = s
verdicts = []
def verdict(name, ok, text):
    verdicts.append(ok)
    print(f"{'PASS' if ok else 'MISS'}  {name}: {text}")
cpu = ticks / hz
allowed = budget * (wall + 60) + longest_call
print()
verdict("CPU within budget", cpu <= allowed,
        f"{cpu:.2f} s over {wall:.0f} s = {100 * cpu / wall:.2f} % of one core; budget {100 * budget:g} % "
        f"allows {allowed:.2f} s (budget x (T + 60 s) + longest call {longest_call:.4f} s)")
after = [s for s in samples if s["t"] >= warmup]
# RSS: the largest sample after the warm-up against the first one, both taken between passes. A pass holds its
# working set for a moment (its smaps texts and pagemap reads, mapped on their own; plans, reports) and gives it
# back at its end (the heap's free pages too, since the daemon's malloc_trim after each pass), so, as with the
# fds, what the agent keeps is read between passes. A sample is in a pass when its fds are above the run's floor:
# the walk holds /proc open throughout. The samples taken in a pass are printed beside it, never hidden.
floor_fds = min(s["fds"] for s in after)
for key, name, unit in (("rss_kb", "RSS", " KiB"),) + ((("anon_kb", "RSS anonymous", " KiB"),) if anon else ()):
    between = [s for s in after if s["fds"] <= floor_fds]
    base, top = between[0][key], max(s[key] for s in between)
    growth = (top - base) / base
    in_pass = [s for s in after if s["fds"] > floor_fds]
    all_top = max(s[key] for s in after)
    verdict(f"{name} flat", growth <= 0.01,
            f"between passes {base:.0f}{unit} at {between[0]['t']:.0f} s, at most {top:.0f}{unit} after (growth "
            f"{100 * growth:.2f} %), {between[-1][key]:.0f}{unit} at the end; first sample {samples[0][key]:.0f}{unit}; "
            f"{len(in_pass)} of {len(after)} samples in a pass" +
            (f", up to {max(s[key] for s in in_pass):.0f}{unit} (all samples: at most {all_top:.0f}{unit}, "
             f"{100 * (all_top - base) / base:+.2f} %)" if in_pass else ""))
first = min(s["fds"] for s in after if s["t"] < after[0]["t"] + 300)
last = min(s["fds"] for s in after if s["t"] >= samples[-1]["t"] - 300)
verdict("fd count flat", last <= first * 1.01,
        f"the floor {first:.0f} in the 5 minutes after {after[0]['t']:.0f} s, {last:.0f} in the last 5 minutes; "
        f"during a pass up to {max(s['fds'] for s in samples):.0f} (a pidfd and a /proc file open)")
costs = sorted(p for _, p, _, _ in per_pass)
quiet = sorted(p for _, p, c, _ in per_pass if not c)
walls = sorted(w for _, _, _, w in per_pass)
# A pass's CPU is its walk of /proc and its measurements, plus the collapses the budget allows in it. The walk
# alone: the daemon's passes that collapsed nothing, and `agent --status` (one observation pass, timed).
observe = [float(r["user_s"]) + float(r["sys_s"]) for r in timed if r["command"] == "agent --status"]
walk = quiet + observe
verdict("pass CPU <= 1 s, walk and measure", bool(walk) and max(walk) <= 1.0,
        (f"{len(quiet)} daemon passes without a collapse: median {quiet[len(quiet) // 2]:.3f} s, max {quiet[-1]:.3f} s"
         if quiet else "no daemon pass without a collapse")
        + (f"; agent --status (an observation pass): {', '.join(f'{c:.2f}' for c in observe)} s" if observe else ""))
verdict("pass CPU <= 1 s, with its collapses", costs[-1] <= 1.0,
        f"{len(costs)} passes: median {costs[len(costs) // 2]:.3f} s, p99 {costs[int(0.99 * (len(costs) - 1))]:.3f} s, "
        f"max {costs[-1]:.3f} s (collapsed {max_pass[0] / 2**20:.0f} MiB over {max_pass[1]:.0f} s of wall); "
        f"wall: median {walls[len(walls) // 2]:.3f} s, max {walls[-1]:.3f} s")
base, top = after[0]["series"], max(s["series"] for s in after)
started = open(f"{out}/host.last").read().strip()
verdict("series bounded", top <= 1.1 * base,
        f"{samples[0]['series']:.0f} at the start, {base:.0f} at {after[0]['t']:.0f} s, at most {top:.0f} after, "
        f"{samples[-1]['series']:.0f} at the end ({started})")
print(f"\nlive target processes: min {min(s['live'] for s in after):.0f}, max {max(s['live'] for s in after):.0f}; "
      f"load average (1 min): min {min(s['load1'] for s in samples):.2f}, "
      f"mean {sum(s['load1'] for s in samples) / len(samples):.2f}, max {max(s['load1'] for s in samples):.2f}")
print(f"agent: {state['passes']} passes, collapsed {state['collapsed_bytes'] / 2**20:.0f} MiB, "
      f"budget stops {state['budget_stops']}, pass ceiling stops {state.get('pass_ceiling_stops', '-')} "
      f"(ceiling {state.get('pass_cpu_ceiling_seconds', '-')} s), {len(state['processes'])} processes in its last pass")
for r in timed:
    print(f"at {r['t']} s: hugify {r['command']}: wall {r['wall_s']} s, CPU {float(r['user_s']) + float(r['sys_s']):.2f} s "
          f"(user {r['user_s']}, sys {r['sys_s']})")
sys.exit(0 if all(verdicts) else 1)
