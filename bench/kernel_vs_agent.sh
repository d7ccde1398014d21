#!/bin/bash
# SPDX-License-Identifier: MIT
# kernel_vs_agent.sh - what the kernel's own answers make huge of a hot set beside hugify's agent, each alone on
# the same workload (issue 44, docs/agent.md "Beside the kernel's own answer"):
#
#   khugepaged  THP switched to `always` once the workload is on 4 KiB pages; khugepaged at its defaults. A
#               process whose mappings were made under `madvise` without advice is not on khugepaged's list,
#               and switching to `always` does not put it there (only a new mapping or a huge fault would):
#               a DAMOS `hugepage` scheme over all of it (nr_accesses 0 up) advises it once, which does
#   damos       a DAMON scheme of action `collapse` (Linux 7.2) on the workload, its quota tuned by a goal: the
#               kernel's documented feedback loop (quotas/goals, target_metric user_input: the script writes
#               the hot set's huge share as current_value every sample, target 100 %, and commits it)
#   agent       `hugify agent --heat damon` at its defaults but --interval (and --cpu-budget when given)
#
# The workload is bench/hot_set: SIZE MiB written whole on 4 KiB pages (THP madvise), 20 % of it in 4 stripes
# taking 90 % of the accesses. Every EVERY seconds, one line per mode: the hot set's huge share (hot_set's own
# measurement), all its memory made huge (smaps_rollup AnonHugePages), the bloat (its anonymous memory beyond
# what it wrote), and the work done as counts: khugepaged's full_scans and pages_collapsed, DAMOS's tried
# regions and applied bytes, the agent's windows tried (collapsed + refused). Counts, not times: run in an
# emulated guest (TCG), the seconds mean nothing but the order of events.
#
#   scripts/kernels 7.2 -- bench/kernel_vs_agent.sh [--size MIB] [--seconds S] [--every S] [--interval S]
#                                                   [--cpu-budget PERCENT] [--modes khugepaged,damos,agent]
#                                                   [BUILD_DIR]
#
# Needs root; DAMON vaddr and the DAMOS action collapse for `damos`, DAMON vaddr for the agent's heat. A DAMON
# user inside the kernel (DAMON_STAT, on in Debian's 7.2) is paused for the run (its `enabled` N) and put back,
# as is the THP setting. Exit 3 naming what is missing.
set -euo pipefail
usage() { sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; }
size=1024 seconds=240 every=20 interval=5 budget=2 modes=khugepaged,damos,agent build=build
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cpu-budget) budget=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "kernel_vs_agent.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/damon_free.sh"
ADMIN=/sys/kernel/mm/damon/admin/kdamonds
THP=/sys/kernel/mm/transparent_hugepage
[ "$(cat $ADMIN/nr_kdamonds 2>/dev/null || echo x)" = 0 ] ||
  { say "DAMON's sysfs is absent or its kdamonds are another user's ($ADMIN/nr_kdamonds): this run needs it free"; exit 3; }
work=$(mktemp -d /tmp/kernel_vs_agent.XXXXXX)
cleanup() {
  [ -n "${agent:-}" ] && kill "$agent" 2>/dev/null && { wait "$agent" 2>/dev/null || true; }
  [ -n "${workload:-}" ] && kill "$workload" 2>/dev/null && { wait "$workload" 2>/dev/null || true; }
  damos_down
  bench_teardown
  rm -rf "$work"
}
damos_down() {
  [ "$(cat $ADMIN/nr_kdamonds)" = 1 ] || return 0
  [ "$(cat $ADMIN/0/state)" = off ] || echo off > $ADMIN/0/state
  echo 0 > $ADMIN/0/contexts/nr_contexts
  echo 0 > $ADMIN/nr_kdamonds
}
trap cleanup EXIT
bench_setup "$build" hot_set

# damos_up PID [ACTION]: kdamond 0, one context on PID, one scheme. collapse (the default): over hot regions of
# 2 MiB or more, its quota 10 ms of every second, auto-tuned toward the goal (user_input, target 100).
# hugepage: every region (khugepaged's row: the advice puts the process on khugepaged's list).
damos_up() {
  local c=$ADMIN/0/contexts/0 s
  echo 1 > $ADMIN/nr_kdamonds
  echo 1 > $ADMIN/0/contexts/nr_contexts
  echo vaddr > $c/operations
  echo 1 > $c/targets/nr_targets
  echo "$1" > $c/targets/0/pid_target
  echo 1 > $c/schemes/nr_schemes
  s=$c/schemes/0
  echo "${2:-collapse}" > $s/action || { say "DAMON's schemes do not take the action ${2:-collapse}"; return 3; }
  # a scheme's access pattern is 0..0 until written: the maxima first
  echo 18446744073709551615 > $s/access_pattern/sz/max
  echo 4294967295 > $s/access_pattern/nr_accesses/max
  echo 4294967295 > $s/access_pattern/age/max
  if [ "${2:-collapse}" = hugepage ]; then echo on > $ADMIN/0/state; return 0; fi
  echo $((2 << 20)) > $s/access_pattern/sz/min
  echo 1 > $s/access_pattern/nr_accesses/min
  echo 10 > $s/quotas/ms
  echo 1000 > $s/quotas/reset_interval_ms
  echo 1 > $s/quotas/goals/nr_goals
  echo user_input > $s/quotas/goals/0/target_metric
  echo 100 > $s/quotas/goals/0/target_value
  echo 0 > $s/quotas/goals/0/current_value
  echo on > $ADMIN/0/state
}

