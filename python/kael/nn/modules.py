"""kael.nn.Module and the layers, as torch.nn's.

A Module subclass assigns its parameters, sub-modules and buffers as attributes: a tensor that
requires a gradient (``kael.nn.Parameter(t)``) becomes a parameter, a Module a sub-module,
``register_buffer`` adds the rest. ``named_parameters()``, ``state_dict()`` and
``load_state_dict()`` name them with dots in registration order; ``load_state_dict`` checks every
entry before it copies any (kael::nn::load_named_tensors, the rule of the C++ Module).

Linear, Embedding, LayerNorm, Dropout and GELU are kael::nn's C++ layers (initialization and
forward live there); Sequential and ModuleList hold Python modules.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator

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
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Tensor) and value.requires_grad and value.is_leaf:
            self._parameters[name] = value
        object.__setattr__(self, name, value)

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

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for name, module in self.named_children():
            yield from module.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        for name, module in (self.named_modules(prefix) if recurse else [(prefix, self)]):
            for own, tensor in module._own_parameters():
                yield (f"{name}.{own}" if name else own), tensor

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_parameters(recurse=recurse):
            yield tensor

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        for name, module in (self.named_modules(prefix) if recurse else [(prefix, self)]):
            for own, tensor in module._own_buffers(persistent_only=False):
                yield (f"{name}.{own}" if name else own), tensor

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, tensor in self.named_buffers(recurse=recurse):
            yield tensor

    # --- state ---
    def _state_entries(self) -> list[tuple[str, Tensor]]:
        entries = list(self.named_parameters())
        for name, module in self.named_modules():
            for own, tensor in module._own_buffers(persistent_only=True):
                entries.append(((f"{name}.{own}" if name else own), tensor))
        return entries

    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Parameters (detached) and persistent buffers by dotted name; save_safetensors takes it."""
        return OrderedDict((name, tensor.detach()) for name, tensor in self._state_entries())

    def load_state_dict(self, state_dict: dict[str, Tensor]) -> None:
        """Copies every entry into this module's tensors, or none: a missing name is kael.Error,
        a shape mismatch kael.ValueError, and either leaves the module unchanged. Extra entries
        are ignored."""
        _kael._load_named_tensors(self._state_entries(), dict(state_dict))

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

    def to(self, device: Any) -> Module:
        """Moves the module; this build has only the CPU, so anything else is kael.Error."""
        _kael.require_device(str(device))
        return self

    def cpu(self) -> Module:
        return self

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
    """A module whose parameters and forward are a kael::nn C++ module's."""

    def __init__(self, native: Any) -> None:
        super().__init__()
        object.__setattr__(self, "_native", native)

    def _own_parameters(self) -> list[tuple[str, Tensor]]:
        return list(self._native.named_parameters()) + super()._own_parameters()

    def _own_buffers(self, persistent_only: bool) -> list[tuple[str, Tensor]]:
        return list(self._native.named_buffers()) + super()._own_buffers(persistent_only)

    def _set_native_training(self, mode: bool) -> None:
        self._native.train(mode)

    def forward(self, input: Tensor) -> Tensor:
        return self._native.forward(input)


class Linear(_Native):
    """y = x W^T + b; weight (out, in) and bias (out) uniform in +-1/sqrt(in), as torch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(_kael._Linear(in_features, out_features, bias))
        self.in_features, self.out_features = in_features, out_features

    weight = property(lambda self: self._native.weight)
    bias = property(lambda self: self._native.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(_Native):
    """Rows of weight (num_embeddings, embedding_dim), N(0, 1), picked by integer ids."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__(_kael._Embedding(num_embeddings, embedding_dim))
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim

    weight = property(lambda self: self._native.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(_Native):
    """Normalizes over the last dims, then * weight + bias (ones and zeros)."""

    def __init__(self, normalized_shape: int | Iterable[int], eps: float = 1e-5, elementwise_affine: bool = True) -> None:
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        super().__init__(_kael._LayerNorm(shape, eps, elementwise_affine))
        self.normalized_shape, self.eps = shape, eps

    weight = property(lambda self: self._native.weight)
    bias = property(lambda self: self._native.bias)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(_Native):
    """Zeroes elements with probability p in training mode; the identity after eval()."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__(_kael._Dropout(p))
        self.p = p

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(_Native):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__(_kael._GELU(approximate))
        self.approximate = approximate

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
