#!/usr/bin/env python3
"""Turns a finished `kael train` run into the bundled model (scripts/train_bundled_model.sh runs it).

    scripts/package_bundled_model.py RUN_DIR LOG_JSONL BUNDLE_DIR

Writes BUNDLE_DIR/model.safetensors with every weight rounded to F16 (round to nearest even, as
numpy's astype does: it halves the file, and kael and transformers both read F16 checkpoints), copies
the run's config.json, checks that the run's vocab.json and merges.txt are BUNDLE_DIR's, writes
BUNDLE_DIR/SHA256SUMS, and prints the final losses read from the run's log: the last step's, the
mean of the last 20 steps', and the last validation loss.
"""

import hashlib
import json
import os
import pathlib
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

FILES = ["config.json", "merges.txt", "model.safetensors", "vocab.json"]


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} RUN_DIR LOG_JSONL BUNDLE_DIR")
    run, log, bundle = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    for name in ["vocab.json", "merges.txt"]:
        if sha256(run / name) != sha256(bundle / name):
            sys.exit(f"error: {run / name} differs from {bundle / name} (train with --tokenizer {bundle})")

    weights = {name: array.astype(np.float16) for name, array in load_file(str(run / "model.safetensors")).items()}
    tmp = bundle / "model.safetensors.tmp"
    save_file(weights, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, bundle / "model.safetensors")
    config = json.loads((run / "config.json").read_text())
    config["torch_dtype"] = "float16"  # the weights just written
    (bundle / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (bundle / "SHA256SUMS").write_text("".join(f"{sha256(bundle / name)}  {name}\n" for name in FILES))

    records = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    evals = [r for r in records if r["type"] == "eval"]
    last20 = [r["loss"] for r in steps[-20:]]
    size = sum((bundle / name).stat().st_size for name in FILES)
    print(f"parameters {sum(a.size for a in weights.values())}, {size} bytes in {bundle} ({', '.join(FILES)})")
    print(f"final training loss {steps[-1]['loss']:.4f} at step {steps[-1]['step']} "
          f"(mean of the last 20 steps {sum(last20) / len(last20):.4f}); "
          f"validation loss {evals[-1]['val_loss']:.4f} (step 0: {evals[0]['val_loss']:.4f})")


if __name__ == "__main__":
    main()
