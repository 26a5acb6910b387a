"""llama.cpp as a peer in bench/compare.py, through llama-cpp-python's C API (ctypes), on GGUF
files that bench/write_gguf.py writes from the same checkpoint (F32, F16, Q8_0).

Every figure comes from one loop (`Decoder`): a llama.cpp context holding `batch` sequences, each
step appending one token to every sequence in one llama_decode and taking the greedy token of each
sequence's last logits. Batch 1 and batch 16 decode use compare.py's rule, rate = batch x (N - 1) /
(t(N) - t(1)) over 16-token prompts; the prefill is one llama_decode of the whole prompt. Before
timing, the F32 file's greedy tokens and last logits are checked against transformers'.

The measurement runs in a child process: a llama.cpp build that dies (an instruction the CPU or
the kernel refuses: SIGILL) becomes a skip with its signal, not the end of compare.py's run. The
child first reports how llama.cpp was built (ggml's CPU feature list, the compiler of
libggml-cpu), so that line is printed even when it dies.
"""
from __future__ import annotations

import logging
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KINDS = ("f32", "f16", "q8_0")
PROMPT = 16   # tokens per prompt of the decode runs, as kael bench --prompt-tokens 16
BATCH = 16    # sequences of the batched decode run


def missing() -> str | None:
    """Why llama.cpp cannot be measured here, or None."""
    import importlib.util

    for module, package in (("llama_cpp", "llama-cpp-python"), ("gguf", "gguf")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not importable (PyPI: {package}; this script installs nothing)"
    return None


def build_info() -> dict:
    """llama-cpp-python's version, ggml's compiled-in CPU features and the compiler of libggml-cpu:
    from its .comment section when the install kept it (clang leaves "clang version X", GCC only
    "GCC: ..."), else from the OpenMP runtime it links (clang's libomp, GCC's libgomp)."""
    import llama_cpp

    features = llama_cpp.llama_print_system_info().decode(errors="replace")
    on = [name for name, value in re.findall(r"(\w+) = (\d+)", features) if value != "0"]
    compiler = "compiler not recorded"
    lib = pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so"
    if lib.exists():
        data = lib.read_bytes()
        clang = re.search(rb"clang version [0-9.]+", data)
        gcc = re.search(rb"GCC: \(([^)]*)\) ([0-9.]+)", data)
        if clang:
            compiler = clang.group().decode()
        elif gcc:
            compiler = f"GCC {gcc.group(2).decode()} ({gcc.group(1).decode()})"
        elif b"libomp.so" in data:
            compiler = "clang (it links libomp)"
        elif b"libgomp.so" in data:
            compiler = "GCC (it links libgomp)"
    return {"version": llama_cpp.__version__, "features": on, "compiler": compiler}


class Decoder:
    """One llama.cpp context decoding `n_seq` sequences side by side (sequence s is llama.cpp's
    seq_id s, in its own part of the KV cache)."""

    def __init__(self, model, n_vocab: int, n_seq: int, positions: int, threads: int, max_tokens: int):
        import llama_cpp as lib

        self.lib, self.n_vocab, self.n_seq = lib, n_vocab, n_seq
        params = lib.llama_context_default_params()
        params.n_ctx = n_seq * -(-positions // 256) * 256  # llama.cpp pads each sequence's cache to 256
        params.n_batch = params.n_ubatch = max_tokens  # one llama_decode = one graph, as kael's prefill
        params.n_seq_max = n_seq
        params.n_threads = params.n_threads_batch = threads
        self.ctx = lib.llama_init_from_model(model, params)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.batch = lib.llama_batch_init(max_tokens, 0, 1)
        self.max_tokens = max_tokens
        self.positions = [0] * n_seq

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)

    def reset(self) -> None:
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), True)
        self.positions = [0] * self.n_seq

    def feed(self, tokens: list) -> "np.ndarray":
        """Appends tokens[s] to sequence s, all in one llama_decode. Returns (n_seq, vocab) logits of
        each sequence's last token, valid until the next feed."""
        import numpy as np

        assert len(tokens) == self.n_seq and sum(map(len, tokens)) <= self.max_tokens
        b, n = self.batch, 0
        for s, seq in enumerate(tokens):
            for i, token in enumerate(seq):
                b.token[n], b.pos[n], b.n_seq_id[n] = token, self.positions[s] + i, 1
                b.seq_id[n][0], b.logits[n] = s, i == len(seq) - 1
                n += 1
            self.positions[s] += len(seq)
        b.n_tokens = n
        code = self.lib.llama_decode(self.ctx, b)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")
        return np.ctypeslib.as_array(self.lib.llama_get_logits(self.ctx), shape=(self.n_seq, self.n_vocab))

    def greedy(self, prompts: list, n: int) -> list:
        """n greedy tokens after each prompt, from an empty cache."""
        self.reset()
        outs = [[int(t)] for t in self.feed(prompts).argmax(axis=1)]
        for _ in range(n - 1):
            for out, t in zip(outs, self.feed([[out[-1]] for out in outs]).argmax(axis=1)):
                out.append(int(t))
        return outs


