"""The C++ server example (examples/serve.cpp: the server library behind a program of one's own)
and the two generation examples on a seeded checkpoint: examples/gpt2_generate.cpp (the chapter's
pipeline on kael::nn::GPT) built against the installed kael (public API only) and
examples/gpt2_generate.py on kael.GPT. Their greedy text equals `kael generate --greedy`, seeded
sampling repeats itself, and bad options are errors."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from install_support import build_against, installed_prefix, run  # noqa: F401 (fixture)

PROMPT = "The meaning of life is"
TOKENS = 12


@pytest.fixture(scope="module")
def examples_build(installed_prefix, tmp_path_factory):
    return build_against(installed_prefix, ROOT / "examples", tmp_path_factory.mktemp("examples"))


@pytest.fixture(scope="module")
def cpp_example(examples_build):
    return examples_build / "gpt2_generate"


def cli_text(kael, model_dir, *args) -> bytes:
    return kael("generate", "--model", model_dir, PROMPT, "--max-tokens", TOKENS, "--threads", 1, *args).stdout


def run_python_example(*args, check=True):
    env = dict(os.environ, PYTHONUTF8="1")
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "gpt2_generate.py"), *map(str, args)],
                            capture_output=True, timeout=300, env=env)
    if check:
        assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result


def test_cpp_example_greedy_equals_the_cli_and_sampling_is_seeded(kael, cpp_example, gpt2_f16_dir):
    def example(*options):
        result = run([cpp_example, PROMPT, "--data", gpt2_f16_dir, "--tokens", TOKENS, "--threads", 1, *options],
                     text=False)
        assert re.search(rb"\d+ tokens in [\d.]+ s: [\d.]+ tokens/s", result.stderr), result.stderr
        return result.stdout

    assert example("--temperature", 0) == PROMPT.encode() + cli_text(kael, gpt2_f16_dir, "--greedy") + b"\n"
    sampled = example()  # temperature 0.8, top-k 40, seed 42
    assert sampled.startswith(PROMPT.encode()) and sampled == example() and sampled != example("--seed", 7)


def test_cpp_example_options(cpp_example, gpt2_f16_dir):
    help_text = run([cpp_example, "--help"]).stdout
    for option in ["--tokens", "--temperature", "--top-k", "--seed", "--data", "--device", "The meaning of life is"]:
        assert option in help_text
    for bad in (["--bogus"], ["--tokens"], ["--tokens", "many"]):
        assert subprocess.run([cpp_example, *bad], capture_output=True).returncode != 0, bad
    cuda = subprocess.run([cpp_example, "--data", gpt2_f16_dir, "--device", "cuda"], capture_output=True, text=True)
    assert cuda.returncode == 1 and "cuda:0" in cuda.stderr and cuda.stdout == ""


def test_python_example_greedy_equals_the_cli(kael, gpt2_f16_dir):
    result = run_python_example(PROMPT, "--weights", gpt2_f16_dir / "model.safetensors", "--tokens", TOKENS,
                                "--temperature", 0)
    expected = PROMPT + cli_text(kael, gpt2_f16_dir, "--greedy").decode("utf-8", errors="replace") + "\n"
    assert result.stdout.decode() == expected
    assert re.search(rb"tokens/s", result.stderr)


def test_python_example_sampling_is_seeded(gpt2_f16_dir):
    def sample(seed):
        return run_python_example("--weights", gpt2_f16_dir / "model.safetensors", "--tokens", TOKENS,
                                  "--seed", seed).stdout
    first = sample(1)
    assert first.startswith(PROMPT.encode()) and first == sample(1) and first != sample(2)


def test_python_example_benchmark_prints_both_rates(gpt2_f16_dir):
    out = run_python_example("--weights", gpt2_f16_dir / "model.safetensors", "--tokens", TOKENS,
                             "--benchmark").stdout.decode()
    cached = float(re.search(r"with KV cache: +([\d.]+) tokens/s", out).group(1))
    uncached = float(re.search(r"without KV cache: +([\d.]+) tokens/s", out).group(1))
    assert cached > 0 and uncached > 0 and "same tokens: yes" in out, out


def test_python_example_errors(gpt2_f16_dir, tmp_path):
    weights = gpt2_f16_dir / "model.safetensors"
    cuda = run_python_example("--weights", weights, "--device", "cuda", check=False)
    assert cuda.returncode == 1 and b"cuda:0" in cuda.stderr
    for bad in (["--bogus"], ["--tokens"]):
        assert run_python_example("--weights", weights, *bad, check=False).returncode == 2
    missing = run_python_example("--weights", tmp_path / "model.safetensors", check=False)
    assert missing.returncode == 1 and b"error:" in missing.stderr


def test_cpp_server_example_serves_completions_and_drains(examples_build, gpt2_f16_dir):
    """examples/serve.cpp: the server library from a program of one's own, against the installed kael."""
    import json
    import urllib.request
    process = subprocess.Popen([examples_build / "serve", gpt2_f16_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()
        request = urllib.request.Request(url + "/v1/completions", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"prompt": PROMPT, "max_tokens": 4, "temperature": 0}).encode())
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
        assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 4
        process.stdin.close()  # end of input: drain and stop
        assert process.wait(timeout=60) == 0
        assert "ready:" in process.stderr.read()
    finally:
        process.kill()


def test_python_example_without_vocab_files_asks_tiktoken_for_gpt2(tmp_path, monkeypatch):
    # With no vocab.json and merges.txt beside the weights the example falls back on
    # tiktoken.get_encoding("gpt2") (its cache or the network, neither of which a test has).
    import importlib.util

    import tiktoken

    spec = importlib.util.spec_from_file_location("gpt2_generate_example", ROOT / "examples" / "gpt2_generate.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    asked = []
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: asked.append(name) or "the gpt2 encoding")
    assert example.gpt2_tokenizer(tmp_path) == "the gpt2 encoding" and asked == ["gpt2"]
