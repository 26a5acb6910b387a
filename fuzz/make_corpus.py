#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/NAME/ for fuzz_NAME: for safetensors, small valid files
(every dtype, metadata, scalars, empty tensors, an odd header length like GPT-2's) and a few
invalid ones; for json_inputs, request bodies of every kind and config.json files, so the fuzzer
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
    out = HERE / "corpus" / "safetensors"
    out.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (out / f"{name}.safetensors").write_bytes(data)

    config = (HERE.parent / "models" / "kael-tiny-kjv" / "config.json").read_bytes()
    bodies = {
        "completion": {"prompt": "Hello, my name is", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9,
                       "top_k": 40, "stop": ["\n", "."], "seed": 1, "logprobs": 2, "echo": True},
        "completion_ids": {"prompt": [[15496, 11], [464]], "max_tokens": 2, "n": 2, "best_of": 3,
                           "logit_bias": {"50256": -100, "11": 5.5}, "stream": True,
                           "stream_options": {"include_usage": True}},
        "beam_search": {"prompt": "The", "max_tokens": 4, "use_beam_search": True, "best_of": 3, "n": 2,
                        "length_penalty": 0.6, "early_stopping": "never"},
        "tokenize": {"text": "Hello, world! <|endoftext|>", "allow_special": True},
        "detokenize": {"ids": [15496, 11, 995, 0]},
    }
    out = HERE / "corpus" / "json_inputs"
    out.mkdir(parents=True, exist_ok=True)
    for name, body in bodies.items():
        (out / f"{name}.json").write_text(json.dumps(body, ensure_ascii=False))
    (out / "config.json").write_bytes(config)
    (out / "deep_logit_bias.json").write_text('{"prompt": "Hi", "logit_bias": {"1": ' + "[" * 100 + "]" * 100 + "}}")
    (out / "numbers.json").write_text('{"prompt": [18446744073709551616], "max_tokens": 1e999, "seed": -1}')


if __name__ == "__main__":
    main()
