# SPDX-License-Identifier: MIT
"""dict_lookup.py - CPython's objects in obmalloc arenas: a dict of 3 M entries, then 2 M random lookups.
Prints the lookup seconds and a checksum (docs/runtimes.md)."""
import random
import time

n = 3_000_000
d = {i * 7919: str(i) for i in range(n)}
keys = [random.randrange(n) * 7919 for _ in range(2_000_000)]
t = time.perf_counter()
s = 0
for k in keys:
    s += len(d[k])
print(time.perf_counter() - t, s)
