"""kael.Model.generate's n, num_beams, logit_bias and no_repeat_ngram_size: the same choices
as `kael generate`, and clear errors for values out of range."""
import json

import pytest

import kael as kp

EOS = 50256
PROMPT = [15496, 11, 616, 1438, 318]


@pytest.fixture(scope="module")
def model(gpt2_f16_dir):
    return kp.Model.from_pretrained(gpt2_f16_dir, threads=2)


def cli_choices(kael, model_dir, *args):
    out = kael("generate", "--model", model_dir, "--json", "--ids", ",".join(map(str, PROMPT)), *args)
    return [c["text"] for c in json.loads(out.stdout)["choices"]]


def test_n_returns_a_list_of_seeded_samples(model):
    texts = model.generate(PROMPT, max_tokens=8, seed=4, n=3, ignore_eos=True)
    assert isinstance(texts, list) and len(texts) == 3
    assert texts == [model.generate(PROMPT, max_tokens=8, seed=4 + i, ignore_eos=True) for i in range(3)]
    assert isinstance(model.generate(PROMPT, max_tokens=2, n=1), str)


def test_beams_equal_the_cli(model, kael, gpt2_f16_dir):
    ours = model.generate(PROMPT, max_tokens=8, num_beams=3, length_penalty=0.6, early_stopping="never",
                          num_return_sequences=3, logit_bias={EOS: 6.0})
    assert ours == cli_choices(kael, gpt2_f16_dir, "--beams", 3, "--length-penalty", 0.6, "--early-stopping", "never",
                               "--num-return", 3, "--max-tokens", 8, "--logit-bias", f"{EOS}=6")
    best = model.generate(PROMPT, max_tokens=8, num_beams=3, length_penalty=0.6, early_stopping="never",
                          logit_bias={EOS: 6.0})
    assert best == ours[0]


def test_logit_bias_and_ngrams(model):
    assert model.generate(PROMPT, max_tokens=4, logit_bias={1000: 100}, ignore_eos=True) == \
        model.tokenizer.decode([1000] * 4).decode("utf-8")
    text = model.generate(PROMPT, max_tokens=16, temperature=0, no_repeat_ngram_size=1, ignore_eos=True)
    ids = model.tokenizer.encode(text)
    assert len(set(PROMPT + ids)) >= len(PROMPT) + 10  # no token repeats (re-encoding may merge a few)


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_beams=0), "num_beams"),
    (dict(num_beams=2, early_stopping="sometimes"), "early_stopping"),
    (dict(num_beams=2, num_return_sequences=3), "num_return_sequences"),
    (dict(num_beams=2, n=2), "num_return_sequences"),
    (dict(n=0), "n must be"),
    (dict(n=17), "n must be"),
    (dict(logit_bias={EOS: 101.0}), "[-100, 100]"),
    (dict(logit_bias={50257: 1.0}), "vocabulary"),
    (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size"),
])
def test_invalid_values(model, kwargs, message):
    with pytest.raises(kp.Error, match=None) as info:
        model.generate(PROMPT, max_tokens=4, **kwargs)
    assert message in str(info.value)
