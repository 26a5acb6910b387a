"""bench/prefill_ab.py: two configurations of kael bench in turns on a small checkpoint (the
figures themselves are timings, not checked here), and configurations it must refuse."""
import pathlib
import subprocess
import sys

from conftest import kael_binary

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "prefill_ab.py"


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True)


def test_two_configurations_in_turns(gpt2_f16_dir):
    binary = kael_binary()
    out = run("--model", gpt2_f16_dir, "--rounds", 2, "--prompt-tokens", 16, f"best={binary}",
              f"plain={binary},KAEL_ISA=scalar")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| best |") or line.startswith("| plain |")]
    assert len(rows) == 2 and "| scalar |" in rows[1]
    assert "2 rounds, 2 threads, 16-token prefill, f32 weights" in out.stdout
    for key in ("wall", "cpu", "busiest"):
        assert f"plain / best {key}: median ratio" in out.stdout


def test_decode_steps_with_the_weight_type_asked_for(gpt2_f16_dir):
    binary = kael_binary()
    out = run("--model", gpt2_f16_dir, "--rounds", 1, "--prompt-tokens", 4, "--decode", 3, "--dtype", "int8",
              f"a={binary}", f"b={binary}")
    assert out.returncode == 0, out.stderr
    assert "1 rounds, 2 threads, 3 decode steps after a 4-token prompt, int8 weights" in out.stdout


def test_bad_configurations_are_refused(gpt2_f16_dir):
    one = run("--model", gpt2_f16_dir, f"only={kael_binary()}")
    assert one.returncode != 0 and "at least two configurations" in one.stderr
    bad = run("--model", gpt2_f16_dir, "a=x,NOVALUE", "b=y")
    assert bad.returncode != 0 and "is not VAR=VALUE" in bad.stderr
    dtype = run("--model", gpt2_f16_dir, "--dtype", "int4", "a=x", "b=y")
    assert dtype.returncode != 0 and "invalid choice: 'int4'" in dtype.stderr