# sample MODE T PID: one line of the table.
sample() {
  local mode=$1 t=$2 pid=$3 hot anon huge scans collapsed tried applied windows
  hot=$(grep '^t=' "$work/$mode.out" | tail -1 | sed -n 's/.*hot_huge=\([0-9.]*\).*/\1/p')
  anon=$(awk '/^Anonymous:/ { print $2 * 1024 }' "/proc/$pid/smaps_rollup")
  huge=$(awk '/^AnonHugePages:/ { print $2 * 1024 }' "/proc/$pid/smaps_rollup")
  scans=$(( $(cat $THP/khugepaged/full_scans) - scans0 ))
  collapsed=$(( $(cat $THP/khugepaged/pages_collapsed) - collapsed0 ))
  tried=- applied=- windows=-
  if [ "$mode" != agent ]; then
    local s=$ADMIN/0/contexts/0/schemes/0
    if [ "$mode" = damos ]; then
      echo "$(awk -v h="${hot:-0}" 'BEGIN { printf "%d", h * 100 }')" > $s/quotas/goals/0/current_value
      echo commit_schemes_quota_goals > $ADMIN/0/state || true
    fi
    echo update_schemes_stats > $ADMIN/0/state
    tried=$(cat $s/stats/nr_tried) applied=$(( $(cat $s/stats/sz_applied) >> 20 ))M
  fi
  if [ "$mode" = agent ] && [ -s "$work/agent.prom" ]; then
    windows=$(awk '/^hugify_agent_collapsed_bytes_total / { w += $2 / 2097152 }
                   /^hugify_agent_collapse_failures_total/ { w += $NF } END { printf "%d", w }' "$work/agent.prom")
  fi
  printf '%-10s %5s %8s %9s %9s %10s %14s %11s %12s %13s\n' "$mode" "$t" "${hot:--}" "$((huge >> 20))M" \
    "$(( (anon > size_bytes ? anon - size_bytes : 0) >> 20 ))M" "$scans" "$collapsed" "$tried" "$applied" "$windows"
}

run() {
  local mode=$1
  # hot_set's own clock; the samples (smaps_rollup of all of it) take time of their own under emulation
  "$build/bench/hot_set" --size "$size" --seconds $((seconds * 2 + 120)) > "$work/$mode.out" &
  workload=$!
  until grep -q '^t=' "$work/$mode.out" 2>/dev/null; do
    kill -0 "$workload" 2>/dev/null || { say "hot_set exited"; return 1; }
    sleep 1
  done
  scans0=$(cat $THP/khugepaged/full_scans) collapsed0=$(cat $THP/khugepaged/pages_collapsed)
  case $mode in
    khugepaged) echo always > $THP/enabled; damos_up "$workload" hugepage ;;
    damos) damos_up "$workload" ;;
    agent) "$HUGIFY" agent --pid "$workload" --min-rss 0 --heat damon --interval "$interval" --cpu-budget "$budget" \
             --state-file none \
             --metrics-file "$work/agent.prom" 2> "$work/agent.err" &
           agent=$! ;;
  esac
  local t=0
  while [ "$t" -le "$seconds" ]; do
    sample "$mode" "$t" "$workload"
    sleep "$every"
    t=$((t + every))
    if [ -n "${agent:-}" ] && ! kill -0 "$agent" 2>/dev/null; then say "the agent exited:"; cat "$work/agent.err" >&2; break; fi
  done
  [ -z "${agent:-}" ] || { kill "$agent"; wait "$agent" 2>/dev/null || true; agent=""; }
  damos_down
  echo madvise > $THP/enabled
  kill "$workload"; wait "$workload" 2>/dev/null || true; workload=""
}

size_bytes=$((size << 20))
echo "kernel_vs_agent: hot_set $size MiB (hot set 20 %, 90 % of the accesses), $(uname -r), a sample every $every s, agent --interval $interval --cpu-budget $budget"
echo "khugepaged: pages_to_scan $(cat $THP/khugepaged/pages_to_scan), scan_sleep_millisecs $(cat $THP/khugepaged/scan_sleep_millisecs), max_ptes_none $(cat $THP/khugepaged/max_ptes_none)"
printf '%-10s %5s %8s %9s %9s %10s %14s %11s %12s %13s\n' mode t hot_huge all_huge bloat full_scans pages_collapsed \
  damos_tried damos_applied agent_windows
for mode in ${modes//,/ }; do run "$mode" || say "the $mode run failed ($?)"; done
