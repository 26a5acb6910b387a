#!/usr/bin/env bash
# The GPU's tests, for a machine with an NVIDIA GPU: builds kael with the CUDA backend from this
# tree, runs the C++ tests of device storage and ops (tests/cuda_test.cpp with the device-path
# checks of core_device_test and library_tensor_device_test), the same under compute-sanitizer's
# memcheck where it is installed, and the CUDA-vs-torch pytest file (tests/python/test_cuda.py),
# then prints a summary. About five minutes on 16 cores.
#
# It needs nvcc, CMake, a C++20 compiler and a Python with PyTorch (CUDA), pybind11 and numpy.
# A machine without Debian's -dev packages gets nlohmann-json and GoogleTest from a folder made
# beforehand on a Debian machine that has them:
#   scripts/test_cuda.sh --pack-deps DIR     # copies their headers, libraries and CMake files
#   KAEL_DEPS_DIR=DIR scripts/test_cuda.sh   # on the GPU machine
# The build uses KAEL_LIBRARY_ONLY (no CLI11, no Boost) and lands in build-cuda/. Exit status: 0
# when everything passed on a GPU, 1 when something failed, 2 when no GPU was usable (the
# device tests then skip, so the run proves nothing about the GPU).
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--pack-deps" ]]; then
  set -e
  dir="${2:?usage: scripts/test_cuda.sh --pack-deps DIR}"
  multiarch=$(gcc -print-multiarch)
  mkdir -p "$dir/include" "$dir/lib/$multiarch/cmake" "$dir/share/cmake"
  # The same layout as under /usr, so the packages' CMake files find their files from their own place.
  cp -r /usr/include/nlohmann /usr/include/gtest /usr/include/gmock "$dir/include/"
  cp -r /usr/share/cmake/nlohmann_json "$dir/share/cmake/"
  cp /usr/lib/"$multiarch"/libgtest*.a /usr/lib/"$multiarch"/libgmock*.a "$dir/lib/$multiarch/"
  cp -r /usr/lib/"$multiarch"/cmake/GTest "$dir/lib/$multiarch/cmake/"
  du -sh "$dir"
  exit 0
fi

PYTHON=${PYTHON:-python3}
JOBS=$(nproc)
BUILD=build-cuda
SECONDS=0
declare -a summary
record() { summary+=("$(printf '%-44s %s' "$1" "$2")"); }
step() { echo "== [${SECONDS} s] $*"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc_path" --version | tail -1 || echo "no nvcc found"

step "configure and build (CUDA, library only)"
prefix_path="${KAEL_DEPS_DIR:+$(cd "$KAEL_DEPS_DIR" && pwd)}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
pybind11_dir=$("$PYTHON" -m pybind11 --cmakedir 2>/dev/null || true)
# KAEL_WERROR=OFF: this machine's compiler may be another version than CI's, and a warning it
# adds must not cost the run (CI builds with -Werror).
if ! cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKAEL_CUDA=ON -DKAEL_LIBRARY_ONLY=ON -DKAEL_WERROR=OFF \
     -DKAEL_BUILD_BENCH=OFF -DKAEL_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
     ${pybind11_dir:+-Dpybind11_DIR="$pybind11_dir"} ${prefix_path:+-DCMAKE_PREFIX_PATH="$prefix_path"} >/tmp/kael-cuda-configure.log 2>&1; then
  tail -30 /tmp/kael-cuda-configure.log
  echo "configure failed"
  exit 1
fi
grep "kael:" /tmp/kael-cuda-configure.log
cpp_tests=(core_device_test library_tensor_device_test cuda_test)
if cmake --build "$BUILD" -j "$JOBS" --target "${cpp_tests[@]}" _kael; then
  record "build (CUDA, library only)" "ok, ${SECONDS} s"
else
  record "build (CUDA, library only)" "FAILED"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

# The package from this build, for the GPU check below and the pytest step.
site="$BUILD/site"
rm -rf "$site" && mkdir -p "$site"
cp -r python/kael "$site/kael"
cp "$BUILD"/python/_kael*.so "$site/kael/"
gpu=$(PYTHONPATH="$PWD/$site" "$PYTHON" -c "import kael; print(kael.cuda.device_count())" 2>&1)
if [[ "$gpu" =~ ^[1-9] ]]; then
  record "usable CUDA devices" "$gpu"
else
  record "usable CUDA devices" "NONE ($gpu): the GPU tests below skip, and this run fails"
fi

failed=0
step "C++ tests on the GPU"
count() {  # gtest's closing count of PASSED or SKIPPED tests in a log, 0 when it prints none
  local n
  n=$(grep -oP "^\[  $1 *\] \K[0-9]+(?= tests?[.,])" "$2" | head -1)
  echo "${n:-0}"
}
for test in "${cpp_tests[@]}"; do
  if "$BUILD/tests/$test" >"$BUILD/$test.log" 2>&1; then
    record "$test" "passed ($(count PASSED "$BUILD/$test.log") passed, $(count SKIPPED "$BUILD/$test.log") skipped)"
  else
    cat "$BUILD/$test.log"
    record "$test" "FAILED"
    failed=1
  fi
done

step "compute-sanitizer memcheck over the CUDA tests"
sanitizer=$(command -v compute-sanitizer || ls "$(dirname "$nvcc_path")/compute-sanitizer" 2>/dev/null || true)
if [[ -n "$sanitizer" ]]; then
  if "$sanitizer" --tool memcheck --error-exitcode 3 "$BUILD/tests/cuda_test" >"$BUILD/memcheck.log" 2>&1; then
    record "memcheck cuda_test" "clean ($(tail -1 "$BUILD/memcheck.log"))"
  else
    tail -40 "$BUILD/memcheck.log"
    record "memcheck cuda_test" "FAILED"
    failed=1
  fi
else
  record "memcheck cuda_test" "skipped: no compute-sanitizer"
fi

step "Python: the extension from this build, tests/python/test_cuda.py against torch"
if PYTHONPATH="$PWD/$site" "$PYTHON" -m pytest -q -p no:cacheprovider tests/python/test_cuda.py 2>&1 | tee "$BUILD/pytest.log"; then
  record "pytest tests/python/test_cuda.py" "passed ($(tail -1 "$BUILD/pytest.log"))"
else
  record "pytest tests/python/test_cuda.py" "FAILED ($(tail -1 "$BUILD/pytest.log"))"
  failed=1
fi

echo "== [${SECONDS} s] summary"
printf '%s\n' "${summary[@]}"
[[ "$gpu" =~ ^[1-9] ]] || exit 2  # a run without a GPU has tested nothing of the device
exit $failed
