"""kael.nn.Module and the layers, as torch.nn's.

A Module subclass assigns its parameters, sub-modules and buffers as attributes: a tensor that
requires a gradient (``kael.nn.Parameter(t)``) becomes a parameter, a Module a sub-module,
``register_buffer`` adds the rest. ``named_parameters()``, ``state_dict()`` and
``load_state_dict()`` name them with dots in registration order; ``load_state_dict`` checks every
entry before it copies any (kael::nn::load_named_tensors, the rule of the C++ Module).

Linear, Embedding and LayerNorm take their initialized parameters from kael::nn's C++ layers
and keep them as Python attributes, so that they can be assigned (``lm_head.weight =
wte.weight`` ties two layers, as in torch) and ``lin.weight is lin.weight``; their forward is the
functional op. Dropout and GELU are the C++ layers. A tensor shared by several modules is one
parameter: named_parameters() and parameters() give it once, under its first name.
"""
from __future__ import annotations

import copy
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterable, Iterator

from .. import _kael
from .._kael import Tensor


def Parameter(data: Tensor, requires_grad: bool = True) -> Tensor:
    """A leaf tensor holding `data`'s values that a Module registers as a parameter."""
    return data.detach().requires_grad_(requires_grad)


class Module:
    """The base of every model: parameters, buffers and sub-modules, found by attribute."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # --- registration ---
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() before assigning {name}")
        if name in self._buffers and (value is None or isinstance(value, Tensor)) and not (
                isinstance(value, Tensor) and value.requires_grad and value.is_leaf):
            self._buffers[name] = value  # torch: assigning a tensor to a buffer's name replaces the buffer
            object.__setattr__(self, name, value)
            return
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Tensor) and value.requires_grad and value.is_leaf:
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        if param is not None and not (param.requires_grad and param.is_leaf):
            raise _kael.ValueError(f"register_parameter: '{name}' must be a leaf that requires grad (kael.nn.Parameter)")
        setattr(self, name, param)
        if param is not None:
            self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        object.__setattr__(self, name, tensor)
        if tensor is not None:
            self._buffers[name] = tensor
            if persistent:
                self._persistent.add(name)

    def register_module(self, name: str, module: Module | None) -> None:
        setattr(self, name, module)

    add_module = register_module

    # --- the tree ---
    def _own_parameters(self) -> list[tuple[str, Tensor]]:
        return list(self._parameters.items())

    def _own_buffers(self, persistent_only: bool) -> list[tuple[str, Tensor]]:
        return [(n, t) for n, t in self._buffers.items() if not persistent_only or n in self._persistent]

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self.named_children():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Every parameter once (a tensor tied into several modules under its first name)."""
        seen: set[int] = set()
        for name, module in (self.named_modules(prefix=prefix) if recurse else [(prefix, self)]):
            for own, tensor in module._own_parameters():
                if tensor is None or (remove_duplicate and id(tensor) in seen):
                    continue
                seen.add(id(tensor))
                yield (f"{name}.{own}" if name else own), tensor

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_parameters(recurse=recurse):
            yield tensor

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        for name, module in (self.named_modules(prefix=prefix) if recurse else [(prefix, self)]):
            for own, tensor in module._own_buffers(persistent_only=False):
                if tensor is not None:
                    yield (f"{name}.{own}" if name else own), tensor

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_buffers(recurse=recurse):
            yield tensor

    # --- state ---
    def _state_entries(self) -> list[tuple[str, Tensor]]:
        # Every name of a tied tensor, as torch's state_dict keeps both keys.
        entries = list(self.named_parameters(remove_duplicate=False))
        for name, module in self.named_modules():
            for own, tensor in module._own_buffers(persistent_only=True):
                if tensor is not None:
                    entries.append(((f"{name}.{own}" if name else own), tensor))
        return entries

    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Parameters (detached) and persistent buffers by dotted name; save_safetensors takes it."""
        return OrderedDict((name, tensor.detach()) for name, tensor in self._state_entries())

    def load_state_dict(self, state_dict: dict[str, Tensor], strict: bool = True, assign: bool = False) -> Any:
        """Copies the entries into this module's tensors, all or none. strict (torch's default):
        a missing or an unexpected name is kael.Error; otherwise only the names present are
        copied. A shape mismatch is kael.ValueError. Either error leaves the module unchanged.
        Returns (missing_keys, unexpected_keys), as torch."""
        if assign:
            raise _kael.ValueError("load_state_dict: assign=True is not supported (the values are copied)")
        entries = self._state_entries()
        names = {name for name, _ in entries}
        missing = [name for name, _ in entries if name not in state_dict]
        unexpected = [key for key in state_dict if key not in names]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
            if unexpected:
                parts.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            raise _kael.Error(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(parts))
        present = [(name, tensor) for name, tensor in entries if name in state_dict]
        _kael._load_named_tensors(present, dict(state_dict))
        return _IncompatibleKeys(missing, unexpected)

    # --- modes ---
    def train(self, mode: bool = True) -> Module:
        for module in self.modules():
            object.__setattr__(module, "training", mode)
            module._set_native_training(mode)
        return self

    def _set_native_training(self, mode: bool) -> None:
        pass

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad.zero_()

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """fn(module) for every sub-module, children first, then for this one (torch's order)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _convert(self, fn: Callable[[Tensor], Tensor]) -> Module:
        # In place, as torch: each tensor keeps its identity (and requires_grad), its .data replaced.
        from ..autograd import no_grad
        with no_grad():
            for module in self.modules():
                for registry in (module._parameters, module._buffers):
                    for tensor in registry.values():
                        if tensor is not None:
                            tensor.data = fn(tensor)
                            if tensor.grad is not None:
                                tensor.grad = fn(tensor.grad)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """module.to(device), to(dtype), to(device, dtype): floating tensors convert to the dtype;
        models run on the CPU only so far, so another device is kael.Error."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise _kael.TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, (str, _kael.device)):
                device = arg
            elif isinstance(arg, Tensor):
                dtype = arg.dtype
            else:
                dtype = arg
        if device is not None:
            _kael.require_device(str(device))
        if dtype is not None:
            self._convert(lambda t: t.to(dtype) if t.is_floating_point() else t)
        return self

    def cpu(self) -> Module:
        return self

    def float(self) -> Module:
        return self.to(_kael.float32)

    def double(self) -> Module:
        return self.to(_kael.float64)

    def half(self) -> Module:
        return self.to(_kael.float16)

    def bfloat16(self) -> Module:
        return self.to(_kael.bfloat16)

    def get_submodule(self, target: str) -> Module:
        module = self
        for part in target.split(".") if target else []:
            module = module._modules[part]
        return module

    # --- calling ---
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"  ({name}): " + repr(module).replace("\n", "\n  ") for name, module in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


class _Native(Module):
    """A module whose forward is a kael::nn C++ module's (it has no parameters of its own)."""

    def __init__(self, native: Any) -> None:
        super().__init__()
        object.__setattr__(self, "_native", native)

    def _set_native_training(self, mode: bool) -> None:
        self._native.train(mode)

    def forward(self, input: Tensor) -> Tensor:
        return self._native.forward(input)

    def _copy_native(self) -> Any:
        raise _kael.TypeError(f"copy.deepcopy of {type(self).__name__} is not supported: build a new one and "
                              "load_state_dict")

    def __deepcopy__(self, memo: dict[int, Any]) -> _Native:
        """A copy with its own C++ module (copy.deepcopy of a model, as TransformerEncoder clones layers)."""
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        native = self._copy_native()
        native.train(self.training)
        for name, value in self.__dict__.items():
            object.__setattr__(clone, name, native if name == "_native" else copy.deepcopy(value, memo))
        return clone


class _NativeModel(_Native):
    """A C++ model whose parameters and buffers are its own (the book's GPT): their Python
    objects are taken once, so that the same tensor is the same object on every call."""

    def __init__(self, native: Any) -> None:
        super().__init__(native)
        object.__setattr__(self, "_native_parameters", list(native.named_parameters()))
        object.__setattr__(self, "_native_buffers", list(native.named_buffers()))

    def _own_parameters(self) -> list[tuple[str, Tensor]]:
        return self._native_parameters + super()._own_parameters()

    def _own_buffers(self, persistent_only: bool) -> list[tuple[str, Tensor]]:
        return self._native_buffers + super()._own_buffers(persistent_only)


def _initialized(tensor: Tensor, dtype: Any) -> Tensor:
    """A parameter of a C++ layer (initialized there), converted to dtype when one is given."""
    return tensor if dtype is None else Parameter(tensor.to(dtype))


def _check_device(device: Any) -> None:
    if device is not None:
        _kael.require_device(str(device))


class Linear(Module):
    """y = x W^T + b; weight (out, in) and bias (out) uniform in +-1/sqrt(in), as torch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        native = _kael._Linear(in_features, out_features, bias)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _initialized(native.weight, dtype)
        self.bias = _initialized(native.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return _kael.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Rows of weight (num_embeddings, embedding_dim), N(0, 1), picked by integer ids; the row
    padding_idx starts at zero and gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise _kael.ValueError("Embedding: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise _kael.ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} rows")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        if _weight is None:
            weight = _initialized(_kael._Embedding(num_embeddings, embedding_dim).weight, dtype)
        else:
            weight = Parameter(_weight, requires_grad=not _freeze)
        self.weight = weight
        if padding_idx is not None and _weight is None:
            from ..autograd import no_grad
            with no_grad():
                self.weight[padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        from .functional import embedding
        return embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class LayerNorm(Module):
    """Normalizes over the last dims, then * weight + bias (ones and zeros; bias=False: no bias)."""

    def __init__(self, normalized_shape: int | Iterable[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_device(device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        native = _kael._LayerNorm(shape, eps, elementwise_affine)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = _initialized(native.weight, dtype) if elementwise_affine else None
        self.bias = _initialized(native.bias, dtype) if elementwise_affine and bias else None

    def forward(self, input: Tensor) -> Tensor:
        return _kael.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(_Native):
    """Zeroes elements with probability p in training mode; the identity after eval()."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__(_kael._Dropout(p))
        self.p = p

    def _copy_native(self) -> Any:
        return _kael._Dropout(self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(_Native):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__(_kael._GELU(approximate))
        self.approximate = approximate

    def _copy_native(self) -> Any:
        return _kael._GELU(self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Sequential(Module):
    """Modules applied in order, named "0", "1", ..."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)


class ModuleList(Module):
    """A list of modules, named "0", "1", ..., for the parent's forward to call."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules by name, registered in insertion order (torch.nn.ModuleDict)."""

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def update(self, modules: Any) -> None:
        pairs = modules.items() if hasattr(modules, "items") else modules
        for key, module in pairs:
            self[key] = module


class _Elementwise(Module):
    """A module that applies one function of the tensor library."""

    _function: Callable[[Tensor], Tensor]

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input)


class ReLU(_Elementwise):
    _function = staticmethod(_kael.relu)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # taken for torch's signature; the result is a new tensor either way


class Tanh(_Elementwise):
    _function = staticmethod(_kael.tanh)


class Sigmoid(_Elementwise):
    _function = staticmethod(_kael.sigmoid)


class Identity(Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    """F.cross_entropy as a module: ignore_index, reduction, label_smoothing."""

    def __init__(self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return _kael.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                                   reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss as a module (input: log-probabilities)."""

    def __init__(self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return _kael.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return _kael.mse_loss(input, target, reduction=self.reduction)


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
