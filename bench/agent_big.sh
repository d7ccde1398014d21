#!/bin/bash
# SPDX-License-Identifier: MIT
# agent_big.sh - what the agent's budget buys on big processes: how long until 50, 90 and 95 % of a
# process's memory is on huge pages under `hugify agent` at a CPU budget, the agent's CPU split into
# collapsing and measuring (walks, smaps, /proc), its longest pass, and `hugify collapse` of the same
# workload as the reference (bytes made huge per CPU second). docs/agent.md, "What a pass costs".
#
#   bench/agent_big.sh BUILD_DIR [RUNS="4096 8192 16384 8x2048"] [BUDGETS="2 10"] [MAX_SECONDS=2400]
#
# A run is SIZE (MiB: one bench/hot_set of that size, its lookups running) or NxSIZE (N idle hot_set
# processes: a host of many, without N busy loops fighting over the CPUs). For each run, the reference
# comes first and last: a fresh workload, `hugify collapse` of each process at its default (gentle) pace
# (its CPU per window swings with the state of the machine's free memory, 1.4-1.9 ms here: the mean of the
# two is the reference); between them, for each budget, a fresh workload under `hugify agent --cpu-budget
# B` at its default interval (10 s) until 95 % of the memory is huge or MAX_SECONDS. The huge share is the workload's own (hot_set's lines: its
# ranges' hugify_measure_backing, once a second). Efficiency: the agent's bytes per CPU second over the
# reference's. Prints one line per run and budget; the raw lines stay in a temporary directory it names.
#
# Needs root (process_madvise(MADV_COLLAPSE) of another process) and memory for the largest run plus a
# fifth; sets THP to madvise for the run and puts it back.
set -euo pipefail
build=${1:?usage: agent_big.sh BUILD_DIR [RUNS] [BUDGETS] [MAX_SECONDS]}
runs=${2:-4096 8192 16384 8x2048} budgets=${3:-2 10} max_seconds=${4:-2400}
source "$(dirname "$0")/../scripts/lib.sh"
HUGIFY=$build/bin/hugify
need_hugify
need_tools "$build/bench/hot_set=the bench programs (cmake --build $build)" python3=python3
[ "$(id -u)" -eq 0 ] || { say "needs root: the agent collapses another process (CAP_SYS_NICE)"; exit 3; }
work=$(mktemp -d /tmp/agent_big.XXXXXX)
pids=()
save_thp_settings
stop_all() {
  [ -n "${agent:-}" ] && kill "$agent" 2>/dev/null && { wait "$agent" 2>/dev/null || true; }
  agent=
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && { wait "$pid" 2>/dev/null || true; }; done
  pids=()
}
trap 'stop_all; restore_thp_settings; say "raw lines kept in $work"' EXIT
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled

# start_workload RUN TAG: the hot_set processes of RUN, their memory written; their pids in pids[].
start_workload() {
  local run=$1 tag=$2 count=1 size=$1 i
  [[ $run == *x* ]] && count=${run%x*} size=${run#*x}
  local idle=()
  [ "$count" -gt 1 ] && idle=(--idle)
  for ((i = 0; i < count; i++)); do
    "$build/bench/hot_set" --size "$size" --seconds $((max_seconds + 600)) "${idle[@]}" > "$work/$tag.$i.out" &
    pids+=($!)
  done
  for ((i = 0; i < count; i++)); do
    until grep -q '^t=' "$work/$tag.$i.out" 2>/dev/null; do sleep 0.5; done
  done
}

# huge_share TAG: the share of the workload's memory on huge pages now (each process's last line; the hot
# set is hot_set's default 20 % of its memory).
huge_share() {
  python3 - "$work" "$1" <<'EOF'
import glob, re, sys
shares = []
for name in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}.*.out")):
    lines = [l for l in open(name) if l.startswith("t=")]
    m = re.search(r"hot_huge=([0-9.]+) cold_huge=([0-9.]+)", lines[-1]) if lines else None
    shares.append(0.2 * float(m.group(1)) + 0.8 * float(m.group(2)) if m else 0.0)
print(f"{sum(shares) / len(shares):.4f}" if shares else "0")
EOF
}

