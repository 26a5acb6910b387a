#!/usr/bin/env python3
"""A/B of the 512-token prefill (or, with --decode N, of N batch-1 decode steps) on a noisy host:
runs `kael bench --prompt-tokens P --max-tokens 1 --json --thread-busy` (--max-tokens N) for two
or more configurations (a binary and KAEL_* settings) in turns, each round in the opposite order
of the last, and prints per configuration the median and best wall time, process CPU time and
busier thread's CPU time inside the timed part's parallel calls, the
runs in which both threads ran side by side (wall time within 1.1x the busier thread's CPU
time), and per pair of the first configuration with each other one the median ratio and how many
pairs were faster. The CPU model and the load average are printed beside them.

Usage: bench/prefill_ab.py --model DIR [--rounds 10] [--threads 2] [--prompt-tokens 512] [--decode N] [--dtype f32]
           LABEL=BINARY[,VAR=VALUE...] LABEL=BINARY[,VAR=VALUE...] ...
e.g.   bench/prefill_ab.py --model /tmp/kael_compare/gpt2-small-seeded \\
           amx=build/kael avx512=build/kael,KAEL_ISA=avx512
       bench/prefill_ab.py --model DIR --threads 16 --prompt-tokens 16 --decode 128 old=old/kael new=build/kael
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from cpu_name import cpu_name


def load_average() -> float:
    return os.getloadavg()[0]


def parse_config(text: str) -> tuple:
    label, _, rest = text.partition("=")
    binary, *settings = rest.split(",")
    if not label or not binary:
        raise SystemExit(f"error: configuration '{text}' is not LABEL=BINARY[,VAR=VALUE...]")
    env = dict(os.environ)
    for s in settings:
        name, sep, value = s.partition("=")
        if not sep:
            raise SystemExit(f"error: setting '{s}' in '{text}' is not VAR=VALUE")
        env[name] = value
    return label, binary, env


def run_once(binary: str, env: dict, args) -> dict:
    part = "decode" if args.decode else "prefill"
    cmd = [binary, "bench", "--model", args.model, "--prompt-tokens", str(args.prompt_tokens), "--max-tokens",
           str(args.decode or 1), "--threads", str(args.threads), "--dtype", args.dtype, "--json", "--thread-busy"]
    load = load_average()
    out = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    # A binary from before kael bench counted decode has no decode_thread_busy: nan there.
    busy = out.get(f"{part}_thread_busy", {"total": {"task_cpu_ms": [math.nan]}})["total"]
    # With one thread no call goes to the pool, so no thread's time is counted in one: nan.
    return {"wall": out[f"{part}_ms"], "cpu": out[f"{part}_cpu_ms"], "busiest": max(busy["task_cpu_ms"] or [math.nan]),
            "threads_cpu": busy["task_cpu_ms"], "isa": out["isa"], "load": load}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--dtype", default="f32", choices=["f32", "f16", "int8", "bf16"],
                        help="weight type kael bench converts to at load")
    parser.add_argument("--decode", type=int, default=0, metavar="N",
                        help="time N batch-1 decode steps after the prompt instead of the prefill")
    parser.add_argument("configs", nargs="+")
    args = parser.parse_args()
    if len(args.configs) < 2:
        parser.error("give at least two configurations")
    configs = [parse_config(c) for c in args.configs]
    runs = {label: [] for label, _, _ in configs}
    for r in range(args.rounds):
        for label, binary, env in (configs if r % 2 == 0 else configs[::-1]):
            runs[label].append(run_once(binary, env, args))
    timed = f"{args.decode} decode steps after a {args.prompt_tokens}-token prompt" if args.decode else \
        f"{args.prompt_tokens}-token prefill"
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; {args.rounds} rounds, {args.threads} threads, {timed}, {args.dtype} weights")
    print("| config | isa | wall ms median / best | CPU ms median / best | busier thread CPU ms median / best "
          "| side by side | load average |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for label, rs in runs.items():
        def fig(key):
            return f"{statistics.median(r[key] for r in rs):.1f} / {min(r[key] for r in rs):.1f}"
        side = sum(r["wall"] < 1.1 * r["busiest"] for r in rs)
        loads = [r["load"] for r in rs]
        print(f"| {label} | {rs[0]['isa']} | {fig('wall')} | {fig('cpu')} | {fig('busiest')} | {side} of {len(rs)} "
              f"| {min(loads):.1f}-{max(loads):.1f} |")
    first = configs[0][0]
    for label, _, _ in configs[1:]:
        for key in ("wall", "cpu", "busiest"):
            ratios = [b[key] / a[key] for a, b in zip(runs[first], runs[label])]
            faster = sum(x < 1 for x in ratios)
            print(f"{label} / {first} {key}: median ratio {statistics.median(ratios):.3f}, "
                  f"{label} faster in {faster} of {len(ratios)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
