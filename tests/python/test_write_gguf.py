"""bench/write_gguf.py, read back by PyPI's gguf package (its GGUFReader and its own dequantizer):
the gpt2 architecture's metadata, every tensor under llama.cpp's name and layout (Conv1D matrices
output-major) with the checkpoint's values, within what F16 and Q8_0 allow; and a clear error, with
no file left, for a directory that is not a checkpoint. When llama-cpp-python is installed (it is not
in the test requirements), llama.cpp's logits on the F32 file are compared with transformers'."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import write_gguf  # noqa: E402


def write(model_dir, out, kind):
    result = subprocess.run([sys.executable, ROOT / "bench" / "write_gguf.py", model_dir, out, "--type", kind],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return gguf.GGUFReader(str(out))


def field(reader, key):
    value = reader.fields[key]
    return value.contents() if hasattr(value, "contents") else value.parts[value.data[0]]


@pytest.mark.parametrize("kind", ["f32", "f16", "q8_0"])
def test_tensors_and_metadata_read_back(gpt2_f16_dir, tmp_path, kind):
    from safetensors.numpy import load_file

    config = json.loads((gpt2_f16_dir / "config.json").read_text())
    reader = write(gpt2_f16_dir, tmp_path / f"m-{kind}.gguf", kind)
    assert field(reader, "general.architecture") == "gpt2"
    assert field(reader, "gpt2.block_count") == config["n_layer"]
    assert field(reader, "gpt2.embedding_length") == config["n_embd"]
    assert field(reader, "gpt2.attention.head_count") == config["n_head"]
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == config["vocab_size"]

    tensors = {t.name: t for t in reader.tensors}
    source = load_file(str(gpt2_f16_dir / "model.safetensors"))
    checked = 0
    for hf_name, data in source.items():
        name = write_gguf.gguf_name(hf_name)
        if name is None:
            continue
        expected = data.astype(np.float32)
        if hf_name.endswith(write_gguf.CONV1D):
            expected = expected.T  # llama.cpp's matrices are (out, in)
        tensor = tensors.pop(name)
        narrow = expected.ndim == 2 and kind != "f32"
        assert tensor.tensor_type == (gguf.GGMLQuantizationType[kind.upper()] if narrow
                                      else gguf.GGMLQuantizationType.F32), name
        got = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(expected.shape)
        if kind == "q8_0" and narrow:
            # Per 32 values one scale d = max|x| / 127, stored F16 (relative error <= 2^-11): the
            # rounding to int8 errs by <= d / 2, the F16 scale by <= 127 d 2^-11 more.
            d = np.abs(expected).reshape(-1, 32).max(axis=1, keepdims=True) / 127
            bound = np.broadcast_to(d * (0.5 + 127 / 2048) * 1.01 + 1e-7, (d.shape[0], 32)).reshape(expected.shape)
            assert np.all(np.abs(got - expected) <= bound), name
        else:  # F32 is exact; the F16 checkpoint's values are F16 already
            np.testing.assert_array_equal(got, expected, err_msg=name)
        checked += 1
    assert checked == 4 + 12 * config["n_layer"] and not tensors, sorted(tensors)


def test_not_a_checkpoint_is_a_clear_error(tmp_path):
    out = tmp_path / "x.gguf"
    result = subprocess.run([sys.executable, ROOT / "bench" / "write_gguf.py", tmp_path, out],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "has no config.json" in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                    reason="llama-cpp-python is not installed (not in the test requirements: it compiles llama.cpp)")
def test_llama_cpp_reads_the_f32_file_as_transformers_does(gpt2_f16_dir, tmp_path):
    import gpt2_reference
    import llama_cpp_peer

    write(gpt2_f16_dir, tmp_path / f"{gpt2_f16_dir.name}-f32.gguf", "f32")
    got = llama_cpp_peer.check_f32(gpt2_f16_dir, tmp_path / f"{gpt2_f16_dir.name}-f32.gguf", threads=2)
    assert got["greedy_equal"], got
    assert got["max_logit_diff"] < 2e-2, got  # llama.cpp's default KV cache is F16
