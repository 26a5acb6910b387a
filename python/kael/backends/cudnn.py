"""kael.backends.cudnn: kael has no cuDNN, so is_available() is False and the switches torch
scripts set (benchmark, deterministic, allow_tf32, enabled) are kept but change nothing."""

__all__ = ["is_available", "version", "enabled", "benchmark", "deterministic", "allow_tf32"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> None:
    return None
