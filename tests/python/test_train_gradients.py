"""The step `kael train` runs (kael.GPT on the tensor library, autograd, clip_grad_norm_ and
kael.optim.AdamW with weight decay on the 2-D parameters: train_support.gpt_net and friends)
against PyTorch: the loss and every parameter's gradient of one forward/backward pass
(transformers' GPT2LMHeadModel in fp32, torch.autograd), and ten AdamW steps with gradient
accumulation and clipping (torch.optim.AdamW, clip_grad_norm_).

Both sides load the same seeded checkpoint (F16 weights are widened exactly on both) and see
the same token ids; targets are the inputs shifted by one, as a training run feeds them.
Tolerances: loss within 1e-5 relative; each gradient within 1e-4 of its largest magnitude;
each step's loss within 1e-4 and the final weights within 1e-4.
"""
import json

import numpy as np
import pytest

from train_support import gpt_adamw, gpt_loss, gpt_net, stored

torch = pytest.importorskip("torch")
F = torch.nn.functional

THREADS = 2
# A smaller F16 checkpoint with its own output head (lm_head.weight, tie_word_embeddings false).
UNTIED_F16 = dict(n_layer=4, n_head=8, n_embd=256, n_positions=256, dtype="float16", seed=3, init_std=0.15,
                  tied=False)
# For the optimizer steps: GPT-2's own weight scale (0.02), as a fine-tuning run starts from. A
# wilder random model (0.15) leaves float32 gradients with errors near 1e-5 of their largest
# value on both sides (measured against float64 torch), and Adam divides each element by its
# own magnitude: an element whose true gradient is about as small as that noise moves by +-lr
# either way, which no tolerance on the weights survives. A small vocabulary keeps it fast.
ADAMW_F32 = dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512, dtype="float32", seed=4,
                 init_std=0.02)


@pytest.fixture(scope="module")
def untied_f16_dir(tmp_path_factory):
    import gpt2_reference

    directory = tmp_path_factory.mktemp("train") / "untied-f16"
    return gpt2_reference.make_checkpoint(directory, **UNTIED_F16)


@pytest.fixture(scope="module")
def adamw_dir(tmp_path_factory):
    import gpt2_reference

    directory = tmp_path_factory.mktemp("train") / "adamw-f32"
    return gpt2_reference.make_checkpoint(directory, **ADAMW_F32)


def _windows(vocab, B, T, seed):
    """Seeded (inputs, targets), each (B, T) int32: windows of T + 1 ids, targets shifted by one."""
    ids = np.random.default_rng(seed).integers(0, vocab, size=(B, T + 1), dtype=np.int64)
    return ids[:, :-1].astype(np.int32), ids[:, 1:].astype(np.int32)


def _torch_model(directory):
    import gpt2_reference

    torch.set_num_threads(THREADS)
    return gpt2_reference.load_hf(directory)  # eval mode: no dropout, as kael with dropout 0


def _torch_loss(model, inputs, targets):
    logits = model(torch.from_numpy(inputs.astype(np.int64))).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(targets.astype(np.int64)).reshape(-1))


def _check_gradients(directory, B, T, seed):
    net = gpt_net(directory, threads=THREADS)
    tmodel = _torch_model(directory)
    inputs, targets = _windows(tmodel.config.vocab_size, B, T, seed)

    loss = gpt_loss(net, inputs, targets)
    loss.backward()
    kloss = loss.item()
    tloss = _torch_loss(tmodel, inputs, targets)
    tloss.backward()
    assert abs(kloss - tloss.item()) <= 1e-5 * abs(tloss.item()), (kloss, tloss.item())

    tparams = dict(tmodel.named_parameters())
    kgrads = stored(net)
    assert sorted(kgrads) == sorted(tparams), "kael's parameter names are transformers'"
    worst = []
    for name, kgrad in kgrads.items():
        tgrad = tparams[name].grad.numpy()
        assert kgrad.shape == tgrad.shape, name
        scale = float(np.abs(tgrad).max())
        error = float(np.abs(kgrad - tgrad).max())
        worst.append((error / scale if scale else error, name))
        assert error <= 1e-4 * scale, f"{name}: max |kael - torch| = {error:.3g}, max |torch| = {scale:.3g}"
    # The figures docs/training.md quotes (pytest -s prints them).
    print(f"\n{directory.name} B={B} T={T}: loss |kael - torch| / |torch| = {abs(kloss - tloss.item()) / abs(tloss.item()):.2e}"
          f" (bound 1e-5); largest gradient error / its largest |torch| value = {max(worst)[0]:.2e} in {max(worst)[1]}"
          f" (bound 1e-4)")


