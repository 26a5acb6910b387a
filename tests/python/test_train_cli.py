"""`kael finetune` / `kael train` from the command line: resuming bit for bit (after a stop and
after SIGINT), the token cache, the log, and every bad input refused with a clear error that
loses nothing."""
from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from conftest import kael_binary
from train_support import FAST, TINY_CONFIG, checkpoint_bytes, read_log, snapshot, text_file, tiny_model  # noqa: F401

# Options that exercise every part of a step: accumulation, clipping, dropout, weight decay,
# warmup and the cosine schedule, and the shuffled order.
FULL = [*FAST, "--accum", "2", "--grad-clip", "0.5", "--dropout", "0.1", "--weight-decay", "0.1",
        "--lr", "1e-3", "--schedule", "cosine", "--warmup", "2", "--min-lr", "1e-4", "--seed", "5"]


def finetune(kael, model, data, out, *args, check=True):
    return kael("finetune", "--model", model, "--data", data, "--out", out, *args, check=check)


def error_of(result) -> str:
    assert result.returncode != 0
    text = result.stderr.decode()
    assert "error: " in text, text
    return text


@pytest.fixture(scope="module")
def uninterrupted(kael, tiny_model, text_file, tmp_path_factory):
    """Ten steps in one run."""
    out = tmp_path_factory.mktemp("uninterrupted") / "out"
    finetune(kael, tiny_model, text_file, out, *FULL, "--steps", "10", "--log-json", out.parent / "log.jsonl")
    return out


def test_resume_after_a_shorter_run_equals_one_run(kael, tiny_model, text_file, tmp_path):
    # A constant schedule does not depend on --steps, so 5 steps and then 5 more must be the
    # same steps as 10 in one go.
    options = list(FULL)
    options[options.index("--schedule") + 1] = "constant"
    one, two = tmp_path / "one", tmp_path / "two"
    finetune(kael, tiny_model, text_file, one, *options, "--steps", "10")
    finetune(kael, tiny_model, text_file, two, *options, "--steps", "5")
    assert json.loads((two / "training_state.json").read_text())["step"] == 5
    finetune(kael, tiny_model, text_file, two, *options, "--steps", "10", "--resume")
    assert checkpoint_bytes(two) == checkpoint_bytes(one)
    state_one = json.loads((one / "training_state.json").read_text())
    state_two = json.loads((two / "training_state.json").read_text())
    assert state_two == state_one and state_two["step"] == 10 and state_two["adamw_step"] == 10


def test_sigint_saves_and_resume_reaches_the_same_weights(uninterrupted, tiny_model, text_file, tmp_path):
    out, log = tmp_path / "out", tmp_path / "log.jsonl"
    command = [str(kael_binary()), "finetune", "--model", str(tiny_model), "--data", str(text_file), "--out", str(out),
               *FULL, "--steps", "10", "--log-json", str(log)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    stopped_at = json.loads((out / "training_state.json").read_text())["step"]
    if stopped_at < 10:  # it may have finished before the signal arrived
        assert process.returncode == 128 + signal.SIGINT, stderr.decode()
        assert b"--resume" in stderr
        assert read_log(log)[-1]["step"] == stopped_at
    resumed = subprocess.run([*command, "--resume"], capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert checkpoint_bytes(out) == checkpoint_bytes(uninterrupted)
    # The log of the two runs together is the log of the uninterrupted one, step for step.
    steps = [r for r in read_log(log) if r["type"] == "step"]
    reference = [r for r in read_log(uninterrupted.parent / "log.jsonl") if r["type"] == "step"]
    assert [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in steps] == \
        [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in reference]


def test_the_log_has_a_record_per_step(uninterrupted):
    records = read_log(uninterrupted.parent / "log.jsonl")
    assert [r["step"] for r in records] == list(range(1, 11))
    for record in records:
        assert {"step", "loss", "lr", "grad_norm", "tokens_per_s"} <= record.keys()
        assert record["tokens_per_s"] > 0 and record["loss"] > 0
    # warmup 2 then cosine from 1e-3 to 1e-4 over the remaining 8 steps (formula in schedule.hpp)
    import math
    expected = [1e-3 * (s + 1) / 2 if s < 2 else 1e-4 + 0.5 * (1 + math.cos(math.pi * (s - 2) / 8)) * (1e-3 - 1e-4)
                for s in range(10)]
    assert [r["lr"] for r in records] == pytest.approx(expected, rel=1e-12)


def test_a_rerun_reads_the_token_cache(kael, tiny_model, text_file, tmp_path):
    out = tmp_path / "out"
    first = finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "1")
    assert b"from the cache" not in first.stderr
    [cache] = (out / ".kael-train").glob("tokens-*.bin")
    written = cache.stat().st_mtime_ns
    second = finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "1", "--overwrite")
    assert b"tokens from the cache" in second.stderr
    [again] = (out / ".kael-train").glob("tokens-*.bin")
    assert again.stat().st_mtime_ns == written


