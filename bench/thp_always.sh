#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 31: what each hugify command does and is worth under THP `enabled=always` (the default of most
# distribution kernels), measured beside `madvise` on this machine. docs/kernels.md, "THP `always`".
#
#   flock /tmp/hugify-native.lock bench/thp_always.sh bloat|growth|check   (root)
#
# bloat   a sparse workload (SPARSE, default 256M, one 4 KiB page in ten written, never advised) under
#         madvise and always: its Rss and AnonHugePages, and what `hugify status` diagnoses under always.
# growth  bench/agent_growth under always: the heap's huge share as it grows with nothing but the kernel
#         (fault-time THP, then khugepaged: thp_collapse_alloc counted), then with `hugify agent` beside it,
#         then `hugify agent --once` and `hugify collapse` on a grown heap (what is left for them to do).
# check   `hugify check` on the bundled TLB-bound workload under madvise and under always (plain is huge).
#
# Every phase sets the mode it needs and puts THP and the 2 MiB pool back as they were, also on failure.
# Each figure is printed with the load average beside it.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
BUILD=${BUILD:-$HUGIFY_ROOT/build}
HUGIFY=${HUGIFY:-$BUILD/bin/hugify}
SPARSE=${SPARSE:-256M}
GROW_SIZE=${GROW_SIZE:-512M}
GROW_SECONDS=${GROW_SECONDS:-12}
CHECK_BUDGET=${CHECK_BUDGET:-25}
THP=/sys/kernel/mm/transparent_hugepage

save_thp_settings
trap 'restore_pools; restore_thp_settings' EXIT
load() { echo "load $(cut -d' ' -f1-3 /proc/loadavg)"; }
set_mode() { echo "$1" > $THP/enabled; }
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

# The sparse workload: a private anonymous mapping (2 MiB-aligned by the kernel: its size is a multiple of
# 2 MiB), one page in ten written; prints the mapping's Rss and AnonHugePages in KiB, then holds.
sparse_once() {
  python3 - "$1" <<'EOF'
import mmap, re, sys
size = int(sys.argv[1])
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for at in range(0, size, 10 * 4096):
    m[at] = 1
import ctypes
address = ctypes.addressof(ctypes.c_char.from_buffer(m))
rss = huge = None
inside = False
for line in open("/proc/self/smaps"):
    head = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
    if head:
        inside = int(head.group(1), 16) <= address < int(head.group(2), 16)
    elif inside and line.startswith("Rss:"):
        rss = int(line.split()[1])
    elif inside and line.startswith("AnonHugePages:"):
        huge = int(line.split()[1])
print(f"written_kib {size // 40960 * 4} rss_kib {rss} anon_huge_kib {huge}")
EOF
}

bloat() {
  local bytes
  bytes=$(numfmt --from=iec "$SPARSE")
  echo "# bloat: $SPARSE, one page in ten written; max_ptes_none $(cat $THP/khugepaged/max_ptes_none)"
  for mode in madvise always; do
    set_mode "$mode"
    echo "$mode: $(sparse_once "$bytes") | $(load)"
  done
  set_mode always
  echo "status under always:"
  "$HUGIFY" status | grep -iE "max_ptes_none|bloat|always" || true
}

growth() {
  local grow=$BUILD/bench/agent_growth
  set_mode always
  for mode in nothing agent; do
    local before after
    before=$(vmstat thp_collapse_alloc)
    "$grow" --mode "$mode" --size "$GROW_SIZE" --seconds "$GROW_SECONDS" --hugify "$HUGIFY" >/tmp/thp_always.$mode
    after=$(vmstat thp_collapse_alloc)
    echo "$mode: final huge share $(awk 'NF == 4 { f = $3 } END { print f }' /tmp/thp_always.$mode)," \
      "at ${GROW_SECONDS}s $(awk -v s="$GROW_SECONDS" 'NF == 4 && $2 == s { print $3 }' /tmp/thp_always.$mode)," \
      "khugepaged collapses $((after - before)) | $(grep '^#' /tmp/thp_always.$mode || true) | $(load)"
  done
  # What is left for a one-shot pass: a heap grown by small steps (glibc's brk heap, 4 KiB at a time).
  python3 -c "
import ctypes, sys, time
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
blocks = [libc.malloc(4000) for _ in range(65536)]  # 256 MiB of [heap], grown by brk step by step
for b in blocks: ctypes.memset(b, 1, 4000)
print('ready', flush=True)
time.sleep(600)
" >/tmp/thp_always.heap &
  local target=$! tries=0
  until grep -q ready /tmp/thp_always.heap || [ $((tries++)) -gt 600 ]; do sleep 0.1; done
  echo "brk heap before: $(heap_huge $target) | $(load)"
  "$HUGIFY" agent --once --pid "$target" --min-rss 0 --json=/tmp/thp_always.agent.json >/dev/null || true
  echo "after agent --once: $(heap_huge $target), $(jq -r '"\(.collapsed_bytes) bytes collapsed, bloat \(.bloat_bytes)"' /tmp/thp_always.agent.json) | $(load)"
  "$HUGIFY" collapse "$target" --json=/tmp/thp_always.collapse.json >/dev/null || true
  echo "after collapse: $(heap_huge $target) | $(jq -r '"\(.seconds) s, \(.cpu_seconds) s CPU"' /tmp/thp_always.collapse.json 2>/dev/null) | $(load)"
  kill "$target"; wait "$target" 2>/dev/null || true
}

heap_huge() { # PID: [heap]'s AnonHugePages of Rss
  awk '/^[0-9a-f]+-[0-9a-f]+ / { heap = ($NF == "[heap]") } heap && /^Rss:/ { r = $2 } heap && /^AnonHugePages:/ { h = $2 }
       END { printf "[heap] %d of %d KiB huge (%.0f %%)", h, r, r ? 100 * h / r : 0 }' "/proc/$1/smaps"
}

check() {
  reserve_pool 2048 64
  for mode in madvise always; do
    set_mode "$mode"
    echo "## check under $mode | $(load)"
    "$HUGIFY" check --configs heap,heap+text,hugetlb --budget "$CHECK_BUDGET" 2>&1 | sed -n '/^  config/,/^  peak/p;/^Verdict/,$p'
    echo "## end | $(load)"
  done
}

case "${1:-}" in
  bloat | growth | check) "$1" ;;
  *) echo "usage: $0 bloat|growth|check" >&2; exit 2 ;;
esac
