# SPDX-License-Identifier: MIT
# lib.sh - what the server benchmarks share (sourced, not run): a scratch directory with a clean-up that
# stops the benchmark's own server and agent on exit, Ctrl-C or failure, and the huge share of a process.
# It also brings scripts/lib.sh (need_tools, need_hugify: every script checks or installs its own tools).
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

# server_scratch NAME: DIR=/var/tmp/NAME.XXXXXX, removed on exit with $SERVER and $AGENT stopped.
server_scratch() {
  DIR=$(mktemp -d "/var/tmp/$1.XXXXXX")
  SERVER= AGENT=
  trap server_cleanup EXIT INT TERM
}
server_cleanup() {
  [ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  rm -rf "$DIR"
}

# heap_anon_of PID [CLASS...]: "resident_bytes huge_fraction" of its heap + anon (or of the CLASSes of
# hugify inspect: code heap anon stack shm file).
heap_anon_of() {
  local pid=$1; shift
  "$HUGIFY" inspect "$pid" --json | python3 -c '
import json, sys
p = json.load(sys.stdin)["processes"][0]["classes"]
classes = sys.argv[1:] or ["heap", "anon"]
resident = sum(p[c]["resident_bytes"] for c in classes)
huge = sum(p[c]["huge_bytes"] for c in classes)
print(resident, "%.3f" % (huge / resident if resident else 0))' "$@"
}

# redis_start PORT [SERVER OPTIONS...]: a redis-server on 127.0.0.1 in $DIR, as $SERVER, answering PING.
redis_start() {
  local port=$1; shift
  # its output goes to its log: a server that held the benchmark's pipe open would keep `| tee` waiting
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
    --logfile "$DIR/redis.log" "$@" </dev/null >/dev/null 2>&1 &
  SERVER=$!
  until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
}

# redis_populate PORT KEYS VALUE_BYTES: KEYS keys named as redis-benchmark -r draws them (key:%012d).
redis_populate() {
  awk -v keys="$2" -v size="$3" 'BEGIN { v = sprintf("%*s", size, ""); gsub(/ /, "x", v)
    for (i = 0; i < keys; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%s\r\n", i, size, v }' |
    redis-cli -p "$1" --pipe >/dev/null
}

# redis-benchmark --csv on stdin -> "rps p99_ms max_ms" of its last test
redis_csv_figures() { python3 -c 'import csv, sys
row = list(csv.DictReader(sys.stdin))[-1]
print(row["rps"], row["p99_latency_ms"], row["max_latency_ms"])'; }

# alternate_rounds ROUNDS "A B C" FUNCTION: FUNCTION NAME ROUND for every name, ROUNDS times, in the given
# order on odd rounds and the reverse on even ones, so that what drifts during a run weighs on each alike.
alternate_rounds() {
  local round name order
  for round in $(seq 1 "$1"); do
    order=$2
    if [ $((round % 2)) = 0 ]; then order=$(echo "$2" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for name in $order; do "$3" "$name" "$round"; done
  done
}
