#!/usr/bin/env python3
"""A character-level GPT trained from scratch on the King James Bible with kael's tensor library:
kael.GPT (kael::nn::GPT; vocabulary = the characters of the text), kael.optim.AdamW, a checkpoint
written with kael.save_safetensors, loaded back into a fresh model and sampled. The same program
as examples/char_gpt.cpp.

    apt-get install bible-kjv && scripts/kjv_text.py build/kjv-text     # the text, one file per book
    python3 examples/char_gpt.py --data build/kjv-text --seconds 540

It prints the curve (step, training loss, validation loss on the last verses, seconds since
start), then the reloaded model's validation loss, which must equal the trained one's, and a
sample. docs/nn.md ("The char-level GPT") has a measured curve.
"""
import argparse
import math
import pathlib
import sys
import time

import numpy as np

import kael


def read_text(path: pathlib.Path) -> str:
    """A file, or the .txt files of a directory concatenated in name order (the books in canonical
    order, as scripts/kjv_text.py numbers them)."""
    if not path.exists():
        raise kael.Error(f"{path} does not exist (make the KJV text with scripts/kjv_text.py {path})")
    if not path.is_dir():
        files = [path]
    else:
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".txt")
        if not files:
            raise kael.Error(f"no .txt files in {path}")
    try:
        return "".join(f.read_bytes().decode("utf-8") for f in files)
    except UnicodeDecodeError as e:
        raise kael.Error(f"the text is not valid UTF-8: {e}") from None


def batch_of(data: np.ndarray, starts: np.ndarray, context: int) -> tuple:
    """(B, T) ids from each start, and the ids one position later."""
    index = starts[:, None] + np.arange(context)[None, :]
    return kael.from_numpy(np.ascontiguousarray(data[index])), kael.from_numpy(np.ascontiguousarray(data[index + 1]))


def loss_of(model: kael.GPT, x: kael.Tensor, y: kael.Tensor) -> kael.Tensor:
    logits = model(x)  # (B, T, vocab)
    rows = x.numel()
    return kael.nn.functional.cross_entropy(logits.reshape(rows, logits.shape[2]), y.reshape(rows))


