"""Data-parallel training under mpirun: two ranks train as one process with the whole batch
(losses, validation losses and weights), a run resumes on another number of ranks, a killed rank
ends the run and leaves a checkpoint that resumes, and ranks given different commands are
refused before the first step. Python's kael.train works the same under mpirun."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import kael_binary
from train_support import TINY_CONFIG, read_log, text_file, tiny_model  # noqa: F401

MPIRUN = shutil.which("mpirun")
if MPIRUN is None:
    # CI installs Open MPI (scripts/install_deps.sh); elsewhere the tests need it to mean anything.
    pytest.skip("mpirun not found (Debian: openmpi-bin)", allow_module_level=True)

# Root may start ranks only when asked; the ranks are not bound to cores (the tests oversubscribe
# a small machine), and shared memory copies through a buffer, which works in any container.
MPI_OPTIONS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "--mca", "btl_vader_single_copy_mechanism", "none"]
# Every part of a step that the split over ranks touches: accumulation, dropout (masks per row),
# clipping, the shuffled order, and the validation loss (the ranks share its batches).
OPTIONS = ["--seq", "16", "--threads", "1", "--accum", "2", "--dropout", "0.1", "--grad-clip", "0.5",
           "--lr", "1e-3", "--seed", "7", "--val-fraction", "0.1", "--eval-every", "5"]
STEPS = 20


def mpirun(ranks: int, *command, timeout=300, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([MPIRUN, *MPI_OPTIONS, "-np", str(ranks), *map(str, command)], capture_output=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"mpirun failed ({result.returncode}):\n{result.stderr.decode()[-3000:]}")
    return result


def finetune(model, data, out, *args):
    return [kael_binary(), "finetune", "--model", model, "--data", data, "--out", out, *OPTIONS, *args]


def weights(out) -> dict[str, np.ndarray]:
    return load_file(str(pathlib.Path(out) / "model.safetensors"))


def assert_same_run(log_a, log_b, out_a, out_b):
    """Losses within 1e-6 relative at every step and evaluation, weights within 1e-5."""
    a, b = read_log(log_a), read_log(log_b)
    assert [(r["type"], r["step"]) for r in a] == [(r["type"], r["step"]) for r in b]
    for ra, rb in zip(a, b):
        key = "loss" if ra["type"] == "step" else "val_loss"
        assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=0), (ra, rb)
    wa, wb = weights(out_a), weights(out_b)
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_allclose(wa[name], wb[name], rtol=0, atol=1e-5, err_msg=name)


@pytest.fixture(scope="module")
def one_process(kael, tiny_model, text_file, tmp_path_factory):
    """1 rank, --batch 4: the reference."""
    out = tmp_path_factory.mktemp("one") / "out"
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *OPTIONS, "--batch", "4",
         "--steps", STEPS, "--log-json", out.parent / "log.jsonl")
    return out


@pytest.fixture(scope="module")
def two_ranks(tiny_model, text_file, tmp_path_factory):
    """2 ranks x --batch 2, the same windows as one_process."""
    out = tmp_path_factory.mktemp("two") / "out"
    result = mpirun(2, *finetune(tiny_model, text_file, out, "--batch", "2", "--steps", STEPS,
                                 "--log-json", out.parent / "log.jsonl"))
    return out, result.stderr.decode()


def test_two_ranks_train_as_one_process_with_the_whole_batch(one_process, two_ranks):
    out, stderr = two_ranks
    assert "data parallel: 2 ranks x 1 threads, global batch 4 (--batch 2 per rank)" in stderr
    assert stderr.count("saved ") == 1 and "rank 1: peak RSS" in stderr  # rank 0 alone reports the run
    assert_same_run(one_process.parent / "log.jsonl", out.parent / "log.jsonl", one_process, out)
    state = json.loads((out / "training_state.json").read_text())
    assert state["ranks"] == 2 and state["options"]["batch"] == 4 and state["step"] == STEPS


def test_a_two_rank_run_resumed_on_one_rank_equals_the_uninterrupted_run(kael, two_ranks, tiny_model, text_file,
                                                                          tmp_path):
    out, log = tmp_path / "out", tmp_path / "log.jsonl"
    mpirun(2, *finetune(tiny_model, text_file, out, "--batch", "2", "--steps", "10", "--log-json", log))
    assert json.loads((out / "training_state.json").read_text())["step"] == 10
    wrong = kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *OPTIONS, "--batch", "2",
                 "--steps", STEPS, "--resume", check=False)
    assert wrong.returncode != 0 and "--batch is 2 but the saved run used 4" in wrong.stderr.decode()
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *OPTIONS, "--batch", "4",
         "--steps", STEPS, "--resume", "--log-json", log)
    assert_same_run(two_ranks[0].parent / "log.jsonl", log, two_ranks[0], out)


def rank_process(parent_pid: int, rank: int) -> int | None:
    """The pid of rank `rank` among the processes mpirun (parent_pid) started."""
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if ppid == parent_pid and f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


def signal_rank_1_after_a_checkpoint(out, command, signal_number) -> tuple[int, str]:
    """Runs `command` on 2 ranks until OUT holds a checkpoint, sends rank 1 (only) the signal, and
    returns mpirun's exit status and stderr."""
    run = subprocess.Popen([MPIRUN, *MPI_OPTIONS, "-np", "2", *map(str, command)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out / "training_state.json").exists():
            assert run.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.1)
        victim = rank_process(run.pid, 1)
        assert victim is not None, "rank 1 not found"
        os.kill(victim, signal_number)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    return run.returncode, stderr.decode()


