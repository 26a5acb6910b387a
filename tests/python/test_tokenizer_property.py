"""Property: on random text that mixes scripts, every kind of white space, contractions in
every case, digits of many scripts, combining marks, emoji sequences and unassigned or
private-use code points, kael's ids equal tiktoken's and decode(encode(s)) == s."""
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_tokenizer_support import JsonlProcess, tokenize_batch

WHITE_SPACE = [" ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2009",
               "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
               # look like space but are not White_Space
               "\ufeff", "\u200b", "\u180e", "\u2060"]
CONTRACTIONS = sorted({"".join(chars) for base in ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
                       for chars in itertools.product(*[(c.lower(), c.upper()) for c in base])})
APOSTROPHES = ["'", "\u2019", "''", "`"]
DIGITS = "0123456789" + "٠١٢٣٤٥٦٧٨٩" + "۰۱۲۳۴۵۶۷۸۹" + "०१२३४५६७८९" + "০১২৩" + "๐๑๒๓" + "０１２３" + "𝟎𝟏𝟐" + \
    "²³¹¼½¾" + "ⅠⅡⅫⅰ" + "①②⑳" + "〇一二" + "𐄇𐄈" + "\U00010D40\U00010D41\U000116D0"  # the last three: new in Unicode 16
MARKS = ["\u0301", "\u0308", "\u0327", "\u20dd", "\u0e31", "\u093f", "\u05b4", "\u3099", "\u1ab0", "\u0489"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧‍👦", "❤️", "❤\ufe0e", "🏳️‍🌈", "🇫🇷", "#️⃣", "\u200d", "\ufe0f", "\U0001F9D1\u200d\U0001F4BB",
         "\U0001FAE8", "\U0001FAE9"]
ODD = ["\ue000", "\uf8ff", "\U000f0000", "\U0010fffd", "\U0010ffff", "\u0378", "\u0870", "\U000e0001", "\U000e0041",
       "\ufffd", "\ufffe", "\x00", "\x1b", "\x7f", "\u1c89", "\ua7cb", "\U000105c0",  # letters new in Unicode 16
       "\ua7ce", "\u088f", "\U00010940"]  # letters new in Unicode 17 (not letters for tiktoken)
SCRIPTS = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "äöüßéèêçñøå", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
           "ΑΒΓαβγδεζηθ", "אבגדהוזחט", "ابتثجحخدذر", "कखगघङचछजझ", "กขคงจฉชซ", "あいうえおかきくけこアイウエオ",
           "日本語中文字漢", "한국어글자", "ᚠᚢᚦ", "ʰʲˀ", "ǅǈ", "ªº"]
PUNCT = list("!\"#$%&()*+,-./:;<=>?@[\\]^_{|}~") + ["...", "—", "–", "«»", "„“", "。", "、", "！", "¿¡", "§", "€$£", "<|endoftext|>"]

word = st.sampled_from(SCRIPTS).flatmap(lambda alphabet: st.text(alphabet=alphabet, min_size=1, max_size=8))
number = st.text(alphabet=DIGITS, min_size=1, max_size=6)
any_char = st.characters(codec="utf-8")
piece = st.one_of(word, word, number, st.sampled_from(WHITE_SPACE), st.sampled_from(WHITE_SPACE),
                  st.sampled_from(CONTRACTIONS), st.sampled_from(APOSTROPHES), st.sampled_from(MARKS),
                  st.sampled_from(EMOJI), st.sampled_from(ODD), st.sampled_from(PUNCT),
                  st.text(any_char, min_size=1, max_size=3))
mixed_text = st.lists(piece, max_size=30).map("".join)


@pytest.fixture(scope="module")
def coprocesses():
    encoder, decoder = JsonlProcess("tokenize"), JsonlProcess("detokenize")
    yield encoder, decoder
    encoder.close()
    decoder.close()


@settings(max_examples=2000, deadline=None)
@given(text=mixed_text)
def test_ids_equal_tiktoken_and_decode_round_trips(coprocesses, tiktoken_gpt2, text):
    encoder, decoder = coprocesses
    ids = encoder.ask(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert decoder.ask(ids) == text


def test_many_seeded_random_texts_in_one_batch(kael, tiktoken_gpt2):
    """Wider than Hypothesis gets in its time: 20,000 texts from the same pieces, one process."""
    rng = random.Random(1234)
    pools = [WHITE_SPACE, CONTRACTIONS, APOSTROPHES, list(DIGITS), MARKS, EMOJI, ODD, PUNCT,
             ["".join(rng.choice(s) for _ in range(rng.randint(1, 6))) for s in SCRIPTS for _ in range(20)]]

    def text():
        parts = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.1:
                cp = rng.randint(0, 0x10FFFF)
                parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")
            else:
                parts.append(rng.choice(rng.choice(pools)))
        return "".join(parts)

    texts = [text() for _ in range(20_000)]
    assert tokenize_batch(kael, texts) == tiktoken_gpt2.encode_ordinary_batch(texts, num_threads=1)
