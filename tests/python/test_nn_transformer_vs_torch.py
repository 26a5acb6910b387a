"""kael.nn.MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against torch's, from
identical weights: outputs, attention weights and the gradients of the inputs and of every
parameter, with odd sizes, both layouts, boolean and float masks, key padding, norm_first and
GELU; parameter names and initialization as torch's; kael.nn.functional.multi_head_attention_forward
(the C++ forward the layers run) against torch's functional; and kael.all / kael.any as torch's."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

import kael

RTOL = 2e-5


def close(got, want, what):
    got = got.detach().numpy() if isinstance(got, kael.Tensor) else np.asarray(got)
    want = want.detach().numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0.0))
    assert err <= RTOL * scale, f"{what}: max error {err} (scale {scale})"


def pair(values, requires_grad=True):
    values = np.asarray(values, dtype=np.float32)
    return kael.tensor(values, requires_grad=requires_grad), torch.tensor(values, requires_grad=requires_grad)


def copy_weights(k_module, t_module):
    assert list(k_module.state_dict()) == list(t_module.state_dict())
    k_module.load_state_dict({n: kael.tensor(v.detach().numpy()) for n, v in t_module.state_dict().items()})


def check_gradients(k_module, t_module, k_inputs, t_inputs):
    for i, (k, t) in enumerate(zip(k_inputs, t_inputs)):
        close(k.grad, t.grad, f"d input {i}")
    t_params = dict(t_module.named_parameters())
    for name, p in k_module.named_parameters():
        close(p.grad, t_params[name].grad, f"d {name}")


def causal_bool(L):
    return np.triu(np.ones((L, L), dtype=bool), 1)  # True above the diagonal: hidden (torch's convention)


MHA_CASES = [
    # E, heads, L, S, N (None: unbatched), batch_first, self-attention, need_weights, average, mask kind, padding
    (12, 3, 5, 5, 2, False, True, True, True, None, False),
    (12, 4, 7, 7, 3, True, True, False, True, "bool-causal", False),
    (10, 2, 4, 6, 2, False, False, True, False, "float", True),
    (8, 1, 3, 5, 1, True, False, False, True, None, True),
    (9, 3, 6, 6, None, False, True, True, True, "bool-causal", False),
    (16, 4, 5, 5, 2, True, True, False, True, "bool-3d", True),
]


@pytest.mark.parametrize("case", MHA_CASES, ids=[str(i) for i in range(len(MHA_CASES))])
def test_multihead_attention_matches_torch(case):
    E, H, L, S, N, batch_first, self_attention, need_weights, average, mask_kind, padding = case
    torch.manual_seed(len(case) + E + L)
    t_mha = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    k_mha = kael.nn.MultiheadAttention(E, H, batch_first=batch_first)
    copy_weights(k_mha, t_mha)
    rng = np.random.default_rng(E * 7 + L)

    def shape(length):
        if N is None:
            return (length, E)
        return (N, length, E) if batch_first else (length, N, E)

    kq, tq = pair(rng.standard_normal(shape(L)))
    if self_attention:
        k_inputs, t_inputs = [kq], [tq]
        kk = kv = kq
        tk = tv = tq
    else:
        kk, tk = pair(rng.standard_normal(shape(S)))
        kv, tv = pair(rng.standard_normal(shape(S)))
        k_inputs, t_inputs = [kq, kk, kv], [tq, tk, tv]
    options_k, options_t = {}, {}
    if mask_kind == "bool-causal":
        mask = causal_bool(L)
        options_k["attn_mask"], options_t["attn_mask"] = kael.tensor(mask), torch.tensor(mask)
    elif mask_kind == "float":
        mask = rng.standard_normal((L, S)).astype(np.float32)
        options_k["attn_mask"], options_t["attn_mask"] = kael.tensor(mask), torch.tensor(mask)
    elif mask_kind == "bool-3d":
        mask = np.broadcast_to(causal_bool(L), (N * H, L, S)).copy()
        mask[0, -1, :2] = True  # one head's last row hides two more positions
        options_k["attn_mask"], options_t["attn_mask"] = kael.tensor(mask), torch.tensor(mask)
    if padding:
        pad = np.zeros((N, S), dtype=bool)
        pad[0, -1] = True  # the first sequence's last position is padding
        options_k["key_padding_mask"], options_t["key_padding_mask"] = kael.tensor(pad), torch.tensor(pad)
    k_out, k_weights = k_mha(kq, kk, kv, need_weights=need_weights, average_attn_weights=average, **options_k)
    t_out, t_weights = t_mha(tq, tk, tv, need_weights=need_weights, average_attn_weights=average, **options_t)
    close(k_out, t_out, "output")
    if need_weights:
        close(k_weights, t_weights, "attention weights")
    else:
        assert k_weights is None and t_weights is None
    grad = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (k_out * kael.tensor(grad)).sum().backward()
    (t_out * torch.tensor(grad)).sum().backward()
    check_gradients(k_mha, t_mha, k_inputs, t_inputs)


def test_multihead_attention_with_kdim_vdim_matches_torch():
    torch.manual_seed(3)
    t_mha = torch.nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)
    k_mha = kael.nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)
    assert [n for n, _ in k_mha.named_parameters()] == [n for n, _ in t_mha.named_parameters()]
    copy_weights(k_mha, t_mha)
    rng = np.random.default_rng(5)
    (kq, tq), (kk, tk), (kv, tv) = (pair(rng.standard_normal(s)) for s in ((2, 4, 8), (2, 6, 5), (2, 6, 3)))
    k_out, k_w = k_mha(kq, kk, kv)
    t_out, t_w = t_mha(tq, tk, tv)
    close(k_out, t_out, "output")
    close(k_w, t_w, "weights")
    k_out.sum().backward()
    t_out.sum().backward()
    check_gradients(k_mha, t_mha, [kq, kk, kv], [tq, tk, tv])


def test_multihead_attention_initialization_is_torchs():
    k_mha = kael.nn.MultiheadAttention(64, 4)
    bound = math.sqrt(6.0 / (64 + 3 * 64))  # Xavier-uniform over (3E, E)
    w = k_mha.in_proj_weight.detach().numpy()
    assert w.shape == (192, 64) and np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not k_mha.in_proj_bias.detach().numpy().any() and not k_mha.out_proj.bias.detach().numpy().any()
    out_bound = 1 / math.sqrt(64)  # out_proj keeps Linear's initialization
    assert np.abs(k_mha.out_proj.weight.detach().numpy()).max() <= out_bound


def test_multihead_attention_errors():
    with pytest.raises(ValueError, match="divisible"):
        kael.nn.MultiheadAttention(10, 3)
    mha = kael.nn.MultiheadAttention(8, 2)
    x = kael.randn(3, 2, 8)
    with pytest.raises(ValueError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="attn_mask has shape"):
        mha(x, x, x, attn_mask=kael.zeros(2, 3))
    with pytest.raises(ValueError, match="key_padding_mask has shape"):
        mha(x, x, x, key_padding_mask=kael.zeros(3, 2).bool())
    with pytest.raises(ValueError, match="embedding dimension"):
        mha(kael.randn(3, 2, 7), x, x)


LAYER_CASES = [
    # d_model, heads, ff, norm_first, activation, batch_first, mask, padding
    (12, 3, 20, False, "relu", False, None, False),
    (12, 4, 16, True, "gelu", True, "bool-causal", False),
    (10, 2, 14, False, "gelu", True, None, True),
    (8, 2, 12, True, "relu", False, "float-causal", True),
]


@pytest.mark.parametrize("case", LAYER_CASES, ids=[str(i) for i in range(len(LAYER_CASES))])
def test_transformer_encoder_matches_torch(case):
    d, H, ff, norm_first, activation, batch_first, mask_kind, padding = case
    torch.manual_seed(d + ff)
    options = dict(dim_feedforward=ff, dropout=0.0, activation=activation, batch_first=batch_first,
                   norm_first=norm_first)
    t_layer = torch.nn.TransformerEncoderLayer(d, H, **options)
    k_layer = kael.nn.TransformerEncoderLayer(d, H, **options)
    copy_weights(k_layer, t_layer)
    t_enc = torch.nn.TransformerEncoder(t_layer, 2, norm=torch.nn.LayerNorm(d), enable_nested_tensor=False)
    k_enc = kael.nn.TransformerEncoder(k_layer, 2, norm=kael.nn.LayerNorm(d))
    with torch.no_grad():  # the two copies differ, so the test sees each layer's own weights used
        t_enc.layers[1].linear1.weight.mul_(0.5)
    copy_weights(k_enc, t_enc)
    N, L = 3, 6
    rng = np.random.default_rng(d * 3 + ff)
    kx, tx = pair(rng.standard_normal((N, L, d) if batch_first else (L, N, d)))
    options_k, options_t = {}, {}
    if mask_kind == "bool-causal":
        options_k["mask"], options_t["mask"] = kael.tensor(causal_bool(L)), torch.tensor(causal_bool(L))
    elif mask_kind == "float-causal":
        mask = torch.nn.Transformer.generate_square_subsequent_mask(L)
        options_k["mask"], options_t["mask"] = kael.tensor(mask.numpy()), mask
    if padding:
        pad = np.zeros((N, L), dtype=bool)
        pad[1, -2:] = True
        options_k["src_key_padding_mask"], options_t["src_key_padding_mask"] = kael.tensor(pad), torch.tensor(pad)
    k_out = k_enc(kx, **options_k)
    t_out = t_enc(tx, **options_t)
    close(k_out, t_out, "output")
    grad = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (k_out * kael.tensor(grad)).sum().backward()
    (t_out * torch.tensor(grad)).sum().backward()
    check_gradients(k_enc, t_enc, [kx], [tx])


def test_encoder_layers_are_independent_copies_and_dropout_follows_the_mode():
    layer = kael.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5)
    encoder = kael.nn.TransformerEncoder(layer, 3)
    weights = [m.linear1.weight for m in encoder.layers]
    assert len({id(w) for w in weights}) == 3 and all(w is not layer.linear1.weight for w in weights)
    assert all(w.tolist() == layer.linear1.weight.tolist() for w in weights)
    x = kael.randn(4, 2, 8)
    encoder.eval()
    assert encoder(x).tolist() == encoder(x).tolist()  # no dropout in eval mode
    encoder.train()
    assert encoder(x).tolist() != encoder(x).tolist()
    clone = copy.deepcopy(kael.nn.Dropout(0.25))
    assert clone.p == 0.25 and clone.training
    with pytest.raises(TypeError, match="deepcopy of GPT"):
        copy.deepcopy(kael.nn.GPT(kael.nn.GptConfig(vocab_size=11, n_positions=8, n_layer=1, n_head=2, n_embd=8)))


@pytest.mark.parametrize("values", [
    np.array([[1.0, 0.0, np.nan], [2.0, 3.0, -1.0]], dtype=np.float32),
    np.array([[True, False], [True, True], [False, False]]),
    np.array([[0, 5, 0], [1, 1, 1]], dtype=np.int64),
    np.array([[0, 7], [9, 3]], dtype=np.uint8),
    np.zeros((0, 3), dtype=np.float32),
])
def test_all_and_any_match_torch(values):
    k, t = kael.tensor(values), torch.tensor(values)
    for name in ("all", "any"):
        cases = [((), {}), ((0,), {}), ((1,), {"keepdim": True}), ((-1,), {})]
        for args, kwargs in cases:
            got, want = getattr(k, name)(*args, **kwargs), getattr(t, name)(*args, **kwargs)
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (name, args)
            assert got.tolist() == want.tolist(), (name, args, kwargs)
        assert getattr(kael, name)(k).tolist() == getattr(torch, name)(t).tolist()


@pytest.mark.parametrize("separate", [False, True])
def test_functional_multi_head_attention_forward_matches_torch(separate):
    E, H, L, S, N = 8, 2, 3, 5, 2
    kdim, vdim = (6, 4) if separate else (E, E)
    rng = np.random.default_rng(11 + separate)
    names = ["q_proj_weight", "k_proj_weight", "v_proj_weight"] if separate else ["in_proj_weight"]
    shapes = [(E, E), (E, kdim), (E, vdim)] if separate else [(3 * E, E)]
    weights = {n: pair(rng.standard_normal(s) * 0.3) for n, s in zip(names, shapes)}
    in_bias, out_weight, out_bias = (pair(rng.standard_normal(s) * 0.3) for s in ((3 * E,), (E, E), (E,)))
    (kq, tq), (kk, tk), (kv, tv) = (pair(rng.standard_normal(s)) for s in ((L, N, E), (S, N, kdim), (S, N, vdim)))
    mask = rng.standard_normal((N * H, L, S)).astype(np.float32)
    pad = np.zeros((N, S), dtype=bool)
    pad[1, 0] = True
    results = []
    for lib, i, F in ((kael, 0, kael.nn.functional), (torch, 1, torch.nn.functional)):
        w = {n: p[i] for n, p in weights.items()}
        results.append(F.multi_head_attention_forward(
            (kq, tq)[i], (kk, tk)[i], (kv, tv)[i], E, H, w.get("in_proj_weight"), in_bias[i], None, None, False, 0.0,
            out_weight[i], out_bias[i], training=True, key_padding_mask=lib.tensor(pad),
            attn_mask=lib.tensor(mask), average_attn_weights=False, use_separate_proj_weight=separate,
            q_proj_weight=w.get("q_proj_weight"), k_proj_weight=w.get("k_proj_weight"),
            v_proj_weight=w.get("v_proj_weight")))
    (k_out, k_w), (t_out, t_w) = results
    close(k_out, t_out, "output")
    close(k_w, t_w, "per-head weights")
    k_out.sum().backward()
    t_out.sum().backward()
    for name, (k, t) in [*weights.items(), ("in_bias", in_bias), ("out_weight", out_weight), ("query", (kq, tq)),
                         ("key", (kk, tk)), ("value", (kv, tv))]:
        close(k.grad, t.grad, f"d {name}")


def test_multihead_attention_without_bias_on_unbatched_input_matches_torch():
    torch.manual_seed(8)
    t_mha = torch.nn.MultiheadAttention(6, 3, bias=False)
    k_mha = kael.nn.MultiheadAttention(6, 3, bias=False)
    assert [n for n, _ in k_mha.named_parameters()] == ["in_proj_weight", "out_proj.weight"]
    copy_weights(k_mha, t_mha)
    rng = np.random.default_rng(8)
    (kq, tq), (kk, tk) = pair(rng.standard_normal((4, 6))), pair(rng.standard_normal((5, 6)))
    pad = np.array([False, True, False, False, True])
    k_out, k_w = k_mha(kq, kk, kk, key_padding_mask=kael.tensor(pad))
    t_out, t_w = t_mha(tq, tk, tk, key_padding_mask=torch.tensor(pad))
    close(k_out, t_out, "output")
    close(k_w, t_w, "weights")
    assert not k_w.detach().numpy()[:, pad].any()  # hidden keys get no weight
    k_out.sum().backward()
    t_out.sum().backward()
    check_gradients(k_mha, t_mha, [kq, kk], [tq, tk])


def test_functional_refusals_and_the_causal_mask():
    mha = kael.nn.MultiheadAttention(4, 2)
    x = kael.randn(3, 1, 4)
    F = kael.nn.functional
    args = (x, x, x, 4, 2, mha.in_proj_weight, mha.in_proj_bias)
    with pytest.raises(ValueError, match="bias_k, bias_v and add_zero_attn"):
        F.multi_head_attention_forward(*args, kael.zeros(1, 1, 4), None, False, 0.0, mha.out_proj.weight, None)
    with pytest.raises(ValueError, match="static_k"):
        F.multi_head_attention_forward(*args, None, None, False, 0.0, mha.out_proj.weight, None, static_k=x)
    with pytest.raises(TypeError, match="only bool and floating"):
        mha(x, x, x, attn_mask=kael.zeros(3, 3).long())
    with pytest.raises(ValueError, match="add_bias_kv"):
        kael.nn.MultiheadAttention(4, 2, add_bias_kv=True)
    want = torch.nn.Transformer.generate_square_subsequent_mask(5)
    assert kael.nn.transformer.generate_square_subsequent_mask(5).tolist() == want.tolist()
