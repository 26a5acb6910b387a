"""relu and dropout, forward and backward, in kael and torch in one run: the activations of
PyTorch's MNIST example's Net (batch 64): relu on its largest map (64, 32, 26, 26), dropout at
p 0.25 on the pooled map (64, 64, 12, 12) and at p 0.5 on the hidden layer (64, 128), F32.
Each repeat times kael then torch on the same values, so that a load on the machine falls on
both; the figures are the medians over the repeats, in ms, and the ratio kael / torch.
Backward is y.backward(g) with a dense upstream gradient g, timed alone (the forward excluded).
The "composed" column times, in kael, the chain of generic ops each rule was before it became
one pass, for a before/after on the same machine in the same run: relu's backward
g * (y > 0).float() (the ops alone, without the autograd engine's own cost), dropout's forward
rand, >=, cast and two products, and its backward y.backward(g) for y = x * the scaled mask.

    python3 bench/activation_vs_torch.py [--threads N] [--repeats R]
"""
import argparse
import statistics
import time

import numpy as np
import torch

import kael
from cpu_name import cpu_name


def timed(f):
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000.0


def forward_and_backward(lib, op, x_values, g_values):
    """Two closures: op's forward on a tensor of x_values, and the time of its backward alone on a
    fresh leaf of the same values."""
    x0, g = lib.from_numpy(x_values.copy()), lib.from_numpy(g_values.copy())

    def forward():
        op(x0)

    def backward():
        y = op(x0.detach().requires_grad_())
        return timed(lambda: y.backward(g))

    return forward, backward


def composed(case, shape, p):
    """The previous rules of kael's relu backward and dropout forward and backward, as closures."""
    rng = np.random.default_rng(1)
    x = kael.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    g = kael.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    if case == "relu":
        y = kael.relu(x)
        return None, lambda: timed(lambda: g * (y > 0).to(kael.float32))  # the old rule's ops alone
    scaled_mask = (kael.rand(*shape, dtype=kael.float64) >= p).to(kael.float32) * (1.0 / (1.0 - p))

    def backward():  # the recorded product's backward, as the autograd engine ran it
        y = x.detach().requires_grad_() * scaled_mask
        return timed(lambda: y.backward(g))

    def forward():
        keep = (kael.rand(*shape, dtype=kael.float64) >= kael.full((), p, dtype=kael.float64)).to(kael.float32)
        return x * (keep * (1.0 / (1.0 - p)))

    return forward, backward


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kael.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    cases = [
        ("relu (64,32,26,26)", "relu", (64, 32, 26, 26), 0.0),
        ("dropout p=0.25 (64,64,12,12)", "dropout", (64, 64, 12, 12), 0.25),
        ("dropout p=0.5 (64,128)", "dropout", (64, 128), 0.5),
    ]
    print(f"CPU: {cpu_name()}; threads {args.threads}; median of {args.repeats} alternating repeats (ms)")
    print(f"{'op':30} {'pass':9} {'kael':>9} {'composed':>9} {'torch':>9} {'kael/torch':>11}")
    for name, case, shape, p in cases:
        x_values = rng.standard_normal(shape, dtype=np.float32)
        g_values = rng.standard_normal(shape, dtype=np.float32)
        ops = {lib: (lib.relu if case == "relu" else (lambda x, lib=lib: lib.nn.functional.dropout(x, p, True)))
               for lib in (kael, torch)}
        k_fwd, k_bwd = forward_and_backward(kael, ops[kael], x_values, g_values)
        t_fwd, t_bwd = forward_and_backward(torch, ops[torch], x_values, g_values)
        c_fwd, c_bwd = composed(case, shape, p)
        runs = {"kf": lambda: timed(k_fwd), "tf": lambda: timed(t_fwd), "kb": k_bwd, "tb": t_bwd, "cb": c_bwd}
        if c_fwd is not None:
            runs["cf"] = lambda: timed(c_fwd)
        times = {key: [] for key in runs}
        for repeat in range(args.repeats + 1):  # the first a warm-up
            for key, run in runs.items():
                if key == "cf":
                    with kael.no_grad():
                        ms = run()
                else:
                    ms = run()
                if repeat > 0:
                    times[key].append(ms)
        med = {key: statistics.median(v) for key, v in times.items()}
        fwd_composed = f"{med['cf']:9.3f}" if "cf" in med else f"{'-':>9}"
        print(f"{name:30} {'forward':9} {med['kf']:9.3f} {fwd_composed} {med['tf']:9.3f} {med['kf'] / med['tf']:11.2f}")
        print(f"{'':30} {'backward':9} {med['kb']:9.3f} {med['cb']:9.3f} {med['tb']:9.3f} {med['kb'] / med['tb']:11.2f}")


if __name__ == "__main__":
    main()
