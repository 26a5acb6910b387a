"""`kael generate` against Hugging Face transformers on the seeded checkpoints: greedy ids
token for token (a difference only at a shown near-tie), seeded sampling, stop strings,
<|endoftext|>, the context limit and truncation, and the command line's errors."""
import json
import pathlib
import shutil

import numpy as np
import pytest

import gpt2_reference

EOS = 50256
GREEDY_TOKENS = 40
NEAR_TIE = 1e-4  # a top-2 logit gap below this may flip argmax between implementations
PROMPTS = [
    [15496, 11, 616, 1438, 318],  # "Hello, my name is"
    [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13],  # "The quick brown fox ..."
    [50256],
    [464],
]


def ids_arg(ids):
    return ",".join(map(str, ids))


def kael_json(kael, model_dir, *args):
    out = kael("generate", "--model", model_dir, "--json", *args)
    return json.loads(out.stdout)


def greedy_agreement(model, prompt, ours, theirs):
    """Number of leading ids that agree; at the first difference, asserts a near-tie in HF's
    logits between the two chosen tokens (and that they are HF's top two)."""
    n = 0
    while n < min(len(ours), len(theirs)) and ours[n] == theirs[n]:
        n += 1
    if n < min(len(ours), len(theirs)):
        logits = gpt2_reference.hf_last_logits(model, prompt + theirs[:n]).astype(np.float64)
        top2 = np.argsort(-logits, kind="stable")[:2]
        gap = abs(logits[ours[n]] - logits[theirs[n]])
        assert set(top2) == {ours[n], theirs[n]} and gap < NEAR_TIE, (
            f"step {n}: kael chose {ours[n]}, transformers {theirs[n]}; HF logits "
            f"{logits[ours[n]]:.6f} vs {logits[theirs[n]]:.6f} (gap {gap:.2e}) is not a near-tie")
    return n


@pytest.mark.parametrize("fixture", ["gpt2_small_dir", "gpt2_f16_dir"])
def test_greedy_matches_transformers(request, kael, fixture):
    model_dir = request.getfixturevalue(fixture)
    model = gpt2_reference.load_hf(model_dir)
    agreed = []
    for prompt in PROMPTS:
        ours = kael_json(kael, model_dir, "--greedy", "--ignore-eos", "--max-tokens", GREEDY_TOKENS,
                         "--ids", ids_arg(prompt))
        assert ours["prompt_ids"] == prompt
        theirs = list(gpt2_reference.hf_greedy(model, prompt, GREEDY_TOKENS))
        assert len(theirs) == GREEDY_TOKENS and len(ours["ids"]) == GREEDY_TOKENS
        agreed.append(greedy_agreement(model, prompt, ours["ids"], theirs))
    print(f"{fixture}: greedy ids equal to transformers for {agreed} of {GREEDY_TOKENS} tokens")
    # Near-ties are rare: most prompts must agree over the whole run.
    assert sum(a == GREEDY_TOKENS for a in agreed) >= len(PROMPTS) - 1, agreed


def test_temperature_zero_is_greedy(kael, gpt2_small_dir):
    base = ["--ignore-eos", "--max-tokens", 8, "--ids", ids_arg(PROMPTS[0])]
    greedy = kael_json(kael, gpt2_small_dir, "--greedy", *base)
    zero = kael_json(kael, gpt2_small_dir, "--temperature", 0, "--seed", 5, *base)
    assert zero["ids"] == greedy["ids"]


def test_seed_makes_sampling_reproducible(kael, gpt2_f16_dir):
    def sample(seed):
        return kael_json(kael, gpt2_f16_dir, "--temperature", 1, "--top-k", 0, "--seed", seed, "--ignore-eos",
                         "--max-tokens", 24, "--ids", ids_arg(PROMPTS[0]))["ids"]

    first = sample(1)
    assert sample(1) == first
    assert sample(2) != first
    assert len(first) == 24


def test_sampling_filters_run(kael, gpt2_f16_dir):
    """Every sampling option is accepted and top-k 1 equals greedy whatever the seed."""
    base = ["--ignore-eos", "--max-tokens", 12, "--ids", ids_arg(PROMPTS[1])]
    greedy = kael_json(kael, gpt2_f16_dir, "--greedy", *base)["ids"]
    for seed in (1, 2):
        assert kael_json(kael, gpt2_f16_dir, "--top-k", 1, "--seed", seed, *base)["ids"] == greedy
        assert kael_json(kael, gpt2_f16_dir, "--top-p", 1e-6, "--seed", seed, *base)["ids"] == greedy
        assert kael_json(kael, gpt2_f16_dir, "--min-p", 1, "--seed", seed, *base)["ids"] == greedy
    out = kael_json(kael, gpt2_f16_dir, "--temperature", 0.7, "--top-k", 50, "--top-p", 0.9, "--min-p", 0.05,
                    "--repetition-penalty", 1.3, "--presence-penalty", 0.5, "--frequency-penalty", 0.5, *base)
    assert len(out["ids"]) == 12


