#!/usr/bin/env bash
# Installs what kael needs: Debian packages to build it, and with --test also what the tests
# need (clang for the fuzzer, chromium for the web-page test, nginx and python3-yaml for the deploy/
# test, the pinned PyPI references).
# Fast when everything is already present: it checks before it asks a registry.
set -euo pipefail
cd "$(dirname "$0")/.."

# Boost.Beast and Asio (headers only) carry `kael serve`'s HTTP. Open MPI (libopenmpi-dev, and mpirun
# from openmpi-bin) for data-parallel training; kael builds without it.
APT_PACKAGES=(build-essential cmake nlohmann-json3-dev libcli11-dev libboost1.81-dev curl ca-certificates
  libopenmpi-dev openmpi-bin)
APT_TEST_PACKAGES=(clang libclang-rt-14-dev libgtest-dev pybind11-dev python3-pip chromium nginx python3-yaml)
[ "${1:-}" = "--test" ] && APT_PACKAGES+=("${APT_TEST_PACKAGES[@]}")

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q "${missing[@]}" || { $SUDO apt-get update -q && $SUDO apt-get install -y -q "${missing[@]}"; }
fi

if [ "${1:-}" = "--test" ]; then
  # pip checks the pins against what is installed and downloads only what differs. Debian's
  # own python3 marks its site-packages as externally managed; the test references go there anyway.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check -r requirements-test.txt
fi
