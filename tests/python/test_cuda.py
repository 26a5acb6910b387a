"""kael.cuda and tensors on a CUDA device. Without a usable GPU (CI, the build machines) the
queries answer "none" and every move to "cuda" is a kael.Error naming the cause; with one
(scripts/test_cuda.sh) the tensors' storage, copies, memory figures, elementwise ops,
comparisons, sums and their gradients are compared with torch on the same GPU."""
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
    with pytest.raises(kael.Error, match="expected a cpu tensor, got one on cuda:0"):
        kael.matmul(x.reshape(2, 2), x.reshape(2, 2))
    with pytest.raises(kael.Error, match="run on the CPU only so far"):
        kael.nn.Linear(2, 2).to("cuda")


def to_torch(torch, t):
    """A kael tensor's values as a torch tensor on the GPU."""
    return torch.from_numpy(t.cpu().numpy()).cuda()


@gpu
def test_broadcast_strided_and_unary_ops_against_torch(torch_cuda):
    torch = torch_cuda
    a_np, b_np, m_np = random_array((3, 1, 5), 11), random_array((4, 5), 12, 0.5, 4.0), random_array((6, 4), 13)
    a, b, m = (kael.tensor(v).to("cuda") for v in (a_np, b_np, m_np))
    ta, tb, tm = (torch.from_numpy(v).cuda() for v in (a_np, b_np, m_np))
    cases = {
        "add broadcast": (a + b, ta + tb),
        "div broadcast": (b / a, tb / ta),
        "maximum": (kael.maximum(a, b), torch.maximum(ta, tb)),
        "minimum": (kael.minimum(a, b), torch.minimum(ta, tb)),
        "transposed": (m.T * m.T, tm.T * tm.T),
        "stepped": (m[1::2] + m[0], tm[1::2] + tm[0]),
        "neg": (-m, -tm),
        "abs": (m.abs(), tm.abs()),
        "relu": (kael.relu(m), torch.relu(tm)),
        "exp": (m.exp(), tm.exp()),
        "log": (b.log(), tb.log()),
        "sqrt": (b.sqrt(), tb.sqrt()),
        "rsqrt": (b.rsqrt(), tb.rsqrt()),
        "tanh": (m.tanh(), tm.tanh()),
        "sigmoid": (m.sigmoid(), tm.sigmoid()),
        "sin": (m.sin(), tm.sin()),
        "cos": (m.cos(), tm.cos()),
        "gelu": (kael.nn.functional.gelu(m), torch.nn.functional.gelu(tm)),
        "gelu tanh": (kael.nn.functional.gelu(m, approximate="tanh"), torch.nn.functional.gelu(tm, approximate="tanh")),
        "where": (kael.where(m > 0, m, m * 0.5), torch.where(tm > 0, tm, tm * 0.5)),
        "masked_fill": (m.masked_fill(m < 0, -1e9), tm.masked_fill(tm < 0, -1e9)),
        "contiguous": (m.T.contiguous(), tm.T.contiguous()),
        "to f16": (m.to(kael.float16).float(), tm.half().float()),
        "to bf16": (m.to(kael.bfloat16).float(), tm.bfloat16().float()),
        "sum": (m.sum(), tm.sum()),
        "sum dim": (m.sum(0), tm.sum(0)),
        "sum keepdim": (a.sum((0, 2), keepdim=True), ta.sum((0, 2), keepdim=True)),
        "mean": (m.mean(1), tm.mean(1)),
        "zeros_like": (kael.zeros_like(m), torch.zeros_like(tm)),
        "ones_like": (kael.ones_like(m), torch.ones_like(tm)),
    }
    for name, (got, want) in cases.items():
        assert str(got.device) == "cuda:0", name
        torch.testing.assert_close(to_torch(torch, got), want, msg=name)
    for name, (got, want) in {"eq": (m == m[0], tm == tm[0]), "lt": (m < 0.5, tm < 0.5), "ge": (a >= b, ta >= tb)}.items():
        assert str(got.device) == "cuda:0", name
        assert torch.equal(to_torch(torch, got), want), name


@gpu
def test_gradients_on_the_device_against_torch(torch_cuda):
    torch = torch_cuda
    x_np, w_np = random_array((4, 5), 61), random_array((5,), 62)
    x, w = kael.tensor(x_np).to("cuda").requires_grad_(), kael.tensor(w_np).to("cuda").requires_grad_()
    tx, tw = (torch.from_numpy(v).cuda().requires_grad_() for v in (x_np, w_np))

    def loss_of(lib, x, w):
        h = lib.nn.functional.gelu(x * w + 0.1)
        return (lib.where(h > 0, h, h * 0.5) * x.sigmoid()).mean()

    loss, tloss = loss_of(kael, x, w), loss_of(torch, tx, tw)
    loss.backward()
    tloss.backward()
    torch.testing.assert_close(to_torch(torch, loss), tloss)
    assert str(x.grad.device) == "cuda:0"
    torch.testing.assert_close(to_torch(torch, x.grad), tx.grad)
    torch.testing.assert_close(to_torch(torch, w.grad), tw.grad)


