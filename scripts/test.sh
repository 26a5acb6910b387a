#!/usr/bin/env bash
# The test command: installs what the tests need, builds, and runs every test:
# the C++ tests (ctest), the same tests under ASan+UBSan, the concurrent-autograd test under
# TSan, a short seeded fuzz run, and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
# Each step's heading carries the seconds since the start, so a log shows what each step took.
step() { echo "== [${SECONDS} s] $*"; }

step "install dependencies"
scripts/install_deps.sh --test
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

step "release build and tests"
# With the CUDA toolkit installed (/usr/local/cuda) this build has the CUDA backend (KAEL_CUDA
# AUTO): its code is compiled here and its CPU tests and no-GPU errors run; the GPU's own tests
# are scripts/test_cuda.sh. The builds below are CPU-only (-DKAEL_CUDA=OFF): the sanitizers do
# not instrument the CUDA runtime, nvcc does not cross-compile, libFuzzer's build uses clang.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKAEL_BUILD_EXAMPLES=ON >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

step "ARM64 cross build and tests under qemu"
scripts/test_aarch64.sh

step "sanitizer build (ASan + UBSan) and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_SANITIZE=ON -DKAEL_CUDA=OFF >/dev/null
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE slow

step "thread sanitizer: concurrent backward (tests/tensor_threads_test.cpp alone)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_TSAN=ON -DKAEL_BUILD_BENCH=OFF -DKAEL_CUDA=OFF >/dev/null
cmake --build build-tsan -j "$JOBS" --target tensor_threads_test
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/tensor_threads_test

step "fuzz (libFuzzer, clang, seeded corpus)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DKAEL_FUZZ=ON -DKAEL_BUILD_TESTS=OFF -DKAEL_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$JOBS" --target fuzz_safetensors fuzz_json_inputs
for target in safetensors json_inputs; do  # a minute in all
  fuzz/run.sh "build-fuzz/fuzz/fuzz_$target" "${KAEL_FUZZ_SECONDS:-30}"
done

step "python package (pip install .)"
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check --config-settings=build-dir=build-python .

step "python tests"
KAEL_BINARY="$PWD/build/kael" python3 -m pytest -q tests/python
step "all passed"
