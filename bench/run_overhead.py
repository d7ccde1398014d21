#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run_overhead.py - what `hugify env`'s environment and `hugify run` cost a short-lived program.

Runs each workload under several configurations, alternated round by round (each round starts with a
different configuration, so no configuration always runs first or after the same one), and prints the
median CPU time (user + system of the child and everything it waited for: getrusage of the child via
wait4) of each, and its ratio to plain: the median of the per-round ratios (paired within a round) and the
ratio of the medians.

Configurations:
  plain      nothing set
  empty      LD_PRELOAD of an empty shared library (built here): the floor of any preload, loaded and
             relocated, with no constructor
  env        the variables of `hugify env` (what every process of `hugify run -- make` gets)
  preload    LD_PRELOAD alone, HUGIFY_HEAP=off, HUGIFY_TEXT=0: loading the preload and its constructor
  env-heap   env without HUGIFY_TEXT (the heap settings alone)
  env-text   env without GLIBC_TUNABLES (the text step alone)
  env-now    env with HUGIFY_TEXT=1: the text remapped before main (the old default)
  run        hugify run -- CMD (the CLI's own start included: it execs CMD)

Workloads: true (/bin/true), gcc (g++ -O2 -c small.c, a two-line file), or --command 'CMD ARGS'.

With --printed, the figures compared are the ones the command prints on stdout instead: every NAME=NUMBER
word, or else the first number it prints (as `printed`), e.g. bench/runtimes/dict_lookup.py's lookup
seconds; each is summarised as the CPU time is (median, paired per-round ratio to plain).

  bench/run_overhead.py [--rounds 15] [--hugify build/bin/hugify] [--workloads true,gcc]
                        [--configs plain,env,preload,run] [--command 'CMD ...'] [--json] [--printed]
                        [--variant 'NAME:VAR=VALUE;VAR=VALUE' ...]   (env with changes; VAR= unsets)
                        [--run-variant 'NAME:VAR=VALUE;...' ...]     (hugify run -- CMD with these set)
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

CONFIGS = ["plain", "empty", "env", "preload", "env-heap", "env-text", "env-now", "run"]


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def printed_figures(text):
    """The NAME=NUMBER words of a command's output, or else its first number as `printed`."""
    named = {name: float(value) for name, value in re.findall(r"(\w+)=(" + NUMBER + r")\b", text)}
    if named:
        return named
    first = re.search(NUMBER, text)
    return {"printed": float(first.group())} if first else {}


def run_once(argv, env, printed=False):
    """{"cpu_seconds": user + system of the child}, or with `printed` the figures its stdout names."""
    # posix_spawn (vfork + exec): the child's CPU time is the exec'd program's, not a copy of this Python's
    path = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    output = tempfile.TemporaryFile() if printed else None
    stdout = [(os.POSIX_SPAWN_DUP2, output.fileno(), 1)] if printed else \
        [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
    pid = os.posix_spawn(path, argv, env, file_actions=stdout)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run_overhead: {' '.join(argv)} failed with status {status}")
    if not printed:
        return {"cpu_seconds": usage.ru_utime + usage.ru_stime}
    output.seek(0)
    figures = printed_figures(output.read().decode(errors="replace"))
    if not figures:
        sys.exit(f"run_overhead: {' '.join(argv)} printed no figure")
    return figures


def hugify_environment(hugify):
    out = subprocess.run([hugify, "env", "--json"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    return doc["variables"], doc.get("unset", [])


def apply_changes(env, changes):
    """A variant's VAR=VALUE changes to env; an empty VALUE removes VAR."""
    for key, value in changes.items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)


def parse_variant(text):
    """'NAME:VAR=VALUE;VAR=VALUE' -> (NAME, {VAR: VALUE})"""
    name, _, settings = text.partition(":")
    return name, dict(item.partition("=")[::2] for item in settings.split(";") if item)


def config_command(name, argv, hugify, variables, unset, variants):
    env = dict(os.environ)
    for key in unset:
        env.pop(key, None)
    for key in list(env):
        if key.startswith("HUGIFY_") or key in ("LD_PRELOAD", "GLIBC_TUNABLES"):
            del env[key]
    if name == "plain":
        return argv, env
    if name == "empty":
        env["LD_PRELOAD"] = variants["empty-library"]
        return argv, env
    if name == "run":
        return [hugify, "run", "--"] + argv, env
    if name in variants.get("run-variants", {}):
        apply_changes(env, variants["run-variants"][name])
        return [hugify, "run", "--"] + argv, env
    if name == "run-before":
        return [variants["run-before-hugify"], "run", "--"] + argv, env
    env.update(variables)
    if name in variants:
        apply_changes(env, variants[name])
        return argv, env
    if name == "preload":
        env = {k: v for k, v in env.items() if k != "GLIBC_TUNABLES"}
        env.update({"HUGIFY_HEAP": "off", "HUGIFY_TEXT": "0"})
    elif name == "env-heap":
        env["HUGIFY_TEXT"] = "0"
    elif name == "env-text":
        env.pop("GLIBC_TUNABLES", None)
    elif name == "env-now":
        env["HUGIFY_TEXT"] = "1"
    return argv, env


def summarise(values, plain):
    """Median, and against plain's values of the same rounds the median paired ratio and the ratio of medians."""
    entry = {"median": statistics.median(values), "values": values}
    if plain and all(p != 0 for p in plain):
        entry["ratio"] = statistics.median(v / p for v, p in zip(values, plain))
        entry["ratio_of_medians"] = entry["median"] / statistics.median(plain) if statistics.median(plain) else None
    return entry


def measure(workload, argv, configs, rounds, hugify, variables, unset, variants, printed=False):
    commands = {name: config_command(name, argv, hugify, variables, unset, variants) for name in configs}
    for name in configs:  # warm the page cache and the dynamic loader's files
        run_once(*commands[name], printed)
    runs = {name: [] for name in configs}
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        if (r // len(configs)) % 2:
            order.reverse()
        for name in order:
            runs[name].append(run_once(*commands[name], printed))
    result = {"workload": workload, "command": argv, "rounds": rounds, "configs": []}
    for name in configs:
        figures = {}
        for figure in runs[name][0]:
            values = [run.get(figure, float("nan")) for run in runs[name]]
            plain = [run.get(figure, float("nan")) for run in runs["plain"]] if "plain" in runs else None
            figures[figure] = summarise(values, plain)
        entry = {"name": name}
        if "cpu_seconds" in figures:  # the original shape: cpu_seconds, ratio, ratio_of_medians
            entry.update({"cpu_seconds": figures["cpu_seconds"]["median"]},
                         **{k: figures["cpu_seconds"][k] for k in ("ratio", "ratio_of_medians") if k in figures["cpu_seconds"]})
            mine = figures["cpu_seconds"]["values"]
            if "empty" in runs and name != "empty":  # against the floor of the same rounds, paired
                empty = [run["cpu_seconds"] for run in runs["empty"]]
                entry["ratio_to_empty"] = statistics.median(v / e for v, e in zip(mine, empty) if e)
            if "plain" in runs and name != "plain":  # what it adds, paired (seconds)
                plain_cpu = [run["cpu_seconds"] for run in runs["plain"]]
                entry["added_seconds"] = statistics.median(v - p for v, p in zip(mine, plain_cpu))
        else:
            entry["figures"] = figures
        result["configs"].append(entry)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--hugify", default="build/bin/hugify")
    parser.add_argument("--workloads", default="true,gcc")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--command", help="measure this command instead of the workloads")
    parser.add_argument("--before", metavar="HUGIFY",
                        help="also measure env-before and run-before: another hugify build (e.g. main's) in the same rounds")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME:VAR=VALUE[;VAR=VALUE...]: env with these changes (VAR= removes VAR)")
    parser.add_argument("--run-variant", action="append", default=[],
                        help="NAME:VAR=VALUE[;VAR=VALUE...]: hugify run -- CMD with these variables set")
    parser.add_argument("--printed", action="store_true",
                        help="compare the NAME=NUMBER figures (else the first number) the command prints, not CPU time")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = args.configs.split(",")
    variants = {}
    for text in args.variant:
        name, changes = parse_variant(text)
        variants[name] = changes
        configs.append(name)
    variants["run-variants"] = {}
    for text in args.run_variant:
        name, changes = parse_variant(text)
        variants["run-variants"][name] = changes
        configs.append(name)
    for name in configs:
        if name not in CONFIGS and name not in variants and name not in variants["run-variants"]:
            sys.exit(f"run_overhead: unknown configuration {name}; expected one of {', '.join(CONFIGS)}")
    variables, unset = hugify_environment(args.hugify)
    if args.before:
        before_variables, before_unset = hugify_environment(args.before)
        variants["env-before"] = dict({k: "" for k in variables}, **before_variables)
        variants["run-before"] = {}
        variants["run-before-hugify"] = args.before
        configs += ["env-before", "run-before"]
    workdir = tempfile.mkdtemp(prefix="hugify-run-overhead-")
    source = os.path.join(workdir, "small.c")
    with open(source, "w") as f:
        f.write("int square(int x) { return x * x; }\nint main(void) { return square(3) - 9; }\n")
    if "empty" in configs:
        empty = os.path.join(workdir, "libempty.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "/dev/null", "-o", empty], check=True)
        variants["empty-library"] = empty
    workloads = {"true": ["/bin/true"], "gcc": ["g++", "-O2", "-c", source, "-o", os.path.join(workdir, "small.o")]}
    chosen = [("command", shlex.split(args.command))] if args.command else \
        [(w, workloads[w]) for w in args.workloads.split(",")]
    results = []
    for workload, argv in chosen:
        results.append(measure(workload, argv, configs, args.rounds, args.hugify, variables, unset, variants,
                               args.printed))
    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[:3]
    if args.json:
        print(json.dumps({"schema": "hugify.run_overhead/1", "loadavg": loadavg, "results": results}, indent=2))
    else:
        for result in results:
            print(f"{result['workload']}: {' '.join(result['command'])}  ({result['rounds']} alternated rounds)")
            for entry in result["configs"]:
                if "figures" in entry:
                    for figure, summary in entry["figures"].items():
                        ratio = f"  {summary['ratio']:.3f}x plain (paired), {summary['ratio_of_medians']:.3f}x (medians)" \
                            if summary.get("ratio_of_medians") is not None and "ratio" in summary else ""
                        values = " ".join(f"{v:g}" for v in summary["values"])
                        print(f"  {entry['name']:9} {figure:16} {summary['median']:10.4g}{ratio}  [{values}]")
                    continue
                ratio = f"  {entry['ratio']:.3f}x plain (paired), {entry['ratio_of_medians']:.3f}x (medians)" \
                    if "ratio" in entry else ""
                if "added_seconds" in entry:
                    ratio += f", +{entry['added_seconds'] * 1e3:.2f} ms"
                if "ratio_to_empty" in entry:
                    ratio += f", {entry['ratio_to_empty']:.3f}x empty"
                print(f"  {entry['name']:9} {entry['cpu_seconds'] * 1e3:8.2f} ms CPU{ratio}")
        print(f"load average {' '.join(loadavg)}")
    for name in os.listdir(workdir):
        os.unlink(os.path.join(workdir, name))
    os.rmdir(workdir)


if __name__ == "__main__":
    main()
