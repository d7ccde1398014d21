#!/bin/bash
# SPDX-License-Identifier: MIT
# The PostgreSQL recipes of docs/servers.md: shared_buffers=1GB, pgbench -S, both roads to huge pages.
#   road 1: shmem_enabled=advise (set here, restored on exit) and the server under `hugify run`
#   road 2: huge_pages=on from the 2 MiB pool (PostgreSQL's own need: postgres -C
#           shared_memory_size_in_huge_pages; the pool must have that many free pages: hugify pool set 2M=+N)
# Usage: bench/servers/postgres.sh   (root; HUGIFY=path/to/hugify, PORT=15433, SCALE=64)
# Runs its own postgres as user postgres in a temporary data directory on 127.0.0.1; leaves none behind.
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-15433}; SCALE=${SCALE:-64}
PG=${PG:-/usr/lib/postgresql/15/bin}
source "$(dirname "$0")/../../scripts/lib.sh"
need_hugify; need_tools "$PG/postgres=postgresql" setpriv=util-linux
KNOB=/sys/kernel/mm/transparent_hugepage/shmem_enabled
ORIGINAL=$(sed 's/.*\[\(.*\)\].*/\1/' "$KNOB")
DIR=$(mktemp -d /var/tmp/hugify-postgres.XXXXXX); chown postgres "$DIR"
AS_PG="setpriv --reuid=postgres --regid=postgres --init-groups --"
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill -INT "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  echo "$ORIGINAL" > "$KNOB"; rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
$AS_PG "$PG/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
mkdir "$DIR/sock"; chown postgres "$DIR/sock"
SERVER="$PG/postgres -D $DIR/data -c shared_buffers=1GB -c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR/sock"
$AS_PG $SERVER -c huge_pages=off > "$DIR/init.log" 2>&1 &
SERVER_PID=$!
until "$PG/pg_isready" -h 127.0.0.1 -p "$PORT" -q; do sleep 0.2; done
"$PG/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -i -s "$SCALE" -q postgres >/dev/null 2>&1
kill -INT "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=
COMMON=(--runs 6 --ready "$PG/pg_isready -h 127.0.0.1 -p $PORT -q" --ready-timeout 120 --stop-timeout 30
        --load "$PG/pgbench -h 127.0.0.1 -p $PORT -U postgres -S -T 20 -c 2 -j 2 postgres" --score 'tps = ([0-9.]+)')
echo "== road 1: shmem_enabled=advise, the server under hugify run"
echo advise > "$KNOB"
"$HUGIFY" check "${COMMON[@]}" --configs heap -- $AS_PG $SERVER -c huge_pages=off
echo "$ORIGINAL" > "$KNOB"
echo "== road 2: huge_pages=on (postgres asks for $($AS_PG $SERVER -C shared_memory_size_in_huge_pages) pages)"
"$HUGIFY" check "${COMMON[@]}" --configs hugetlb -- sh -c \
  "exec $AS_PG $SERVER -c huge_pages=\$(test -n \"\$HUGIFY_HEAP\" && echo on || echo off)"
