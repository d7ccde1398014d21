# SPDX-License-Identifier: MIT
# damon_free.sh - sourced by the bench scripts that set up DAMON kdamonds of their own (bench/kernel_vs_agent.sh,
# bench/first_touch.sh): a DAMON user inside the kernel (DAMON_STAT, on by default in Debian's 7.2;
# DAMON_RECLAIM, DAMON_LRU_SORT) refuses any other kdamond its start while it runs, and writing N to its
# `enabled` parameter frees DAMON (seen on 7.2.12). damon_free pauses the enabled ones; damon_give_back puts Y
# back. Also the THP settings (scripts/lib.sh's save/restore) and the set-up both scripts share: root, the tools.

DAMON_PAUSED=()
damon_free() {
  local module p
  for module in damon_stat damon_reclaim damon_lru_sort; do
    p=/sys/module/$module/parameters/enabled
    if [ "$(cat "$p" 2>/dev/null)" = Y ]; then echo N > "$p"; DAMON_PAUSED+=("$p"); say "$module paused for the run"; fi
  done
  return 0
}
damon_give_back() {
  local p
  for p in "${DAMON_PAUSED[@]}"; do echo Y > "$p"; done
  DAMON_PAUSED=()
}

# bench_setup BUILD PROGRAM: the command and the bench program built, root; THP remembered (put back by
# bench_teardown) and set to madvise, DAMON freed.
bench_setup() {
  HUGIFY=$1/bin/hugify
  need_hugify
  need_tools "$1/bench/$2=the bench programs (cmake --build $1)" awk=gawk
  [ "$(id -u)" -eq 0 ] || { say "needs root: DAMON's sysfs, THP settings, process_madvise of another process"; exit 3; }
  save_thp_settings
  damon_free
  echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
}
bench_teardown() {
  restore_thp_settings
  damon_give_back
}
