"""kael's tensor library against torch on the CPU, in one run and one table: bench/tensor_speed
(kael::matmul vs its GEMM at GPT-2 shapes, add/mul/exp/sigmoid/tanh/sum at 16M F32 elements and
add with a broadcast row and with a transposed operand, against a read bandwidth probe, add
against a plain-store loop, cross_entropy and layer_norm forward and backward, autograd
bookkeeping per op), then the same ops in torch with
torch.set_num_threads equal to kael's thread count. Best of several runs each, as tensor_speed.

    python3 bench/tensor_vs_torch.py [--binary build/bench/tensor_speed] [--threads N]
"""
import argparse
import json
import pathlib
import subprocess
import time
from cpu_name import cpu_name

ROOT = pathlib.Path(__file__).resolve().parents[1]


def best_seconds(f, reps=5):
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def torch_figures(torch, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out = {}
    for m, k, n in [(1024, 768, 2304), (1024, 768, 3072), (1024, 3072, 768)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        out[f"({m}x{k})@({k}x{n})"] = best_seconds(lambda: torch.matmul(a, b))
    size = 1 << 24
    reps = 20  # as tensor_speed's elementwise runs
    a, b = torch.randn(size), torch.randn(size)
    out["add"] = best_seconds(lambda: torch.add(a, b), reps)
    out["mul"] = best_seconds(lambda: torch.mul(a, b), reps)
    out["mul_scalar"] = best_seconds(lambda: torch.mul(a, 0.5), reps)
    out["exp"] = best_seconds(lambda: torch.exp(a), reps)
    out["sigmoid"] = best_seconds(lambda: torch.sigmoid(a), reps)
    out["tanh"] = best_seconds(lambda: torch.tanh(a), reps)
    out["sum"] = best_seconds(lambda: torch.sum(a), reps)
    square, bias, other = a.view(4096, 4096), torch.randn(4096), b.view(4096, 4096)
    out["add_bias_row"] = best_seconds(lambda: torch.add(square, bias), reps)
    out["add_transposed"] = best_seconds(lambda: torch.add(square.T, other), reps)
    logits, target = torch.randn(1024, 50257, requires_grad=True), torch.randint(0, 50257, (1024,))
    x, w, b = (torch.randn(8192, 768, requires_grad=True), torch.ones(768, requires_grad=True),
               torch.zeros(768, requires_grad=True))
    F = torch.nn.functional

    def no_grad(f):
        def run():
            with torch.no_grad():
                f()
        return run

    out["cross_entropy"] = (best_seconds(no_grad(lambda: F.cross_entropy(logits, target)), 7),
                            best_seconds(lambda: F.cross_entropy(logits, target).backward(), 7))
    out["layer_norm"] = (best_seconds(no_grad(lambda: F.layer_norm(x, (768,), w, b)), 7),
                         best_seconds(lambda: F.layer_norm(x, (768,), w, b).sum().backward(), 7))
    ops = 2000
    leaf = torch.randn(16, requires_grad=True)

    def chain():
        x = leaf
        for _ in range(ops):
            x = x + 1.0
        return x

    def no_grad_chain():
        with torch.no_grad():
            chain()

    recorded = best_seconds(chain)
    plain = best_seconds(no_grad_chain)
    out["autograd"] = {"with_grad_us_per_op": recorded / ops * 1e6, "no_grad_us_per_op": plain / ops * 1e6,
                       "bookkeeping_us_per_op": (recorded - plain) / ops * 1e6,
                       "backward_us_per_op": (best_seconds(lambda: chain().sum().backward()) - recorded) / ops * 1e6}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=str(ROOT / "build" / "bench" / "tensor_speed"))
    parser.add_argument("--threads", type=int, default=0, help="kael's threads (0: its default)")
    args = parser.parse_args()
    command = [args.binary] + ([str(args.threads)] if args.threads else [])
    lines = [json.loads(line) for line in subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()
             if line.startswith("{")]
    head, rows = lines[0], lines[1:]
    threads = head["threads"]
    import torch

    theirs = torch_figures(torch, threads)
    print(f"CPU: {cpu_name()} (lscpu); kael threads {threads}, torch {torch.__version__} set_num_threads({threads})")
    print("\n(a) matmul, F32: kael::matmul vs kernels::gemm direct vs torch.matmul")
    print(f"{'shape':<24} {'kael ms':>9} {'gemm ms':>9} {'kael/gemm':>9} {'torch ms':>9} {'kael/torch':>10}")
    for r in rows:
        if r["bench"] == "matmul":
            t = theirs[r["shape"]] * 1e3
            print(f"{r['shape']:<24} {r['kael_ms']:>9.2f} {r['gemm_ms']:>9.2f} {r['ratio']:>9.3f} {t:>9.2f} {r['kael_ms'] / t:>10.2f}")
    bw = next(r["read_bw_gb_s"] for r in rows if r["bench"] == "elementwise")
    print(f"\n(b) 16M F32 elements; GB/s = bytes the op must move (reads + writes); read bandwidth probe {bw:.2f} GB/s")
    print(f"{'op':<15} {'kael ms':>9} {'kael GB/s':>10} {'/ bw':>6} {'torch ms':>9} {'torch GB/s':>10} {'kael/torch':>10}")
    for r in rows:
        if r["bench"] == "elementwise":
            t = theirs[r["op"]]
            torch_gbs = r["gb_s"] * r["ms"] / 1e3 / t
            print(f"{r['op']:<15} {r['ms']:>9.2f} {r['gb_s']:>10.2f} {r['ratio_to_bw']:>6.2f} {t * 1e3:>9.2f} "
                  f"{torch_gbs:>10.2f} {r['ms'] / 1e3 / t:>10.2f}")
    loop = next(r for r in rows if r["bench"] == "add_vs_stream_loop")
    print(f"add against a plain-store loop (STREAM's add) in turns: kael {loop['kael_ms']:.2f} ms, loop "
          f"{loop['loop_ms']:.2f} ms ({loop['loop_gb_s']:.2f} GB/s), kael/loop {loop['ratio']:.2f}")
    print("\n(c) row ops, ms: forward alone, then forward + backward")
    print(f"{'op':<28} {'kael fwd':>9} {'torch fwd':>9} {'kael both':>10} {'torch both':>10}")
    for r in rows:
        if r["bench"] == "row_op":
            forward, both = theirs[r["op"]]
            print(f"{r['op'] + ' ' + r['shape']:<28} {r['forward_ms']:>9.2f} {forward * 1e3:>9.2f} "
                  f"{r['forward_backward_ms']:>10.2f} {both * 1e3:>10.2f}")
    print("\n(d) autograd, a chain of 2000 adds of 16 elements, us per op")
    print(f"{'':<8} {'with grad':>10} {'no grad':>9} {'bookkeeping':>12} {'backward':>9}")
    ours = next(r for r in rows if r["bench"] == "autograd")
    for name, r in [("kael", ours), ("torch", theirs["autograd"])]:
        print(f"{name:<8} {r['with_grad_us_per_op']:>10.2f} {r['no_grad_us_per_op']:>9.2f} "
              f"{r['bookkeeping_us_per_op']:>12.2f} {r['backward_us_per_op']:>9.2f}")


if __name__ == "__main__":
    main()
