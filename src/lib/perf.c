/* SPDX-License-Identifier: MIT */
/* perf.c - TLB counters of a process through perf_event_open, and the arithmetic on them.
 *
 * Generic events only (PERF_TYPE_HARDWARE and PERF_TYPE_HW_CACHE), each opened on its own so the kernel
 * may multiplex them on a PMU with few counters; reads are scaled by time_enabled / time_running. A machine
 * without a PMU (a KVM guest without a virtual PMU) fails every open with ENOENT: that is reported as
 * "no PMU", never as an error of the program measured. */
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hugify.h"
#include "os.h"

#define CACHE_EVENT(cache, op, result) \
  ((uint64_t)(cache) | ((uint64_t)(op) << 8) | ((uint64_t)(result) << 16))

static const struct {
  const char *name;
  uint32_t type;
  uint64_t config;
} counter_events[HUGIFY_COUNTER_COUNT] = {
    [HUGIFY_COUNTER_CYCLES] = {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    [HUGIFY_COUNTER_INSTRUCTIONS] = {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    [HUGIFY_COUNTER_DTLB_LOADS] = {"dTLB-loads", PERF_TYPE_HW_CACHE,
                                   CACHE_EVENT(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ,
                                               PERF_COUNT_HW_CACHE_RESULT_ACCESS)},
    [HUGIFY_COUNTER_DTLB_LOAD_MISSES] = {"dTLB-load-misses", PERF_TYPE_HW_CACHE,
                                         CACHE_EVENT(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ,
                                                     PERF_COUNT_HW_CACHE_RESULT_MISS)},
    [HUGIFY_COUNTER_DTLB_STORES] = {"dTLB-stores", PERF_TYPE_HW_CACHE,
                                    CACHE_EVENT(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_WRITE,
                                                PERF_COUNT_HW_CACHE_RESULT_ACCESS)},
    [HUGIFY_COUNTER_DTLB_STORE_MISSES] = {"dTLB-store-misses", PERF_TYPE_HW_CACHE,
                                          CACHE_EVENT(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_WRITE,
                                                      PERF_COUNT_HW_CACHE_RESULT_MISS)},
    [HUGIFY_COUNTER_ITLB_LOADS] = {"iTLB-loads", PERF_TYPE_HW_CACHE,
                                   CACHE_EVENT(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ,
                                               PERF_COUNT_HW_CACHE_RESULT_ACCESS)},
    [HUGIFY_COUNTER_ITLB_LOAD_MISSES] = {"iTLB-load-misses", PERF_TYPE_HW_CACHE,
                                         CACHE_EVENT(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ,
                                                     PERF_COUNT_HW_CACHE_RESULT_MISS)},
};

const char *hugify_counter_name(enum hugify_counter counter) {
  if ((unsigned)counter >= HUGIFY_COUNTER_COUNT) return "?";
  return counter_events[counter].name;
}

static int open_event(unsigned counter, pid_t pid) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = counter_events[counter].type;
  attr.config = counter_events[counter].config;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  attr.exclude_kernel = 1; /* user space: what the program's own loads cost, and allowed at paranoid 2 */
  attr.exclude_hv = 1;
  attr.inherit = 1;
  attr.disabled = pid > 0;
  attr.enable_on_exec = pid > 0;
  return (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static bool no_pmu_errno(int err) { return err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == ENOSYS; }

int hugify_counters_open(struct hugify_counter_set *set, pid_t pid) {
  if (!set) return -EINVAL;
  memset(set, 0, sizeof *set);
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) set->fd[i] = -1;
  if (pid < 0) return -EINVAL;

  int errors[HUGIFY_COUNTER_COUNT];
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) {
    set->fd[i] = open_event(i, pid);
    errors[i] = set->fd[i] < 0 ? errno : 0;
    if (set->fd[i] >= 0) set->opened++;
  }
  if (set->opened > 0) {
    for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++)
      if (errors[i]) reason_add(set->reason, sizeof set->reason, "%s: %s", counter_events[i].name,
                                   no_pmu_errno(errors[i]) ? "not counted by this CPU" : strerror(errors[i]));
    return (int)set->opened;
  }

  /* Nothing opened: the first error that is not "no such event" explains it best. */
  int err = errors[0];
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++)
    if (!no_pmu_errno(errors[i])) {
      err = errors[i];
      break;
    }
  if (no_pmu_errno(err)) {
    snprintf(set->reason, sizeof set->reason,
             "no PMU: hardware counters not supported on this machine (perf_event_open: %s)%s", strerror(err),
             err == ENOSYS ? "; the kernel lacks CONFIG_PERF_EVENTS" : "");
    return -ENOENT;
  }
  if (err == EACCES || err == EPERM) {
    snprintf(set->reason, sizeof set->reason,
             "perf_event_open refused (%s): /proc/sys/kernel/perf_event_paranoid forbids counting other "
             "processes; set it to 2 or lower, or run as root / with CAP_PERFMON", strerror(err));
    return -EACCES;
  }
  if (err == ESRCH) snprintf(set->reason, sizeof set->reason, "perf_event_open: no process %d", (int)pid);
  else snprintf(set->reason, sizeof set->reason, "perf_event_open: %s", strerror(err));
  return -err;
}

