#!/bin/bash
# SPDX-License-Identifier: MIT
# Issue 19, item 1: the pause a live Redis feels while its heap is collapsed, per pacing lever.
#
# One trial = a fresh redis-server loaded from the same RDB file (KEYS keys of VALUE bytes, all on 4 KiB
# pages: Debian's jemalloc, THP in madvise mode), GET load from back-to-back short redis-benchmark runs
# (-P 16 --precision 3 --csv, REQ requests each, about half a second), BASE seconds of load alone, then
# the lever, then one more second. Each redis-benchmark run is a sample (max, p99, GET/s); the trial
# reports the runs that ended before the lever ("base") and the runs that overlapped it ("during").
# With TRACE=1, bpftrace (collapse_pause.bt) records what the server thread waited on meanwhile.
#
# Levers (LEVERS, space-separated; rounds alternate their order):
#   none       no action (a second baseline: BASE+6 s of load)
#   hugify     hugify collapse PID                         (64 MiB per call)
#   hugify2m   hugify collapse PID --chunk 2M              (one 2 MiB window per call)
#   idle2m     chrt --idle 0 hugify collapse PID --chunk 2M
#   dutyD      collapse_paced PID --duty D  (one window per call, sleep after each call so that calls
#              take D of the wall time; e.g. duty1 duty0.5 duty0.25)
#   warmD      the same as dutyD, with --warm 1 (fault in and free one huge page before each call)
#   cwarmD     the same as warmD, the gap in proportion to the call's CPU time (--pace-by cpu)
#   chunk64    collapse_paced PID --chunk 64M               (hugify's default, through the driver)
# Issue 19's targets (the pacing built into hugify):
#   main       $HUGIFY_MAIN collapse PID   (main's hugify before pacing: 64 MiB calls back to back)
#   gentle     hugify collapse PID         (the default pace: one window per call, warm page, rest = CPU)
#   full       hugify collapse PID --pace full
#   agent      hugify agent --pid PID --min-rss 0 (its defaults otherwise) for AGENT_SECONDS (default 8),
#              then SIGTERM; its metrics file gives its pauses and CPU
# The hugify levers print the harm ledger hugify measured itself (longest and p99 pause, calls, CPU).
# NICE (default 0) runs the server, the load and the lever at that nice value: -5 keeps the experiment
# ahead of other people's nice-10 builds on a shared machine while the three compete as usual.
# CPU_SHARES (cgroup v1 cpu controller) puts the whole experiment in its own cpu cgroup with that many
# shares (e.g. 100000 against 1024 per nice-0 task elsewhere), removed at the end: a 2-CPU machine of
# its own, as far as the fair scheduler goes, while other people's builds run beside it.
# Usage: bench/servers/collapse_pause.sh     (root; HUGIFY=build/bin/hugify PORT=6401 KEYS=3000000
#        VALUE=100 REQ=300000 BASE=3 NICE=0 ROUNDS=1 LEVERS="none hugify hugify2m duty0.5" TRACE=0 OUT=dir)
# Prints one line per trial (max: the span's worst request; run-max and p99: medians over the span's
# redis-benchmark runs, which compare spans of unequal length); OUT keeps the raw files (load samples, per-call lines, traces).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-6401}; KEYS=${KEYS:-3000000}; VALUE=${VALUE:-100}; REQ=${REQ:-300000}
HUGIFY_MAIN=${HUGIFY_MAIN:-/work/main/build/bin/hugify}; AGENT_SECONDS=${AGENT_SECONDS:-8}
BASE=${BASE:-3}; NICE=${NICE:-0}; ROUNDS=${ROUNDS:-1}; LEVERS=${LEVERS:-"none hugify hugify2m duty0.5"}; TRACE=${TRACE:-0}
need_hugify; need_tools redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools cc=gcc python3=python3
[ "$TRACE" = 1 ] && need_tools bpftrace=bpftrace
OUT=${OUT:-$(mktemp -d /var/tmp/hugify-pause-out.XXXXXX)}
DIR=$(mktemp -d /var/tmp/hugify-pause.XXXXXX)
PACED=$DIR/collapse_paced
SERVER= LOAD= TRACER= CGROUP=
cleanup() {
  [ -n "$TRACER" ] && kill -INT "$TRACER" 2>/dev/null && wait "$TRACER" 2>/dev/null
  [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null && wait "$LOAD" 2>/dev/null
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  rm -rf "$DIR"
  if [ -n "$CGROUP" ]; then echo $$ >/sys/fs/cgroup/cpu/cgroup.procs; rmdir "$CGROUP"; fi
}
trap cleanup EXIT INT TERM
mkdir -p "$OUT"
if [ -n "${CPU_SHARES:-}" ]; then
  CGROUP=/sys/fs/cgroup/cpu/hugify-pause-$$
  mkdir "$CGROUP"; echo "$CPU_SHARES" >"$CGROUP/cpu.shares"; echo $$ >"$CGROUP/cgroup.procs"
fi
cc -O2 -o "$PACED" "$HERE/../collapse_paced.c"

start_server() {
  nice -n "$NICE" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
    --dbfilename redis.rdb --logfile "$DIR/redis.log" &
  SERVER=$!
  until redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
}
stop_server() { kill "$SERVER"; wait "$SERVER" || true; SERVER=; }

# The data set, once: the key names redis-benchmark -r draws from (key:%012d), saved as an RDB file.
start_server
awk -v n="$KEYS" -v size="$VALUE" 'BEGIN { v = sprintf("%*s", size, ""); gsub(/ /, "x", v)
  for (i = 0; i < n; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%s\r\n", i, size, v }' |
  redis-cli -p "$PORT" --pipe >/dev/null
redis-cli -p "$PORT" save >/dev/null
stop_server

# Back-to-back load runs until STOP exists: "start end rps p99 max" per run (wall clock, seconds).
load_loop() { # FILE
  while [ ! -e "$DIR/stop" ]; do
    local t0=$EPOCHREALTIME
    local csv
    csv=$(nice -n "$NICE" redis-benchmark -p "$PORT" -t get -r "$KEYS" -n "$REQ" -P 16 --precision 3 --csv | grep '^"GET"')
    echo "$t0 $EPOCHREALTIME $(echo "$csv" | tr -d '"' | awk -F, '{ print $2, $7, $8 }')" >>"$1"
  done
}

lever() { # NAME -> runs it against $SERVER
  case $1 in
    none) sleep 6 ;;
    hugify) "$HUGIFY" collapse "$SERVER" >"$2.out" ;;
    hugify2m) "$HUGIFY" collapse "$SERVER" --chunk 2M >"$2.out" ;;
    idle2m) chrt --idle 0 "$HUGIFY" collapse "$SERVER" --chunk 2M >"$2.out" ;;
    duty*) "$PACED" "$SERVER" --duty "${1#duty}" --calls "$2.calls" >"$2.out" ;;
    warm*) "$PACED" "$SERVER" --duty "${1#warm}" --warm 1 --calls "$2.calls" >"$2.out" ;;
    cwarm*) "$PACED" "$SERVER" --duty "${1#cwarm}" --warm 1 --pace-by cpu --calls "$2.calls" >"$2.out" ;;
    chunk64) "$PACED" "$SERVER" --chunk $((64 << 20)) --calls "$2.calls" >"$2.out" ;;
    main) "$HUGIFY_MAIN" collapse "$SERVER" --json="$2.json" >/dev/null ;;
    gentle) "$HUGIFY" collapse "$SERVER" --json="$2.json" >/dev/null ;;
    full) "$HUGIFY" collapse "$SERVER" --pace full --json="$2.json" >/dev/null ;;
    agent) "$HUGIFY" agent --pid "$SERVER" --min-rss 0 --metrics-file "$2.prom" 2>"$2.err" &
      local agent=$!
      sleep "$AGENT_SECONDS"; kill -TERM "$agent"; wait "$agent" || true ;;
    *) echo "unknown lever $1" >&2; return 2 ;;
  esac
}

