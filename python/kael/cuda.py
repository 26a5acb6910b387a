"""kael.cuda: torch.cuda's queries, present in every build as torch's are. This build runs on
the CPU only, so is_available() is False, device_count() 0, and the calls that act on a device
have nothing to act on."""
from __future__ import annotations

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "synchronize", "is_bf16_supported",
           "empty_cache"]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Seeds the current CUDA device's generator: none here."""


def manual_seed_all(seed: int) -> None:
    """Seeds every CUDA device's generator: none here (kael.manual_seed seeds the CPU's)."""


def synchronize(device: object = None) -> None:
    """Waits for a CUDA device to finish: nothing runs on one here."""


def empty_cache() -> None:
    """Frees a CUDA device's cached memory: none here."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False
