#!/usr/bin/env bash
# Rebuilds the bundled model models/kael-tiny-kjv from scratch: extracts the King James Bible from
# Debian's bible-kjv package, trains a small GPT-2 on it with `kael train` (fixed config, seed,
# threads and data), stores the weights as F16 beside GPT-2's tokenizer files, and writes
# SHA256SUMS. It prints the final training and validation loss.
#   scripts/train_bundled_model.sh [RUN_DIR]     (default build/kael-tiny-kjv-run; about 51 min on 2 cores)
# Needs build/kael (cmake --build build --target kael_cli), `apt-get install bible-kjv`, and python3
# with numpy and safetensors (requirements-test.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

BUNDLE=models/kael-tiny-kjv
RUN="${1:-build/kael-tiny-kjv-run}"
TEXT=build/kjv-text

[ -x build/kael ] || { echo "error: build/kael is missing (cmake --build build --target kael_cli)" >&2; exit 1; }
rm -rf "$TEXT"
python3 scripts/kjv_text.py "$TEXT"

mkdir -p "$RUN"
rm -f "$RUN.log.jsonl"
# The model: GPT-2's vocabulary and tokenizer, 4 layers of width 128, a context of 256 tokens.
cat > "$RUN.config.json" <<'JSON'
{"n_layer": 4, "n_head": 4, "n_embd": 128, "n_positions": 256, "vocab_size": 50257}
JSON
# kael train gives the same weights for the same options and data, whatever --threads is (checked
# on one machine: 1 and 2 threads, byte for byte); the threads are pinned all the same.
build/kael train --config "$RUN.config.json" --tokenizer "$BUNDLE" --data "$TEXT" --out "$RUN" --overwrite \
  --steps 450 --batch 8 --seq 256 --lr 2e-3 --schedule cosine --warmup 40 --min-lr 2e-4 \
  --weight-decay 0.1 --val-fraction 0.02 --eval-every 100 --seed 1 --threads 2 \
  --log-json "$RUN.log.jsonl"

# F16 weights, SHA256SUMS, and the final losses read from the log.
python3 scripts/package_bundled_model.py "$RUN" "$RUN.log.jsonl" "$BUNDLE"
