#!/usr/bin/env python3
"""`kael serve` with many clients at once against one client: the throughput continuous
batching buys. It starts the server on a small seeded checkpoint (4 layers, width 256, the one
the server tests use), makes the same greedy requests one after another from one client and
then all at once from --clients clients, and prints both rates, their ratio and the server's
mean decode batch, with the CPU and the load average beside them. Every concurrent stream
must equal the same request run alone (tests/python/test_serve_concurrency.py checks that
too, but not the timing, which a shared machine makes noisy).

Usage: bench/serve_concurrency.py [--kael build/kael] [--model DIR] [--clients 16] [--tokens 192]
       [--rounds 3] [--threads N]
"""
import argparse
import os
import pathlib
import statistics
import sys
import tempfile
from cpu_name import cpu_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "python"))  # the server helpers the tests use
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kael", default=str(ROOT / "build" / "kael"))
    parser.add_argument("--model", help="a kael --model directory (default: build the small seeded checkpoint)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="kael serve --threads (default: its own)")
    args = parser.parse_args()
    os.environ["KAEL_BINARY"] = str(pathlib.Path(args.kael).resolve())

    from test_serve_support import Server, sequential_then_concurrent, small_checkpoint

    with tempfile.TemporaryDirectory(prefix="kael_serve_bench_") as work:
        model = pathlib.Path(args.model) if args.model else small_checkpoint(pathlib.Path(work) / "model")
        extra = ("--threads", args.threads) if args.threads else ()
        ratios = []
        with Server(model, "--max-batch", args.clients, *extra, log_dir=work) as server:
            for round_ in range(1, args.rounds + 1):
                run = sequential_then_concurrent(server, args.clients, args.tokens)
                if run["together"] != run["alone"]:
                    sys.exit("a concurrent stream differs from the same request run alone")
                ratio = run["aggregate"] / run["single"]
                ratios.append(ratio)
                print(f"round {round_}: 1 client {run['single']:.1f} tokens/s, {args.clients} clients "
                      f"{run['aggregate']:.1f} tokens/s aggregate, ratio {ratio:.2f}x, mean decode batch "
                      f"{run['mean_batch']:.1f}, load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{cpu_name()}, {os.cpu_count()} CPUs; greedy streams of {args.tokens} tokens: "
          f"{args.clients} concurrent clients / 1 client = median {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
