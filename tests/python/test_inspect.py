"""`kael inspect`: lists valid files exactly as the safetensors package reads them, adds exact
stats, and refuses every malformed file with a message and a non-zero exit (no signal, bounded
time and memory)."""
import json
import math
import os
import pathlib
import resource
import struct
import subprocess

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


def header_of(path):
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


def sample_tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "f32": torch.randn(3, 4, generator=g),
        "f64": torch.randn(5, generator=g, dtype=torch.float64),
        "f16": torch.randn(2, 3, generator=g).to(torch.float16),
        "bf16": torch.randn(7, generator=g).to(torch.bfloat16),
        "i64": torch.tensor([-(2**62), 5, 2**62], dtype=torch.int64),
        "i32": torch.tensor([[-7, 3], [9, 1]], dtype=torch.int32),
        "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "i16": torch.tensor([-300, 300, 1], dtype=torch.int16),
        "mask": torch.tensor([True, False, True, True]),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "h.0.attn.c_attn.weight": torch.ones(2, 2),
    }


@pytest.fixture(scope="module")
def sample_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "sample.safetensors"
    save_file(sample_tensors(), str(path), metadata={"format": "pt", "note": "ünïcödé"})
    return path


def test_json_lists_exactly_what_safetensors_reads(kael, sample_file):
    listed = json.loads(kael("inspect", sample_file, "--json").stdout)
    assert set(listed) == {"metadata", "tensors"}
    header = header_of(sample_file)
    with safe_open(str(sample_file), framework="pt") as f:
        assert listed["metadata"] == f.metadata()
        assert sorted(listed["tensors"]) == sorted(f.keys())
        for name in f.keys():
            entry = listed["tensors"][name]
            assert list(entry) == ["dtype", "shape", "data_offsets"]
            assert entry["shape"] == list(f.get_slice(name).get_shape())
            assert entry["dtype"] == f.get_slice(name).get_dtype()
            assert entry["data_offsets"] == header[name]["data_offsets"]


def test_metadata_is_empty_object_when_absent(kael, tmp_path):
    save_file({"a": torch.zeros(2)}, str(tmp_path / "a.safetensors"))
    listed = json.loads(kael("inspect", "--json", tmp_path / "a.safetensors").stdout)
    assert listed["metadata"] == {}


def test_stats_are_exact_float64(kael, sample_file):
    listed = json.loads(kael("inspect", sample_file, "--json", "--stats").stdout)["tensors"]
    for name, tensor in sample_tensors().items():
        stats = listed[name]["stats"]
        if tensor.numel() == 0:
            assert stats == {"min": None, "max": None, "mean": None}, name
            continue
        values = tensor.to(torch.float64).numpy().ravel()  # F16/BF16 widen exactly; BOOL becomes 0/1
        assert stats["min"] == float(values.min()), name
        assert stats["max"] == float(values.max()), name
        # The mean of the float64 values, summed without rounding error (math.fsum).
        assert stats["mean"] == pytest.approx(math.fsum(values) / len(values), rel=1e-12, abs=1e-300), name
    assert listed["mask"]["stats"] == {"min": 0.0, "max": 1.0, "mean": 0.75}


def test_stats_of_non_finite_values(kael, tmp_path):
    save_file({"x": torch.tensor([1.0, float("inf")]), "y": torch.tensor([float("nan"), 0.0])}, str(tmp_path / "n.safetensors"))
    listed = json.loads(kael("inspect", "--json", "--stats", tmp_path / "n.safetensors").stdout)["tensors"]
    assert listed["x"]["stats"] == {"min": 1.0, "max": "Infinity", "mean": "Infinity"}
    assert all(math.isnan(float(v)) for v in listed["y"]["stats"].values())


def test_table_lists_every_tensor(kael, sample_file):
    out = kael("inspect", sample_file, "--stats").stdout.decode()
    assert "format = pt" in out
    for name in sample_tensors():
        assert name in out
    assert "(empty)" in out


def test_usage_errors(kael, sample_file):
    assert kael("inspect", "--help").returncode == 0
    assert kael("inspect", check=False).returncode != 0
    assert kael("inspect", sample_file, "--bogus", check=False).returncode != 0
    missing = kael("inspect", "/nonexistent/x.safetensors", check=False)
    assert missing.returncode == 1 and missing.stderr.startswith(b"error:") and b"/nonexistent/x.safetensors" in missing.stderr


def le64(n):
    return struct.pack("<Q", n)


def entry(name, dtype, shape, offsets):
    return f'"{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}'


def file(header, data=b""):
    header = header.encode() if isinstance(header, str) else header
    return le64(len(header)) + header + data


