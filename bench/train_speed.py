#!/usr/bin/env python3
"""Training speed and memory: `kael finetune` against PyTorch (transformers GPT2LMHeadModel, fp32,
AdamW), in one run, on one checkpoint, with the same settings and the same number of threads.

For each shape B x T (default 4x64 and 8x256):
  kael     `kael finetune --threads THREADS --order sequential --dropout 0 --log-json` for STEPS
           steps; step time = the median of the logged step_s after the first step (warmup);
           peak RSS of that process (VmHWM, which kael prints), against the estimate 16 bytes per parameter
           (weights, gradients, AdamW's m and v, all F32) plus the activations kael reports for
           one B x T micro-batch (the "memory:" line of its output).
  PyTorch  GPT2LMHeadModel.from_pretrained (float32, eager attention, dropout 0),
           torch.set_num_threads(THREADS), torch.optim.AdamW with the same lr, betas, eps and
           weight decay on the 2-D parameters only, clip_grad_norm_(GRAD_CLIP); the same windows
           (the first STEPS x B windows of T + 1 tokens, in order); step time = the median after
           the first step of forward + backward + clip + AdamW step + zero_grad.
tokens/s = B x T / step time. Beside the wall time, each step's CPU time (all threads of the process:
kael's log field cpu_s, time.process_time() for PyTorch), whose ratio holds on a machine shared with
other work, where the wall-clock one does not. Prints the CPU, the load average, both engines' figures
and the ratios, as a Markdown table.

With --precision bf16, three runs per shape instead: kael --precision bf16 (the matrix products with
BF16 operands and F32 sums), PyTorch under torch.autocast("cpu", dtype=torch.bfloat16) (the same
mixed precision: F32 weights, AdamW and loss), and PyTorch F32 as above; the table names each
row's precision and gives kael bf16's speed-up over both.

With --ranks N (data parallel over MPI, no PyTorch): per shape, in one run, kael with 1 rank of 1
thread (--batch B), N ranks of 1 thread under mpirun (--batch B each, so a global batch of N x B),
1 rank of N threads (--batch N x B, the same tokens a step), and N independent 1-thread processes
at once with no communication (each --batch B): what the machine gives N processes when nothing
is summed, the bound the N ranks are measured against. Prints tokens/s, the ratios, how long the
ranks' steps waited for the gradient sums after the backward (reduce_wait_s), and each rank's
peak RSS.

With --ab OLD NEW (two kael binaries, no PyTorch): the speed gate between two builds. Per shape and
precision (both F32 and BF16 unless --precision names one), ROUNDS rounds; each round runs
`kael finetune` for STEPS steps with OLD and then with NEW (the next round NEW first, and so on), as
whole short runs one after the other, so that both builds see the same load on the machine in turn.
Each run's first step is its warm-up and is dropped; the other steps' step_s and cpu_s from
--log-json are pooled per build over the rounds. Prints per cell each build's median step time
(wall and CPU), NEW / OLD for both, and whether both are within 1.15x (the bound under which the
training step may move to a slower path).

Usage: bench/train_speed.py [--kael build/kael] [--threads 2] [--steps 4] [--shapes 4x64,8x256] [--precision f32|bf16]
                            [--ranks N]
       bench/train_speed.py --ab OLD NEW [--rounds 3] [--steps 4] [--shapes 4x64,8x256] [--precision f32|bf16]
e.g.   bench/train_speed.py --ab build-old/kael build/kael
(--steps 2 is the least: the first step is a warm-up. With --steps 2 both shapes take about 7
minutes on 2 cores.)
Without --model a seeded GPT-2-small-shape F32 checkpoint is built (scripts/gpt2_reference.py)
in --workdir and reused by later runs. The text is the test corpus
(gpt2_reference.CORPUS_DIR).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from cpu_name import cpu_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LR, BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-4, (0.9, 0.999), 1e-8, 0.01, 1.0
BOUND = 1.15  # --ab's gate: NEW / OLD at most this, by wall and by CPU time


def corpus_file(workdir: pathlib.Path) -> pathlib.Path:
    import gpt2_reference

    path = workdir / "corpus.txt"
    if not path.exists():
        path.write_bytes(b"".join(p.read_bytes() for p in sorted(gpt2_reference.CORPUS_DIR.glob("*.txt"))))
    return path


def kael_command(kael: str, model: pathlib.Path, data: pathlib.Path, out: pathlib.Path, log: pathlib.Path, B: int,
                 T: int, steps: int, threads: int, precision: str = "f32") -> list[str]:
    return [kael, "finetune", "--model", str(model), "--data", str(data), "--out", str(out),
            "--steps", str(steps), "--batch", str(B), "--seq", str(T), "--threads", str(threads),
            "--order", "sequential", "--dropout", "0", "--lr", str(LR), "--weight-decay", str(WEIGHT_DECAY),
            "--grad-clip", str(GRAD_CLIP), "--log-json", str(log), "--precision", precision]


def kael_figures(stderr: str, log: pathlib.Path, tokens_per_step: int) -> dict:
    """The median step after the first, and the memory line, of one finished run."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    memory = re.search(r"memory: (\d+) parameters .* activations (\d+) bytes .* peak RSS (\d+) bytes", stderr)
    steps_after_warmup = [r for r in records if r["type"] == "step"][1:]
    step_s = statistics.median(r["step_s"] for r in steps_after_warmup)
    cpu_s = statistics.median(r["cpu_s"] for r in steps_after_warmup)
    parameters, activations = int(memory.group(1)), int(memory.group(2))
    waits = [r["reduce_wait_s"] for r in steps_after_warmup if "reduce_wait_s" in r]
    return dict(step_s=step_s, cpu_s=cpu_s, tokens_per_s=tokens_per_step / step_s, peak_rss=int(memory.group(3)),
                steps_s=[r["step_s"] for r in steps_after_warmup], cpus_s=[r["cpu_s"] for r in steps_after_warmup],
                estimate=16 * parameters + activations, parameters=parameters, activations=activations,
                losses=[r["loss"] for r in records if r["type"] == "step"],
                reduce_wait_s=statistics.median(waits) if waits else None,
                rank_rss=[int(m) for m in re.findall(r"rank \d+: peak RSS (\d+) bytes", stderr)])


