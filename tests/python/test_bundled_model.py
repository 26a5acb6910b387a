"""The bundled model (models/kael-tiny-kjv): its files match SHA256SUMS and fit the size limit, its
tokenizer files are GPT-2's, transformers computes the same logits as kael on it, it has learned
(its loss on a verse is far below an untrained model's), and the commands without --model use it
when data/gpt2 holds no model (and data/gpt2 when it does), saying which on stderr. A damaged
copy is an error naming the file, from the CLI and from Python."""
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import time
import urllib.request

import numpy as np
import pytest

import gpt2_reference
import quant_accuracy
from conftest import ROOT, kael_binary

BUNDLE = ROOT / "models" / "kael-tiny-kjv"
FILES = ["config.json", "merges.txt", "model.safetensors", "vocab.json"]
# GPT-2's own tokenizer files (scripts/download_gpt2.sh checks the same digests).
GPT2_SHA256 = {
    "vocab.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "merges.txt": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
INT8_KL_LIMIT = 0.01  # nats; measured 9.5e-5 here (amx kernels), top-1 4 of 4
VERSE = "For God so loved the world, that he gave his only begotten Son"


def run_kael(*args, cwd, check=True):
    result = subprocess.run([str(kael_binary()), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                            timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def damaged_copy(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the bundle with one byte of the weights flipped (in the data, past the header)."""
    copy = tmp_path / "damaged"
    shutil.copytree(BUNDLE, copy)
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[len(weights) // 2] ^= 0x01
    (copy / "model.safetensors").write_bytes(weights)
    return copy


def test_files_match_sha256sums_and_fit_25_mb():
    listed = dict(reversed(line.split("  ")) for line in (BUNDLE / "SHA256SUMS").read_text().splitlines())
    assert sorted(listed) == FILES
    for name, digest in listed.items():
        assert sha256(BUNDLE / name) == digest, name
    for name, digest in GPT2_SHA256.items():
        assert listed[name] == digest, f"{name} is not GPT-2's"
    assert sum((BUNDLE / name).stat().st_size for name in FILES) <= 25 * 1000 * 1000


def test_transformers_computes_kaels_logits(kael):
    ids = gpt2_reference.gpt2_encoding().encode_ordinary(VERSE)
    expected = gpt2_reference.hf_last_logits(gpt2_reference.load_hf(BUNDLE), ids)
    got = gpt2_reference.kael_last_logits(kael, BUNDLE, ids)
    assert np.max(np.abs(got - expected)) < 1e-3
    assert int(np.argmax(got)) == int(np.argmax(expected))


def test_the_bundled_model_has_learned():
    """Mean next-token loss on a verse it was trained on: an untrained GPT-2 gives ln(50257) = 10.8."""
    import torch

    ids = gpt2_reference.gpt2_encoding().encode_ordinary(VERSE + ", that whosoever believeth in him should not perish")
    with torch.no_grad():
        out = gpt2_reference.load_hf(BUNDLE)(torch.tensor([ids]), labels=torch.tensor([ids]))
    assert float(out.loss) < 6.0  # measured 4.92


def test_quant_accuracy_measures_int8_on_the_bundled_model():
    """The int8 accuracy check on a trained model (a random one's top tokens are near-ties)."""
    table = quant_accuracy.measure(kael_binary(), BUNDLE, ["f32", "int8"], prompts=2, length=8, stride=4,
                                   greedy_tokens=4, threads=2, source=quant_accuracy.prompt_source("kael-tiny-kjv"))
    assert {row["prompts"] for row in table.values()} == {"heldout"}
    assert table["f32"]["max_err"] < 1e-3 and table["f32"]["top1"] == 1.0
    assert 0 < table["int8"]["max_err"] and table["int8"]["kl"] < INT8_KL_LIMIT and table["int8"]["top1"] >= 0.75


@pytest.mark.parametrize("command", [
    ["generate", "In the beginning", "--greedy", "--max-tokens", "12", "--json"],
    ["logits", "In the beginning", "--top", "3", "--json"],
    ["bench", "--prompt-tokens", "4", "--max-tokens", "4", "--json"],
])
def test_without_model_uses_the_bundle_when_data_gpt2_has_none(tmp_path, command):
    (tmp_path / "data" / "gpt2").mkdir(parents=True)  # present but empty: no model in it
    result = run_kael(*command, cwd=tmp_path)
    line = [line for line in result.stderr.splitlines() if line.startswith("model: ")]
    assert len(line) == 1 and str(BUNDLE) in line[0] and "bundled" in line[0], result.stderr
    json.loads(result.stdout)
    if command[0] == "generate":
        explicit = run_kael(*command, "--model", BUNDLE, cwd=tmp_path)
        assert json.loads(explicit.stdout) == json.loads(result.stdout)
        assert json.loads(result.stdout)["text"].strip()


def test_tokenize_detokenize_and_finetune_without_model_use_the_bundle(tmp_path, tiktoken_gpt2):
    """The commands that need only the tokenizer files, and finetune, follow the same rule: with no
    data/gpt2 they use the bundled model, whose vocab.json and merges.txt are GPT-2's (tiktoken's ids)."""
    text = "In the beginning God created the heaven and the earth. Ünïcode too!"
    ids = run_kael("tokenize", text, "--json", cwd=tmp_path)
    assert "bundled" in ids.stderr
    assert json.loads(ids.stdout) == tiktoken_gpt2.encode_ordinary(text)
    back = run_kael("detokenize", *map(str, json.loads(ids.stdout)), cwd=tmp_path)
    assert back.stdout.rstrip("\n") == text
    (tmp_path / "verses.txt").write_text(VERSE * 20, encoding="utf-8")
    out = tmp_path / "tuned"
    tuned = run_kael("finetune", "--data", tmp_path / "verses.txt", "--out", out, "--steps", 1, "--batch", 1,
                     "--seq", 16, "--threads", 1, cwd=tmp_path)
    assert "bundled" in tuned.stderr
    assert json.loads((out / "config.json").read_text())["n_embd"] == json.loads((BUNDLE / "config.json").read_text())["n_embd"]


def test_without_model_prefers_data_gpt2(tmp_path, gpt2_f16_dir):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gpt2").symlink_to(gpt2_f16_dir)
    args = ["generate", "--ids", "464,3616", "--greedy", "--max-tokens", "6", "--json"]
    result = run_kael(*args, cwd=tmp_path)
    assert [line for line in result.stderr.splitlines() if line.startswith("model: ")] == ["model: data/gpt2"]
    assert json.loads(result.stdout) == json.loads(run_kael(*args, "--model", gpt2_f16_dir, cwd=tmp_path).stdout)


def test_serve_without_model_uses_the_bundle(tmp_path):
    from test_serve_support import HOST, free_port

    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(kael_binary()), "serve", "--host", HOST, "--port", str(port)], cwd=tmp_path,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/health", timeout=2) as response:
                    if json.loads(response.read())["status"] == "ok":
                        break
            except OSError:
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert re.search(r"^model: .*kael-tiny-kjv \(the bundled", log.read_text(), re.M), log.read_text()


def test_cli_refuses_a_damaged_bundle_naming_the_file(tmp_path):
    copy = damaged_copy(tmp_path)
    for command in (["generate", "In the beginning"], ["logits", "In the beginning"]):
        result = run_kael(*command, "--model", copy, cwd=tmp_path, check=False)
        assert result.returncode != 0 and result.stdout == ""
        assert f"'{copy / 'model.safetensors'}' is damaged" in result.stderr, result.stderr


def _installed_python_package():
    kael = pytest.importorskip("kael")
    if not hasattr(kael, "bundled_model_dir"):
        pytest.skip("the installed kael package predates the bundled model")
    return kael


def test_python_loads_the_bundle_by_name(kael):
    package = _installed_python_package()
    model = package.Model.from_pretrained("bundled", threads=1)
    cli = json.loads(kael("generate", "--model", BUNDLE, "--ids", "818,262,3726", "--greedy", "--max-tokens", 8,
                          "--json", "--threads", 1).stdout)
    assert model.generate([818, 262, 3726], max_tokens=8, temperature=0) == cli["text"]
    assert sorted(p.name for p in pathlib.Path(package.bundled_model_dir()).iterdir()) == sorted(
        [*FILES, "SHA256SUMS", "README.md", "LICENSE"])


def test_python_refuses_a_damaged_bundle_naming_the_file(tmp_path):
    package = _installed_python_package()
    copy = damaged_copy(tmp_path)
    with pytest.raises(package.ValueError, match=re.escape(f"'{copy / 'model.safetensors'}' is damaged")):
        package.Model.from_pretrained(copy)


# scripts/quickstart.sh without installing or building (KAEL_SKIP_SETUP=1), into a temporary
# data directory, with the download pointed at a local port where nothing listens.
def quickstart(tmp_path, **env):
    environment = dict(os.environ, KAEL_SKIP_SETUP="1", KAEL_BINARY=str(kael_binary()),
                       KAEL_GPT2_DIR=str(tmp_path / "gpt2"), KAEL_GPT2_BASE_URL="http://127.0.0.1:9/gpt2", **env)
    return subprocess.run([str(ROOT / "scripts" / "quickstart.sh"), "In the beginning", "--max-tokens", "12",
                           "--seed", "1"], capture_output=True, text=True, env=environment, timeout=300)


def test_quickstart_offline_generates_with_the_bundled_model(tmp_path):
    result = quickstart(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    notes = [line for line in result.stderr.splitlines() if line.startswith("GPT-2 could not be downloaded")]
    assert len(notes) == 1 and "scripts/download_gpt2.sh" in notes[0] and "kael-tiny-kjv" in notes[0], result.stderr


def test_quickstart_with_weights_present_uses_them(tmp_path, gpt2_f16_dir):
    (tmp_path / "gpt2").mkdir()
    overrides = {}
    shutil.copyfile(pathlib.Path(gpt2_f16_dir) / "config.json", tmp_path / "gpt2" / "config.json")  # not GPT-2 small's shape
    for name in ["model.safetensors", "vocab.json", "merges.txt"]:
        shutil.copyfile(pathlib.Path(gpt2_f16_dir) / name, tmp_path / "gpt2" / name)
        overrides["KAEL_GPT2_SHA256_" + name.upper().replace(".", "_")] = sha256(tmp_path / "gpt2" / name)
    result = quickstart(tmp_path, **overrides)
    assert result.returncode == 0, result.stderr
    assert "could not be downloaded" not in result.stderr and "checksum verified" in result.stdout
