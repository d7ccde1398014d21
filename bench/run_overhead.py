#!/usr/bin/env python3
"""run_overhead.py - what `hugify env`'s environment and `hugify run` cost a short-lived program.

Runs each workload under several configurations, alternated round by round (each round starts with a
different configuration, so no configuration always runs first or after the same one), and prints the
median CPU time (user + system of the child and everything it waited for: getrusage of the child via
wait4) of each, and its ratio to plain: the median of the per-round ratios (paired within a round) and the
ratio of the medians.

Configurations:
  plain      nothing set
  env        the variables of `hugify env` (what every process of `hugify run -- make` gets)
  preload    LD_PRELOAD alone, HUGIFY_HEAP=off, HUGIFY_TEXT=0: loading the preload and its constructor
  env-heap   env without HUGIFY_TEXT (the heap settings alone)
  env-text   env without GLIBC_TUNABLES (the text step alone)
  env-now    env with HUGIFY_TEXT=1: the text remapped before main (the old default)
  run        hugify run -- CMD (the CLI's own start included: it execs CMD)

Workloads: true (/bin/true), gcc (g++ -O2 -c small.c, a two-line file), or --command 'CMD ARGS'.

  bench/run_overhead.py [--rounds 15] [--hugify build/bin/hugify] [--workloads true,gcc]
                        [--configs plain,env,preload,run] [--command 'CMD ...'] [--json]
                        [--variant 'NAME:VAR=VALUE;VAR=VALUE' ...]   (env with changes; VAR= unsets)
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

CONFIGS = ["plain", "env", "preload", "env-heap", "env-text", "env-now", "run"]


def run_once(argv, env):
    # posix_spawn (vfork + exec): the child's CPU time is the exec'd program's, not a copy of this Python's
    path = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    pid = os.posix_spawn(path, argv, env, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run_overhead: {' '.join(argv)} failed with status {status}")
    return usage.ru_utime + usage.ru_stime


def hugify_environment(hugify):
    out = subprocess.run([hugify, "env", "--json"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    return doc["variables"], doc.get("unset", [])


def config_command(name, argv, hugify, variables, unset, variants):
    env = dict(os.environ)
    for key in unset:
        env.pop(key, None)
    for key in list(env):
        if key.startswith("HUGIFY_") or key in ("LD_PRELOAD", "GLIBC_TUNABLES"):
            del env[key]
    if name == "plain":
        return argv, env
    if name == "run":
        return [hugify, "run", "--"] + argv, env
    if name == "run-before":
        return [variants["run-before-hugify"], "run", "--"] + argv, env
    env.update(variables)
    if name in variants:
        for key, value in variants[name].items():
            if value:
                env[key] = value
            else:
                env.pop(key, None)
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


def measure(workload, argv, configs, rounds, hugify, variables, unset, variants):
    commands = {name: config_command(name, argv, hugify, variables, unset, variants) for name in configs}
    for name in configs:  # warm the page cache and the dynamic loader's files
        run_once(*commands[name])
    cpu = {name: [] for name in configs}
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        if (r // len(configs)) % 2:
            order.reverse()
        for name in order:
            cpu[name].append(run_once(*commands[name]))
    plain = cpu.get("plain")
    result = {"workload": workload, "command": argv, "rounds": rounds, "configs": []}
    for name in configs:
        entry = {"name": name, "cpu_seconds": statistics.median(cpu[name])}
        if plain:
            entry["ratio"] = statistics.median(c / p for c, p in zip(cpu[name], plain))
            entry["ratio_of_medians"] = entry["cpu_seconds"] / statistics.median(plain)
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = args.configs.split(",")
    variants = {}
    for text in args.variant:
        name, _, settings = text.partition(":")
        variants[name] = dict(item.partition("=")[::2] for item in settings.split(";") if item)
        configs.append(name)
    for name in configs:
        if name not in CONFIGS and name not in variants:
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
    workloads = {"true": ["/bin/true"], "gcc": ["g++", "-O2", "-c", source, "-o", os.path.join(workdir, "small.o")]}
    chosen = [("command", shlex.split(args.command))] if args.command else \
        [(w, workloads[w]) for w in args.workloads.split(",")]
    results = []
    for workload, argv in chosen:
        results.append(measure(workload, argv, configs, args.rounds, args.hugify, variables, unset, variants))
    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[:3]
    if args.json:
        print(json.dumps({"schema": "hugify.run_overhead/1", "loadavg": loadavg, "results": results}, indent=2))
    else:
        for result in results:
            print(f"{result['workload']}: {' '.join(result['command'])}  ({result['rounds']} alternated rounds)")
            for entry in result["configs"]:
                ratio = f"  {entry['ratio']:.3f}x plain (paired), {entry['ratio_of_medians']:.3f}x (medians)" \
                    if "ratio" in entry else ""
                print(f"  {entry['name']:9} {entry['cpu_seconds'] * 1e3:8.2f} ms CPU{ratio}")
        print(f"load average {' '.join(loadavg)}")
    for name in os.listdir(workdir):
        os.unlink(os.path.join(workdir, name))
    os.rmdir(workdir)


if __name__ == "__main__":
    main()