def test_repetition_penalty_matches_transformers(kael, gpt2_f16_dir):
    import torch

    model = gpt2_reference.load_hf(gpt2_f16_dir)
    prompt = PROMPTS[1]
    ours = kael_json(kael, gpt2_f16_dir, "--greedy", "--repetition-penalty", 1.5, "--ignore-eos", "--max-tokens", 16,
                     "--ids", ids_arg(prompt))["ids"]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=16, min_new_tokens=16,
                             repetition_penalty=1.5, pad_token_id=EOS)
    assert ours == out[0, len(prompt):].tolist()


def test_streamed_text_equals_json_text(kael, gpt2_small_dir, tiktoken_gpt2):
    args = ["--model", gpt2_small_dir, "--greedy", "--ignore-eos", "--max-tokens", 20, "--ids", ids_arg(PROMPTS[0])]
    as_json = json.loads(kael("generate", "--json", *args).stdout)
    streamed = kael("generate", *args)
    assert streamed.stdout == tiktoken_gpt2.decode_bytes(as_json["ids"])
    assert as_json["text"] == streamed.stdout.decode("utf-8", errors="replace")
    assert b"prompt: 5 tokens" in streamed.stderr and b"tokens/s" in streamed.stderr


def test_text_prompt_is_tokenized(kael, gpt2_small_dir):
    out = kael_json(kael, gpt2_small_dir, "--greedy", "--max-tokens", 2, "Hello, my name is")
    assert out["prompt_ids"] == PROMPTS[0]


def boundary_stop(tiktoken_gpt2, ids):
    """A stop string made of the end of one token's text and the start of the next (both
    plain printable ASCII), or None."""
    pieces = [tiktoken_gpt2.decode_single_token_bytes(i) for i in ids]
    for k in range(2, len(pieces) - 1):
        a, b = pieces[k], pieces[k + 1]
        if len(a) >= 2 and len(b) >= 2 and all(0x20 <= c < 0x7F for c in a[-2:] + b[:2]):
            return (a[-2:] + b[:2]).decode()
    return None


def test_stop_string_spanning_tokens(kael, gpt2_small_dir, tiktoken_gpt2):
    base = ["--greedy", "--ignore-eos", "--ids", ids_arg(PROMPTS[1])]
    full = kael_json(kael, gpt2_small_dir, "--max-tokens", 40, *base)
    stop = boundary_stop(tiktoken_gpt2, full["ids"])
    if stop is None:
        pytest.skip("no two printable tokens in a row in this model's output")
    text = tiktoken_gpt2.decode_bytes(full["ids"]).decode("utf-8", errors="replace")
    expected_text = text[: text.index(stop)]
    # The ids up to the token whose text completes the stop string.
    n = next(m for m in range(1, 41) if stop in tiktoken_gpt2.decode_bytes(full["ids"][:m]).decode("utf-8", "replace"))

    out = kael_json(kael, gpt2_small_dir, "--max-tokens", 40, "--stop", stop, "--stop", "\x01never", *base)
    assert out["text"] == expected_text
    assert out["ids"] == full["ids"][:n]
    streamed = kael("generate", "--model", gpt2_small_dir, "--max-tokens", 40, "--stop", stop, *base)
    assert streamed.stdout.decode("utf-8", "replace") == expected_text  # nothing of the stop string leaks
    assert b"finish: stop" in streamed.stderr


@pytest.fixture(scope="module")
def eos_model_dir(gpt2_f16_dir, tmp_path_factory):
    """The F16 checkpoint edited so <|endoftext|> is the argmax at every position: ln_f
    outputs its bias alone, and wte[EOS] points along it."""
    from safetensors.numpy import load_file, save_file

    out = tmp_path_factory.mktemp("eos_model")
    for item in pathlib.Path(gpt2_f16_dir).iterdir():
        if item.is_file():
            shutil.copy(item, out / item.name)
    tensors = load_file(str(out / "model.safetensors"))
    name = {key.rsplit("transformer.", 1)[-1]: key for key in tensors}
    bias = np.linspace(-1.0, 1.0, tensors[name["ln_f.bias"]].shape[0])
    tensors[name["ln_f.weight"]][:] = 0
    tensors[name["ln_f.bias"]][:] = bias.astype(tensors[name["ln_f.bias"]].dtype)
    tensors[name["wte.weight"]][EOS] = (bias * 4.0).astype(tensors[name["wte.weight"]].dtype)
    if "lm_head.weight" in name:
        tensors[name["lm_head.weight"]][EOS] = tensors[name["wte.weight"]][EOS]
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_end_of_text_ends_generation(kael, eos_model_dir):
    out = kael_json(kael, eos_model_dir, "--greedy", "--max-tokens", 10, "--ids", ids_arg(PROMPTS[0]))
    assert out == {"prompt_ids": PROMPTS[0], "choices": [{"ids": [EOS], "text": "", "finish_reason": "stop"}],
                   "ids": [EOS], "text": ""}
    sampled = kael_json(kael, eos_model_dir, "--temperature", 1, "--max-tokens", 10, "--ids", ids_arg(PROMPTS[0]))
    assert sampled["ids"] == [EOS]
    ignored = kael_json(kael, eos_model_dir, "--greedy", "--ignore-eos", "--max-tokens", 3, "--ids", ids_arg(PROMPTS[0]))
    assert ignored["ids"] == [EOS] * 3


