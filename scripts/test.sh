#!/usr/bin/env bash
# The test command: installs what the tests need, builds, and runs every test:
# the C++ tests (ctest), the same tests under ASan+UBSan, the concurrent-autograd test under
# TSan, a short seeded fuzz run, and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)

scripts/install_deps.sh --test
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "== release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKAEL_BUILD_EXAMPLES=ON >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

scripts/test_aarch64.sh

echo "== sanitizer build (ASan + UBSan) and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE slow

echo "== thread sanitizer: concurrent backward (tests/tensor_threads_test.cpp alone)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAEL_TSAN=ON -DKAEL_BUILD_BENCH=OFF >/dev/null
cmake --build build-tsan -j "$JOBS" --target tensor_threads_test
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/tensor_threads_test

echo "== fuzz (libFuzzer, clang, seeded corpus)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DKAEL_FUZZ=ON -DKAEL_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j "$JOBS" --target fuzz_safetensors
fuzz/run.sh build-fuzz/fuzz/fuzz_safetensors "${KAEL_FUZZ_SECONDS:-60}"

echo "== python package (pip install .)"
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check --config-settings=build-dir=build-python .

echo "== python tests"
KAEL_BINARY="$PWD/build/kael" python3 -m pytest -q tests/python
