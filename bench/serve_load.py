#!/usr/bin/env python3
"""A load test of `kael serve`: waves of concurrent streaming clients (64, then 256 against a
bounded queue, by default) on the GPT-2 small shape (a seeded checkpoint, 124M parameters),
printing for each wave the aggregate tokens/s, time to first token p50/p95/p99, and the
answers by status. Nothing may be lost, corrupted or left hanging: every client gets a status
within CLIENT_TIMEOUT (200, or a clean 503 with Retry-After from the full queue), and every
completed greedy stream has all its tokens and the same text as its prompt run alone.

--idle N: after the first wave, N idle keep-alive connections are opened (each asks GET /health
once, then does nothing) and the first wave runs again beside them. It prints the server's
resident memory before and with them open, both waves' tokens/s, and how many idle connections
the server closed. Targets: less than 200 MB more memory, at least 90% of the throughput, none
lost. A server whose `kael serve --help` names --keep-alive-timeout gets a timeout longer than
the run; an older one closes idle connections after its own timeout, counted as lost.

--baseline-kael PATH: after one unmeasured warm-up wave on each, the first wave runs --rounds
times on each build in turns (baseline, new, baseline, new ...), both servers up, before the
other waves. It prints each build's tokens/s and TTFT p50/p95/p99 and the ratios new /
baseline; target: the new TTFT p99 no higher.

Every target prints PASS or FAIL; the exit status is 1 if any failed.

The clients are light: one asyncio task per client on raw sockets (no thread, no HTTP
library), and an idle connection is a protocol object the event loop watches, so 256 streams
and 10,000 idle connections cost the machine far less than the server does. Client i sends
prompt i % --prompts; each distinct prompt is first run alone for the reference text.

Usage: bench/serve_load.py [--kael build/kael] [--model DIR | --shape small|test]
       [--waves 64,256] [--tokens 32] [--max-batch 32] [--max-queue 64] [--prompts 16]
       [--threads N] [--idle 10000] [--baseline-kael PATH] [--rounds 2]
"""
import argparse
import asyncio
import collections
import json
import os
import pathlib
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "python"))  # the server helpers the tests use
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from serve_concurrency import cpu_name  # noqa: E402

CLIENT_TIMEOUT = 300  # seconds a client waits for its whole answer before it counts as hung
KEEP_ALIVE_TIMEOUT = 600  # seconds, passed to a server that has --keep-alive-timeout: longer than the run
HANDSHAKES_AT_ONCE = 256  # idle connections opening at a time: well within the listen backlog
IDLE_ANSWER_TIMEOUT = 30  # seconds an idle connection waits for its GET /health answer
IDLE_PROBES = 100  # idle connections asked GET /health again after the wave
IDLE_MEMORY_MB = 200  # target: the server's resident memory grows less than this with the idle connections
IDLE_THROUGHPUT = 0.90  # target: the wave keeps at least this share of its tokens/s beside them
HEALTH_REQUEST = b"GET /health HTTP/1.1\r\nHost: kael\r\n\r\n"


class Answer:
    """What one client got: status (an int, or a word for a transport failure), the seconds to
    the first event, for a 200 the streamed text and completion tokens, for another status
    whether it carried a Retry-After header."""

    def __init__(self, status, first_event=None, text=None, tokens=0, retry_after=False):
        self.status, self.first_event, self.text, self.tokens = status, first_event, text, tokens
        self.retry_after = retry_after


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
        return Answer(status, retry_after=b"\r\nretry-after:" in head.lower())
    try:
        payloads = parse_sse(dechunk(rest))
        return Answer(200, first_event, joined_text(payloads), payloads[-1]["usage"]["completion_tokens"])
    except (AssertionError, ValueError, KeyError, IndexError):
        return Answer("corrupt stream", first_event)


async def bounded_client(port, body: dict, started: float) -> Answer:
    """stream_client, but a server that never finishes answering makes a "hung" answer, not a
    benchmark that never ends."""
    try:
        return await asyncio.wait_for(stream_client(port, body, started), CLIENT_TIMEOUT)
    except asyncio.TimeoutError:
        return Answer(f"hung (no whole answer in {CLIENT_TIMEOUT} s)")


