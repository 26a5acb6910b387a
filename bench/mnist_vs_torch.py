"""Training speed of PyTorch's MNIST example's Net (examples/mnist.py: two convolutions, max
pooling, dropout, two linear layers; Adadelta) on kael against the same Net in torch, in one
process at the same thread count. The two alternate, a round of steps each, so that both see
the same machine load; the figure is each side's median steps per second over the rounds.

    python bench/mnist_vs_torch.py --threads 2 --batch-size 64 --rounds 5 --steps 10
"""
import argparse
import os
import statistics
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import kael
import kael.nn.functional as F
from cpu_name import cpu_name


class KaelNet(kael.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = kael.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = kael.nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = kael.nn.Dropout(0.25)
        self.dropout2 = kael.nn.Dropout(0.5)
        self.fc1 = kael.nn.Linear(9216, 128)
        self.fc2 = kael.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(kael.flatten(x, 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)


class TorchNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = tnn.Conv2d(1, 32, 3, 1)
        self.conv2 = tnn.Conv2d(32, 64, 3, 1)
        self.dropout1 = tnn.Dropout(0.25)
        self.dropout2 = tnn.Dropout(0.5)
        self.fc1 = tnn.Linear(9216, 128)
        self.fc2 = tnn.Linear(128, 10)

    def forward(self, x):
        x = TF.relu(self.conv1(x))
        x = TF.relu(self.conv2(x))
        x = self.dropout1(TF.max_pool2d(x, 2))
        x = TF.relu(self.fc1(torch.flatten(x, 1)))
        return TF.log_softmax(self.fc2(self.dropout2(x)), dim=1)


def timed_steps(step, batches, steps):
    """Steps per second of wall time, and CPU seconds of the process per step (all threads)."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        step(*batches[i % len(batches)])
    return steps / (time.perf_counter() - start), (time.process_time() - cpu) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="training steps per round and side")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kael.set_num_threads(args.threads)

    torch.manual_seed(0)
    t_net = TorchNet()
    k_net = KaelNet()
    k_net.load_state_dict({n: kael.tensor(p.detach().numpy()) for n, p in t_net.state_dict().items()})
    t_opt = torch.optim.Adadelta(t_net.parameters(), lr=1.0)
    k_opt = kael.optim.Adadelta(k_net.parameters(), lr=1.0)

    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((args.batch_size, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, args.batch_size)) for _ in range(4)]
    t_batches = [(torch.tensor(x), torch.tensor(y)) for x, y in data]
    k_batches = [(kael.tensor(x), kael.tensor(y)) for x, y in data]

    def t_step(x, y):
        t_opt.zero_grad()
        TF.nll_loss(t_net(x), y).backward()
        t_opt.step()

    def k_step(x, y):
        k_opt.zero_grad()
        F.nll_loss(k_net(x), y).backward()
        k_opt.step()

    timed_steps(t_step, t_batches, 2)  # warm-up: allocators, thread pools, kernels
    timed_steps(k_step, k_batches, 2)
    kael_runs, torch_runs = [], []
    for _ in range(args.rounds):
        kael_runs.append(timed_steps(k_step, k_batches, args.steps))
        torch_runs.append(timed_steps(t_step, t_batches, args.steps))
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.1f}); "
          f"threads {args.threads}; batch {args.batch_size}; {args.rounds} rounds of {args.steps} steps each, "
          f"alternating; torch {torch.__version__}")
    rates = {}
    for name, runs in (("kael", kael_runs), ("torch", torch_runs)):
        rates[name] = statistics.median(r for r, _ in runs)
        cpu_ms = 1000 * statistics.median(c for _, c in runs)
        print(f"{name:5} {rates[name]:8.2f} steps/s, {cpu_ms:7.1f} CPU ms/step  "
              f"(rounds: {', '.join(f'{r:.2f}' for r, _ in runs)})")
    print(f"kael / torch: {rates['kael'] / rates['torch']:.2f}x")


if __name__ == "__main__":
    main()
