"""The ops of bench/small_models_vs_torch.py's nanoGPT model one at a time, kael against torch:
each op's batch-1 forward under no_grad (the 64-token generate() call) and its forward and
backward at the training batch of 16, best of several rounds, the two libraries in turns.
`--profile-steps N` instead runs N training steps of that model on kael alone, for a profiler:

    python bench/small_model_ops_vs_torch.py [--threads 1]
    perf record -g python bench/small_model_ops_vs_torch.py --profile-steps 30
"""
import argparse
import os
import time

import numpy as np

import small_models_vs_torch as models
from cpu_name import cpu_name

T, C, H = models.BLOCK, models.WIDTH, models.HEADS


def ops(lib, F, batch, rng, grad):
    """name -> a call of one op of the model on inputs of its shapes."""
    def tensor(*shape):
        return lib.tensor((rng.standard_normal(shape) * 0.1).astype(np.float32), requires_grad=grad)
    x, h4, qkv, ln = tensor(batch, T, C), tensor(batch, T, 4 * C), tensor(batch, T, 3 * C), tensor(C)
    w = {n: tensor(n, C) for n in (3 * C, 4 * C, C, models.VOCAB)}
    w_down = tensor(C, 4 * C)
    ids = lib.tensor(rng.integers(0, models.VOCAB, (batch, T)))

    def attention():
        q, k, v = (t.view(batch, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return y.transpose(1, 2).contiguous().view(batch, T, C)

    return {"embedding": lambda: F.embedding(ids, w[models.VOCAB]),
            "layer_norm": lambda: F.layer_norm(x, (C,), ln, None, 1e-5),
            "linear 128->384": lambda: F.linear(x, w[3 * C]),
            "attention (split, views, sdpa)": attention,
            "linear 128->128": lambda: F.linear(x, w[C]),
            "residual add": lambda: x + x,
            "linear 128->512": lambda: F.linear(x, w[4 * C]),
            "gelu": lambda: F.gelu(h4),
            "linear 512->128": lambda: F.linear(h4, w_down),
            "head and cross_entropy": lambda: F.cross_entropy(F.linear(x, w[models.VOCAB]).view(-1, models.VOCAB),
                                                              ids.view(-1))}


def seconds(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def table(sides, batch, grad, calls, rounds=5):
    """Best time of each op on each side over `rounds`, the sides alternating each round."""
    calls_of = {}
    for name, ns in sides.items():
        for op, fn in ops(ns.lib, ns.F, batch, np.random.default_rng(0), grad).items():
            calls_of.setdefault(op, {})[name] = (lambda f: lambda: f().sum().backward())(fn) if grad else fn
    print(f"{'forward and backward' if grad else 'forward under no_grad'}, batch {batch}")
    for op, fns in calls_of.items():
        best = {name: float("inf") for name in sides}
        for r in range(rounds + 1):  # round 0 warms up
            for name in (("kael", "torch") if r % 2 == 0 else ("torch", "kael")):
                with sides[name].lib.enable_grad() if grad else sides[name].lib.no_grad():
                    t = seconds(fns[name], calls)
                best[name] = min(best[name], t) if r else best[name]
        k, t = best["kael"] * 1e6, best["torch"] * 1e6
        print(f"  {op:32} kael {k:9.1f} us  torch {t:9.1f} us  kael/torch time {k / t:5.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile-steps", type=int, default=0)
    args = parser.parse_args()
    if args.profile_steps:
        ns = models.namespace("kael")
        ns.lib.set_num_threads(args.threads)
        _, step = models.gpt(ns)
        data = models.as_tensors(ns, models.batches("gpt"))
        for i in range(args.profile_steps):
            step(*data[i % len(data)])
        return
    sides = {"kael": models.namespace("kael"), "torch": models.namespace("torch")}
    for ns in sides.values():
        ns.lib.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}); {args.threads} thread(s); best of 5 rounds in turns")
    table(sides, 1, False, 200)
    table(sides, models.GPT_BATCH, True, 10)


if __name__ == "__main__":
    main()