@gpu
def test_matrix_products_against_torch(torch_cuda):
    torch = torch_cuda
    arrays = {"a": random_array((2, 3, 7, 5), 71), "b": random_array((3, 5, 4), 72), "w": random_array((6, 5), 73),
              "v": random_array((5,), 74), "bias": random_array((6,), 75)}
    k = {name: kael.tensor(v).to("cuda") for name, v in arrays.items()}
    t = {name: torch.from_numpy(v).cuda() for name, v in arrays.items()}
    cases = {
        "batched": (k["a"] @ k["b"], t["a"] @ t["b"]),
        "folded": (k["a"] @ k["w"].T, t["a"] @ t["w"].T),
        "matrix-vector": (k["w"] @ k["v"], t["w"] @ t["v"]),
        "bmm": (kael.bmm(k["a"][0], k["b"]), torch.bmm(t["a"][0], t["b"])),
        "linear": (kael.nn.functional.linear(k["a"], k["w"], k["bias"]),
                   torch.nn.functional.linear(t["a"], t["w"], t["bias"])),
    }
    for name, (got, want) in cases.items():
        assert str(got.device) == "cuda:0", name
        torch.testing.assert_close(to_torch(torch, got), want, msg=name)


@gpu
def test_linear_gradients_against_torch(torch_cuda):
    torch = torch_cuda
    arrays = [random_array((8, 5), 81), random_array((6, 5), 82), random_array((6,), 83)]
    k = [kael.tensor(v).to("cuda").requires_grad_() for v in arrays]
    t = [torch.from_numpy(v).cuda().requires_grad_() for v in arrays]
    (kael.nn.functional.gelu(kael.nn.functional.linear(*k)) * 0.5).mean().backward()
    (torch.nn.functional.gelu(torch.nn.functional.linear(*t)) * 0.5).mean().backward()
    for name, got, want in zip(("x", "weight", "bias"), k, t):
        assert str(got.grad.device) == "cuda:0", name
        torch.testing.assert_close(to_torch(torch, got.grad), want.grad, msg=name)


@gpu
def test_extremes_and_row_functions_against_torch(torch_cuda):
    torch = torch_cuda
    values = random_array((4, 300), 91)
    values[0, 5] = values[0, 7] = 50.0
    values[1, 9] = np.nan
    k, t = kael.tensor(values).to("cuda"), torch.from_numpy(values).cuda()
    for dim in (0, 1):
        got, want = k.max(dim), t.max(dim)
        torch.testing.assert_close(to_torch(torch, got.values), want.values, equal_nan=True)
        assert torch.equal(to_torch(torch, got.indices), want.indices), dim
        got, want = k[2:].min(dim), t[2:].min(dim)  # rows without the NaN
        assert torch.equal(to_torch(torch, got.indices), want.indices), dim
    arrays = [random_array((6, 40), 92), random_array((40,), 93), random_array((40,), 94)]
    kx, kw, kb = (kael.tensor(v).to("cuda").requires_grad_() for v in arrays)
    tx, tw, tb = (torch.from_numpy(v).cuda().requires_grad_() for v in arrays)

    def loss_of(lib, x, w, b):
        h = lib.nn.functional.layer_norm(x, (40,), w, b, 1e-5)
        return (lib.softmax(h, -1) * h).mean() + lib.log_softmax(h, 0).mean()

    loss, tloss = loss_of(kael, kx, kw, kb), loss_of(torch, tx, tw, tb)
    loss.backward()
    tloss.backward()
    torch.testing.assert_close(to_torch(torch, loss), tloss)
    for name, got, want in (("x", kx, tx), ("weight", kw, tw), ("bias", kb, tb)):
        torch.testing.assert_close(to_torch(torch, got.grad), want.grad, msg=name)


@gpu
@pytest.mark.parametrize("name, options", [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05)),
])
def test_optimizers_against_torch(torch_cuda, name, options):
    torch = torch_cuda
    x_np, y_np, w_np = random_array((16, 4), 101), random_array((16, 3), 102), random_array((3, 4), 103)
    results = []
    for lib in (kael, torch):
        to_device = (lambda a: kael.tensor(a).to("cuda")) if lib is kael else (lambda a: torch.from_numpy(a).cuda())
        x, y, w = to_device(x_np), to_device(y_np), to_device(w_np).requires_grad_()
        optimizer = getattr(lib.optim, name)([w], **options)
        for _ in range(3):
            optimizer.zero_grad()
            ((lib.nn.functional.linear(x, w) - y) ** 2).mean().backward()
            optimizer.step()
        results.append(w.detach())
    assert str(results[0].device) == "cuda:0"
    torch.testing.assert_close(to_torch(torch, results[0]), results[1])
