"""kael.optim: torch.optim's SGD, Adam, AdamW, Adadelta and RMSprop over kael.Tensor parameters (docs/optim.md)::

    opt = kael.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                            {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    loss.backward()
    kael.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()

Same constructor signatures, parameter groups (``param_groups``, a list of dicts whose "lr" a
schedule may change between steps) and update formulas as torch's; the updates are kael::optim's
C++ optimizers. Parameters without a gradient are skipped. ``state_dict()`` is a flat dict of
tensors that kael.save writes as it is (docs/optim.md)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .. import _kael
from .._kael import Tensor
from ..autograd import enable_grad
from . import lr_scheduler  # noqa: F401

__all__ = ["Adadelta", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]


class Optimizer:
    """The base: parameter groups with their options, the native optimizer that updates them."""

    _native_type: Any = None

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise _kael.TypeError(f"{name}: params must be an iterable of kael.Tensor or of dicts, not a single Tensor")
        groups = list(params)
        if not groups:
            raise _kael.ValueError(f"{name}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = [self._group_entry(group) for group in groups]
        self._native = self._make_native(self.param_groups)
        self._fixed = [self._options_of(g) for g in self.param_groups]

    def _group_entry(self, group: Any) -> dict[str, Any]:
        # A parameter group as torch keeps it: its params as a list, every default filled in.
        name = type(self).__name__
        if not isinstance(group, dict):
            raise _kael.TypeError(f"{name}: give either tensors or dicts of parameter groups, not both")
        if "params" not in group:
            raise _kael.ValueError(f"{name}: a parameter group needs a 'params' entry")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise _kael.ValueError(f"{name}: unknown option(s) {sorted(unknown)} in a parameter group")
        params_of = group["params"]
        if isinstance(params_of, set):
            raise _kael.TypeError(f"{name}: parameters need to be organized in ordered collections, but the ordering "
                                  "of tensors in sets will change between runs; use a list instead")
        entry = {"params": [params_of] if isinstance(params_of, Tensor) else list(params_of)}
        for key, value in self.defaults.items():
            entry[key] = group.get(key, value)
        return entry

    def _make_native(self, groups: list[dict[str, Any]]) -> Any:
        return self._native_type([(g["params"], self._native_options(g)) for g in groups])

    # --- what each optimizer says about its options ---
    def _native_options(self, group: dict[str, Any]) -> dict[str, Any]:
        return {key: group[key] for key in self._native_keys}

    _native_keys: tuple[str, ...] = ()

    def _options_of(self, group: dict[str, Any]) -> dict[str, Any]:
        # The options the native optimizer took, but lr: schedules add keys of their own.
        return {k: group[k] for k in self.defaults if k != "lr"}

    # --- torch's interface ---
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update; a closure, when given, is called first with grad mode on and its result returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for i, group in enumerate(self.param_groups):
            if self._options_of(group) != self._fixed[i]:
                raise _kael.ValueError(f"{type(self).__name__}.step: only 'lr' of a parameter group can change after "
                                       "the optimizer is made")
            self._native.set_group_lr(i, float(group["lr"]))
        self._native.step()
        return loss

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a group (torch's add_param_group): options it leaves out take the defaults; the
        state of the parameters already here is kept. Nothing changes when the group is refused."""
        entry = self._group_entry(param_group)
        groups = self.param_groups + [entry]
        native = self._make_native(groups)  # checks the new group (a parameter in two groups, ...)
        # The state's indices count the parameters group after group, so those already here keep theirs.
        for i, group in enumerate(self.param_groups):
            self._native.set_group_lr(i, float(group["lr"]))
        state = {k: v for k, v in self._native.state_dict().items() if k.startswith("state.")}
        state.update((k, v) for k, v in native.state_dict().items() if k.startswith("param_groups."))
        native.load_state_dict(state)
        self._native = native
        self.param_groups.append(entry)  # in place: whoever holds the list sees the new group
        self._fixed.append(self._options_of(entry))

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._native.zero_grad(set_to_none)

    def state_dict(self) -> dict[str, Tensor]:
        """The state as a flat dict of tensors (param_groups.<g>.<option>, state.<i>.<buffer>)."""
        for i, group in enumerate(self.param_groups):
            self._native.set_group_lr(i, float(group["lr"]))
        return self._native.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._native.load_state_dict(dict(state_dict))
        for i, group in enumerate(self.param_groups):
            group.update(self._group_options(i))
        self._fixed = [self._options_of(g) for g in self.param_groups]

    def _group_options(self, i: int) -> dict[str, Any]:
        return dict(self._native.options(i))

    @property
    def lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self._native.lr = value  # checks it
        for group in self.param_groups:
            group["lr"] = value

    @property
    def params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        return "\n".join(lines) + "\n)"


def _check_fused(name: str, fused: bool | None, foreach: bool | None) -> None:
    # One CPU implementation: fused and foreach choose among torch's kernels, and change no result.
    for option, value in (("fused", fused), ("foreach", foreach)):
        if value not in (None, False, True):
            raise _kael.TypeError(f"{name}: {option} must be None or a bool")


class SGD(Optimizer):
    """torch.optim.SGD: momentum, dampening, weight decay (L2) and Nesterov."""

    _native_type = _kael._optim_SGD
    _native_keys = ("lr", "momentum", "dampening", "weight_decay", "nesterov")

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if maximize or differentiable:
            raise _kael.ValueError("SGD: maximize and differentiable are not supported")
        _check_fused("SGD", fused, foreach)
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})


class Adam(Optimizer):
    """torch.optim.Adam: weight decay added to the gradient (L2)."""

    _native_type = _kael._optim_Adam
    _native_keys = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        if amsgrad or maximize or capturable or differentiable:
            raise _kael.ValueError(f"{type(self).__name__}: amsgrad, maximize, capturable and differentiable are not supported")
        _check_fused(type(self).__name__, fused, foreach)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})


class AdamW(Adam):
    """torch.optim.AdamW: Adam with the weight decay decoupled (p *= 1 - lr * weight_decay)."""

    _native_type = _kael._optim_AdamW

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused)


class Adadelta(Optimizer):
    """torch.optim.Adadelta: square_avg and acc_delta per parameter, weight decay added to the gradient."""

    _native_type = _kael._optim_Adadelta
    _native_keys = ("lr", "rho", "eps", "weight_decay")

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        if maximize or capturable or differentiable:
            raise _kael.ValueError("Adadelta: maximize, capturable and differentiable are not supported")
        _check_fused("Adadelta", None, foreach)
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay})


class RMSprop(Optimizer):
    """torch.optim.RMSprop: alpha, eps, weight decay (L2), momentum and centered."""

    _native_type = _kael._optim_RMSprop
    _native_keys = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        if maximize or capturable or differentiable:
            raise _kael.ValueError("RMSprop: maximize, capturable and differentiable are not supported")
        _check_fused("RMSprop", None, foreach)
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered})
