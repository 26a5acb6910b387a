"""Training speed of two small models, written once against torch's names and run on kael and on
torch: nanoGPT's model.py at the char-level size (4 layers, 4 heads, width 128, context 64, no bias,
dropout 0, tied head; AdamW in nanoGPT's two groups, gradient clipping at 1.0, batch 16) and an MLP
784-256-256-10 (ReLU, Adam, batch 64). Both sides start from the same weights (torch's, copied)
and train on the same batches; kael and torch alternate a round of steps each (the order swapped
every round) at 1 and at 2 threads. Also the nanoGPT model's batch-1 forward of 64 tokens under
no_grad, as its generate() calls it. Peak memory: each side trains in a child process that
imports only its library (the process's peak RSS, library and interpreter included).

    python bench/small_models_vs_torch.py [--threads 1,2] [--rounds 5] [--steps 10]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
import types

import numpy as np

from cpu_name import cpu_name

VOCAB, BLOCK, LAYERS, HEADS, WIDTH, GPT_BATCH = 65, 64, 4, 4, 128, 16
MLP_BATCH = 64


def namespace(name):
    """torch's or kael's module, nn, nn.functional and optim under the same names."""
    if name == "torch":
        import torch as lib
        import torch.nn.functional as F
    else:
        import kael as lib
        import kael.nn.functional as F
    return types.SimpleNamespace(name=name, lib=lib, nn=lib.nn, F=F, optim=lib.optim)


def gpt(ns):
    """nanoGPT's model.py (Karpathy), its forward and its optimizer groups, on `ns`."""
    lib, nn, F = ns.lib, ns.nn, ns.F

    class LayerNorm(nn.Module):
        def __init__(self, ndim):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(ndim))

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
            self.c_proj = nn.Linear(WIDTH, WIDTH, bias=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(WIDTH, dim=2)
            k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * WIDTH, WIDTH, bias=False)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(WIDTH)
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(WIDTH)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(VOCAB, WIDTH), wpe=nn.Embedding(BLOCK, WIDTH), drop=nn.Dropout(0.0),
                h=nn.ModuleList([Block() for _ in range(LAYERS)]), ln_f=LayerNorm(WIDTH)))
            self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = lib.arange(0, t, dtype=lib.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is None:
                return self.lm_head(x[:, -1:, :]), None
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    model = GPT()
    params = [p for _, p in model.named_parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = ns.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))

    def step(x, y):
        _, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return model, step


def mlp(ns):
    nn, F = ns.nn, ns.F
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = ns.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return model, step


MODELS = {"gpt": gpt, "mlp": mlp}


def batches(kind, count=4):
    rng = np.random.default_rng(0)
    if kind == "gpt":
        return [(rng.integers(0, VOCAB, (GPT_BATCH, BLOCK)), rng.integers(0, VOCAB, (GPT_BATCH, BLOCK)))
                for _ in range(count)]
    return [(rng.standard_normal((MLP_BATCH, 784)).astype(np.float32), rng.integers(0, 10, MLP_BATCH))
            for _ in range(count)]


def as_tensors(ns, data):
    return [tuple(ns.lib.tensor(a) for a in pair) for pair in data]


def rate(fn, args, steps):
    """Steps per second of wall time, and per second of the process's CPU time (all threads):
    on a loaded machine the second moves less with the load."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        fn(*args[i % len(args)])
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu)


def child(side, kind, threads, steps=20):
    """Trains `kind` on `side` alone, prints the process's peak RSS in MiB."""
    ns = namespace(side)
    ns.lib.set_num_threads(threads)
    _, step = MODELS[kind](ns)
    data = as_tensors(ns, batches(kind))
    for i in range(steps):
        step(*data[i % len(data)])
    # VmHWM, not getrusage's ru_maxrss: that one keeps the parent's peak across fork and exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print(int(line.split()[1]) / 1024)


