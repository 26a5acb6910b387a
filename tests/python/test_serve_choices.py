"""`kael serve`: n and best_of (through the openai client, streamed and not), logit_bias,
and echoed prompts scored (token_logprobs equal log_softmax of transformers' logits within
1e-4, max_tokens 0 included)."""
import numpy as np
import pytest

import gpt2_reference
from test_serve_support import Server, small_checkpoint

EOS = 50256


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return small_checkpoint(tmp_path_factory.mktemp("serve_choices_model"))


@pytest.fixture(scope="module")
def server(model_dir):
    with Server(model_dir, "--threads", 2, "--max-batch", 8) as s:
        yield s
        assert s.alive(), "the server died during the tests"


@pytest.fixture(scope="module")
def client(server):
    import openai

    return openai.OpenAI(base_url=f"{server.base}/v1", api_key="unused", max_retries=0, timeout=120)


def test_n_choices(client):
    out = client.completions.create(model="m", prompt="Hello, my name is", max_tokens=8, n=3, seed=5,
                                    temperature=1.0, logprobs=1)
    assert sorted(c.index for c in out.choices) == [0, 1, 2]
    assert len({c.text for c in out.choices}) > 1  # three samples, different seeds
    assert out.usage.completion_tokens == sum(len(c.logprobs.tokens) for c in out.choices)
    assert out.usage.prompt_tokens == 5


def test_best_of_returns_the_highest_mean_logprob(client):
    fields = dict(model="m", prompt="The quick brown fox", max_tokens=6, temperature=1.0, seed=11, logprobs=0)
    pool = client.completions.create(n=4, **fields)  # the same 4 candidates (seeds 11 .. 14)
    best = client.completions.create(n=2, best_of=4, **fields)
    means = sorted(((np.mean(c.logprobs.token_logprobs), c.text) for c in pool.choices), reverse=True)
    assert [c.text for c in best.choices] == [text for _, text in means[:2]]
    assert [c.index for c in best.choices] == [0, 1]
    assert best.usage.completion_tokens == pool.usage.completion_tokens  # all 4 candidates count


def test_n_streamed(client):
    fields = dict(model="m", prompt="Hello, my name is", max_tokens=8, n=2, seed=3, temperature=1.0)
    whole = client.completions.create(**fields)
    texts = {0: "", 1: ""}
    finished = {}
    usage = None
    for chunk in client.completions.create(stream=True, stream_options={"include_usage": True}, **fields):
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finished[c.index] = c.finish_reason
        if chunk.usage:
            usage = chunk.usage
    assert texts == {c.index: c.text for c in whole.choices}
    assert finished == {c.index: c.finish_reason for c in whole.choices}
    assert usage.completion_tokens == whole.usage.completion_tokens


def test_logit_bias(client):
    forced = client.completions.create(model="m", prompt="Hello", max_tokens=5, temperature=1.0, seed=1,
                                       logit_bias={"1000": 100}, extra_body={"ignore_eos": True})
    assert forced.choices[0].text == "".join([gpt2_reference.gpt2_encoding().decode([1000])] * 5)
    for seed in range(3):
        out = client.completions.create(model="m", prompt="Hello", max_tokens=16, temperature=1.5, seed=seed,
                                        logprobs=0, logit_bias={str(EOS): -100, "1000": 8})
        assert out.choices[0].finish_reason == "length" and "<|endoftext|>" not in out.choices[0].logprobs.tokens


@pytest.mark.parametrize("max_tokens", [0, 3])
def test_echo_scores_the_prompt(server, model_dir, max_tokens):
    import torch

    ids = gpt2_reference.prompt_ids(12, seed=99)
    body = server.complete(prompt=ids, max_tokens=max_tokens, temperature=0, echo=True, logprobs=2)
    lp = body["choices"][0]["logprobs"]
    assert body["usage"]["completion_tokens"] == max_tokens
    assert len(lp["token_logprobs"]) == len(ids) + max_tokens
    assert lp["token_logprobs"][0] is None
    model = gpt2_reference.load_hf(model_dir)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    reference = torch.log_softmax(logits, dim=-1)
    expected = [reference[i - 1, ids[i]].item() for i in range(1, len(ids))]
    np.testing.assert_allclose(lp["token_logprobs"][1:len(ids)], expected, atol=1e-4, rtol=0)
    for i in range(1, len(ids)):
        top = list(lp["top_logprobs"][i].values())
        np.testing.assert_allclose(top, reference[i - 1].topk(2).values.numpy(), atol=1e-4, rtol=0)


def test_beam_search(server, kael, model_dir):
    import json

    body = server.complete(prompt="Hello, my name is", max_tokens=6, use_beam_search=True, best_of=3, n=2,
                           length_penalty=0.6, early_stopping="never", temperature=0)
    out = kael("generate", "--model", model_dir, "--json", "--beams", 3, "--num-return", 2, "--length-penalty", 0.6,
               "--early-stopping", "never", "--max-tokens", 6, "Hello, my name is")
    expected = json.loads(out.stdout)["choices"]
    assert [c["text"] for c in body["choices"]] == [c["text"] for c in expected]
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert [c["score"] for c in body["choices"]] == pytest.approx([c["score"] for c in expected], abs=1e-6)
    assert body["usage"]["completion_tokens"] == sum(len(c["ids"]) for c in expected)


@pytest.mark.parametrize("fields, param", [
    (dict(use_beam_search=True, best_of=1), "best_of"),
    (dict(use_beam_search=True, best_of=2, temperature=0.7), "temperature"),
    (dict(use_beam_search=True, best_of=2, top_p=0.5), "top_p"),
    (dict(use_beam_search=True, best_of=2, stream=True), "stream"),
    (dict(use_beam_search=True, best_of=2, logprobs=1), "logprobs"),
    (dict(use_beam_search=True, best_of=2, early_stopping="soon"), "early_stopping"),
    (dict(length_penalty=0.5), "length_penalty"),
])
def test_beam_search_errors_name_the_parameter(server, fields, param):
    status, body = server.post_json("/v1/completions", {"prompt": "hi", "max_tokens": 2, **fields})
    assert status == 400 and body["error"]["param"] == param, body
