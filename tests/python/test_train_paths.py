"""kael's two GPT-2 training steps agree: the engine's hand-written step (kael.TrainModel, what
`kael train` ran until it moved onto nn::GPT) and kael.GPT on the tensor library with autograd give the same loss and the same
gradient for every parameter, within 1e-5 (relative for the loss, of the largest gradient for each
parameter), on one checkpoint and one batch. Each is compared with torch elsewhere
(test_train_gradients.py, test_nn_gpt.py); this holds them to each other directly, so `kael train`
could move onto nn::GPT without changing what a run computes (tests/train_net_test.cpp holds
the run's model to the hand-written step with dropout too)."""
import subprocess
import sys

import numpy as np
import pytest

import gpt2_reference
import kael
import kael.nn.functional as F
from conftest import ROOT

# GPT-2's weight scale, a vocabulary and width small enough to run in seconds, both heads.
CHECKPOINTS = {
    "tied": dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512, dtype="float32", seed=4,
                 init_std=0.02),
    "untied-f16": dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512, dtype="float16", seed=5,
                       init_std=0.02, tied=False),
}


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_hand_written_and_autograd_steps_give_the_same_loss_and_gradients(tmp_path, name):
    spec = CHECKPOINTS[name]
    directory = gpt2_reference.make_checkpoint(tmp_path / name, **spec)
    window = np.random.default_rng(3).integers(0, spec["vocab_size"], size=(3, 41), dtype=np.int64)
    inputs, targets = np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])

    hand = kael._kael.TrainModel.load(str(directory), threads=2)
    hand_loss = hand.forward_backward(inputs.astype(np.int32), targets.astype(np.int32))

    config = kael.nn.GptConfig(n_layer=spec["n_layer"], n_head=spec["n_head"], n_embd=spec["n_embd"],
                               n_positions=spec["n_positions"], vocab_size=spec["vocab_size"],
                               tied_embeddings=spec.get("tied", True))
    net = kael.GPT(config).load_gpt2(directory).train()
    logits = net(kael.from_numpy(inputs))
    loss = F.cross_entropy(logits.reshape(-1, spec["vocab_size"]), kael.from_numpy(targets.reshape(-1)))
    loss.backward()

    assert abs(loss.item() - hand_loss) <= 1e-5 * abs(hand_loss), (loss.item(), hand_loss)
    grads = {n: p.grad.numpy() for n, p in net.named_parameters()}
    assert len(hand.names) == len(grads)
    for stored_name in hand.names:
        ours = kael.nn.translated_gpt2_name(stored_name)
        expected = hand.grad(stored_name)
        if kael.nn.stored_transposed(ours):
            expected = expected.T
        scale = float(np.abs(expected).max())
        error = float(np.abs(grads[ours] - expected).max())
        assert error <= 1e-5 * scale, f"{stored_name}: max difference {error:.3g}, largest gradient {scale:.3g}"


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_the_benchmark_runs_both_steps(tmp_path, precision):
    """bench/train_paths.py, which times the two (the figures are in docs/nn.md), on a tiny checkpoint;
    at bf16 where this CPU has BF16 products (else it stops with the hand-written step's reason)."""
    directory = gpt2_reference.make_checkpoint(tmp_path / "tiny", **CHECKPOINTS["tied"])
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "train_paths.py"), "--model", str(directory),
                             "--steps", "1", "--shapes", "2x8", "--threads", "1", "--precision", precision],
                            capture_output=True, text=True, timeout=300)
    if precision == "bf16" and result.returncode != 0 and "AMX-BF16 or AVX512-BF16" in result.stderr:
        pytest.skip(f"no BF16 products here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith(f"| {precision} | 2x8 |"))
    assert len(row.split("|")) == 11 and row.rstrip(" |").split("|")[-1].strip() in ("yes", "no"), row
