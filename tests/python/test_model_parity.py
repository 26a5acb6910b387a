"""kael's forward pass against Hugging Face transformers on seeded checkpoints
(docs/behaviour.md, "The GPT-2 checkpoint", "The forward pass" and "Command line"):
full-vocabulary logits at the last position within 1e-3, for GPT-2 small's shape in F32 and a
small F16 checkpoint of another shape, in each checkpoint layout; then `kael logits` itself
(text prompts, --top, --json) and its errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpt2_reference
from conftest import kael_binary

ATOL = 1e-3
LENGTHS = [1, 7, 64, 130]  # 64 and 130 cross kael's 64-position prefill chunks


@pytest.fixture(scope="module")
def hf_small(gpt2_small_dir):
    return gpt2_reference.load_hf(gpt2_small_dir)


@pytest.fixture(scope="module")
def hf_f16(gpt2_f16_dir):
    return gpt2_reference.load_hf(gpt2_f16_dir)


def check_parity(kael, model_dir, hf_model, ids, label):
    expected = gpt2_reference.hf_last_logits(hf_model, ids)
    got = gpt2_reference.kael_last_logits(kael, model_dir, ids)
    assert got.shape == expected.shape and not np.isnan(got).any()
    err = float(np.max(np.abs(got.astype(np.float64) - expected)))
    print(f"{label} len {len(ids)}: max |kael - transformers| = {err:.3e}, logit std {np.std(expected):.2f}")
    # The wide init spreads the logits like a trained model's, so the tolerance is meaningful.
    assert np.std(expected) > 1.0
    assert err <= ATOL, f"{label}, {len(ids)} tokens: max abs logit error {err:.3e} > {ATOL}"
    return got


@pytest.mark.parametrize("length", LENGTHS)
def test_gpt2_small_shape_matches_transformers(kael, gpt2_small_dir, hf_small, length):
    check_parity(kael, gpt2_small_dir, hf_small, gpt2_reference.prompt_ids(length), "gpt2-small F32")


@pytest.mark.parametrize("length", LENGTHS + [256])
def test_f16_other_shape_matches_transformers(kael, gpt2_f16_dir, hf_f16, length):
    # 256 fills the checkpoint's whole context (n_positions 256).
    check_parity(kael, gpt2_f16_dir, hf_f16, gpt2_reference.prompt_ids(length), "4x8x256 F16")


def test_bf16_checkpoint_matches_transformers(kael, tmp_path):
    # Tiny, so it is cheap to build here: BF16 weights, widened exactly at load on both sides.
    model_dir = gpt2_reference.make_checkpoint(tmp_path / "bf16", n_layer=2, n_head=4, n_embd=64, n_positions=64,
                                               dtype="bfloat16", seed=3, init_std=0.3)
    hf = gpt2_reference.load_hf(model_dir)
    for length in (1, 64):
        check_parity(kael, model_dir, hf, gpt2_reference.prompt_ids(length), "2x4x64 BF16")


@pytest.fixture(scope="module")
def published_dir(gpt2_small_dir, tmp_path_factory):
    """gpt2_small_dir's weights in the published gpt2 file's layout: no prefix, the causal-mask
    buffers h.{i}.attn.bias, data misaligned by 3 bytes (no F32 tensor can be used in place)."""
    return gpt2_reference.relayout(gpt2_small_dir, tmp_path_factory.mktemp("published") / "model",
                                   mask_buffers=True, misalign=True)


@pytest.mark.parametrize("layout", ["published", "prefix+lm_head"])
def test_checkpoint_layouts_give_the_same_logits(kael, gpt2_small_dir, hf_small, published_dir, tmp_path, layout):
    ids = gpt2_reference.prompt_ids(7)
    base = gpt2_reference.kael_last_logits(kael, gpt2_small_dir, ids)
    if layout == "published":
        other = published_dir
    else:  # what save_pretrained of older transformers wrote: prefix plus a tied lm_head.weight
        other = gpt2_reference.relayout(gpt2_small_dir, tmp_path / "model", prefix=True, lm_head=True)
    got = check_parity(kael, other, hf_small, ids, f"layout {layout}")
    np.testing.assert_array_equal(got, base)


def max_rss_bytes(command):
    """Peak resident memory of one command, measured in a fresh Python so that nothing else
    counts among its children."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, *map(str, command)], check=True, capture_output=True)
    return int(out.stdout) * 1024  # ru_maxrss is in KiB on Linux


@pytest.mark.parametrize("mapped", [True, False])
def test_peak_memory_stays_close_to_the_weights(published_dir, mapped):
    # The published layout is the hard case: misaligned data (no F32 tensor can stay in a
    # mapping) plus 12 mask buffers of 4 MiB. Peak memory must stay near the F32 weights, with
    # no second copy of them.
    weights = 124_439_808 * 4
    command = [kael_binary(), "logits", "--model", published_dir, "--ids", "464,2068", "--top", "1"]
    peak = max_rss_bytes(command + ([] if mapped else ["--no-mmap"]))
    print(f"peak RSS {peak / 2**20:.0f} MiB for {weights / 2**20:.0f} MiB of weights (mapped={mapped})")
    assert peak < 1.25 * weights, f"peak {peak / 2**20:.0f} MiB"


def test_mapped_and_read_weights_agree(kael, gpt2_f16_dir):
    ids = gpt2_reference.prompt_ids(9)
    mapped = gpt2_reference.kael_last_logits(kael, gpt2_f16_dir, ids)
    read = gpt2_reference.kael_last_logits(kael, gpt2_f16_dir, ids, extra_args=["--no-mmap"])
    np.testing.assert_array_equal(mapped, read)


