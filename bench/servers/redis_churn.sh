#!/bin/bash
# SPDX-License-Identifier: MIT
# A churning Redis with and without `hugify agent` (issue 20): does the agent fight an allocator that gives
# memory back? Reproduces the issue's table.
#
# Each regime runs on a fresh redis-server (Debian's, jemalloc; THP in madvise mode) holding KEYS keys of
# VALUE bytes (~340 MiB for 2 M keys of 100 bytes), then ROUNDS rounds of churn over the same key space with
# redis-benchmark, pipelined: CHURN random DELs, then CHURN random SETs. SETTLE seconds after each round it
# prints one line: RSS, the share of heap + anonymous memory on huge pages (`hugify inspect --json`), the
# agent's collapsed and re-collapsed totals and its CPU (its metrics file), the PMD splits since the
# start of the regime (/proc/vmstat thp_split_pmd: machine-wide, so other work on the machine adds to it),
# and what the churn round's own SETs and a GET load right after it (GETS random GETs, pipelined) measured:
# requests per second and p99 latency (redis-benchmark --csv).
#   nothing     the server alone
#   agent       `hugify agent --pid PID` at its defaults (its own metrics file, no config file), started
#               when the keys are loaded; churn starts WARMUP seconds later (its first passes)
#   hpa, hpa+agent   the same with MALLOC_CONF=hpa:true for the server (jemalloc 5.3's huge-page allocator)
# REPS repetitions alternate the order (nothing agent, agent nothing, ...). MALLOC_CONF (and any other
# variable in the environment) reaches redis-server in the other regimes: MALLOC_CONF=thp:always,dirty_decay_ms:-1
# measures a jemalloc setting.
#
# Usage: bench/servers/redis_churn.sh [--summary OUTPUT...]   (--summary: the tables of earlier runs' output
#        together, with nothing run; root; HUGIFY=path/to/hugify, PORT=6402, KEYS=2000000, VALUE=100,
#                                        CHURN=1000000, GETS=1000000, ROUNDS=10, SETTLE=4, WARMUP=25, REPS=1,
#                                        REGIMES="nothing agent", AGENT_ARGS="")
# Lines: "regime rep round rss_bytes huge_fraction collapsed_bytes recollapsed_bytes agent_cpu_s splits load1
#         set_rps set_p99_ms get_rps get_p99_ms" (the four load figures are 0 for round 0).
# Starts only its own servers on 127.0.0.1 in a temporary directory; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-6402}; KEYS=${KEYS:-2000000}; VALUE=${VALUE:-100}; CHURN=${CHURN:-1000000}
GETS=${GETS:-1000000}; ROUNDS=${ROUNDS:-10}; SETTLE=${SETTLE:-4}; WARMUP=${WARMUP:-25}; REPS=${REPS:-1}; REGIMES=${REGIMES:-nothing agent}
AGENT_ARGS=${AGENT_ARGS:-}
source "$(dirname "$0")/lib.sh"
need_hugify; need_tools redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools python3=python3
server_scratch hugify-redis-churn

# "rss huge_fraction" of PID: VmRSS, and heap + anon huge / resident from hugify inspect
memory_of() {
  local share
  share=$(heap_anon_of "$1" | cut -d' ' -f2)
  echo "$(($(awk '/^VmRSS/ {print $2}' "/proc/$1/status") * 1024)) $share"
}

metric() { # NAME: the agent's value, or 0 without an agent (or a metric this agent does not have)
  local value=""
  [ -f "$DIR/agent.prom" ] && value=$(awk -v n="$1" '$1 == n {print $2}' "$DIR/agent.prom")
  echo "${value:-0}"
}

splits() { awk '$1 == "thp_split_pmd" {print $2}' /proc/vmstat; }

line() { # REGIME REP ROUND SPLITS0 LOAD_FIGURES
  echo "$1 $2 $3 $(memory_of "$SERVER") $(metric hugify_agent_collapsed_bytes_total)" \
       "$(metric hugify_agent_recollapsed_bytes_total) $(metric hugify_agent_cpu_seconds_total)" \
       "$(($(splits) - $4)) $(cut -d' ' -f1 /proc/loadavg) $5"
}

