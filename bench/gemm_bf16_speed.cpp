// Speed of kernels::gemm_bf16 (BF16 operands, F32 sums: AMX-BF16 tiles on the amx set, vdpbf16ps
// on avx512) beside the F32 kernels::gemm, on the products of one GPT-2-small training step at
// B x T = 2048 tokens (8 x 256): each block's four matrices forward (X W), backward dX (dY W^T)
// and dW (X^T dY), and the output head's three, in its chunks of 256 rows and 2048-token vocabulary
// blocks, whose op(b) is converted once outside the timing as the head does (gemm_bf16_packed).
// One thread, timed in that thread's CPU time (so the figures hold on a loaded machine); each
// figure is the median of `repeats` calls, conversions included; then all the products
// once each in turn (as a step calls them), and the conversions alone. KAEL_ISA=avx512 times
// the vdpbf16ps kernel.
// Usage: gemm_bf16_speed [repeats (default 3)]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kael/core/cpu_clock.hpp"

using namespace kael::kernels;

using kael::thread_cpu_seconds;

namespace {

using GemmFn = void(float*, std::int64_t, const float*, std::int64_t, bool, const float*, std::int64_t, bool,
                    std::int64_t, std::int64_t, std::int64_t, bool, const float*);

// gemm_bf16 in GemmFn's form (kernels::gemm's arguments).
void bf16_product(float* c, std::int64_t ldc, const float* a, std::int64_t lda, bool trans_a, const float* b,
                  std::int64_t ldb, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate,
                  const float* bias) {
  gemm_bf16(c, ldc, a, lda, trans_a, b, ldb, trans_b, M, N, K, accumulate, bias);
}

struct Case {
  const char* what;
  std::int64_t M, N, K;
  bool trans_a, trans_b, accumulate;
  bool packed_b = false;  // op(b) converted once outside the timing, as the training head does
};

// One call of fn on the case's operands; with c.packed_b (and fn bf16_product), of
// gemm_bf16_packed on b16, op(b) already converted.
void call(GemmFn* fn, const Case& c, const std::vector<float>& a, const std::vector<float>& b,
          const std::vector<std::uint16_t>& b16, std::vector<float>& out) {
  const std::int64_t lda = c.trans_a ? c.M : c.K, ldb = c.trans_b ? c.K : c.N;
  if (c.packed_b && fn == bf16_product)
    gemm_bf16_packed(out.data(), c.N, a.data(), lda, c.trans_a, b16.data(), c.M, c.N, c.K, c.accumulate);
  else
    fn(out.data(), c.N, a.data(), lda, c.trans_a, b.data(), ldb, c.trans_b, c.M, c.N, c.K, c.accumulate, nullptr);
}

// op(b) of the case converted for gemm_bf16_packed, when the case times it that way.
std::vector<std::uint16_t> packed_operand(const Case& c, const std::vector<float>& b) {
  if (!c.packed_b) return {};
  std::vector<std::uint16_t> b16(static_cast<std::size_t>(bf16_operand_elements(c.N, c.K)));
  pack_bf16_operand(b16.data(), b.data(), c.trans_b ? c.K : c.N, c.trans_b, c.N, c.K);
  return b16;
}

// Median CPU seconds of `repeats` calls of fn on the case's operands.
double median_seconds(GemmFn* fn, const Case& c, const std::vector<float>& a, const std::vector<float>& b,
                      std::vector<float>& out, int repeats) {
  const std::vector<std::uint16_t> b16 = packed_operand(c, b);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double start = thread_cpu_seconds();
    call(fn, c, a, b, b16, out);
    times.push_back(thread_cpu_seconds() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  set_num_threads(1);
  std::string why;
  if (!gemm_bf16_available(&why)) {
    std::printf("gemm_bf16 cannot run here: %s\n", why.c_str());
    return 1;
  }
  std::printf("isa %s, BF16 product %s; 1 thread, CPU time, median of %d; GFLOP/s = 2 M N K / time\n",
              isa_name(active_isa()), gemm_bf16_kind(), repeats);
  const std::int64_t tokens = 2048, C = 768, V = 50257;
  const Case cases[] = {
      {"qkv forward X W", tokens, 3 * C, C, false, false, false},
      {"attn proj forward", tokens, C, C, false, false, false},
      {"fc forward", tokens, 4 * C, C, false, false, false},
      {"mlp proj forward", tokens, C, 4 * C, false, false, false},
      {"qkv dX = dY W^T", tokens, C, 3 * C, false, true, false},
      {"fc dX", tokens, C, 4 * C, false, true, false},
      {"mlp proj dX", tokens, 4 * C, C, false, true, false},
      {"qkv dW += X^T dY", C, 3 * C, tokens, true, false, true},
      {"fc dW", C, 4 * C, tokens, true, false, true},
      {"mlp proj dW", 4 * C, C, tokens, true, false, true},
      {"head logits (256 rows)", 256, V, C, false, true, false, true},
      {"head dX (256 x 2048 block)", 256, C, 2048, false, false, true, true},
      {"head dW (2048 block x 256)", 2048, C, 256, true, false, true, true},
  };
  std::printf("%-28s %6s %6s %6s %10s %10s %6s\n", "product", "M", "N", "K", "f32 GF/s", "bf16 GF/s", "x");
  double f32_total = 0, bf16_total = 0, flops_total = 0;
  for (const Case& c : cases) {
    std::vector<float> a(static_cast<std::size_t>(c.M * c.K), 0.01f), b(static_cast<std::size_t>(c.K * c.N), 0.02f);
    std::vector<float> out(static_cast<std::size_t>(c.M * c.N));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 89) * 0.01f - 0.4f;
    const double f32 = median_seconds(gemm, c, a, b, out, repeats);
    const double bf16 = median_seconds(bf16_product, c, a, b, out, repeats);
    const double flops = 2.0 * static_cast<double>(c.M) * static_cast<double>(c.N) * static_cast<double>(c.K);
    f32_total += f32;
    bf16_total += bf16;
    flops_total += flops;
    std::printf("%-28s %6lld %6lld %6lld %10.1f %10.1f %6.2f\n", c.what, static_cast<long long>(c.M),
                static_cast<long long>(c.N), static_cast<long long>(c.K), flops / f32 * 1e-9, flops / bf16 * 1e-9,
                f32 / bf16);
  }
  std::printf("%-28s %6s %6s %6s %10.1f %10.1f %6.2f\n", "all of the above", "", "", "", flops_total / f32_total * 1e-9,
              flops_total / bf16_total * 1e-9, f32_total / bf16_total);
  // As a training step calls them: each product once, in turn, so every call finds its scratch
  // last sized by another shape (the medians above repeat one shape).
  {
    std::vector<std::vector<float>> as, bs, outs;
    std::vector<std::vector<std::uint16_t>> b16s;
    for (const Case& c : cases) {
      as.emplace_back(static_cast<std::size_t>(c.M * c.K), 0.01f);
      bs.emplace_back(static_cast<std::size_t>(c.K * c.N), 0.02f);
      outs.emplace_back(static_cast<std::size_t>(c.M * c.N));
      b16s.push_back(packed_operand(c, bs.back()));
    }
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const double start = thread_cpu_seconds();
      for (std::size_t i = 0; i < std::size(cases); ++i) {
        call(bf16_product, cases[i], as[i], bs[i], b16s[i], outs[i]);
      }
      best = std::min(best, thread_cpu_seconds() - start);
    }
    std::printf("%-28s %6s %6s %6s %10s %10.1f   (best of %d)\n", "in turn, as in a step", "", "", "", "",
                flops_total / best * 1e-9, repeats);
  }
  // The conversions alone: op(b) packed by pack_bf16_operand, and a transposed op(a) through a
  // product 32 columns wide, whose time is nearly all the packing of its (768, 2048) op(a).
  std::printf("\nconversions (best of %d)          ms\n", 4 * repeats);
  struct Pack {
    const char* what;
    std::int64_t K, N;
    bool trans;
  };
  const Pack packs[] = {{"op(b) (3072, 768)", 3072, 768, false}, {"op(b) (768, 3072)", 768, 3072, false},
                        {"op(b) = b^T (768, 2304)", 768, 2304, true}};
  for (const Pack& p : packs) {
    const std::vector<float> b(static_cast<std::size_t>(p.K * p.N), 0.25f);
    std::vector<std::uint16_t> b16(static_cast<std::size_t>(bf16_operand_elements(p.N, p.K)));
    double best = 1e30;
    for (int r = 0; r < 4 * repeats; ++r) {
      const double start = thread_cpu_seconds();
      pack_bf16_operand(b16.data(), b.data(), p.trans ? p.K : p.N, p.trans, p.N, p.K);
      best = std::min(best, thread_cpu_seconds() - start);
    }
    std::printf("%-32s %6.3f\n", p.what, best * 1e3);
  }
  {
    const Case c{"X^T dY, N = 32", C, 32, tokens, true, false, false};
    const std::vector<float> a(static_cast<std::size_t>(c.M * c.K), 0.25f), b(static_cast<std::size_t>(c.K * c.N), 0.5f);
    std::vector<float> out(static_cast<std::size_t>(c.M * c.N));
    double best = 1e30;
    for (int r = 0; r < 4 * repeats; ++r) best = std::min(best, median_seconds(bf16_product, c, a, b, out, 1));
    std::printf("%-32s %6.3f\n", "op(a) = X^T (768, 2048), N = 32", best * 1e3);
  }
  return 0;
}
