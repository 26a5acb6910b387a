"""kael.backends.mps: Apple's GPUs, which kael does not run on."""

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
