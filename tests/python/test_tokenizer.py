"""`kael tokenize` and `kael detokenize` (docs/behaviour.md, "Tokenizer" and "Command line"):
known ids, the output forms, exact bytes back for any input, and errors that name the problem."""
import json
import shutil

import pytest

from conftest import GPT2_DIR
from test_tokenizer_support import tokenize_batch

KNOWN = {
    "Hello, world!": [15496, 11, 995, 0],
    "Hello, my name is": [15496, 11, 616, 1438, 318],
    "tokenization": [30001, 1634],
    " world": [995],
    "<|endoftext|>": [27, 91, 437, 1659, 5239, 91, 29],
}


def ids_of(kael, *args, **kwargs):
    return [int(x) for x in kael("tokenize", "--model", GPT2_DIR, *args, **kwargs).stdout.split()]


@pytest.mark.parametrize("text", list(KNOWN))
def test_known_ids(kael, text, tiktoken_gpt2):
    assert ids_of(kael, text) == KNOWN[text] == tiktoken_gpt2.encode_ordinary(text)


def test_output_forms_and_sources(kael, tmp_path):
    assert kael("tokenize", "--model", GPT2_DIR, "Hello, world!").stdout == b"15496 11 995 0\n"
    assert json.loads(kael("tokenize", "--model", GPT2_DIR, "--json", "Hello, world!").stdout) == [15496, 11, 995, 0]
    path = tmp_path / "in.txt"
    path.write_bytes(b"Hello, world!")
    assert ids_of(kael, "--file", path) == KNOWN["Hello, world!"]
    assert ids_of(kael, "--file", "-", input=b"Hello, world!") == KNOWN["Hello, world!"]
    assert ids_of(kael, input=b"Hello, world!") == KNOWN["Hello, world!"]
    assert kael("tokenize", "--model", GPT2_DIR, "").stdout == b"\n"


def test_end_of_text_is_special_only_when_allowed(kael):
    assert ids_of(kael, "a<|endoftext|>b") == [64, 27, 91, 437, 1659, 5239, 91, 29, 65]
    assert ids_of(kael, "--allow-special", "a<|endoftext|>b") == [64, 50256, 65]
    assert tokenize_batch(kael, ["<|endoftext|>"], "--allow-special") == [[50256]]


def test_jsonl_answers_every_line_in_order(kael, tiktoken_gpt2):
    texts = [f"line {i}: {'héllo ' * (i % 5)}{i * 7919}" for i in range(3000)] + ["", "\n", " ", "日本"]
    assert tokenize_batch(kael, texts) == [tiktoken_gpt2.encode_ordinary(t) for t in texts]


def test_detokenize_forms(kael):
    run = lambda *args, **kw: kael("detokenize", "--model", GPT2_DIR, *args, **kw).stdout
    assert run("15496,11,995,0") == b"Hello, world!"
    assert run("15496", "11", "995,0") == b"Hello, world!"
    assert run(input=b"15496 11 995 0\n") == b"Hello, world!"
    assert run("50256") == b"<|endoftext|>"
    out = run("--jsonl", input=b"[15496, 11]\n[]\n[995]\n")
    assert [json.loads(line) for line in out.splitlines()] == ["Hello,", "", " world"]


@pytest.mark.parametrize("data", [bytes(range(256)), b"\xff\xfe\x80 abc \xe6\x97", "語🙂é".encode() + b"\xf0\x9f",
                                  "\u3000\u00a0\u2028\ufeff\r\n\t".encode()])
def test_any_bytes_come_back_exactly(kael, tmp_path, data):
    path = tmp_path / "in.bin"
    path.write_bytes(data)
    ids = kael("tokenize", "--model", GPT2_DIR, "--file", path).stdout
    assert kael("detokenize", "--model", GPT2_DIR, input=ids).stdout == data


def test_pathological_inputs_match_tiktoken(kael, tiktoken_gpt2):
    texts = ["x" * 1_000_000, " " * 100_000, "\n" * 100_000 + "x", "ab" * 200_000, "語" * 100_000,
             "a" + " " * 50_000 + "b", "".join(chr(0x61 + i % 26) for i in range(300_000))]
    assert tokenize_batch(kael, texts) == [tiktoken_gpt2.encode_ordinary(t) for t in texts]


def expect_error(kael, args, needle, input=None):
    result = kael(*args, input=input, check=False)
    assert result.returncode != 0
    assert needle in result.stderr.decode(errors="replace"), result.stderr


def test_errors_name_the_problem(kael, tmp_path):
    expect_error(kael, ["detokenize", "--model", GPT2_DIR, "99999"], "token id 99999 is not in the vocabulary")
    expect_error(kael, ["detokenize", "--model", GPT2_DIR, "1,x"], "'x' is not a token id")
    expect_error(kael, ["tokenize", "--model", tmp_path / "nope", "hi"], "not found")
    expect_error(kael, ["tokenize", "--model", GPT2_DIR, "--bogus", "hi"], "--bogus")
    expect_error(kael, ["tokenize", "--model"], "--model")
    expect_error(kael, ["tokenize", "--model", GPT2_DIR, "--file", tmp_path / "nope.txt"], "nope.txt")
    expect_error(kael, ["tokenize", "--model", GPT2_DIR, "--jsonl", "hi"], "at most one")
    expect_error(kael, ["tokenize", "--model", GPT2_DIR, "--jsonl"], "stdin line 2", input=b'"ok"\n42\n')
    expect_error(kael, ["tokenize", "--model", GPT2_DIR, "--jsonl"], "stdin line 1", input=b'"unterminated\n')
    expect_error(kael, ["detokenize", "--model", GPT2_DIR, "--jsonl"], "stdin line 1", input=b'{"a": 1}\n')


def copy_model(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(GPT2_DIR / name, model / name)
    return model


def test_corrupt_and_missing_files(kael, tmp_path):
    model = copy_model(tmp_path)
    (model / "merges.txt").write_bytes((GPT2_DIR / "merges.txt").read_bytes() + b"a b c\n")
    expect_error(kael, ["tokenize", "--model", model, "hi"], "line 50002: expected two symbols")
    (model / "merges.txt").write_bytes(b"#version: 0.2\r\n\xc4\xa0 t\r\n")  # CRLF is fine
    assert kael("tokenize", "--model", model, "hi").returncode == 0
    (model / "vocab.json").write_bytes(b'{"a": -1}')
    expect_error(kael, ["tokenize", "--model", model, "hi"], "non-negative")
    (model / "vocab.json").write_bytes((GPT2_DIR / "vocab.json").read_bytes()[:1000])
    expect_error(kael, ["tokenize", "--model", model, "hi"], "invalid JSON")
    (model / "vocab.json").unlink()
    expect_error(kael, ["tokenize", "--model", model, "hi"], "vocab file not found")
