#!/bin/bash
# SPDX-License-Identifier: MIT
# container_agent.sh - hugify in a container collapsing a process outside it, with the least privilege.
# The image is built here, not pulled: a root holding the contents of scripts/package's hugify and
# libhugify .debs plus the shared libraries the CLI links (copied from this host), imported with
# `podman import`. A target (tests/agent_target --dense 64M, run as user nobody as a service would be) is
# collapsed once by the host's hugify and once from the container with `--pid=host` and each capability
# set below; bytes collapsed, bloat and the longest pause are printed side by side.
#
#   bench/container_agent.sh [BUILD_DIR=build] [PACKAGE_DIR=build-package]
#
# Needs root (rootful podman). runc, not crun: Debian 12's crun 1.8 refuses a hybrid cgroup hierarchy
# whose cgroup2 has a controller ("cgroups in hybrid mode not supported"), as on a Firecracker guest whose
# /sys/fs/cgroup/unified holds hugetlb. --ulimit: without CAP_SYS_RESOURCE (a guest's bounding set may
# lack it) podman's default limits (nofile 1048576, nproc) cannot be set ("setrlimit ... Operation not
# permitted"), so the container gets this shell's open files limit and 4096 processes.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
build=${1:-$HUGIFY_ROOT/build} packages=${2:-$HUGIFY_ROOT/build-package}
[ "$(id -u)" -eq 0 ] || { say "needs root (rootful podman)"; exit 3; }
install_dependencies libmicrohttpd12
need_tools curl=curl podman=podman runc=runc dpkg-deb=dpkg-deb setpriv=util-linux /usr/bin/python3=python3 \
  "$build/bin/hugify=hugify (cmake --build $build)" "$build/tests/agent_target=hugify's test helpers (cmake --build $build)"
compgen -G "$packages/packages/hugify_*.deb" >/dev/null || "$HUGIFY_ROOT/scripts/package" "$packages"

