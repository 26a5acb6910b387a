#!/usr/bin/env python3
"""How much accuracy kael's narrow weight storage (--dtype f16|int8|bf16) costs, measured against
transformers computing in F32 on the checkpoints of gpt2_reference.py: the seeded random
PARITY_CHECKPOINTS and the TRAINED_CHECKPOINTS (a small GPT-2 trained on the test corpus by
train_checkpoint, a few minutes on 2 cores; training.json in its directory holds its held-out loss).

BUNDLED_CHECKPOINTS are the models that ship in the repository (models/), trained already:
kael-tiny-kjv (7M parameters, trained by kael on the King James Bible) needs no training step,
so it is the quickest trained model to measure (prompts: held-out corpus text, as for the others).

The random checkpoints are chaotic (their top tokens are often near-ties), so the trained one is
the figure to judge a trained model by. Prompts are --prompts windows of --length token ids:
seeded random ids for the random checkpoints (as in earlier figures), seeded windows of held-out
corpus text for the trained ones (random ids are out of distribution for a trained model). The
`prompts` column says which. For each checkpoint and dtype (f32 is the baseline row: kael F32
itself vs transformers) it prints, over every --stride-th prefix of each prompt (the next-token
distribution after it):
  max_err, mean_err  largest and mean |kael logit - transformers logit| over vocabulary and positions
  top1               share of positions where both pick the same next token
  kl                 mean KL(transformers || kael) of the next-token distributions, in nats
  greedy             mean number of leading tokens `kael generate --greedy` shares with
                     transformers' greedy continuation of each prompt (out of --greedy-tokens)

  quant_accuracy.py --kael build/kael [--workdir DIR] [--dtypes f32,f16,int8] [--checkpoints NAME,...]

A dtype is one of kael's --dtype values, or int8-per32: --dtype int8 with KAEL_ISA=avx2, which keeps
the per-32-group int8 scheme on a CPU where the amx kernel set would choose per-column scales (so
both int8 schemes are scored in one run there; elsewhere int8 and int8-per32 are the same scheme).

Missing checkpoints are built in --workdir (a temp dir by default) and reused when present.

kael runs as `kael logits --json --top 0 --dtype X` (one process per prefix) and
`kael generate --greedy --ignore-eos --json --dtype X`. --json prints the table as JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpt2_reference  # noqa: E402


def _log_softmax(x):
    import numpy as np

    x = x.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def kael_greedy(kael, model_dir, ids, n, dtype, threads):
    out = subprocess.run([str(kael), "generate", "--model", str(model_dir), "--ids", ",".join(map(str, ids)),
                          "--greedy", "--ignore-eos", "--max-tokens", str(n), "--json", "--dtype", dtype,
                          "--threads", str(threads)], check=True, capture_output=True).stdout
    return json.loads(out)["ids"]


def prompts_for(vocab_size, count, length, seed, source="random"):
    """count prompts of `length` ids: "random" ids below vocab_size, or "heldout" corpus windows."""
    import numpy as np

    if source == "heldout":
        return gpt2_reference.heldout_windows(count, length, seed)
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab_size, size=length).tolist() for _ in range(count)]


# The checkpoints that ship in the repository: name -> directory.
BUNDLED_CHECKPOINTS = {"kael-tiny-kjv": gpt2_reference.ROOT / "models" / "kael-tiny-kjv"}


def prompt_source(name):
    """Held-out text for a trained checkpoint, random ids for a seeded random one."""
    trained = name in gpt2_reference.TRAINED_CHECKPOINTS or name in BUNDLED_CHECKPOINTS
    return "heldout" if trained else "random"


# Pseudo-dtypes: (the --dtype passed to kael, the environment it runs with).
VARIANTS = {"int8-per32": ("int8", {"KAEL_ISA": "avx2"})}


@contextlib.contextmanager
def kael_dtype(dtype):
    """The --dtype value for `dtype`, with its variant's environment set while in the block."""
    flag, env = VARIANTS.get(dtype, (dtype, {}))
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield flag
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def ensure_checkpoint(workdir, name):
    """workdir/name, built by make_checkpoint or train_checkpoint unless it is already there (a
    bundled checkpoint is used where it is)."""
    if name in BUNDLED_CHECKPOINTS:
        return BUNDLED_CHECKPOINTS[name]
    model_dir = pathlib.Path(workdir) / name
    if not (model_dir / "model.safetensors").exists():
        if name in gpt2_reference.TRAINED_CHECKPOINTS:
            gpt2_reference.train_checkpoint(model_dir, **gpt2_reference.TRAINED_CHECKPOINTS[name])
        else:
            gpt2_reference.make_checkpoint(model_dir, **gpt2_reference.PARITY_CHECKPOINTS[name])
    return model_dir