# reference RUN: `hugify collapse` of a fresh workload; prints "bytes cpu_seconds seconds".
reference() {
  local run=$1 bytes=0 cpu=0 seconds=0 pid
  start_workload "$run" "$run.reference"
  for pid in "${pids[@]}"; do
    # exit 1: some windows were refused (counted in the report, as the agent's are): the run goes on
    "$HUGIFY" collapse "$pid" --json > "$work/$run.reference.$pid.json" || [ $? -eq 1 ]
    read -r b c s < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
t = d["total"]; print(t["huge_after_bytes"] - t["huge_before_bytes"], d["cpu_seconds"], d["seconds"])' "$work/$run.reference.$pid.json")
    bytes=$((bytes + b)); cpu=$(python3 -c "print($cpu + $c)"); seconds=$(python3 -c "print($seconds + $s)")
  done
  stop_all
  echo "$bytes $cpu $seconds"
}

# agent_run RUN BUDGET: the agent over a fresh workload; prints the times to 50/90/95 % and its figures.
agent_run() {
  local run=$1 budget=$2 tag="$1.agent$2"
  start_workload "$run" "$tag"
  local selector=(--comm hot_set)
  "$HUGIFY" agent "${selector[@]}" --min-rss 0 --cpu-budget "$budget" --state-file none \
    --json="$work/$tag.json" 2> "$work/$tag.err" &
  agent=$!
  local start=$SECONDS t50=- t90=- t95=- share
  while [ $((SECONDS - start)) -lt "$max_seconds" ]; do
    sleep 1
    share=$(huge_share "$tag")
    [ "$t50" = - ] && python3 -c "exit(0 if $share >= 0.5 else 1)" && t50=$((SECONDS - start))
    [ "$t90" = - ] && python3 -c "exit(0 if $share >= 0.9 else 1)" && t90=$((SECONDS - start))
    if python3 -c "exit(0 if $share >= 0.95 else 1)"; then t95=$((SECONDS - start)); break; fi
  done
  kill -TERM "$agent"; wait "$agent" || true; agent=
  stop_all
  echo "$t50 $t90 $t95 $share"
}

printf '%-8s %6s %6s %6s %6s %7s %9s %9s %9s %8s %9s %9s %6s\n' run budget t50_s t90_s t95_s huge \
  agent_cpu collapse measure longest ref_cpu ref_GiB/s eff
for run in $runs; do
  read -r ref_bytes ref_cpu ref_seconds < <(reference "$run")
  results=()
  for budget in $budgets; do
    read -r t50 t90 t95 share < <(agent_run "$run" "$budget")
    results+=("$budget $t50 $t90 $t95 $share")
  done
  read -r ref2_bytes ref2_cpu ref2_seconds < <(reference "$run")
  say "$run: the reference before the agent's runs $ref_cpu s of CPU for $ref_bytes bytes, after them $ref2_cpu s for $ref2_bytes"
  ref_bytes=$(( (ref_bytes + ref2_bytes) / 2 )) ref_cpu=$(python3 -c "print(($ref_cpu + $ref2_cpu) / 2)")
  for result in "${results[@]}"; do
    read -r budget t50 t90 t95 share <<< "$result"
    python3 - "$work/$run.agent$budget.json" "$run" "$budget" "$t50" "$t90" "$t95" "$share" \
      "$ref_bytes" "$ref_cpu" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
decoder, at, last = json.JSONDecoder(), 0, None
while True:
    while at < len(text) and text[at].isspace():
        at += 1
    if at >= len(text):
        break
    last, at = decoder.raw_decode(text, at)
run, budget, t50, t90, t95, share, ref_bytes, ref_cpu = sys.argv[2:10]
cost = last["cost"]
made, cpu = last["collapsed_bytes"], last["cpu_seconds"]
ref_rate = float(ref_bytes) / float(ref_cpu) if float(ref_cpu) > 0 else 0
rate = made / cpu if cpu > 0 else 0
print(f"{run:8s} {budget:>6s} {t50:>6s} {t90:>6s} {t95:>6s} {float(share):7.3f} {cpu:9.2f} "
      f"{cost['collapse_cpu_seconds']:9.2f} {cost['measure_cpu_seconds']:9.2f} "
      f"{cost['longest_pass_cpu_seconds']:8.3f} {float(ref_cpu):9.2f} {ref_rate / 2**30:9.2f} "
      f"{rate / ref_rate if ref_rate else 0:6.2f}")
EOF
  done
done
