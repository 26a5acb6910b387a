"""The char-level GPT examples (examples/char_gpt.cpp and examples/char_gpt.py) on a small made-up
text, with a tiny model and a few steps: the validation loss falls, the checkpoint is written and
reloads into a fresh model with the same validation loss (the examples check that themselves and
fail otherwise), a sample is printed, and bad options are errors."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, kael_binary
from install_support import build_against, installed_prefix  # noqa: F401 (fixture)

# Enough steps for a clear fall from the uniform guess (ln 30 = 3.4) on 30k characters.
TINY = ["--steps", "60", "--seconds", "0", "--batch", "8", "--context", "32", "--layers", "1", "--width", "32",
        "--heads", "2", "--lr", "1e-2", "--warmup", "5", "--eval-every", "20", "--eval-batches", "2",
        "--sample-tokens", "80", "--prompt", "And", "--threads", "1", "--val-fraction", "0.1"]
ROW = re.compile(r"^ *(\d+) +(-|[\d.]+) +([\d.]+) +([\d.]+)$", re.M)


@pytest.fixture(scope="module")
def cpp_example(tmp_path_factory, request):
    """build/examples/char_gpt of the release build (-DKAEL_BUILD_EXAMPLES=ON), or else the examples
    built against the installed kael."""
    built = kael_binary().parent / "examples" / "char_gpt"
    if built.exists():
        return built
    prefix = request.getfixturevalue("installed_prefix")
    return build_against(prefix, ROOT / "examples", tmp_path_factory.mktemp("char_gpt")) / "char_gpt"


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory):
    """Verses in two .txt files (the directory form of --data), read in name order."""
    directory = tmp_path_factory.mktemp("text")
    subjects = ["God", "the LORD", "Moses", "the people", "the king", "David", "the prophet", "Israel"]
    verbs = ["said unto", "spake unto", "blessed", "called", "went before", "answered"]
    objects = ["the children of Israel", "his servants", "the priests", "all the congregation", "them"]
    verses = [f"And {s} {v} {o}, saying, Hear the word of the LORD.\n"
              for s in subjects for v in verbs for o in objects]
    half = len(verses) // 2
    (directory / "01-first.txt").write_text("".join(verses[:half]) * 2)
    (directory / "02-second.txt").write_text("".join(verses[half:]) * 2)
    (directory / "notes.md").write_text("not read: only .txt files are")
    return directory


def python_example():
    return [sys.executable, str(ROOT / "examples" / "char_gpt.py")]


def run_example(command, *args):
    env = dict(os.environ, PYTHONUTF8="1")
    return subprocess.run([*map(str, command), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)


def check_training_run(result, checkpoint):
    assert result.returncode == 0, result.stderr
    out = result.stdout
    rows = [(int(s), None if t == "-" else float(t), float(v), float(sec)) for s, t, v, sec in ROW.findall(out)]
    assert [r[0] for r in rows] == [0, 20, 40, 60], out
    vals = [r[2] for r in rows]
    assert vals[0] > 3.0 and vals[-1] < vals[0] - 0.8, out  # from about ln(vocab) to well below it
    assert rows[-1][1] < rows[1][1], out                     # the training loss falls too
    assert [r[3] for r in rows] == sorted(r[3] for r in rows)
    assert checkpoint.exists() and checkpoint.stat().st_size > 0
    reloaded = re.search(r"reloaded into a fresh model: validation loss ([\d.]+)", out)
    assert reloaded and float(reloaded.group(1)) == pytest.approx(vals[-1], abs=1e-4), out
    sample = out.split("sample (temperature 0.8):\n", 1)[1]
    assert sample.startswith("And") and len(sample.split("\ntotal ")[0]) >= 80, out
    assert re.search(r"\b(the|and|of|LORD|unto)\b", sample[3:]), sample


@pytest.mark.parametrize("language", ["cpp", "python"])
def test_training_falls_saves_reloads_and_samples(language, request, text_dir, tmp_path):
    command = [request.getfixturevalue("cpp_example")] if language == "cpp" else python_example()
    checkpoint = tmp_path / "sub" / "char.safetensors"
    result = run_example(command, "--data", text_dir, "--out", checkpoint, *TINY)
    check_training_run(result, checkpoint)
    assert re.match(r"text: \d+ characters, \d+ distinct, ", result.stdout), result.stdout


@pytest.mark.parametrize("language", ["cpp", "python"])
def test_bad_options_and_inputs_are_errors(language, request, text_dir, tmp_path):
    command = [request.getfixturevalue("cpp_example")] if language == "cpp" else python_example()
    for bad in (["--bogus"], ["--steps"], ["--steps", "many"], ["--batch", "0"]):
        result = run_example(command, "--data", text_dir, *bad)
        assert result.returncode != 0 and result.stderr.strip(), (bad, result.stderr)
        assert "Traceback" not in result.stderr
    missing = run_example(command, "--data", tmp_path / "nowhere", "--steps", "1")
    assert missing.returncode == 1 and "error:" in missing.stderr and "kjv_text.py" in missing.stderr
    assert missing.stdout == ""
    short = tmp_path / "short.txt"
    short.write_text("In the beginning\n")
    too_short = run_example(command, "--data", short, "--steps", "1", "--context", "32")
    assert too_short.returncode == 1 and "too short" in too_short.stderr
    heads = run_example(command, "--data", text_dir, "--steps", "1", "--width", "30", "--heads", "4",
                        "--context", "16", "--out", tmp_path / "x.safetensors")
    assert heads.returncode == 1 and "error:" in heads.stderr and "heads" in heads.stderr
