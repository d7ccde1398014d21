#!/bin/bash
# SPDX-License-Identifier: MIT
# static_outside.sh - what `hugify run` gives a static program, from outside (docs/run.md, "Static
# programs"): a static Go program with a big map (bench/runtimes/map_lookup.go, built with Debian's Go,
# golang-go) and a musl -static program (tests/helpers/static_lookup.c, built with musl-gcc -static), each
# filling its heap, then doing a fixed number of random lookups (sized to take 10 s or more). For each:
# plain (its wall time) and under `hugify run --report`, the same output (map_lookup's two timing lines
# aside) and exit status, the share of its anonymous memory huge at its peak and at the end and what the
# collapse cost (from run's report); then `hugify check`'s verdict on it (plain against outside).
#
#   bench/static_outside.sh [--help] BUILD_DIR [GO_LOOKUPS=50000000] [GO_ENTRIES=20000000]
#                           [MUSL_LOOKUPS_MILLIONS=80] [MUSL_MIB=1024] [CHECK_RUNS=6]
#
# Needs root (process_madvise(MADV_COLLAPSE) of another process needs CAP_SYS_NICE), Go (golang-go) and
# musl-gcc (musl-tools). CHECK_RUNS=0 leaves check out. Environment: GO (default /usr/bin/go, Debian's; Go
# 1.19 advises its heap MADV_HUGEPAGE, Go 1.21.1 and later do not), ONLY ("go", "musl"; default both).
set -euo pipefail
if [ "${1:-}" = --help ] || [ $# -lt 1 ]; then
  sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = --help ] && exit 0 || exit 2
fi
build=$1 go_lookups=${2:-50000000} entries=${3:-20000000} millions=${4:-80} mib=${5:-1024} runs=${6:-6}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/lib.sh"
HUGIFY=$build/bin/hugify
need_hugify
GO=${GO:-/usr/bin/go} ONLY=${ONLY:-go musl}
need_tools "$GO=golang-go" musl-gcc=musl-tools python3=python3
[ "$(id -u)" -eq 0 ] || { say "needs root: collapsing another process needs CAP_SYS_NICE"; exit 3; }
work=$(mktemp -d /tmp/static_outside.XXXXXX)
trap 'rm -rf "$work"' EXIT

export GOCACHE=/tmp/hugify-bench-go/cache GOPATH=/tmp/hugify-bench-go/path GO111MODULE=off GOTOOLCHAIN=local
say "Go: $("$GO" version)"
CGO_ENABLED=0 "$GO" build -o "$work/map_lookup" "$here/runtimes/map_lookup.go"
musl-gcc -O2 -static -o "$work/musl_static_lookup" "$here/../tests/helpers/static_lookup.c"

# one NAME CMD...: plain, then under hugify run --report; the comparison and the report's figures
one() {
  local name=$1; shift
  local plain_status=0 run_status=0
  local started=$EPOCHREALTIME
  "$@" > "$work/$name.plain.out" 2> "$work/$name.plain.err" || plain_status=$?
  local wall; wall=$(python3 -c "print('%.1f' % ($EPOCHREALTIME - $started))")
  "$HUGIFY" run --report "$work/$name.json" -- "$@" > "$work/$name.run.out" 2> "$work/$name.run.err" || run_status=$?
  local same=no # map_lookup's build_seconds and lookup_seconds are timings: the rest must be the same
  cmp -s <(grep -v _seconds "$work/$name.plain.out") <(grep -v _seconds "$work/$name.run.out") &&
    [ "$plain_status" -eq "$run_status" ] && same=yes
  say "$name: plain ran ${wall} s: $(tr '\n' ' ' < "$work/$name.plain.out")"
  python3 - "$work/$name.json" "$name" "$same" "$plain_status" "$run_status" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
o = doc["outside"]
def share(sample):
    if not sample: return "-", "-"
    a = sample["allocated"]
    return "%.0f MiB" % (a["resident_bytes"] / 2**20), "%.1f %%" % (100 * (a["huge_fraction"] or 0))
peak, last = share(o["peak"]), share(o["last"])
print("%s: same output and exit status: %s (%s, %s)" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]))
print("  heap+anon at its peak %s, %s huge (at %.1f s); at the end %s, %s huge" %
      (peak[0], peak[1], o["peak"]["seconds"] if o["peak"] else float("nan"), last[0], last[1]))
print("  collapsed %.0f MiB in %d passes (%d plans), bloat %.1f MiB, guard left %.1f MiB sparse; CPU %.2f s "
      "(collapses %.2f s), longest pause %.1f ms, p99 %.1f ms over %d calls, budget stops %d" %
      (o["collapsed_bytes"] / 2**20, o["passes"], o["plans"], o["bloat_bytes"] / 2**20,
       o["cut_bytes"]["sparse"] / 2**20, o["cpu_seconds"], o["collapse_cpu_seconds"],
       1e3 * o["pause"]["longest_seconds"], 1e3 * o["pause"]["p99_seconds"], o["pause"]["count"], o["budget_stops"]))
PY
}

# verdict NAME CMD...: hugify check, plain against outside
verdict() {
  local name=$1; shift
  "$HUGIFY" check --runs "$runs" --json -- "$@" > "$work/$name.check.json" 2> "$work/$name.check.err" ||
    { tail -5 "$work/$name.check.err"; return 0; }
  python3 - "$work/$name.check.json" "$name" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
configs = {c["name"]: c for c in doc["configs"]}
o = configs.get("outside", {})
ratio = o.get("ratio") or o.get("cpu_ratio") or {}
cov = o.get("coverage") or {}
def times(config):
    w, c = config.get("wall_ratio") or {}, config.get("cpu_ratio") or {}
    return "wall %.2fx [%.2f, %.2f], CPU %.2fx [%.2f, %.2f]" % (w.get("estimate", 0), w.get("low", 0), w.get("high", 0),
                                                              c.get("estimate", 0), c.get("low", 0), c.get("high", 0))
print("  check (%d rounds, judged by %s): %s (%s); outside against plain: %s; data huge %.1f %% at the peak" %
      (doc["rounds"], doc["metric"], doc["verdict"]["outcome"], doc["verdict"]["config"], times(o),
       100 * (cov.get("data_huge_fraction") or 0)))
PY
}

say "THP $(cat /sys/kernel/mm/transparent_hugepage/enabled); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for program in $ONLY; do
  case $program in
    go) command=("$work/map_lookup" -entries "$entries" -lookups "$go_lookups") ;;
    musl) command=("$work/musl_static_lookup" "$mib" 0 0 "lookups=$millions") ;;
    *) say "ONLY: go or musl, not $program"; exit 2 ;;
  esac
  one "$program" "${command[@]}"
  if [ "$runs" -gt 0 ]; then verdict "$program" "${command[@]}"; fi
done