# What hugify said the lever cost the server: its JSON report (collapse) or its metrics (agent).
harm() { # TAG
  if [ -s "$1.json" ]; then
    jq -r '"calls=\(.calls) wall_s=\(.seconds + (.gap_seconds // 0) | .*1000|round/1000) cpu_s=\(.cpu_seconds*1000|round/1000) longest_call_ms=\(.longest_call_seconds*1e5|round/100) longest_pause_ms=\(if .pause then (.pause.longest_seconds*1e5|round/100) else "-" end) p99_pause_ms=\(if .pause then (.pause.p99_seconds*1e5|round/100) else "-" end) bloat=\(.total.bloat_bytes)"' "$1.json"
  elif [ -s "$1.prom" ]; then
    awk '/^hugify_agent_pause_seconds_count/ { n = $2 } /^hugify_agent_pause_seconds_sum/ { s = $2 }
      /^hugify_agent_longest_call_seconds/ { l = $2 } /^hugify_agent_collapsed_bytes_total/ { c = $2 }
      /^hugify_agent_cpu_seconds_total/ { cpu = $2 } /^hugify_agent_pause_seconds_bucket/ { b[++k] = $0 }
      END { printf "calls=%s cpu_s=%.3f collapsed_mib=%.0f longest_call_ms=%.2f pause_sum_ms=%.1f buckets:", n, cpu, c / 1048576, l * 1000, s * 1000
        for (i = 1; i <= k; i++) { split(b[i], f, "\""); split(b[i], v, " "); printf " %s=%s", f[2], v[2] } print "" }' "$1.prom"
  fi
}

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
  else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

