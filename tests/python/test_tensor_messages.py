"""Integers that do not fit the argument and str that has no UTF-8 get an error that names the
argument and the range it must be in, from the bindings' one conversion helper, where pybind11
said "Unable to cast Python instance ... to C++ type '?'". manual_seed takes what
torch.manual_seed takes: -2**63 .. 2**64 - 1, a negative seed modulo 2**64."""
from __future__ import annotations

import pytest
import torch

import kael
from gpt2_reference import GPT2_TOKENIZER_DIR

CASES = {
    "zeros": (lambda: kael.zeros(2**63), "zeros: size 9223372036854775808"),
    "zeros_tuple": (lambda: kael.zeros((2, -2**63 - 1)), "zeros: size -9223372036854775809"),
    "subscript": (lambda: kael.zeros(3)[2**63], "index 9223372036854775808"),
    "subscript_list": (lambda: kael.zeros(3)[[0, 2**64]], "index 18446744073709551616"),
    "randint_high": (lambda: kael.randint(0, 2**63, (2,)), "randint: high 9223372036854775808"),
    "randint_low": (lambda: kael.randint(-2**70, 0, (2,)), "randint: low -1180591620717411303424"),
    "full": (lambda: kael.full((2,), 2**63), "full: fill_value 9223372036854775808"),
    "sum_dim": (lambda: kael.zeros(3).sum(2**40), "dim 1099511627776"),
    "randperm": (lambda: kael.randperm(2**63), "randperm: n 9223372036854775808"),
    "topk_k": (lambda: kael.zeros(3).topk(2**63), "topk: k 9223372036854775808"),
    "topk_dim": (lambda: kael.zeros(3).topk(1, dim=2**31), "topk: dim 2147483648"),
    "multinomial": (lambda: kael.ones(3).multinomial(2**64), "multinomial: num_samples 18446744073709551616"),
    "split": (lambda: kael.zeros(3).split(2**63), "split: split_size_or_sections 9223372036854775808"),
    "split_sections": (lambda: kael.zeros(3).split([1, 2**63]), "split: split_size_or_sections 9223372036854775808"),
    "chunk": (lambda: kael.zeros(3).chunk(2**63), "chunk: chunks 9223372036854775808"),
    "unbind": (lambda: kael.zeros(3).unbind(-2**31 - 1), "unbind: dim -2147483649"),
    "roll": (lambda: kael.zeros(3).roll(2**63), "roll: shifts 9223372036854775808"),
    "tril": (lambda: kael.zeros(3, 3).tril(2**63), "tril: diagonal 9223372036854775808"),
    "triu_": (lambda: kael.zeros(3, 3).triu_(-2**63 - 1), "triu_: diagonal -9223372036854775809"),
    "gather": (lambda: kael.zeros(3).gather(2**31, kael.zeros(3, dtype=kael.int64)), "gather: dim 2147483648"),
    "one_hot": (lambda: kael.nn.functional.one_hot(kael.zeros(3, dtype=kael.int64), 2**63),
                "one_hot: num_classes 9223372036854775808"),
    "cross_entropy": (lambda: kael.nn.functional.cross_entropy(kael.zeros(2, 3), kael.zeros(2, dtype=kael.int64),
                                                               ignore_index=2**63),
                      "cross_entropy: ignore_index 9223372036854775808"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_integer_out_of_range_names_the_argument_and_the_range(case):
    call, named = CASES[case]
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert named in message and "out of range" in message, message
    assert "int64" in message or "int32" in message, message
    assert "Unable to cast" not in message


def tokenizer() -> kael.BpeTokenizer:
    return kael.BpeTokenizer(GPT2_TOKENIZER_DIR / "vocab.json", GPT2_TOKENIZER_DIR / "merges.txt")


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff", "\udcff"])
def test_a_lone_surrogate_names_the_argument(text):
    with pytest.raises(ValueError, match="text holds a lone surrogate"):
        tokenizer().encode(text)
    with pytest.raises(ValueError, match="allowed_special holds a lone surrogate"):
        tokenizer().encode("hi", allowed_special=text)
    assert tokenizer().encode(text.encode("utf-8", "surrogatepass")) is not None  # bytes pass as they are


def test_text_arguments_of_the_tensor_ops_name_the_argument():
    with pytest.raises(ValueError, match="einsum: equation holds a lone surrogate"):
        kael.einsum("i\ud800", kael.zeros(2))
    with pytest.raises(ValueError, match="cross_entropy: reduction holds a lone surrogate"):
        kael.nn.functional.cross_entropy(kael.zeros(2, 3), kael.zeros(2, dtype=kael.int64), reduction="\ud800")


@pytest.mark.parametrize("seed", [-1, -2**63, 2**64 - 1, 0])
def test_manual_seed_takes_torchs_range(seed):
    torch.manual_seed(seed)  # torch takes it: kael must too
    unsigned = seed % 2**64
    assert torch.initial_seed() == unsigned
    kael.manual_seed(seed)
    first = kael.rand(4).tolist()
    kael.manual_seed(unsigned)
    assert kael.rand(4).tolist() == first


@pytest.mark.parametrize("seed", [2**64, -2**63 - 1])
def test_manual_seed_outside_torchs_range_names_it(seed):
    with pytest.raises(ValueError):
        torch.manual_seed(seed)
    with pytest.raises(ValueError, match=r"manual_seed: seed .* out of range: it must be in \[-2\*\*63, 2\*\*64 - 1\]"):
        kael.manual_seed(seed)
    with pytest.raises(TypeError, match="manual_seed: seed must be an int, not float"):
        kael.manual_seed(1.5)


@pytest.mark.parametrize("call", [
    lambda g: kael.ones(4).multinomial(2, generator=g),
    lambda g: kael.empty(3).normal_(generator=g),
    lambda g: kael.empty(3).uniform_(generator=g),
    lambda g: kael.utils.data.random_split(list(range(6)), [3, 3], generator=g),
    lambda g: kael.utils.data.RandomSampler(list(range(6)), generator=g),
    lambda g: kael.utils.data.SubsetRandomSampler([0, 1, 2], generator=g),
    lambda g: kael.utils.data.DataLoader(list(range(6)), shuffle=True, generator=g),
], ids=["multinomial", "normal_", "uniform_", "random_split", "RandomSampler", "SubsetRandomSampler", "DataLoader"])
def test_a_generator_object_is_refused_not_ignored(call):
    # kael has one generator, seeded by kael.manual_seed: drawing from it while the caller
    # believes a generator of their own is used would make their seeding silently wrong.
    with pytest.raises(kael.ValueError, match="generator objects are not supported"):
        call(torch.Generator().manual_seed(0))