regime() { # NAME REP
  local name=$1 rep=$2 round s0
  rm -f "$DIR/agent.prom"
  local conf=${MALLOC_CONF:-}
  case $name in hpa*) conf=hpa:true ;; esac
  MALLOC_CONF=$conf redis_start "$PORT"
  redis_populate "$PORT" "$KEYS" "$VALUE"
  s0=$(splits)
  if [[ $name == *agent ]]; then
    # shellcheck disable=SC2086
    "$HUGIFY" agent --pid "$SERVER" --metrics-file "$DIR/agent.prom" $AGENT_ARGS >/dev/null 2>>"$DIR/agent.log" &
    AGENT=$!
  fi
  sleep "$WARMUP"
  line "$name" "$rep" 0 "$s0" "0 0 0 0"
  for round in $(seq 1 "$ROUNDS"); do
    redis-benchmark -p "$PORT" -r "$KEYS" -n "$CHURN" -P 32 -q DEL key:__rand_int__ >/dev/null
    set=$(redis-benchmark -p "$PORT" -r "$KEYS" -n "$CHURN" -P 32 -d "$VALUE" -t set --csv | redis_csv_figures | cut -d' ' -f1,2)
    get=$(redis-benchmark -p "$PORT" -r "$KEYS" -n "$GETS" -P 32 -t get --csv | redis_csv_figures | cut -d' ' -f1,2)
    sleep "$SETTLE"
    line "$name" "$rep" "$round" "$s0" "$set $get"
  done
  if [ -n "$AGENT" ]; then
    kill "$AGENT"; wait "$AGENT" || true; AGENT=
    grep -h 'backed off\|stopped' "$DIR/agent.log" | tail -2 | sed "s/^/# /" || true
    grep -h '^hugify_agent_process_\(lasting_ratio\|undone\|bloat\|churn_backoff\)' "$DIR/agent.prom" | sed "s/^/# /" || true
    : >"$DIR/agent.log"
  fi
  kill "$SERVER"; wait "$SERVER" || true; SERVER=
}

if [ "${1:-}" = --summary ]; then
  # the tables of earlier runs together (their output files): runs in different regime orders balance out
  # what drifts during one run
  shift
  grep -h -E '^[a-z+]+ [0-9]+ [0-9]+ [0-9]+ ' "$@" >"$DIR/lines" || true
else
echo "# $(date -u +%FT%TZ) load $(cat /proc/loadavg) MALLOC_CONF=${MALLOC_CONF:-} AGENT_ARGS=$AGENT_ARGS"
alternate_rounds "$REPS" "$REGIMES" regime | tee "$DIR/lines"
fi

python3 - "$DIR/lines" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    name, rep, rnd, rss, huge, collapsed, recollapsed, cpu, splits, load, *served = line.split()
    rows.setdefault(int(rnd), {}).setdefault(name, []).append(
        (int(rss), float(huge), float(collapsed), float(recollapsed), float(cpu), int(splits), float(load),
         *map(float, served)))
M = 2**20
med = lambda xs: statistics.median(xs)
print("\nper round, median over repetitions: RSS MiB, heap+anon huge %, agent collapsed / re-collapsed MiB (total),")
print("agent CPU s, PMD splits since the start (machine-wide), load average")
names = sorted({n for by in rows.values() for n in by})
for name in names:
    print("\n%s\n| after | RSS | huge | collapsed | re-collapsed | agent CPU | PMD splits | load |\n|---|---|---|---|---|---|---|---|" % name)
    for rnd in sorted(rows):
        if name not in rows[rnd]: continue
        r = rows[rnd][name]
        print("| %s | %.0f MiB | %.0f %% | %.0f MiB | %.0f MiB | %.2f s | %d | %.1f |" % (
            "start" if rnd == 0 else "churn %d" % rnd, med(x[0] for x in r) / M, 100 * med(x[1] for x in r),
            med(x[2] for x in r) / M, med(x[3] for x in r) / M, med(x[4] for x in r), med(x[5] for x in r),
            med(x[6] for x in r)))
if "agent" in names and "nothing" in names:
    last = max(rows)
    a, n = rows[last]["agent"], rows[last]["nothing"]
    print("\nafter round %d: RSS agent/nothing %.3f; re-collapsed / RSS %.2f" % (
        last, med(x[0] for x in a) / med(x[0] for x in n), med(x[3] for x in a) / med(x[0] for x in a)))

# Served under churn: every round after the first of every repetition is one sample per regime. The
# interval is the median's 95 % distribution-free one (order statistics of a binomial(n, 1/2)).
def median_interval(xs):
    from math import comb
    xs = sorted(xs); n = len(xs); k = 0
    while k + 1 < n / 2 and sum(comb(n, i) for i in range(k + 2)) / 2**n <= 0.025: k += 1
    return statistics.median(xs), xs[k], xs[n - 1 - k]
figures = [("SET/s", 7), ("SET p99 ms", 8), ("GET/s", 9), ("GET p99 ms", 10)]
served = {n: [x for rnd in rows if rnd > 1 for x in rows[rnd].get(n, [])] for n in names}
if all(len(x[0]) > 7 for x in served.values() if x):
    print("\nserved under churn (rounds 2..%d of every repetition): median [95 %% interval]; ratio to nothing" % max(rows))
    print("| regime | samples | " + " | ".join(f for f, _ in figures) + " |\n|---|---|" + "---|" * len(figures))
    base = {i: statistics.median(x[i] for x in served["nothing"]) for _, i in figures} if served.get("nothing") else {}
    for name in names:
        cells = []
        for _, i in figures:
            m, lo, hi = median_interval([x[i] for x in served[name]])
            scale = 1e3 if i in (7, 9) else 1
            cell = ("%.0f k [%.0f, %.0f]" if scale > 1 else "%.2f [%.2f, %.2f]") % (m / scale, lo / scale, hi / scale)
            if base and name != "nothing": cell += " (%.2fx)" % (m / base[i])
            cells.append(cell)
        print("| %s | %d | %s |" % (name, len(served[name]), " | ".join(cells)))
EOF