def n_positions(model_dir):
    config = pathlib.Path(model_dir) / "config.json"
    return json.loads(config.read_text()).get("n_positions", 1024) if config.exists() else 1024


def test_context_limit_is_an_error_with_the_counts(kael, gpt2_f16_dir):
    limit = n_positions(gpt2_f16_dir)
    prompt = [464] * (limit - 5)
    result = kael("generate", "--model", gpt2_f16_dir, "--greedy", "--max-tokens", 6, "--ids", ids_arg(prompt),
                  check=False)
    assert result.returncode != 0
    message = result.stderr.decode()
    assert message.startswith("error: ")
    assert f"({limit - 5} tokens)" in message and "(6)" in message and f"{limit} positions" in message
    # Exactly at the limit is fine.
    ok = kael_json(kael, gpt2_f16_dir, "--greedy", "--ignore-eos", "--max-tokens", 5, "--ids", ids_arg(prompt))
    assert len(ok["ids"]) == 5


def test_truncate_cuts_the_prompt_from_the_left(kael, gpt2_f16_dir):
    limit = n_positions(gpt2_f16_dir)
    prompt = [(7 * i) % 50000 for i in range(limit + 10)]
    out = kael_json(kael, gpt2_f16_dir, "--greedy", "--ignore-eos", "--truncate", "--max-tokens", 4,
                    "--ids", ids_arg(prompt))
    assert out["prompt_ids"] == prompt[-(limit - 4):]
    assert len(out["ids"]) == 4
    # Same ids as giving the truncated prompt directly.
    direct = kael_json(kael, gpt2_f16_dir, "--greedy", "--ignore-eos", "--max-tokens", 4,
                       "--ids", ids_arg(prompt[-(limit - 4):]))
    assert direct["ids"] == out["ids"]


@pytest.mark.parametrize("args, message", [
    (["--ids", ""], "prompt is empty"),
    ([""], "prompt is empty"),
    ([], "give a PROMPT or --ids"),
    (["hi", "--ids", "1"], "not both"),
    (["--ids", "1,x"], "'x' is not a token id"),
    (["--ids", "1,-2"], "'-2' is not a token id"),
    (["--ids", "99999"], "99999"),
    (["--top-p", "0", "hi"], "top_p"),
    (["--temperature", "-1", "hi"], "temperature"),
    (["--stop", "", "hi"], "stop string"),
])
def test_bad_input_is_an_error(kael, gpt2_f16_dir, args, message):
    result = kael("generate", "--model", gpt2_f16_dir, *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr.decode(), result.stderr.decode()
    assert result.stdout == b""


@pytest.mark.parametrize("args", [["--bogus", "hi"], ["hi", "--max-tokens"], ["--max-tokens", "ten", "hi"]])
def test_unknown_option_or_missing_value_is_an_error(kael, gpt2_f16_dir, args):
    result = kael("generate", "--model", gpt2_f16_dir, *args, check=False)
    assert result.returncode != 0
    assert result.stdout == b""


def test_help(kael):
    out = kael("generate", "--help").stdout.decode()
    for option in ("--model", "--ids", "--max-tokens", "--temperature", "--top-k", "--top-p", "--min-p", "--seed",
                   "--greedy", "--ignore-eos", "--json", "--stop", "--truncate", "--repetition-penalty",
                   "--presence-penalty", "--frequency-penalty"):
        assert option in out


def test_agreement_check_rejects_a_real_difference(gpt2_f16_dir):
    """The parity check above can fail: a changed token that is no near-tie is reported."""
    model = gpt2_reference.load_hf(gpt2_f16_dir)
    prompt = PROMPTS[0]
    theirs = gpt2_reference.hf_greedy(model, prompt, 4)
    logits = gpt2_reference.hf_last_logits(model, prompt + theirs[:2])
    worst = int(np.argmin(logits))  # far from the top
    assert greedy_agreement(model, prompt, theirs, theirs) == 4
    with pytest.raises(AssertionError, match="not a near-tie"):
        greedy_agreement(model, prompt, theirs[:2] + [worst] + theirs[3:], theirs)
