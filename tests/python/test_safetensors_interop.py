"""kael's safetensors files against the `safetensors` Python package, both directions.

The same tensors are built here and in tests/io_interop_test.cpp from the same literal values
(keep the two in sync). Python -> kael: files written by safetensors.torch (and one by hand with
a header length that is not a multiple of 8) are read by the C++ test binary and compared byte
for byte. kael -> Python: the C++ test writes a file that safetensors must read back exactly."""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]

PATTERN = {
    "BOOL": (np.bool_, [True, False, False, True, True, False]),
    "U8": (np.uint8, [0, 1, 127, 128, 254, 255]),
    "I8": (np.int8, [-128, -1, 0, 1, 126, 127]),
    "U16": (np.uint16, [0, 1, 32767, 32768, 65534, 65535]),
    "I16": (np.int16, [-32768, -1, 0, 1, 32766, 32767]),
    "U32": (np.uint32, [0, 1, 2147483647, 2147483648, 4294967294, 4294967295]),
    "I32": (np.int32, [-2147483648, -1, 0, 1, 2147483646, 2147483647]),
    "U64": (np.uint64, [0, 1, 9007199254740993, 9223372036854775808, 18446744073709551614, 18446744073709551615]),
    "I64": (np.int64, [-9223372036854775808, -9007199254740993, -1, 0, 9007199254740993, 9223372036854775807]),
    "F16": (np.float16, [-65504.0, -1.5, -0.0, 5.960464477539063e-08, 0.333251953125, 65504.0]),
    "BF16": (torch.bfloat16, [-3.3895313892515355e38, -1.5, 0.0, 9.183549615799121e-41, 0.333984375, 3.3895313892515355e38]),
    "F32": (np.float32, [-3.4028234663852886e38, -1.0, -0.0, 1.401298464324817e-45, 0.3333333432674408, 3.4028234663852886e38]),
    "F64": (np.float64, [-1.7976931348623157e308, -1.0, -0.0, 5e-324, 1.0 / 3.0, 1.7976931348623157e308]),
}


def pattern_tensors():
    out = {}
    for name, (dtype, values) in PATTERN.items():
        if dtype is torch.bfloat16:
            out[name] = torch.tensor(values, dtype=torch.float64).to(torch.bfloat16).reshape(2, 3)
        else:
            out[name] = torch.from_numpy(np.array(values, dtype=dtype).reshape(2, 3))
    out["scalar_f32"] = torch.tensor(2.5, dtype=torch.float32)
    out["empty_i64"] = torch.zeros((2, 0), dtype=torch.int64)
    return out


def raw_bytes(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def read_header(path):
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return n, data[8:8 + n].decode("utf-8"), data


@pytest.fixture(scope="module")
def interop_binary():
    binary = pathlib.Path(os.environ.get("KAEL_BINARY", ROOT / "build" / "kael")).parent / "tests" / "io_interop_test"
    if not binary.exists():
        pytest.fail(f"{binary} not found; build the C++ tests first (scripts/test.sh does)")
    return binary


def run_interop(binary, test, directory):
    result = subprocess.run([str(binary), f"--gtest_filter=Interop.{test}"], capture_output=True, timeout=120,
                            env={**os.environ, "KAEL_INTEROP_DIR": str(directory)})
    output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
    assert result.returncode == 0, output
    assert "[  PASSED  ] 1 test" in output and "SKIPPED" not in output, output


def write_odd_header_file(path):
    """A file made by hand whose header length is odd, so the data starts misaligned (like GPT-2)."""
    tensors = {k: v for k, v in pattern_tensors().items() if k in ("F32", "F64", "I64", "BOOL", "F16", "BF16")}
    header, data, offset = {"__metadata__": {"writer": "python"}}, b"", 0
    for name in ("BOOL", "F16", "F32", "BF16", "I64", "F64"):  # deliberately not in size order
        raw = raw_bytes(tensors[name])
        header[name] = {"dtype": name, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        data, offset = data + raw, offset + len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) % 2 == 0:
        text += b" "
    assert len(text) % 8 != 0
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + data)
    return len(text)


def test_python_files_read_by_kael(tmp_path, interop_binary, kael):
    save_file(pattern_tensors(), str(tmp_path / "python_all.safetensors"), metadata={"writer": "python", "ünï": "cödé"})
    n = write_odd_header_file(tmp_path / "python_odd_header.safetensors")
    # The hand-made file is a valid file for the reference reader too.
    with safe_open(str(tmp_path / "python_odd_header.safetensors"), framework="pt") as f:
        assert f.metadata() == {"writer": "python"}
        for name in f.keys():
            assert raw_bytes(f.get_tensor(name)) == raw_bytes(pattern_tensors()[name])
    assert read_header(tmp_path / "python_odd_header.safetensors")[0] == n
    run_interop(interop_binary, "ReadsFilesFromPython", tmp_path)
    # kael inspect reports the header exactly as the file has it.
    for name in ("python_all.safetensors", "python_odd_header.safetensors"):
        listed = json.loads(kael("inspect", "--json", tmp_path / name).stdout)
        header = json.loads(read_header(tmp_path / name)[1])
        assert listed["metadata"] == header.pop("__metadata__", {})
        assert listed["tensors"] == header


def test_kael_file_read_by_python(tmp_path, interop_binary):
    run_interop(interop_binary, "WritesFilesForPython", tmp_path)
    path = tmp_path / "kael_all.safetensors"
    expected = pattern_tensors()
    loaded = load_file(str(path))
    assert sorted(loaded) == sorted(expected)
    for name, tensor in expected.items():
        assert loaded[name].dtype == tensor.dtype, name
        assert tuple(loaded[name].shape) == tuple(tensor.shape), name
        assert raw_bytes(loaded[name]) == raw_bytes(tensor), name
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"writer": "kael", "ünï": "cödé"}
    # The header: keys sorted, padded with spaces to a multiple of 8, every tensor aligned.
    n, text, _ = read_header(path)
    assert (8 + n) % 8 == 0 and text == text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" ")))
    keys = list(json.loads(text).keys())
    assert keys == sorted(keys)
    header = json.loads(text)
    for name, entry in header.items():
        if name != "__metadata__":
            size = torch.empty(0, dtype=expected[name].dtype).element_size()
            assert (8 + n + entry["data_offsets"][0]) % size == 0, name
