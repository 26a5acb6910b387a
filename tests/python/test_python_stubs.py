"""python/kael/_kael.pyi describes the extension that was built: mypy's stubtest finds every
public name and signature of kael._kael in the stubs, and nothing in the stubs that the
extension lacks. Two of its findings are pybind11's and not the stubs': classes have
pybind11's metaclass, and a class without a constructor gets a generic __init__."""
import subprocess
import sys

import pytest

PYBIND11_ARTIFACTS = ("metaclass differs", "stub does not have *args parameter")


def test_stubs_match_the_extension():
    pytest.importorskip("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "kael._kael", "--concise"],
                            capture_output=True, text=True, timeout=600)
    # A stub that mypy cannot read stops stubtest before it checks anything, with exit status 1
    # as for a finding: that is a failure too.
    assert "not checking stubs" not in result.stdout + result.stderr, (result.stdout + result.stderr)[-2000:]
    errors = [line for line in result.stdout.splitlines()
              if not any(a in line for a in PYBIND11_ARTIFACTS) and line.strip()]
    assert not errors, "\n".join(errors)
    assert result.returncode in (0, 1), result.stderr[-2000:]
