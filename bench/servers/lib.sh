# lib.sh - what the server benchmarks share (sourced, not run): a scratch directory with a clean-up that
# stops the benchmark's own server and agent on exit, Ctrl-C or failure, and the huge share of a process.

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

# heap_anon_of PID: "resident_bytes huge_fraction" of its heap + anon, from hugify inspect.
heap_anon_of() {
  "$HUGIFY" inspect "$1" --json | python3 -c '
import json, sys
p = json.load(sys.stdin)["processes"][0]["classes"]
resident = p["heap"]["resident_bytes"] + p["anon"]["resident_bytes"]
huge = p["heap"]["huge_bytes"] + p["anon"]["huge_bytes"]
print(resident, "%.3f" % (huge / resident if resident else 0))'
}