def request_body(prompt_index, tokens):
    from test_serve_support import prompt_for

    return {"prompt": prompt_for(prompt_index), "max_tokens": tokens, "temperature": 0, "ignore_eos": True}


async def wave(port, clients, tokens, prompts):
    """All `clients` at once: (answers, wall seconds from the first send to the last answer)."""
    started = time.perf_counter()
    answers = await asyncio.gather(*(bounded_client(port, request_body(i % prompts, tokens), started)
                                     for i in range(clients)))
    return answers, time.perf_counter() - started


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def check(answers, solo, prompts, tokens):
    """Problems: anything but a whole, correct stream or a clean 503 (one with Retry-After)."""
    problems = []
    for i, a in enumerate(answers):
        if a.status == 200:
            if a.tokens != tokens:
                problems.append(f"client {i}: {a.tokens} of {tokens} tokens")
            elif a.text != solo[i % prompts]:
                problems.append(f"client {i}: the text differs from the same prompt run alone")
        elif a.status != 503:
            problems.append(f"client {i}: {a.status}")
        elif not a.retry_after:
            problems.append(f"client {i}: a 503 without Retry-After")
    return problems


class WaveRun:
    """One wave's answers, wall seconds, the load average just after, and what check() found."""

    def __init__(self, label, answers, wall, problems):
        self.label, self.answers, self.wall, self.problems = label, answers, wall, problems
        self.load = os.getloadavg()[0]
        self.done = [a for a in answers if a.status == 200]
        self.tokens_per_s = sum(a.tokens for a in self.done) / wall
        self.ttft = [a.first_event for a in self.done]


def checked_run(label, answers, wall, solo, args):
    problems = check(answers, solo, args.prompts, args.tokens)
    for p in problems[:10]:
        print(f"  wave {label}: {p}", file=sys.stderr)
    return WaveRun(label, answers, wall, problems)


def measured_wave(server, clients, solo, args, label=None):
    answers, wall = asyncio.run(wave(server.port, clients, args.tokens, args.prompts))
    return checked_run(label or str(clients), answers, wall, solo, args)


# ---------------------------------------------------------------------------------------------
# Idle keep-alive connections (--idle)

def response_status(received: bytes):
    """The status of a whole HTTP response with a Content-Length body (0 when the status line
    is not one); None while it is incomplete."""
    head, sep, body = received.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in lines[1:]
                   if line.lower().startswith(b"content-length:")), 0)
    if len(body) < length:
        return None
    try:
        return int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


class IdleConnection(asyncio.Protocol):
    """A kept-alive connection that asks GET /health, reads the whole answer, then does nothing.
    The event loop keeps reading it, so a close by the server sets `closed` with no thread or
    task per connection. `answer` resolves to the status, or None if the connection closed."""

    def __init__(self):
        self.transport, self.received, self.closed = None, b"", False
        self.answer = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(HEALTH_REQUEST)

    def ask_again(self):
        self.received, self.answer = b"", asyncio.get_running_loop().create_future()
        self.transport.write(HEALTH_REQUEST)

    def data_received(self, data):
        self.received += data
        status = response_status(self.received)
        if status is not None and not self.answer.done():
            self.answer.set_result(status)

    def connection_lost(self, exc):
        self.closed = True
        if not self.answer.done():
            self.answer.set_result(None)


async def answer_of(connection: IdleConnection):
    try:
        return await asyncio.wait_for(connection.answer, IDLE_ANSWER_TIMEOUT)
    except asyncio.TimeoutError:
        return None


async def open_idle_connections(port, n):
    """n connections, each answered 200 once and left open: the list of those that were."""
    from test_serve_support import HOST

    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)

    async def open_one():
        async with gate:
            try:
                _, connection = await loop.create_connection(IdleConnection, HOST, port)
            except OSError:
                return None
            if await answer_of(connection) == 200:
                return connection
            connection.transport.close()
            return None

    return [c for c in await asyncio.gather(*(open_one() for _ in range(n))) if c]


