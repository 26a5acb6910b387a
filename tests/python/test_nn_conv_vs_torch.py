"""kael's convolution, pooling and normalization layers against torch's: forward values and the
gradients of input, weight and bias on ragged shapes (odd sizes; stride, padding, dilation and
groups combined), the layers' parameters, buffers and train / eval behaviour, and a small conv
net (PyTorch's MNIST example's Net on 12x12 images) trained with Adadelta and StepLR beside the
same net in torch from identical weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as F

RTOL = 1e-4


def close(got, want, what, rtol=RTOL):
    got = got.detach().numpy() if isinstance(got, kael.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0.0))
    assert err <= rtol * scale, f"{what}: max error {err} (scale {scale})"


def pair(values):
    """kael and torch leaves holding the same float32 values."""
    k = kael.tensor(values.astype(np.float32), requires_grad=True)
    t = torch.tensor(values.astype(np.float32), requires_grad=True)
    return k, t


def run_both(k_fn, t_fn, arrays, seed=0):
    """Forward both; backward a fixed random weighting of the output; compare out and grads."""
    ks, ts = zip(*[pair(a) if a is not None else (None, None) for a in arrays])
    k_out, t_out = k_fn(*ks), t_fn(*ts)
    close(k_out, t_out, "forward")
    weights = np.random.default_rng(seed).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (k_out * kael.tensor(weights)).sum().backward()
    (t_out * torch.tensor(weights)).sum().backward()
    for i, (k, t) in enumerate(zip(ks, ts)):
        if k is not None:
            close(k.grad, t.grad, f"gradient of argument {i}")


CONV2D_CASES = [
    # N, C, H, W, O, (kh, kw), stride, padding, dilation, groups, bias
    (2, 3, 7, 9, 5, (3, 3), 1, 0, 1, 1, True),
    (1, 4, 11, 6, 6, (3, 2), (2, 1), (1, 2), 1, 2, True),
    (3, 6, 9, 10, 4, (2, 3), 2, 1, (2, 1), 2, False),
    (2, 5, 13, 8, 7, (5, 3), (3, 2), (2, 1), (1, 2), 1, True),
    (2, 6, 5, 7, 6, (3, 3), 1, 1, 1, 6, True),        # depthwise
    (3, 8, 6, 5, 12, (1, 1), 1, 0, 1, 4, True),       # pointwise, grouped
    (2, 3, 6, 6, 4, (1, 1), 2, 1, 1, 1, False),       # 1x1 with stride and padding
    (1, 1, 28, 28, 32, (3, 3), 1, 0, 1, 1, True),     # the MNIST example's first layer
    (5, 32, 8, 8, 64, (3, 3), 1, 0, 1, 1, True),      # its second, smaller images
]


@pytest.mark.parametrize("case", CONV2D_CASES, ids=[str(i) for i in range(len(CONV2D_CASES))])
def test_conv2d_matches_torch(case):
    N, C, H, W, O, k, stride, padding, dilation, groups, bias = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, C, H, W))
    w = rng.standard_normal((O, C // groups, *k)) * 0.3
    b = rng.standard_normal(O) if bias else None
    run_both(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups),
             lambda x, w, b: TF.conv2d(x, w, b, stride, padding, dilation, groups), [x, w, b])


CONV1D_CASES = [
    # N, C, L, O, k, stride, padding, dilation, groups, bias
    (2, 3, 11, 5, 3, 1, 0, 1, 1, True),
    (3, 4, 17, 6, 4, 3, 2, 2, 2, False),
    (1, 6, 9, 6, 1, 1, 0, 1, 3, True),
    (2, 5, 20, 3, 5, 2, 2, 3, 1, True),
]


@pytest.mark.parametrize("case", CONV1D_CASES, ids=[str(i) for i in range(len(CONV1D_CASES))])
def test_conv1d_matches_torch(case):
    N, C, L, O, k, stride, padding, dilation, groups, bias = case
    rng = np.random.default_rng(2)
    x = rng.standard_normal((N, C, L))
    w = rng.standard_normal((O, C // groups, k)) * 0.3
    b = rng.standard_normal(O) if bias else None
    run_both(lambda x, w, b: F.conv1d(x, w, b, stride, padding, dilation, groups),
             lambda x, w, b: TF.conv1d(x, w, b, stride, padding, dilation, groups), [x, w, b])


def test_conv_unbatched_and_string_padding():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 8, 7)), rng.standard_normal((4, 3, 3, 5))
    run_both(lambda x, w: F.conv2d(x, w, padding="same"), lambda x, w: TF.conv2d(x, w, padding="same"), [x, w])
    run_both(lambda x, w: F.conv2d(x, w, padding="valid", dilation=(2, 1)),
             lambda x, w: TF.conv2d(x, w, padding="valid", dilation=(2, 1)), [x, w])
    x1, w1 = rng.standard_normal((3, 10)), rng.standard_normal((2, 3, 3))
    run_both(lambda x, w: F.conv1d(x, w, padding="same"), lambda x, w: TF.conv1d(x, w, padding="same"), [x1, w1])


def test_conv_errors():
    x = kael.zeros(1, 4, 5, 5)
    with pytest.raises(ValueError, match="input channels"):
        F.conv2d(x, kael.zeros(2, 3, 3, 3))
    with pytest.raises(ValueError, match="divide by groups"):
        F.conv2d(x, kael.zeros(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        F.conv2d(x, kael.zeros(2, 4, 7, 3))
    with pytest.raises(ValueError, match="stride must be positive"):
        F.conv2d(x, kael.zeros(2, 4, 3, 3), stride=0)
    with pytest.raises(ValueError, match="bias must have shape"):
        F.conv2d(x, kael.zeros(2, 4, 3, 3), kael.zeros(3))
    with pytest.raises(ValueError, match="3-D or 4-D"):
        F.conv2d(kael.zeros(4, 5), kael.zeros(2, 4, 3, 3))
    with pytest.raises(TypeError):
        F.conv2d(x.to(kael.float64), kael.zeros(2, 4, 3, 3, dtype=kael.float64))
    with pytest.raises(ValueError, match="even"):
        F.conv2d(x, kael.zeros(2, 4, 2, 2), padding="same")
    with pytest.raises(ValueError, match="2 values"):
        F.conv2d(x, kael.zeros(2, 4, 3, 3), stride=(1, 1, 1))
    # padding="same" reads the weight's spatial sizes: a weight of the wrong rank gets the
    # convolution's message (never a read past its shape), a huge dilation a ValueError.
    with pytest.raises(ValueError, match="4-D weight"):
        F.conv2d(x, kael.tensor(1.0), padding="same")
    with pytest.raises(ValueError, match="3-D weight"):
        F.conv1d(kael.zeros(1, 4, 5), kael.zeros(2, 4), padding="same")
    with pytest.raises(ValueError, match="dilation"):
        F.conv2d(x, kael.zeros(2, 4, 3, 3), padding="same", dilation=2**62)


MAX_POOL_CASES = [
    # (N, C, H, W), kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((1, 2, 9, 7), 3, 2, 1, 1, False),
    ((2, 2, 9, 7), 3, 2, 1, 1, True),
    ((1, 3, 10, 11), (3, 2), (2, 3), (1, 1), (2, 1), True),
    ((2, 1, 5, 6), 2, 1, 0, 2, False),
    ((3, 4, 7), 2, None, 0, 1, True),  # unbatched
]


@pytest.mark.parametrize("case", MAX_POOL_CASES, ids=[str(i) for i in range(len(MAX_POOL_CASES))])
def test_max_pool2d_matches_torch(case):
    shape, k, s, p, d, ceil = case
    # Distinct values: which element is the largest is then unambiguous.
    x = np.random.default_rng(4).permutation(int(np.prod(shape))).reshape(shape) / 10.0
    run_both(lambda x: F.max_pool2d(x, k, s, p, d, ceil), lambda x: TF.max_pool2d(x, k, s, p, d, ceil), [x])
    _, k_idx = F.max_pool2d(kael.tensor(x.astype(np.float32)), k, s, p, d, ceil, return_indices=True)
    _, t_idx = TF.max_pool2d(torch.tensor(x.astype(np.float32)), k, s, p, d, ceil, return_indices=True)
    assert np.array_equal(k_idx.numpy(), t_idx.numpy())


def test_max_pool1d_matches_torch():
    x = np.random.default_rng(5).permutation(2 * 3 * 13).reshape(2, 3, 13) / 7.0
    run_both(lambda x: F.max_pool1d(x, 3, 2, 1, 2, True), lambda x: TF.max_pool1d(x, 3, 2, 1, 2, True), [x])
    run_both(lambda x: F.max_pool1d(x, 2), lambda x: TF.max_pool1d(x, 2), [x[0]])


def test_max_pool_ties_and_nan_follow_torch():
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, float("nan"), 2.0], [0.0, 3.0, 3.0]]]], dtype=np.float32)
    k_out, k_idx = F.max_pool2d(kael.tensor(x), 2, 1, return_indices=True)
    t_out, t_idx = TF.max_pool2d(torch.tensor(x), 2, 1, return_indices=True)
    assert np.array_equal(k_idx.numpy(), t_idx.numpy())
    np.testing.assert_array_equal(k_out.numpy(), t_out.numpy())


AVG_POOL_CASES = [
    # (N, C, H, W), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 3, 8, 8), 2, None, 0, False, True, None),
    ((1, 2, 9, 7), 3, 2, 1, False, True, None),
    ((2, 2, 9, 7), 3, 2, 1, True, False, None),
    ((1, 3, 10, 11), (3, 2), (2, 3), (1, 1), True, True, None),
    ((2, 1, 5, 6), (2, 3), 1, (1, 1), False, False, 4),
]


@pytest.mark.parametrize("case", AVG_POOL_CASES, ids=[str(i) for i in range(len(AVG_POOL_CASES))])
def test_avg_pool2d_matches_torch(case):
    shape, k, s, p, ceil, include, divisor = case
    x = np.random.default_rng(6).standard_normal(shape)
    run_both(lambda x: F.avg_pool2d(x, k, s, p, ceil, include, divisor),
             lambda x: TF.avg_pool2d(x, k, s, p, ceil, include, divisor), [x])


@pytest.mark.parametrize("shape,size", [((2, 3, 9, 7), (4, 3)), ((1, 2, 5, 5), 1), ((2, 3, 6, 10), (None, 4)),
                                        ((3, 7, 5), (7, 2))])
def test_adaptive_avg_pool2d_matches_torch(shape, size):
    x = np.random.default_rng(7).standard_normal(shape)
    run_both(lambda x: F.adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size), [x])


def test_pool_errors():
    x = kael.zeros(1, 2, 4, 4)
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="empty"):
        F.max_pool2d(x, 5)
    with pytest.raises(ValueError, match="positive"):
        F.avg_pool2d(x, 0)
    with pytest.raises(ValueError, match="3-D or 4-D"):
        F.adaptive_avg_pool2d(kael.zeros(4), 2)


@pytest.mark.parametrize("shape,affine", [((6, 4), True), ((5, 3, 7), False), ((4, 3, 5, 6), True)])
def test_batch_norm_train_and_eval_match_torch(shape, affine):
    k_cls = kael.nn.BatchNorm2d if len(shape) == 4 else kael.nn.BatchNorm1d
    t_cls = torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d
    C = shape[1]
    k_bn, t_bn = k_cls(C, momentum=0.3, affine=affine), t_cls(C, momentum=0.3, affine=affine)
    assert list(k_bn.state_dict()) == list(t_bn.state_dict())
    rng = np.random.default_rng(8)
    if affine:
        w, b = rng.standard_normal(C), rng.standard_normal(C)
        k_bn.load_state_dict({**k_bn.state_dict(), "weight": kael.tensor(w), "bias": kael.tensor(b)})
        t_bn.load_state_dict({**t_bn.state_dict(), "weight": torch.tensor(w), "bias": torch.tensor(b)})
    for step in range(3):
        x = rng.standard_normal(shape) * (step + 1) + step
        run_both(k_bn, t_bn, [x], seed=step)
        close(k_bn.running_mean, t_bn.running_mean, "running_mean")
        close(k_bn.running_var, t_bn.running_var, "running_var")
    assert int(k_bn.num_batches_tracked.item()) == 3
    k_bn.eval()
    t_bn.eval()
    run_both(k_bn, t_bn, [rng.standard_normal(shape)])
    close(k_bn.running_mean, t_bn.running_mean, "running_mean after eval")


def test_batch_norm_cumulative_average_and_functional():
    k_bn, t_bn = kael.nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    rng = np.random.default_rng(9)
    for _ in range(3):
        x = rng.standard_normal((5, 3))
        close(k_bn(kael.tensor(x.astype(np.float32))), t_bn(torch.tensor(x.astype(np.float32))), "forward")
    close(k_bn.running_var, t_bn.running_var, "running_var")
    x = rng.standard_normal((4, 3, 5))
    mean, var = rng.standard_normal(3), rng.random(3) + 0.5
    run_both(lambda x, w, b: F.batch_norm(x, kael.tensor(mean.astype(np.float32)), kael.tensor(var.astype(np.float32)),
                                          w, b),
             lambda x, w, b: TF.batch_norm(x, torch.tensor(mean.astype(np.float32)),
                                           torch.tensor(var.astype(np.float32)), w, b),
             [x, rng.standard_normal(3), rng.standard_normal(3)])
    with pytest.raises(ValueError, match="more than 1 value"):
        kael.nn.BatchNorm1d(3)(kael.zeros(1, 3))
    with pytest.raises(ValueError, match="expected 4D"):
        kael.nn.BatchNorm2d(3)(kael.zeros(2, 3, 4))


@pytest.mark.parametrize("shape,groups", [((3, 6, 5, 4), 3), ((2, 4, 7), 4), ((2, 6, 3, 3), 1)])
def test_group_norm_matches_torch(shape, groups):
    rng = np.random.default_rng(10)
    C = shape[1]
    run_both(lambda x, w, b: F.group_norm(x, groups, w, b), lambda x, w, b: TF.group_norm(x, groups, w, b),
             [rng.standard_normal(shape) * 3 + 1, rng.standard_normal(C), rng.standard_normal(C)])
    layer = kael.nn.GroupNorm(groups, C)
    assert list(layer.state_dict()) == list(torch.nn.GroupNorm(groups, C).state_dict())
    with pytest.raises(ValueError, match="divisible"):
        kael.nn.GroupNorm(4, 6)


def test_dropout2d_drops_whole_channels():
    kael.manual_seed(0)
    x = kael.ones(8, 16, 5, 5)
    layer = kael.nn.Dropout2d(0.25)
    y = layer(x).numpy()
    per_channel = y.reshape(8, 16, 25)
    assert np.all((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.75).all(-1))
    dropped = (per_channel == 0).all(-1).mean()
    assert 0.1 < dropped < 0.4
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())
    y1 = F.dropout1d(kael.ones(4, 8, 6), 0.5).numpy()
    assert np.all((y1 == 0).all(-1) | (y1 == 2).all(-1))


def test_layers_match_torch_parameters_and_init():
    k_conv, t_conv = kael.nn.Conv2d(6, 8, (3, 5), stride=2, padding=1, groups=2), torch.nn.Conv2d(6, 8, (3, 5), 2, 1, groups=2)
    assert {n: tuple(p.shape) for n, p in k_conv.named_parameters()} == \
        {n: tuple(p.shape) for n, p in t_conv.named_parameters()}
    bound = 1 / np.sqrt(3 * 3 * 5)
    w = k_conv.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(k_conv.bias.detach().numpy()).max() <= bound
    assert repr(k_conv) == repr(t_conv)
    k1 = kael.nn.Conv1d(4, 6, 3, bias=False)
    assert k1.bias is None and tuple(k1.weight.shape) == (6, 4, 3)
    x = np.random.default_rng(11).standard_normal((2, 3, 4, 5))
    close(kael.nn.Flatten()(kael.tensor(x)), torch.nn.Flatten()(torch.tensor(x)), "Flatten")
    close(kael.nn.Flatten(0, 2)(kael.tensor(x)), torch.nn.Flatten(0, 2)(torch.tensor(x)), "Flatten(0, 2)")
    close(kael.nn.MaxPool2d(2)(kael.tensor(x)), torch.nn.MaxPool2d(2)(torch.tensor(x)), "MaxPool2d")
    close(kael.nn.AvgPool2d(2, 1)(kael.tensor(x)), torch.nn.AvgPool2d(2, 1)(torch.tensor(x)), "AvgPool2d")
    close(kael.nn.AdaptiveAvgPool2d((2, 3))(kael.tensor(x)), torch.nn.AdaptiveAvgPool2d((2, 3))(torch.tensor(x)),
          "AdaptiveAvgPool2d")


class KaelNet(kael.nn.Module):
    """PyTorch's MNIST example's Net (mnist/main.py), on 12x12 images: 64 * 4 * 4 = 1024 inputs to fc1."""

    def __init__(self, dropout):
        super().__init__()
        self.conv1 = kael.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = kael.nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = kael.nn.Dropout(dropout)
        self.dropout2 = kael.nn.Dropout(dropout)
        self.fc1 = kael.nn.Linear(1024, 128)
        self.fc2 = kael.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = kael.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.fc1 = torch.nn.Linear(1024, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = TF.relu(self.conv1(x))
        x = TF.relu(self.conv2(x))
        x = TF.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = TF.relu(self.fc1(x))
        return TF.log_softmax(self.fc2(x), dim=1)


def test_mnist_net_trains_as_torch_with_adadelta_and_steplr():
    torch.manual_seed(0)
    t_net = TorchNet()
    k_net = KaelNet(dropout=0.0)  # dropout's masks come from another generator: off on both sides
    k_net.load_state_dict({n: kael.tensor(p.detach().numpy()) for n, p in t_net.state_dict().items()})
    k_opt, t_opt = kael.optim.Adadelta(k_net.parameters(), lr=1.0), torch.optim.Adadelta(t_net.parameters(), lr=1.0)
    k_sched = kael.optim.lr_scheduler.StepLR(k_opt, step_size=1, gamma=0.7)
    t_sched = torch.optim.lr_scheduler.StepLR(t_opt, step_size=1, gamma=0.7)
    rng = np.random.default_rng(12)
    for step in range(6):
        x = rng.standard_normal((16, 1, 12, 12)).astype(np.float32)
        y = rng.integers(0, 10, 16)
        k_opt.zero_grad()
        t_opt.zero_grad()
        k_loss = F.nll_loss(k_net(kael.tensor(x)), kael.tensor(y))
        t_loss = TF.nll_loss(t_net(torch.tensor(x)), torch.tensor(y))
        assert abs(k_loss.item() - t_loss.item()) <= 1e-4, (step, k_loss.item(), t_loss.item())
        k_loss.backward()
        t_loss.backward()
        k_opt.step()
        t_opt.step()
        k_sched.step()
        t_sched.step()
        assert k_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr())
    for name, p in t_net.named_parameters():
        close(dict(k_net.named_parameters())[name], p, name, rtol=1e-3)