trial() { # LEVER ROUND
  local name=$1 tag="$OUT/$1.r$2"
  rm -f "$DIR/stop" "$tag.load"
  start_server
  if [ "$TRACE" = 1 ]; then
    bpftrace "$HERE/collapse_pause.bt" "$SERVER" 5000 >"$tag.trace" 2>&1 &
    TRACER=$!
    until grep -q 'trace start' "$tag.trace" 2>/dev/null; do sleep 0.2; done
  fi
  load_loop "$tag.load" &
  LOAD=$!
  sleep "$BASE"
  local load0 t0 t1 cpu
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$EPOCHREALTIME
  nice -n "$NICE" /usr/bin/time -f '%e %U %S' -o "$tag.time" bash -c "$(declare -f lever); HUGIFY=$HUGIFY HUGIFY_MAIN=$HUGIFY_MAIN AGENT_SECONDS=$AGENT_SECONDS PACED=$PACED SERVER=$SERVER lever $name $tag"
  t1=$EPOCHREALTIME
  sleep 1
  touch "$DIR/stop"; wait "$LOAD"; LOAD=
  if [ -n "$TRACER" ]; then kill -INT "$TRACER"; wait "$TRACER" || true; TRACER=; fi
  stop_server
  cpu=$(awk '{ printf "%.2f", $2 + $3 }' "$tag.time")
  if [ -s "$tag.json" ] || [ -s "$tag.prom" ]; then harm "$tag" >"$tag.out"; fi
  # base: runs that ended before the lever; during: runs that overlapped it
  local bmax bp99 dmax dp99 drps bmedmax dmedmax
  bmax=$(awk -v t0="$t0" '$2 < t0 { print $5 }' "$tag.load" | sort -g | tail -1)
  bp99=$(awk -v t0="$t0" '$2 < t0 { print $4 }' "$tag.load" | median)
  dmax=$(awk -v t0="$t0" -v t1="$t1" '$2 >= t0 && $1 <= t1 { print $5 }' "$tag.load" | sort -g | tail -1)
  dp99=$(awk -v t0="$t0" -v t1="$t1" '$2 >= t0 && $1 <= t1 { print $4 }' "$tag.load" | median)
  # the max of a span grows with its length: the median of the runs' maxima compares spans of unequal length
  bmedmax=$(awk -v t0="$t0" '$2 < t0 { print $5 }' "$tag.load" | median)
  dmedmax=$(awk -v t0="$t0" -v t1="$t1" '$2 >= t0 && $1 <= t1 { print $5 }' "$tag.load" | median)
  drps=$(awk -v t0="$t0" -v t1="$t1" '$2 >= t0 && $1 <= t1 { print $3 }' "$tag.load" | median)
  printf '%-9s r%s wall_s=%.2f cpu_s=%s | base max=%s run-max=%s p99=%s | during max=%s run-max=%s p99=%s rps=%s | load %s | %s\n' \
    "$name" "$2" "$(echo "$t1 - $t0" | bc)" "$cpu" "$bmax" "$bmedmax" "$bp99" "$dmax" "$dmedmax" "$dp99" "$drps" "$load0" \
    "$(grep -E '^calls=|took|seconds' "$tag.out" 2>/dev/null | head -1)"
}

echo "# $(date -u +%FT%TZ) keys=$KEYS value=$VALUE req/run=$REQ nice=$NICE cpu_shares=${CPU_SHARES:-} out=$OUT"
for round in $(seq 1 "$ROUNDS"); do
  order=$LEVERS
  [ $((round % 2)) = 0 ] && order=$(echo "$LEVERS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for name in $order; do trial "$name" "$round"; done
done
