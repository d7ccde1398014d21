#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""suite_results.py - a server's own test suite's outcome, per test, in one form: "STATUS<TAB>NAME" lines,
sorted, STATUS one of passed, failed, skipped (tests/integration/server_suites.cpp compares a plain run's
with a run under hugify; docs/reliability.md counts them).

usage: suite_results.py redis|pg_regress|junit FILE [--counts]

  redis       the output of Redis's runtest: "[ok]: NAME (N ms)", "[err]: NAME in FILE", "[skip]: NAME",
              "[exception]: ...", "[ignore]: NAME"; colours removed
  pg_regress  the output of pg_regress: "test NAME ... ok", "     NAME ... FAILED", "... failed (ignored)"
  junit       the JUnit XML of `python3 -m test --junit-xml FILE`: each testcase, failed when it holds
              a failure or an error, skipped when it holds a skipped
  --counts    print "passed N failed N skipped N" instead
"""
import re
import sys
import xml.etree.ElementTree as ET

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REDIS = re.compile(r"^\[(ok|err|skip|ignore|exception)\]: (.*?)(?: \(\d+ ms\))?(?: in (?:\./)?tests/\S+)?\s*$")
REDIS_STATUS = {"ok": "passed", "err": "failed", "exception": "failed", "skip": "skipped", "ignore": "skipped"}
PG = re.compile(r"^(?:test\s+|\s+)(\S+)\s+\.\.\.\s+(ok|FAILED|failed \(ignored\))\b")
PG_STATUS = {"ok": "passed", "FAILED": "failed", "failed (ignored)": "skipped"}


def redis(text):
    for line in text.splitlines():
        match = REDIS.match(ANSI.sub("", line))
        if match:
            yield REDIS_STATUS[match.group(1)], match.group(2)


def pg_regress(text):
    for line in text.splitlines():
        match = PG.match(line)
        if match:
            yield PG_STATUS[match.group(2)], match.group(1)


def junit(text):
    for case in ET.fromstring(text).iter("testcase"):
        name = ".".join(part for part in (case.get("classname"), case.get("name")) if part)
        tags = {child.tag for child in case}
        yield ("failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"), name


def main(argv):
    if len(argv) < 3 or argv[1] not in ("redis", "pg_regress", "junit") or argv[3:] not in ([], ["--counts"]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[2], encoding="utf-8", errors="replace") as f:
        results = sorted(globals()[argv[1]](f.read()))
    if argv[3:]:
        counts = {status: 0 for status in ("passed", "failed", "skipped")}
        for status, _ in results:
            counts[status] += 1
        print(" ".join(f"{status} {count}" for status, count in counts.items()))
    else:
        for status, name in results:
            print(f"{status}\t{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
