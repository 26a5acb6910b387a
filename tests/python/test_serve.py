"""`kael serve`'s API on a small seeded checkpoint: completions equal `kael generate`
(non-streamed, streamed, and through the official openai client), stop strings, echo,
logprobs, seeds, the auxiliary routes, and every error answered as OpenAI-style JSON with the
right status while the server keeps serving."""
import json

import pytest

from test_serve_support import joined_text

PROMPTS = ["Hello, my name is", "The quick brown fox", "Ünïcödé → 日本語のテキスト", "def main():\n    "]
TOKENS = 24
SERVER_ARGS = ("--threads", 2, "--max-batch", 8)  # for conftest's `server`


def generate_greedy(kael, serve_model_dir, prompt, n=TOKENS, *extra):
    out = kael("generate", "--model", serve_model_dir, "--greedy", "--max-tokens", n, "--json", *extra, prompt)
    return json.loads(out.stdout)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_generate(server, kael, serve_model_dir, prompt):
    expected = generate_greedy(kael, serve_model_dir, prompt)
    body = server.complete(prompt=prompt, max_tokens=TOKENS, temperature=0)
    choice = body["choices"][0]
    assert choice["text"] == expected["text"]
    assert body["usage"]["completion_tokens"] == len(expected["ids"])
    assert body["usage"]["prompt_tokens"] == len(expected["prompt_ids"])
    assert body["usage"]["total_tokens"] == len(expected["ids"]) + len(expected["prompt_ids"])
    assert choice["finish_reason"] == ("length" if len(expected["ids"]) == TOKENS and expected["ids"][-1] != 50256
                                       else "stop")
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")

    # Streamed: the chunks join to the same text; each is valid UTF-8 on its own (a split
    # character would have become U+FFFD in two chunks and the join would differ).
    payloads, raw = server.stream(prompt=prompt, max_tokens=TOKENS, temperature=0)
    assert joined_text(payloads) == expected["text"]
    assert all(p["choices"][0]["finish_reason"] is None for p in payloads[:-1])
    assert payloads[-1]["choices"][0]["finish_reason"] == choice["finish_reason"]
    assert payloads[-1]["usage"] == body["usage"]
    assert len({p["id"] for p in payloads}) == 1


def test_token_id_prompt_equals_text_prompt(server):
    status, ids = server.post_json("/tokenize", {"text": PROMPTS[0]})
    assert status == 200 and ids["ids"] == [15496, 11, 616, 1438, 318]
    by_text = server.complete(prompt=PROMPTS[0], max_tokens=8, temperature=0)
    by_ids = server.complete(prompt=ids["ids"], max_tokens=8, temperature=0)
    assert by_ids["choices"][0]["text"] == by_text["choices"][0]["text"]
    assert server.complete(prompt=[ids["ids"]], max_tokens=8, temperature=0)["choices"] == by_ids["choices"]


