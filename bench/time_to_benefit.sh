#!/bin/bash
# SPDX-License-Identifier: MIT
# time_to_benefit.sh - how much the agent collapses, and how much CPU it spends, before 90 % of a workload's
# hot accesses land on huge pages: with its heat signal (--heat auto: DAMON, else none) against
# densest first (--heat none). The workload is bench/hot_set: SIZE MiB written whole, 20 % of it in 4
# stripes taking 90 % of the accesses. Its own huge bytes (hugify_measure_backing of its ranges, once a
# second) are the bytes collapsed: under THP madvise nothing else makes its memory huge. A count, not a
# timing: it holds in the kernel matrix's emulated guests (scripts/kernels 6.12 -- bench/time_to_benefit.sh
# build); the agent's CPU seconds are only meaningful natively. docs/agent.md, "Heat".
#
#   bench/time_to_benefit.sh BUILD_DIR [SIZE_MIB=1024] [MAX_SECONDS=300] [CPU_BUDGET_PERCENT=5] [INTERVAL=2]
#                            [HEAT_MODES="auto none"]
#
# Needs root (process_madvise(MADV_COLLAPSE) of another process, DAMON's sysfs); sets THP to madvise for the
# run and puts it back.
set -euo pipefail
build=${1:?usage: time_to_benefit.sh BUILD_DIR [SIZE_MIB] [MAX_SECONDS] [CPU_BUDGET_PERCENT] [INTERVAL]}
size=${2:-1024} max_seconds=${3:-300} budget=${4:-5} interval=${5:-2} modes=${6:-auto none}
source "$(dirname "$0")/../scripts/lib.sh"
HUGIFY=$build/bin/hugify
need_hugify
need_tools "$build/bench/hot_set=the bench programs (cmake --build $build)" awk=gawk
[ "$(id -u)" -eq 0 ] || { say "needs root: the agent collapses another process (CAP_SYS_NICE)"; exit 3; }
work=$(mktemp -d /tmp/time_to_benefit.XXXXXX)
save_thp_settings
cleanup() {
  [ -n "${agent:-}" ] && kill "$agent" 2>/dev/null && { wait "$agent" 2>/dev/null || true; }
  [ -n "${workload:-}" ] && kill "$workload" 2>/dev/null && { wait "$workload" 2>/dev/null || true; }
  restore_thp_settings
  rm -rf "$work"
}
trap cleanup EXIT
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
hz=$(getconf CLK_TCK)

# What DAMON's regions say when the agent last read them (the agent's kdamond, when it is kdamond 0): how many,
# and how many bytes of them were found accessed.
damon_snapshot() {
  local dir=/sys/kernel/mm/damon/admin/kdamonds/0/contexts/0/schemes/0/tried_regions
  [ -d "$dir" ] || return 0
  (cd "$dir" && grep -r . . 2>/dev/null) | awk -F'[/:]' -v at="$1" '
    { v[$2, $3] = $4; if ($3 == "start") n++ }
    END { for (i = 0; i < n; i++) if (v[i, "nr_accesses"] > 0) { hot++; bytes += v[i, "end"] - v[i, "start"] }
          printf "      %s: DAMON regions %d, %d accessed (%.0f MiB)\n", at, n, hot, bytes / 1048576 }'
}

# run HEAT: one workload, one agent; prints the result line.
run() {
  local heat=$1 out=$work/$1.out metrics=$work/$1.prom
  "$build/bench/hot_set" --size "$size" --seconds "$max_seconds" > "$out" &
  workload=$!
  until grep -q '^t=' "$out" 2>/dev/null; do sleep 0.2; done   # written whole, accesses running
  local hot_mib
  hot_mib=$(sed -n 's/.*hot set \([0-9]*\) MiB.*/\1/p' "$out")
  "$HUGIFY" agent --pid "$workload" --min-rss 0 --heat "$heat" --interval "$interval" --cpu-budget "$budget" \
    --state-file none --metrics-file "$metrics" 2> "$work/$heat.err" &
  agent=$!
  local seen=0 line reached="" cpu
  local start_lines
  start_lines=$(grep -c '^t=' "$out")
  while kill -0 "$workload" 2>/dev/null; do
    sleep 0.5
    kill -0 "$agent" 2>/dev/null || { say "the agent exited:"; cat "$work/$heat.err" >&2; break; }
    local lines
    lines=$(grep -c '^t=' "$out")
    [ "$lines" -gt "$seen" ] || continue
    seen=$lines
    [ "$lines" -gt "$start_lines" ] || continue
    line=$(grep '^t=' "$out" | tail -1)
    echo "      $heat: $line" >&2
    [ "$heat" = none ] || damon_snapshot "${line%% *}"
    if awk -v l="$line" 'BEGIN { split(l, f, /[ =]/); exit !(f[4] >= 0.9) }'; then
      cpu=$(awk -v hz="$hz" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$agent/stat")
      reached=$line
      break
    fi
  done
  local huge_mib signal work_text
  # the workload's huge bytes when the hot set reached 90 %: hot and cold shares times their sizes
  signal=$(sed -n 's/.*heat \([a-z-]*\) (.*/\1/p' "$work/$heat.err" | head -1)
  work_text=$(awk '/^hugify_agent_heat_damon_(targets|regions|reads_total|monitored_seconds_total) / ||
                   /^hugify_agent_heat_kdamond_cpu_seconds_total / || /^hugify_agent_heat_soft_dirty_clears_total / {
                     sub("hugify_agent_heat_", ""); printf "%s%s", sep, $0; sep = ", " }' "$metrics" 2>/dev/null)
  if [ -z "$reached" ]; then
    printf '%-5s (%s): hot set %s MiB: 90 %% of the hot accesses not on huge pages within %s s (last: %s)\n' \
      "$heat" "${signal:-?}" "$hot_mib" "$max_seconds" "$(grep '^t=' "$out" | tail -1)"
  else
    huge_mib=$(awk -v l="$reached" -v hot="$hot_mib" -v size="$size" 'BEGIN {
      split(l, f, /[ =]/); printf "%.0f", f[4] * hot + f[6] * (size - hot) }')
    local passes cold_mib
    passes=$(awk '/^hugify_agent_passes_total / { print $2 }' "$metrics" 2>/dev/null)
    cold_mib=$(awk -v l="$reached" -v hot="$hot_mib" -v size="$size" 'BEGIN {
      split(l, f, /[ =]/); printf "%.0f", f[6] * (size - hot) }')
    printf '%-5s (%s): hot set %s MiB; 90 %% of the hot accesses on huge pages at %s (pass %s): collapsed %s MiB = %.2fx the hot set, %s MiB of it cold; agent CPU %s s\n' \
      "$heat" "${signal:-?}" "$hot_mib" "${reached%% *}" "${passes:-?}" "$huge_mib" "$(awk -v a="$huge_mib" -v b="$hot_mib" 'BEGIN { print a / b }')" "$cold_mib" "$cpu"
  fi
  if [ -n "$work_text" ]; then echo "      monitoring: $work_text"; fi
  kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true; agent=""
  kill "$workload" 2>/dev/null; wait "$workload" 2>/dev/null || true; workload=""
}

echo "time to benefit: hot_set ${size} MiB, agent --cpu-budget $budget --interval $interval, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in $modes; do run "$mode" || say "the run with --heat $mode failed ($?)"; done
