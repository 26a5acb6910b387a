#!/usr/bin/env python3
"""Generate text with kael from Python, mirroring `kael generate`.

    python3 examples/generate.py --model data/gpt2 "Hello, my name is" --max-tokens 40
    python3 examples/generate.py --model data/gpt2 "Hello" --benchmark

--benchmark times greedy generation twice: with the KV cache (Model.stream, one new token a
step) and without it (Model.logits on the whole sequence every step), checks that both chose
the same tokens, and prints tokens/s for each and the ratio.
"""
import argparse
import json
import sys
import time

import numpy as np

import kael


def benchmark(model: kael.Model, prompt: str, max_tokens: int) -> None:
    ids = model.tokenizer.encode(prompt)
    start = time.perf_counter()
    stream = model.stream(ids, max_tokens=max_tokens, temperature=0, ignore_eos=True)
    for _ in stream:
        pass
    cached_s = time.perf_counter() - start
    cached_ids = stream.ids

    start = time.perf_counter()
    sequence, recomputed_ids = list(ids), []
    for _ in range(len(cached_ids)):
        token = int(np.argmax(model.logits(sequence)))
        recomputed_ids.append(token)
        sequence.append(token)
    recompute_s = time.perf_counter() - start

    n = len(cached_ids)
    print(json.dumps({
        "prompt_tokens": len(ids), "generated_tokens": n,
        "with_kv_cache_tok_s": round(n / cached_s, 2),
        "without_kv_cache_tok_s": round(n / recompute_s, 2),
        "speedup": round(recompute_s / cached_s, 2),
        "same_tokens": cached_ids == recomputed_ids,
    }))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prompt", nargs="?", default="Hello, my name is")
    parser.add_argument("--model", default="data/gpt2")
    parser.add_argument("--max-tokens", type=int, default=60)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--benchmark", action="store_true")
    args = parser.parse_args()
    try:
        model = kael.Model.from_pretrained(args.model, threads=args.threads)
        if args.benchmark:
            benchmark(model, args.prompt, args.max_tokens)
            return 0
        for piece in model.stream(args.prompt, max_tokens=args.max_tokens,
                                  temperature=0.0 if args.greedy else args.temperature, top_k=args.top_k,
                                  top_p=args.top_p, seed=args.seed, ignore_eos=args.ignore_eos):
            print(piece, end="", flush=True)
        print()
    except kael.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
