"""gpt2_reference.train_checkpoint: a tiny GPT-2 trained for a few steps on the test corpus
learns (its held-out loss drops) and saves a directory kael loads. The full-size run
(TRAINED_CHECKPOINTS) is the script's, not the tests'; quant_accuracy's test on a trained model uses
the bundled one (test_bundled_model.py), which needs no training."""
import json

import numpy as np
import pytest

import gpt2_reference


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    # Narrow and short: a few seconds of training, enough to take the loss 2 nats below ln(50257).
    return gpt2_reference.train_checkpoint(tmp_path_factory.mktemp("trained") / "tiny", n_layer=1, n_head=2,
                                           n_embd=32, n_positions=32, steps=12, seq_len=32, batch=4, lr=1e-2,
                                           seed=7, eval_windows=16)


def test_training_lowers_the_heldout_loss(trained_dir):
    report = json.loads((trained_dir / "training.json").read_text())
    assert report["heldout_loss_before"] > 10  # default init: about ln(50257) = 10.8
    assert report["heldout_loss_after"] < report["heldout_loss_before"] - 2


def test_kael_loads_the_trained_directory(kael, trained_dir):
    out = json.loads(kael("logits", "--model", trained_dir, "The quick brown fox", "--top", 3, "--json").stdout)
    assert len(out["top"]) == 3


def test_heldout_windows_come_from_the_heldout_slices():
    heldout = [h.astype(np.int64).tobytes() for _, h in gpt2_reference.corpus_split()]
    windows = gpt2_reference.heldout_windows(8, 16, seed=1)
    assert windows == gpt2_reference.heldout_windows(8, 16, seed=1)  # seeded
    for window in windows:
        assert any(np.array(window, dtype=np.int64).tobytes() in h for h in heldout)
