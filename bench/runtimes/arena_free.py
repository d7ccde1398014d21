# SPDX-License-Identifier: MIT
"""arena_free.py - bloat when CPython gives half its obmalloc arenas back (docs/runtimes.md).

Builds about --mib MiB of small objects (bytes of 440, obmalloc's 480-byte class), which fill 1 MiB arenas
one after another; finds each arena's objects (in allocation order an arena's objects span less than 1 MiB,
and the next arena starts elsewhere); frees every object of alternate groups of --group arenas, so whole
arenas become empty and CPython unmaps them; waits --settle seconds; then prints NAME=NUMBER figures
(MiB unless named otherwise) for `bench/run_overhead.py --printed`:

  rss_built, rss_freed          VmRSS after building and after the free
  thp_built, thp_freed          this process's AnonHugePages (smaps_rollup)
  returned_system               memory in use system-wide before the free minus after: what the machine got
                                back (other processes' memory moves it too: read it as a median). In use is
                                MemTotal - MemAvailable - the pages on the per-CPU free lists (/proc/zoneinfo
                                pagesets' count): freed pages land there first, up to hundreds of MiB on
                                Linux 6.18, and MemFree does not count them
  kept_system                   freed_arenas minus returned_system: freed memory still held somewhere
  partial_thp                   2 MiB folios partially mapped, system-wide, after the free minus before
                                (.../hugepages-2048kB/stats/nr_anon_partially_mapped: a freed half of a huge
                                page stays resident until the kernel's deferred split, under memory pressure)
  freed_arenas                  MiB of arenas emptied (1 MiB each)

  python3 bench/runtimes/arena_free.py [--mib 512] [--group 1] [--settle 1]
"""
import argparse
import os
import time

ARENA = 1 << 20
PARTIAL = "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/stats/nr_anon_partially_mapped"


def kib_fields(path, names):
    values = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in names:
                values[key] = int(rest.split()[0])
    return values


def per_cpu_free_mib():
    """Pages on the per-CPU free lists (/proc/zoneinfo, each pageset's count), in MiB."""
    pages = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            words = line.split()
            if len(words) == 2 and words[0] == "count:":
                pages += int(words[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def snapshot():
    status = kib_fields("/proc/self/status", {"VmRSS"})
    rollup = kib_fields("/proc/self/smaps_rollup", {"AnonHugePages"})
    meminfo = kib_fields("/proc/meminfo", {"MemTotal", "MemAvailable"})
    try:
        with open(PARTIAL) as f:
            partial = int(f.read())
    except OSError:
        partial = 0
    return {"rss": status["VmRSS"] / 1024, "thp": rollup.get("AnonHugePages", 0) / 1024,
            "used": (meminfo["MemTotal"] - meminfo["MemAvailable"]) / 1024 - per_cpu_free_mib(), "partial": partial}


def arena_groups(objects):
    """Index ranges [start, end) of objects that share an arena, in allocation order."""
    groups, start = [], 0
    low = high = id(objects[0])
    for i in range(1, len(objects)):
        address = id(objects[i])
        if max(high, address) - min(low, address) >= ARENA:
            groups.append((start, i))
            start, low, high = i, address, address
        else:
            low, high = min(low, address), max(high, address)
    groups.append((start, len(objects)))
    return groups


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--group", type=int, default=1, help="arenas per freed (and per kept) group")
    parser.add_argument("--settle", type=float, default=1.0)
    args = parser.parse_args()
    count = args.mib * ARENA // 480
    objects = [None] * count
    for i in range(count):
        objects[i] = bytes(440)
    groups = arena_groups(objects)
    time.sleep(args.settle)
    built = snapshot()
    freed = 0
    for g in range(0, len(groups) - 1):  # the last arena is the one CPython keeps
        if (g // args.group) % 2:
            start, end = groups[g]
            objects[start:end] = [None] * (end - start)
            freed += 1
    time.sleep(args.settle)
    after = snapshot()
    returned = built["used"] - after["used"]
    print(f"rss_built={built['rss']:.1f} rss_freed={after['rss']:.1f} thp_built={built['thp']:.1f} "
          f"thp_freed={after['thp']:.1f} returned_system={returned:.1f} kept_system={freed - returned:.1f} "
          f"partial_thp={after['partial'] - built['partial']} freed_arenas={freed} arenas={len(groups)}")


if __name__ == "__main__":
    main()
