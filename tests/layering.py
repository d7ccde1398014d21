#!/usr/bin/env python3
"""The layers of docs/design.md, checked from the sources and the objects, so they stay true by themselves.

  layering.py SOURCE_DIR [LIBRARY_OBJECT.o ...]

1. The includes: every `#include "x.h"` of src/<layer>/ is resolved to the layer that holds x.h, and only
   downward edges are allowed: cli -> format -> lib, preload -> format -> lib (the preload writes its report
   with the format layer; it never uses the command's files). include/ (the public header) is the library's.
2. File names: no two files of src/ share a name (a name in a message, a profile or a stack trace is then
   never ambiguous; a command's file is cmd_NAME.c where src/lib has a NAME.c).
3. The library's objects: who uses whom, rebuilt from the symbols each object defines and needs (nm), has
   no cycle, and the pure parsers (procfs.c, units.c, reason.c) use nothing but each other.
Prints every violation with its file and line (or the cycle) and exits 1; exits 0 when the layers hold.
"""
import os
import re
import subprocess
import sys

# Which layers a layer may include from (itself always).
ALLOWED = {
    "lib": {"lib"},
    "format": {"format", "lib"},
    "preload": {"preload", "format", "lib"},
    "cli": {"cli", "format", "lib"},
}
PURE = {"procfs", "units", "reason"}  # parsers and the reason buffer: no I/O, nothing above them


def layer_headers(source):
    """header name -> its layer (src/<layer>/..., include/ is the library's)."""
    owner = {}
    for layer in ALLOWED:
        for root, _, files in os.walk(os.path.join(source, "src", layer)):
            for name in files:
                if name.endswith(".h"):
                    owner.setdefault(name, set()).add(layer)
    for name in os.listdir(os.path.join(source, "include")):
        owner.setdefault(name, set()).add("lib")
    return owner


def include_violations(source):
    owner = layer_headers(source)
    problems = []
    for layer, allowed in ALLOWED.items():
        for root, _, files in os.walk(os.path.join(source, "src", layer)):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m:
                            continue
                        header = os.path.basename(m.group(1))
                        layers = owner.get(header)
                        if not layers:
                            continue  # a generated or system header in quotes
                        # a header that exists in the layer itself wins (the compiler finds it first)
                        if layer in layers or layers & allowed:
                            continue
                        problems.append(f"{os.path.relpath(path, source)}:{number}: {layer} includes "
                                        f"{header} of {'/'.join(sorted(layers))} (an upward edge)")
    return problems


def name_clashes(source):
    seen, problems = {}, []
    for root, _, files in sorted(os.walk(os.path.join(source, "src"))):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(root, name), source)
            if name in seen:
                problems.append(f"{path}: the same name as {seen[name]}")
            else:
                seen[name] = path
    return problems


def object_graph(objects):
    defined, needed = {}, {}
    for obj in objects:
        module = os.path.basename(obj).split(".")[0]
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "TDBRV":
                defined[fields[2]] = module
            elif len(fields) == 2 and fields[0] == "U":
                needed.setdefault(module, set()).add(fields[1])
    uses = {}
    for module, symbols in needed.items():
        uses[module] = {defined[s] for s in symbols if s in defined and defined[s] != module}
    return uses


def find_cycle(uses):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(uses.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(uses):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def object_violations(objects):
    if not objects:
        return []
    uses = object_graph(objects)
    problems = []
    cycle = find_cycle(uses)
    if cycle:
        problems.append("the library's uses graph has a cycle: " + " -> ".join(f"{m}.c" for m in cycle))
    for module in sorted(PURE):
        above = sorted(uses.get(module, set()) - PURE)
        if above:
            problems.append(f"{module}.c is a pure parser but uses {', '.join(m + '.c' for m in above)}")
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, objects = sys.argv[1], [o for o in sys.argv[2:] if o.endswith(".o")]
    problems = include_violations(source) + name_clashes(source) + object_violations(objects)
    for problem in problems:
        print(problem)
    print(f"layering: {len(problems)} problem(s); {len(objects)} library objects read")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
