#!/usr/bin/env bash
# Installs what kael needs to build and test: Debian packages and pinned PyPI packages.
# Fast when everything is already present (it checks before it asks a registry).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake clang libclang-rt-14-dev nlohmann-json3-dev libcli11-dev
              libcpp-httplib-dev libgtest-dev pybind11-dev unicode-data curl ca-certificates python3-pip)
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
  # pip checks pins against what is installed and downloads only what differs.
  python3 -m pip install -q --disable-pip-version-check -r requirements-test.txt
fi
