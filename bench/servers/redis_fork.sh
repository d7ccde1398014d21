#!/bin/bash
# SPDX-License-Identifier: MIT
# Fork and copy-on-write of a collapsed Redis (issue 19, item 6): what BGSAVE costs under GET load with the
# heap on 4 KiB pages and after `hugify collapse`, for users who know Redis's start-up warning about THP.
#
# Each round starts a fresh redis-server (Debian's, jemalloc; THP in madvise mode) holding KEYS keys of
# VALUE bytes, then, for the regime `collapsed`, runs `hugify collapse PID` (COLLAPSE_ARGS) and waits
# SETTLE seconds. It then measures two loads of the same size (GETS random requests of TEST, get or set:
# set writes over the whole key space while the child saves, so copy-on-write shows; pipelined, bounded):
#   quiet   the load alone;
#   save    the same load with a BGSAVE started one second into it (the RDB goes to the scratch directory);
# and from INFO: the fork's duration (latest_fork_usec) and the child's copy-on-write (rdb_last_cow_size,
# the memory the child and the parent stopped sharing while the child wrote the RDB), with the parent's
# RSS and huge share before the save and the machine's MemAvailable drop at the save's worst moment.
# Regimes alternate over ROUNDS rounds (plain collapsed, collapsed plain, ...).
#
# Usage: bench/servers/redis_fork.sh   (root; HUGIFY=path/to/hugify, PORT=6403, KEYS=3000000, VALUE=100,
#                                       GETS=3000000, TEST=get, ROUNDS=3, SETTLE=2, COLLAPSE_ARGS="")
# Lines: "regime round rss_bytes huge_fraction fork_ms cow_bytes memavail_drop_bytes
#         quiet_rps quiet_p99_ms quiet_max_ms save_rps save_p99_ms save_max_ms load1"
# Starts only its own server on 127.0.0.1 in a temporary directory; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-6403}; KEYS=${KEYS:-3000000}; VALUE=${VALUE:-100}
GETS=${GETS:-3000000}; TEST=${TEST:-get}; ROUNDS=${ROUNDS:-3}; SETTLE=${SETTLE:-2}; COLLAPSE_ARGS=${COLLAPSE_ARGS:-}
source "$(dirname "$0")/lib.sh"
need_hugify; need_tools redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools python3=python3
server_scratch hugify-redis-fork

info() { redis-cli -p "$PORT" info | tr -d '\r' | awk -F: -v k="$1" '$1 == k {print $2}'; }
memavailable() { awk '/^MemAvailable:/ {printf "%d\n", $2 * 1024}' /proc/meminfo; }
get_load() { redis-benchmark -p "$PORT" -r "$KEYS" -n "$GETS" -P 16 -d "$VALUE" -t "$TEST" --csv | redis_csv_figures; }

round() { # REGIME ROUND
  local quiet save before low now rss_huge
  redis_start "$PORT" --dbfilename fork.rdb
  redis_populate "$PORT" "$KEYS" "$VALUE"
  if [ "$1" = collapsed ]; then
    # shellcheck disable=SC2086
    "$HUGIFY" collapse "$SERVER" $COLLAPSE_ARGS >/dev/null || echo "# collapse exit $?: some windows failed" >&2
  fi
  sleep "$SETTLE"
  rss_huge=$(heap_anon_of "$SERVER")
  quiet=$(get_load)
  get_load >"$DIR/save.csv" &
  local load=$!
  sleep 1
  before=$(memavailable); low=$before
  redis-cli -p "$PORT" bgsave >/dev/null
  while [ "$(info rdb_bgsave_in_progress)" != 0 ]; do
    now=$(memavailable); [ "$now" -lt "$low" ] && low=$now
    sleep 0.05
  done
  wait "$load"
  save=$(cat "$DIR/save.csv")
  echo "$1 $2 $rss_huge $(info latest_fork_usec | awk '{printf "%.3f", $1 / 1000}') $(info rdb_last_cow_size)" \
       "$((before - low)) $quiet $save $(cut -d' ' -f1 /proc/loadavg)"
  kill "$SERVER"; wait "$SERVER" || true; SERVER=
  rm -f "$DIR/fork.rdb"
}

echo "# $(date -u +%FT%TZ) load $(cat /proc/loadavg) KEYS=$KEYS VALUE=$VALUE TEST=$TEST COLLAPSE_ARGS=$COLLAPSE_ARGS"
alternate_rounds "$ROUNDS" "plain collapsed" round | tee "$DIR/lines"

python3 - "$DIR/lines" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    f = line.split()
    rows.setdefault(f[0], []).append([float(x) for x in f[2:]])
M = 2**20
med = lambda name, i: statistics.median(r[i] for r in rows[name])
span = lambda name, i: "%s-%s" % (min(r[i] for r in rows[name]), max(r[i] for r in rows[name]))
print("\nmedian over %d rounds (range)" % max(len(v) for v in rows.values()))
print("| regime | RSS | huge | fork | child's copy-on-write | MemAvailable drop | requests/s quiet / during save | p99 ms quiet / save | max ms quiet / save |")
print("|---|---|---|---|---|---|---|---|---|")
for name in sorted(rows):
    print("| %s | %.0f MiB | %.0f %% | %.2f ms (%s) | %.1f MiB | %.1f MiB | %.0f k / %.0f k | %.2f / %.2f | %.1f / %.1f |" % (
        name, med(name, 0) / M, 100 * med(name, 1), med(name, 2), span(name, 2), med(name, 3) / M, med(name, 4) / M,
        med(name, 5) / 1e3, med(name, 8) / 1e3, med(name, 6), med(name, 9), med(name, 7), med(name, 10)))
PY