def kael_run(kael: str, model: pathlib.Path, data: pathlib.Path, B: int, T: int, steps: int, threads: int,
             precision: str = "f32", launcher: list[str] | None = None, ranks: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out, log = pathlib.Path(scratch) / "out", pathlib.Path(scratch) / "log.jsonl"
        command = [*(launcher or []), *kael_command(kael, model, data, out, log, B, T, steps, threads, precision)]
        result = subprocess.run(command, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise SystemExit(f"kael finetune failed ({result.returncode}): {result.stderr}")
        return kael_figures(result.stderr, log, ranks * B * T)


def kael_independent(kael: str, model: pathlib.Path, data: pathlib.Path, B: int, T: int, steps: int,
                     processes: int) -> dict:
    """`processes` 1-thread runs started together, none talking to another: their summed tokens/s."""
    with tempfile.TemporaryDirectory() as scratch:
        runs = []
        for p in range(processes):
            out, log = pathlib.Path(scratch) / f"out{p}", pathlib.Path(scratch) / f"log{p}.jsonl"
            command = kael_command(kael, model, data, out, log, B, T, steps, 1)
            runs.append((subprocess.Popen(command, stderr=subprocess.PIPE, text=True), log))
        figures = []
        for run, log in runs:
            _, stderr = run.communicate()
            if run.returncode != 0:
                raise SystemExit(f"kael finetune failed ({run.returncode}): {stderr}")
            figures.append(kael_figures(stderr, log, B * T))
    return dict(tokens_per_s=sum(f["tokens_per_s"] for f in figures), step_s=max(f["step_s"] for f in figures))


def data_parallel_comparison(args, model: pathlib.Path, data: pathlib.Path) -> None:
    """--ranks N: N ranks of 1 thread against 1 rank of 1 thread, 1 rank of N threads and N
    independent processes, per shape."""
    import shutil

    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("--ranks needs mpirun (Debian: openmpi-bin)")
    N = args.ranks
    launcher = [mpirun, "-np", str(N), "--bind-to", "core"]
    if os.geteuid() == 0:
        launcher.insert(1, "--allow-run-as-root")
    rows = []
    for B, T in args.shapes:
        shape = f"{B}x{T}"
        one = kael_run(args.kael, model, data, B, T, args.steps, 1)
        ranks = kael_run(args.kael, model, data, B, T, args.steps, 1, launcher=launcher, ranks=N)
        threads = kael_run(args.kael, model, data, N * B, T, args.steps, N)
        apart = kael_independent(args.kael, model, data, B, T, args.steps, N)
        rows.append((shape, one, ranks, threads, apart))
        print(f"{shape}: first losses 1 rank {', '.join(f'{x:.4f}' for x in one['losses'][:3])}; "
              f"{N} ranks (global batch {N * B}) {', '.join(f'{x:.4f}' for x in ranks['losses'][:3])}", flush=True)
    print()
    print(f"| B x T (per rank) | 1 rank x 1 thread tokens/s | {N} ranks x 1 thread tokens/s | speed-up over 1 x 1 "
          f"| {N} independent processes tokens/s | {N} ranks / independent | 1 rank x {N} threads (batch {N}B) "
          f"tokens/s | {N} ranks / 1 x {N} | step s ({N} ranks) | reduce_wait_s | peak RSS per rank |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, one, ranks, threads, apart in rows:
        rss = [ranks["peak_rss"], *ranks["rank_rss"]]
        print(f"| {shape} | {one['tokens_per_s']:.0f} | {ranks['tokens_per_s']:.0f} "
              f"| {ranks['tokens_per_s'] / one['tokens_per_s']:.2f}x | {apart['tokens_per_s']:.0f} "
              f"| {ranks['tokens_per_s'] / apart['tokens_per_s']:.2f} | {threads['tokens_per_s']:.0f} "
              f"| {ranks['tokens_per_s'] / threads['tokens_per_s']:.2f}x | {ranks['step_s']:.3f} "
              f"| {ranks['reduce_wait_s']:.3f} | {', '.join(f'{r / 1e6:.0f} MB' for r in rss)} |")
    print()
    print(f"reduce_wait_s: the median time a step waited after its backward for the gradient sums (rank 0); "
          f"load average {os.getloadavg()[0]:.2f} at the end")


def torch_run(model_dir: pathlib.Path, tokens, B: int, T: int, steps: int, threads: int, autocast: bool = False) -> dict:
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(threads)
    model = GPT2LMHeadModel.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation="eager",
                                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=LR, betas=BETAS, eps=EPS)
    data = torch.tensor(tokens, dtype=torch.long)
    times, cpu_times, losses = [], [], []
    for s in range(steps):
        rows = [data[((s * B + b) % ((len(tokens) - 1) // T)) * T:][: T + 1] for b in range(B)]
        batch = torch.stack(rows)
        start, cpu_start = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        losses.append(loss.item())
    step_s = statistics.median(times[1:])
    return dict(step_s=step_s, cpu_s=statistics.median(cpu_times[1:]), tokens_per_s=B * T / step_s, losses=losses)


def shape_list(text: str) -> list[tuple[int, int]]:
    """--shapes: comma-separated B x T, e.g. 4x64,8x256."""
    shapes = []
    for shape in text.split(","):
        B, x, T = shape.partition("x")
        if not (x and B.isdigit() and T.isdigit() and int(B) > 0 and int(T) > 0):
            raise argparse.ArgumentTypeError(f"'{shape}' is not BxT with positive whole numbers (e.g. 4x64)")
        shapes.append((int(B), int(T)))
    return shapes


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kael", help="the kael binary (default: build/kael)")
    parser.add_argument("--model", type=pathlib.Path, help="checkpoint directory (default: a seeded GPT-2 small shape)")
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / "kael-train-bench")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per engine and shape (>= 2)")
    parser.add_argument("--shapes", type=shape_list, default=shape_list("4x64,8x256"))
    parser.add_argument("--precision", choices=("f32", "bf16"),
                        help="bf16: kael bf16 against PyTorch autocast bf16 and PyTorch f32 (default f32; "
                             "with --ab both unless named)")
    parser.add_argument("--ranks", type=int, default=0,
                        help="data parallel: N ranks x 1 thread against 1 x 1, 1 x N threads and N apart (no PyTorch)")
    parser.add_argument("--ab", nargs=2, metavar=("OLD", "NEW"),
                        help="two kael binaries in turns: median step times, NEW / OLD and the 1.15x gate")
    parser.add_argument("--rounds", type=int, help="--ab: runs of each build per cell, in turns (default 3)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is a warm-up)")
    if args.threads < 1 or args.ranks < 0:
        parser.error("--threads must be at least 1 and --ranks at least 0")
    if args.ab:
        if args.kael is not None or args.ranks:
            parser.error("--ab names both binaries and runs no ranks: it takes neither --kael nor --ranks")
        for binary in args.ab:
            if not os.access(binary, os.X_OK):
                parser.error(f"--ab: {binary} is not an executable kael binary")
        if args.rounds is None:
            args.rounds = 3
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
    elif args.rounds is not None:
        parser.error("--rounds is for --ab only")
    if args.kael is None:
        args.kael = str(ROOT / "build" / "kael")
    return args


def main() -> None:
    args = parse_arguments()

    import gpt2_reference

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = args.workdir / "gpt2-small-f32"
        if not (model / "model.safetensors").exists():
            gpt2_reference.make_checkpoint(model, seed=1, init_std=0.02)
    data = corpus_file(args.workdir)

    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; threads {args.threads}; "
          f"load average {os.getloadavg()[0]:.2f} at the start")
    print(f"settings: AdamW lr {LR}, betas {BETAS}, eps {EPS}, weight decay {WEIGHT_DECAY} (2-D only), "
          f"grad clip {GRAD_CLIP}, dropout 0, {args.steps} steps (median after the first)")
    if args.ab:
        print_ab_table(args, ab_comparison(args, model, data))
        return
    if args.ranks:
        data_parallel_comparison(args, model, data)
        return
    tokens = []
    for ids in [gpt2_reference.gpt2_encoding().encode_ordinary(data.read_bytes().decode("utf-8"))]:
        tokens += ids + [50256]
    if args.precision == "bf16":
        bf16_comparison(args, model, data, tokens)
        return
    rows = []
    for B, T in args.shapes:
        shape = f"{B}x{T}"
        k = kael_run(args.kael, model, data, B, T, args.steps, args.threads)
        t = torch_run(model, tokens, B, T, args.steps, args.threads)
        rows.append((shape, k, t))
        print(f"{shape}: first losses kael {', '.join(f'{x:.4f}' for x in k['losses'][:3])}; "
              f"torch {', '.join(f'{x:.4f}' for x in t['losses'][:3])}", flush=True)
    print()
    print("| B x T | kael s/step | kael tokens/s | PyTorch s/step | PyTorch tokens/s | speed-up (wall) "
          "| kael CPU-s/step | PyTorch CPU-s/step | speed-up (CPU time) | kael peak RSS | estimate | RSS / estimate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, k, t in rows:
        print(f"| {shape} | {k['step_s']:.3f} | {k['tokens_per_s']:.0f} | {t['step_s']:.3f} | {t['tokens_per_s']:.0f} "
              f"| {t['step_s'] / k['step_s']:.2f}x | {k['cpu_s']:.2f} | {t['cpu_s']:.2f} | {t['cpu_s'] / k['cpu_s']:.2f}x "
              f"| {k['peak_rss'] / 1e6:.0f} MB | {k['estimate'] / 1e6:.0f} MB | {k['peak_rss'] / k['estimate']:.2f} |")
    print()
    print(f"estimate = 16 bytes x {k['parameters']:,} parameters (weights, gradients, AdamW's m and v) + what kael "
          f"holds for one micro-batch (activations and scratch); load average {os.getloadavg()[0]:.2f} at the end")
    print_fma_bound(args, rows)


def fma_peak(kael: str, threads: int) -> dict | None:
    """build/bench/fma_peak beside the kael binary (independent FMA chains of the widest FMA, on CPU
    time), or None where it was not built."""
    probe = pathlib.Path(kael).resolve().parent / "bench" / "fma_peak"
    if not probe.exists():
        return None
    out = subprocess.run([str(probe), str(threads), "1"], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def print_fma_bound(args, rows) -> None:
    """What twice PyTorch's F32 speed asks of the FMA units: the step's products (6 flops per parameter
    and token; attention left out, so the rate needed is if anything higher) against the F32 FMA peak
    of the same threads, measured now by two methods (throughput, and clock from latency)."""
    peak = fma_peak(args.kael, args.threads)
    if peak is None:
        print("(build/bench/fma_peak not found beside the kael binary: no FMA bound printed)")
        return
    latency_peak = peak["peak_per_core_from_latency"] * peak["threads"]
    print()
    print(f"F32 FMA peak of {peak['threads']} threads ({peak['isa']}, {peak['vector_bits']}-bit; bench/fma_peak): "
          f"{peak['peak_gflops']:.0f} GFLOP/s from throughput, {latency_peak:.0f} from the clock its latency gives")
    print("| B x T | GFLOP a step (6 x parameters x tokens) | kael GFLOP/s | PyTorch GFLOP/s "
          "| 2x PyTorch needs | needed / FMA peak |")
    print("|---|---|---|---|---|---|")
    for shape, k, t in rows:
        B, T = map(int, shape.split("x"))
        gflop = 6 * k["parameters"] * B * T / 1e9
        needed = 2 * gflop / t["step_s"]
        print(f"| {shape} | {gflop:.0f} | {gflop / k['step_s']:.0f} | {gflop / t['step_s']:.0f} | {needed:.0f} "
              f"| {needed / peak['peak_gflops']:.2f} |")


def bf16_comparison(args, model: pathlib.Path, data: pathlib.Path, tokens) -> None:
    """--precision bf16: per shape kael bf16, PyTorch autocast bf16 and PyTorch f32, one table."""
    rows = []
    for B, T in args.shapes:
        shape = f"{B}x{T}"
        k = kael_run(args.kael, model, data, B, T, args.steps, args.threads, precision="bf16")
        a = torch_run(model, tokens, B, T, args.steps, args.threads, autocast=True)
        f = torch_run(model, tokens, B, T, args.steps, args.threads)
        rows.append((shape, k, a, f))
        print(f"{shape}: first losses kael bf16 {', '.join(f'{x:.4f}' for x in k['losses'][:3])}; torch autocast bf16 "
              f"{', '.join(f'{x:.4f}' for x in a['losses'][:3])}; torch f32 {', '.join(f'{x:.4f}' for x in f['losses'][:3])}",
              flush=True)
    print()
    print("| B x T | engine (precision) | s/step | tokens/s | CPU-s/step | kael bf16 speed-up (wall) "
          "| kael bf16 speed-up (CPU time) |")
    print("|---|---|---|---|---|---|---|")
    for shape, k, a, f in rows:
        for name, r in (("kael (bf16)", k), ("PyTorch autocast (bf16)", a), ("PyTorch (f32)", f)):
            print(f"| {shape} | {name} | {r['step_s']:.3f} | {r['tokens_per_s']:.0f} | {r['cpu_s']:.2f} "
                  f"| {r['step_s'] / k['step_s']:.2f}x | {r['cpu_s'] / k['cpu_s']:.2f}x |")
    print()
    print(f"kael peak RSS {k['peak_rss'] / 1e6:.0f} MB at {rows[-1][0]}; load average {os.getloadavg()[0]:.2f} at the end")


def ab_comparison(args, model: pathlib.Path, data: pathlib.Path) -> list[tuple]:
    """--ab OLD NEW: per shape and precision, ROUNDS rounds of one run of each build, the order
    swapped each round; each build's steps after each run's warm-up, pooled over the rounds."""
    precisions = [args.precision] if args.precision else ["f32", "bf16"]
    rows = []
    for precision in precisions:
        for B, T in args.shapes:
            # By position, not by path: the same binary twice is the method's own check (ratio near 1).
            pooled = [dict(steps_s=[], cpus_s=[]), dict(steps_s=[], cpus_s=[])]
            for r in range(args.rounds):
                for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                    run = kael_run(args.ab[which], model, data, B, T, args.steps, args.threads, precision=precision)
                    pooled[which]["steps_s"] += run["steps_s"]
                    pooled[which]["cpus_s"] += run["cpus_s"]
            medians = [(statistics.median(p["steps_s"]), statistics.median(p["cpus_s"])) for p in pooled]
            steps = len(pooled[0]["steps_s"])
            rows.append((f"{B}x{T}", precision, *medians, steps))
            print(f"{B}x{T} {precision}: {steps} timed steps of each; load average {os.getloadavg()[0]:.2f}",
                  flush=True)
    return rows


def print_ab_table(args, rows: list[tuple]) -> None:
    """One Markdown row per cell: (shape, precision, (OLD wall, OLD CPU), (NEW wall, NEW CPU), steps)."""
    old, new = args.ab
    print()
    print(f"OLD = {old}, NEW = {new}; {args.rounds} rounds of {args.steps} steps each, in turns, {args.threads} threads")
    print("| B x T | precision | OLD s/step | NEW s/step | NEW / OLD (wall) | OLD CPU-s/step | NEW CPU-s/step "
          f"| NEW / OLD (CPU time) | within {BOUND}x | timed steps of each |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape, precision, (old_s, old_cpu), (new_s, new_cpu), steps in rows:
        wall, cpu = new_s / old_s, new_cpu / old_cpu
        within = "yes" if max(wall, cpu) <= BOUND else "no"
        print(f"| {shape} | {precision} | {old_s:.3f} | {new_s:.3f} | {wall:.2f}x | {old_cpu:.2f} | {new_cpu:.2f} "
              f"| {cpu:.2f}x | {within} | {steps} |")
    print()
    print(f"medians over the timed steps (each run's first step dropped); within {BOUND}x: both ratios at most "
          f"{BOUND}; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
