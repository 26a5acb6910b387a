#!/usr/bin/env python3
"""kael against the machine's bounds and against the engines users would pick instead, in one
run, on one checkpoint, with the same number of threads.

Measures (every figure printed, with what it is compared against):
  bandwidth   build/bench/bandwidth: THREADS threads sum a 1 GB buffer on huge pages with 256-bit
              loads (best of 8 passes). Decode bound = bandwidth / bytes one decode step must
              read, i.e. every F32 weight except the position table wpe (one row of it is read);
              for a narrow weight type its matrices at that type's bytes. Also printed: kael's
              fastest step against the bound (a step and a probe pass each read about 0.5 GB).
  FMA peak    build/bench/fma_peak: independent FMA chains of the widest FMA the CPU has (zmm
              with AVX-512, else ymm) per thread; the per-core rate is taken from each thread's
              CPU time (robust on a shared host), and peak = THREADS x per-core rate
              (= cores x FMA units x lanes x 2 flops x clock, the units counted by fma_peak
              against the clock one dependent FMA chain gives: 2 zmm FMAs a cycle on Intel's
              server cores, 1 where AVX-512 runs on 256-bit units, as on Zen 4). The same probe
              measures the int8 dot product's peak (vpdpbusd or pmaddubsw chains), in int8
              multiply-adds per second.
  kael        `kael bench --json`: batch 1 and batch 16 greedy decode, and a 512-token prefill,
              each after kael bench's default warm-up round (as every peer below runs warm).
  transformers  GPT2LMHeadModel (torch, float32, eager attention), torch.set_num_threads(THREADS),
              model.generate(do_sample=False) with min_new_tokens = max_new_tokens = N; decode
              rate = (N - 1) / (t(N) - t(1)), which removes the prefill and setup; prefill = one
              forward over the 512-token prompt, after the decode runs and a 16-token forward.
  CTranslate2 converted from the same checkpoint (float32), Generator(intra_threads=THREADS),
              generate_batch(sampling_topk=1, min_length = max_length), the same t(N) - t(1) rule;
              the prefill (prompt plus one token) after the decode runs.
  per ISA     the kael rows again with KAEL_ISA=I for each of --isas (default avx2,avx512), each
              set kael cannot run here reported as skipped.
  llama.cpp   bench/llama_cpp_peer.py: llama-cpp-python (PyPI; it builds llama.cpp from source, see
              docs/performance.md, "llama.cpp for compare.py", for the build this machine needs)
              through its C API, on GGUF files written from the same checkpoint by
              bench/write_gguf.py (F32, F16, Q8_0), THREADS threads:
              first a check that the F32 file's greedy tokens and last logits match transformers',
              then per file batch 1 and batch 16 greedy decode (16 sequences in one context, one
              llama_decode per step; the t(N) - t(1) rule) and the 512-token prefill (one
              llama_decode). Prints how llama.cpp was built (compiler, ggml's CPU features). Skipped,
              saying so, when llama_cpp or gguf is not importable (nothing is installed); run in a
              child process, so a llama.cpp that dies (SIGILL) is a skip with its signal.
  narrow weights  `kael bench --dtype D` for each of --dtypes (f16, int8, bf16): batch 1 and
              batch 16 decode and the 512-token prefill, against kael f32 and CTranslate2
              compute_type="int8" (same converted model, the same three measurements).
  threads     batch 1 f32 again with each thread count below THREADS, beside the bandwidth probe
              run with as many threads.
  interleaved build/bench/decode_probe: batch 1 in every weight type (f32 and --dtypes) at every
              thread count up to THREADS, each decode step followed by a pass of the read probe
              over as many bytes as the step reads, on the same threads; per step its read rate
              over the mean of the two passes beside it, the median over 64 steps. The host moves
              its bandwidth between two levels from second to second, so this compares a step with
              the bandwidth of the same moment (docs/performance.md, "Batch-1 decode against the
              interleaved probe").
  targets     each speed goal of the kernels, printed as measured / goal with "met" or "not met":
              batch 1 >= 0.85 of its bound in every weight type (the bound from the bytes that
              weight type's step reads: its matrices at that type's bytes) and at every
              thread count, taken against the interleaved probe; f16 batch 16 >= f32 batch 16; f32 prefill >= 0.85 of the FMA peak
              with one zmm FMA unit, 0.6 with two, and >= 1.3x CTranslate2 float32; int8 prefill
              >= 0.6 of the int8 dot peak; f32 batch 16 >= 1.3x CTranslate2 and >= 8x kael batch
              1; int8 prefill >= 1.5x and batch 16 >= 1.3x CTranslate2 int8; int8 and bf16
              prefill >= 3x kael's f32 prefill on KAEL_ISA=avx512 (the AMX goal; the default
              kernel set's f32 when avx512 is not in --isas); batch 1 f32 >= 1.3x llama.cpp F32,
              f16 >= 1.3x its F16 and int8 >= 1.6x its Q8_0.

Prefill FLOPs (512 tokens): 2 x matrix parameters of the blocks x T, plus the causal attention
2 x 2 x head_dim x n_head x n_layer x T(T+1)/2, plus the head for the last position.

Rounds: with --rounds N every engine is measured N times, the engines taking turns within each
round, and each figure is that engine's best (a host's other tenants only slow a run down, and
rarely the same one in every round); every round's figures are printed below the tables.

Usage: bench/compare.py [--model DIR] [--kael build/kael] [--threads 2] [--tokens 128] [--rounds 1] [--json]
Without --model a seeded GPT-2-small-shape checkpoint is built (scripts/gpt2_reference.py) in
--workdir and reused by later runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import llama_cpp_peer  # noqa: E402  (bench/, beside this file)
from cpu_name import cpu_name
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def run_json(cmd: list, env: dict | None = None) -> dict:
    out = subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def load_avg() -> float:
    return os.getloadavg()[0]


def model_shape(model_dir: pathlib.Path) -> dict:
    config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
    shape = dict(n_layer=config.get("n_layer", 12), n_head=config.get("n_head", 12), n_embd=config.get("n_embd", 768),
                 n_positions=config.get("n_positions", 1024), vocab_size=config.get("vocab_size", 50257))
    c, l = shape["n_embd"], shape["n_layer"]
    shape["block_matrix_params"] = l * 12 * c * c  # c_attn 3C^2, attn c_proj C^2, c_fc 4C^2, mlp c_proj 4C^2
    params = shape["vocab_size"] * c + shape["n_positions"] * c + l * (12 * c * c + 13 * c) + 2 * c
    shape["params"] = params
    # What a step reads in each weight type: the block matrices and the head in that type (int8: a
    # byte a weight and a BF16 scale per 32), the biases and LayerNorm in F32, one row of wpe.
    matrices, vectors = shape["block_matrix_params"] + shape["vocab_size"] * c, l * 13 * c + 2 * c
    shape["decode_bytes_by_dtype"] = {d: matrices * per_weight + 4 * vectors
                                      for d, per_weight in (("f32", 4), ("f16", 2), ("bf16", 2), ("int8", 1 + 2 / 32))}
    shape["decode_bytes"] = shape["decode_bytes_by_dtype"]["f32"]  # every F32 weight but wpe's other rows
    return shape


def prefill_flops(shape: dict, t: int) -> float:
    c, l = shape["n_embd"], shape["n_layer"]
    linear = 2.0 * shape["block_matrix_params"] * t
    attention = 2.0 * 2.0 * c * l * t * (t + 1) / 2
    head = 2.0 * shape["vocab_size"] * c
    return linear + attention + head


def measure_kael_b1(kael: pathlib.Path, model: pathlib.Path, threads: int, tokens: int, isa: str | None = None,
                    dtype: str = "f32") -> dict:
    env = dict(os.environ, KAEL_ISA=isa) if isa else None
    return run_json([kael, "bench", "--model", model, "--threads", threads, "--json", "--dtype", dtype,
                     "--batch", 1, "--prompt-tokens", 16, "--max-tokens", tokens], env)


def measure_kael(kael: pathlib.Path, model: pathlib.Path, threads: int, tokens: int, prefill: int,
                 isa: str | None = None, dtype: str = "f32") -> dict:
    base = [kael, "bench", "--model", model, "--threads", threads, "--json", "--dtype", dtype]
    env = dict(os.environ, KAEL_ISA=isa) if isa else None
    return {
        "b1": measure_kael_b1(kael, model, threads, tokens, isa, dtype),
        "b16": run_json(base + ["--batch", 16, "--prompt-tokens", 16, "--max-tokens", tokens], env),
        "prefill": run_json(base + ["--batch", 1, "--prompt-tokens", prefill, "--max-tokens", 1], env),
    }


def measure_interleaved(bench_dir: pathlib.Path, model: pathlib.Path, threads: int, dtype: str) -> dict:
    return run_json([bench_dir / "decode_probe", model, threads, dtype, 64])


def measure_transformers(model: pathlib.Path, threads: int, tokens: int, prefill: int) -> dict:
    import torch
    import gpt2_reference

    torch.set_num_threads(threads)
    hf = gpt2_reference.load_hf(model)
    vocab = hf.config.vocab_size

    def generate(batch: int, n: int) -> float:
        ids = torch.tensor([gpt2_reference.prompt_ids(16, vocab, seed=b) for b in range(batch)], dtype=torch.long)
        start = time.perf_counter()
        with torch.no_grad():
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                              min_new_tokens=n, pad_token_id=0)
        elapsed = time.perf_counter() - start
        assert out.shape[1] == 16 + n, out.shape
        return elapsed

    result = {}
    for batch in (1, 16):
        generate(batch, 2)  # warm-up
        t1, tn = generate(batch, 1), generate(batch, tokens)
        result[f"b{batch}_tok_s"] = batch * (tokens - 1) / (tn - t1)
    ids = torch.tensor([gpt2_reference.prompt_ids(prefill, vocab)], dtype=torch.long)
    with torch.no_grad():
        hf(ids[:, :16])
        start = time.perf_counter()
        hf(ids)
        result["prefill_ms"] = 1e3 * (time.perf_counter() - start)
    return result


def measure_ctranslate2(model: pathlib.Path, workdir: pathlib.Path, threads: int, tokens: int, prefill: int,
                        compute_type: str = "default", batches=(1, 16)) -> dict:
    import ctranslate2
    import gpt2_reference

    out_dir = workdir / "ct2-f32"
    if not (out_dir / "model.bin").exists():
        ctranslate2.converters.TransformersConverter(str(model)).convert(str(out_dir), force=True)
    generator = ctranslate2.Generator(str(out_dir), device="cpu", intra_threads=threads, inter_threads=1,
                                      compute_type=compute_type)
    id_to_token = {i: t for t, i in json.loads((model / "vocab.json").read_text()).items()}
    vocab = len(id_to_token)

    def generate(batch: int, prompt: int, n: int) -> float:
        starts = [[id_to_token[i] for i in gpt2_reference.prompt_ids(prompt, vocab, seed=b)] for b in range(batch)]
        start = time.perf_counter()
        results = generator.generate_batch(starts, max_length=n, min_length=n, sampling_topk=1,
                                           include_prompt_in_result=False)
        elapsed = time.perf_counter() - start
        got = len(results[0].sequences_ids[0])
        assert got == n, f"CTranslate2 generated {got} tokens, asked for {n}"
        return elapsed

    result = {}
    for batch in batches:
        generate(batch, 16, 2)  # warm-up
        t1, tn = generate(batch, 16, 1), generate(batch, 16, tokens)
        result[f"b{batch}_tok_s"] = batch * (tokens - 1) / (tn - t1)
    if prefill:
        result["prefill_ms"] = 1e3 * generate(1, prefill, 1)  # the prompt plus one token
    return result


def measure_round(args, model: pathlib.Path, bench_dir: pathlib.Path, skip: set) -> dict:
    """Every engine once, in a fixed order: the machine's bounds, kael f32 (default kernels, then
    per --isas), the peers, kael's narrow weights, CTranslate2 int8."""
    t = args.threads
    out = {}
    bw = run_json([bench_dir / "bandwidth", t, 1024])
    out["bandwidth_gb_s"] = bw["read_gb_s"]
    # Batch 1 with fewer threads than --threads, each beside the probe read with as many threads
    # (the decode goal holds for every thread count up to the cores).
    out["bandwidth_by_threads"], out["kael_b1_by_threads"] = {}, {}
    for n in range(1, t):
        out["bandwidth_by_threads"][n] = run_json([bench_dir / "bandwidth", n, 1024])["read_gb_s"]
        out["kael_b1_by_threads"][n] = measure_kael_b1(args.kael, model, n, args.tokens)
    fma = run_json([bench_dir / "fma_peak", t, 1])
    out["fma_peak_gflops"] = fma["peak_gflops"]
    out["fma_ghz_estimate"] = fma["ghz_estimate"]
    out["fma_isa"], out["fma_vector_bits"] = fma["isa"], fma["vector_bits"]
    out["fma_units"], out["fma_flops_per_cycle"] = fma["fma_units"], fma["flops_per_cycle"]
    out["int8_peak_gmacs"], out["int8_dot"] = fma["int8_peak_gmacs"], fma["int8_dot"]
    out["kael"] = measure_kael(args.kael, model, t, args.tokens, args.prefill)
    out["kael_isa"] = out["kael"]["b1"].get("isa", "?")
    out["kael_by_isa"] = {}
    for isa in filter(None, args.isas.split(",")):
        try:
            out["kael_by_isa"][isa] = measure_kael(args.kael, model, t, args.tokens, args.prefill, isa)
        except subprocess.CalledProcessError as e:
            out["kael_by_isa"][isa] = {"skipped": e.stderr.strip().splitlines()[-1] if e.stderr else str(e)}
    if "transformers" not in skip:
        out["transformers"] = measure_transformers(model, t, args.tokens, args.prefill)
    if "ctranslate2" not in skip:
        out["ctranslate2"] = measure_ctranslate2(model, args.workdir, t, args.tokens, args.prefill)
    if "llama.cpp" not in skip:
        why = llama_cpp_peer.missing()
        out["llama_cpp"] = ({"skipped": why} if why else
                            llama_cpp_peer.measure_in_child(model, args.workdir, t, args.tokens, args.prefill))
    dtypes = [d for d in args.dtypes.split(",") if d and d != "f32"]
    out["kael_dtypes"] = {}
    for d in dtypes:
        try:
            out["kael_dtypes"][d] = measure_kael(args.kael, model, t, args.tokens, args.prefill, dtype=d)
        except subprocess.CalledProcessError as e:  # bf16 without AVX512-BF16
            out["kael_dtypes"][d] = {"skipped": e.stderr.strip().splitlines()[-1] if e.stderr else str(e)}
    if "ctranslate2" not in skip and "int8" in dtypes:
        out["ctranslate2_int8"] = measure_ctranslate2(model, args.workdir, t, args.tokens, args.prefill, "int8")
    out["interleaved"] = {}
    for d in ["f32"] + dtypes:
        if "skipped" in out["kael_dtypes"].get(d, {}):
            continue
        for n in range(1, t + 1):
            out["interleaved"][f"{d}_{n}t"] = measure_interleaved(bench_dir, model, n, d)
    return out


