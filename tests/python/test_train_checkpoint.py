"""What a training run saves: a directory that transformers and kael both load, with equal
logits; a tiny model that learns (its held-out loss goes down); checkpoints that survive a
SIGKILL at any moment."""
from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import GPT2_DIR, kael_binary
from train_support import FAST, TINY_CONFIG, read_log, text_file, tiny_model  # noqa: F401


@pytest.fixture(scope="module")
def finetuned(kael, tiny_model, text_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("finetuned") / "out"
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *FAST, "--steps", "4", "--lr", "1e-3")
    return out


def test_transformers_loads_the_checkpoint_and_agrees_with_kael(kael, finetuned, tiny_model):
    import gpt2_reference
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(finetuned))  # the exact call users make
    assert model.config.n_layer == 2 and model.config.n_embd == 32
    hf = gpt2_reference.load_hf(finetuned)
    ids = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13]
    expected = gpt2_reference.hf_last_logits(hf, ids)
    got = gpt2_reference.kael_last_logits(kael, finetuned, ids)
    assert np.max(np.abs(got - expected)) < 1e-4
    # Training moved the weights: the source model's logits differ.
    before = gpt2_reference.kael_last_logits(kael, tiny_model, ids)
    assert np.max(np.abs(got - before)) > 1e-3
    result = kael("generate", "--model", finetuned, "The", "--max-tokens", "5", "--greedy")
    assert result.stdout


def test_a_tiny_model_lowers_its_validation_loss(kael, text_file, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_CONFIG))
    out, log = tmp_path / "out", tmp_path / "log.jsonl"
    kael("train", "--config", config, "--tokenizer", GPT2_DIR, "--data", text_file, "--out", out, *FAST,
         "--steps", "30", "--lr", "3e-3", "--val-fraction", "0.1", "--eval-every", "15", "--log-json", log)
    evals = [r for r in read_log(log) if r["type"] == "eval"]
    assert [r["step"] for r in evals] == [0, 15, 30]
    assert evals[0]["val_loss"] == pytest.approx(np.log(50257), abs=0.3)  # a fresh init guesses uniformly
    assert evals[1]["val_loss"] < evals[0]["val_loss"] - 1.0
    assert evals[2]["val_loss"] < evals[1]["val_loss"]


def test_sigkill_at_any_moment_leaves_a_whole_checkpoint(tiny_model, text_file, tmp_path):
    from safetensors.numpy import load_file

    out = tmp_path / "out"
    command = [str(kael_binary()), "finetune", "--model", str(tiny_model), "--data", str(text_file), "--out", str(out),
               *FAST, "--steps", "1000", "--save-every", "1"]
    rng = np.random.default_rng(0)
    for attempt in range(3):
        process = subprocess.Popen(command + (["--resume"] if (out / "training_state.json").exists() else []),
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (out / "training_state.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(float(rng.uniform(0.5, 2.0)))
        process.send_signal(signal.SIGKILL)
        process.wait()
        state = json.loads((out / "training_state.json").read_text())
        weights = load_file(str(out / "model.safetensors"))
        moments = load_file(str(out / "optimizer.safetensors"))
        assert set(moments) == {f"exp_avg.{n}" for n in weights} | {f"exp_avg_sq.{n}" for n in weights}
        assert state["step"] == state["adamw_step"] >= 1
    # A later run cleans up what the killed one left beside OUT and goes on from the last checkpoint.
    subprocess.run(command[:-4] + ["--steps", str(state["step"] + 1), "--resume"], check=True, capture_output=True)
    assert json.loads((out / "training_state.json").read_text())["step"] == state["step"] + 1
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
