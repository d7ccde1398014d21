#!/bin/bash
# SPDX-License-Identifier: MIT
# The Redis recipe of docs/servers.md: 5 M keys from an RDB file, GET throughput under `hugify check --load`.
# Usage: bench/servers/redis.sh [EXTRA CHECK OPTIONS...]   (HUGIFY=path/to/hugify, PORT=16390)
# Starts only its own redis-server instances on 127.0.0.1 with a temporary directory; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-16390}; KEYS=${KEYS:-5000000}
source "$(dirname "$0")/lib.sh"
need_hugify; need_tools redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools python3=python3
server_scratch hugify-redis
# The data set, once: the key names redis-benchmark -r draws from (key:%012d), saved as an RDB file.
redis_start "$PORT" --dbfilename redis.rdb
redis_populate "$PORT" "$KEYS" 3
redis-cli -p "$PORT" save >/dev/null
kill "$SERVER"; wait "$SERVER" || true; SERVER=
"$HUGIFY" check --runs 6 --configs heap,jemalloc "$@" \
  --ready "redis-cli -p $PORT ping | grep -q PONG" --ready-timeout 180 \
  --load "redis-benchmark -p $PORT -t get -r $KEYS -n 2000000 -P 32 -q" \
  --score 'GET: ([0-9.]+) requests per second' \
  -- redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" --dbfilename redis.rdb
