#!/bin/bash
# SPDX-License-Identifier: MIT
# agent_scale.sh - the agent at its defaults over a host of thousands of processes (issue 34, item 4).
# bench/scale_host keeps PROCS processes alive for DURATION seconds: most small (1-2 MiB of written heap)
# and short-lived (10-120 s, then replaced: hundreds come and go every minute), one replacement in 100 a
# 24 MiB one the agent measures and collapses, LARGE long-lived ones of 256-448 MiB of dense heap. Beside it,
# `hugify agent` at its defaults (interval, --cpu-budget, --min-rss, ...) with a state file and --listen.
# Every 10 s: the agent's CPU (utime+stime), RSS, fds, the metrics' series count, the live targets; every
# pass (from the state file, polled every 2 s): its CPU. At three points: `inspect --all` and `status`
# timed. At the end, the figures against the targets (exit 1 when one is missed). Nothing is left running.
#
#   bench/agent_scale.sh [BUILD_DIR]      (as root: the agent needs CAP_SYS_NICE)
#   env: DURATION=1800 PROCS=2000 LARGE=4 WARMUP=300 PORT=9471 OUT=DIR SELECT=uid|all
#
# SELECT=uid (the default) adds `--uid 43434`, the targets' own uid, so that the agent collapses only them
# and not the programs of others on a shared machine; its pass still walks and reads every process of the
# host. SELECT=all runs the agent with no selector at all. THP settings and pools are not touched.
set -euo pipefail
build=${1:-build}
duration=${DURATION:-1800} procs=${PROCS:-2000} large=${LARGE:-4} port=${PORT:-9471} select=${SELECT:-uid}
uid=43434 warmup=${WARMUP:-300}
[ "$warmup" -gt $((duration / 4)) ] && warmup=$((duration / 4))
source "$(dirname "$0")/../scripts/lib.sh"
HUGIFY=${HUGIFY:-$build/bin/hugify}
need_hugify
need_tools jq=jq curl=curl python3=python3 /usr/bin/time=time "$build/bench/scale_host=the bench programs (cmake --build $build)"
[ "$(id -u)" -eq 0 ] || { say "agent_scale.sh runs as root (the agent needs CAP_SYS_NICE, the targets their own uid)"; exit 3; }
out=${OUT:-$(mktemp -d /tmp/agent_scale.XXXXXX)}
mkdir -p "$out"
host='' agent=''
cleanup() {
  [ -n "$agent" ] && kill -TERM "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  [ -n "$host" ] && kill -TERM "$host" 2>/dev/null && wait "$host" 2>/dev/null
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$build/bench/scale_host" --processes "$procs" --large "$large" --seconds $((duration + 120)) > "$out/host.log" &
host=$!
selector=(--uid "$uid")
[ "$select" = all ] && selector=()
"$HUGIFY" agent "${selector[@]}" --state-file "$out/state.json" --listen "127.0.0.1:$port" 2> "$out/agent.err" &
agent=$!
hz=$(getconf CLK_TCK)
say "host pid $host ($procs processes), agent pid $agent; figures in $out; $duration s"

# columns: t live agent_ticks rss_kb fds series passes load1
printf 't\tlive\tticks\trss_kb\tfds\tseries\tpasses\tload1\n' > "$out/samples.tsv"
printf 't\tpasses\tcpu_seconds\tcollapsed_bytes\tlisted\twall_s\n' > "$out/passes.tsv"
printf 't\tcommand\twall_s\tuser_s\tsys_s\n' > "$out/timed.tsv"
timed() { # timed T NAME CMD...: wall and CPU of one command
  local t=$1 name=$2
  shift 2
  /usr/bin/time -f "$t	$name	%e	%U	%S" -a -o "$out/timed.tsv" "$@" > /dev/null 2>&1 || true
}
start=$(date +%s.%N) last_passes=-1 next_sample=0 timings=("$warmup" $((duration / 2)) $((duration - 30)))
while :; do
  t=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%d", n - s }')
  [ "$t" -ge "$duration" ] && break
  kill -0 "$agent" 2>/dev/null || { say "the agent exited: $(tail -3 "$out/agent.err")"; exit 1; }
  if [ -s "$out/state.json" ] &&
     row=$(jq -r '[.passes, .cpu_seconds, .collapsed_bytes, (.processes | length)] | @tsv' "$out/state.json" 2>/dev/null) &&
     [ "${row%%$'\t'*}" != "$last_passes" ]; then
    wall=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" | awk '/^hugify_agent_last_pass_seconds / { print $2 }')
    printf '%s\t%s\t%s\n' "$t" "$row" "${wall:-0}" >> "$out/passes.tsv"
    last_passes=${row%%$'\t'*}
  fi
  if [ "$t" -ge "$next_sample" ]; then
    ticks=$(awk '{ print $14 + $15 }' "/proc/$agent/stat")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$agent/status")
    fds=$(find "/proc/$agent/fd" -mindepth 1 | wc -l)
    series=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" | grep -vc '^#' || true)
    live=$(pgrep -c -P "$host" || true)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$live" "$ticks" "$rss" "$fds" "$series" "$last_passes" \
      "$(cut -d' ' -f1 /proc/loadavg)" >> "$out/samples.tsv"
    next_sample=$((next_sample + 10))
  fi
  if [ ${#timings[@]} -gt 0 ] && [ "$t" -ge "${timings[0]}" ]; then
    timed "$t" "inspect --all" "$HUGIFY" inspect --all
    timed "$t" "status" "$HUGIFY" status
    timings=("${timings[@]:1}")
  fi
  sleep 2
done
ticks=$(awk '{ print $14 + $15 }' "/proc/$agent/stat")
wall=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { print n - s }')
cp "$out/state.json" "$out/state.final.json"
tail -1 "$out/host.log" > "$out/host.last"

python3 - "$out" "$hz" "$ticks" "$wall" "$warmup" <<'EOF'
import csv, json, sys
out, hz, ticks, wall, warmup = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
read = lambda name: [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(f"{out}/{name}"), delimiter="\t")]
samples, passes, timed = read("samples.tsv"), read("passes.tsv"), list(csv.DictReader(open(f"{out}/timed.tsv"), delimiter="\t"))
state = json.load(open(f"{out}/state.final.json"))
budget, longest_call = state["cpu_budget_fraction"], state["longest_call_seconds"]
# per pass: CPU between two consecutive state files (one pass and what the agent did until the next)
per_pass = [(b["t"], (b["cpu_seconds"] - a["cpu_seconds"]) / (b["passes"] - a["passes"]), b["collapsed_bytes"] > a["collapsed_bytes"],
             b["wall_s"]) for a, b in zip(passes, passes[1:]) if b["passes"] > a["passes"]]
print(f"{'min':>4} {'procs':>6} {'cpu %':>7} {'RSS KiB':>8} {'fds':>4} {'pass CPU max s':>14} {'pass wall max s':>15} {'series':>6} {'load1':>6}")
prev = samples[0]
for s in samples[1:]:
    if int(s["t"]) // 60 == int(prev["t"]) // 60 and s is not samples[-1]: continue
    span = [(p, w) for t, p, _, w in per_pass if prev["t"] < t <= s["t"]]
    cpu = 100 * (s["ticks"] - prev["ticks"]) / hz / max(s["t"] - prev["t"], 1)
    print(f"{s['t'] / 60:4.1f} {s['live']:6.0f} {cpu:7.2f} {s['rss_kb']:8.0f} {s['fds']:4.0f} "
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
# RSS: the largest sample after the warm-up against the first one. fds: a pass holds a few open for a moment
# (a pidfd, a /proc file), so what the agent keeps is each minute's smallest count, and a leak raises those.
minutes = {}
for s in after: minutes.setdefault(int((s["t"] - after[0]["t"]) // 60), []).append(s)
for key, name, unit in (("rss_kb", "RSS", " KiB"), ("fds", "fd count", "")):
    kept = [min(m[key] for m in group) for group in minutes.values()] if key == "fds" else [s[key] for s in after]
    base, top = kept[0], max(kept)
    growth = (top - base) / base
    verdict(f"{name} flat", growth <= 0.01,
            f"{base:.0f}{unit} at {after[0]['t']:.0f} s, at most {top:.0f}{unit} after (growth {100 * growth:.2f} %), "
            f"{kept[-1]:.0f}{unit} at the end; first sample {samples[0][key]:.0f}{unit}, largest sample {max(s[key] for s in samples):.0f}{unit}"
            + (" (per minute: its smallest count)" if key == "fds" else ""))
costs = sorted(p for _, p, _, _ in per_pass)
quiet = sorted(p for _, p, c, _ in per_pass if not c)
walls = sorted(w for _, _, _, w in per_pass)
if costs:
    verdict("pass CPU <= 1 s", costs[-1] <= 1.0,
            f"{len(costs)} passes: median {costs[len(costs) // 2]:.3f} s, p99 {costs[int(0.99 * (len(costs) - 1))]:.3f} s, "
            f"max {costs[-1]:.3f} s; passes without a collapse: "
            + (f"median {quiet[len(quiet) // 2]:.3f} s, max {quiet[-1]:.3f} s" if quiet else "none")
            + f"; wall: median {walls[len(walls) // 2]:.3f} s, max {walls[-1]:.3f} s")
base, top = after[0]["series"], max(s["series"] for s in after)
started = open(f"{out}/host.last").read().strip()
verdict("series bounded", top <= 1.1 * base,
        f"{samples[0]['series']:.0f} at the start, {base:.0f} at {after[0]['t']:.0f} s, at most {top:.0f} after, "
        f"{samples[-1]['series']:.0f} at the end ({started})")
print(f"\nlive target processes: min {min(s['live'] for s in after):.0f}, max {max(s['live'] for s in after):.0f}; "
      f"load average (1 min): min {min(s['load1'] for s in samples):.2f}, "
      f"mean {sum(s['load1'] for s in samples) / len(samples):.2f}, max {max(s['load1'] for s in samples):.2f}")
print(f"agent: {state['passes']} passes, collapsed {state['collapsed_bytes'] / 2**20:.0f} MiB, "
      f"budget stops {state['budget_stops']}, {len(state['processes'])} processes in its last pass")
for r in timed:
    print(f"at {r['t']} s: hugify {r['command']}: wall {r['wall_s']} s, CPU {float(r['user_s']) + float(r['sys_s']):.2f} s "
          f"(user {r['user_s']}, sys {r['sys_s']})")
sys.exit(0 if all(verdicts) else 1)
EOF
