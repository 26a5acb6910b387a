#!/usr/bin/env python3
"""A load test of `kael serve`: waves of concurrent streaming clients (64, then 256 against a
bounded queue, by default) on the GPT-2 small shape (a seeded checkpoint, 124M parameters),
printing for each wave the aggregate tokens/s, time to first token p50/p95/p99, and the
answers by status. Nothing may be lost or corrupted: every client gets a status (200 or a
clean 503 from the full queue), and every completed greedy stream has all its tokens and the
same text as its prompt run alone. Exits 1 otherwise.

The clients are light: one asyncio task per client on raw sockets (no thread, no HTTP
library), so 256 of them cost the machine far less than the server does. Client i sends
prompt i % --prompts; each distinct prompt is first run alone for the reference text.

Usage: bench/serve_load.py [--kael build/kael] [--model DIR | --shape small|test]
       [--waves 64,256] [--tokens 32] [--max-batch 32] [--max-queue 64] [--prompts 16]
"""
import argparse
import asyncio
import collections
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "python"))  # the server helpers the tests use
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from serve_concurrency import cpu_name  # noqa: E402


class Answer:
    """What one client got: status (an int, or a word for a transport failure), the seconds to
    the first event, and for a 200 the streamed text and completion tokens."""

    def __init__(self, status, first_event=None, text=None, tokens=0):
        self.status, self.first_event, self.text, self.tokens = status, first_event, text, tokens


async def stream_client(port, body: dict, started: float) -> Answer:
    from test_serve_support import HOST, dechunk, joined_text, parse_sse

    data = json.dumps({**body, "stream": True}).encode()
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as e:
        return Answer(f"connect: {type(e).__name__}")
    try:
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: kael\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode()
                     + b"\r\n\r\n" + data)
        await writer.drain()
        received, first_event = b"", None
        while chunk := await reader.read(1 << 16):
            received += chunk
            if first_event is None and b"data: " in received:
                first_event = time.perf_counter() - started
    except OSError as e:
        return Answer(f"read: {type(e).__name__}")
    finally:
        writer.close()
    head, _, rest = received.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return Answer("no status line")
    if status != 200:
        return Answer(status)
    try:
        payloads = parse_sse(dechunk(rest))
        return Answer(200, first_event, joined_text(payloads), payloads[-1]["usage"]["completion_tokens"])
    except (AssertionError, ValueError, KeyError, IndexError):
        return Answer("corrupt stream", first_event)


def request_body(prompt_index, tokens):
    from test_serve_support import prompt_for

    return {"prompt": prompt_for(prompt_index), "max_tokens": tokens, "temperature": 0, "ignore_eos": True}


async def wave(port, clients, tokens, prompts):
    """All `clients` at once: (answers, wall seconds from the first send to the last answer)."""
    started = time.perf_counter()
    answers = await asyncio.gather(*(stream_client(port, request_body(i % prompts, tokens), started)
                                     for i in range(clients)))
    return answers, time.perf_counter() - started


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def check(answers, solo, prompts, tokens):
    """Problems: anything but a whole, correct stream or a clean 503."""
    problems = []
    for i, a in enumerate(answers):
        if a.status == 200:
            if a.tokens != tokens:
                problems.append(f"client {i}: {a.tokens} of {tokens} tokens")
            elif a.text != solo[i % prompts]:
                problems.append(f"client {i}: the text differs from the same prompt run alone")
        elif a.status != 503:
            problems.append(f"client {i}: {a.status}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kael", default=str(ROOT / "build" / "kael"))
    parser.add_argument("--model", help="a kael --model directory (default: build a seeded checkpoint of --shape)")
    parser.add_argument("--shape", choices=["small", "test"], default="small",
                        help="small: GPT-2 small (12 layers, width 768); test: the server tests' 4 layers, width 256")
    parser.add_argument("--waves", default="64,256", help="clients per wave, comma-separated")
    parser.add_argument("--tokens", type=int, default=32, help="tokens each client streams")
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--max-queue", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=16, help="distinct prompts (each also run alone)")
    parser.add_argument("--threads", type=int, help="kael serve --threads (default: its own)")
    args = parser.parse_args()
    os.environ["KAEL_BINARY"] = str(pathlib.Path(args.kael).resolve())
    waves = [int(n) for n in args.waves.split(",")]

    import gpt2_reference
    from test_serve_support import Server, joined_text, small_checkpoint

    with tempfile.TemporaryDirectory(prefix="kael_serve_load_") as work:
        if args.model:
            model, shape = pathlib.Path(args.model), f"--model {args.model}"
        elif args.shape == "small":
            model = gpt2_reference.make_checkpoint(pathlib.Path(work) / "model", seed=1)
            shape = "GPT-2 small shape (124M parameters, seeded), f32"
        else:
            model, shape = small_checkpoint(pathlib.Path(work) / "model"), "test shape (4 layers, width 256), f32"
        extra = ("--threads", args.threads) if args.threads else ()
        # Enough connections for the largest wave: past them, the front would refuse at once.
        connections = max(waves) + 16
        with Server(model, "--max-batch", args.max_batch, "--max-queue", args.max_queue,
                    "--max-connections", connections, *extra, log_dir=work) as server:
            solo = [joined_text(server.stream(**request_body(p, args.tokens))[0]) for p in range(args.prompts)]
            rows, failed = [], False
            for clients in waves:
                answers, wall = asyncio.run(wave(server.port, clients, args.tokens, args.prompts))
                load = os.getloadavg()[0]
                problems = check(answers, solo, args.prompts, args.tokens)
                for p in problems[:10]:
                    print(f"  {clients} clients: {p}", file=sys.stderr)
                failed |= bool(problems)
                by_status = collections.Counter(str(a.status) for a in answers)
                done = [a for a in answers if a.status == 200]
                ttft = [a.first_event for a in done]
                rows.append((clients, len(done), ", ".join(f"{n}x {s}" for s, n in sorted(by_status.items())),
                             sum(a.tokens for a in done) / wall,
                             *(f"{percentile(ttft, q):.2f}" if ttft else "-" for q in (50, 95, 99)),
                             wall, load, "ok" if not problems else f"{len(problems)} wrong"))
    print(f"\n{cpu_name()}, {os.cpu_count()} CPUs; {shape}; kael serve --max-batch {args.max_batch} "
          f"--max-queue {args.max_queue}; every client streams {args.tokens} greedy tokens\n")
    print("| clients | completed | answers by status | tokens/s (aggregate) | TTFT p50 (s) | p95 | p99 "
          "| wall (s) | load average | each text = its solo run |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for clients, completed, statuses, rate, p50, p95, p99, wall, load, verdict in rows:
        print(f"| {clients} | {completed} | {statuses} | {rate:.1f} | {p50} | {p95} | {p99} | {wall:.1f} | "
              f"{load:.1f} | {verdict} |")
    if failed:
        sys.exit("a stream was lost or corrupted (see above)")


if __name__ == "__main__":
    main()
