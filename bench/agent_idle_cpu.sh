#!/bin/bash
# SPDX-License-Identifier: MIT
# agent_idle_cpu.sh - the agent's steady-state CPU with many selected idle processes: N agent_target
# processes (8 MiB each on 4 KiB pages, then idle), `hugify agent --comm agent_target` with its defaults;
# the agent's CPU time (utime + stime from /proc/PID/stat) over a window after its first passes.
#
#   bench/agent_idle_cpu.sh BUILD_DIR [PROCESSES=50] [WARMUP_SECONDS=25] [SECONDS=120]
set -euo pipefail
build=${1:?usage: agent_idle_cpu.sh BUILD_DIR [PROCESSES] [WARMUP_SECONDS] [SECONDS]}
count=${2:-50} warmup=${3:-25} seconds=${4:-120}
source "$(dirname "$0")/../scripts/lib.sh"
HUGIFY=$build/bin/hugify need_hugify; need_tools "$build/tests/agent_target=hugify's test helpers (cmake --build $build)"
# shellcheck source=targets.sh
source "$(dirname "$0")/targets.sh"
cleanup() { stop_idle_targets "${agent:-}"; }
trap cleanup EXIT
start_idle_targets "$build" "$count"
"$build/bin/hugify" agent --comm agent_target --min-rss 0 2> /tmp/agent_idle_cpu.$$.err &
agent=$!
ticks() { awk '{ print $14 + $15 }' "/proc/$agent/stat"; }
hz=$(getconf CLK_TCK)
sleep "$warmup"
first=$(ticks)
sleep "$seconds"
last=$(ticks)
awk -v a="$first" -v b="$last" -v hz="$hz" -v s="$seconds" -v n="$count" -v total="$(ticks)" 'BEGIN {
  cpu = (b - a) / hz
  printf "%d idle selected processes: agent CPU %.3f s over %d s = %.3f %% of one core (steady state); %.3f s in all\n", n, cpu, s, 100 * cpu / s, total / hz
}'
grep -c "collapsed" /tmp/agent_idle_cpu.$$.err | sed 's/^/passes that collapsed something: /'
rm -f /tmp/agent_idle_cpu.$$.err