def test_openai_client(server, serve_model_dir, kael):
    import openai

    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key="unused", max_retries=0, timeout=60)
    expected = generate_greedy(kael, serve_model_dir, PROMPTS[1])
    models = client.models.list()
    model = models.data[0].id
    whole = client.completions.create(model=model, prompt=PROMPTS[1], max_tokens=TOKENS, temperature=0)
    assert whole.choices[0].text == expected["text"]
    assert whole.usage.completion_tokens == len(expected["ids"])
    chunks = list(client.completions.create(model=model, prompt=PROMPTS[1], max_tokens=TOKENS, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks) == expected["text"]
    assert chunks[-1].choices[0].finish_reason in ("stop", "length") and chunks[-1].usage.total_tokens > 0
    with pytest.raises(openai.BadRequestError) as error:
        client.completions.create(model=model, prompt=PROMPTS[1], max_tokens=10_000)
    assert "maximum context length" in str(error.value)


def test_stop_string_never_leaks(server):
    full = server.complete(prompt=PROMPTS[0], max_tokens=40, temperature=0, ignore_eos=True)["choices"][0]["text"]
    # A stop string taken from the middle of the greedy text, several characters long so it
    # usually spans tokens: the answer is exactly the text before it, streamed or not.
    middle = len(full) // 2
    stop = full[middle:middle + 5]
    assert len(stop) == 5, full
    before = full[:full.index(stop)]
    for other in ([stop], stop, ["\u0000never", stop]):
        body = server.complete(prompt=PROMPTS[0], max_tokens=40, temperature=0, ignore_eos=True, stop=other)
        assert body["choices"][0]["text"] == before and body["choices"][0]["finish_reason"] == "stop"
        payloads, _ = server.stream(prompt=PROMPTS[0], max_tokens=40, temperature=0, ignore_eos=True, stop=other)
        assert joined_text(payloads) == before
        assert payloads[-1]["choices"][0]["finish_reason"] == "stop"


def test_echo_and_logprobs(server, tiktoken_gpt2):
    prompt = PROMPTS[2]
    body = server.complete(prompt=prompt, max_tokens=12, temperature=0, echo=True, logprobs=3)
    choice = body["choices"][0]
    plain = server.complete(prompt=prompt, max_tokens=12, temperature=0)["choices"][0]["text"]
    assert choice["text"] == prompt + plain
    lp = choice["logprobs"]
    n_prompt = body["usage"]["prompt_tokens"]
    n = n_prompt + body["usage"]["completion_tokens"]
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset", "bytes"):
        assert len(lp[key]) == n, key
    # The first prompt token has no log-probability (nothing precedes it), the others do.
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(x is not None and x <= 0 for x in lp["token_logprobs"][1:n_prompt])
    assert bytes(b for token in lp["bytes"] for b in token).decode("utf-8", "replace").startswith(prompt)
    assert lp["bytes"][:n_prompt] == [list(tiktoken_gpt2.decode_single_token_bytes(t))
                                      for t in tiktoken_gpt2.encode_ordinary(prompt)]
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    for logprob, top in zip(lp["token_logprobs"][n_prompt:], lp["top_logprobs"][n_prompt:]):
        assert len(top) == 3 and logprob <= 0
        values = list(top.values())
        assert values == sorted(values, reverse=True)  # most likely first
        assert logprob == pytest.approx(values[0])  # greedy chose the most likely token
    for token, raw in zip(lp["tokens"], lp["bytes"]):
        try:
            assert token == bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            assert token == "bytes:" + "".join(f"\\x{b:02x}" for b in raw)

    # Streamed, the per-chunk logprobs add up to the same lists.
    payloads, _ = server.stream(prompt=prompt, max_tokens=12, temperature=0, echo=True, logprobs=3)
    assert joined_text(payloads) == choice["text"]
    streamed = {key: [v for p in payloads for v in p["choices"][0]["logprobs"][key]] for key in lp}
    assert streamed == lp


def test_seeded_sampling_is_reproducible(server):
    fields = dict(prompt=PROMPTS[0], max_tokens=20, temperature=1.0, top_k=50, top_p=0.95, seed=1234,
                  ignore_eos=True)
    first = server.complete(**fields)["choices"][0]["text"]
    assert server.complete(**fields)["choices"][0]["text"] == first
    assert joined_text(server.stream(**fields)[0]) == first
    others = {server.complete(**{**fields, "seed": seed})["choices"][0]["text"] for seed in (1, 2, 3)}
    assert len(others | {first}) > 1, "different seeds should give different samples"


def test_every_sampling_field_is_accepted(server):
    body = server.complete(prompt=PROMPTS[0], max_tokens=5, temperature=0.7, top_p=0.9, top_k=20, min_p=0.05,
                           presence_penalty=0.5, frequency_penalty=0.5, repetition_penalty=1.2, seed=3, n=1,
                           best_of=1, echo=False, logprobs=0, stop=None, user="someone", suffix=None,
                           logit_bias={}, model="anything", unknown_field={"nested": [1, 2]})
    assert body["usage"]["completion_tokens"] <= 5
    assert body["choices"][0]["logprobs"]["top_logprobs"] == [{}] * body["usage"]["completion_tokens"]


def test_max_tokens_zero(server):
    body = server.complete(prompt=PROMPTS[0], max_tokens=0)
    assert body["choices"][0]["text"] == "" and body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0
    payloads, _ = server.stream(prompt=PROMPTS[0], max_tokens=0, echo=True)
    assert joined_text(payloads) == PROMPTS[0]


def test_auxiliary_routes(server):
    models = server.get_json("/v1/models")
    assert models["object"] == "list" and models["data"][0]["object"] == "model"
    assert models["data"][0]["context_length"] == 512
    health = server.get_json("/health")
    assert health["status"] == "ok" and health["max_batch"] == 8
    assert health["isa"] in ("scalar", "avx2", "avx512", "amx") and health["int8_dot"]
    status, tokens = server.post_json("/tokenize", {"text": "Hello, world!"})
    assert status == 200 and tokens["ids"] == [15496, 11, 995, 0] and tokens["count"] == 4
    status, special = server.post_json("/tokenize", {"text": "<|endoftext|>", "allow_special": True})
    assert special["ids"] == [50256]
    status, text = server.post_json("/detokenize", {"ids": [15496, 11, 995, 0]})
    assert status == 200 and text["text"] == "Hello, world!"
    status, partial = server.post_json("/detokenize", {"ids": [447]})  # the first 2 bytes of "’"
    assert status == 200 and partial["bytes"] == [0xE2, 0x80] and partial["text"] == "\ufffd"
    status, page = server.request("GET", "/")
    assert status == 200 and b"/v1/completions" in page and b"<script" in page

    server.complete(prompt="metrics", max_tokens=3, ignore_eos=True)
    status, metrics = server.request("GET", "/metrics")
    text = metrics.decode()
    assert status == 200
    for name in ("kael_http_requests_total", "kael_generated_tokens_total", "kael_queue_depth",
                 "kael_active_sequences", "kael_batch_size_bucket", "kael_request_duration_seconds_bucket",
                 "kael_time_to_first_token_seconds_bucket", "kael_decode_step_seconds_count"):
        assert f"\n{name}" in text, name
    assert server.metric("kael_generated_tokens_total") >= 3
    assert server.metric("kael_http_requests_total", 'route="/v1/completions",status="200"') >= 1


CONTEXT = 512
ERROR_CASES = [
    # (name, method, path, body bytes or object, status, param or None, text in the message)
    ("malformed json", "POST", "/v1/completions", b'{"prompt": "hi",', 400, None, "not valid JSON"),
    ("not an object", "POST", "/v1/completions", b"[1, 2, 3]", 400, None, "JSON object"),
    ("empty body", "POST", "/v1/completions", b"", 400, None, "not valid JSON"),
    ("missing prompt", "POST", "/v1/completions", {"max_tokens": 3}, 400, "prompt", "required"),
    ("prompt wrong type", "POST", "/v1/completions", {"prompt": 42}, 400, "prompt", "string"),
    ("empty prompt", "POST", "/v1/completions", {"prompt": ""}, 400, "prompt", "empty"),
    ("token id too large", "POST", "/v1/completions", {"prompt": [50257]}, 400, "prompt", "vocabulary"),
    ("negative token id", "POST", "/v1/completions", {"prompt": [-1]}, 400, "prompt", "vocabulary"),
    ("float token id", "POST", "/v1/completions", {"prompt": [1.5]}, 400, "prompt", "integers"),
    ("two prompts", "POST", "/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt", "one prompt"),
    ("max_tokens string", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": "5"}, 400, "max_tokens", "integer"),
    ("max_tokens float", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2.5}, 400, "max_tokens", "integer"),
    ("max_tokens negative", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": -1}, 400, "max_tokens", "[0,"),
    ("max_tokens huge", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2**64 - 1}, 400, "max_tokens", "[0,"),
    ("context overflow", "POST", "/v1/completions", {"prompt": [464] * 500, "max_tokens": 13}, 400, "max_tokens",
     f"maximum context length is {CONTEXT} tokens, however you requested 513 tokens (500 in your prompt; 13 for"),
    ("temperature range", "POST", "/v1/completions", {"prompt": "hi", "temperature": 2.5}, 400, "temperature", "[0, 2]"),
    ("temperature type", "POST", "/v1/completions", {"prompt": "hi", "temperature": "hot"}, 400, "temperature", "number"),
    ("top_p zero", "POST", "/v1/completions", {"prompt": "hi", "top_p": 0}, 400, "top_p", "(0, 1]"),
    ("top_k negative", "POST", "/v1/completions", {"prompt": "hi", "top_k": -3}, 400, "top_k", "[0,"),
    ("min_p range", "POST", "/v1/completions", {"prompt": "hi", "min_p": 1.5}, 400, "min_p", "[0, 1]"),
    ("presence range", "POST", "/v1/completions", {"prompt": "hi", "presence_penalty": 3}, 400, "presence_penalty", "[-2, 2]"),
    ("frequency type", "POST", "/v1/completions", {"prompt": "hi", "frequency_penalty": [1]}, 400, "frequency_penalty", "number"),
    ("repetition zero", "POST", "/v1/completions", {"prompt": "hi", "repetition_penalty": 0}, 400, "repetition_penalty", "(0,"),
    ("stop type", "POST", "/v1/completions", {"prompt": "hi", "stop": 7}, 400, "stop", "string"),
    ("stop item type", "POST", "/v1/completions", {"prompt": "hi", "stop": ["a", 1]}, 400, "stop", "strings"),
    ("stop empty", "POST", "/v1/completions", {"prompt": "hi", "stop": [""]}, 400, "stop", "empty"),
    ("too many stops", "POST", "/v1/completions", {"prompt": "hi", "stop": list("abcde")}, 400, "stop", "at most 4"),
    ("seed type", "POST", "/v1/completions", {"prompt": "hi", "seed": "x"}, 400, "seed", "integer"),
    ("n above the cap", "POST", "/v1/completions", {"prompt": "hi", "n": 9}, 400, "n", "at most 8"),
    ("best_of below n", "POST", "/v1/completions", {"prompt": "hi", "n": 3, "best_of": 2}, 400, "best_of", ">= 'n'"),
    ("best_of streamed", "POST", "/v1/completions", {"prompt": "hi", "best_of": 2, "stream": True}, 400, "best_of", "streamed"),
    ("stream type", "POST", "/v1/completions", {"prompt": "hi", "stream": "yes"}, 400, "stream", "boolean"),
    ("echo type", "POST", "/v1/completions", {"prompt": "hi", "echo": 1}, 400, "echo", "boolean"),
    ("logprobs range", "POST", "/v1/completions", {"prompt": "hi", "logprobs": 99}, 400, "logprobs", "[0, 20]"),
    ("logit_bias range", "POST", "/v1/completions", {"prompt": "hi", "logit_bias": {"50256": -101}}, 400, "logit_bias", "[-100, 100]"),
    ("logit_bias key", "POST", "/v1/completions", {"prompt": "hi", "logit_bias": {"x": 1}}, 400, "logit_bias", "token ids"),
    ("logit_bias vocabulary", "POST", "/v1/completions", {"prompt": "hi", "logit_bias": {"50257": 1}}, 400, "logit_bias", "vocabulary"),
    ("tokenize without text", "POST", "/tokenize", {"ids": [1]}, 400, "text", "required"),
    ("tokenize bad json", "POST", "/tokenize", b"{", 400, None, "not valid JSON"),
    ("detokenize bad id", "POST", "/detokenize", {"ids": [1, 99999999]}, 400, "ids", "vocabulary"),
    ("detokenize wrong type", "POST", "/detokenize", {"ids": "1,2"}, 400, "ids", "array"),
    ("unknown route", "GET", "/v2/nothing", None, 404, None, "no route"),
    ("unknown post route", "POST", "/v1/chat/completions", {"messages": []}, 404, None, "no route"),
    ("oversized body", "POST", "/v1/completions", b'{"prompt": "' + b"x" * (2 << 20) + b'"}', 413, None, "too large"),
    ("deeply nested", "POST", "/v1/completions", b'{"prompt": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", 400,
     None, "the request body nests deeper than 64 levels"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_are_json_with_status(server, case):
    name, method, path, body, status, param, text = case
    got_status, raw = server.request(method, path, body)
    assert got_status == status, (name, got_status, raw[:300])
    error = json.loads(raw)["error"]
    assert text in error["message"], error
    assert error["param"] == param and error["code"] == status and error["type"]
    # ... and the server keeps serving.
    assert server.complete(prompt="still alive", max_tokens=2)["usage"]["completion_tokens"] <= 2


def test_streamed_request_errors_before_streaming(server):
    """A bad streamed request gets a JSON error and status, not an event stream."""
    status, body = server.post_json("/v1/completions", {"prompt": "hi", "stream": True, "max_tokens": 99999})
    assert status == 400 and "maximum context length" in body["error"]["message"]


def test_random_bodies_never_crash_the_server(server):
    """Seeded mutations of a valid request: every answer is JSON with a 2xx/4xx status."""
    import random

    rng = random.Random(7)
    valid = json.dumps({"prompt": "Hello", "max_tokens": 3, "temperature": 0.5, "top_k": 5, "stop": ["x"],
                        "logprobs": 2, "echo": True, "seed": 1}).encode()
    values = [b"null", b"-1", b"1e999", b"[]", b"{}", b'"\\ud800"', b"true", b"9223372036854775808", b"0.5",
              b'"' + b"\\u0000" * 3 + b'"', b"[[[[[]]]]]"]
    for i in range(300):
        body = bytearray(valid)
        kind = i % 3
        if kind == 0:  # flip bytes
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        elif kind == 1:  # replace one value
            start = body.index(b":", rng.randrange(len(body) // 2)) + 1
            end = min(i for i in (body.find(b",", start), body.find(b"}", start)) if i != -1)
            body[start:end] = rng.choice(values)
        else:  # truncate
            body = body[:rng.randrange(len(body))]
        status, raw = server.request("POST", "/v1/completions", bytes(body))
        assert status in (200, 400), (bytes(body), status, raw)
        reply = json.loads(raw)
        assert ("error" in reply) == (status != 200)
    assert server.alive()
