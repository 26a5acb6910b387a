"""kael.nn and the book's GPT (kael::nn::GPT) against transformers: logits of seeded GPT-2
checkpoints (GPT-2 small's shape, a "transformer."-prefixed one with lm_head and the mask
buffers, an F16 one), greedy ids, the loss and every parameter's gradient; a Python subclass of
kael.nn.Module that trains; state_dict round trips and load_state_dict's all-or-nothing rule."""
import json

import numpy as np
import pytest
import torch

import gpt2_reference
import kael
import kael.nn.functional as F


def config_of(directory) -> kael.nn.GptConfig:
    return kael.nn.GptConfig(**{k: v for k, v in json.loads((directory / "config.json").read_text()).items()
                                if k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd")})


def hf_logits(directory, ids):
    with torch.no_grad():
        return gpt2_reference.load_hf(directory)(torch.tensor(ids)).logits.numpy()


def largest(a) -> float:
    return float(np.abs(np.asarray(a)).max())


def test_gpt2_small_logits_and_greedy_ids_equal_transformers(gpt2_small_dir):
    model = kael.GPT()  # GPT-2 small, as the chapter has it
    model.load_gpt2(gpt2_small_dir / "model.safetensors")
    model.to("cpu")
    model.eval()
    ids = [gpt2_reference.prompt_ids(9, seed=5)]
    with kael.no_grad():
        logits = model(kael.tensor(ids))
    expected = hf_logits(gpt2_small_dir, ids)
    assert logits.shape == (1, 9, 50257)
    np.testing.assert_allclose(logits.numpy(), expected, rtol=0, atol=1e-4 * largest(expected))
    out = kael.generate(model, kael.tensor(ids), max_new_tokens=8, temperature=0)
    with torch.no_grad():
        hf = gpt2_reference.load_hf(gpt2_small_dir).generate(torch.tensor(ids), max_new_tokens=8, do_sample=False,
                                                               pad_token_id=50256)
    assert out.tolist() == hf.tolist()


def test_prefixed_checkpoint_with_lm_head_and_mask_buffers(tmp_path):
    directory = gpt2_reference.make_checkpoint(tmp_path / "prefixed", n_layer=2, n_head=4, n_embd=64, n_positions=64,
                                               seed=3, prefix=True, lm_head=True, mask_buffers=True)
    model = kael.GPT(config_of(directory)).load_gpt2(directory)
    ids = [gpt2_reference.prompt_ids(13, seed=1), gpt2_reference.prompt_ids(13, seed=2)]
    expected = hf_logits(directory, ids)
    np.testing.assert_allclose(model(ids).detach().numpy(), expected, rtol=0, atol=1e-4 * largest(expected))


@pytest.mark.parametrize("tied", [True, False])
def test_transformers_loads_a_saved_gpt(tmp_path, tied):
    kael.manual_seed(6)
    config = kael.nn.GptConfig(n_layer=2, n_head=4, n_embd=32, n_positions=48, tied_embeddings=tied)
    model = kael.GPT(config).eval()
    model.save_gpt2(tmp_path / "saved")
    hf = gpt2_reference.load_hf(tmp_path / "saved")
    assert hf.config.tie_word_embeddings == tied and hf.config.n_layer == 2
    ids = [gpt2_reference.prompt_ids(11, seed=3)]
    with torch.no_grad():
        expected = hf(torch.tensor(ids)).logits.numpy()
    with kael.no_grad():
        ours = model(kael.tensor(ids)).numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-4 * largest(expected))
    # And back: the saved file loads into a fresh model bit for bit.
    again = kael.GPT(config).load_gpt2(tmp_path / "saved")
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert np.array_equal(a.numpy(), b.numpy()), name


def test_f16_checkpoint_and_the_kv_cache(gpt2_f16_dir):
    model = kael.GPT(config_of(gpt2_f16_dir)).load_gpt2(gpt2_f16_dir).eval()
    ids = np.array([gpt2_reference.prompt_ids(20, seed=4)])
    full = model(ids).detach()
    expected = hf_logits(gpt2_f16_dir, ids)
    np.testing.assert_allclose(full.numpy(), expected, rtol=0, atol=1e-4 * largest(expected))
    model.reset_kv_cache()
    parts = [model(ids[:, :11], use_cache=True)] + [model(ids[:, t:t + 1], use_cache=True) for t in range(11, 20)]
    np.testing.assert_allclose(kael.cat(parts, 1).detach().numpy(), full.numpy(), rtol=0, atol=1e-5 * largest(full.numpy()))
    with pytest.raises(kael.ValueError, match="reset_kv_cache"):
        model(np.concatenate([ids, ids])[:, :1], use_cache=True)
    model.reset_kv_cache()


def test_loss_and_every_gradient_equal_torchs(tmp_path):
    directory = gpt2_reference.make_checkpoint(tmp_path / "grad", n_layer=2, n_head=2, n_embd=32, n_positions=32,
                                               vocab_size=97, seed=6)
    model = kael.GPT(config_of(directory)).load_gpt2(directory)
    hf = gpt2_reference.load_hf(directory).train()
    for module in hf.modules():  # training mode for the gradients, without GPT2Config's dropout
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    ids = np.random.default_rng(0).integers(0, 97, size=(3, 17))
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 97), kael.tensor(ids[:, 1:].reshape(-1)))
    loss.backward()
    out = hf(torch.tensor(ids[:, :-1]))
    hf_loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, 97), torch.tensor(ids[:, 1:].reshape(-1)))
    hf_loss.backward()
    assert loss.item() == pytest.approx(hf_loss.item(), rel=1e-5)
    grads = {name: p.grad for name, p in model.named_parameters()}
    checked = 0
    for name, p in hf.named_parameters():
        kael_name = kael.nn.translated_gpt2_name(name)
        if kael_name not in grads:
            continue
        want = p.grad.numpy()
        if kael.nn.stored_transposed(kael_name):
            want = want.T
        np.testing.assert_allclose(grads[kael_name].numpy(), want, rtol=0, atol=1e-5 * largest(want), err_msg=kael_name)
        checked += 1
    assert checked == len(grads) == 4 + 12 * 2


