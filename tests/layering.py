#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of docs/design.md, checked from the sources and the objects, so they stay true by themselves.

  layering.py SOURCE_DIR [LIBRARY_OBJECT.o ...] [--cli CLI_OBJECT.o ...] [--preload PRELOAD_OBJECT.o ...]

1. The includes: every `#include "x.h"` of src/<layer>/ is resolved to the layer that holds x.h, and only
   downward edges are allowed: cli -> format -> lib, preload -> format -> lib (the preload writes its report
   with the format layer; it never uses the command's files). include/ (the public header) is the library's.
2. File names: no two files of src/ share a name (a name in a message, a profile or a stack trace is then
   never ambiguous; a command's file is cmd_NAME.c where src/lib has a NAME.c).
3. The objects: who uses whom, rebuilt from the symbols each object defines and needs (nm), has no cycle,
   in each of three graphs: the library's (src/lib and src/format), the command's (src/cli) and the
   preload's (src/preload and the library files it compiles itself); every cycle is printed with its files.
   The one cycle docs/design.md names is allowed: agent_state.c <-> agent_output.c. The files docs/design.md
   calls pure (procfs.c, units.c, reason.c, agent_policy.c, planner.c) use
   nothing but each other, and of the C library only what computes (strings, memory, numbers): no I/O, no
   environment, no clock.
4. One error convention: no internal function of src/lib (any but the public hugify_* ones, which keep
   include/hugify.h's conventions) returns -1, returns -1.0, or sets errno to a constant for its caller
   (-1 or NULL with errno): they return -errno, as os.c's wrappers do.
5. The kernel's memory calls (mmap, munmap, mremap, madvise, mprotect, process_madvise) are called by name
   only in os.c (and the preload's interposers): everything else goes through os_*.
6. Every file hugify writes goes through safe_file.c: no open()/fopen() that creates or writes a file
   elsewhere (os.c writes the kernel's settings files, which it never creates; /dev/null is no file).
7. Every JSON schema the sources write ("hugify.NAME/N") is in docs/design.md's list, and every document
   names its schema where it begins: json_begin's third argument is such a string literal.
8. One way to grow an array: realloc is called only in src/lib/array.h (ARRAY_GROW, with its overflow
   check); the preload, which interposes realloc itself, is not counted.
9. No function of src/ is longer than 80 lines, from its definition's first line to its closing `}` at
   column 0.
10. Every HUGIFY_* variable is read through src/lib/options.c: no other file of src/ names a "HUGIFY_"
    string in a getenv or secure_getenv call.
11. The rooms of src/cli (agent/, bench/, check/, run/) use each other one way, as docs/design.md says:
    check uses run, top.c uses the agent's state, hugify-workload (workload/) uses bench's workloads, and
    main.c's table reaches each room's command (cmd_NAME, help_NAME); nothing else of a room is used from
    outside it. A file outside a room includes only the headers the room shows (ROOM_SHOWS), and only from
    a room it may use; the command's objects are checked the same way.
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
# The one cycle docs/design.md names: the agent's state file is its JSON, and --status prints the state file.
ALLOWED_CYCLES = [{"agent_state", "agent_output"}]
# The rooms of src/cli (docs/design.md): the headers each shows the rest of the command, and which rooms a
# room (or a file outside the rooms) may use. Each room's command is reached through cli.h (cmd_NAME,
# help_NAME), main.c's table.
ROOM_SHOWS = {"agent": {"agent_state.h"}, "bench": {"bench.h"}, "check": set(), "run": {"run_env.h", "run_tree.h"}}
ROOM_USES = {"check": {"run"}, "workload": {"bench"}, "top.c": {"agent"}}
COMMAND_ENTRY = re.compile(r"^(cmd|help)_\w+$")
FUNCTION_LINES_MAX = 80
HUGIFY_GETENV = re.compile(r'\b(secure_)?getenv\s*\(\s*"HUGIFY_')
# The files docs/design.md calls pure: no I/O, nothing above them.
PURE = {"procfs", "units", "reason", "agent_policy", "planner", "page_sizes"}
# What a pure file may use of the C library (and the compiler's runtime): computation only.
# (glibc 2.38 and later name C23's strto* and sscanf __isoc23_*: Debian 13's glibc 2.41 does)
PURE_LIBC = re.compile(r"^((__isoc23_)?str\w*|mem\w*|__ctype_\w+|(__isoc99_|__isoc23_)?sscanf|v?snprintf|free|malloc|calloc|"
                       r"realloc|qsort|bsearch|__errno_location|_GLOBAL_OFFSET_TABLE_|__stack_chk_fail|"
                       r"__assert_fail|abort|log2?|exp|sqrt|pow|floor|ceil|fabs|round|lround|isnan|"
                       # a sanitized build's instrumentation (scripts/test --sanitize): checks, not I/O
                       r"__(asan|ubsan|tsan|msan|lsan|sanitizer)_\w+)$")
MEMORY_CALL = re.compile(r"(?<![\w.>])(mmap|mmap64|munmap|mremap|madvise|mprotect|process_madvise)\s*\(")
REALLOC_CALL = re.compile(r"(?<![\w.>])realloc\s*\(")
WRITE_OPEN = re.compile(r"\b(open|openat|creat)\s*\(.*\bO_(WRONLY|RDWR|CREAT)\b|\bfopen\s*\([^;]*\"[wa]")
SCHEMA = re.compile(r'"(hugify\.[a-z_.]+/[0-9]+)"')
JSON_BEGIN = re.compile(r"\bjson_begin\s*\(([^;]*)\)\s*;")


# Exceptions to rule 4: none. Nothing may be added here.
ERRNO_EXCEPTIONS = {}
# A function definition starts at column 0 ("static int name(...) {" or its first line), a body ends at "}".
FUNCTION_START = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\(")
SENTINEL = re.compile(r"\breturn\s+-1(\.0*)?\s*;|\b(rc|result|status)\s*=\s*-1\s*;|\berrno\s*=\s*E[A-Z0-9]+\b")


def errno_convention_violations(source):
    """Rule 4: internal functions of src/lib return -errno (not -1, -1.0, nor -1/NULL with errno)."""
    problems = []
    lib = os.path.join(source, "src", "lib")
    for name in sorted(os.listdir(lib)):
        if not name.endswith(".c"):
            continue
        function = None
        with open(os.path.join(lib, name), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = FUNCTION_START.match(line)
                if m and not line.startswith(("typedef", "struct", "enum", "union", "static const", "const")):
                    function = m.group(1)
                elif line.startswith("}"):
                    function = None
                if not function or function.startswith("hugify_") or not SENTINEL.search(line):
                    continue
                if function in ERRNO_EXCEPTIONS.get(name, ()):
                    continue
                problems.append(f"src/lib/{name}:{number}: {function} returns -1, -1.0 or errno: return -errno "
                                f"(docs/design.md, conventions)")
    return problems


def source_lines(source, layers=("lib", "cli", "format", "preload")):
    """(relative path, line number, line) of every .c file of src/<layer>/, comments dropped."""
    for layer in layers:
        for root, _, files in sorted(os.walk(os.path.join(source, "src", layer))):
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                # blank the comments out, keeping the line count
                text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
                for number, line in enumerate(text.split("\n"), 1):
                    yield os.path.relpath(path, source), number, re.sub(r"//.*", "", line)


def call_violations(source):
    """Rules 5, 6 and 8: the memory calls in os.c only, the files written through safe_file.c only, arrays
    grown by ARRAY_GROW only."""
    problems = []
    for path, number, line in source_lines(source):
        name = os.path.basename(path)
        if MEMORY_CALL.search(line) and name != "os.c" and not path.startswith("src/preload/") and \
                not re.search(r'"[^"]*(mmap|madvise)[^"]*\(', line):
            problems.append(f"{path}:{number}: calls {MEMORY_CALL.search(line).group(1)} by name: use os.c's os_* "
                            f"(docs/design.md, the preload's own memory calls)")
        if WRITE_OPEN.search(line) and name != "safe_file.c" and '"/dev/null"' not in line and \
                not (name == "os.c" and "O_CREAT" not in line):
            problems.append(f"{path}:{number}: opens a file to write it: go through safe_file.h "
                            f"(docs/design.md, files hugify writes)")
        if REALLOC_CALL.search(line) and not path.startswith("src/preload/"):
            problems.append(f"{path}:{number}: grows an array by hand: use ARRAY_GROW (src/lib/array.h)")
    return problems


def schema_violations(source):
    """Rule 7: the schemas the sources name, all in docs/design.md; each document begins with a literal one."""
    with open(os.path.join(source, "docs", "design.md"), encoding="utf-8") as f:
        design = f.read()
    problems, seen = [], set()
    for path, number, line in source_lines(source):
        begin = JSON_BEGIN.search(line)
        if begin and not SCHEMA.search(begin.group(1).split(",")[-1]):
            problems.append(f"{path}:{number}: json_begin without its schema as a \"hugify.NAME/N\" literal (JSON)")
        for schema in SCHEMA.findall(line):
            if schema not in seen and f"`{schema}`" not in design:
                problems.append(f"{path}:{number}: schema {schema} is not in docs/design.md's list (JSON)")
            seen.add(schema)
    return problems


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


def object_graph(objects, libc=None, edges=None):
    """module -> the modules it uses; libc (when given): module -> the symbols no object defines; edges
    (when given): (module, used module) -> the symbols."""
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
        if edges is not None:
            for symbol in symbols:
                if symbol in defined and defined[symbol] != module:
                    edges.setdefault((module, defined[symbol]), set()).add(symbol)
        if libc is not None:
            libc[module] = {s for s in symbols if s not in defined}
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


def strongly_connected(uses):
    """The components of more than one module (Tarjan): each holds every cycle through its modules."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(uses.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(uses):
        if node not in index:
            visit(node)
    return components


def cycle_violations(graph, uses):
    """Every cycle of a uses graph but the one docs/design.md names, each with its files and one loop."""
    problems = []
    for component in strongly_connected(uses):
        if component in ALLOWED_CYCLES:
            continue
        inside = {m: uses.get(m, set()) & component for m in component}
        loop = find_cycle(inside)
        problems.append(f"the {graph}'s uses graph has a cycle among {', '.join(sorted(m + '.c' for m in component))}"
                        f": " + " -> ".join(f"{m}.c" for m in loop))
    return problems


def source_files(source):
    """file stem -> its path under src/ (file names are unique across src/: rule 2)."""
    found = {}
    for root, _, files in os.walk(os.path.join(source, "src")):
        for name in files:
            if name.endswith(".c"):
                found.setdefault(name[:-2], os.path.relpath(os.path.join(root, name), source))
    return found


def room_of(path):
    """The room of a file of src/cli (agent, bench, check, run, workload), or None outside the rooms."""
    parts = path.split(os.sep)
    return parts[2] if len(parts) > 3 and parts[:2] == ["src", "cli"] else None


def may_use(path, room):
    """Whether the file at path may use the room (beside its own): rule 11."""
    return room in ROOM_USES.get(room_of(path) or os.path.basename(path), ())


def room_object_violations(source, edges):
    """Rule 11 on the command's objects: an edge into a room from outside it is main.c's table (cmd_NAME,
    help_NAME), or a permitted room's use of a file behind a header the room shows."""
    files, problems = source_files(source), []
    for (user, used), symbols in sorted(edges.items()):
        user_path, used_path = files.get(user, user), files.get(used, used)
        room = room_of(used_path)
        if room is None or room == room_of(user_path):
            continue
        if all(COMMAND_ENTRY.match(s) for s in symbols) and room_of(user_path) is None:
            continue  # the command table
        if may_use(user_path, room) and used + ".h" in ROOM_SHOWS.get(room, ()):
            continue
        problems.append(f"{user_path} uses {used_path} ({', '.join(sorted(symbols))}): the {room} room is used "
                        f"only as docs/design.md says (check uses run, top.c the agent's state)")
    return problems


def room_include_violations(source):
    """Rule 11 on the includes: a file outside a room includes only what the room shows, from a room it
    may use."""
    header_room = {}
    for room in ROOM_SHOWS:
        for name in os.listdir(os.path.join(source, "src", "cli", room)):
            if name.endswith(".h"):
                header_room[name] = room
    problems = []
    for root, _, files in sorted(os.walk(os.path.join(source, "src", "cli"))):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(root, name), source)
            with open(os.path.join(source, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    header = os.path.basename(m.group(1)) if m else None
                    room = header_room.get(header)
                    if not room or room == room_of(path):
                        continue
                    if header in ROOM_SHOWS[room] and may_use(path, room):
                        continue
                    problems.append(f"{path}:{number}: includes {header} of the {room} room, which shows "
                                    f"{', '.join(sorted(ROOM_SHOWS[room])) or 'no header'} (docs/design.md)")
    return problems


def function_spans(lines):
    """(name, first line, last line) of every function defined at column 0 (its closing } at column 0)."""
    function = None
    for number, line in enumerate(lines, 1):
        m = FUNCTION_START.match(line)
        if function is None and m and not line.startswith(("typedef", "struct", "enum", "union", "static const",
                                                           "const", "extern")):
            function, first, opened = m.group(1), number, "{" in line
            if not opened and line.rstrip().endswith(";"):
                function = None  # a declaration
        elif function and not opened:
            opened = "{" in line
            if not opened and line.rstrip().endswith(";"):
                function = None  # a declaration over several lines
        if function and opened and line.startswith("}"):
            yield function, first, number
            function = None


def function_length_violations(source):
    """Rule 9: no function of src/ longer than FUNCTION_LINES_MAX lines."""
    problems = []
    for root, _, files in sorted(os.walk(os.path.join(source, "src"))):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
            for function, first, last in function_spans(lines):
                if last - first + 1 > FUNCTION_LINES_MAX:
                    problems.append(f"{os.path.relpath(path, source)}:{first}: {function} is {last - first + 1} "
                                    f"lines, more than {FUNCTION_LINES_MAX} (docs/design.md): split it")
    return problems


def environment_violations(source):
    """Rule 10: HUGIFY_* is read only through src/lib/options.c."""
    return [f"{path}:{number}: reads a HUGIFY_* variable with getenv: read it through src/lib/options.c's table "
            f"(options_from_environment)"
            for path, number, line in source_lines(source)
            if HUGIFY_GETENV.search(line) and path != os.path.join("src", "lib", "options.c")]


def object_violations(objects):
    if not objects:
        return []
    libc = {}
    uses = object_graph(objects, libc)
    problems = cycle_violations("library", uses)
    for module in sorted(PURE):
        above = sorted(uses.get(module, set()) - PURE)
        if above:
            problems.append(f"{module}.c is a pure parser but uses {', '.join(m + '.c' for m in above)}")
        impure = sorted(s for s in libc.get(module, ()) if not PURE_LIBC.match(s))
        if impure:
            problems.append(f"{module}.c is pure (docs/design.md) but calls {', '.join(impure)}")
    return problems


def object_lists(arguments):
    """The object files of each graph: library (before any --cli/--preload), cli, preload."""
    lists, graph = {"library": [], "cli": [], "preload": []}, "library"
    for argument in arguments:
        if argument in ("--cli", "--preload"):
            graph = argument[2:]
        elif argument.endswith(".o"):
            lists[graph].append(argument)
    return lists


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, objects = sys.argv[1], object_lists(sys.argv[2:])
    problems = (include_violations(source) + name_clashes(source) + errno_convention_violations(source) +
                call_violations(source) + schema_violations(source) + function_length_violations(source) +
                environment_violations(source) + room_include_violations(source) +
                object_violations(objects["library"]))
    if objects["cli"]:
        edges = {}
        problems += cycle_violations("command", object_graph(objects["cli"], edges=edges))
        problems += room_object_violations(source, edges)
    if objects["preload"]:
        problems += cycle_violations("preload", object_graph(objects["preload"]))
    for problem in problems:
        print(problem)
    print(f"layering: {len(problems)} problem(s); objects read: {len(objects['library'])} of the library, "
          f"{len(objects['cli'])} of the command, {len(objects['preload'])} of the preload")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
