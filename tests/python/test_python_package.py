"""The Python package (`pip install .`, imported as kael) against the references:
tiktoken for ids, the safetensors package for files, transformers for logits and greedy text."""
import threading
import time

import numpy as np
import pytest

import kael as kp
from conftest import CORPUS_DIR, GPT2_DIR


@pytest.fixture(scope="module")
def tokenizer():
    return kp.BpeTokenizer(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt")


# ---- tokenizer -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(CORPUS_DIR.glob("*.txt")), ids=lambda p: p.name)
def test_corpus_ids_equal_tiktoken(tokenizer, tiktoken_gpt2, path):
    text = path.read_text(encoding="utf-8")
    assert tokenizer.encode(text) == tiktoken_gpt2.encode_ordinary(text)


def test_known_ids_special_and_decode_bytes(tokenizer):
    assert tokenizer.encode("Hello, world!") == [15496, 11, 995, 0]
    assert tokenizer.encode("<|endoftext|>") == [27, 91, 437, 1659, 5239, 91, 29]
    assert tokenizer.encode("<|endoftext|>", allowed_special="all") == [50256]
    assert tokenizer.encode("a<|endoftext|>", allowed_special={"<|endoftext|>"}) == [64, 50256]
    assert tokenizer.vocabulary_size == 50257
    decoded = tokenizer.decode([15496, 11, 995, 0])
    assert isinstance(decoded, bytes) and decoded == b"Hello, world!"
    raw = b"\xff\xfe broken \xe2\x82"
    assert tokenizer.decode(tokenizer.encode(raw)) == raw


def test_errors_have_matching_types(tokenizer):
    with pytest.raises(IndexError):
        tokenizer.decode([50257])
    with pytest.raises(kp.IndexError):
        tokenizer.decode([-1])
    with pytest.raises(kp.Error):
        kp.BpeTokenizer("/nonexistent/vocab.json", GPT2_DIR / "merges.txt")
    assert issubclass(kp.ValueError, ValueError) and issubclass(kp.ValueError, kp.Error)


def test_incremental_decoder_never_splits_characters(tokenizer):
    text = "naïve café 日本語 🙂👍🏽 done"
    ids = tokenizer.encode(text)
    decoder = tokenizer.incremental_decoder()
    pieces = [decoder.push(i) for i in ids] + [decoder.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


# ---- safetensors -----------------------------------------------------------------------------

def _arrays():
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f64": rng.standard_normal(7),
        "i64": np.arange(-4, 8, dtype=np.int64).reshape(3, 4),
        "bool": np.array([True, False, True]),
        "f16": rng.standard_normal((2, 3)).astype(np.float16),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }


def test_save_then_safetensors_package_reads(tmp_path):
    from safetensors.numpy import load_file
    arrays = _arrays()
    path = tmp_path / "a.safetensors"
    kp.save_safetensors(path, arrays, metadata={"format": "np"})
    back = load_file(str(path))
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(back[name], array)
        assert back[name].dtype == array.dtype
    assert kp.read_safetensors_metadata(path) == {"format": "np"}


@pytest.mark.parametrize("mmap", [True, False])
def test_safetensors_package_file_loads(tmp_path, mmap):
    import torch
    from safetensors.torch import save_file
    tensors = {"w": torch.randn(4, 6), "bf": torch.randn(5).to(torch.bfloat16), "i": torch.arange(3)}
    path = tmp_path / "t.safetensors"
    save_file(tensors, str(path))
    loaded = kp.load_safetensors(path, mmap=mmap)
    np.testing.assert_array_equal(np.asarray(loaded["w"]), tensors["w"].numpy())
    np.testing.assert_array_equal(loaded["bf"].numpy(), tensors["bf"].float().numpy())
    np.testing.assert_array_equal(np.asarray(loaded["i"]), tensors["i"].numpy())
    assert loaded["bf"].dtype == "BF16"


def test_mapped_tensors_share_memory_stay_valid_and_private(tmp_path):
    path = tmp_path / "m.safetensors"
    original = np.arange(16, dtype=np.float32).reshape(4, 4)
    kp.save_safetensors(path, {"x": original})
    before = path.read_bytes()
    tensors = kp.load_safetensors(path, mmap=True)
    t = tensors["x"]
    assert t.is_borrowed  # header of a kael-written file is 8-byte aligned, so F32 data is mapped
    view = np.asarray(t)
    assert np.shares_memory(view, np.asarray(t))
    del tensors, t
    path.unlink()  # the mapping outlives the dict and the file's name
    np.testing.assert_array_equal(view, original)
    view[0, 0] = 42.0  # copy-on-write: the file never changes
    assert view[0, 0] == 42.0
    kp.save_safetensors(path, {"x": original})
    assert path.read_bytes() == before


def test_tensor_from_numpy_and_conversion():
    t = kp.tensor(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert t.shape == (2, 2) and t.dtype == "I32" and not t.is_borrowed
    f = kp.tensor([1.5, 2.5], dtype="F32")
    np.testing.assert_array_equal(np.asarray(f), np.array([1.5, 2.5], dtype=np.float32))
    with pytest.raises(TypeError):
        kp.tensor(np.array(["a"]))


# ---- model -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory):
    import gpt2_reference
    return gpt2_reference.make_checkpoint(tmp_path_factory.mktemp("pkg_model"), n_layer=3, n_head=4, n_embd=128,
                                          n_positions=128, seed=7)


@pytest.fixture(scope="module")
def model(small_model_dir):
    return kp.Model.from_pretrained(small_model_dir, threads=2)


def test_logits_and_greedy_equal_transformers(model, small_model_dir):
    import gpt2_reference
    hf = gpt2_reference.load_hf(small_model_dir)
    ids = model.tokenizer.encode("The quick brown fox jumps over the lazy dog")
    logits = model.logits(ids)
    assert logits.dtype == np.float32 and logits.shape == (50257,)
    np.testing.assert_allclose(logits, gpt2_reference.hf_last_logits(hf, ids), atol=1e-3, rtol=0)
    expected = gpt2_reference.hf_greedy(hf, ids, 24)
    stream = model.stream(ids, max_tokens=24, temperature=0, ignore_eos=True)
    streamed = "".join(stream)
    assert stream.ids == expected
    assert streamed == model.generate(ids, max_tokens=24, temperature=0, ignore_eos=True)
    assert streamed == model.tokenizer.decode(expected).decode("utf-8", errors="replace")


def test_stream_pieces_join_to_generate_text(model):
    kwargs = dict(max_tokens=30, temperature=0.9, top_k=50, seed=3, ignore_eos=True)
    whole = model.generate("Once upon a time", **kwargs)
    pieces = list(model.stream("Once upon a time", **kwargs))
    assert "".join(pieces) == whole and len(pieces) > 1
    assert model.generate("Once upon a time", **kwargs) == whole  # the seed reproduces


def test_generate_releases_the_gil(model):
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.perf_counter()
    model.generate("A long story:", max_tokens=100, temperature=0, ignore_eos=True)
    elapsed = time.perf_counter() - start
    stop.set()
    thread.join()
    during = [t for t in ticks if start <= t <= start + elapsed]
    assert len(during) >= 5, f"other thread ran {len(during)} times during a {elapsed:.3f}s generate()"


def test_model_errors(model, tmp_path):
    with pytest.raises(ValueError):
        model.generate("", max_tokens=5)
    with pytest.raises(ValueError):
        model.logits(list(range(129)))  # past n_positions = 128
    with pytest.raises(IndexError):
        model.logits([50257])
    with pytest.raises(kp.Error):
        kp.Model.from_pretrained(tmp_path / "missing")
    with pytest.raises(ValueError):
        kp.Model.from_pretrained(tmp_path, dtype="q4")


def test_book_style_api(small_model_dir):
    gpt = kp.GPT(kp.nn.GptConfig(n_layer=3, n_head=4, n_embd=128, n_positions=128))
    gpt.load_gpt2(small_model_dir).eval()
    same = kp.GPT({"n_layer": 3, "n_head": 4, "n_embd": 128, "n_positions": 128, "activation_function": "gelu_new"})
    assert same.config.n_embd == 128  # a config.json-like mapping; keys GptConfig lacks are ignored
    with pytest.raises(kp.ValueError, match="'emb_dim' is 'n_embd' here"):
        kp.GPT({"emb_dim": 128, "n_layers": 3})  # another book's names never fall back to GPT-2 small
    assert gpt.to("cpu") is gpt
    with pytest.raises(kp.Error):
        gpt.to("cuda")
    ids = np.array([[464, 2068, 7586]])
    out = gpt(ids).detach()  # the parameters require grad: numpy reads the detached output, as torch's
    assert out.shape == (1, 3, 50257)
    model = kp.Model.from_pretrained(small_model_dir)
    np.testing.assert_allclose(out[0, 1], model.logits([464, 2068]), atol=1e-5)
    with pytest.raises(ValueError):
        kp.GPT().load_gpt2(small_model_dir)  # GPT-2 small shape expected, checkpoint is smaller


def test_example_benchmark_runs_with_and_without_cache(small_model_dir):
    import json
    import subprocess
    import sys
    from conftest import ROOT
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "generate.py"), "--model", str(small_model_dir),
                             "Hello there", "--max-tokens", "12", "--benchmark"],
                            capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(result.stdout)
    assert report["generated_tokens"] == 12 and report["same_tokens"] is True
    assert report["with_kv_cache_tok_s"] > 0 and report["without_kv_cache_tok_s"] > 0
