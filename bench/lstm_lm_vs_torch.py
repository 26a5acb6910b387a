"""Training speed of PyTorch's word_language_model (examples/word_language_model: model.py's
RNNModel with an LSTM, main.py's train loop) on kael against torch, written once against torch's
names: Embedding(V, 200) -> Dropout -> LSTM(200, 200, num_layers=2, dropout=0.2) -> Dropout ->
Linear(200, V) -> log_softmax, nll_loss, clip_grad_norm_(0.25), SGD at lr 20; batch 20 x bptt
35 on V = 10000 synthetic token ids, the hidden state carried from batch to batch and detached
as main.py's repackage_hidden does. Both sides start from the same weights (torch's, copied).

Before timing, both train the same 3 batches with dropout off from those weights and print their
losses (they should agree to about 1e-4). Then kael and torch alternate a round of steps each
(the order swapped every round) at each thread count: steps/s by wall and by CPU time, the
ratio. Peak memory: each side trains in a child process that imports only its library.

    python bench/lstm_lm_vs_torch.py [--threads 1,2] [--rounds 5] [--steps 10]
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

VOCAB, WIDTH, LAYERS, DROPOUT = 10000, 200, 2, 0.2
BATCH, BPTT, LR, CLIP = 20, 35, 20.0, 0.25


def namespace(name):
    """torch's or kael's module, nn, nn.functional and optim under the same names."""
    if name == "torch":
        import torch as lib
        import torch.nn.functional as F
    else:
        import kael as lib
        import kael.nn.functional as F
    return types.SimpleNamespace(name=name, lib=lib, nn=lib.nn, F=F, optim=lib.optim)


def language_model(ns):
    """model.py's RNNModel('LSTM', V, 200, 200, 2, dropout 0.2) and main.py's train step on `ns`."""
    nn, F = ns.nn, ns.F

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(DROPOUT)
            self.encoder = nn.Embedding(VOCAB, WIDTH)
            self.rnn = nn.LSTM(WIDTH, WIDTH, LAYERS, dropout=DROPOUT)
            self.decoder = nn.Linear(WIDTH, VOCAB)
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, VOCAB)
            return F.log_softmax(decoded, dim=1), hidden

    model = RNNModel()
    optimizer = ns.optim.SGD(model.parameters(), lr=LR)
    state = {"hidden": (ns.lib.zeros(LAYERS, BATCH, WIDTH), ns.lib.zeros(LAYERS, BATCH, WIDTH))}

    def step(data, targets):
        model.zero_grad()
        hidden = tuple(h.detach() for h in state["hidden"])  # repackage_hidden
        output, state["hidden"] = model(data, hidden)
        loss = F.nll_loss(output, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        return loss

    def reset():
        state["hidden"] = tuple(ns.lib.zeros(LAYERS, BATCH, WIDTH) for _ in range(2))

    return model, step, reset


def batches(count=4):
    """(bptt, batch) inputs and their (bptt * batch) targets, the next ids of one stream as get_batch cuts them."""
    rng = np.random.default_rng(0)
    stream = rng.integers(0, VOCAB, (count * BPTT + 1, BATCH))
    return [(stream[i * BPTT:(i + 1) * BPTT], stream[i * BPTT + 1:(i + 1) * BPTT + 1].reshape(-1))
            for i in range(count)]


def as_tensors(ns, data):
    return [tuple(ns.lib.tensor(a) for a in pair) for pair in data]


def rate(fn, args, steps):
    """Steps per second of wall time, and per second of the process's CPU time (all threads)."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        fn(*args[i % len(args)])
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu)


def child(side, threads, steps=20):
    """Trains on `side` alone, prints the process's peak RSS in MiB."""
    ns = namespace(side)
    ns.lib.set_num_threads(threads)
    _, step, _ = language_model(ns)
    data = as_tensors(ns, batches())
    for i in range(steps):
        step(*data[i % len(data)])
    # VmHWM, not getrusage's ru_maxrss: that one keeps the parent's peak across fork and exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print(int(line.split()[1]) / 1024)


def peak_mib(side, threads):
    out = subprocess.run([sys.executable, __file__, "--child", side, str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def build(sides):
    """Both sides' models, kael's loaded with torch's initial weights."""
    models = {name: language_model(ns) for name, ns in sides.items()}
    models["kael"][0].load_state_dict({n: sides["kael"].lib.tensor(p.detach().numpy())
                                       for n, p in models["torch"][0].state_dict().items()})
    return models


def first_losses(sides, steps=3):
    """Each side's losses over the first `steps` batches from the same weights, dropout off."""
    models = build(sides)
    data = batches(steps)
    losses = {}
    for name, ns in sides.items():
        model, step, _ = models[name]
        model.eval()
        losses[name] = [step(*pair).item() for pair in as_tensors(ns, data)]
    return losses


def compare(rounds, steps, sides):
    """Each side's rates over alternating rounds, training mode (dropout on)."""
    models = build(sides)
    tensors = {name: as_tensors(ns, batches()) for name, ns in sides.items()}
    for name in sides:
        rate(models[name][1], tensors[name], 2)  # warm-up: allocators, pools, caches
    runs = {name: [] for name in sides}
    for r in range(rounds):
        for name in (("kael", "torch") if r % 2 == 0 else ("torch", "kael")):
            models[name][2]()
            runs[name].append(rate(models[name][1], tensors[name], steps))
    return runs


def report(label, runs):
    """Median rates of each side by wall time, with their spread, then by CPU time."""
    for i, clock in enumerate(("wall", "CPU")):
        k, t = (statistics.median(r[i] for r in runs[n]) for n in ("kael", "torch"))
        spread = "  ".join(f"{n} {min(r[i] for r in v):.2f}-{max(r[i] for r in v):.2f}" for n, v in runs.items())
        print(f"{label + ' (' + clock + ')':32} kael {k:7.2f}  torch {t:7.2f} steps/s  kael/torch {k / t:5.2f}x"
              f"   ({spread})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="training steps per round and side")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], int(args.child[1]))
    sides = {"kael": namespace("kael"), "torch": namespace("torch")}
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}); torch {sides['torch'].lib.__version__}; "
          f"{args.rounds} rounds of {args.steps} steps a side, alternating")
    losses = first_losses(sides)
    for name, values in losses.items():
        print(f"first losses, dropout off: {name:5} {' '.join(f'{v:.6f}' for v in values)}")
    for threads in (int(t) for t in args.threads.split(",")):
        sides["torch"].lib.set_num_threads(threads)
        sides["kael"].lib.set_num_threads(threads)
        report(f"LSTM LM train, {threads} thread(s)", compare(args.rounds, args.steps, sides))
    if not args.no_memory:
        k, t = peak_mib("kael", 2), peak_mib("torch", 2)
        print(f"peak RSS (2 threads, 20 steps, own process): kael {k:.0f} MiB, torch {t:.0f} MiB, "
              f"kael/torch {k / t:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
