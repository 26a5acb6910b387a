"""The installed kael that test_install.py and test_examples.py build against: `cmake --install`
of the Release build (the directory of $KAEL_BINARY, default build/) into a temporary prefix,
once per session, and a helper that configures and builds a CMake project against it."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, kael_binary


def project_version() -> str:
    """The version in CMakeLists.txt's project(), the one place it is written down."""
    match = re.search(r"project\(kael VERSION (\d+\.\d+\.\d+)", (ROOT / "CMakeLists.txt").read_text())
    assert match, "CMakeLists.txt has no project(kael VERSION x.y.z)"
    return match.group(1)


def run(args, text=True, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=text, timeout=600, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, args))} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def installed_prefix(tmp_path_factory) -> pathlib.Path:
    build_dir = kael_binary().parent
    prefix = tmp_path_factory.mktemp("kael-prefix")
    run(["cmake", "--install", build_dir, "--prefix", prefix])
    return prefix


def build_against(prefix: pathlib.Path, source: pathlib.Path, build: pathlib.Path) -> pathlib.Path:
    """Configures and builds the CMake project `source` in `build` with only `prefix` to find kael in."""
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    run(["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF", *launcher])
    run(["cmake", "--build", build, "-j", str(min(4, os.cpu_count() or 1))])
    return build
