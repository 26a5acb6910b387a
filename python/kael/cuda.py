"""kael.cuda: torch.cuda's queries, present in every build as torch's are. In a build without the
CUDA backend, or on a machine without a usable GPU, is_available() is False, device_count() 0,
synchronize() and empty_cache() have nothing to act on and the memory figures are 0; moving a
tensor to "cuda" then raises kael.Error naming the cause (no driver, a driver too old, no device,
or a CPU-only build)."""
from __future__ import annotations

from typing import Any, Optional

from . import _kael

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "initial_seed", "synchronize",
           "is_bf16_supported", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats"]

_native = _kael._cuda


def is_available() -> bool:
    return bool(_native.is_available())


def device_count() -> int:
    return int(_native.device_count())


def manual_seed(seed: int) -> None:
    """Seeds the generator of kael's random operations on CUDA devices (one for all devices)."""
    _native.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    """As manual_seed: kael's CUDA devices share one generator seed."""
    manual_seed(seed)


def initial_seed() -> int:
    return int(_native.initial_seed())


def synchronize(device: Any = None) -> None:
    """Waits until the work queued on the CUDA devices kael has used is done (at once without any)."""
    _native.synchronize()


def empty_cache() -> None:
    """Returns the cached device memory no tensor holds to the driver."""
    _native.empty_cache()


def _index(device: Optional[Any]) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    name = str(device)  # a name or a kael.device; parsed here, so a machine without a GPU answers 0
    if name == "cuda":
        return 0
    if name.startswith("cuda:") and name[5:].isdigit():
        return int(name[5:])
    raise ValueError(f"expected a cuda device, got {name!r}")


def memory_allocated(device: Any = None) -> int:
    """Bytes of device memory held by live tensors on `device` (cuda:0 by default)."""
    return int(_native.memory_allocated(_index(device)))


def max_memory_allocated(device: Any = None) -> int:
    """The peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return int(_native.max_memory_allocated(_index(device)))


def memory_reserved(device: Any = None) -> int:
    """Bytes taken from the driver on `device`: held by tensors or cached for reuse."""
    return int(_native.memory_reserved(_index(device)))


def reset_peak_memory_stats(device: Any = None) -> None:
    _native.reset_peak_memory_stats(_index(device))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return is_available()