async def count_lost(held):
    """(how many of `held` the server closed, how many were probed): those the event loop saw
    closed, plus those of a sample of the rest that no longer answer GET /health with 200 (a
    close in flight is seen only when the connection is used)."""
    still_open = [c for c in held if not c.closed]
    sample = random.Random(0).sample(still_open, min(IDLE_PROBES, len(still_open)))
    for connection in sample:
        connection.ask_again()
    statuses = await asyncio.gather(*(answer_of(c) for c in sample))
    return len(held) - len(still_open) + sum(s != 200 for s in statuses), len(sample)


def process_status(pid):
    """(resident MB, threads) of a process, from /proc/PID/status."""
    fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024 / 1e6, int(fields["Threads"])


class IdleReport:
    """What --idle measured: connections asked for, held (answered once), lost by the end of the
    wave beside them, probed; the seconds to open them; the server's (resident MB, threads)
    before and with them open, and how many were still open then (a server with a short
    keep-alive timeout closes the first ones while the last open)."""

    def __init__(self, asked, held, lost, probed, open_seconds, before, during, open_at_measure):
        self.asked, self.held, self.lost, self.probed = asked, held, lost, probed
        self.open_seconds, self.before, self.during = open_seconds, before, during
        self.open_at_measure = open_at_measure
        self.growth_mb = during[0] - before[0]


async def wave_beside_idle(server, clients, args):
    """Opens --idle idle connections, measures the server's memory with them open, runs the wave
    beside them, then counts the ones lost: (IdleReport, answers, wall)."""
    pid = server.process.pid
    before = process_status(pid)
    began = time.perf_counter()
    held = await open_idle_connections(server.port, args.idle)
    open_seconds = time.perf_counter() - began
    during = process_status(pid)
    open_at_measure = sum(not c.closed for c in held)
    try:
        answers, wall = await wave(server.port, clients, args.tokens, args.prompts)
        lost, probed = await count_lost(held)
    finally:
        for connection in held:
            connection.transport.close()
    report = IdleReport(args.idle, len(held), lost, probed, open_seconds, before, during, open_at_measure)
    return report, answers, wall


def raise_open_file_limit(needed):
    """The soft descriptor limit up to the hard one (the server, started after, inherits it):
    each idle connection is a descriptor here and one in the server."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard < needed:
        sys.exit(f"{needed} open files needed, the hard limit is {hard} (raise it: ulimit -Hn, limits.conf)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------------------------------------
# Servers and the runs

def accepts_option(kael, option):
    return option in subprocess.run([str(kael), "serve", "--help"], capture_output=True, text=True).stdout


def server_options(kael, args, waves):
    """kael serve's options: room for the largest wave and the idle connections (past
    --max-connections the front refuses at once), and with --idle a keep-alive timeout longer
    than the run where the server has one."""
    options = ["--max-batch", args.max_batch, "--max-queue", args.max_queue,
               "--max-connections", max(waves) + args.idle + 16]
    if args.threads:
        options += ["--threads", args.threads]
    if args.idle and accepts_option(kael, "--keep-alive-timeout"):
        options += ["--keep-alive-timeout", KEEP_ALIVE_TIMEOUT]
    return [str(o) for o in options]


def kael_server(kael, model, options, work):
    """test_serve_support's Server running this binary (it takes the binary from KAEL_BINARY)."""
    from test_serve_support import Server

    os.environ["KAEL_BINARY"] = str(pathlib.Path(kael).resolve())
    return Server(model, *options, log_dir=work)


def solo_texts(server, args):
    from test_serve_support import joined_text

    return [joined_text(server.stream(**request_body(p, args.tokens))[0]) for p in range(args.prompts)]


