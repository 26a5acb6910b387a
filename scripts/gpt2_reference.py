#!/usr/bin/env python3
"""GPT-2 reference checkpoints and logits from Hugging Face transformers, to compare kael against.

No GPT-2 weights can be downloaded here, so the reference is a seeded random GPT2LMHeadModel
saved with `save_pretrained`: the same names, layout and dtypes as the published files.

Importable (tests/python and other tools use these names):
  make_checkpoint(out_dir, n_layer=..., dtype="float32", seed=0, ...) -> Path   a kael --model dir
  relayout(src_dir, out_dir, prefix=..., lm_head=..., mask_buffers=...) -> Path  same weights, other names
  load_hf(dir)                     the transformers model, eval mode, float32
  hf_last_logits(model, ids)       numpy (vocab,) logits at the last position
  hf_greedy(model, ids, n)         n greedy token ids
  kael_last_logits(kael, dir, ids) numpy (vocab,) from `kael logits --json --top 0`

Command line:
  gpt2_reference.py parity --kael build/kael [--workdir DIR] [--lengths 1,7,64,130]
      builds the checkpoints, runs kael on them and prints the largest absolute logit error per
      checkpoint and prompt length; exits 1 if any exceeds --atol (1e-3).
  gpt2_reference.py make OUT_DIR [--n-layer 12 ...]   builds one checkpoint
  gpt2_reference.py logits DIR --ids 1,2,3 [--top 5]  transformers' logits, for eyeballing

Parameter values: every parameter is drawn from one seeded torch.Generator in
named_parameters() order (not transformers' own init, which changes between versions):
LayerNorm weights 1 + N(0, 0.1), LayerNorm biases N(0, 0.1), every other weight and bias
N(0, init_std). The default init_std = 0.1 is five times transformers' 0.02, so that the
logits spread over a range like a trained model's (std of a few units across the vocabulary)
and biases are not zero: a swapped or transposed parameter changes the logits visibly.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("KAEL_SHARED_DIR", ROOT.parent / "shared"))
TOKENIZER_FILES = ("vocab.json", "merges.txt")
DEFAULT_INIT_STD = 0.1
PREFIX = "transformer."


def _torch():
    import torch  # imported lazily: `--help` and the names above need no torch

    return torch


def _quiet_transformers():
    """No progress bars or unexpected-key warnings (the mask buffers of the published layout
    are "unexpected" to transformers) in test and tool output."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def _copy(src, dst):
    """Copies the bytes only: the shared files are read-only, and their copies must not be."""
    dst = pathlib.Path(dst)
    dst.unlink(missing_ok=True)
    shutil.copyfile(src, dst)


def _layer_count(names) -> int:
    layers = {int(n.split(".")[1]) for n in (x[len(PREFIX):] if x.startswith(PREFIX) else x for x in names)
              if n.startswith("h.")}
    return max(layers) + 1 if layers else 0


def relayout(src_dir, out_dir=None, *, prefix: bool = False, lm_head: bool = False,
             mask_buffers: bool = False, misalign: bool = False) -> pathlib.Path:
    """Rewrites src_dir/model.safetensors into out_dir (in place when None) with the same
    values under other names: the "transformer." prefix or not, a tied lm_head.weight or not,
    and with mask_buffers the causal-mask buffers h.{i}.attn.bias [1, 1, P, P] (F32) of the
    published gpt2 file. With misalign, the header is padded with spaces so the data starts 3
    bytes past a multiple of 8, as in the published file (N = 14,283), which no F32 tensor can
    be read in place from. The other files of the directory are copied."""
    import safetensors.torch

    torch = _torch()
    src_dir = pathlib.Path(src_dir)
    out_dir = pathlib.Path(out_dir) if out_dir is not None else src_dir
    if out_dir != src_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in src_dir.iterdir():
            if f.is_file() and f.name != "model.safetensors":
                _copy(f, out_dir / f.name)
    tensors = safetensors.torch.load_file(str(src_dir / "model.safetensors"))
    plain = {}
    for name, t in tensors.items():
        base = name[len(PREFIX):] if name.startswith(PREFIX) else name
        if base == "lm_head.weight" or base.endswith(".attn.bias") or base.endswith(".attn.masked_bias"):
            continue
        plain[base] = t
    out = {}
    for name, t in plain.items():
        out[(PREFIX + name) if prefix else name] = t.contiguous()
    if lm_head:
        out["lm_head.weight"] = plain["wte.weight"].clone()
    if mask_buffers:
        config = json.loads((src_dir / "config.json").read_text())
        n = config.get("n_positions", 1024)
        mask = torch.tril(torch.ones(n, n, dtype=torch.float32)).view(1, 1, n, n)
        for i in range(_layer_count(plain)):
            out[f"{PREFIX if prefix else ''}h.{i}.attn.bias"] = mask.clone()
    path = out_dir / "model.safetensors"
    safetensors.torch.save_file(out, str(path), metadata={"format": "pt"})
    if misalign:
        _misalign(path)
    return out_dir