def test_a_killed_rank_ends_the_run_and_the_checkpoint_resumes(kael, tiny_model, text_file, tmp_path):
    out = tmp_path / "out"
    command = finetune(tiny_model, text_file, out, "--batch", "2", "--steps", "100000", "--save-every", "3")
    status, stderr = signal_rank_1_after_a_checkpoint(out, command, signal.SIGKILL)
    assert status != 0
    assert "process rank 1" in stderr, stderr  # mpirun names the rank that died
    step = json.loads((out / "training_state.json").read_text())["step"]
    assert step >= 3 and step % 3 == 0
    log = tmp_path / "log.jsonl"
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *OPTIONS, "--batch", "4",
         "--steps", step + 2, "--resume", "--log-json", log)
    assert json.loads((out / "training_state.json").read_text())["step"] == step + 2


def test_a_signalled_rank_stops_every_rank_after_the_same_step(kael, tiny_model, text_file, tmp_path):
    out = tmp_path / "out"
    command = finetune(tiny_model, text_file, out, "--batch", "2", "--steps", "100000", "--save-every", "3")
    status, stderr = signal_rank_1_after_a_checkpoint(out, command, signal.SIGTERM)  # rank 0 learns it from rank 1
    assert status != 0  # 143 from each rank
    assert "stopped with the other ranks; continue with --resume" in stderr, stderr  # rank 0
    state = json.loads((out / "training_state.json").read_text())
    assert re.search(rf"saved \S+ at step {state['step']}/100000", stderr), stderr  # saved where every rank stopped
    kael("finetune", "--model", tiny_model, "--data", text_file, "--out", out, *OPTIONS, "--batch", "4",
         "--steps", state["step"] + 1, "--resume")


@pytest.mark.parametrize("differ, what", [("--data", "other training data"), ("--lr", "other options"),
                                          ("--model", "another model")])
def test_ranks_given_different_commands_are_refused_before_the_first_step(tiny_model, text_file, tmp_path, differ,
                                                                          what):
    other_text = tmp_path / "other.txt"
    other_text.write_bytes(text_file.read_bytes()[:20_000])
    other_model = tmp_path / "other_model"
    shutil.copytree(tiny_model, other_model)
    tensors = load_file(str(other_model / "model.safetensors"))
    name = next(n for n in tensors if n.endswith("ln_f.bias"))
    tensors[name] = tensors[name] + 1
    from safetensors.numpy import save_file
    save_file(tensors, str(other_model / "model.safetensors"))
    other = {"--data": other_text, "--lr": "2e-3", "--model": other_model}[differ]
    out = tmp_path / "out"
    command = finetune(tiny_model, text_file, out, "--batch", "2", "--steps", "5")
    rank1 = list(command)
    rank1[rank1.index(differ) + 1] = other
    result = subprocess.run([MPIRUN, *MPI_OPTIONS, "-np", "1", *map(str, command), ":", "-np", "1",
                             *map(str, rank1)], capture_output=True, timeout=300)
    stderr = result.stderr.decode()
    assert result.returncode != 0
    assert f"rank 1 of 2 was started with {what}" in stderr and "nothing was trained" in stderr, stderr
    assert not out.exists()  # rank 0 made OUT and removes it: no checkpoint was written


PYTHON_RUN = """
import json, sys, kael
world = kael.world()
calls = []
history = kael.finetune(sys.argv[1], sys.argv[2], sys.argv[3], callback=calls.append, batch=2, steps={steps},
                        **json.loads(sys.argv[4]))
print(json.dumps({{"world": world, "losses": [r.get("loss", r.get("val_loss")) for r in history],
                   "calls": len(calls)}}))
"""


def test_python_trains_the_same_under_mpirun(two_ranks, tiny_model, text_file, tmp_path):
    options = {"seq": 16, "threads": 1, "accum": 2, "dropout": 0.1, "grad_clip": 0.5, "lr": 1e-3, "seed": 7,
               "val_fraction": 0.1, "eval_every": 5}  # OPTIONS as keyword arguments
    script = tmp_path / "run.py"
    script.write_text(PYTHON_RUN.format(steps=STEPS))
    result = subprocess.run([MPIRUN, *MPI_OPTIONS, "-np", "2", sys.executable, script, tiny_model, text_file,
                             tmp_path / "out", json.dumps(options)], capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    lines = [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]
    by_rank = {line["world"]["rank"]: line for line in lines}
    assert sorted(by_rank) == [0, 1] and all(line["world"]["size"] == 2 for line in lines)
    assert by_rank[0]["losses"] == by_rank[1]["losses"]  # every rank returns the same history
    assert by_rank[0]["calls"] == len(by_rank[0]["losses"]) and by_rank[1]["calls"] == 0  # callback on rank 0
    reference = [r["loss"] if r["type"] == "step" else r["val_loss"] for r in read_log(two_ranks[0].parent / "log.jsonl")]
    assert by_rank[0]["losses"] == pytest.approx(reference, rel=1e-6, abs=0)