def test_jsonl_and_directories_are_read(kael, tiny_model, tmp_path, tiktoken_gpt2):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "b.txt").write_text("The second file, in a directory. " * 20)
    (data / "sub" / "a.jsonl").write_text("\n".join(json.dumps({"text": f"Record {i} of the first file."}) for i in range(30)))
    (data / "skip.bin").write_bytes(b"\x00" * 100)
    out = tmp_path / "out"
    result = finetune(kael, tiny_model, data, out, *FAST, "--steps", "1")
    expected = sum(len(tiktoken_gpt2.encode(f"Record {i} of the first file.")) + 1 for i in range(30))
    expected += len(tiktoken_gpt2.encode("The second file, in a directory. " * 20)) + 1
    assert f"({expected} training tokens".encode() in result.stderr


def test_the_loss_curve_is_drawn_at_the_end(uninterrupted, kael, tiny_model, text_file, tmp_path):
    result = finetune(kael, tiny_model, text_file, tmp_path / "out", *FAST, "--steps", "3")
    text = result.stderr.decode()
    assert "loss\n" in text and "step 1" in text and text.count("*") == 3


# ---- bad input: each a clear error, a non-zero exit, and nothing lost


def test_missing_and_empty_data(kael, tiny_model, tmp_path):
    message = error_of(finetune(kael, tiny_model, tmp_path / "none.txt", tmp_path / "out", *FAST, "--steps", "1", check=False))
    assert "none.txt' does not exist" in message
    (tmp_path / "empty.txt").write_text("")
    message = error_of(finetune(kael, tiny_model, tmp_path / "empty.txt", tmp_path / "out", *FAST, "--steps", "1", check=False))
    assert "empty.txt' is empty" in message


def test_text_shorter_than_one_window(kael, tiny_model, tmp_path):
    (tmp_path / "short.txt").write_text("Too short.")
    message = error_of(finetune(kael, tiny_model, tmp_path / "short.txt", tmp_path / "out", "--steps", "1", "--seq", "16",
                                check=False))
    assert "shorter than one window" in message and "--seq 16" in message
    assert not (tmp_path / "out").exists()  # a refused run leaves nothing behind


def test_held_out_text_shorter_than_one_window(kael, tiny_model, text_file, tmp_path):
    message = error_of(finetune(kael, tiny_model, text_file, tmp_path / "out", *FAST, "--steps", "1",
                                "--val-fraction", "0.001", check=False))
    assert "held-out text" in message


def test_seq_above_n_positions(kael, tiny_model, text_file, tmp_path):
    message = error_of(finetune(kael, tiny_model, text_file, tmp_path / "out", "--steps", "1", "--seq", "65", check=False))
    assert "--seq 65 is above the model's n_positions 64" in message
    assert not (tmp_path / "out").exists()


def test_out_that_cannot_be_written(kael, tiny_model, text_file, tmp_path):
    (tmp_path / "file").write_text("a file, not a directory")
    message = error_of(finetune(kael, tiny_model, text_file, tmp_path / "file" / "out", *FAST, "--steps", "1", check=False))
    assert "cannot be written" in message
    message = error_of(finetune(kael, tiny_model, text_file, tmp_path / "file", *FAST, "--steps", "1", "--overwrite",
                                check=False))
    assert "refusing to replace it" in message
    assert (tmp_path / "file").read_text() == "a file, not a directory"


def test_out_holding_another_model_or_run(kael, tiny_model, text_file, tmp_path):
    before = snapshot(tiny_model)
    message = error_of(finetune(kael, tiny_model, text_file, tiny_model, *FAST, "--steps", "1", check=False))
    assert "already holds a model; pass --overwrite" in message
    message = error_of(finetune(kael, tiny_model, text_file, tiny_model, *FAST, "--steps", "1", "--resume", check=False))
    assert "no training state to resume" in message
    assert snapshot(tiny_model) == before

    out = tmp_path / "out"
    finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "2")
    saved = snapshot(out)
    message = error_of(finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "2", check=False))
    assert "already holds a training run; pass --resume" in message
    message = error_of(finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "4", "--resume", "--lr", "1", check=False))
    assert "--lr is 1.0 but the saved run used 0.0001" in message
    message = error_of(finetune(kael, tiny_model, text_file, out, "--batch", "3", "--seq", "16", "--steps", "4", "--resume",
                                check=False))
    assert "--batch is 3" in message
    assert snapshot(out) == saved

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    message = error_of(finetune(kael, tiny_model, text_file, other, *FAST, "--steps", "1", "--overwrite", check=False))
    assert "refusing to replace it" in message
    assert (other / "notes.txt").read_text() == "mine"


