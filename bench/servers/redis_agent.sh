#!/bin/bash
# SPDX-License-Identifier: MIT
# Redis growing under client load, with and without `hugify agent` (issue 13's Redis target): does GET
# throughput stay at the collapsed level as the server grows, or decay as new memory lands on 4 KiB pages?
#
# One round runs three regimes, each on a fresh redis-server (Debian's, jemalloc; THP in madvise mode, so
# nothing it allocates is made huge by the kernel):
#   nothing    the server alone
#   once       `hugify collapse PID` once, after the first step (what a one-off fix gives)
#   agent      `hugify agent --pid PID` running beside it (--interval and --cpu-budget below)
# Each regime grows the data set STEPS times by STEP keys (redis-cli --pipe of SETs) and, after each step,
# measures GET throughput over all keys so far (redis-benchmark -P 32, random keys) and the share of the
# server's heap + anonymous memory on huge pages (`hugify inspect`). Rounds alternate the regimes' order
# (nothing once agent, then agent once nothing, ...), and the table gives, per step, the median over rounds.
#
# Usage: bench/servers/redis_agent.sh            (root; HUGIFY=path/to/hugify, PORT=16391, ROUNDS=2,
#                                                 STEPS=5, STEP=1000000, INTERVAL=2, BUDGET=10, REQUESTS=2000000)
# Prints one line per measurement ("regime round step keys rss_bytes huge_fraction gets_per_second") and
# the table. Starts only its own servers on 127.0.0.1 in a temporary directory; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-16391}; ROUNDS=${ROUNDS:-2}; STEPS=${STEPS:-5}; STEP=${STEP:-1000000}
INTERVAL=${INTERVAL:-2}; BUDGET=${BUDGET:-10}; REQUESTS=${REQUESTS:-2000000}
source "$(dirname "$0")/lib.sh"
need_hugify; need_tools redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools python3=python3
server_scratch hugify-redis-agent

memory_of() { heap_anon_of "$1"; } # "resident huge_fraction"

# Keys [FROM, TO) as key:%012d -> xxx, the names redis-benchmark -r draws from.
populate() {
  awk -v from="$1" -v to="$2" 'BEGIN { for (i = from; i < to; i++)
    printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$3\r\nxxx\r\n", i }' | redis-cli -p "$PORT" --pipe >/dev/null
}

regime() { # NAME ROUND
  local name=$1 round=$2 keys=0 step
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
    --logfile "$DIR/redis.log" &
  SERVER=$!
  until redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
  if [ "$name" = agent ]; then
    "$HUGIFY" agent --pid "$SERVER" --min-rss 0 --interval "$INTERVAL" --cpu-budget "$BUDGET" \
      --metrics-file "$DIR/agent.prom" 2>>"$DIR/agent.log" &
    AGENT=$!
  fi
  for step in $(seq 1 "$STEPS"); do
    populate "$keys" $((keys + STEP)); keys=$((keys + STEP))
    if [ "$name" = once ] && [ "$step" = 1 ]; then "$HUGIFY" collapse "$SERVER" >/dev/null; fi
    if [ "$name" = agent ]; then sleep $((2 * INTERVAL)); fi # two passes: what the agent promises
    local gets
    gets=$(redis-benchmark -p "$PORT" -t get -r "$keys" -n "$REQUESTS" -P 32 -q | sed -n 's/.*GET: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
    echo "$name $round $step $keys $(memory_of "$SERVER") $gets"
  done
  if [ -n "$AGENT" ]; then
    kill "$AGENT"; wait "$AGENT" || true; AGENT=
    grep -h '^hugify_agent_cpu_seconds_total' "$DIR/agent.prom" | sed "s/^/# agent round $round: /"
  fi
  kill "$SERVER"; wait "$SERVER" || true; SERVER=
}

alternate_rounds "$ROUNDS" "nothing once agent" regime | tee "$DIR/lines"

python3 - "$DIR/lines" <<'EOF'
import statistics, sys
rows = {}  # (step, keys) -> regime -> round -> (gets, huge, resident)
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    name, rnd, step, keys, resident, huge, gets = line.split()
    rows.setdefault((int(step), int(keys)), {}).setdefault(name, {})[int(rnd)] = (float(gets), float(huge), int(resident))
def cell(by, name):
    if name not in by: return "%17s" % "-"
    runs = by[name].values()
    return "%9.0f (%3.0f%%)" % (statistics.median(g for g, _, _ in runs), 100 * statistics.median(h for _, h, _ in runs))
def paired(by, a, b):  # per-round ratios a/b: median [min, max]
    ratios = sorted(by[a][r][0] / by[b][r][0] for r in by.get(a, {}) if r in by.get(b, {}))
    return "%.2fx [%.2f, %.2f]" % (statistics.median(ratios), ratios[0], ratios[-1]) if ratios else "-"
print("\nGET/s, median over rounds (share of heap + anon on huge pages); agent/nothing and agent/once: median of")
print("the per-round ratios [lowest, highest]")
print("  step     keys  heap+anon |           nothing              once             agent | agent/nothing         agent/once")
for (step, keys), by in sorted(rows.items()):
    resident = statistics.median(r for _, _, r in next(iter(by.values())).values())
    print("  %4d %8d %6.0f MiB | %s %s %s | %-21s %s" % (step, keys, resident / 2**20, cell(by, "nothing"), cell(by, "once"),
          cell(by, "agent"), paired(by, "agent", "nothing"), paired(by, "agent", "once")))
EOF
