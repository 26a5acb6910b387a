#!/usr/bin/env bash
# The main job in one command: install build dependencies, build kael, download the GPT-2
# weights (checksummed) when data/gpt2 lacks them, and generate text.
#   scripts/quickstart.sh ["prompt"] [extra kael generate options...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target kael_cli
scripts/download_gpt2.sh data/gpt2

prompt="${1:-Hello, my name is}"
shift || true
exec build/kael generate --model data/gpt2 "$prompt" "$@"