def test_gradients_gpt2_small_shape(gpt2_small_dir):
    """124M parameters, tied head, batch 4 x 64."""
    _check_gradients(gpt2_small_dir, B=4, T=64, seed=0)


def test_gradients_untied_f16(untied_f16_dir):
    _check_gradients(untied_f16_dir, B=3, T=50, seed=1)


def test_ignored_targets_count_nothing(untied_f16_dir):
    """A -1 target is skipped with ignore_index=-1, as torch's: the mean is over the others."""
    net = gpt_net(untied_f16_dir, threads=THREADS)
    tmodel = _torch_model(untied_f16_dir)
    inputs, targets = _windows(tmodel.config.vocab_size, 2, 16, seed=5)
    targets[0, :5] = -1
    targets[1, 9] = -1
    loss = gpt_loss(net, inputs, targets, ignore_index=-1)
    loss.backward()
    kloss = loss.item()
    logits = tmodel(torch.from_numpy(inputs.astype(np.int64))).logits
    tloss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(targets.astype(np.int64)).reshape(-1),
                            ignore_index=-1)
    tloss.backward()
    assert abs(kloss - tloss.item()) <= 1e-5 * abs(tloss.item())
    tgrad = dict(tmodel.named_parameters())["lm_head.weight"].grad.numpy()
    assert np.abs(stored(net)["lm_head.weight"] - tgrad).max() <= 1e-4 * np.abs(tgrad).max()


def test_ten_adamw_steps_with_accumulation_and_clipping(adamw_dir):
    """Ten optimizer steps, each over K = 2 micro-batches of 2 x 32 taken in order from one token
    stream, clipped to norm 0.5 (the gradients are larger, so every step clips), AdamW with
    weight decay only on 2+-dimensional parameters."""
    import kael

    steps, K, B, T = 10, 2, 2, 32
    lr, wd, max_norm, betas, eps = 1e-3, 0.1, 0.5, (0.9, 0.95), 1e-8
    net = gpt_net(adamw_dir, threads=THREADS)
    tmodel = _torch_model(adamw_dir)
    vocab = tmodel.config.vocab_size
    stream = np.random.default_rng(7).integers(0, vocab, size=steps * K * B * T + 1, dtype=np.int64)

    def micro_batch(s, j):
        start = (s * K + j) * B * T
        window = np.stack([stream[start + b * T:start + b * T + T + 1] for b in range(B)])
        return window[:, :-1].astype(np.int32), window[:, 1:].astype(np.int32)

    params = dict(tmodel.named_parameters())
    decay = [p for n, p in params.items() if p.dim() >= 2]
    no_decay = [p for n, p in params.items() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=eps)
    kopt = gpt_adamw(net, lr=lr, betas=betas, eps=eps, weight_decay=wd)

    worst_loss = 0.0
    for s in range(steps):
        kopt.zero_grad()
        opt.zero_grad()
        kloss = tloss = 0.0
        for j in range(K):
            inputs, targets = micro_batch(s, j)
            kpart = gpt_loss(net, inputs, targets) / K
            kpart.backward()
            kloss += kpart.item()
            loss = _torch_loss(tmodel, inputs, targets) / K
            loss.backward()
            tloss += loss.item()
        knorm = kael.nn.utils.clip_grad_norm_(net.parameters(), max_norm).item()
        tnorm = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), max_norm).item()
        assert tnorm > max_norm, "the test means to clip"
        assert abs(knorm - tnorm) <= 1e-4 * tnorm, (s, knorm, tnorm)
        kopt.step()
        opt.step()
        assert abs(kloss - tloss) <= 1e-4, (s, kloss, tloss)
        worst_loss = max(worst_loss, abs(kloss - tloss))
    assert {v.item() for k, v in kopt.state_dict().items() if k.endswith(".step")} == {steps}

    worst_weight = 0.0
    kvalues = stored(net, "value")
    for name, p in params.items():
        error = float(np.abs(kvalues[name] - p.detach().numpy()).max())
        assert error <= 1e-4, f"{name}: final weights differ by {error:.3g}"
        worst_weight = max(worst_weight, error)
    print(f"\nten AdamW steps: largest |step loss kael - torch| = {worst_loss:.2e}, largest final |weight kael - torch|"
          f" = {worst_weight:.2e} (bounds 1e-4)")
