#!/bin/bash
# The Redis recipe of docs/servers.md: 5 M keys from an RDB file, GET throughput under `hugify check --load`.
# Usage: bench/servers/redis.sh [EXTRA CHECK OPTIONS...]   (HUGIFY=path/to/hugify, PORT=16390)
# Starts only its own redis-server instances on 127.0.0.1 with a temporary directory; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-16390}; KEYS=${KEYS:-5000000}
DIR=$(mktemp -d /var/tmp/hugify-redis.XXXXXX)
SERVER=
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT INT TERM
# The data set, once: the key names redis-benchmark -r draws from (key:%012d), saved as an RDB file.
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" --dbfilename redis.rdb \
  --logfile "$DIR/populate.log" &
SERVER=$!
until redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$3\r\nxxx\r\n", i }' |
  redis-cli -p "$PORT" --pipe >/dev/null
redis-cli -p "$PORT" save >/dev/null
kill "$SERVER"; wait "$SERVER" || true; SERVER=
"$HUGIFY" check --runs 6 --configs heap,jemalloc "$@" \
  --ready "redis-cli -p $PORT ping | grep -q PONG" --ready-timeout 180 \
  --load "redis-benchmark -p $PORT -t get -r $KEYS -n 2000000 -P 32 -q" \
  --score 'GET: ([0-9.]+) requests per second' \
  -- redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" --dbfilename redis.rdb
