#!/bin/bash
# SPDX-License-Identifier: MIT
# top_cost.sh - what `hugify top` costs: its CPU per refresh with PROCESSES agent_target processes (8 MiB
# each, idle) besides whatever the machine runs, at a 1 s refresh, as the JSON batch mode does it (the live
# view reads the same files). Prints the CPU time per refresh and as a share of one core, and how many
# smaps_rollup walks a refresh made after the first (top walks only processes whose size changed).
# Run it under the native lock: flock /tmp/hugify-native.lock bench/top_cost.sh build
#
#   bench/top_cost.sh BUILD_DIR [PROCESSES=300] [REFRESHES=30]
set -euo pipefail
build=${1:?usage: top_cost.sh BUILD_DIR [PROCESSES] [REFRESHES]}
count=${2:-300} refreshes=${3:-30}
# shellcheck source=targets.sh
source "$(dirname "$0")/targets.sh"
out=$(mktemp)
cleanup() { stop_idle_targets; rm -f "$out"; }
trap cleanup EXIT
start_idle_targets "$build" "$count"
# user + system time of the whole run (bash's times of its children) over its refreshes
TIMEFORMAT='%U %S %R'
times=$( { time "$build/bin/hugify" top --json --rows 0 --interval 1 --count "$refreshes" > "$out"; } 2>&1 )
read -r user sys real <<<"$times"
python3 - "$out" "$user" "$sys" "$real" "$refreshes" <<'PY'
import json, sys
path, user, sys_, real, refreshes = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
docs = [json.loads(d) for d in open(path).read().replace("}\n{", "}\x00{").split("\x00") if d.strip()]
procs = docs[-1]["processes"]
later = [d["walked"] for d in docs[1:]]
cpu = user + sys_
print("%d processes, %d refreshes at 1 s: CPU %.3f s (user %.3f, system %.3f) over %.1f s: %.1f ms per refresh, "
      "%.2f %% of one core" % (procs, refreshes, cpu, user, sys_, real, 1e3 * cpu / refreshes, 100 * cpu / real))
print("smaps_rollup walks: %d on the first refresh, %.1f per refresh after (max %d)"
      % (docs[0]["walked"], sum(later) / max(len(later), 1), max(later or [0])))
PY