def better(key: str):
    """How two measurements of `key` compare: max for rates and bounds, min for times, None for
    what is not a speed figure."""
    if key.endswith("tok_s") or key in ("bandwidth_gb_s", "fma_peak_gflops", "int8_peak_gmacs"):
        return max
    if key.endswith("_ms"):
        return min
    return None


def best_of_rounds(rounds: list) -> dict:
    """Each engine's best measurement over the rounds (on a shared host the other tenants only ever
    slow a run down). A kael run is kept whole (its JSON from the round where its own headline
    figure was best), so its CPU times and breakdown belong to the run reported; a peer's figures
    are separate measurements and each takes its best. The FMA peak is the highest measured, which
    makes the fraction of peak the harder one."""
    def kael_best(runs: list) -> dict:
        if any("skipped" in r for r in runs):
            return runs[0]
        return {"b1": max((r["b1"] for r in runs), key=lambda x: x["decode_tok_s"]),
                "b16": max((r["b16"] for r in runs), key=lambda x: x["decode_tok_s"]),
                "prefill": min((r["prefill"] for r in runs), key=lambda x: x["prefill_ms"])}

    def peer_best(runs: list) -> dict:
        if any("skipped" in r for r in runs):
            return runs[0]
        out = dict(runs[0])
        for key in out:
            pick = better(key)
            if pick is not None and isinstance(out[key], (int, float)):
                out[key] = pick(r[key] for r in runs)
        return out

    first = rounds[0]
    best = peer_best([{k: r[k] for k in ("bandwidth_gb_s", "fma_peak_gflops", "int8_peak_gmacs")} for r in rounds])
    fastest = max(rounds, key=lambda r: r["fma_peak_gflops"])
    best.update({k: fastest[k] for k in ("fma_ghz_estimate", "fma_isa", "fma_vector_bits", "fma_units",
                                         "fma_flops_per_cycle", "int8_dot")})
    best["kael"] = kael_best([r["kael"] for r in rounds])
    best["bandwidth_by_threads"] = {n: max(r["bandwidth_by_threads"][n] for r in rounds)
                                    for n in first["bandwidth_by_threads"]}
    best["kael_b1_by_threads"] = {n: max((r["kael_b1_by_threads"][n] for r in rounds), key=lambda x: x["decode_tok_s"])
                                  for n in first["kael_b1_by_threads"]}
    best["kael_isa"] = first["kael_isa"]
    best["kael_by_isa"] = {isa: kael_best([r["kael_by_isa"][isa] for r in rounds]) for isa in first["kael_by_isa"]}
    best["kael_dtypes"] = {d: kael_best([r["kael_dtypes"][d] for r in rounds]) for d in first["kael_dtypes"]}
    # Each round's step-against-its-probe ratio is already like with like: keep the median round's.
    best["interleaved"] = {key: sorted((r["interleaved"][key] for r in rounds), key=lambda x: x["vs_probe_p50"])[
        len(rounds) // 2] for key in first.get("interleaved", {})}
    for peer in ("transformers", "ctranslate2", "llama_cpp", "ctranslate2_int8"):
        if peer in first:
            best[peer] = peer_best([r[peer] for r in rounds])
    return best


def per_round_figures(rounds: list) -> dict:
    """The headline figures of every round, to show how far the host moved them."""
    def kael_figures(run: dict) -> dict:
        return {} if "skipped" in run else {"b1_tok_s": run["b1"]["decode_tok_s"],
                                            "b16_tok_s": run["b16"]["decode_tok_s"],
                                            "prefill_ms": run["prefill"]["prefill_ms"]}
    out = {}
    for r in rounds:
        row = {"read bandwidth": {"gb_s": r["bandwidth_gb_s"],
                                  **{f"gb_s_{n}t": v for n, v in r["bandwidth_by_threads"].items()}},
               "kael f32": kael_figures(r["kael"])}
        row.update({f"kael f32 {n} thread{'s' if n > 1 else ''}": {"b1_tok_s": run["decode_tok_s"]}
                    for n, run in r["kael_b1_by_threads"].items()})
        row.update({f"kael f32 {isa}": kael_figures(v) for isa, v in r["kael_by_isa"].items()})
        row.update({f"kael {d}": kael_figures(v) for d, v in r["kael_dtypes"].items()})
        for peer, name in (("transformers", "transformers"), ("ctranslate2", "CTranslate2"),
                           ("ctranslate2_int8", "CTranslate2 int8")):
            if peer in r:
                row[name] = {k: r[peer][k] for k in ("b1_tok_s", "b16_tok_s", "prefill_ms") if k in r[peer]}
        if "skipped" not in r.get("llama_cpp", {"skipped": True}):
            row["llama.cpp"] = {k: v for k, v in r["llama_cpp"].items() if better(k) is not None}
        for name, figs in row.items():
            for key, value in figs.items():
                out.setdefault(name, {}).setdefault(key, []).append(value)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=pathlib.Path, help="checkpoint dir (default: a seeded GPT-2 small)")
    parser.add_argument("--kael", type=pathlib.Path, default=ROOT / "build" / "kael")
    parser.add_argument("--bench-dir", type=pathlib.Path, help="where bandwidth and fma_peak are "
                        "(default: bench/ beside --kael)")
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("/tmp/kael_compare"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128, help="tokens generated per sequence")
    parser.add_argument("--prefill", type=int, default=512, help="prompt length of the prefill test")
    parser.add_argument("--skip", default="", help="comma list of peers to skip: transformers,ctranslate2,llama.cpp")
    parser.add_argument("--dtypes", default="f16,int8", help="kael weight dtypes measured beside f32 (batch 1)")
    parser.add_argument("--isas", default="avx2,avx512", help="kernel sets (KAEL_ISA) to measure kael f32 on")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every engine this many times, in turn, and keep each one's best "
                             "(the spread is printed too); 3 gives ratios that the host's other tenants move less")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, found {args.rounds}")

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = args.workdir / "gpt2-small-seeded"
        if not (model / "model.safetensors").exists():
            import gpt2_reference
            print(f"building a seeded GPT-2 small checkpoint in {model} ...", file=sys.stderr)
            gpt2_reference.make_checkpoint(model, seed=0)
    bench_dir = args.bench_dir or args.kael.parent / "bench"
    shape = model_shape(model)
    skip = set(filter(None, args.skip.split(",")))
    if "ctranslate2" not in skip and importlib.util.find_spec("ctranslate2") is None:
        print("CTranslate2 skipped: the ctranslate2 package is not installed", file=sys.stderr)
        skip.add("ctranslate2")
    t = args.threads

    figures = {"threads": t, "model": str(model), "cpu": cpu_name(), "load_avg_start": load_avg(),
               "rounds": args.rounds}
    figures["prefill_gflop"] = prefill_flops(shape, args.prefill) / 1e9
    figures["decode_bytes_mb"] = shape["decode_bytes"] / 1e6
    rounds = []
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"round {r + 1} of {args.rounds} (load average {load_avg():.1f}) ...", file=sys.stderr)
        rounds.append(measure_round(args, model, bench_dir, skip))
    figures.update(best_of_rounds(rounds))
    figures["per_round"] = per_round_figures(rounds)
    figures["decode_bound_tok_s"] = figures["bandwidth_gb_s"] * 1e9 / shape["decode_bytes"]
    figures["decode_bytes_mb_by_dtype"] = {d: b / 1e6 for d, b in shape["decode_bytes_by_dtype"].items()}
    figures["load_avg_end"] = load_avg()

    k = figures["kael"]
    kb1, kb16, kpre = k["b1"]["decode_tok_s"], k["b16"]["decode_tok_s"], k["prefill"]["prefill_ms"]
    gflop = figures["prefill_gflop"]
    ratios = {
        "kael_b1_vs_bound": kb1 / figures["decode_bound_tok_s"],
        # The host's other tenants move the read bandwidth between two levels from one second to
        # the next (docs/performance.md, "Decode against the bandwidth on a Zen 4"): the probe's
        # best pass and kael's fastest step both read about half a GB, so this ratio compares
        # like with like where the one above sets a whole run against the probe's best moment.
        "kael_b1_fastest_step_vs_bound": 1e3 / k["b1"]["latency_ms"]["min"] / figures["decode_bound_tok_s"],
        "kael_b16_vs_b1": kb16 / kb1,
        # Tokens per CPU-second instead of per second: the same ratio, less sensitive to other
        # work on the host taking cores away from one run and not the other.
        "kael_b16_vs_b1_cpu": (k["b16"]["generated_tokens"] / k["b16"]["decode_cpu_ms"])
                              / (k["b1"]["generated_tokens"] / k["b1"]["decode_cpu_ms"]),
        "kael_prefill_vs_peak": gflop / (kpre / 1e3) / figures["fma_peak_gflops"],
        # The same from CPU time: what the run achieved per core while it had one.
        "kael_prefill_vs_peak_cpu": gflop / (k["prefill"]["prefill_cpu_ms"] / 1e3) / (figures["fma_peak_gflops"] / t),
    }
    for peer in ("transformers", "ctranslate2"):
        if peer in figures:
            p = figures[peer]
            ratios[f"kael_b1_vs_{peer}"] = kb1 / p["b1_tok_s"]
            ratios[f"kael_b16_vs_{peer}"] = kb16 / p["b16_tok_s"]
            ratios[f"kael_prefill_vs_{peer}"] = p["prefill_ms"] / kpre
    # The AMX goal compares with kael's f32 prefill on the AVX-512 kernels.
    avx512 = figures["kael_by_isa"].get("avx512", {})
    f32_avx512_pre = avx512["prefill"]["prefill_ms"] if "prefill" in avx512 else kpre
    narrow = {d: out for d, out in figures["kael_dtypes"].items() if "skipped" not in out}
    for n, run in figures["kael_b1_by_threads"].items():
        bound = figures["bandwidth_by_threads"][n] * 1e9 / shape["decode_bytes"]
        ratios[f"kael_b1_{n}t_vs_bound"] = run["decode_tok_s"] / bound
    for d, out in narrow.items():
        ratios[f"kael_{d}_b1_vs_f32"] = out["b1"]["decode_tok_s"] / kb1
        ratios[f"kael_{d}_b1_vs_bound"] = (out["b1"]["decode_tok_s"] * shape["decode_bytes_by_dtype"][d]
                                           / (figures["bandwidth_gb_s"] * 1e9))
        ratios[f"kael_{d}_b16_vs_f32"] = out["b16"]["decode_tok_s"] / kb16
        ratios[f"kael_{d}_prefill_vs_f32_avx512"] = f32_avx512_pre / out["prefill"]["prefill_ms"]
    if "skipped" not in figures.get("llama_cpp", {"skipped": "not run"}):
        ratios.update(llama_cpp_peer.ratios(figures["llama_cpp"], k, narrow))
    for key, run in figures["interleaved"].items():
        ratios[f"kael_{key}_b1_vs_interleaved_probe"] = run["vs_probe_p50"]
    if "int8" in narrow:
        # The int8 products' multiply-adds (the blocks' matrices for every token, the head for the
        # last) against the dot product's peak; attention runs in F32 inside the same time.
        macs = shape["block_matrix_params"] * args.prefill + shape["vocab_size"] * shape["n_embd"]
        ratios["kael_int8_prefill_vs_int8_peak"] = (
            macs / (narrow["int8"]["prefill"]["prefill_ms"] / 1e3) / (figures["int8_peak_gmacs"] * 1e9))
    if "ctranslate2_int8" in figures and "int8" in narrow:
        ki, ci = narrow["int8"], figures["ctranslate2_int8"]
        ratios["kael_int8_b1_vs_ctranslate2_int8"] = ki["b1"]["decode_tok_s"] / ci["b1_tok_s"]
        ratios["kael_int8_b16_vs_ctranslate2_int8"] = ki["b16"]["decode_tok_s"] / ci["b16_tok_s"]
        ratios["kael_int8_prefill_vs_ctranslate2_int8"] = ci["prefill_ms"] / ki["prefill"]["prefill_ms"]
    figures["ratios"] = ratios
    # (ratio, goal, what it is): every speed target of the kernels that this run measured.
    # F32 prefill against the FMA peak: 0.85 where AVX-512 runs on 256-bit units (one zmm FMA a
    # cycle: the loads and broadcasts fit beside it), 0.6 with two 512-bit units.
    f32_goal = 0.85 if figures["fma_vector_bits"] == 512 and figures["fma_units"] == 1 else 0.6
    # Batch 1 against the read bandwidth: each step against the probe passes beside it (the
    # whole-run ratios above, kael_*b1*_vs_bound, set a run against the probe's best moment).
    goals = [*((f"kael_{key}_b1_vs_interleaved_probe", 0.85,
                f"{key.split('_')[0]} batch 1, {key.split('_')[1][:-1]} thr / interleaved probe")
               for key in figures["interleaved"]),
             ("kael_f16_b16_vs_f32", 1.0, "f16 batch 16 vs f32 batch 16"),
             ("kael_prefill_vs_peak", f32_goal, "f32 prefill / FMA peak"),
             ("kael_int8_prefill_vs_int8_peak", 0.6, "int8 prefill / int8 dot peak"),
             ("kael_prefill_vs_ctranslate2", 1.3, "f32 prefill vs CTranslate2 float32"),
             ("kael_b16_vs_ctranslate2", 1.3, "f32 batch 16 vs CTranslate2 float32"),
             ("kael_b16_vs_b1", 8.0, "f32 batch 16 / kael batch 1"),
             ("kael_int8_prefill_vs_ctranslate2_int8", 1.5, "int8 prefill vs CTranslate2 int8"),
             ("kael_int8_b16_vs_ctranslate2_int8", 1.3, "int8 batch 16 vs CTranslate2 int8"),
             ("kael_int8_prefill_vs_f32_avx512", 3.0, "int8 prefill vs kael f32 avx512 prefill"),
             ("kael_bf16_prefill_vs_f32_avx512", 3.0, "bf16 prefill vs kael f32 avx512 prefill"),
             # batch 1 against llama.cpp in each weight type
             ("kael_b1_vs_llama_cpp_f32", 1.3, "f32 batch 1 vs llama.cpp F32"),
             ("kael_f16_b1_vs_llama_cpp_f16", 1.3, "f16 batch 1 vs llama.cpp F16"),
             ("kael_int8_b1_vs_llama_cpp_q8_0", 1.6, "int8 batch 1 vs llama.cpp Q8_0")]
    figures["targets"] = {name: {"value": ratios[name], "goal": goal, "met": ratios[name] >= goal}
                          for name, goal, _ in goals if name in ratios}

    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    cpu_line = f"CPU: {figures['cpu']}; kael kernels: {figures['kael_isa']}"
    print(cpu_line)
    print(f"machine: {t} threads; memory read {figures['bandwidth_gb_s']:.1f} GB/s; {figures['fma_isa']} FMA peak "
          f"{figures['fma_peak_gflops']:.0f} GFLOP/s (~{figures['fma_ghz_estimate']:.2f} GHz x "
          f"{figures['fma_flops_per_cycle']} flops/cycle/core: {figures['fma_units']} x {figures['fma_vector_bits']}-bit "
          f"FMAs a cycle); int8 dot peak ({figures['int8_dot']}) {figures['int8_peak_gmacs']:.0f} G multiply-adds/s; "
          f"load average {figures['load_avg_start']:.1f} -> {figures['load_avg_end']:.1f}")
    print(f"decode bound: {figures['bandwidth_gb_s']:.1f} GB/s / {figures['decode_bytes_mb']:.1f} MB per step = "
          f"{figures['decode_bound_tok_s']:.1f} tokens/s; prefill of {args.prefill} tokens = {gflop:.1f} GFLOP")
    rows = [("decode batch 1 (tok/s)", "b1_tok_s", kb1), ("decode batch 16 (tok/s, total)", "b16_tok_s", kb16),
            (f"prefill {args.prefill} (ms)", "prefill_ms", kpre)]
    print(f"{'':34}{'kael':>10}{'transformers':>14}{'CTranslate2':>13}{'bound':>10}")
    for label, key, mine in rows:
        hf = figures.get("transformers", {}).get(key)
        ct = figures.get("ctranslate2", {}).get(key)
        bound = figures["decode_bound_tok_s"] if key == "b1_tok_s" else (
            gflop / figures["fma_peak_gflops"] * 1e3 if key == "prefill_ms" else None)
        cells = [f"{v:.1f}" if v is not None else "-" for v in (mine, hf, ct, bound)]
        print(f"{label:34}{cells[0]:>10}{cells[1]:>14}{cells[2]:>13}{cells[3]:>10}")
    print(f"prefill: {gflop / (kpre / 1e3):.1f} GFLOP/s wall, "
          f"{gflop / (k['prefill']['prefill_cpu_ms'] / 1e3):.1f} GFLOP/s per core (flops / CPU seconds of all threads)")
    if figures["kael_by_isa"]:
        print(f"kael f32 per kernel set (KAEL_ISA); CPU: {figures['cpu']}")
        print(f"{'':14}{'batch 1 tok/s':>15}{'batch 16 tok/s':>16}{'prefill ms':>12}{'prefill GFLOP/s/core':>22}")
        for isa, out in figures["kael_by_isa"].items():
            if "skipped" in out:
                print(f"{isa:14}skipped: {out['skipped']}")
                continue
            per_core = gflop / (out["prefill"]["prefill_cpu_ms"] / 1e3)
            print(f"{isa:14}{out['b1']['decode_tok_s']:>15.1f}{out['b16']['decode_tok_s']:>16.1f}"
                  f"{out['prefill']['prefill_ms']:>12.1f}{per_core:>22.1f}")
    if "llama_cpp" in figures:
        llama_cpp_peer.print_figures(figures["llama_cpp"], k, figures["cpu"])
    print(f"narrow weights (kael --dtype D, default kernel set); {cpu_line}")
    print(f"{'':22}{'batch 1 tok/s':>15}{'batch 16 tok/s':>16}{'prefill ms':>12}{'prefill x f32 avx512':>22}")
    print(f"{'kael f32':22}{kb1:>15.1f}{kb16:>16.1f}{kpre:>12.1f}{f32_avx512_pre / kpre:>22.2f}")
    for d, out in figures["kael_dtypes"].items():
        if "skipped" in out:
            print(f"{'kael ' + d:22}skipped: {out['skipped']}")
            continue
        pre = out["prefill"]["prefill_ms"]
        print(f"{'kael ' + d:22}{out['b1']['decode_tok_s']:>15.1f}{out['b16']['decode_tok_s']:>16.1f}{pre:>12.1f}"
              f"{f32_avx512_pre / pre:>22.2f}")
    if "ctranslate2_int8" in figures:
        ci = figures["ctranslate2_int8"]
        print(f"{'CTranslate2 int8':22}{ci['b1_tok_s']:>15.1f}{ci['b16_tok_s']:>16.1f}{ci['prefill_ms']:>12.1f}"
              f"{f32_avx512_pre / ci['prefill_ms']:>22.2f}")
    if figures["kael_b1_by_threads"]:
        print(f"f32 batch 1 by thread count (the probe with as many threads); {cpu_line}")
        print(f"{'threads':>8}{'probe GB/s':>12}{'kael tok/s':>12}{'kael GB/s':>11}{'/ probe':>9}")
        for n, run in {**figures["kael_b1_by_threads"], t: k["b1"]}.items():
            probe = figures["bandwidth_by_threads"].get(n, figures["bandwidth_gb_s"])
            read = run["decode_tok_s"] * shape["decode_bytes"] / 1e9
            print(f"{n:>8}{probe:>12.1f}{run['decode_tok_s']:>12.1f}{read:>11.1f}{read / probe:>9.2f}")
    print(f"batch 1 against the interleaved probe (decode_probe: a step, then a probe pass of its bytes); {cpu_line}")
    print(f"{'':12}{'threads':>8}{'step MB':>9}{'step ms':>9}{'step GB/s':>11}{'probe GB/s':>12}{'step / probe':>14}")
    for key, run in figures["interleaved"].items():
        d, n = key.split("_")
        print(f"{'kael ' + d:12}{n[:-1]:>8}{run['step_mb']:>9.1f}{run['step_ms_p50']:>9.2f}{run['step_gb_s_p50']:>11.1f}"
              f"{run['probe_gb_s_p50']:>12.1f}{run['vs_probe_p50']:>14.2f}")
    print("ratios: " + ", ".join(f"{name} {value:.2f}" for name, value in ratios.items()))
    print(f"targets; {cpu_line}")
    for name, goal, what in goals:
        if name in figures["targets"]:
            value = figures["targets"][name]["value"]
            print(f"  {what:42} {value:6.2f} (goal >= {goal:g}): {'met' if value >= goal else 'NOT met'}")
        else:
            print(f"  {what:42} not measured in this run")
    if args.rounds > 1:
        print(f"each engine's best of {args.rounds} rounds above; every round (batch 1 tok/s, batch 16 tok/s, "
              "prefill ms):")
        for name, figs in figures["per_round"].items():
            cells = "; ".join(f"{key} " + " / ".join(f"{v:.1f}" for v in values) for key, values in figs.items())
            print(f"  {name:22} {cells}")
    b = k["b1"]["breakdown_ms"]
    print(f"kael batch 1: latency p50 {k['b1']['latency_ms']['p50']:.2f} ms, p95 {k['b1']['latency_ms']['p95']:.2f} ms;"
          f" peak RSS {k['b1']['peak_rss_mb']:.0f} MB for {k['b1']['weights_mb']:.0f} MB of weights; breakdown (ms) "
          + ", ".join(f"{name} {b[name]:.0f}" for name in ("attention", "mlp", "layer_norm", "logits", "other")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
