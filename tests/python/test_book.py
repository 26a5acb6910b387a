"""The book's kael.GPT (kael::nn::GPT) as examples/gpt2_generate.py uses it: a (B, T) batch's
logits at every position against transformers; the KV cache (use_cache=True) against the full
pass; loading from a directory or a file; and its errors."""
import shutil

import numpy as np
import pytest

import kael
import gpt2_reference

SHAPE = kael.nn.GptConfig(vocab_size=50257, n_positions=256, n_embd=256, n_head=8, n_layer=4)


@pytest.fixture(scope="module")
def gpt(gpt2_f16_dir):
    return kael.GPT(SHAPE).load_gpt2(gpt2_f16_dir / "model.safetensors").to("cpu").eval()


@kael.no_grad()  # inference, as the book runs it: outputs that need no grad read as numpy
def test_every_position_equals_transformers(gpt, gpt2_f16_dir):
    import torch

    ids = np.array([gpt2_reference.prompt_ids(40, seed=1), gpt2_reference.prompt_ids(40, seed=2)])  # (2, 40)
    out = gpt(kael.tensor(ids))
    assert out.shape == (2, 40, 50257) and out.dtype == np.float32 and out.dtype == kael.float32
    with torch.no_grad():
        expected = gpt2_reference.load_hf(gpt2_f16_dir)(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(out, expected, atol=1e-3, rtol=0)


@kael.no_grad()  # inference, as the book runs it: outputs that need no grad read as numpy
def test_kv_cache_continues_the_sequence(gpt):
    ids = np.array([gpt2_reference.prompt_ids(12, seed=3)])
    full = gpt(ids)
    gpt.reset_kv_cache()
    parts = [gpt(ids[:, :7], use_cache=True)] + [gpt(ids[:, t:t + 1], use_cache=True) for t in range(7, 12)]
    np.testing.assert_allclose(np.concatenate([np.asarray(p) for p in parts], axis=1), full, atol=1e-4, rtol=0)
    with pytest.raises(kael.ValueError, match="reset_kv_cache"):
        gpt(np.concatenate([ids, ids]), use_cache=True)  # 2 rows, the cache holds 1
    gpt.reset_kv_cache()
    np.testing.assert_allclose(gpt(ids[:, :3], use_cache=True), full[:, :3], atol=1e-4, rtol=0)
    gpt.reset_kv_cache()


@kael.no_grad()  # inference, as the book runs it: outputs that need no grad read as numpy
def test_any_safetensors_file_or_its_directory(gpt, gpt2_f16_dir, tmp_path):
    shutil.copy(gpt2_f16_dir / "model.safetensors", tmp_path / "weights.safetensors")
    other = kael.GPT(SHAPE).load_gpt2(tmp_path / "weights.safetensors")
    ids = [[464, 3616, 286]]
    np.testing.assert_array_equal(other(ids), gpt(ids))
    np.testing.assert_array_equal(kael.GPT(SHAPE).load_gpt2(gpt2_f16_dir)(ids), gpt(ids))
    assert gpt([464, 3616, 286]).shape == (1, 3, 50257)  # one row may come without the batch axis


def test_errors(gpt, gpt2_f16_dir):
    with pytest.raises(kael.Error, match="cuda:0"):  # no usable GPU here, or nn not on CUDA yet
        gpt.to("cuda")
    with pytest.raises(kael.ValueError, match="shape"):
        kael.GPT().load_gpt2(gpt2_f16_dir)  # GPT-2 small expected
    with pytest.raises(kael.ValueError):
        gpt(np.zeros((1, 0), dtype=np.int64))
    with pytest.raises(kael.IndexError):
        gpt([[50257]])
    with pytest.raises(kael.ValueError):
        gpt(np.zeros((1, 257), dtype=np.int64))  # past the context of 256
