#!/usr/bin/env python3
"""Speed and memory of kael's weight storage types against F32, measured in alternation so that
a shared host's drift hits every type alike.

Each round runs `kael bench --json --dtype D` once per dtype (f32 first), batch 1; the ratios
are taken within a round and the medians over rounds are printed: decode tokens/s, prefill
tokens/s, peak RSS and load time.

  bench/dtype_speed.py --kael build/kael --model DIR [--rounds 6] [--dtypes f32,f16,int8]
                       [--threads 2] [--tokens 128] [--prompt 128] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys


def bench(kael, model, dtype, threads, tokens, prompt):
    out = subprocess.run([kael, "bench", "--json", "--model", model, "--dtype", dtype, "--threads", str(threads),
                          "--max-tokens", str(tokens), "--prompt-tokens", str(prompt)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kael", required=True)
    parser.add_argument("--model", required=True, help="checkpoint directory")
    parser.add_argument("--dtypes", default="f32,f16,int8")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128, help="decode steps per run")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens (the prefill timed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    dtypes = args.dtypes.split(",")
    if dtypes[0] != "f32":
        dtypes = ["f32"] + [d for d in dtypes if d != "f32"]

    runs = {d: [] for d in dtypes}
    for _ in range(args.rounds):
        for d in dtypes:
            runs[d].append(bench(args.kael, args.model, d, args.threads, args.tokens, args.prompt))

    def median(d, key):
        return statistics.median(r[key] for r in runs[d])

    def ratio(d, key):
        return statistics.median(a[key] / b[key] for a, b in zip(runs[d], runs["f32"]))

    table = {}
    for d in dtypes:
        decode = [r["decode_tok_s"] for r in runs[d]]
        table[d] = {"decode_tok_s": median(d, "decode_tok_s"), "decode_min": min(decode), "decode_max": max(decode),
                    "decode_vs_f32": ratio(d, "decode_tok_s"), "prefill_tok_s": median(d, "prefill_tok_s"),
                    "prefill_vs_f32": ratio(d, "prefill_tok_s"), "peak_rss_mb": median(d, "peak_rss_mb"),
                    "load_ms": median(d, "load_ms"), "int8_dot": runs[d][0].get("int8_dot")}
    if args.json:
        print(json.dumps({"rounds": args.rounds, "threads": args.threads, "dtypes": table}, indent=1))
        return 0
    print(f"kael bench, batch 1, {args.threads} threads, {args.rounds} rounds alternating {','.join(dtypes)}; "
          f"medians (decode range in brackets); ratios are medians of per-round ratios")
    print(f"{'dtype':6} {'decode tok/s':>22} {'vs f32':>7} {'prefill tok/s':>14} {'vs f32':>7} {'peak RSS MB':>12} "
          f"{'load ms':>8}")
    for d, r in table.items():
        span = f"{r['decode_tok_s']:.1f} [{r['decode_min']:.0f}-{r['decode_max']:.0f}]"
        print(f"{d:6} {span:>22} {r['decode_vs_f32']:6.2f}x {r['prefill_tok_s']:14.1f} {r['prefill_vs_f32']:6.2f}x "
              f"{r['peak_rss_mb']:12.1f} {r['load_ms']:8.0f}")
    if "int8" in table:
        print(f"int8 dot product: {table['int8']['int8_dot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
