"""Every file of the corpus gives tiktoken's ids, whole and line by line, and decodes
back to itself."""
import json

import pytest

from conftest import CORPUS_DIR, GPT2_DIR
from test_tokenizer_support import tokenize_batch

FILES = sorted(CORPUS_DIR.glob("*.txt"))


def test_corpus_is_there():
    assert len(FILES) >= 7, f"the corpus is missing from {CORPUS_DIR} (set KAEL_CORPUS_DIR)"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file_equals_tiktoken(kael, tiktoken_gpt2, path):
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    answers = tokenize_batch(kael, [text] + lines)
    assert answers[0] == tiktoken_gpt2.encode_ordinary(text)
    assert answers[1:] == tiktoken_gpt2.encode_ordinary_batch(lines, num_threads=1)
    decoded = kael("detokenize", "--model", GPT2_DIR, input=" ".join(map(str, answers[0])).encode()).stdout
    assert decoded == path.read_bytes()