image=localhost/hugify-bench:$$ tmp=$(mktemp -d) target=
cleanup() {
  [ -n "$target" ] && kill "$target" 2>/dev/null || true
  podman --runtime runc rm -f -t 2 "hugify-bench-$$" >/dev/null 2>&1 || true
  podman rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

say "image: the hugify .debs' contents and the CLI's libraries, podman import (no registry)"
root=$tmp/root
mkdir -p "$root"/{proc,sys,dev,tmp,etc,run}
for deb in "$packages"/packages/hugify_*.deb "$packages"/packages/libhugify0.3_*.deb; do dpkg-deb -x "$deb" "$root"; done
# libmicrohttpd (Recommends; dlopen'ed for --listen) and what it links.
httpd=$(ldconfig -p | grep -o '/.*/libmicrohttpd\.so\.12$' | head -1)
[ -n "$httpd" ] || { say "missing: libmicrohttpd.so.12 (apt-get install libmicrohttpd12)"; exit 3; }
for lib in $( (ldd "$root/usr/bin/hugify"; ldd "$httpd") | grep -o '/[^ ]* (' | tr -d ' (' | sort -u) "$httpd"; do
  mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
done
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
tar -C "$root" -cf "$tmp/root.tar" .
podman import --quiet --change 'ENTRYPOINT ["/usr/bin/hugify"]' "$tmp/root.tar" "$image" >/dev/null
printf '  %s: %s MiB\n' "$image" "$(( $(stat -c %s "$tmp/root.tar") / 1048576 ))"

# start_target [busy]: agent_target --dense 64M (idle), or with busy a python3 process that keeps writing
# every page of its 66 MiB anonymous map (32 aligned 2 MiB windows), so that the collapse's pauses are
# felt; as user nobody. Sets $target.
busy_target='import mmap, os
m = mmap.mmap(-1, 66 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, len(m), 4096): m[i] = 1
print("ready", os.getpid(), flush=True)
while True:
    for i in range(0, len(m), 4096): m[i] = (m[i] + 1) & 255'
start_target() {
  local command=("$build/tests/agent_target" --dense 64M)
  [ "${1:-}" = busy ] && command=(/usr/bin/python3 -c "$busy_target")   # Debian's: nobody may run it
  coproc TARGET { exec setpriv --reuid=65534 --regid=65534 --clear-groups "${command[@]}"; }
  local line
  while read -r line <&"${TARGET[0]}"; do [[ $line == ready* ]] && break; done
  target=${line#ready }
  [[ $target =~ ^[0-9]+$ ]] || { say "the target did not start"; exit 1; }
}
stop_target() { kill "$target"; wait "$target" 2>/dev/null || true; target=; }
# figures FILE: bytes collapsed, bloat, longest pause of a `collapse --json` or `agent --once --json` result.
figures() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
if d["schema"].startswith("hugify.collapse"):
    t = d["total"]; done, bloat = t["huge_after_bytes"] - t["huge_before_bytes"], t["bloat_bytes"]
    extra = "%d failed ranges" % len(d["failures"])
else:
    done, bloat, extra = d["collapsed_bytes"], d["bloat_bytes"], "%d passes" % d["passes"]
print("collapsed %d MiB, bloat %d KiB, longest pause %.2f ms, %s" % (
  done >> 20, bloat >> 10, 1000 * d["pause"]["longest_seconds"], extra))' "$1"
}
limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
least=(SYS_NICE SYS_PTRACE DAC_READ_SEARCH)
# in_container OUT "CAPS" HUGIFY-ARGS...: hugify from the container, --pid=host, only CAPS; its JSON to OUT.
in_container() {
  local out=$1 caps=() cap; shift
  for cap in $1; do caps+=(--cap-add "$cap"); done
  shift
  podman --runtime runc run --rm --pid=host --network=none --read-only --cap-drop=all "${caps[@]}" \
    "${limits[@]}" -v "$tmp:/out" "$image" "$@" --json=/out/"$out" > "$tmp/$out.text" 2>&1
}
collapse_args() { echo "collapse $target"; }
agent_args() { echo "agent --once --pid $target --min-rss 0"; }

# Native: the lock for the whole measurement (THP state and the machine's other native runs).
exec 9>/tmp/hugify-native.lock
flock 9
say "least capabilities: collapse from the container with each set (podman run --cap-drop=all --cap-add ...)"
for caps in "" "SYS_NICE" "SYS_PTRACE" "SYS_NICE SYS_PTRACE" "SYS_NICE DAC_READ_SEARCH" \
    "SYS_PTRACE DAC_READ_SEARCH" "${least[*]}"; do
  start_target
  # shellcheck disable=SC2046
  if in_container c.json "$caps" $(collapse_args); then
    printf '  %-40s %s\n' "${caps:-none}" "$(figures "$tmp/c.json")"
  else
    printf '  %-40s exit %d: %s\n' "${caps:-none}" "$?" "$(grep -m1 -iE 'error|denied|permit|needs|cannot' "$tmp/c.json.text" || tail -1 "$tmp/c.json.text")"
  fi
  grep -o 'note: .*unreadable[^;]*' "$tmp/c.json.text" | sed 's/^/      /' || true
  rm -f "$tmp/c.json"
  stop_target
done
say "host vs container (caps ${least[*]}), ${ROUNDS:=3} rounds each, a fresh target each time"
for round in $(seq "$ROUNDS"); do
  for how in collapse agent; do
   for kind in idle busy; do
    start_target "$kind"
    # shellcheck disable=SC2046
    "$build/bin/hugify" $("${how}_args") --json="$tmp/h.json" >/dev/null
    printf '  round %d %-8s %s host:      %s\n' "$round" "$how" "$kind" "$(figures "$tmp/h.json")"
    stop_target
    start_target "$kind"
    # shellcheck disable=SC2046
    in_container c.json "${least[*]}" $("${how}_args") || { cat "$tmp/c.json.text"; exit 1; }
    printf '  round %d %-8s %s container: %s\n' "$round" "$how" "$kind" "$(figures "$tmp/c.json")"
    stop_target
   done
  done
done
say "the daemon in the container as the DaemonSet runs it: read-only root, no tmpfs but /run/hugify and /var/lib/hugify"
start_target busy
podman --runtime runc run -d --name "hugify-bench-$$" --pid=host --network=host --read-only --read-only-tmpfs=false \
  --cap-drop=all "${least[@]/#/--cap-add=}" "${limits[@]}" --tmpfs /run/hugify --tmpfs /var/lib/hugify "$image" \
  agent --config /etc/hugify/agent.conf --min-rss 0 --pid "$target" --interval 2 --listen "127.0.0.1:${PORT:=19465}" >/dev/null
sleep 7
curl -fsS "127.0.0.1:$PORT/metrics" | grep -E '^hugify_agent_(collapsed_bytes_total|bloat_bytes_total|passes_total) ' | sed 's/^/  /'
podman logs "hugify-bench-$$" 2>&1 | sed 's/^/  /'
podman --runtime runc rm -f -t 2 "hugify-bench-$$" >/dev/null
printf '  target %d: %s\n' "$target" "$(grep AnonHugePages "/proc/$target/smaps_rollup")"
stop_target
say "what the container sees (caps ${least[*]}): hugify status"
podman --runtime runc run --rm --pid=host --network=none --read-only --cap-drop=all \
  "${least[@]/#/--cap-add=}" "${limits[@]}" "$image" status 2>&1 | sed 's/^/  /'
flock -u 9
