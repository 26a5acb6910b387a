"""bench/train_speed.py --ab OLD NEW: the builds run in turns, each build's steps are pooled by its
place on the command line (so the same binary twice is two builds), the table's ratios and the
1.15x gate follow from the medians, and bad arguments are refused. The runs are made up here: no
timing is checked."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import train_speed  # noqa: E402

BINARY = sys.executable  # any executable passes the check that --ab names binaries


def refusal(capsys, *argv):
    with pytest.raises(SystemExit) as exit_:
        train_speed.parse_arguments([str(a) for a in argv])
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_bad_arguments_are_refused(capsys, tmp_path):
    assert "expected 2 arguments" in refusal(capsys, "--ab", BINARY)
    assert "is not an executable kael binary" in refusal(capsys, "--ab", BINARY, tmp_path / "missing")
    assert "neither --kael nor --ranks" in refusal(capsys, "--ab", BINARY, BINARY, "--ranks", 2)
    assert "neither --kael nor --ranks" in refusal(capsys, "--ab", BINARY, BINARY, "--kael", BINARY)
    assert "--rounds must be at least 1" in refusal(capsys, "--ab", BINARY, BINARY, "--rounds", 0)
    assert "--rounds is for --ab only" in refusal(capsys, "--rounds", 2)
    assert "--steps must be at least 2" in refusal(capsys, "--ab", BINARY, BINARY, "--steps", 1)
    for shape in ("4x", "x64", "0x64", "4x64x2", "4*64"):
        assert "is not BxT" in refusal(capsys, "--shapes", f"8x256,{shape}")


def test_defaults():
    args = train_speed.parse_arguments(["--ab", BINARY, BINARY])
    assert args.rounds == 3 and args.shapes == [(4, 64), (8, 256)] and args.precision is None
    plain = train_speed.parse_arguments([])
    assert plain.kael == str(ROOT / "build" / "kael") and plain.ab is None and plain.rounds is None


def test_runs_alternate_and_pool_by_place(monkeypatch):
    """Round r runs OLD then NEW when r is even, NEW then OLD when odd; both precisions unless one is
    named; the same path twice still gives two columns."""
    calls = []

    def fake_run(kael, model, data, B, T, steps, threads, precision="f32"):
        calls.append((kael, B, T, precision))
        n = len(calls)
        return dict(steps_s=[float(n)] * (steps - 1), cpus_s=[n / 2] * (steps - 1))

    monkeypatch.setattr(train_speed, "kael_run", fake_run)
    args = train_speed.parse_arguments(["--ab", BINARY, BINARY, "--rounds", "3", "--steps", "3", "--shapes", "2x32"])
    args.ab = ["old", "new"]  # told apart in the calls; parsing checked they are executables
    rows = train_speed.ab_comparison(args, None, None)
    assert [c[0] for c in calls] == ["old", "new", "new", "old", "old", "new"] * 2
    assert [c[3] for c in calls] == ["f32"] * 6 + ["bf16"] * 6
    # f32: OLD ran as calls 1, 4, 5 and NEW as 2, 3, 6, two timed steps each.
    assert rows[0] == ("2x32", "f32", (4.0, 2.0), (3.0, 1.5), 6)
    assert rows[1] == ("2x32", "bf16", (10.0, 5.0), (9.0, 4.5), 6)

    calls.clear()
    args.precision = "bf16"
    assert [r[1] for r in train_speed.ab_comparison(args, None, None)] == ["bf16"]


def test_table_ratios_and_gate(capsys):
    args = train_speed.parse_arguments(["--ab", BINARY, BINARY, "--rounds", "2"])
    rows = [("4x64", "f32", (1.0, 2.0), (1.1, 2.2), 4),
            ("8x256", "f32", (10.0, 20.0), (11.4, 23.2), 4),  # CPU time 1.16x: outside
            ("8x256", "bf16", (8.0, 16.0), (9.6, 16.0), 4)]  # wall 1.20x: outside
    train_speed.print_ab_table(args, rows)
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| 4x64 |") or line.startswith("| 8x256 |")]
    assert len(table) == 3
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    assert cells[0] == ["4x64", "f32", "1.000", "1.100", "1.10x", "2.00", "2.20", "1.10x", "yes", "4"]
    assert cells[1][4] == "1.14x" and cells[1][7] == "1.16x" and cells[1][8] == "no"
    assert cells[2][4] == "1.20x" and cells[2][7] == "1.00x" and cells[2][8] == "no"
    assert "within 1.15x" in out and "load average" in out