def measure(kael, model_dir, dtypes, *, prompts, length, stride, greedy_tokens, threads, seed=0, source="random"):
    """{dtype: {metric: value}} for one checkpoint directory; source is prompts_for's."""
    import torch

    hf = gpt2_reference.load_hf(model_dir)
    vocab = hf.config.vocab_size
    cases = prompts_for(vocab, prompts, length, seed, source)
    # transformers: every position's logits from one forward per prompt.
    with torch.no_grad():
        hf_all = [hf(torch.tensor([ids], dtype=torch.long)).logits[0].float().numpy() for ids in cases]
    hf_greedy = [gpt2_reference.hf_greedy(hf, ids, greedy_tokens) for ids in cases]
    ends = list(range(stride, length + 1, stride))  # prefix lengths scored

    table = {}
    for dtype in dtypes:
        with kael_dtype(dtype) as flag:
            table[dtype] = _score(kael, model_dir, flag, cases, hf_all, hf_greedy, ends, greedy_tokens, threads, source)
    return table


def _score(kael, model_dir, dtype, cases, hf_all, hf_greedy, ends, greedy_tokens, threads, source):
    """measure()'s metrics for one kael --dtype."""
    import numpy as np

    max_err, abs_sum, count, agree, kl_sum, positions = 0.0, 0.0, 0, 0, 0.0, 0
    for ids, expected_all in zip(cases, hf_all):
        for end in ends:
            expected = expected_all[end - 1]
            got = gpt2_reference.kael_last_logits(kael, model_dir, ids[:end],
                                                  extra_args=["--dtype", dtype, "--threads", str(threads)])
            err = np.abs(got.astype(np.float64) - expected)
            max_err = max(max_err, float(err.max()))
            abs_sum += float(err.sum())
            count += err.size
            agree += int(np.argmax(got) == np.argmax(expected))
            lp, lq = _log_softmax(expected), _log_softmax(got)
            kl_sum += float((np.exp(lp) * (lp - lq)).sum())
            positions += 1
    shared = []
    for ids, reference in zip(cases, hf_greedy):
        mine = kael_greedy(kael, model_dir, ids, greedy_tokens, dtype, threads)
        n = 0
        while n < min(len(mine), len(reference)) and mine[n] == reference[n]:
            n += 1
        shared.append(n)
    return {"max_err": max_err, "mean_err": abs_sum / count, "top1": agree / positions,
            "kl": kl_sum / positions, "greedy": sum(shared) / len(shared), "positions": positions,
            "greedy_of": greedy_tokens, "prompts": source}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kael", required=True, help="path to the kael binary")
    parser.add_argument("--workdir", help="where the checkpoints are built (reused when present)")
    names = [*gpt2_reference.PARITY_CHECKPOINTS, *gpt2_reference.TRAINED_CHECKPOINTS, *BUNDLED_CHECKPOINTS]
    parser.add_argument("--checkpoints", default=",".join(names), help="a comma-separated subset of " + ",".join(names))
    parser.add_argument("--dtypes", default="f32,f16,int8")
    parser.add_argument("--prompts", type=int, default=4, help="seeded prompts per checkpoint")
    parser.add_argument("--length", type=int, default=32, help="tokens per prompt")
    parser.add_argument("--stride", type=int, default=2, help="score every stride-th prefix")
    parser.add_argument("--greedy-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="kael-quant-"))
    dtypes = args.dtypes.split(",")
    checkpoints = args.checkpoints.split(",")
    unknown = [name for name in checkpoints if name not in names]
    if unknown:
        parser.error(f"unknown checkpoint {', '.join(unknown)}; choose from {', '.join(names)}")
    results = {}
    for name in checkpoints:
        results[name] = measure(args.kael, ensure_checkpoint(workdir, name), dtypes, prompts=args.prompts,
                                length=args.length, stride=args.stride, greedy_tokens=args.greedy_tokens,
                                threads=args.threads, source=prompt_source(name))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print("kael --dtype X vs transformers F32 (next-token logits after each scored prefix)")
    print(f"{'checkpoint':16} {'prompts':8} {'dtype':10} {'max_err':>9} {'mean_err':>9} {'top1':>7} {'kl_nats':>9} "
          f"{'greedy':>7} {'positions':>9}")
    for name, table in results.items():
        for dtype, r in table.items():
            print(f"{name:16} {r['prompts']:8} {dtype:10} {r['max_err']:9.4f} {r['mean_err']:9.5f} {r['top1']:7.3f} "
                  f"{r['kl']:9.5f} {r['greedy']:5.1f}/{r['greedy_of']} {r['positions']:9d}")
    for name in checkpoints:
        training = workdir / name / "training.json"
        if training.exists():
            r = json.loads(training.read_text())
            print(f"{name}: held-out loss {r['heldout_loss_before']:.3f} -> {r['heldout_loss_after']:.3f} nats in "
                  f"{r['train_seconds']:.0f} s of training (a unigram model: {r['unigram_loss']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