def _misalign(path: pathlib.Path) -> None:
    """Pads the JSON header with spaces (allowed by the format) until 8 + N is 3 mod 8."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    pad = (3 - (8 + n)) % 8
    header = data[8:8 + n] + b" " * pad
    path.write_bytes(len(header).to_bytes(8, "little") + header + data[8 + n:])


def make_checkpoint(out_dir, *, n_layer: int = 12, n_head: int = 12, n_embd: int = 768, n_positions: int = 1024,
                    vocab_size: int = 50257, dtype: str = "float32", seed: int = 0,
                    init_std: float = DEFAULT_INIT_STD, prefix: bool = False, lm_head: bool = False,
                    mask_buffers: bool = False) -> pathlib.Path:
    """Builds a seeded GPT2LMHeadModel and saves it with save_pretrained into out_dir
    (model.safetensors + config.json), with vocab.json and merges.txt from ../shared/gpt2, so
    the directory is a complete kael --model dir. dtype: "float32", "float16" or "bfloat16".
    The names are then rewritten by relayout(prefix, lm_head, mask_buffers); the defaults give
    the published layout without its mask buffers."""
    torch = _torch()
    from transformers import GPT2Config, GPT2LMHeadModel

    _quiet_transformers()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_positions,
                        vocab_size=vocab_size, initializer_range=init_std)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # the tied lm_head shares wte and is not listed
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32)
            if ".ln_" in name or name.startswith(("ln_", "transformer.ln_")):
                p.copy_(1.0 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(init_std * noise)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(str(out_dir), safe_serialization=True)
    for name in TOKENIZER_FILES:
        _copy(SHARED / "gpt2" / name, out_dir / name)
    return relayout(out_dir, prefix=prefix, lm_head=lm_head, mask_buffers=mask_buffers)


def load_hf(model_dir):
    """The transformers model of a checkpoint directory, in eval mode, computing in float32
    (F16/BF16 weights are widened exactly, as kael does)."""
    torch = _torch()
    from transformers import GPT2LMHeadModel
    _quiet_transformers()
    model = GPT2LMHeadModel.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def hf_last_logits(model, ids):
    """numpy float32 (vocab,): logits after the last of `ids`."""
    torch = _torch()
    with torch.no_grad():
        out = model(torch.tensor([list(ids)], dtype=torch.long))
    return out.logits[0, -1].float().numpy()


def _cache_kwargs(result):
    """The KV cache of a forward's output, as the next call takes it: transformers 5.24 renamed
    past_key_values to cache (and warns about the old name); older versions know only the old."""
    if getattr(result, "cache", None) is not None:
        return {"cache": result.cache}
    return {"past_key_values": result.past_key_values}


def hf_greedy(model, ids, n: int, *, stop_at_eos: bool = False) -> list[int]:
    """n greedy continuation ids (argmax, first index on ties), with transformers' KV cache.
    With stop_at_eos, stops after emitting <|endoftext|> (50256), as `kael generate` does."""
    torch = _torch()
    out: list[int] = []
    with torch.no_grad():
        result = model(torch.tensor([list(ids)], dtype=torch.long), use_cache=True)
        for _ in range(n):
            token = int(torch.argmax(result.logits[0, -1]))
            out.append(token)
            if stop_at_eos and token == 50256:
                break
            result = model(torch.tensor([[token]], dtype=torch.long), use_cache=True, **_cache_kwargs(result))
    return out


def kael_last_logits(kael, model_dir, ids, *, extra_args=()):
    """numpy float32 (vocab,) from `kael logits --ids ... --top 0 --json`. `kael` is the binary
    path or a callable run(*args) -> CompletedProcess (the pytest fixture)."""
    import numpy as np

    args = ["logits", "--model", str(model_dir), "--ids", ",".join(map(str, ids)), "--top", "0", "--json",
            *extra_args]
    if callable(kael):
        stdout = kael(*args).stdout
    else:
        stdout = subprocess.run([str(kael), *args], check=True, capture_output=True).stdout
    doc = json.loads(stdout)
    if doc["ids"] != list(ids):
        raise AssertionError(f"kael echoed ids {doc['ids'][:10]}..., sent {list(ids)[:10]}...")
    logits = np.full(len(doc["top"]), np.nan, dtype=np.float32)
    for entry in doc["top"]:
        logits[entry["id"]] = entry["logit"]
    return logits


def prompt_ids(length: int, vocab_size: int = 50257, seed: int = 1234) -> list[int]:
    """A fixed pseudo-random prompt of `length` ids."""
    import numpy as np

    return np.random.default_rng(seed + length).integers(0, vocab_size, size=length).tolist()


# The checkpoints the parity tests and the parity command use: (name, make_checkpoint kwargs).
PARITY_CHECKPOINTS = {
    "gpt2-small-f32": dict(n_layer=12, n_head=12, n_embd=768, n_positions=1024, dtype="float32", seed=1),
    "small-f16": dict(n_layer=4, n_head=8, n_embd=256, n_positions=256, dtype="float16", seed=2, init_std=0.15),
}


def _parity(args) -> int:
    import numpy as np

    lengths = [int(x) for x in args.lengths.split(",")]
    workdir = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="kael_parity_"))
    print(f"checkpoints in {workdir}; kael {args.kael}; atol {args.atol}")
    print(f"{'checkpoint':<28} {'len':>5} {'max|kael-hf|':>13} {'logit std':>10} {'argmax':>7} {'kael s':>7}")
    worst = 0.0
    for name, kwargs in PARITY_CHECKPOINTS.items():
        base = workdir / name
        if not (base / "model.safetensors").exists():
            t0 = time.time()
            make_checkpoint(base, **kwargs)
            print(f"  built {name} in {time.time() - t0:.1f} s")
        layouts = [(name, base)]
        if name == "gpt2-small-f32":  # the other layouts, same weights
            layouts.append((name + "+mask+misaligned", relayout(base, workdir / (name + "-published"),
                                                                mask_buffers=True, misalign=True)))
            layouts.append((name + "+prefix+head", relayout(base, workdir / (name + "-prefixed"), prefix=True,
                                                            lm_head=True)))
        model = load_hf(base)
        for label, directory in layouts:
            for n in lengths:
                if n > kwargs["n_positions"]:
                    continue
                ids = prompt_ids(n)
                expected = hf_last_logits(model, ids)
                t0 = time.time()
                got = kael_last_logits(args.kael, directory, ids)
                seconds = time.time() - t0
                err = float(np.max(np.abs(got.astype(np.float64) - expected)))
                worst = max(worst, err)
                same = "yes" if int(np.argmax(got)) == int(np.argmax(expected)) else "NO"
                print(f"{label:<28} {n:>5} {err:>13.3e} {float(np.std(expected)):>10.3f} {same:>7} {seconds:>7.2f}")
    print(f"worst max abs error {worst:.3e} (atol {args.atol})")
    return 0 if worst <= args.atol else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parity", help="compare kael logits with transformers on seeded checkpoints")
    p.add_argument("--kael", default=str(ROOT / "build" / "kael"))
    p.add_argument("--workdir", help="where to build (and reuse) the checkpoints; a temp dir by default")
    p.add_argument("--lengths", default="1,7,64,130,256", help="prompt lengths in tokens")
    p.add_argument("--atol", type=float, default=1e-3)
    m = sub.add_parser("make", help="build one checkpoint directory")
    m.add_argument("out_dir")
    for key in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "seed"):
        m.add_argument("--" + key.replace("_", "-"), type=int)
    m.add_argument("--dtype", choices=["float32", "float16", "bfloat16"])
    m.add_argument("--init-std", type=float)
    m.add_argument("--prefix", action="store_true")
    m.add_argument("--lm-head", action="store_true")
    m.add_argument("--mask-buffers", action="store_true")
    m.add_argument("--misalign", action="store_true")
    lg = sub.add_parser("logits", help="transformers' last-position logits of a checkpoint")
    lg.add_argument("model_dir")
    lg.add_argument("--ids", required=True)
    lg.add_argument("--top", type=int, default=5)
    args = parser.parse_args(argv)

    if args.command == "parity":
        return _parity(args)
    if args.command == "make":
        kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "out_dir") and v not in (None, False)}
        print(make_checkpoint(args.out_dir, **kwargs))
        return 0
    logits = hf_last_logits(load_hf(args.model_dir), [int(x) for x in args.ids.split(",")])
    for i in logits.argsort()[::-1][:args.top]:
        print(f"{int(i):8d} {float(logits[i]):16.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
