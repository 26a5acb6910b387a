#!/usr/bin/env bash
# The ARM64 check: cross-compiles the library, the CLI and the C++ tests for aarch64 Linux with
# Debian's g++-aarch64-linux-gnu (the arm64 libraries through multiarch), then runs the whole
# C++ test suite under qemu-aarch64 (user-mode emulation), where the kernel table picks the
# NEON kernels. The emulated CPU (qemu's "max") has SDOT, so the run covers the dot-product
# int8 kernel; KAEL_DOTPROD=0 reruns the int8 tests on the plain NEON path.
# Called from scripts/test.sh; runs as root or through sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo

# Headers-only packages serve both architectures (nlohmann-json3-dev, libcli11-dev; Boost.Beast
# and Asio from libboost1.81-dev, of which the build uses headers only); the library the build
# links (gtest) needs its arm64 build. qemu runs the tests against the arm64 loader and runtime
# libraries (libc6:arm64, libstdc++6:arm64), named here because libgtest-dev:arm64 does not pull
# them in: without them every test fails with "Could not open '/lib/ld-linux-aarch64.so.1'".
CROSS_PACKAGES=(g++-aarch64-linux-gnu qemu-user nlohmann-json3-dev libcli11-dev libboost1.81-dev libgtest-dev:arm64
                libc6:arm64 libstdc++6:arm64)
missing=()
for pkg in "${CROSS_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

echo "== aarch64 cross build (Release) and the C++ tests under qemu-aarch64"
# -DKAEL_CUDA=OFF: nvcc here builds for this machine, not for ARM64.
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
      -DKAEL_BUILD_BENCH=OFF -DKAEL_CUDA=OFF ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build build-aarch64 -j "$JOBS"
# ctest runs every test through CMAKE_CROSSCOMPILING_EMULATOR (the toolchain file).
ctest --test-dir build-aarch64 --output-on-failure -j "$JOBS"
echo "== the int8 kernels on the plain NEON path (SDOT hidden)"
KAEL_DOTPROD=0 ctest --test-dir build-aarch64 --output-on-failure -j "$JOBS" -R 'Int8|Quant'
