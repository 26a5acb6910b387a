"""Backward on 20 threads at once (backward, matmul and a GPT's forward release the GIL): the
gradients accumulated in a shared leaf, or in a shared kael.GPT's parameters, equal the sum of
the single-threaded ones, and nothing crashes. Each thread runs for a couple of seconds and
counts its own backwards, which the expected sum weighs by."""
from __future__ import annotations

import threading
import time

import numpy as np

import kael

THREADS = 20
SECONDS = 2.0


def run_threads(step) -> list[int]:
    """Calls step(i) in a loop on THREADS threads until SECONDS pass; how many times each ran."""
    counts = [0] * THREADS
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def body(i: int) -> None:
        try:
            start.wait()
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                step(i)
                counts[i] += 1
        except BaseException as error:  # noqa: BLE001 (reported below, on the test's thread)
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert min(counts) > 0, counts
    return counts


def test_backwards_on_a_shared_leaf_add_up():
    rng = np.random.default_rng(5)
    # small integers: every product and sum is exact in float32, so the totals must be equal
    w = kael.tensor(rng.integers(-3, 4, (48, 32)).astype(np.float32), requires_grad=True)
    inputs = [kael.tensor(rng.integers(-3, 4, (8, 48)).astype(np.float32)) for _ in range(THREADS)]

    def step(i: int) -> None:
        (inputs[i] @ w).sum().backward()

    counts = run_threads(step)
    expected = sum(n * x.numpy().T @ np.ones((8, 32), np.float32) for n, x in zip(counts, inputs))
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_backwards_on_a_shared_gpt_add_up():
    kael.manual_seed(3)
    config = kael.nn.GptConfig(vocab_size=64, n_positions=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0)
    model = kael.GPT(config)
    rng = np.random.default_rng(7)
    batches = [kael.tensor(rng.integers(0, 64, (2, 12))) for _ in range(4)]  # thread i uses batch i % 4

    def loss_of(ids):
        logits = model(ids[:, :-1])
        return kael.nn.functional.cross_entropy(logits.reshape(-1, 64), ids[:, 1:].reshape(-1))

    params = dict(model.named_parameters())
    single = []
    for ids in batches:
        model.zero_grad()
        loss_of(ids).backward()
        single.append({name: p.grad.numpy().astype(np.float64) for name, p in params.items()})
    model.zero_grad()

    counts = run_threads(lambda i: loss_of(batches[i % 4]).backward())
    per_batch = [sum(n for i, n in enumerate(counts) if i % 4 == b) for b in range(4)]
    for name, p in params.items():
        expected = sum(n * g[name] for n, g in zip(per_batch, single))
        scale = sum(n * np.abs(g[name]).max() for n, g in zip(per_batch, single))
        # float32 sums of sum(counts) terms in another order: rounding, nothing more. The bound of
        # a recursive float32 sum of N terms is N * 2**-24 * sum|terms|; a lost or doubled
        # gradient is off by a whole term, about scale / N.
        atol = sum(counts) * 2.0**-24 * scale + 1e-12
        np.testing.assert_allclose(p.grad.numpy(), expected, rtol=0, atol=atol, err_msg=name)
