#!/bin/bash
# SPDX-License-Identifier: MIT
# Issue 19: the bundled probe's own worst pause while hugify collapses it, against one window's collapse.
# live_lookup (bench/live_lookup.c) times every operation of 64 dependent lookups in a SIZE array on 4 KiB
# pages and prints each second's max and p99.9; after BEFORE seconds `hugify collapse PID --pace P` runs on
# it. Per trial: the probe's worst operation before the collapse, during it, and hugify's own report (its
# longest inferred pause, its longest call, and the median CPU of a one-window call: "one window's
# collapse time"). Paces alternate over ROUNDS rounds.
# Usage: bench/collapse_probe.sh   (root; HUGIFY=build/bin/hugify LIVE_LOOKUP=build/bench/live_lookup
#        SIZE=512M BEFORE=3 AFTER=2 ROUNDS=3 PACES="gentle full")
set -euo pipefail
HUGIFY=${HUGIFY:-build/bin/hugify}; LIVE_LOOKUP=${LIVE_LOOKUP:-build/bench/live_lookup}
source "$(dirname "$0")/../../scripts/lib.sh"
need_hugify; need_tools "$LIVE_LOOKUP=hugify's bench programs (cmake --build build)" python3=python3
SIZE=${SIZE:-512M}; BEFORE=${BEFORE:-3}; AFTER=${AFTER:-2}; ROUNDS=${ROUNDS:-3}; PACES=${PACES:-"gentle full"}
DIR=$(mktemp -d /var/tmp/hugify-probe.XXXXXX)
PROBE=
cleanup() { [ -n "$PROBE" ] && kill "$PROBE" 2>/dev/null && wait "$PROBE" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT INT TERM

trial() { # PACE ROUND
  "$LIVE_LOOKUP" --size "$SIZE" >"$DIR/probe" &
  PROBE=$!
  until grep -q '^second 1:' "$DIR/probe" 2>/dev/null; do sleep 0.1; done # filled, and timing
  sleep "$BEFORE"
  local s0 s1
  s0=$(grep -c '^second' "$DIR/probe")
  "$HUGIFY" collapse "$PROBE" --pace "$1" --json="$DIR/report.json" >/dev/null
  s1=$(grep -c '^second' "$DIR/probe")
  sleep "$AFTER"
  kill "$PROBE"; wait "$PROBE" 2>/dev/null || true; PROBE=
  # seconds 2..s0: before (the first second holds the start); s0+1..s1+1: the seconds the collapse touched
  local before during
  before=$(awk -v s0="$s0" '/^second/ { n = $2 + 0; if (n >= 2 && n <= s0) { v = $(NF - 6) + 0; if (v > m) m = v } } END { print m }' "$DIR/probe")
  during=$(awk -v s0="$s0" -v s1="$s1" '/^second/ { n = $2 + 0; if (n > s0 && n <= s1 + 1) { v = $(NF - 6) + 0; if (v > m) m = v } } END { print m }' "$DIR/probe")
  printf '%-6s r%s probe worst op: before %s us, during %s us | %s | load %s\n' "$1" "$2" "$before" "$during" \
    "$(jq -r '"calls=\(.calls) wall_s=\(.seconds + .gap_seconds | .*1000|round/1000) cpu_s=\(.cpu_seconds*1000|round/1000) longest_call_ms=\(.longest_call_seconds*1e5|round/100) longest_pause_ms=\(.pause.longest_seconds*1e5|round/100) p99_pause_ms=\(.pause.p99_seconds*1e5|round/100) cpu_per_call_ms=\(.cpu_seconds/.calls*1e5|round/100)"' "$DIR/report.json")" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "# $(date -u +%FT%TZ) size=$SIZE probe=$LIVE_LOOKUP hugify=$HUGIFY"
for round in $(seq 1 "$ROUNDS"); do
  order=$PACES
  [ $((round % 2)) = 0 ] && order=$(echo "$PACES" | tr ' ' '\n' | tac | tr '\n' ' ')
  for pace in $order; do trial "$pace" "$round"; done
done
