#!/bin/bash
# SPDX-License-Identifier: MIT
# The Memcached recipe of docs/servers.md.   Usage: bench/servers/memcached.sh (HUGIFY=..., PORT=17212)
set -euo pipefail
HUGIFY=${HUGIFY:-hugify}; PORT=${PORT:-17212}
source "$(dirname "$0")/../../scripts/lib.sh"
need_hugify; need_tools memcached=memcached memcaslap=libmemcached-tools
"$HUGIFY" check --runs 6 --configs heap "$@" --ready-port "$PORT" \
  --load "memcaslap -s 127.0.0.1:$PORT -t 15s -T 2 -c 32 -w 100k -X 100" --score 'TPS: ([0-9]+)' \
  -- memcached -p "$PORT" -l 127.0.0.1 -m 1024 -U 0 -t 2 -u nobody
