"""kael.save / kael.load: what torch.save and torch.load store in training scripts (a model's
state_dict, an optimizer's, a step count, a config) as one safetensors file, never pickle.

The tensors of the object, found in dicts, lists and tuples, are the file's tensors, named by
their path ("model/wte.weight", "optimizer/state.0.exp_avg"); everything else (numbers,
strings, None, booleans and the structure itself) is JSON in the header's metadata under
"kael.object". Loading rebuilds the object; it reads JSON and tensor bytes only, so a file
cannot run code. Objects of other types are a TypeError when saved."""
from __future__ import annotations

import json
import os
from typing import Any

from . import _kael
from ._kael import Tensor

__all__ = ["save", "load"]

_KEY = "kael.object"


def _encode(obj: Any, path: str, tensors: dict[str, Tensor]) -> Any:
    if isinstance(obj, Tensor):
        name = path or "tensor"
        tensors[name] = obj.detach().contiguous()
        return {"__tensor__": name}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        if not all(isinstance(k, (str, int)) for k in obj):
            raise _kael.TypeError("kael.save: dict keys must be str or int")
        return {"__dict__": [[k, _encode(v, f"{path}/{k}" if path else str(k), tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, f"{path}/{i}" if path else str(i), tensors) for i, v in enumerate(obj)]
        return {"__tuple__" if isinstance(obj, tuple) else "__list__": items}
    raise _kael.TypeError(f"kael.save: cannot store a {type(obj).__name__} (tensors, numbers, strings, None and "
                          "dicts, lists and tuples of them)")


def _decode(obj: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__dict__" in obj:
            return {k: _decode(v, tensors) for k, v in obj["__dict__"]}
        if "__list__" in obj:
            return [_decode(v, tensors) for v in obj["__list__"]]
        if "__tuple__" in obj:
            return tuple(_decode(v, tensors) for v in obj["__tuple__"])
        raise _kael.ValueError("kael.load: the file's object metadata is malformed")
    return obj


def save(obj: Any, f: str | os.PathLike[str]) -> None:
    """Writes obj (a state_dict, or a dict of them and plain values) to the file f."""
    tensors: dict[str, Tensor] = {}
    structure = _encode(obj, "", tensors)
    _kael.save_safetensors(os.fspath(f), tensors, metadata={_KEY: json.dumps(structure)})


def load(f: str | os.PathLike[str], map_location: Any = None, weights_only: bool = True, **kwargs: Any) -> Any:
    """Reads what save wrote (the tensors are copies, independent of the file). map_location
    may name the CPU only; weights_only is accepted for torch's signature: nothing is unpickled."""
    if map_location is not None and str(map_location) != "cpu":
        _kael.require_device(str(map_location))
    metadata = _kael.read_safetensors_metadata(os.fspath(f))
    if _KEY not in metadata:
        raise _kael.ValueError(f"kael.load: {os.fspath(f)} was not written by kael.save (no '{_KEY}' metadata)")
    tensors = _kael.load_safetensors(os.fspath(f), mmap=False)
    return _decode(json.loads(metadata[_KEY]), tensors)
