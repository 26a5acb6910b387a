#!/usr/bin/env python3
"""Writes a GPT-2 checkpoint directory (model.safetensors, vocab.json, merges.txt, config.json,
as transformers' save_pretrained leaves it) as a GGUF file that llama.cpp loads, with PyPI's
`gguf` package: the `gpt2` architecture's keys and tensor names, the BPE tokenizer (vocab and
merges from the directory), and the weights in F32, F16 or Q8_0 (the 2-D matrices narrow; biases
and LayerNorm stay F32, as llama.cpp's own converter leaves them).

GPT-2's Conv1D matrices are stored input-major (in, out); llama.cpp's matrices are output-major,
so they are transposed here. The tied output head is not written: llama.cpp's gpt2 loader reads
the token embeddings as the head when `output.weight` is absent.

Usage: bench/write_gguf.py MODEL_DIR OUT.gguf [--type f32|f16|q8_0]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

# HF name (without "transformer.") -> llama.cpp name; {i} is the block index.
BLOCK_NAMES = {
    "ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias",
    "attn.c_attn.weight": "attn_qkv.weight", "attn.c_attn.bias": "attn_qkv.bias",
    "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias",
    "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
    "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias",
    "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias",
}
GLOBAL_NAMES = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
                "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def gguf_name(hf_name: str) -> str | None:
    name = hf_name.removeprefix("transformer.")
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    if name.startswith("h."):
        _, index, rest = name.split(".", 2)
        if rest in BLOCK_NAMES:
            return f"blk.{index}.{BLOCK_NAMES[rest]}"
    return None  # attention mask buffers, a tied lm_head


def write(model_dir: pathlib.Path, out: pathlib.Path, weight_type: str) -> None:
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0}[weight_type]
    writer = gguf.GGUFWriter(str(out), "gpt2")
    writer.add_name(model_dir.name)
    writer.add_context_length(config["n_positions"])
    writer.add_embedding_length(config["n_embd"])
    writer.add_feed_forward_length(config.get("n_inner") or 4 * config["n_embd"])
    writer.add_block_count(config["n_layer"])
    writer.add_head_count(config["n_head"])
    writer.add_layer_norm_eps(config.get("layer_norm_epsilon", 1e-5))
    writer.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                          "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[weight_type])

    vocab = json.loads((model_dir / "vocab.json").read_text(encoding="utf-8"))
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "vocab.json ids are not 0..n-1"
    merges = [line for line in (model_dir / "merges.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    eos = config.get("eos_token_id", len(tokens) - 1)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i == eos else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.get("bos_token_id", eos))
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)

    for hf_name, data in sorted(load_file(str(model_dir / "model.safetensors")).items()):
        name = gguf_name(hf_name)
        if name is None:
            continue
        data = data.astype(np.float32)
        if hf_name.endswith(CONV1D):
            data = np.ascontiguousarray(data.T)  # (in, out) -> (out, in)
        if data.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--type", default="f32", choices=("f32", "f16", "q8_0"))
    args = parser.parse_args(argv)
    for needed in ("config.json", "vocab.json", "merges.txt", "model.safetensors"):
        if not (args.model / needed).is_file():
            print(f"write_gguf: {args.model} has no {needed} (a GPT-2 checkpoint directory is needed)", file=sys.stderr)
            return 1
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    try:
        write(args.model, tmp, args.type)
        tmp.replace(args.out)  # never a half-written file under the final name
    finally:
        tmp.unlink(missing_ok=True)
    print(f"wrote {args.out} ({args.type}, {args.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