def run_waves(server, solo, args, waves):
    """Each wave once; with --idle, the first one again beside the idle connections.
    (runs, None or (IdleReport, the first wave's run without them, its run beside them))"""
    runs, idle = [], None
    for clients in waves:
        runs.append(measured_wave(server, clients, solo, args))
        if args.idle and idle is None:
            report, answers, wall = asyncio.run(wave_beside_idle(server, clients, args))
            runs.append(checked_run(f"{clients} + {args.idle} idle", answers, wall, solo, args))
            idle = report, runs[-2], runs[-1]
    return runs, idle


def compare_builds(new_server, new_solo, model, work, args, clients):
    """The wave of `clients` on the baseline build and the new one in turns, --rounds times each,
    both servers up so that each round meets the same machine: {"baseline": runs, "new": runs}."""
    options = server_options(args.baseline_kael, args, [clients])
    with kael_server(args.baseline_kael, model, options, work) as baseline:
        builds = {"baseline": (baseline, solo_texts(baseline, args)), "new": (new_server, new_solo)}
        runs = {"baseline": [], "new": []}
        # One unmeasured wave each first: a fresh process's first batch faults in its memory
        # (KV blocks, activations), which showed as a slow first round on either build.
        for name, (server, solo) in builds.items():
            measured_wave(server, clients, solo, args, label=f"{name} warm-up")
        for round_ in range(1, args.rounds + 1):
            for name, (server, solo) in builds.items():
                runs[name].append(measured_wave(server, clients, solo, args, label=f"{name} round {round_}"))
    return runs


# ---------------------------------------------------------------------------------------------
# The report

def ttft_cells(ttft):
    return [f"{percentile(ttft, q):.2f}" if ttft else "-" for q in (50, 95, 99)]


