#!/usr/bin/env python3
"""Writes the seed corpus in fuzz/corpus/: small valid safetensors files (every dtype, metadata,
scalars, empty tensors, an odd header length like GPT-2's) and a few invalid ones, so the fuzzer
starts near the interesting paths. Rerun to regenerate; the output is deterministic."""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
         "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def build(tensors, metadata=None, pad_to=8, extra=b""):
    """tensors: list of (name, dtype, shape); data bytes are a fixed pattern (BOOL: 0/1)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        size = count * SIZES[dtype]
        raw = bytes((i % 2) if dtype == "BOOL" else (i * 37 + 11) % 256 for i in range(size))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad_to:
        text += b" " * ((pad_to - (8 + len(text)) % pad_to) % pad_to)
    return struct.pack("<Q", len(text)) + text + data + extra


def main():
    seeds = {
        "valid_all_dtypes": build([(d.lower(), d, [2, 3]) for d in SIZES], {"format": "pt"}),
        "valid_scalar_empty": build([("s", "F32", []), ("e", "F64", [0, 4]), ("b", "BOOL", [5])]),
        "valid_misaligned": build([("w", "F32", [3]), ("x", "F64", [2])], {"format": "pt"}, pad_to=0),
        "valid_no_tensors": build([], {"a": "b", "c": "ünï"}),
        "invalid_size": build([("a", "F32", [2])]).replace(b"[0,8]", b"[4,8]"),
        "invalid_bool": build([("m", "BOOL", [4])])[:-1] + b"\x02",
        "invalid_dtype": build([("q", "F32", [1])]).replace(b"F32", b"F8_"),
        "invalid_trailing": build([("a", "U8", [3])], extra=b"\0\0"),
        "invalid_lfs": b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n",
    }
    out = HERE / "corpus"
    out.mkdir(exist_ok=True)
    for name, data in seeds.items():
        (out / f"{name}.safetensors").write_bytes(data)


if __name__ == "__main__":
    main()
