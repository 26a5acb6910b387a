"""kael.backends against torch.backends: the queries a CPU machine answers, and
cuda.matmul.allow_tf32 tied to the float32 matmul precision both ways, as torch ties them."""
import pytest
import torch

import kael


@pytest.fixture(autouse=True)
def restore_precision():
    yield
    kael.set_float32_matmul_precision("highest")
    torch.set_float32_matmul_precision("highest")


def test_mps_is_absent_as_on_torch_without_apple_gpus():
    assert kael.backends.mps.is_available() is False and kael.backends.mps.is_built() is False
    assert torch.backends.mps.is_available() is False


def test_cudnn_is_absent_and_its_switches_are_kept():
    assert kael.backends.cudnn.is_available() is False and kael.backends.cudnn.version() is None
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(kael.backends.cudnn, name) == getattr(torch.backends.cudnn, name), name
    kael.backends.cudnn.benchmark = True  # nanoGPT and others set these; they change nothing
    assert kael.backends.cudnn.benchmark is True
    kael.backends.cudnn.benchmark = False


@pytest.mark.parametrize("lib", [kael, torch], ids=["kael", "torch"])
def test_allow_tf32_is_the_float32_matmul_precision(lib):
    matmul = lib.backends.cuda.matmul
    assert matmul.allow_tf32 is False and lib.get_float32_matmul_precision() == "highest"
    matmul.allow_tf32 = True
    assert lib.get_float32_matmul_precision() == "high" and matmul.allow_tf32 is True
    matmul.allow_tf32 = False
    assert lib.get_float32_matmul_precision() == "highest"
    # (torch refuses to read the precision back after the two spellings are mixed the other way)
    lib.set_float32_matmul_precision("medium")
    assert matmul.allow_tf32 is True
    lib.set_float32_matmul_precision("highest")
    assert matmul.allow_tf32 is False