def print_waves(runs):
    print("| clients | completed | answers by status | tokens/s (aggregate) | TTFT p50 (s) | p95 | p99 "
          "| wall (s) | load average | each text = its solo run |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for run in runs:
        by_status = collections.Counter(str(a.status) for a in run.answers)
        statuses = ", ".join(f"{n}x {s}" for s, n in sorted(by_status.items()))
        verdict = "ok" if not run.problems else f"{len(run.problems)} wrong"
        print(f"| {run.label} | {len(run.done)} | {statuses} | {run.tokens_per_s:.1f} | "
              f"{' | '.join(ttft_cells(run.ttft))} | {run.wall:.1f} | {run.load:.1f} | {verdict} |")


def print_idle(idle, without, beside):
    print(f"\nIdle keep-alive connections: {idle.held} of {idle.asked} opened in {idle.open_seconds:.1f} s, "
          f"{idle.lost} lost by the end of the wave ({idle.probed} probed with GET /health)")
    print(f"Server resident memory: {idle.before[0]:.1f} MB before, {idle.during[0]:.1f} MB with "
          f"{idle.open_at_measure} of them open, +{idle.growth_mb:.1f} MB "
          f"({idle.growth_mb * 1e3 / max(idle.open_at_measure, 1):.1f} kB each); "
          f"threads {idle.before[1]} -> {idle.during[1]}")
    print(f"Wave of {len(without.answers)}: {without.tokens_per_s:.1f} tokens/s without them, "
          f"{beside.tokens_per_s:.1f} beside them: {beside.tokens_per_s / without.tokens_per_s:.2f}")


def pooled(runs):
    """(tokens/s over all the runs, TTFT of every completed stream of them)."""
    tokens = sum(a.tokens for run in runs for a in run.done)
    return tokens / sum(run.wall for run in runs), [t for run in runs for t in run.ttft]


def print_comparison(comparison, args):
    print(f"\nBaseline {args.baseline_kael} against new {args.kael}, {args.rounds} rounds in turns:\n")
    print("| build | tokens/s (aggregate) | TTFT p50 (s) | p95 | p99 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for run in comparison["baseline"] + comparison["new"]:
        print(f"| {run.label} | {run.tokens_per_s:.1f} | {' | '.join(ttft_cells(run.ttft))} |")
    summary = {name: pooled(runs) for name, runs in comparison.items()}
    for name, (rate, ttft) in summary.items():
        print(f"| {name}, all rounds | {rate:.1f} | {' | '.join(ttft_cells(ttft))} |")
    (base_rate, base_ttft), (new_rate, new_ttft) = summary["baseline"], summary["new"]
    if base_ttft and new_ttft:
        ratios = [f"{percentile(new_ttft, q) / percentile(base_ttft, q):.2f}" for q in (50, 95, 99)]
        print(f"| new / baseline | {new_rate / base_rate:.2f} | {' | '.join(ratios)} |")


def targets(runs, idle, comparison):
    """[(passed, what)] for each target this run measured."""
    compared = [run for build_runs in (comparison or {}).values() for run in build_runs]
    wrong = sum(len(run.problems) for run in runs + compared)
    verdicts = [(wrong == 0, "every wave: each completed stream whole and equal to its solo run, the rest a 503 "
                             f"with Retry-After, none hung ({wrong} wrong)")]
    if idle:
        idle, without, beside = idle
        ratio = beside.tokens_per_s / without.tokens_per_s
        verdicts += [
            (idle.held == idle.asked and idle.lost == 0,
             f"{idle.asked} idle connections held open: {idle.held} opened, {idle.lost} lost"),
            (idle.growth_mb < IDLE_MEMORY_MB,
             f"server memory with them: +{idle.growth_mb:.1f} MB (< {IDLE_MEMORY_MB} MB)"),
            (ratio >= IDLE_THROUGHPUT, f"throughput beside them: {ratio:.2f} of it without (>= {IDLE_THROUGHPUT})")]
    if comparison:
        base_ttft, new_ttft = pooled(comparison["baseline"])[1], pooled(comparison["new"])[1]
        if base_ttft and new_ttft:
            base, new = percentile(base_ttft, 99), percentile(new_ttft, 99)
            verdicts.append((new <= base, f"TTFT p99: new {new:.2f} s, baseline {base:.2f} s (new <= baseline)"))
        else:
            verdicts.append((False, "TTFT p99: a build completed no stream"))
    return verdicts


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
    parser.add_argument("--idle", type=int, default=0,
                        help="idle keep-alive connections held open while the first wave runs again (0: skip)")
    parser.add_argument("--baseline-kael", help="a previous build: the first wave runs on both in turns")
    parser.add_argument("--rounds", type=int, default=2, help="turns of each build with --baseline-kael")
    args = parser.parse_args()
    waves = [int(n) for n in args.waves.split(",")]
    raise_open_file_limit(args.idle + max(waves) + 256)

    import gpt2_reference
    from test_serve_support import small_checkpoint

    with tempfile.TemporaryDirectory(prefix="kael_serve_load_") as work:
        if args.model:
            model, shape = pathlib.Path(args.model), f"--model {args.model}"
        elif args.shape == "small":
            model = gpt2_reference.make_checkpoint(pathlib.Path(work) / "model", seed=1)
            shape = "GPT-2 small shape (124M parameters, seeded), f32"
        else:
            model, shape = small_checkpoint(pathlib.Path(work) / "model"), "test shape (4 layers, width 256), f32"
        options = server_options(args.kael, args, waves)
        with kael_server(args.kael, model, options, work) as server:
            solo = solo_texts(server, args)
            # Before the other waves, so that both servers meet the wave equally fresh.
            comparison = compare_builds(server, solo, model, work, args, waves[0]) if args.baseline_kael else None
            runs, idle = run_waves(server, solo, args, waves)
    print(f"\n{cpu_name()}, {os.cpu_count()} CPUs; {shape}; kael serve {' '.join(options)}; "
          f"every client streams {args.tokens} greedy tokens\n")
    print_waves(runs)
    if idle:
        print_idle(*idle)
    if comparison:
        print_comparison(comparison, args)
    verdicts = targets(runs, idle, comparison)
    print()
    for passed, what in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {what}")
    if not all(passed for passed, _ in verdicts):
        sys.exit("a target was missed (see FAIL above)")


if __name__ == "__main__":
    main()
