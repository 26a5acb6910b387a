#!/usr/bin/env python3
"""Text generation with GPT-2 from Python, as the book's chapter "Loading GPT-2" writes it:
kael.GPT() (kael::nn::GPT on the tensor library) for the model, tiktoken's gpt2 encoding for the
tokenizer.

    python3 examples/gpt2_generate.py "The meaning of life is" --tokens 60 --weights data/gpt2/model.safetensors
    python3 examples/gpt2_generate.py --benchmark      # greedy, with and without the KV cache

The tokenizer is tiktoken's gpt2 encoding built offline from the vocab.json and merges.txt beside
the weights; without them, tiktoken.get_encoding("gpt2"), which reads tiktoken's cache (or
downloads). The model's shape comes from the config.json beside the weights (GPT-2 small without
one). The prompt and its continuation go to stdout, the speed to stderr.
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np
import tiktoken
import tiktoken.load

import kael

EOS_ID = 50256
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def gpt2_tokenizer(directory: pathlib.Path) -> tiktoken.Encoding:
    vocab, merges = directory / "vocab.json", directory / "merges.txt"
    if not (vocab.exists() and merges.exists()):
        return tiktoken.get_encoding("gpt2")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=str(merges), encoder_json_file=str(vocab))
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOS_ID})


def gpt_config(directory: pathlib.Path) -> kael.nn.GptConfig:
    """GPT-2 small, or the shape of the config.json beside the weights if there is one."""
    path = directory / "config.json"
    if not path.exists():
        return kael.nn.GptConfig.gpt2_small()
    hf = json.loads(path.read_text())
    return kael.nn.GptConfig(**{k: hf[k] for k in ("vocab_size", "n_positions", "n_embd", "n_head", "n_layer") if k in hf})


def next_token(logits: np.ndarray, temperature: float, top_k: int, rng: np.random.Generator) -> int:
    """The book's sampling: keep the top-k logits, divide by the temperature, draw; greedy at 0."""
    logits = np.asarray(logits, dtype=np.float64)
    if top_k > 0 and top_k < logits.size:
        threshold = np.partition(logits, -top_k)[-top_k]
        logits = np.where(logits < threshold, -np.inf, logits)
    if temperature <= 0:
        return int(np.argmax(logits))
    logits = logits / temperature
    probs = np.exp(logits - logits.max())
    return int(rng.choice(logits.size, p=probs / probs.sum()))


@kael.no_grad()  # inference: no graph for backward
def generate(model: kael.GPT, idx: kael.Tensor, max_new_tokens: int, temperature: float, top_k: int,
             seed: int, use_cache: bool = True) -> list:
    """New token ids after idx (1, T), stopping at <|endoftext|>. With the cache each step feeds one
    token; without it each step runs the whole sequence again."""
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in np.asarray(idx)[0]]
    model.reset_kv_cache()
    logits = model(idx, use_cache=use_cache)[0, -1]
    out = []
    for _ in range(max_new_tokens):
        token = next_token(logits, temperature, top_k, rng)
        if token == EOS_ID:
            break
        out.append(token)
        if len(out) == max_new_tokens:
            break
        if use_cache:
            logits = model(kael.tensor([[token]]), use_cache=True)[0, -1]
        else:
            logits = model(kael.tensor([ids + out]))[0, -1]
    return out


def benchmark(model: kael.GPT, idx: kael.Tensor, tokens: int) -> None:
    rates, results = {}, {}
    for use_cache in (True, False):
        start = time.perf_counter()
        results[use_cache] = generate(model, idx, tokens, temperature=0.0, top_k=0, seed=0, use_cache=use_cache)
        kael.cuda_synchronize()  # a no-op on the CPU; on a GPU the clock must wait for the device
        rates[use_cache] = len(results[use_cache]) / (time.perf_counter() - start)
    print(f"greedy, {len(results[True])} tokens after a {np.asarray(idx).shape[1]}-token prompt:")
    print(f"  with KV cache:    {rates[True]:8.1f} tokens/s")
    print(f"  without KV cache: {rates[False]:8.1f} tokens/s ({rates[True] / rates[False]:.1f}x slower)")
    print(f"  same tokens: {'yes' if results[True] == results[False] else 'no'}")


def main() -> int:
    parser = argparse.ArgumentParser(description="Generate text with GPT-2 through kael's book-style Python API.")
    parser.add_argument("prompt", nargs="?", default="The meaning of life is")
    parser.add_argument("--tokens", type=int, default=60, help="new tokens to generate (default 60)")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 is greedy (default 0.8)")
    parser.add_argument("--top-k", type=int, default=40, help="sample from the k most likely tokens; 0: all (default 40)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    parser.add_argument("--weights", default="data/gpt2/model.safetensors", help="the checkpoint file")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="device to run on (this build: cpu)")
    parser.add_argument("--benchmark", action="store_true", help="time greedy generation with and without the KV cache")
    args = parser.parse_args()
    if args.tokens < 0:
        parser.error("--tokens must be 0 or more")
    try:
        weights = pathlib.Path(args.weights)
        model = kael.GPT(gpt_config(weights.parent))
        model.load_gpt2(weights)
        model.to(args.device)
        model.eval()
        tokenizer = gpt2_tokenizer(weights.parent)

        prompt_ids = tokenizer.encode(args.prompt)
        if not prompt_ids:
            raise kael.ValueError("the prompt is empty")
        if len(prompt_ids) + args.tokens > model.config.n_positions:
            raise kael.ValueError(f"a {len(prompt_ids)}-token prompt plus {args.tokens} new tokens exceeds the "
                                  f"context of {model.config.n_positions}")
        idx = kael.tensor([prompt_ids])  # (1, T)
        if args.benchmark:
            benchmark(model, idx, args.tokens)
            return 0
        start = time.perf_counter()
        new_ids = generate(model, idx, args.tokens, args.temperature, args.top_k, args.seed)
        seconds = time.perf_counter() - start
        print(args.prompt + tokenizer.decode(new_ids, errors="replace"))
        print(f"{len(new_ids)} tokens in {seconds:.2f} s: {len(new_ids) / seconds:.1f} tokens/s", file=sys.stderr)
    except kael.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
