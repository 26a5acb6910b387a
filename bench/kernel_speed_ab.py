#!/usr/bin/env python3
"""A/B of build/bench/kernel_speed between builds (or weight types) on a noisy host: runs each
configuration in turns for several rounds and prints, per line of kernel_speed's output, the best
figure of each configuration and its ratio to the first: the wall-clock GFLOP/s of the 12 layers'
products at T rows, and the per-core GFLOP/s of each block shape (and attention) at 512 rows. The
CPU model is printed first.

Usage: bench/kernel_speed_ab.py [--rounds 5] [--threads 2] ISA CONFIG CONFIG ...
  CONFIG = PATH_TO_kernel_speed[:DTYPE] (f32, f16 or int8; default f32)
e.g.   bench/kernel_speed_ab.py avx512 /tmp/old/kernel_speed build/bench/kernel_speed
       bench/kernel_speed_ab.py avx2 build/bench/kernel_speed:f32 build/bench/kernel_speed:f16
"""
import argparse
import collections
import os
import re
import subprocess
from cpu_name import cpu_name

TOTAL = re.compile(r"T=\s*(\d+)\s+[\d.]+ ms\s+[\d.]+ GB/s\s+([\d.]+) GFLOP/s wall")
SHAPE = re.compile(r"T=512\s+(\S+(?: 12x64)?)\s+([\d.]+) GFLOP/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("isa")
    parser.add_argument("configs", nargs="+")
    args = parser.parse_args()
    for config in args.configs:
        path, _, dtype = config.partition(":")
        if not os.access(path, os.X_OK):
            parser.error(f"{path}: not an executable kernel_speed")
        if dtype not in ("", "f32", "f16", "int8"):
            parser.error(f"{config}: the weight type must be f32, f16 or int8")
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1")
    best = collections.defaultdict(dict)  # line -> config -> best figure
    for _ in range(args.rounds):
        for config in args.configs:
            path, _, dtype = config.partition(":")
            out = subprocess.run([path, str(args.threads), args.isa, dtype or "f32"], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                if m := TOTAL.match(line):
                    key = f"T={m.group(1)} wall"
                elif m := SHAPE.match(line):
                    key = f"512 {m.group(1)} per core"
                else:
                    continue
                best[key][config] = max(best[key].get(config, 0.0), float(m.group(2)))
    print(f"CPU: {cpu_name()}; isa {args.isa}, {args.threads} threads, best of {args.rounds} rounds in turns")
    print("GFLOP/s: " + " | ".join(args.configs))
    for key, figures in best.items():
        values = [figures.get(c, 0.0) for c in args.configs]
        ratios = " ".join(f"{v / values[0]:.2f}" for v in values[1:]) if values[0] else "-"
        print(f"{key:26}" + "".join(f"{v:9.1f}" for v in values) + f"   ratio to the first: {ratios}")


if __name__ == "__main__":
    main()
