"""`kael bench`: the JSON report has every figure the issue names, with consistent values, on a
small checkpoint (speed does not depend on the weights); batching and --threads are honoured;
bad options are errors. The speed itself is measured by bench/compare.py, not here."""
import json

import pytest

KEYS = {"prompt_tokens", "generated_tokens", "prefill_ms", "decode_tok_s", "latency_ms", "peak_rss_mb", "threads",
        "weights_mb", "breakdown_ms"}
PARTS = {"attention", "mlp", "layer_norm", "logits", "other"}


def bench(kael, model_dir, *args):
    return json.loads(kael("bench", "--model", model_dir, "--json", *args).stdout)


def test_json_report_has_every_figure(kael, gpt2_f16_dir):
    out = bench(kael, gpt2_f16_dir, "--prompt-tokens", 8, "--max-tokens", 6, "--threads", 2)
    assert KEYS <= out.keys()
    assert out["prompt_tokens"] == 8 and out["generated_tokens"] == 6 and out["threads"] == 2
    assert out["prefill_ms"] > 0 and out["decode_tok_s"] > 0
    latency = out["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["p95"] and latency["mean"] > 0
    # 4 layers of n_embd 256, vocab 50257, 256 positions: 16,090,880 parameters, 4 bytes each.
    assert out["weights_mb"] == pytest.approx(16_090_880 * 4 / 1e6)
    assert out["peak_rss_mb"] >= out["weights_mb"]
    parts = out["breakdown_ms"]
    assert PARTS <= parts.keys()
    assert all(parts[p] >= 0 for p in PARTS - {"other"})
    assert sum(parts[p] for p in PARTS) == pytest.approx(parts["total"], rel=1e-6, abs=1e-6)
    # Decode time covers every step: tokens / (tokens / s) is the decode time.
    assert out["generated_tokens"] / out["decode_tok_s"] * 1e3 == pytest.approx(out["decode_ms"], rel=1e-6)


def test_thread_busy_counts_the_prefill_and_decode_per_part(kael, gpt2_f16_dir):
    plain = bench(kael, gpt2_f16_dir, "--prompt-tokens", 4, "--max-tokens", 1)
    assert "prefill_thread_busy" not in plain and "decode_thread_busy" not in plain
    out = bench(kael, gpt2_f16_dir, "--prompt-tokens", 64, "--max-tokens", 3, "--threads", 2, "--thread-busy")
    for key in ("prefill_thread_busy", "decode_thread_busy"):
        busy = out[key]
        assert PARTS | {"total"} <= busy.keys()
        total = busy["total"]
        # Each part's calls add up to the total; a split call gives both threads CPU time.
        assert sum(busy[p]["calls"] + busy[p]["serial_calls"] for p in PARTS) == total["calls"] + total["serial_calls"]
        assert total["calls"] > 0 and len(total["task_cpu_ms"]) == 2 and min(total["task_cpu_ms"]) > 0
        assert total["imbalance"] >= 1
        assert 0 <= busy["main_thread_outside_calls_cpu_ms"] <= busy["main_thread_cpu_ms"]
    # Three decode steps make three times the model's calls of one step: the head's product each step.
    assert out["decode_thread_busy"]["logits"]["calls"] == 3


def test_batch_decodes_every_sequence(kael, gpt2_f16_dir):
    out = bench(kael, gpt2_f16_dir, "--prompt-tokens", 4, "--max-tokens", 5, "--batch", 3, "--threads", 1)
    assert out["batch"] == 3 and out["threads"] == 1
    assert out["prompt_tokens"] == 12 and out["generated_tokens"] == 15


def test_text_report(kael, gpt2_f16_dir):
    text = kael("bench", "--model", gpt2_f16_dir, "--prompt-tokens", 4, "--max-tokens", 3).stdout.decode()
    for word in ("prefill", "decode", "tokens/s", "p95", "peak RSS", "breakdown"):
        assert word in text


def test_warmup_keeps_first_touch_faults_out_of_the_timed_prefill(kael, gpt2_f16_dir):
    cold = bench(kael, gpt2_f16_dir, "--prompt-tokens", 128, "--max-tokens", 1, "--warmup", 0)
    warm = bench(kael, gpt2_f16_dir, "--prompt-tokens", 128, "--max-tokens", 1)
    assert cold["warmup"] == 0 and warm["warmup"] == 1  # one warm-up round by default
    # A cold prefill faults in its KV blocks and scratch; after a warm-up the same blocks come back.
    assert cold["prefill_page_faults"] > 0
    assert warm["prefill_page_faults"] < cold["prefill_page_faults"]


def test_warmup_touches_every_position_the_timed_decode_holds(kael, gpt2_small_dir):
    args = ("--prompt-tokens", 4, "--max-tokens", 96, "--threads", 2)
    cold = bench(kael, gpt2_small_dir, *args, "--warmup", 0)
    warm = bench(kael, gpt2_small_dir, *args)
    # Without a warm-up, decode faults in the key/value memory of the positions past the prompt;
    # the warm-up's prompt is as long as the timed prompt and decode together.
    assert cold["decode_page_faults"] > 0
    assert warm["decode_page_faults"] < cold["decode_page_faults"]


def test_peak_rss_is_the_benchmarks_own(kael, gpt2_f16_dir):
    # getrusage's maxrss would carry over this test process's resident memory through exec;
    # kael reports its own (VmHWM). 1 GB touched here, the small checkpoint's run far below it.
    held = bytearray(1 << 30)
    held[::4096] = b"\x01" * len(held[::4096])
    out = bench(kael, gpt2_f16_dir, "--prompt-tokens", 4, "--max-tokens", 2)
    assert out["weights_mb"] <= out["peak_rss_mb"] < 700
    del held


@pytest.mark.parametrize("args, message", [
    (["--batch", "0"], "--batch"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--prompt-tokens", "200", "--max-tokens", "100"], "256"),  # past n_positions: the counts are named
    (["--threads", "-1"], "--threads"),
    (["--warmup", "-1"], "--warmup"),
])
def test_bad_values_are_errors(kael, gpt2_f16_dir, args, message):
    result = kael("bench", "--model", gpt2_f16_dir, *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr.decode()


def test_unknown_option_and_help(kael, gpt2_f16_dir):
    assert kael("bench", "--model", gpt2_f16_dir, "--bogus", check=False).returncode != 0
    assert "--batch" in kael("bench", "--help").stdout.decode()
