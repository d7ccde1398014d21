#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/server_suites.sh - a server's whole own test suite, plain and with hugify, side by side (so both see
# the same load), and their pass/fail/skip sets compared (issue 34, item 1; docs/reliability.md has the
# runs). tests/integration/server_suites.cpp runs a chosen part of each in CI; this runs all of it.
#
#   redis       runtest from Debian's source package of the installed redis-server, against
#               /usr/bin/redis-server; the hugify side's servers start with `hugify env`'s environment
#               in a cgroup of their own, which an agent (interval 0.2 s, budget 50 %) keeps collapsing
#   postgresql  pg_regress's parallel schedule (postgresql-15's source package) against two temporary
#               clusters of the installed server on 127.0.0.1; the hugify side under `hugify env --text on`
#               in a cgroup the agent collapses
#   cpython     Debian's libpython3.11-testsuite, `python3.11 -m test -j2`, plain and under `hugify run`
#
# usage: bench/server_suites.sh redis|postgresql|cpython [OUT_DIR] [-- SUITE ARGS...]
# OUT_DIR (default: a new /tmp/hugify-suites-XXXXXX) keeps the logs, the per-test outcomes and the agent's
# metrics; everything else (clusters, trees, cgroups, the agent) is removed at the end. Exit 1 when the sets
# differ. Root (the agent, the cgroups, PostgreSQL's own user). Hours on a loaded 2-CPU machine: CPython's
# suite about 30 minutes, Redis's an hour.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

