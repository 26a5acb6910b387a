"""A bound class's __new__ without its __init__ made an object holding no C++ value, and its first
method call crashed the interpreter. Every class now refuses Cls.__new__(Cls) with a TypeError,
while construction, pickling and Tensor.__new__ keep working."""
from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import kael
from kael import _kael

# Bound classes whose __new__ would hand methods a null value.
GUARDED = ["Model", "GenerationStream", "IncrementalDecoder", "KVCache", "BpeTokenizer", "_GPT", "_Linear",
           "_NativeModule", "_optim_SGD", "_optim_AdamW", "_optim_Optimizer", "_RNNBase"]


@pytest.mark.parametrize("name", GUARDED)
def test_new_without_init_is_refused(name):
    cls = getattr(_kael, name)
    with pytest.raises(TypeError, match=r"__new__ would make an object without its C\+\+ value"):
        cls.__new__(cls)


def test_a_base_new_refuses_a_bound_subclass():
    with pytest.raises(TypeError, match="_GPT.__new__ would make"):
        _kael._NativeModule.__new__(_kael._GPT)


def test_every_bound_class_is_guarded_or_whole():
    """In a child process (the old behaviour was a crash): no class gives an object whose methods crash."""
    code = ("import kael\n"
            "from kael import _kael\n"
            "for name in dir(_kael):\n"
            "    cls = getattr(_kael, name)\n"
            "    if not isinstance(cls, type) or issubclass(cls, BaseException):\n"
            "        continue\n"
            "    try:\n"
            "        obj = cls.__new__(cls)\n"
            "    except TypeError:\n"
            "        continue\n"
            "    for attribute in dir(obj):\n"
            "        if attribute.startswith('__'):\n"
            "            continue\n"
            "        try:\n"
            "            value = getattr(obj, attribute)\n"
            "            if callable(value):\n"
            "                value()\n"
            "        except Exception:\n"
            "            pass\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode, result.stderr[-2000:])


def test_construction_pickling_and_subclasses_still_work():
    assert kael.Tensor.__new__(kael.Tensor).tolist() == []  # torch's empty tensor, not refused
    assert pickle.loads(pickle.dumps(kael.float16)) == kael.float16  # dtypes unpickle through __new__
    linear = kael.nn.Linear(3, 2)
    assert tuple(linear(kael.zeros(1, 3)).shape) == (1, 2)

    class Tokenizer(_kael.BpeTokenizer):  # a Python subclass still allocates through the guard
        pass

    assert isinstance(Tokenizer.__new__(Tokenizer), Tokenizer)
