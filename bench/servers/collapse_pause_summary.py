#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise a collapse_pause.bt trace: what the server thread waited on, per cause.

Usage: collapse_pause_summary.py TRACE [CALLER_COMM]   (CALLER_COMM: only calls by this command, e.g.
hugify or collapse_paced; other processes' MADV_COLLAPSE calls on a shared machine are left out)
"""
import collections
import re
import sys


def parse(path):
    events, current = [], None
    for line in open(path, errors="replace"):
        if line.startswith("@"):
            break
        m = re.match(r"^(call|offcpu|lockwait|stall|client_runq) (\d+) (.*)$", line.rstrip())
        if m:
            fields = dict(kv.split("=", 1) for kv in m.group(3).split() if "=" in kv)
            current = {"kind": m.group(1), "t": int(m.group(2)), "stack": [], **fields}
            events.append(current)
        elif current is not None and line.startswith("        "):
            current["stack"].append(line.strip().split("+")[0])
    return events


def cause(event):
    """The server thread's off-CPU reason, from its state and kernel stack when it left the CPU."""
    stack = event["stack"]
    if event.get("state") == "0":
        return "preempted (runnable)"
    for frame, name in (("lock_mm_and_find_vma", "page fault: mmap_lock read"),
                        ("do_epoll_wait", "epoll_wait (no client data)"),
                        ("rwsem_down_write_slowpath", "mmap_lock write"),
                        ("rwsem_down_read_slowpath", "mmap_lock read (syscall)"),
                        ("__flush_work", "flush_work")):
        if frame in stack:
            return name
    return "other: " + ",".join(stack[2:5])


def summary(path, caller=None):
    events = parse(path)
    calls = [e for e in events if e["kind"] == "call" and (caller is None or e["by"].startswith(caller + "/"))]
    out = []
    if calls:
        first, last = calls[0]["t"], max(c["t"] + int(c["dur_us"]) for c in calls)
        out.append(f"calls by {caller or 'anyone'}: {len(calls)}, span {(last - first) / 1e6:.2f} s, "
                   f"longest {max(int(c['dur_us']) for c in calls) / 1e3:.1f} ms, "
                   f"write-lock hold sum {sum(int(c['wlock_sum_us']) for c in calls) / 1e3:.0f} ms "
                   f"max {max(int(c['wlock_max_us']) for c in calls) / 1e3:.1f} ms, "
                   f"blocked in lru_add_drain_all etc. sum {sum(int(c['caller_off_us']) for c in calls) / 1e3:.0f} ms "
                   f"max {max(int(c['caller_off_us']) for c in calls) / 1e3:.1f} ms")
        inside = lambda e: first <= e["t"] <= last
    else:
        inside = lambda e: True
    by_cause = collections.defaultdict(list)
    for e in events:
        if e["kind"] == "offcpu" and inside(e):
            by_cause[cause(e)].append((int(e["off_us"]), int(e["runq_us"]), e.get("after", "")))
    out.append("server thread off CPU > threshold, by cause: count, longest off (ms), of which run-queue wait, "
               "who ran before it got the CPU back")
    for name, items in sorted(by_cause.items(), key=lambda kv: -max(x[0] for x in kv[1])):
        longest = max(items)
        afters = collections.Counter(re.sub(r"/\d+$", "", a) for _, _, a in items).most_common(3)
        out.append(f"  {name:32s} n={len(items):4d} longest={longest[0] / 1e3:7.1f} runq={longest[1] / 1e3:6.1f} "
                   f"after: {afters}")
    waits = [e for e in events if e["kind"] == "lockwait" and inside(e)]
    if waits:
        out.append(f"server mmap_lock waits > threshold: {len(waits)}, longest {max(int(e['wait_us']) for e in waits) / 1e3:.1f} ms, "
                   f"write={collections.Counter(e['write'] for e in waits)}")
    spans = collections.defaultdict(list)
    for line in open(path, errors="replace"):
        m = re.match(r"^stall (\d+) kind=(\w+) span_us=(\d+)", line)
        if m and inside({"t": int(m.group(1))}):
            spans[m.group(2)].append(int(m.group(3)))
    for kind, values in sorted(spans.items()):
        values.sort()
        out.append(f"server gaps between syscalls > threshold, {kind:5s}: n={len(values)} longest={values[-1] / 1e3:.1f} ms "
                   f"sum={sum(values) / 1e3:.0f} ms")
    client = [e for e in events if e["kind"] == "client_runq" and inside(e)]
    if client:
        worst = max(client, key=lambda e: int(e["wait_us"]))
        afters = collections.Counter(re.sub(r"/\d+$", "", e["after"]) for e in client).most_common(4)
        out.append(f"load generator run-queue waits > threshold: {len(client)}, longest {int(worst['wait_us']) / 1e3:.1f} ms "
                   f"(after {worst['after']}); who ran before: {afters}")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
