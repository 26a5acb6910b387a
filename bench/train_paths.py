#!/usr/bin/env python3
"""kael's two GPT-2 training steps against each other, in one process, on one checkpoint:

  hand-written  the engine's training step (src/train/model, what `kael train` and `kael finetune`
                ran before they moved onto nn::GPT):
                kael.TrainModel.forward_backward, clip_grad_norm, its AdamW step.
  nn + autograd kael.GPT (kael::nn::GPT on the tensor library): forward, F.cross_entropy,
                loss.backward(), kael.nn.utils.clip_grad_norm_, kael.optim.AdamW.step().

Both at one precision (--precision), dropout 0, the same windows, the same threads: f32 (the
default), or bf16, the matrix products on BF16 operands with F32 sums: the hand-written step with
precision "bf16" (what `kael train --precision bf16` ran) against nn + autograd under
kael.set_float32_matmul_precision("medium") (needs AMX-BF16 or AVX512-BF16). For each shape B x T
(default 4x64 and 8x256) the two steps alternate, STEPS times each after one warm-up step of each,
so that other work on the machine slows both alike; the figure is the median wall time and the
median CPU time (all threads of the process) per step, and the ratio nn / hand-written beside the
bound 1.15 under which `kael train` would move onto nn::GPT. Prints the CPU and a Markdown table
whose first column names the precision.

Usage: bench/train_paths.py [--threads 2] [--steps 3] [--shapes 4x64,8x256] [--precision f32|bf16]
                            [--workdir DIR]
Without --model a seeded GPT-2-small-shape F32 checkpoint is built (scripts/gpt2_reference.py) in
--workdir and reused by later runs.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np
from cpu_name import cpu_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LR, BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-4, (0.9, 0.999), 1e-8, 0.01, 1.0
BOUND = 1.15


def timed(step) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each, after one warm-up step")
    parser.add_argument("--shapes", default="4x64,8x256")
    parser.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                        help="bf16: the hand-written step at precision bf16 against nn under matmul precision medium")
    parser.add_argument("--model", type=pathlib.Path, help="a GPT-2 checkpoint directory (default: seeded GPT-2 small)")
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / "kael-train-bench")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in shape.split("x")) for shape in args.shapes.split(",")]

    import kael
    import kael.nn.functional as F
    import gpt2_reference

    model_dir = args.model
    if model_dir is None:
        model_dir = args.workdir / "gpt2-small-f32"
        if not (model_dir / "model.safetensors").exists():
            gpt2_reference.make_checkpoint(model_dir, **gpt2_reference.PARITY_CHECKPOINTS["gpt2-small-f32"])

    kael.set_num_threads(args.threads)
    hand = kael._kael.TrainModel.load(str(model_dir), threads=args.threads)
    hand.precision = args.precision  # a ValueError naming what is missing where bf16 cannot run
    kael.set_float32_matmul_precision("medium" if args.precision == "bf16" else "highest")
    hand_opt = kael._kael.AdamW(hand, beta1=BETAS[0], beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY)
    stored = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
    config = kael.nn.GptConfig(**{k: stored[k] for k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd")
                                  if k in stored}, tied_embeddings=stored.get("tie_word_embeddings", True))
    net = kael.GPT(config).load_gpt2(model_dir).train()
    params = net.parameters()
    net_opt = kael.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    vocab = config.vocab_size

    def hand_step(inputs, targets):
        def step():
            hand.zero_grad()
            hand.forward_backward(inputs.astype(np.int32), targets.astype(np.int32))
            hand.clip_grad_norm(GRAD_CLIP)
            hand_opt.step(hand, LR)
        return step

    def net_step(inputs, targets):
        def step():
            net_opt.zero_grad()
            logits = net(kael.from_numpy(inputs))
            loss = F.cross_entropy(logits.reshape(-1, vocab), kael.from_numpy(targets.reshape(-1)))
            loss.backward()
            kael.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
            net_opt.step()
        return step

    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; threads {args.threads}; {args.steps} timed steps of "
          f"each per shape, alternating; checkpoint {model_dir} ({config.n_layer} layers, n_embd {config.n_embd}, "
          f"vocab {config.vocab_size}; {args.precision.upper()} steps"
          + (": hand-written at precision bf16, nn under set_float32_matmul_precision('medium')"
             if args.precision == "bf16" else "") + ")")
    print("| precision | B x T | hand-written s/step | nn + autograd s/step | nn / hand (wall) | hand CPU-s/step "
          "| nn CPU-s/step | nn / hand (CPU) | within 1.15x |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    rng = np.random.default_rng(0)
    for B, T in shapes:
        hand_times, net_times = [], []
        for i in range(args.steps + 1):
            window = rng.integers(0, vocab, size=(B, T + 1), dtype=np.int64)
            inputs, targets = np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])
            h, n = timed(hand_step(inputs, targets)), timed(net_step(inputs, targets))
            if i > 0:  # the first of each is the warm-up
                hand_times.append(h)
                net_times.append(n)
        hw, hc = (statistics.median(t[k] for t in hand_times) for k in (0, 1))
        nw, nc = (statistics.median(t[k] for t in net_times) for k in (0, 1))
        print(f"| {args.precision} | {B}x{T} | {hw:.3f} | {nw:.3f} | {nw / hw:.2f} | {hc:.3f} | {nc:.3f} "
              f"| {nc / hc:.2f} | {'yes' if nc / hc <= BOUND else 'no'} |")


if __name__ == "__main__":
    main()