F32 = entry("a", "F32", "[]", "[0,4]")
MALFORMED = {
    "empty": (b"", "too short"),
    "short": (b"\0" * 7, "too short"),
    "length_max": (le64(2**64 - 1) + b"{}", "exceeds the limit"),
    "length_past_end": (le64(100) + b"{}", "runs past the end"),
    "not_json": (file("{not json}"), "not valid JSON"),
    "trailing_garbage": (file("{}x"), "not valid JSON"),
    "invalid_utf8": (file(b'{"\xff":1}'), "not valid UTF-8"),
    "deep": (file("{\"a\":" + "[" * 200000 + "]" * 200000 + "}"), "nests deeper"),
    "duplicate": (file("{" + F32 + "," + F32 + "}", b"\0" * 4), "repeats the key"),
    "entry_not_object": (file('{"a":1}'), "expected an object"),
    "unknown_dtype": (file("{" + entry("a", "F8_E4M3", "[4]", "[0,4]") + "}", b"\0" * 4), "unsupported dtype"),
    "negative_dim": (file("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", b"\0" * 4), "non-negative"),
    "fractional_dim": (file("{" + entry("a", "F32", "[1.5]", "[0,4]") + "}", b"\0" * 4), "expected an integer"),
    "string_dim": (file("{" + entry("a", "F32", '["1"]', "[0,4]") + "}", b"\0" * 4), "JSON string"),
    "three_offsets": (file("{" + entry("a", "F32", "[]", "[0,4,4]") + "}", b"\0" * 4), "[begin, end]"),
    "reversed": (file("{" + entry("a", "F32", "[]", "[4,0]") + "}", b"\0" * 4), "reversed"),
    "huge_offsets": (file("{" + entry("a", "U8", "[4]", "[9223372036854775800,9223372036854775804]") + "}", b"\0" * 4),
                     "past the data section"),
    "size_mismatch": (file("{" + entry("a", "F32", "[2]", "[0,4]") + "}", b"\0" * 4), "needs 8 bytes"),
    "gap": (file("{" + entry("a", "F32", "[]", "[0,4]") + "," + entry("b", "F32", "[]", "[8,12]") + "}", b"\0" * 12),
            "belong to no tensor"),
    "overlap": (file("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}", b"\0" * 12),
                "overlaps"),
    "alias": (file("{" + entry("a", "F32", "[]", "[0,4]") + "," + entry("b", "F32", "[]", "[0,4]") + "}", b"\0" * 4),
              "aliases"),
    "trailing_bytes": (file("{" + F32 + "}", b"\0" * 8), "trailing bytes"),
    "wrapping_shape": (file("{" + entry("a", "U8", "[4611686018427387905,4]", "[0,4]") + "}", b"\0" * 4), "2^63"),
    "bad_metadata": (file('{"__metadata__":{"k":1}}'), "expected a string"),
    "invalid_bool": (file("{" + entry("a", "BOOL", "[2]", "[0,2]") + "}", b"\x01\x07"), "BOOL"),
    "git_lfs": (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 548105171\n", "Git LFS pointer"),
}


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_is_refused(case, tmp_path):
    from conftest import kael_binary

    data, message = MALFORMED[case]
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(data)
    for flags in ([], ["--json", "--stats"]):
        result = subprocess.run([str(kael_binary()), "inspect", str(path), *flags], capture_output=True, timeout=30,
                                preexec_fn=limit_memory)
        assert result.returncode == 1, (case, result.returncode, result.stderr)  # negative would be a signal
        assert result.stderr.startswith(b"error: "), result.stderr
        assert message.encode() in result.stderr, result.stderr
        assert str(path).encode() in result.stderr, result.stderr
        assert result.stdout == b""


def test_gpt2_checkpoint_if_present(kael):
    path = ROOT / "data" / "gpt2" / "model.safetensors"
    if not path.exists() or path.stat().st_size != 548_105_171:
        pytest.skip("data/gpt2/model.safetensors not downloaded")
    listed = json.loads(kael("inspect", "--json", path).stdout)
    assert listed["metadata"] == {"format": "pt"}
    assert len(listed["tensors"]) == 160
    assert listed["tensors"]["wte.weight"]["shape"] == [50257, 768]
    assert struct.unpack("<Q", path.open("rb").read(8))[0] == 14283


@pytest.mark.parametrize("fixture", ["gpt2_f16_dir", "gpt2_small_dir"])
def test_transformers_checkpoints(kael, request, fixture):
    """Checkpoints written by transformers' save_pretrained list exactly as their header says,
    with stats equal to torch's over the same values (GPT-2 small's size exercises the mapped load)."""
    from safetensors.torch import load_file

    path = request.getfixturevalue(fixture) / "model.safetensors"
    listed = json.loads(kael("inspect", "--json", "--stats", path).stdout)
    header = header_of(path)
    assert listed["metadata"] == header.pop("__metadata__", {})
    assert {k: {f: v[f] for f in ("dtype", "shape", "data_offsets")} for k, v in listed["tensors"].items()} == header
    for name, tensor in load_file(str(path)).items():
        values = tensor.to(torch.float64)
        stats = listed["tensors"][name]["stats"]
        assert stats["min"] == values.min().item() and stats["max"] == values.max().item(), name
        assert stats["mean"] == pytest.approx(values.mean().item(), rel=1e-9, abs=1e-12), name
