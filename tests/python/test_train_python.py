"""kael.finetune and kael.train from Python: the CLI's options as keyword arguments, a callback
per record that can stop the run, the history returned, and the same weights as the CLI."""
from __future__ import annotations

import json
import threading
import time

import pytest

from conftest import GPT2_DIR
from train_support import FAST, TINY_CONFIG, checkpoint_bytes, text_file, tiny_model  # noqa: F401

kael = pytest.importorskip("kael")

OPTIONS = dict(batch=2, seq=16, threads=2, accum=2, lr=1e-3, schedule="cosine", warmup=2, min_lr=1e-4,
               dropout=0.1, grad_clip=0.5, seed=9)


def test_the_history_and_the_callback(tiny_model, text_file, tmp_path):
    seen = []
    history = kael.finetune(tiny_model, text_file, tmp_path / "out", steps=3, val_fraction=0.2, eval_every=3,
                            callback=seen.append, **OPTIONS)
    assert history == seen
    assert [(r["type"], r["step"]) for r in history] == [("eval", 0), ("step", 1), ("step", 2), ("step", 3), ("eval", 3)]
    assert {"loss", "lr", "grad_norm", "tokens_per_s"} <= history[1].keys()


def test_a_callback_stop_then_resume_equals_the_cli_run(kael_cli_run, tiny_model, text_file, tmp_path):
    out = tmp_path / "out"
    history = kael.finetune(tiny_model, [text_file], out, steps=10, callback=lambda r: r["step"] < 4, **OPTIONS)
    assert [r["step"] for r in history] == [1, 2, 3, 4]
    assert json.loads((out / "training_state.json").read_text())["step"] == 4
    rest = kael.finetune(tiny_model, [text_file], out, steps=10, resume=True, **OPTIONS)
    assert [r["step"] for r in rest] == list(range(5, 11))
    assert checkpoint_bytes(out) == checkpoint_bytes(kael_cli_run)


@pytest.fixture
def kael_cli_run(kael, tiny_model, text_file, tmp_path):
    out = tmp_path / "cli"
    args = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, "--steps", "10", *args)
    return out


def test_the_gil_is_released_while_training(tiny_model, text_file, tmp_path):
    # A thread ticks every 10 ms. With the GIL held through the call it could not tick inside it
    # at all; released, it ticks throughout. Counting only the ticks inside the call (not all of
    # them, which depended on how fast the machine trained) keeps the check from flaking.
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            stop.wait(0.01)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        while not ticks:
            time.sleep(0.001)
        start = time.perf_counter()
        kael.finetune(tiny_model, text_file, tmp_path / "out", steps=10, batch=2, seq=16, threads=2)
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    inside = [t for t in ticks if start < t < end]
    assert len(inside) >= 3, f"{len(inside)} ticks in the {end - start:.3f} s the call took"


def test_a_callback_error_saves_and_propagates(tiny_model, text_file, tmp_path):
    def fail(record):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        kael.finetune(tiny_model, text_file, tmp_path / "out", steps=5, batch=2, seq=16, callback=fail)
    assert json.loads((tmp_path / "out" / "training_state.json").read_text())["step"] == 1


def test_train_takes_a_config_dict(text_file, tmp_path):
    history = kael.train(TINY_CONFIG, text_file, tmp_path / "out", tokenizer=GPT2_DIR, steps=2, batch=2, seq=16)
    assert len(history) == 2
    assert json.loads((tmp_path / "out" / "config.json").read_text())["n_embd"] == 32


def test_bad_arguments(tiny_model, text_file, tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'stepz'"):
        kael.finetune(tiny_model, text_file, tmp_path / "out", stepz=1)
    with pytest.raises(kael.ValueError, match="shorter than one window"):
        kael.finetune(tiny_model, text_file, tmp_path / "out", steps=1, batch=2, seq=64, val_fraction=0.995)
    with pytest.raises(kael.Error, match="does not exist"):
        kael.finetune(tiny_model, tmp_path / "missing.txt", tmp_path / "out", steps=1, seq=16)


def test_ctrl_c_saves_then_raises_keyboard_interrupt(tiny_model, text_file, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    # A process started in the background by a non-interactive shell inherits SIGINT ignored, and
    # Python then installs no handler for it: set Python's own, as an interactive run has it.
    # The callback writes its line in one call: print writes the number and the newline apart,
    # and an interrupt between the two ran the number into the next line ("24interrupted").
    script = (f"import kael, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\ntry:\n    kael.finetune({str(tiny_model)!r}, {str(text_file)!r}, {str(out)!r}, steps=100000, "
              f"batch=2, seq=16, threads=2, callback=lambda r: sys.stdout.write(str(r['step']) + '\\n') and sys.stdout.flush())\n"
              f"except KeyboardInterrupt:\n    print('interrupted', flush=True)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert process.stdout.readline().strip() == "1"
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    lines = process.communicate(timeout=120)[0].split()
    assert process.returncode == 0 and lines[-1] == "interrupted"
    steps = [1] + [int(line) for line in lines[:-1]]  # the records the callback printed
    # The interrupt may land inside the callback of the next step, which then is not printed.
    assert json.loads((out / "training_state.json").read_text())["step"] in (steps[-1], steps[-1] + 1)