def fixed_batches(data: np.ndarray, count: int, batch: int, context: int) -> list:
    """Windows spread evenly through `data`, the same every time, so that the curve's points and the
    reloaded model's loss are comparable."""
    windows, last = count * batch, len(data) - context - 1
    starts = np.array([0 if windows == 1 else i * last // (windows - 1) for i in range(windows)], dtype=np.int64)
    return [batch_of(data, starts[i * batch:(i + 1) * batch], context) for i in range(count)]


@kael.no_grad()
def evaluate(model: kael.GPT, batches: list) -> float:
    model.eval()
    total = sum(loss_of(model, x, y).item() for x, y in batches)
    model.train()
    return total / len(batches)


def gpt_config(vocab_size: int, context: int, layers: int, heads: int, width: int) -> kael.nn.GptConfig:
    """GPT-2's architecture without the biases and with the exact (erf) GELU: in the tensor library
    the broadcast bias adds and tanh are slow paths, and without them a step takes a third less time."""
    return kael.nn.GptConfig(vocab_size=vocab_size, n_positions=context, n_layer=layers, n_head=heads, n_embd=width,
                             dropout=0.0, tanh_gelu=False, bias=False)


def load_checkpoint(path: pathlib.Path) -> tuple:
    """A fresh model built from the checkpoint alone: sizes and vocabulary from its metadata, then
    load_state_dict."""
    meta = kael.read_safetensors_metadata(path)
    missing = [k for k in ("vocab", "n_positions", "n_layer", "n_head", "n_embd") if k not in meta]
    if missing:
        raise kael.Error(f"{path} has no '{missing[0]}' metadata")
    chars = meta["vocab"]
    model = kael.GPT(gpt_config(len(chars), int(meta["n_positions"]), int(meta["n_layer"]), int(meta["n_head"]),
                                int(meta["n_embd"])))
    model.load_state_dict(kael.load_safetensors(path))
    return model, chars


def sample(model: kael.GPT, chars: str, prompt: str, tokens: int, temperature: float) -> str:
    """Text after `prompt`: kael.generate within the context, then again from the last half-context
    of what is written so far, until `tokens` characters are drawn."""
    ids_of = {c: i for i, c in enumerate(chars)}
    unknown = [c for c in prompt if c not in ids_of]
    if unknown:
        raise kael.Error(f"the prompt's character {unknown[0]!r} is not in the vocabulary")
    if not prompt:
        raise kael.Error("the prompt is empty")
    ids = [ids_of[c] for c in prompt]
    context = model.config.n_positions
    keep = max(1, context // 2)
    model.eval()
    out: list = []
    while len(out) < tokens:
        window = ids[-keep:]
        n = min(tokens - len(out), context - len(window))
        row = kael.generate(model, kael.tensor([window]), max_new_tokens=n, temperature=temperature, top_k=0)
        new = [int(t) for t in row.reshape(-1).tolist()[len(window):]]
        ids += new
        out += new
    return prompt + "".join(chars[i] for i in out)


def learning_rate(args: argparse.Namespace, step: int, progress: float) -> float:
    """A linear warmup over the first steps, then a cosine from lr down to lr / 10 over `progress`
    (of the steps or of the seconds, whichever runs out first)."""
    warm = min(1.0, (step + 1) / max(1, args.warmup))
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return args.lr * warm * (0.1 + 0.9 * cosine)


def run(args: argparse.Namespace) -> None:
    start = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - start

    if args.steps == 0 and args.seconds <= 0:
        raise kael.Error("give --steps or --seconds (or both)")
    if args.threads > 0:
        kael.set_num_threads(args.threads)
    kael.manual_seed(args.seed)

    text = read_text(pathlib.Path(args.data))
    chars = "".join(sorted(set(text)))
    lookup = np.zeros(max(map(ord, chars), default=0) + 1, dtype=np.int64)
    lookup[[ord(c) for c in chars]] = np.arange(len(chars))
    ids = lookup[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]
    # Held out: the last verses, never trained on (with the default 5% of the KJV: Colossians 1:13 to
    # the end of Revelation).
    n_val = int(len(ids) * args.val_fraction)
    train_ids, val_ids = ids[:len(ids) - n_val], ids[len(ids) - n_val:]
    T, B = args.context, args.batch
    if len(val_ids) < T + 1 or len(train_ids) < T + 1:
        raise kael.Error(f"the text ({len(ids)} characters) is too short for a context of {T} with a "
                         f"{args.val_fraction} validation fraction")

    model = kael.GPT(gpt_config(len(chars), T, args.layers, args.heads, args.width))
    parameter_count = sum(p.numel() for p in model.parameters())
    print(f"text: {len(ids)} characters, {len(chars)} distinct, from {args.data}; training on {len(train_ids)}, "
          f"validating on the last {len(val_ids)}")
    print(f"model: {args.layers} layers, width {args.width}, {args.heads} heads, context {T}, {parameter_count} "
          f"parameters; batch {B}, lr {args.lr:g}, {kael.get_num_threads()} threads")

    # Weight decay on the matrices only (as GPT-2's recipes): one optimizer per group.
    params = list(model.parameters())
    decayed, plain = [p for p in params if p.dim() >= 2], [p for p in params if p.dim() < 2]
    optimizers = [kael.optim.AdamW(decayed, lr=args.lr, betas=(0.9, 0.99), weight_decay=args.weight_decay),
                  kael.optim.AdamW(plain, lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)]

    val_batches = fixed_batches(val_ids, args.eval_batches, B, T)
    rng = np.random.default_rng(args.seed)
    loss_sum, loss_count, val_loss, step = 0.0, 0, 0.0, 0

    def report() -> None:
        # One row of the curve: the mean training loss of the steps since the last row, the loss
        # on the fixed validation windows, the seconds since the program started.
        nonlocal loss_sum, loss_count, val_loss
        val_loss = evaluate(model, val_batches)
        train = f"{loss_sum / loss_count:.4f}" if loss_count else "-"
        print(f"{step:6d}  {train:>10}  {val_loss:8.4f}  {elapsed():8.1f}", flush=True)
        loss_sum, loss_count = 0.0, 0

    print(f"{'step':>6}  {'train_loss':>10}  {'val_loss':>8}  {'seconds':>8}")
    report()
    train_start = elapsed()
    while True:
        progress = max(step / args.steps if args.steps > 0 else 0.0,
                       (elapsed() - train_start) / args.seconds if args.seconds > 0 else 0.0)
        if progress >= 1.0:
            break
        lr = learning_rate(args, step, progress)
        for opt in optimizers:
            opt.lr = lr
        x, y = batch_of(train_ids, rng.integers(0, len(train_ids) - T - 1, size=B, endpoint=True), T)
        loss = loss_of(model, x, y)
        loss.backward()
        kael.nn.utils.clip_grad_norm_(params, 1.0)
        for opt in optimizers:
            opt.step()
            opt.zero_grad()
        step += 1
        loss_sum += loss.item()
        loss_count += 1
        if not math.isfinite(loss_sum):
            raise kael.Error(f"the training loss is not finite at step {step} (lower --lr)")
        if step % args.eval_every == 0:
            report()
    if loss_count:
        report()
    print(f"trained {step} steps in {elapsed() - train_start:.1f} s; validation loss {val_loss:.4f} nats per character")

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    c = model.config
    kael.save_safetensors(out, model.state_dict(), {"vocab": chars, "n_positions": str(c.n_positions),
                                                    "n_layer": str(c.n_layer), "n_head": str(c.n_head),
                                                    "n_embd": str(c.n_embd)})
    loaded, loaded_chars = load_checkpoint(out)
    reloaded_loss = evaluate(loaded, val_batches)
    print(f"saved {out}; reloaded into a fresh model: validation loss {reloaded_loss:.4f}")
    # Same weights, same windows, same kernels: the two losses are the same number.
    if abs(reloaded_loss - val_loss) > 1e-6 or loaded_chars != chars:
        raise kael.Error(f"the reloaded model differs from the trained one (validation loss {reloaded_loss} "
                         f"against {val_loss})")

    print(f"sample (temperature {args.temperature:g}):")
    print(sample(loaded, loaded_chars, args.prompt, args.sample_tokens, args.temperature))
    print(f"total {elapsed():.1f} s")


def number(kind, minimum, inclusive=True):
    """An argparse type: `kind` (int or float) at least (or above) `minimum`."""
    def parse(value: str):
        x = kind(value)
        if not (x >= minimum if inclusive else x > minimum):
            raise argparse.ArgumentTypeError(f"must be {'at least' if inclusive else 'above'} {minimum}")
        return x
    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description="Train a character-level GPT on a text with kael's tensor library.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add = parser.add_argument
    add("--data", default="build/kjv-text", help="a text file, or a directory of .txt files read in name order")
    add("--steps", type=number(int, 0), default=0, help="training steps; 0: until --seconds")
    add("--seconds", type=number(float, 0), default=540.0,
        help="wall-time budget of the training loop; 0: until --steps")
    add("--batch", type=number(int, 1), default=8, help="sequences per step")
    add("--context", type=number(int, 1), default=64, help="characters per sequence (the model's positions)")
    add("--layers", type=number(int, 1), default=2, help="transformer blocks")
    add("--width", type=number(int, 1), default=128, help="embedding width, a multiple of --heads")
    add("--heads", type=number(int, 1), default=4, help="attention heads")
    add("--lr", type=number(float, 0, inclusive=False), default=6e-3,
        help="peak learning rate: warmup, then a cosine down to a tenth")
    add("--weight-decay", type=number(float, 0), default=0.1, help="AdamW's decay of the weight matrices")
    add("--warmup", type=number(int, 0), default=50, help="steps of linear warmup")
    add("--val-fraction", type=number(float, 0), default=0.05,
        help="fraction of the text, at its end, held out for validation (at most 0.5)")
    add("--eval-every", type=number(int, 1), default=100, help="steps between points of the curve")
    add("--eval-batches", type=number(int, 1), default=16, help="batches of validation windows per point")
    add("--seed", type=number(int, 0), default=1, help="random seed (initialization and batches)")
    add("--out", default="build/char_gpt_py.safetensors", help="checkpoint file to write (safetensors)")
    add("--sample-tokens", type=number(int, 0), default=400, help="characters to sample after training")
    add("--prompt", default="And God said", help="text the sample continues")
    add("--temperature", type=number(float, 0), default=0.8, help="sampling temperature; 0 is greedy")
    add("--threads", type=number(int, 0), default=0, help="compute threads; 0: one per physical core")
    args = parser.parse_args()  # an unknown option or a bad value: a message and exit status 2
    if args.val_fraction > 0.5:
        parser.error("--val-fraction must be at most 0.5")
    try:
        run(args)
    except (kael.Error, OSError) as e:
        sys.stdout.flush()
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
