#!/bin/bash
# SPDX-License-Identifier: MIT
# first_touch.sh - what `hugify agent --first-touch` makes of memory a process touches after the agent's first
# pass, with and without the option (issue 44, docs/agent.md "First touch"). bench/first_touch grows into memory
# it reserved (a JVM heap's shape): 64 MiB touched, then, once the agent's third pass is done (a new process waits
# two for DAMON's first regions), 16 MiB a second
# for 16 s, everything it touched read over and over (hot), then SETTLE s more (default 60). Dense: every page
# written; sparse: every tenth page (10 % of each 2 MiB: what the bloat guard must keep from being filled with
# zeroes); refault: dense, not growing: each second 16 MiB of its 64 MiB given back (MADV_DONTNEED, as a
# collector does) and touched again, so all of it is refaulted after the first pass.
# Prints per run the share of the memory grown (or refaulted) after the first pass that is on huge pages and the
# bloat (the range's resident bytes beyond the pages written), at the last step and SETTLE s later. Counts, not
# times.
#
#   scripts/kernels 7.2 -- bench/first_touch.sh [--interval S] [--cpu-budget PERCENT] [--settle S]
#                                               [--kinds dense,refault,sparse] [BUILD_DIR]
#
# Needs root and DAMON vaddr (the heat signal --first-touch needs) with the DAMOS action hugepage; THP is set
# to madvise for the run, a DAMON user inside the kernel (DAMON_STAT) paused; both put back. Exit 3 otherwise.
set -euo pipefail
usage() { sed -n '3,19p' "$0" | sed 's/^# \{0,1\}//'; }
interval=2 budget=2 settle=60 kinds=dense,refault,sparse build=build
while [ $# -gt 0 ]; do
  case $1 in
    --interval) interval=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --cpu-budget) budget=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "first_touch.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/damon_free.sh"
THP=/sys/kernel/mm/transparent_hugepage
work=$(mktemp -d /tmp/first_touch.XXXXXX)
cleanup() {
  [ -n "${agent:-}" ] && kill "$agent" 2>/dev/null && { wait "$agent" 2>/dev/null || true; }
  [ -n "${grower:-}" ] && kill "$grower" 2>/dev/null && { wait "$grower" 2>/dev/null || true; }
  bench_teardown
  rm -rf "$work"
}
trap cleanup EXIT
bench_setup "$build" first_touch

# run KIND OPTION: one grower, one agent (OPTION: --first-touch or nothing); prints the result line.
run() {
  local kind=$1 option=$2 out=$work/run.out metrics=$work/run.prom shape=""
  [ "$kind" = sparse ] && shape=--sparse
  [ "$kind" = refault ] && shape=--refault
  rm -f "$metrics"
  "$build/bench/first_touch" $shape --settle "$settle" > "$out" &
  grower=$!
  until grep -q ready "$out" 2>/dev/null; do sleep 0.5; done
  "$HUGIFY" agent --pid "$grower" --min-rss 0 --heat damon $option --interval "$interval" \
    --cpu-budget "$budget" --state-file none \
    --metrics-file "$metrics" 2> "$work/agent.err" &
  agent=$!
  # its first pass that could act: a new process waits up to two passes for DAMON's first regions
  until [ "$(awk '/^hugify_agent_passes_total / { print ($2 >= 3) }' "$metrics" 2>/dev/null)" = 1 ]; do
    kill -0 "$agent" 2>/dev/null || { say "the agent exited:"; cat "$work/agent.err" >&2; return 3; }
    sleep 0.5
  done
  kill -USR1 "$grower"
  wait "$grower" || true
  grower=""
  local done_line grown_line applied
  done_line=$(grep '^done' "$out" || echo "done: none")
  grown_line=$(grep '^t t=16 ' "$out" | head -1 | sed -n 's/.*grown_huge=\([0-9.]*\) bloat=\([0-9.]*\).*/huge \1, bloat \2 MiB/p')
  applied=$(awk '/^hugify_agent_first_touch_applied_bytes_total / { printf "%d MiB", $2 / 1048576 }' "$metrics")
  printf '%-7s %-15s at the last step: %s; after %s s more: %s; agent collapsed %s MiB; first touch marked %s\n' \
    "$kind" "${option:-(without)}" "${grown_line:-?}" "$settle" "${done_line#done }" "$(awk '/^hugify_agent_collapsed_bytes_total / { printf "%d", $2 / 1048576 }' "$metrics")" \
    "${applied:--}"
  kill "$agent"; wait "$agent" 2>/dev/null || true; agent=""
}

echo "first_touch: $(uname -r), agent --heat damon --interval $interval --cpu-budget $budget, max_ptes_none $(cat $THP/khugepaged/max_ptes_none)"
for kind in ${kinds//,/ }; do
  for option in "" --first-touch; do run "$kind" "$option" || say "the $kind ${option:-plain} run failed ($?)"; done
done
