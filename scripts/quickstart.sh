#!/usr/bin/env bash
# The main job in one command: install build dependencies, build kael, download the GPT-2
# weights (checksummed) when data/gpt2 lacks them, and generate text. When they cannot be
# downloaded (no network), it says so in one line and generates with the small model that ships
# with kael (models/kael-tiny-kjv) instead, so the first run works offline too.
#   scripts/quickstart.sh ["prompt"] [extra kael generate options...]
# Environment, for tests: KAEL_GPT2_DIR (default data/gpt2), KAEL_GPT2_BASE_URL (scripts/download_gpt2.sh),
# KAEL_SKIP_SETUP=1 (no install or build: use $KAEL_BINARY, default build/kael, as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

GPT2_DIR="${KAEL_GPT2_DIR:-data/gpt2}"
KAEL="${KAEL_BINARY:-build/kael}"
BUNDLED=models/kael-tiny-kjv

if [ "${KAEL_SKIP_SETUP:-0}" != 1 ]; then
  scripts/install_deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j "$(nproc)" --target kael_cli
fi

model="$GPT2_DIR"
if ! scripts/download_gpt2.sh "$GPT2_DIR"; then
  echo "GPT-2 could not be downloaded; get it later with scripts/download_gpt2.sh (or copy model.safetensors, vocab.json and merges.txt into $GPT2_DIR). Generating with the bundled model $BUNDLED instead (7M parameters, trained on the King James Bible)." >&2
  model="$BUNDLED"
fi

prompt="${1:-Hello, my name is}"
shift || true
exec "$KAEL" generate --model "$model" "$prompt" "$@"