def peak_mib(side, kind, threads):
    out = subprocess.run([sys.executable, __file__, "--child", side, kind, str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def compare(kind, threads, rounds, steps, sides):
    """Median steps/s of each side over alternating rounds, and each side's first loss."""
    models = {}
    for name, ns in sides.items():
        models[name] = MODELS[kind](ns)
    torch_model = models["torch"][0]
    models["kael"][0].load_state_dict({n: sides["kael"].lib.tensor(p.detach().numpy())
                                       for n, p in torch_model.state_dict().items()})
    data = batches(kind)
    tensors = {name: as_tensors(ns, data) for name, ns in sides.items()}
    first = {name: models[name][1](*tensors[name][0]).item() for name in sides}
    for name in sides:
        rate(models[name][1], tensors[name], 2)  # warm-up: allocators, pools, caches
    runs = {name: [] for name in sides}
    for r in range(rounds):
        for name in (("kael", "torch") if r % 2 == 0 else ("torch", "kael")):
            runs[name].append(rate(models[name][1], tensors[name], steps))
    return runs, first


def forward_rate(threads, rounds, sides, calls=50):
    """Batch-1 64-token forwards per second under no_grad, alternating."""
    models = {name: gpt(ns)[0] for name, ns in sides.items()}
    models["kael"].load_state_dict({n: sides["kael"].lib.tensor(p.detach().numpy())
                                    for n, p in models["torch"].state_dict().items()})
    idx = batches("gpt", 1)[0][0][:1]
    inputs = {name: ns.lib.tensor(idx) for name, ns in sides.items()}
    runs = {name: [] for name in sides}

    def forward(name):
        with sides[name].lib.no_grad():
            for _ in range(calls):
                models[name](inputs[name])

    for name in sides:
        forward(name)
    for r in range(rounds):
        for name in (("kael", "torch") if r % 2 == 0 else ("torch", "kael")):
            runs[name].append(rate(lambda: forward(name), [()], 1))
            runs[name][-1] = tuple(calls * v for v in runs[name][-1])
    return runs


def report(label, runs, unit):
    """Median rates of each side by wall time, with their spread, then by CPU time."""
    for i, clock in enumerate(("wall", "CPU")):
        k, t = (statistics.median(r[i] for r in runs[n]) for n in ("kael", "torch"))
        spread = "  ".join(f"{n} {min(r[i] for r in v):.1f}-{max(r[i] for r in v):.1f}" for n, v in runs.items())
        print(f"{label + ' (' + clock + ')':40} kael {k:8.1f}  torch {t:8.1f} {unit}  kael/torch {k / t:5.2f}x   ({spread})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="training steps per round and side")
    parser.add_argument("--models", default="gpt,mlp")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], args.child[1], int(args.child[2]))
    sides = {"kael": namespace("kael"), "torch": namespace("torch")}
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}); torch {sides['torch'].lib.__version__}; "
          f"{args.rounds} rounds of {args.steps} steps a side, alternating")
    for threads in (int(t) for t in args.threads.split(",")):
        sides["torch"].lib.set_num_threads(threads)
        sides["kael"].lib.set_num_threads(threads)
        for kind in args.models.split(","):
            runs, first = compare(kind, threads, args.rounds, args.steps, sides)
            report(f"{kind} train, {threads} thread(s)", runs, "steps/s")
            print(f"{'':40} first loss kael {first['kael']:.5f} torch {first['torch']:.5f}")
        if "gpt" in args.models:
            report(f"gpt forward 1x64, {threads} thread(s)", forward_rate(threads, args.rounds, sides), "calls/s")
    if not args.no_memory:
        for kind in args.models.split(","):
            k, t = peak_mib("kael", kind, 2), peak_mib("torch", kind, 2)
            print(f"{kind} peak RSS (2 threads, 20 steps, own process): kael {k:.0f} MiB, torch {t:.0f} MiB, "
                  f"kael/torch {k / t:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