suite=${1:-}
case $suite in redis | postgresql | cpython) ;; *) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;; esac
shift
out=
if [ $# -gt 0 ] && [ "$1" != -- ]; then out=$1; shift; fi
[ "${1:-}" = -- ] && shift
[ "$(id -u)" -eq 0 ] || { say "run as root: the agent, the cgroups and PostgreSQL's own user need it"; exit 3; }
need_hugify
out=${out:-$(mktemp -d /tmp/hugify-suites-XXXXXX)}
mkdir -p "$out"
chmod 755 "$out"
work=$(mktemp -d "$out/work.XXXXXX")
chmod 755 "$work"
results=$HUGIFY_ROOT/tests/helpers/suite_results.py
cgroup_root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
cgroup=/hugify-suites-$suite-$$
agent_pid=

cleanup() {
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  [ -n "${pg_plain_port:-}" ] && pg_stop plain
  [ -n "${pg_hugify_port:-}" ] && pg_stop hugify
  for _ in $(seq 50); do  # the servers' last processes leave the cgroup as they end
    [ -d "$cgroup_root$cgroup" ] || break
    rmdir "$cgroup_root$cgroup" 2>/dev/null || sleep 0.2
  done
  rm -rf "$work"
}
trap cleanup EXIT

# The agent over the cgroup the hugify side's servers join (the hugify side only: the plain side's are not in it).
start_agent() {
  [ -n "$cgroup_root" ] || { say "no cgroup v2 hierarchy mounted: the agent cannot select the servers"; exit 3; }
  mkdir -p "$cgroup_root$cgroup"
  "$HUGIFY" agent --cgroup "$cgroup" --min-rss 0 --interval 0.2 --cpu-budget 50 --state-file none \
    --metrics-file "$out/agent.prom" > "$out/agent.log" 2>&1 &
  agent_pid=$!
}

# ---- Redis: runtest has no option for the server's path; it runs src/redis-server of its tree ----
redis_tree() {  # DIR [ENV_FILE]
  local dir=$1 env=${2:-} program
  mkdir -p "$dir/src"
  cp -a "$source/runtest" "$source/tests" "$dir/"
  for program in redis-cli redis-benchmark; do ln -s "/usr/bin/$program" "$dir/src/$program"; done
  for program in redis-server redis-check-aof redis-check-rdb; do
    if [ -z "$env" ]; then ln -s "/usr/bin/$program" "$dir/src/$program"; continue; fi
    printf '#!/bin/sh\necho $$ > %s/cgroup.procs\n. %s\nexec /usr/bin/%s "$@"\n' "$cgroup_root$cgroup" "$env" \
      "$program" > "$dir/src/$program"
    chmod 755 "$dir/src/$program"
  done
}
run_redis() {
  need_tools tclsh8.6=tcl redis-server=redis-server redis-cli=redis-tools
  source=$("$HUGIFY_ROOT/scripts/suite-source" redis) || exit 3
  "$HUGIFY" env > "$work/hugify.env" 2>/dev/null
  redis_tree "$work/plain"
  redis_tree "$work/hugify" "$work/hugify.env"
  start_agent
  (cd "$work/plain" && env --default-signal=INT ./runtest --clients 4 --baseport 23111 --portcount 2000 "$@" \
    > "$out/plain.log" 2>&1) &
  local plain=$!
  (cd "$work/hugify" && env --default-signal=INT ./runtest --clients 4 --baseport 28111 --portcount 2000 "$@" \
    > "$out/hugify.log" 2>&1) || true
  wait "$plain" || true
  format=redis
}

# ---- PostgreSQL: two temporary clusters, user postgres ----
pg_bin=/usr/lib/postgresql/15/bin
pg_start() {  # SIDE [ENV_FILE]
  local side=$1 env=${2:-} dir=$work/pg-$1 port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$dir" && chown postgres: "$dir"
  setpriv --reuid=postgres --regid=postgres --init-groups -- "$pg_bin/initdb" -D "$dir/data" -A trust -U postgres \
    --no-locale -E UTF8 --no-sync > "$dir/initdb.log"
  (
    [ -n "$env" ] && echo $BASHPID > "$cgroup_root$cgroup/cgroup.procs" && . "$env"
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$pg_bin/postgres" -D "$dir/data" -p "$port" \
      -c listen_addresses=127.0.0.1 -k "$dir"
  ) > "$dir/server.log" 2>&1 &
  for _ in $(seq 120); do "$pg_bin/pg_isready" -h 127.0.0.1 -p "$port" -q && break; sleep 1; done
  printf -v "pg_${side}_port" %s "$port"
}
pg_stop() { setpriv --reuid=postgres --regid=postgres -- "$pg_bin/pg_ctl" -D "$work/pg-$1/data" stop -m fast >/dev/null 2>&1 || true; }
pg_regress_side() {  # SIDE
  local dir=$work/pg-$1 port_var=pg_$1_port
  (cd "$dir" && setpriv --reuid=postgres --regid=postgres --init-groups -- \
    /usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress --inputdir="$regress" --outputdir="$dir" \
    --bindir="$pg_bin" --dlpath="$work/lib" --schedule="$regress/parallel_schedule" --max-concurrent-tests=20 \
    --host=127.0.0.1 --port="${!port_var}" "${@:2}" > "$out/$1.log" 2>&1) || true
  cp "$dir/regression.diffs" "$out/$1.diffs" 2>/dev/null || true
}
run_postgresql() {
  need_tools "$pg_bin/postgres=postgresql-15" pg_config=postgresql-server-dev-15 setpriv=util-linux
  source=$("$HUGIFY_ROOT/scripts/suite-source" postgresql-15) || exit 3
  regress=$source/src/test/regress
  mkdir -p "$work/lib"  # regress.so, built against the server's headers, beside the autoinc and refint it loads
  cp "$regress/regress.c" "$work/lib/"
  printf 'MODULES = regress\nPG_CONFIG = pg_config\nPGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n' > "$work/lib/Makefile"
  make -C "$work/lib" -s with_llvm=no
  ln -s /usr/lib/postgresql/15/lib/autoinc.so /usr/lib/postgresql/15/lib/refint.so "$work/lib/"
  "$HUGIFY" env --text on > "$work/hugify.env" 2>/dev/null
  start_agent
  pg_start plain
  pg_start hugify "$work/hugify.env"
  pg_regress_side plain "$@" &
  local plain=$!
  pg_regress_side hugify "$@"
  wait "$plain"
  format=pg_regress
}

# ---- CPython: Debian's own suite, `hugify run` ----
run_cpython() {
  [ -d /usr/lib/python3.11/test/libregrtest ] || need_tools /usr/lib/python3.11/test/libregrtest/main.py=libpython3.11-testsuite
  mkdir -p "$work/plain" "$work/hugify"
  (cd "$work/plain" && env --default-signal=INT /usr/bin/python3.11 -m test -j2 --timeout 1200 \
    --junit-xml "$out/plain.xml" "$@" > "$out/plain.log" 2>&1) &
  local plain=$!
  (cd "$work/hugify" && env --default-signal=INT "$HUGIFY" run -- /usr/bin/python3.11 -m test -j2 --timeout 1200 \
    --junit-xml "$out/hugify.xml" "$@" > "$out/hugify.log" 2>&1) || true
  wait "$plain" || true
  format=junit
}

say "$suite: plain and hugify side by side; logs in $out"
"run_$suite" "$@"
for side in plain hugify; do
  file=$out/$side.log
  [ $format = junit ] && file=$out/$side.xml
  python3 "$results" $format "$file" > "$out/$side.results"
  echo "$side: $(python3 "$results" $format "$file" --counts)"
done
grep -q '^passed' "$out/plain.results" || { say "the plain run passed nothing: see $out/plain.log"; exit 1; }
if diff "$out/plain.results" "$out/hugify.results" > "$out/difference"; then
  echo "the same pass/fail/skip set"
else
  echo "they differ (< plain, > hugify):"
  grep '^[<>]' "$out/difference"
  exit 1
fi
