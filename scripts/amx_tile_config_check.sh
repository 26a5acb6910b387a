#!/usr/bin/env bash
# Whether each C++ compiler here builds a working AMX tile configuration written the way ggml's
# amx/mmq.cpp writes it (a local struct filled field by field, then _tile_loadconfig), which is why
# docs/performance.md ("llama.cpp for compare.py") builds llama.cpp with clang: GCC 12's
# _tile_loadconfig gives its asm an 8-byte memory operand, so GCC drops the stores of the tile rows and widths and the first tileloadd dies (SIGILL,
# or SIGSEGV when what the stack held makes the config invalid).
# Usage: scripts/amx_tile_config_check.sh [compiler...]   (default: g++ clang++)
set -u
if ! grep -qw amx_tile /proc/cpuinfo; then
  echo "skipped: this CPU (or its VM) has no AMX-TILE"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/tile_config.cpp" <<'EOF'
#include <immintrin.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <cstdint>
#include <cstdio>

struct TileConfig {
  std::uint8_t palette_id = 0, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// ggml's ggml_tile_config_init, field for field.
__attribute__((noinline)) void load_config() {
  alignas(64) TileConfig config = {};
  config.palette_id = 1;
  config.start_row = 0;
  config.rows[0] = 8;  config.colsb[0] = 64;
  config.rows[1] = 8;  config.colsb[1] = 64;
  config.rows[2] = 16; config.colsb[2] = 32;
  config.rows[3] = 16; config.colsb[3] = 32;
  config.rows[4] = 16; config.colsb[4] = 64;
  config.rows[5] = 16; config.colsb[5] = 64;
  config.rows[6] = 16; config.colsb[6] = 64;
  config.rows[7] = 16; config.colsb[7] = 64;
  _tile_loadconfig(&config);
}

int main() {
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    std::puts("Linux refused the AMX tile state");
    return 2;
  }
  load_config();
  alignas(64) static std::int8_t tile[8 * 64];
  _tile_loadd(0, tile, 64);  // tmm0: 8 rows of 64 bytes
  _tile_release();
  std::puts("tileloadd ran");
  return 0;
}
EOF
for cxx in "${@:-g++ clang++}"; do
  for c in $cxx; do
    if ! command -v "$c" >/dev/null; then echo "$c: not installed"; continue; fi
    version=$("$c" --version | head -1)
    if ! "$c" -O2 -mamx-tile -o "$work/check" "$work/tile_config.cpp" 2>"$work/err"; then
      echo "$version: does not compile AMX ($(head -1 "$work/err"))"
      continue
    fi
    out=$("$work/check" 2>&1); code=$?
    if [ $code -eq 0 ]; then echo "$version: $out"
    elif [ $code -gt 128 ]; then echo "$version: died of signal $((code - 128)) ($(kill -l $((code - 128)))): tile config lost"
    else echo "$version: $out"; fi
  done
done
