# SPDX-License-Identifier: MIT
# targets.sh - what agent_idle_cpu.sh and top_cost.sh share (sourced, not run): COUNT idle processes of
# known shape (tests/agent_target: 8 MiB written on 4 KiB pages, then idle), stopped when the script exits.

# start_idle_targets BUILD_DIR COUNT: start them (pids in TARGET_PIDS), then let them fill their memory.
start_idle_targets() {
  TARGET_PIDS=()
  for _ in $(seq "$2"); do
    "$1/tests/agent_target" --dense 8M > /dev/null &
    TARGET_PIDS+=($!)
  done
  sleep 2
}
# stop_idle_targets [PID...]: stop them and any other pids given.
stop_idle_targets() { kill "${TARGET_PIDS[@]}" "$@" 2>/dev/null || true; wait 2>/dev/null || true; }