def test_a_loss_that_stops_being_finite(kael, tiny_model, text_file, tmp_path):
    # A huge rate sends the weights to ~1e30 after the first update; the next forward pass overflows.
    out = tmp_path / "out"
    result = finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "5", "--lr", "1e30", "--weight-decay", "0",
                      "--grad-clip", "0", "--save-every", "1", check=False)
    message = error_of(result)
    assert "at step 2; training stopped" in message and "its last checkpoint, from step 1" in message, message
    assert json.loads((out / "training_state.json").read_text())["step"] == 1
    kael("logits", "--model", out, "--ids", "1,2,3", "--top", "1")  # the kept checkpoint is whole

    # Weights that overflow in the update itself are refused before they are saved.
    result = finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "5", "--lr", "1e38", "--weight-decay", "0",
                      "--grad-clip", "0", "--save-every", "1", "--overwrite", check=False)
    message = error_of(result)
    assert "the weights became non-finite at step 1" in message and "keeps its last checkpoint, from step 1" in message
    assert json.loads((out / "training_state.json").read_text())["step"] == 1


def test_unknown_option_and_bad_values(kael, tiny_model, text_file, tmp_path):
    for args, expected in [(["--steps", "1", "--no-such-option"], "no-such-option"),
                           (["--steps", "1", "--order", "random"], "unknown order 'random'"),
                           (["--steps", "1", "--schedule", "linear"], "unknown schedule 'linear'"),
                           ([], "give --steps N or --epochs E"),
                           (["--steps", "1", "--epochs", "1"], "either --steps or --epochs"),
                           (["--steps", "1", "--dropout", "1"], "--dropout must be in [0, 1)"),
                           (["--steps", "1", "--resume", "--overwrite"], "either --resume or --overwrite")]:
        result = finetune(kael, tiny_model, text_file, tmp_path / "out", *FAST, *args, check=False)
        assert result.returncode != 0
        assert expected in result.stderr.decode(), (args, result.stderr.decode())
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_train_from_a_config(kael, text_file, tmp_path):
    from conftest import GPT2_DIR

    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY_CONFIG, "tie_word_embeddings": False}))
    out = tmp_path / "out"
    kael("train", "--config", config, "--tokenizer", GPT2_DIR, "--data", text_file, "--out", out, *FAST, "--steps", "2")
    saved = json.loads((out / "config.json").read_text())
    assert saved["n_layer"] == 2 and saved["tie_word_embeddings"] is False
    names = json.loads((out / "model.safetensors").read_bytes()[8:8 + int.from_bytes(
        (out / "model.safetensors").read_bytes()[:8], "little")])
    assert "lm_head.weight" in names
    kael("generate", "--model", out, "--ids", "1,2", "--max-tokens", "3", "--greedy")
    (tmp_path / "big.json").write_text(json.dumps({**TINY_CONFIG, "vocab_size": 1000}))
    message = error_of(kael("train", "--config", tmp_path / "big.json", "--tokenizer", GPT2_DIR, "--data", text_file,
                            "--out", tmp_path / "out2", *FAST, "--steps", "1", check=False))
    assert "more than the model's vocab_size 1000" in message


def test_resume_refuses_another_config_or_model(kael, tiny_model, text_file, tmp_path):
    """--resume continues the saved model: a --config of another shape, or a run started from a
    --config resumed with --model (and the reverse), is refused, and the saved run is kept."""
    from conftest import GPT2_DIR

    config, other = tmp_path / "config.json", tmp_path / "other.json"
    config.write_text(json.dumps(TINY_CONFIG))
    other.write_text(json.dumps({**TINY_CONFIG, "n_layer": TINY_CONFIG["n_layer"] + 1}))
    out = tmp_path / "out"

    def train(config_file, *args):
        return kael("train", "--config", config_file, "--tokenizer", GPT2_DIR, "--data", text_file, "--out", out,
                    *FAST, *args, check=False)

    assert train(config, "--steps", "2").returncode == 0
    saved = snapshot(out)
    message = error_of(train(other, "--steps", "4", "--resume"))
    assert f"--config has n_layer = {TINY_CONFIG['n_layer'] + 1} but the saved run's model has n_layer = " \
           f"{TINY_CONFIG['n_layer']}" in message
    message = error_of(finetune(kael, tiny_model, text_file, out, *FAST, "--steps", "4", "--resume", check=False))
    assert "started from a --config (kael train), not from --model" in message
    assert snapshot(out) == saved
    assert train(config, "--steps", "3", "--resume").returncode == 0

    tuned = tmp_path / "tuned"
    finetune(kael, tiny_model, text_file, tuned, *FAST, "--steps", "1")
    message = error_of(kael("train", "--config", config, "--tokenizer", GPT2_DIR, "--data", text_file, "--out", tuned,
                            *FAST, "--steps", "2", "--resume", check=False))
    assert f"started from --model '{tiny_model}'" in message
