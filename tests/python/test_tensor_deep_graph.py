"""A graph a million ops deep, as a running total kept with its history over a long loop makes
(`total = total + loss`), is freed without recursing once per node: freeing it used to overflow
the stack near 100,000 ops. Each case runs in a child process, so that a crash is a failure
rather than the end of the test run."""
from __future__ import annotations

import subprocess
import sys

import pytest

BUILD_AND_DROP = """
import kael
x = kael.tensor(2.0, requires_grad=True)
y = x
for _ in range(1_000_000):
    y = y * 1.0
if {backward}:
    y.backward()
    assert x.grad.item() == 1.0, x.grad
del y
print("freed")
"""


@pytest.mark.parametrize("backward", [False, True], ids=["dropped", "after_backward"])
def test_a_million_op_graph_is_freed(backward):
    result = subprocess.run([sys.executable, "-c", BUILD_AND_DROP.format(backward=backward)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip() == "freed"
