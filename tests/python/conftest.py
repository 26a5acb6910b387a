"""Shared pytest fixtures: where the kael binary, GPT-2's tokenizer files and the corpus are,
and tiktoken's gpt2 encoding built offline from those files."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# scripts/ holds the reference tools (e.g. gpt2_reference.py) that tests import.
sys.path.insert(0, str(ROOT / "scripts"))
from gpt2_reference import CORPUS_DIR, GPT2_TOKENIZER_DIR as GPT2_DIR  # noqa: E402


def kael_binary() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("KAEL_BINARY", ROOT / "build" / "kael"))
    if not path.exists():
        pytest.fail(f"kael binary not found at {path}; build first (scripts/test.sh does)")
    return path


@pytest.fixture(scope="session")
def kael():
    """Runs the kael CLI: kael("tokenize", "--model", d, "hi") -> CompletedProcess (bytes)."""
    binary = kael_binary()

    def run(*args, input=None, check=True, timeout=600):
        result = subprocess.run([str(binary), *map(str, args)], input=input, capture_output=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kael {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr.decode(errors='replace')}")
        return result

    return run


@pytest.fixture(scope="session")
def tiktoken_gpt2():
    """tiktoken's gpt2 encoding, built from GPT2_DIR's files (no network)."""
    import gpt2_reference

    return gpt2_reference.gpt2_encoding()


# ---------------------------------------------------------------------------------------------
# checkpoint fixtures: seeded GPT-2 checkpoints built with transformers' save_pretrained by
# scripts/gpt2_reference.py (see its PARITY_CHECKPOINTS). Each returns a complete kael --model
# directory (model.safetensors, config.json, vocab.json, merges.txt). Set
# KAEL_TEST_CHECKPOINTS=DIR to build them once there and reuse them across pytest runs.

def _checkpoint_dir(tmp_path_factory, name):
    import gpt2_reference

    cache = os.environ.get("KAEL_TEST_CHECKPOINTS")
    directory = (pathlib.Path(cache) if cache else tmp_path_factory.mktemp("checkpoints")) / name
    if not (directory / "model.safetensors").exists():
        gpt2_reference.make_checkpoint(directory, **gpt2_reference.PARITY_CHECKPOINTS[name])
    return directory


@pytest.fixture(scope="session")
def gpt2_small_dir(tmp_path_factory):
    """GPT-2 small's shape (124M parameters, 12 layers, F32), seed 1, published names (no prefix)."""
    return _checkpoint_dir(tmp_path_factory, "gpt2-small-f32")


@pytest.fixture(scope="session")
def gpt2_f16_dir(tmp_path_factory):
    """A small F16 checkpoint of another shape: 4 layers, 8 heads, n_embd 256, n_positions 256."""
    return _checkpoint_dir(tmp_path_factory, "small-f16")


# ---------------------------------------------------------------------------------------------
# `kael serve` fixtures (the helpers they use are in test_serve_support.py).

@pytest.fixture(scope="session")
def serve_model_dir(tmp_path_factory):
    """The small seeded checkpoint every server test runs on, built once per session."""
    from test_serve_support import small_checkpoint

    return small_checkpoint(tmp_path_factory.mktemp("serve_model"))


@pytest.fixture(scope="module")
def server(serve_model_dir, request):
    """One `kael serve` per test module, started with the module's SERVER_ARGS; it must still be
    running when the module's tests are done."""
    from test_serve_support import Server

    with Server(serve_model_dir, *getattr(request.module, "SERVER_ARGS", ())) as s:
        yield s
        assert s.alive(), "the server died during the tests"
