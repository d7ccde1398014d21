#!/bin/bash
# SPDX-License-Identifier: MIT
# agent_scale.sh - the agent at its defaults over a host of thousands of processes (issue 34, item 4).
# bench/scale_host keeps PROCS processes alive for DURATION seconds: most small (1-2 MiB of written heap)
# and short-lived (10-120 s, then replaced: hundreds come and go every minute), one replacement in 100 a
# 24 MiB one the agent measures and collapses, LARGE long-lived ones of 256-448 MiB of dense heap. Beside it,
# `hugify agent` at its defaults (interval, --cpu-budget, --min-rss, ...) with a state file and --listen.
# Every 10 s: the agent's CPU (utime+stime), RSS, fds, the metrics' series count, the live targets; every
# pass (from the state file, polled every 2 s): its CPU and wall time. At three points: `inspect --all`,
# `status` and `agent --status` (one observation pass, no collapse: what a pass costs without collapse work)
# timed. At the end, the figures against the targets (exit 1 when one is missed). Nothing is left running.
#
#   bench/agent_scale.sh [BUILD_DIR]      (as root: the agent needs CAP_SYS_NICE)
#   bench/agent_scale_report.py DIR       the figures and verdicts of a run again, from its directory
#   env: DURATION=1800 PROCS=2000 LARGE=4 WARMUP=300 PORT=9471 OUT=DIR SELECT=uid|all
#
# SELECT=uid (the default) adds `--uid 43434`, the targets' own uid, so that the agent collapses only them
# and not the programs of others on a shared machine; its pass still walks and reads every process of the
# host. SELECT=all runs the agent with no selector at all. THP settings and pools are not touched. The
# sampling loop runs at nice -5 (the agent at 0), so that a loaded machine leaves no holes in its samples.
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
renice -n -5 -p $$ > /dev/null
say "host pid $host ($procs processes), agent pid $agent; figures in $out; $duration s"

printf 't\tlive\tticks\trss_kb\tanon_kb\tfds\tseries\tpasses\tload1\n' > "$out/samples.tsv"
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
    rss=$(awk '/^VmRSS:/ { rss = $2 } /^RssAnon:/ { anon = $2 } END { print rss "\t" anon }' "/proc/$agent/status")
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
    timed "$t" "agent --status" "$HUGIFY" agent --status "${selector[@]}" --state-file "$out/state.json"
    timings=("${timings[@]:1}")
  fi
  sleep 2
done
ticks=$(awk '{ print $14 + $15 }' "/proc/$agent/stat")
wall=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { print n - s }')
cp "$out/state.json" "$out/state.final.json"
tail -1 "$out/host.log" > "$out/host.last"

echo "$hz $ticks $wall $warmup" > "$out/run.txt"
python3 "$(dirname "$0")/agent_scale_report.py" "$out"
