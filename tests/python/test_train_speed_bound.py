"""bench/train_speed.py's F32 bound: per shape, the rate twice PyTorch's speed needs, from the step's
product flops, against the FMA peak that build/bench/fma_peak measures in the same run (the step
times here are made up; the peak is measured)."""
import pathlib
import re
import sys
import types

import pytest

from conftest import kael_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import train_speed  # noqa: E402

PARAMETERS = 124_439_808


def bound_rows(capsys, kael: pathlib.Path, rows):
    train_speed.print_fma_bound(types.SimpleNamespace(kael=str(kael), threads=1), rows)
    return capsys.readouterr().out


def test_needed_rate_is_twice_pytorchs_over_the_measured_peak(capsys):
    kael = kael_binary()
    if not (kael.parent / "bench" / "fma_peak").exists():
        pytest.skip(f"no bench/fma_peak beside {kael} (built with -DKAEL_BUILD_BENCH=OFF)")
    rows = [("4x64", {"parameters": PARAMETERS, "step_s": 1.0}, {"step_s": 2.0}),
            ("8x256", {"parameters": PARAMETERS, "step_s": 7.0}, {"step_s": 8.8})]
    out = bound_rows(capsys, kael, rows)
    peak = float(re.search(r"bench/fma_peak\): (\d+) GFLOP/s from throughput", out).group(1))
    assert peak > 0
    table = [line for line in out.splitlines() if line.startswith("| 4x64 |") or line.startswith("| 8x256 |")]
    assert len(table) == 2
    for line, (shape, k, t) in zip(table, rows):
        cells = [c.strip() for c in line.strip("|").split("|")]
        B, T = map(int, shape.split("x"))
        gflop = 6 * PARAMETERS * B * T / 1e9
        assert float(cells[1]) == pytest.approx(gflop, abs=0.5)
        assert float(cells[2]) == pytest.approx(gflop / k["step_s"], abs=0.5)
        assert float(cells[3]) == pytest.approx(gflop / t["step_s"], abs=0.5)
        needed = 2 * gflop / t["step_s"]
        assert float(cells[4]) == pytest.approx(needed, abs=0.5)
        # The printed peak is rounded to whole GFLOP/s, so the true one lies within half of it,
        # and the printed fraction is rounded to two places.
        rounding = needed / (peak - 0.5) - needed / peak
        assert float(cells[5]) == pytest.approx(needed / peak, abs=rounding + 0.005)


def test_without_the_probe_it_says_so(capsys, tmp_path):
    out = bound_rows(capsys, tmp_path / "kael", [("4x64", {"parameters": PARAMETERS, "step_s": 1.0}, {"step_s": 2.0})])
    assert "fma_peak not found" in out and "|" not in out