uint64_t hugify_counter_scale(uint64_t raw, uint64_t time_enabled, uint64_t time_running) {
  if (time_running == 0) return 0;
  if (time_enabled <= time_running) return raw;
  unsigned __int128 scaled = (unsigned __int128)raw * time_enabled + time_running / 2;
  scaled /= time_running;
  return scaled > UINT64_MAX ? UINT64_MAX : (uint64_t)scaled;
}

int hugify_counters_read(const struct hugify_counter_set *set, struct hugify_counter_values *out) {
  if (!set || !out) return -EINVAL;
  memset(out, 0, sizeof *out);
  if (set->opened == 0) return -EBADF;
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) {
    if (set->fd[i] < 0) continue;
    uint64_t data[3]; /* value, time_enabled, time_running (read_format order) */
    ssize_t n = read(set->fd[i], data, sizeof data);
    if (n < 0) return -errno;
    if (n != (ssize_t)sizeof data || data[2] == 0) continue;
    out->value[i] = hugify_counter_scale(data[0], data[1], data[2]);
    out->present |= 1u << i;
  }
  return 0;
}

void hugify_counters_close(struct hugify_counter_set *set) {
  if (!set) return;
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) {
    if (set->opened > 0 && set->fd[i] >= 0) close(set->fd[i]);
    set->fd[i] = -1;
  }
  set->opened = 0;
}

/* ---- arithmetic ---------------------------------------------------------------------------------- */

static double ratio(const struct hugify_counter_values *v, unsigned numerator, unsigned denominator, double scale) {
  unsigned need = (1u << numerator) | (1u << denominator);
  if ((v->present & need) != need || v->value[denominator] == 0) return NAN;
  return scale * (double)v->value[numerator] / (double)v->value[denominator];
}

void hugify_counters_rates(const struct hugify_counter_values *v, struct hugify_tlb_rates *out) {
  if (!out) return;
  out->dtlb_load_miss_rate = NAN;
  out->dtlb_store_miss_rate = NAN;
  out->itlb_miss_rate = NAN;
  out->dtlb_misses_per_kilo_instructions = NAN;
  out->itlb_misses_per_kilo_instructions = NAN;
  out->instructions_per_cycle = NAN;
  if (!v) return;
  out->dtlb_load_miss_rate = ratio(v, HUGIFY_COUNTER_DTLB_LOAD_MISSES, HUGIFY_COUNTER_DTLB_LOADS, 1.0);
  out->dtlb_store_miss_rate = ratio(v, HUGIFY_COUNTER_DTLB_STORE_MISSES, HUGIFY_COUNTER_DTLB_STORES, 1.0);
  out->itlb_miss_rate = ratio(v, HUGIFY_COUNTER_ITLB_LOAD_MISSES, HUGIFY_COUNTER_ITLB_LOADS, 1.0);
  out->itlb_misses_per_kilo_instructions =
      ratio(v, HUGIFY_COUNTER_ITLB_LOAD_MISSES, HUGIFY_COUNTER_INSTRUCTIONS, 1000.0);
  out->instructions_per_cycle = ratio(v, HUGIFY_COUNTER_INSTRUCTIONS, HUGIFY_COUNTER_CYCLES, 1.0);
  /* Data misses per kilo-instruction: loads alone when the CPU does not count store misses. */
  double loads = ratio(v, HUGIFY_COUNTER_DTLB_LOAD_MISSES, HUGIFY_COUNTER_INSTRUCTIONS, 1000.0);
  double stores = ratio(v, HUGIFY_COUNTER_DTLB_STORE_MISSES, HUGIFY_COUNTER_INSTRUCTIONS, 1000.0);
  out->dtlb_misses_per_kilo_instructions = isnan(stores) ? loads : loads + stores;
}

int hugify_tlb_rule_of_thumb(const struct hugify_tlb_rates *rates, uint64_t working_set_bytes) {
  if (!rates || isnan(rates->dtlb_load_miss_rate)) return -1;
  return rates->dtlb_load_miss_rate > HUGIFY_TLB_MISS_RATE_HELPS && working_set_bytes > HUGIFY_TLB_WORKING_SET_HELPS;
}
