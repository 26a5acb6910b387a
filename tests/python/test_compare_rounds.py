"""bench/compare.py --rounds: how the rounds' measurements are combined (no engine is run here)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import compare  # noqa: E402


def kael_run(b1: float, b16: float, prefill: float) -> dict:
    return {"b1": {"decode_tok_s": b1, "decode_cpu_ms": 1000.0 / b1, "isa": "amx"},
            "b16": {"decode_tok_s": b16, "decode_cpu_ms": 1000.0 / b16},
            "prefill": {"prefill_ms": prefill, "prefill_cpu_ms": 2 * prefill}}


def a_round(b1: float, b16: float, prefill: float, ct_prefill: float, peak: float) -> dict:
    return {"bandwidth_gb_s": 17.0, "bandwidth_by_threads": {1: peak / 20},
            "kael_b1_by_threads": {1: {"decode_tok_s": b1 / 2, "isa": "amx"}}, "fma_peak_gflops": peak, "fma_ghz_estimate": peak / 128,
            "fma_isa": "avx512", "fma_vector_bits": 512, "fma_units": 2, "fma_flops_per_cycle": 64,
            "int8_peak_gmacs": 2 * peak, "int8_dot": "avx512-vnni",
            "kael": kael_run(b1, b16, prefill), "kael_isa": "amx",
            "kael_by_isa": {"avx2": {"skipped": "no such ISA"}, "avx512": kael_run(b1 - 1, b16 - 1, prefill + 1)},
            "kael_dtypes": {"int8": kael_run(3 * b1, 3 * b16, prefill / 3)},
            "ctranslate2": {"b1_tok_s": 40.0, "b16_tok_s": 200.0 + b1, "prefill_ms": ct_prefill},
            "interleaved": {"f32_1t": {"vs_probe_p50": b1 / 50, "step_ms_p50": 1000.0 / b1}}}


def test_each_engine_keeps_its_best_and_a_kael_run_stays_whole():
    rounds = [a_round(40.0, 300.0, 600.0, 550.0, 300.0), a_round(38.0, 320.0, 520.0, 580.0, 320.0)]
    best = compare.best_of_rounds(rounds)
    assert best["kael"]["b1"]["decode_tok_s"] == 40.0
    assert best["kael"]["b16"]["decode_tok_s"] == 320.0
    # The prefill run of round 2 is kept whole: its CPU time belongs to its wall time.
    assert best["kael"]["prefill"] == {"prefill_ms": 520.0, "prefill_cpu_ms": 1040.0}
    assert best["kael_by_isa"]["avx2"] == {"skipped": "no such ISA"}
    assert best["kael_by_isa"]["avx512"]["prefill"]["prefill_ms"] == 521.0
    assert best["kael_dtypes"]["int8"]["prefill"]["prefill_ms"] == 520.0 / 3
    # A peer's figures are separate measurements: each its own best.
    assert best["ctranslate2"] == {"b1_tok_s": 40.0, "b16_tok_s": 240.0, "prefill_ms": 550.0}
    # The highest FMA peak, with the clock of the same measurement.
    assert best["fma_peak_gflops"] == 320.0 and best["fma_ghz_estimate"] == 2.5
    assert best["int8_peak_gmacs"] == 640.0 and best["fma_units"] == 2
    # Fewer threads: each thread count's best decode and best probe.
    assert best["kael_b1_by_threads"][1]["decode_tok_s"] == 20.0
    assert best["bandwidth_by_threads"][1] == 16.0


def test_the_interleaved_probe_ratio_is_the_median_rounds():
    # Each round's step-against-its-probe ratio already compares like with like: neither the
    # best nor the worst round is kept, and the run is kept whole.
    rounds = [a_round(b1, 300.0, 600.0, 550.0, 300.0) for b1 in (40.0, 45.0, 35.0)]
    best = compare.best_of_rounds(rounds)
    assert best["interleaved"]["f32_1t"] == {"vs_probe_p50": 0.8, "step_ms_p50": 25.0}


def test_every_round_is_listed():
    rounds = [a_round(40.0, 300.0, 600.0, 550.0, 300.0), a_round(38.0, 320.0, 520.0, 580.0, 320.0)]
    per_round = compare.per_round_figures(rounds)
    assert per_round["kael f32"]["prefill_ms"] == [600.0, 520.0]
    assert per_round["CTranslate2"]["prefill_ms"] == [550.0, 580.0]
    assert per_round["kael int8"]["b1_tok_s"] == [120.0, 114.0]
    assert per_round["kael f32 1 thread"]["b1_tok_s"] == [20.0, 19.0]
    assert per_round["read bandwidth"] == {"gb_s": [17.0, 17.0], "gb_s_1t": [15.0, 16.0]}
    assert "kael f32 avx2" not in per_round  # skipped: no figures


def test_rounds_below_one_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        compare.main(["--rounds", "0"])
    assert e.value.code == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err
