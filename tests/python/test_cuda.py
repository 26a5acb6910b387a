"""kael.cuda and tensors on a CUDA device. Without a usable GPU (CI, the build machines) the
queries answer "none" and every move to "cuda" is a kael.Error naming the cause; with one
(scripts/test_cuda.sh) the tensors' storage, copies, memory figures and elementwise ops are
compared with torch on the same GPU."""
import re

import numpy as np
import pytest

import kael

HAS_GPU = kael.cuda.is_available()
no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is usable here")
gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device here")

# Each cause a build or a machine can have (src/core/cuda_runtime.cpp, unavailable_message).
CAUSES = (r"device cuda:0 is not available: (this kael build runs on the CPU only|no NVIDIA driver was found|"
          r"the NVIDIA driver is too old|the NVIDIA driver sees no CUDA device|CUDA could not be started)")


@no_gpu
def test_queries_without_a_gpu():
    assert kael.cuda.device_count() == 0
    assert kael.cuda.synchronize() is None and kael.cuda_synchronize() is None
    assert kael.cuda.memory_allocated() == 0 and kael.cuda.max_memory_allocated() == 0
    assert kael.cuda.memory_reserved("cuda:1") == 0 and kael.cuda.memory_allocated(0) == 0
    kael.cuda.empty_cache()
    kael.cuda.reset_peak_memory_stats()
    assert not kael.cuda.is_bf16_supported()
    with pytest.raises(ValueError, match="expected a cuda device"):
        kael.cuda.memory_allocated("cpu")


def test_manual_seed_is_kept():
    kael.cuda.manual_seed(1234)
    assert kael.cuda.initial_seed() == 1234
    kael.cuda.manual_seed_all(-1)  # torch takes any int; kael keeps its 64 bits
    assert kael.cuda.initial_seed() == 2**64 - 1


@no_gpu
@pytest.mark.parametrize("make", [
    lambda: kael.ones(2).to("cuda"),
    lambda: kael.ones(2).to(device="cuda:0"),
    lambda: kael.ones(2).cuda(),
    lambda: kael.zeros(2, device="cuda"),
    lambda: kael.zeros_like(kael.ones(2), device="cuda"),
    lambda: kael.tensor([1.0], device="cuda"),
    lambda: kael.ones(2).new_zeros(3, device="cuda"),
    lambda: kael.randperm(4, device="cuda"),
    lambda: kael.device("cuda"),
], ids=["to", "to-device", "cuda", "zeros", "zeros_like", "tensor", "new_zeros", "randperm", "device"])
def test_cuda_without_a_gpu_names_the_cause(make):
    with pytest.raises(kael.Error, match=CAUSES):
        make()


@no_gpu
def test_the_cause_matches_the_build():
    with pytest.raises(kael.Error) as error:
        kael.ones(1).to("cuda")
    # A CUDA build says why this machine cannot run it; a CPU-only build says so.
    assert re.search(CAUSES, str(error.value)), str(error.value)


# --- on a GPU: against torch on the same device ---

@pytest.fixture(scope="module")
def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def random_array(shape, seed, low=-3.0, high=3.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)


@gpu
def test_storage_and_copies(torch_cuda):
    values = random_array((4, 5), 1)
    x = kael.tensor(values).to("cuda")
    assert str(x.device) == "cuda:0" and x.device.type == "cuda" and x.device.index == 0
    np.testing.assert_array_equal(x.cpu().numpy(), values)
    np.testing.assert_array_equal(x.t().cpu().numpy(), values.T)
    np.testing.assert_array_equal(x[:, 1::2].cpu().numpy(), values[:, 1::2])
    assert x[1, 2].item() == float(values[1, 2])
    assert x.tolist() == values.tolist()
    assert "device='cuda:0'" in repr(x)
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        x.numpy()
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        np.asarray(x)
    with pytest.raises(BufferError, match=r"\.cpu\(\)"):
        memoryview(x)
    assert str(kael.zeros(3, device="cuda").device) == "cuda:0"
    assert str(kael.zeros_like(x).device) == "cuda:0"
    assert str(x.new_zeros(2).device) == "cuda:0"
    assert str(kael.tensor([1.0, 2.0], device="cuda", requires_grad=True).device) == "cuda:0"
    kael.cuda_synchronize()


@gpu
def test_memory_figures(torch_cuda):
    kael.cuda.synchronize()
    kael.cuda.empty_cache()
    before = kael.cuda.memory_allocated()
    kael.cuda.reset_peak_memory_stats()
    x = kael.zeros(1 << 20, device="cuda")  # 4 MiB
    assert kael.cuda.memory_allocated() == before + (4 << 20)
    del x
    assert kael.cuda.memory_allocated() == before
    assert kael.cuda.max_memory_allocated() == before + (4 << 20)
    assert kael.cuda.memory_reserved() >= before + (4 << 20)
    kael.cuda.empty_cache()
    assert kael.cuda.memory_reserved() == kael.cuda.memory_allocated()


@gpu
def test_out_of_memory_names_the_size(torch_cuda):
    with pytest.raises(kael.Error, match=r"out of memory on cuda:0: could not allocate 17592186044416 bytes"):
        kael.empty(1 << 42, device="cuda")
    np.testing.assert_array_equal(kael.ones(3, device="cuda").cpu().numpy(), np.ones(3, np.float32))  # still works


@gpu
@pytest.mark.parametrize("n", [1, 1000, (1 << 24) + 77])
def test_elementwise_ops_against_torch(torch_cuda, n):
    torch = torch_cuda
    a_np, b_np = random_array(n, 2), random_array(n, 3, 0.5, 4.0)
    a, b = kael.tensor(a_np).to("cuda"), kael.tensor(b_np).to("cuda")
    ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
    cases = {
        "add": (kael.add(a, b), ta + tb),
        "add alpha": (kael.add(a, b, alpha=0.3), torch.add(ta, tb, alpha=0.3)),
        "sub": (a - b, ta - tb),
        "mul": (a * b, ta * tb),
        "div": (a / b, ta / tb),
        "scalar": (a * 2.5, ta * 2.5),
        "one element": (a / b[0], ta / tb[0]),
    }
    for name, (got, want) in cases.items():
        assert str(got.device) == "cuda:0", name
        torch.testing.assert_close(torch.from_numpy(got.cpu().numpy()).cuda(), want, msg=name)
    # The device runs the CPU's arithmetic (kernels/binary_arith.hpp): the same bits.
    np.testing.assert_array_equal((a * b).cpu().numpy(), (kael.tensor(a_np) * kael.tensor(b_np)).numpy())
    np.testing.assert_array_equal((a / b).cpu().numpy(), (kael.tensor(a_np) / kael.tensor(b_np)).numpy())


@gpu
def test_what_cuda_cannot_do_yet_is_an_error(torch_cuda):
    x = kael.ones(4, device="cuda")
    with pytest.raises(kael.ValueError, match="expected all tensors on the same device, got cpu and cuda:0"):
        kael.ones(4) + x
    with pytest.raises(kael.Error, match="maximum is not implemented on cuda:0 yet"):
        kael.maximum(x, x)
    with pytest.raises(kael.Error, match="expected a cpu tensor, got one on cuda:0"):
        x.exp()
    with pytest.raises(kael.Error, match="run on the CPU only so far"):
        kael.nn.Linear(2, 2).to("cuda")
