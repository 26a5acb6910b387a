#!/usr/bin/env python3
"""kael's GPT-2 tokenizer against tiktoken's, single-threaded, on the same files in one run.

Counts the corpus' bytes once, then encodes the whole corpus `--rounds` times with each,
alternating so both see the same machine load: tiktoken's `encode_ordinary` (one thread per
call) in this process, and kael through build/bench/tokenizer_bench (one thread; a fresh
process and tokenizer, so an empty word cache, each round; only the encoding is timed).
Prints MB/s (10^6 bytes per second) best and median for both and the ratios, and checks
that both produced the same number of tokens.

  python3 bench/tokenizer_vs_tiktoken.py [--rounds 5] [--binary build/bench/tokenizer_bench] [FILE...]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from gpt2_reference import CORPUS_DIR, GPT2_TOKENIZER_DIR, gpt2_encoding  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=pathlib.Path, help="default: every *.txt of the test corpus")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--model", type=pathlib.Path, default=GPT2_TOKENIZER_DIR)
    parser.add_argument("--binary", type=pathlib.Path, default=ROOT / "build" / "bench" / "tokenizer_bench")
    args = parser.parse_args()
    files = args.files or sorted(CORPUS_DIR.glob("*.txt"))
    if not files:
        sys.exit("no input files")
    if not args.binary.exists():
        sys.exit(f"{args.binary} not found: build it (cmake --build build --target tokenizer_bench)")

    texts = [path.read_bytes().decode("utf-8") for path in files]
    total_bytes = sum(path.stat().st_size for path in files)

    encoding = gpt2_encoding(args.model)
    tiktoken_mb_s, kael_mb_s = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        tiktoken_tokens = sum(len(encoding.encode_ordinary(text)) for text in texts)
        tiktoken_mb_s.append(total_bytes / 1e6 / (time.perf_counter() - start))

        kael = json.loads(subprocess.run(
            [str(args.binary), "--model", str(args.model), "--rounds", "1", *map(str, files)],
            check=True, capture_output=True, text=True).stdout)
        if kael["bytes"] != total_bytes or kael["tokens"] != tiktoken_tokens:
            sys.exit(f"mismatch: kael {kael['bytes']} bytes {kael['tokens']} tokens, "
                     f"tiktoken {total_bytes} bytes {tiktoken_tokens} tokens")
        kael_mb_s.append(kael["best_mb_s"])

    t_best, t_median = max(tiktoken_mb_s), statistics.median(tiktoken_mb_s)
    k_best, k_median = max(kael_mb_s), statistics.median(kael_mb_s)
    print(f"corpus: {len(files)} files, {total_bytes} bytes, {tiktoken_tokens} tokens, {args.rounds} rounds, one thread")
    print(f"{'':10} {'best MB/s':>10} {'median MB/s':>12}")
    print(f"{'kael':10} {k_best:10.2f} {k_median:12.2f}")
    print(f"{'tiktoken':10} {t_best:10.2f} {t_median:12.2f}")
    print(f"{'ratio':10} {k_best / t_best:10.2f} {k_median / t_median:12.2f}")


if __name__ == "__main__":
    main()