def test_thread_count_does_not_change_logits(kael, gpt2_f16_dir):
    ids = gpt2_reference.prompt_ids(70)
    one = gpt2_reference.kael_last_logits(kael, gpt2_f16_dir, ids, extra_args=["--threads", "1"])
    three = gpt2_reference.kael_last_logits(kael, gpt2_f16_dir, ids, extra_args=["--threads", "3"])
    np.testing.assert_array_equal(one, three)


def test_text_prompt_top_json(kael, gpt2_f16_dir, hf_f16):
    out = json.loads(kael("logits", "--model", gpt2_f16_dir, "Hello, my name is", "--json").stdout)
    assert out["ids"] == [15496, 11, 616, 1438, 318]  # docs/behaviour.md, "Tokenizer"
    top = out["top"]
    assert len(top) == 5 and [sorted(e) for e in top] == [["id", "logit", "token"]] * 5
    logits = [e["logit"] for e in top]
    assert logits == sorted(logits, reverse=True)
    expected = gpt2_reference.hf_last_logits(hf_f16, out["ids"])
    assert [e["id"] for e in top] == [int(i) for i in np.argsort(-expected, kind="stable")[:5]]
    for e in top:
        assert abs(e["logit"] - expected[e["id"]]) <= ATOL

    vocab = json.loads((gpt2_f16_dir / "vocab.json").read_text())
    by_id = {v: k for k, v in vocab.items()}
    byte_decoder = _byte_decoder()
    for e in top:  # "token" is the decoded token text
        raw = bytes(byte_decoder[ch] for ch in by_id[e["id"]])
        assert e["token"] == raw.decode("utf-8", errors="replace")


def test_text_output_and_top_sizes(kael, gpt2_f16_dir):
    lines = kael("logits", "--model", gpt2_f16_dir, "--ids", "464,2068", "--top", "3").stdout.decode().splitlines()
    assert len(lines) == 3
    ids = [int(line.split()[0]) for line in lines]
    values = [float(line.split()[1]) for line in lines]
    assert values == sorted(values, reverse=True)
    everything = json.loads(kael("logits", "--model", gpt2_f16_dir, "--ids", "464,2068", "--top", "0",
                                 "--json").stdout)["top"]
    assert len(everything) == 50257 and sorted(e["id"] for e in everything) == list(range(50257))
    assert [e["id"] for e in everything[:3]] == ids
    # More than the vocabulary is the whole vocabulary.
    assert len(json.loads(kael("logits", "--model", gpt2_f16_dir, "--ids", "1", "--top", "60000",
                               "--json").stdout)["top"]) == 50257


def test_context_limit_is_an_error_with_counts(kael, gpt2_f16_dir):
    ids = ",".join(["464"] * 257)
    result = kael("logits", "--model", gpt2_f16_dir, "--ids", ids, check=False)
    assert result.returncode != 0
    message = result.stderr.decode()
    assert message.startswith("error: ") and "257" in message and "256" in message, message


@pytest.mark.parametrize("args, fragment", [
    (["--ids", "1,x"], "'x'"),
    (["--ids", "1,,2"], "empty item"),
    (["--ids", "50257"], "50257"),
    (["--ids", ""], "empty"),
    ([""], "empty"),
    (["hi", "--ids", "1"], "not both"),
    ([], "PROMPT or --ids"),
    (["--top", "-1", "--ids", "1"], "--top"),
    (["--ids", "1", "--bogus"], "bogus"),
])
def test_command_line_errors(kael, gpt2_f16_dir, args, fragment):
    result = kael("logits", "--model", gpt2_f16_dir, *args, check=False)
    assert result.returncode != 0
    assert fragment in result.stderr.decode(), result.stderr.decode()


def test_missing_model_directory(kael, tmp_path):
    result = kael("logits", "--model", tmp_path / "nowhere", "--ids", "1", check=False)
    assert result.returncode != 0 and "nowhere" in result.stderr.decode()


def test_help_documents_full_vocabulary(kael):
    text = kael("logits", "--help").stdout.decode()
    assert "--top" in text and "whole vocabulary" in text and "--json" in text


def _byte_decoder():
    """GPT-2's printable symbol -> byte map (docs/behaviour.md, "Tokenizer")."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512", "amx"])
def test_every_kernel_set_matches_transformers(gpt2_small_dir, hf_small, isa):
    # The same parity on each kernel set (KAEL_ISA), logits and greedy ids; a set this CPU or
    # build lacks is skipped by name, with kael's own reason.
    env = dict(os.environ, KAEL_ISA=isa)
    probe = subprocess.run([str(kael_binary()), "logits", "--model", str(gpt2_small_dir), "--ids", "1", "--top", "1"],
                           capture_output=True, text=True, env=env)
    if probe.returncode != 0 and f"KAEL_ISA={isa}, but" in probe.stderr:
        pytest.skip(f"{isa} not run: {probe.stderr.strip()}")
    assert probe.returncode == 0, probe.stderr

    def run(*args):
        result = subprocess.run([str(kael_binary()), *map(str, args)], capture_output=True, env=env, timeout=600)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result

    for length in (7, 130):
        check_parity(run, gpt2_small_dir, hf_small, gpt2_reference.prompt_ids(length), f"gpt2-small F32 on {isa}")
    prompt = gpt2_reference.prompt_ids(5)
    ours = json.loads(run("generate", "--model", gpt2_small_dir, "--greedy", "--ignore-eos", "--max-tokens", 8,
                          "--ids", ",".join(map(str, prompt)), "--json").stdout)
    assert ours["ids"] == gpt2_reference.hf_greedy(hf_small, prompt, 8), isa
