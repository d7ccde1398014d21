#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# go_collapse.sh - what `hugify collapse` and the agent do for a Go program, whose heap `hugify run` cannot
# reach when it is statically linked (docs/runtimes.md, Go). map_lookup.go builds a map[uint64]uint64, then
# waits; each variant acts on it at that point, the share of its data on huge pages is read with `hugify
# inspect`, then the timed random lookups run. Variants, alternated round by round (order rotated):
#   plain     the static program (CGO_ENABLED=0), left alone
#   collapse  the same, `hugify collapse PID` (gentle pace) once the map is built
#   agent     the same, `hugify agent --comm map_lookup --once` once the map is built
#   run       the program built with cgo, under `hugify run` (the runtime maps through the C library's mmap)
# Prints one line per run and the medians per variant. Run it under the machine's timing lock:
#   flock /work/notes/timing.lock bench/runtimes/go_collapse.sh --rounds 3
# Options: --rounds N (3), --entries N (20000000), --lookups N (20000000), --variants "plain collapse agent run".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HUGIFY=${HUGIFY:-$here/../../build/bin/hugify}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
rounds=3 entries=20000000 lookups=20000000 variants="plain collapse agent run"
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --entries) entries=$2; shift 2 ;;
    --lookups) lookups=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--entries N] [--lookups N] [--variants LIST]" >&2; exit 2 ;;
  esac
done

DIR=$(mktemp -d /var/tmp/go_collapse.XXXXXX)
PROGRAM=
cleanup() { [ -n "$PROGRAM" ] && kill "$PROGRAM" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT INT TERM

# The standard library only: no network. A cache of its own, so nothing of the user's Go setup is needed.
export GOCACHE=${GOCACHE:-/tmp/hugify-bench-go/cache} GOPATH=${GOPATH:-/tmp/hugify-bench-go/path}
export GOTOOLCHAIN=local GOTELEMETRY=off GO111MODULE=off
CGO_ENABLED=0 "$GO" build -o "$DIR/map_lookup" "$here/map_lookup.go"
CGO_ENABLED=1 "$GO" build -ldflags=-linkmode=external -o "$DIR/map_lookup_cgo" "$here/map_lookup.go"

# shellcheck source=../servers/lib.sh
. "$here/../servers/lib.sh"
need_hugify; need_tools "$GO=golang-go" cc=gcc python3=python3
# data_share PID: "resident_MiB huge_fraction" of its anonymous memory (Go's heap) and heap.
data_share() { heap_anon_of "$1" | awk '{printf "%.0f %s\n", $1 / 1048576, $2}'; }

# one VARIANT: prints "VARIANT build_s action_s resident_MiB huge_fraction lookup_s"
one() {
  local variant=$1 command
  case $variant in
    run) command=("$HUGIFY" run -- "$DIR/map_lookup_cgo") ;;
    *) command=("$DIR/map_lookup") ;;
  esac
  rm -f "$DIR/in" "$DIR/out"
  mkfifo "$DIR/in"
  "${command[@]}" -entries "$entries" -lookups "$lookups" -wait <"$DIR/in" >"$DIR/out" 2>"$DIR/err" &
  PROGRAM=$!
  exec 3>"$DIR/in"
  until grep -qs "^ready " "$DIR/out"; do
    kill -0 "$PROGRAM" 2>/dev/null || { cat "$DIR/err" >&2; exit 1; }
    sleep 0.1
  done
  local pid started action=0
  pid=$(awk '/^ready /{print $2}' "$DIR/out")
  started=$(date +%s.%N)
  case $variant in
    collapse) "$HUGIFY" collapse "$pid" >"$DIR/action.log" ;;
    agent) "$HUGIFY" agent --comm map_lookup --once >"$DIR/action.log" ;;
  esac
  action=$(echo "$(date +%s.%N) - $started" | bc)
  local share
  share=$(data_share "$pid")
  echo >&3
  exec 3>&-
  wait "$PROGRAM"
  PROGRAM=
  printf '%-8s %6.2f %6.2f %s %6.3f\n' "$variant" "$(awk '/^build_seconds/{print $2}' "$DIR/out")" "$action" \
    "$share" "$(awk '/^lookup_seconds/{print $2}' "$DIR/out")"
}

echo "# $(date -u +%FT%TZ) $(uname -r) $("$GO" version); entries $entries, lookups $lookups; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# variant  build_s action_s data_MiB huge_fraction lookup_s"
set -- $variants
count=$#
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < count; i++)); do
    k=$(( (i + r) % count + 1 ))
    one "${!k}"
  done | tee -a "$DIR/results"
done
echo "# loadavg at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians: variant build_s action_s huge_fraction lookup_s (lookup vs plain)"
python3 - "$DIR/results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    v, build, action, mib, share, lookup = line.split()
    rows.setdefault(v, []).append((float(build), float(action), float(share), float(lookup)))
plain = statistics.median(r[3] for r in rows["plain"]) if "plain" in rows else None
for v, r in rows.items():
    m = [statistics.median(x[i] for x in r) for i in range(4)]
    ratio = " (%.2fx plain's speed)" % (plain / m[3]) if plain else ""
    print("%-8s %6.2f %6.2f %6.3f %6.3f%s  n=%d" % (v, m[0], m[1], m[2], m[3], ratio, len(r)))
EOF