def decode_rate(decoder: Decoder, prompts: list, tokens: int) -> float:
    """Tokens/s of all sequences together: batch x (N - 1) / (t(N) - t(1)), after a warm-up."""
    decoder.greedy(prompts, 2)
    times = {}
    for n in (1, tokens):
        start = time.perf_counter()
        decoder.greedy(prompts, n)
        times[n] = time.perf_counter() - start
    return len(prompts) * (tokens - 1) / (times[tokens] - times[1])


class Model:
    """A GGUF file loaded by llama.cpp (a context manager that frees it)."""

    def __init__(self, path: pathlib.Path):
        import llama_cpp as lib

        # llama-cpp-python prints llama.cpp's log lines whose level reaches its logger's (NOTSET: all).
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
        lib.llama_backend_init()
        self.lib = lib
        self.model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))

    def decoder(self, n_seq: int, positions: int, threads: int, max_tokens: int) -> Decoder:
        return Decoder(self.model, self.n_vocab, n_seq, positions, threads, max_tokens)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.lib.llama_model_free(self.model)


def _scripts():
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpt2_reference
    return gpt2_reference


def check_f32(model_dir: pathlib.Path, path: pathlib.Path, threads: int) -> dict:
    """llama.cpp on the F32 file against transformers on the checkpoint: whether 8 greedy tokens
    after a 16-token prompt are equal, and the largest difference of the prompt's last logits."""
    import numpy as np
    gpt2_reference = _scripts()

    with Model(path) as model:
        decoder = model.decoder(1, PROMPT + 8, threads, PROMPT)
        try:
            ids = gpt2_reference.prompt_ids(PROMPT, model.n_vocab)
            mine = decoder.greedy([ids], 8)[0]
            decoder.reset()
            logits = decoder.feed([ids])[0].astype(np.float64)
        finally:
            decoder.close()
    hf = gpt2_reference.load_hf(model_dir)
    expected = gpt2_reference.hf_last_logits(hf, ids).astype(np.float64)
    return {"greedy_equal": mine == gpt2_reference.hf_greedy(hf, ids, 8),
            "max_logit_diff": float(np.abs(logits - expected).max())}


def measure(model_dir: pathlib.Path, workdir: pathlib.Path, threads: int, tokens: int, prefill: int) -> dict:
    """The llama.cpp figures of every KIND; see the module docstring."""
    gpt2_reference = _scripts()
    sys.path.insert(0, str(ROOT / "bench"))
    import write_gguf

    result = {}
    for kind in KINDS:
        path = workdir / f"{model_dir.name}-{kind}.gguf"
        if not path.exists() and write_gguf.main([str(model_dir), str(path), "--type", kind]) != 0:
            raise RuntimeError(f"bench/write_gguf.py could not write {path}")
        if kind == "f32":  # agreement with transformers before any figure
            result["check"] = check_f32(model_dir, path, threads)
        with Model(path) as model:
            one = model.decoder(1, max(prefill, PROMPT + tokens) + 8, threads, max(prefill, PROMPT))
            many = model.decoder(BATCH, PROMPT + tokens + 8, threads, BATCH * PROMPT)
            try:
                ids = gpt2_reference.prompt_ids(PROMPT, model.n_vocab)
                result[f"{kind}_b1_tok_s"] = decode_rate(one, [ids], tokens)
                prompts = [gpt2_reference.prompt_ids(PROMPT, model.n_vocab, seed=s) for s in range(BATCH)]
                result[f"{kind}_b16_tok_s"] = decode_rate(many, prompts, tokens)
                if prefill:
                    prompt = gpt2_reference.prompt_ids(prefill, model.n_vocab)
                    one.reset()
                    one.feed([prompt])  # warm-up
                    one.reset()
                    start = time.perf_counter()
                    one.feed([prompt])
                    result[f"{kind}_prefill_ms"] = 1e3 * (time.perf_counter() - start)
            finally:
                one.close()
                many.close()
    return result