class TinyMLP(kael.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = kael.nn.Linear(1, 32)
        self.out = kael.nn.Linear(32, 1)
        self.scale = kael.nn.Parameter(kael.ones(1))
        self.register_buffer("offset", kael.zeros(1))

    def forward(self, x):
        return self.out(F.gelu(self.hidden(x))) * self.scale + self.offset


def test_a_python_subclass_trains_and_round_trips(tmp_path):
    kael.manual_seed(0)
    net = TinyMLP()
    assert [n for n, _ in net.named_parameters()] == ["scale", "hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    assert list(net.state_dict()) == ["scale", "hidden.weight", "hidden.bias", "out.weight", "out.bias", "offset"]
    x = kael.linspace(-2, 2, 64).unsqueeze(1)
    y = x * x - 1
    first = None
    for _ in range(300):
        loss = ((net(x) - y) ** 2).mean()
        first = first if first is not None else loss.item()
        net.zero_grad()
        loss.backward()
        with kael.no_grad():
            for p in net.parameters():
                p -= 0.05 * p.grad
    assert loss.item() < 0.1 * first
    kael.save_safetensors(tmp_path / "net.safetensors", net.state_dict())
    fresh = TinyMLP()
    fresh.load_state_dict(kael.load_safetensors(tmp_path / "net.safetensors"))
    for (name, a), (_, b) in zip(net.state_dict().items(), fresh.state_dict().items()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), name
    with kael.no_grad():
        assert net(x).tolist() == fresh(x).tolist()


def test_load_state_dict_is_all_or_nothing():
    net = TinyMLP()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    broken = {k: kael.zeros_like(v) for k, v in net.state_dict().items()}
    del broken["out.bias"]
    with pytest.raises(kael.Error, match='Missing key.*"out.bias"'):  # torch's words (strict)
        net.load_state_dict(broken)
    broken["out.bias"] = kael.zeros(2)
    with pytest.raises(kael.ValueError, match=r"parameter out.bias has shape \[1\] but the state dict has \[2\]"):
        net.load_state_dict(broken)
    for name, value in net.state_dict().items():
        assert value.tolist() == before[name].tolist(), name


def test_train_eval_and_dropout():
    net = kael.nn.Sequential(kael.nn.Linear(4, 4), kael.nn.Dropout(0.5))
    x = kael.ones(100, 4)
    assert net.training and (net(x) == 0).sum().item() > 0
    net.eval()
    assert not net[1].training and (net(x) == 0).sum().item() == 0
    assert len(list(net.parameters())) == 2
    with pytest.raises(kael.Error, match="cuda:0"):  # no usable GPU here, or nn not on CUDA yet
        net.to("cuda")


def test_generate_errors_and_reproducible_sampling(gpt2_f16_dir):
    model = kael.GPT(config_of(gpt2_f16_dir)).load_gpt2(gpt2_f16_dir).eval()
    with pytest.raises(kael.ValueError, match="no tokens"):
        kael.generate(model, kael.zeros(1, 0, dtype=kael.int64))
    with pytest.raises(kael.ValueError, match="context"):
        kael.generate(model, kael.zeros(1, 250, dtype=kael.int64), max_new_tokens=10)
    prompt = kael.tensor([[464, 3616, 286]])
    kael.manual_seed(7)
    a = kael.generate(model, prompt, max_new_tokens=6, temperature=0.8, top_k=40)
    kael.manual_seed(7)
    b = kael.generate(model, prompt, max_new_tokens=6, temperature=0.8, top_k=40)
    assert a.tolist() == b.tolist() and a.shape == (1, 9)
    kael.cuda_synchronize()  # a no-op on the CPU


def test_ten_adamw_steps_on_the_gpt_equal_torchs(tmp_path):
    directory = gpt2_reference.make_checkpoint(tmp_path / "adamw", n_layer=2, n_head=2, n_embd=32, n_positions=32,
                                               vocab_size=61, seed=8)
    model = kael.GPT(config_of(directory)).load_gpt2(directory)
    hf = gpt2_reference.load_hf(directory).train()
    for module in hf.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    opt = kael.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    hf_opt = torch.optim.AdamW(hf.parameters(), lr=1e-3, weight_decay=0.1)
    ids = np.random.default_rng(1).integers(0, 61, size=(2, 25))
    inputs, targets = ids[:, :-1], ids[:, 1:].reshape(-1)
    for step in range(10):
        loss = F.cross_entropy(model(inputs).reshape(-1, 61), kael.tensor(targets))
        opt.zero_grad()
        loss.backward()
        kael.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        hf_loss = torch.nn.functional.cross_entropy(hf(torch.tensor(inputs)).logits.reshape(-1, 61),
                                                    torch.tensor(targets))
        hf_opt.zero_grad()
        hf_loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        hf_opt.step()
        assert loss.item() == pytest.approx(hf_loss.item(), rel=1e-4), step
    weights = dict(model.named_parameters())
    for name, p in hf.named_parameters():
        kael_name = kael.nn.translated_gpt2_name(name)
        want = p.detach().numpy().T if kael.nn.stored_transposed(kael_name) else p.detach().numpy()
        got = weights[kael_name].detach().numpy()
        if kael_name.endswith("attn.qkv.bias"):
            # The key biases' true gradient is 0 (a row's scores all shift by q.b, which softmax
            # ignores): both gradients are rounding noise, which Adam turns into lr-sized steps.
            keep = np.r_[0:32, 64:96]
            got, want = got[keep], want[keep]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4, err_msg=kael_name)


def test_dropout_in_training_is_reproducible_under_manual_seed():
    """Training mode drops the attention weights (scaled_dot_product_attention's dropout, on the
    training kernels) and the residual branches: one seed gives one loss and one set of gradients,
    another seed other ones, and eval mode drops nothing."""
    kael.manual_seed(5)
    model = kael.GPT(kael.nn.GptConfig(vocab_size=64, n_layer=2, n_head=3, n_embd=24, n_positions=40, dropout=0.2))
    ids = kael.tensor(np.random.default_rng(2).integers(0, 64, size=(2, 37)))

    def step(seed):
        for p in model.parameters():
            p.zero_grad()
        kael.manual_seed(seed)
        loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]
    loss, grads = step(1)
    again, grads_again = step(1)
    other, _ = step(2)
    assert loss == again and all(np.array_equal(a, b) for a, b in zip(grads, grads_again))
    assert other != loss and all(np.isfinite(g).all() for g in grads)
    model.eval()
    with kael.no_grad():
        kael.manual_seed(1)
        first = model(ids).numpy()
        kael.manual_seed(2)
        assert np.array_equal(first, model(ids).numpy())
