#!/bin/bash
# SPDX-License-Identifier: MIT
# live_collapse.sh - the headline, repeatable: a running process's random lookups over a big array before
# and after `hugify collapse PID`, how long the collapse took, its CPU, and the longest pause the process
# felt (the collapse's own measurement from schedstat, and the process's own longest operation while it
# ran). The process is bench/live_lookup (dependent loads over SIZE, on 4 KiB pages until collapsed); it
# is never restarted. README.md, "A live process, collapsed".
#
#   bench/live_collapse.sh BUILD_DIR [SIZE=16G] [SECONDS=20]
#
# SECONDS of lookups are taken before and after (the median of their per-second figures). Needs root
# (process_madvise(MADV_COLLAPSE) of another process) and SIZE of free memory plus a fifth.
set -euo pipefail
build=${1:?usage: live_collapse.sh BUILD_DIR [SIZE] [SECONDS]}
size=${2:-16G} seconds=${3:-20}
source "$(dirname "$0")/../scripts/lib.sh"
HUGIFY=$build/bin/hugify
need_hugify
need_tools "$build/bench/live_lookup=the bench programs (cmake --build $build)" python3=python3
[ "$(id -u)" -eq 0 ] || { say "needs root: collapsing another process needs CAP_SYS_NICE"; exit 3; }
work=$(mktemp -d /tmp/live_collapse.XXXXXX)
trap '[ -n "${lookup:-}" ] && kill "$lookup" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

"$build/bench/live_lookup" --size "$size" > "$work/lookup.out" &
lookup=$!
until grep -q '^second ' "$work/lookup.out" 2>/dev/null; do
  kill -0 "$lookup" 2>/dev/null || { cat "$work/lookup.out"; say "live_lookup stopped"; exit 1; }
  sleep 0.5
done
lines() { grep -c '^second ' "$work/lookup.out"; }
start=$(lines)
while [ $(($(lines) - start)) -lt "$seconds" ]; do sleep 1; done
before_end=$(lines)
# exit 1: some windows were refused (the report counts them, and says why): the figures still stand
started=$(date +%s.%N)
"$HUGIFY" collapse "$lookup" --json > "$work/collapse.json" || [ $? -eq 1 ]
wall=$(python3 -c "print($(date +%s.%N) - $started)")
during_end=$(lines)
while [ $(($(lines) - during_end)) -lt "$seconds" ]; do sleep 1; done
kill "$lookup"; wait "$lookup" 2>/dev/null || true; lookup=

python3 - "$work/lookup.out" "$work/collapse.json" "$start" "$before_end" "$during_end" "$size" "$wall" <<'EOF'
import json, re, statistics, sys
out, report, start, before_end, during_end, size, wall = sys.argv[1:8]
start, before_end, during_end = int(start), int(before_end), int(during_end)
seconds = [l for l in open(out) if l.startswith("second ")]
def figures(lines):
    ns = [float(re.search(r"([0-9.]+) ns/lookup", l).group(1)) for l in lines]
    huge = [float(re.search(r"([0-9.]+)% huge", l).group(1)) for l in lines]
    worst = [float(re.search(r"op max ([0-9.]+) us", l).group(1)) for l in lines]
    return ns, huge, worst
before, _, before_worst = figures(seconds[start:before_end])
_, _, during_worst = figures(seconds[before_end:during_end + 1])
after, after_huge, _ = figures(seconds[during_end + 1:])
r = json.load(open(report))
pause = r["pause"]
print(f"live_lookup --size {size}: {statistics.median(before):.1f} ns/lookup before, "
      f"{statistics.median(after):.1f} after ({statistics.median(before) / statistics.median(after):.2f}x), "
      f"{after_huge[-1]:.1f} % huge after")
print(f"hugify collapse (pace {r['pace']}): {float(wall):.1f} s, {r['cpu_seconds']:.1f} s of CPU "
      f"({r['seconds']:.1f} s in {r['calls']} calls, {r['gap_seconds']:.1f} s of rests), "
      f"{r['total']['huge_after_bytes'] / 2**30:.1f} GiB made huge, bloat {r['total']['bloat_bytes'] / 2**20:.1f} MiB, "
      f"{r['total']['failed_bytes'] / 2**20:.0f} MiB refused "
      f"({', '.join(sorted({f['reason'].split(':')[0] for f in r.get('failures', [])})) or 'none'})")
print(f"longest pause: {pause['longest_seconds'] * 1e3:.1f} ms (schedstat), p99 {pause['p99_seconds'] * 1e3:.1f} ms; "
      f"the process's longest operation: {max(during_worst) / 1e3:.1f} ms during, "
      f"{max(before_worst) / 1e3:.1f} ms before")
EOF