def _child(queue, *args) -> None:
    try:
        queue.put({"build": build_info()})
        queue.put(measure(*args))
    except Exception as e:  # reported by the parent as a skip with the reason
        queue.put({"skipped": f"llama.cpp failed: {type(e).__name__}: {e}"})


def measure_in_child(model_dir: pathlib.Path, workdir: pathlib.Path, threads: int, tokens: int,
                     prefill: int) -> dict:
    """`measure` in a child process. Returns its figures, or {"skipped": why} when it failed or died;
    either way with "build" when the child got as far as reporting it."""
    import multiprocessing
    import queue as queues
    import signal
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_child, args=(results, model_dir, workdir, threads, tokens, prefill))
    child.start()
    build = {}
    while True:
        try:
            message = results.get(timeout=1)
        except queues.Empty:
            if not child.is_alive():
                break
            continue
        if "build" in message:
            build = message
            continue
        child.join()
        return {**message, **build}
    child.join()
    code = child.exitcode
    died = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
    why = f"llama.cpp's process died ({died}) before it gave its figures"
    info = build.get("build", {})
    if "GCC" in info.get("compiler", "") and "AMX_INT8" in info.get("features", []):
        why += ("; a GCC 12 build with AMX dies in ggml's AMX kernels (docs/performance.md, 'llama.cpp for compare.py', "
                "says how to build it with clang)")
    return {"skipped": why, **build}


def ratios(ll: dict, kael_f32: dict, narrow: dict) -> dict:
    """kael / llama.cpp for each figure both measured (> 1: kael faster): f32 against F32, and
    kael's f16 and int8 against the F16 and Q8_0 files."""
    out = {}
    pairs = [("", kael_f32, "f32")] + [(f"{d}_", narrow[d], kind) for d, kind in (("f16", "f16"), ("int8", "q8_0"))
                                        if d in narrow]
    for prefix, kael, kind in pairs:
        for key, mine, faster_is_higher in (("b1", kael["b1"]["decode_tok_s"], True),
                                            ("b16", kael["b16"]["decode_tok_s"], True),
                                            ("prefill", kael["prefill"]["prefill_ms"], False)):
            theirs = ll.get(f"{kind}_{key}_tok_s" if key != "prefill" else f"{kind}_prefill_ms")
            if theirs:
                out[f"kael_{prefix}{key}_vs_llama_cpp_{kind}"] = mine / theirs if faster_is_higher else theirs / mine
    return out


def describe_build(info: dict) -> str:
    if not info:
        return "build unknown"
    return (f"llama-cpp-python {info['version']}, libggml-cpu built by {info['compiler']}; "
            f"ggml CPU features: {' '.join(info['features'])}")


def print_figures(outcome: dict, kael_f32: dict, cpu: str) -> None:
    """The llama.cpp lines of compare.py's report, from measure_in_child's answer (or
    {"skipped": why} alone when llama.cpp is not installed)."""
    if "build" in outcome:
        print(f"llama.cpp: {describe_build(outcome['build'])}; CPU: {cpu}")
    if "skipped" in outcome:
        print(f"llama.cpp: skipped: {outcome['skipped']}")
        return
    check = outcome["check"]
    print(f"llama.cpp F32 GGUF vs transformers: greedy 8 tokens {'equal' if check['greedy_equal'] else 'DIFFERENT'}, "
          f"max |logit diff| {check['max_logit_diff']:.2e}")
    print(f"{'':22}{'batch 1 tok/s':>15}{'batch 16 tok/s':>16}{'prefill ms':>12}")
    print(f"{'kael f32':22}{kael_f32['b1']['decode_tok_s']:>15.1f}{kael_f32['b16']['decode_tok_s']:>16.1f}"
          f"{kael_f32['prefill']['prefill_ms']:>12.1f}")
    for kind in KINDS:
        cells = [outcome.get(f"{kind}_{key}") for key in ("b1_tok_s", "b16_tok_s", "prefill_ms")]
        text = [f"{v:.1f}" if v is not None else "-" for v in cells]
        print(f"{'llama.cpp ' + kind:22}{text[0]:>15}{text[1]:>16}{text[2]:>12}")
