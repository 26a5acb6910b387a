// The int8 format of int8.hpp: per-group weight scales and rounding, the activation quantizer
// (every set's equal to the portable one bit for bit), non-finite inputs, and the size of the error
// the whole scheme makes against the exact F32 product. linear_matrix's agreement with its
// reference on ragged sizes is in kernels_quant_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kael/core/error.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/int8.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/targets/portable/kernels.hpp"
#if KAEL_X86_KERNELS
#include "kernels/targets/avx2/kernels.hpp"
#endif
#if KAEL_NEON_KERNELS
#include "kernels/targets/neon/kernels.hpp"
#endif
#include "kernels/quant.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;
using test_util::random_vector;

namespace {

struct Int8Matrix {
  std::vector<std::int8_t> q;
  std::vector<std::uint16_t> scales;
  Int8Matrix(const std::vector<float>& w, std::int64_t K, std::int64_t N, bool transposed = false)
      : q(static_cast<std::size_t>(int8_weight_bytes(K, N))),
        scales(static_cast<std::size_t>(int8_scale_count(K, N))) {
    quantize_int8_panels(q.data(), scales.data(), w.data(), K, N, transposed);
  }
};

// The scale group (k / 32, n) uses, found through a weight that is its group's maximum.
float group_max(const std::vector<float>& w, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = k / kInt8Group * kInt8Group; i < std::min(K, (k / kInt8Group + 1) * kInt8Group); ++i)
    amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(i * N + n)]));
  return amax;
}

// Tests run on each instruction set, skipped by name where it cannot run.
class Int8OnIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { test_util::use_isa_or_skip(GetParam()); }
  void TearDown() override { set_isa(detected_isa()); }
};

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) { return isa_name(info.param); }

}  // namespace

TEST(Int8Format, PaddedSizes) {
  EXPECT_EQ(int8_padded_k(1), 32);
  EXPECT_EQ(int8_padded_k(32), 32);
  EXPECT_EQ(int8_padded_k(33), 64);
  EXPECT_EQ(int8_padded_n(50257), 50272);
  EXPECT_EQ(int8_weight_bytes(768, 50257), 768 * 50272);
  EXPECT_EQ(int8_scale_count(768, 50257), 24 * 50272);
}

TEST(Int8Format, GroupScalesRoundUpAndWeightsRoundToNearest) {
  // K = 40: group 0 is k 0..31, group 1 the ragged k 32..39. Column 0 peaks at 2.54 in group 0
  // and 0.5 in group 1; column 1 is zero in group 0.
  const std::int64_t K = 40, N = 2;
  std::vector<float> w(K * N, 0.0f);
  w[0 * N + 0] = 2.54f;
  w[5 * N + 0] = -1.0f;
  w[6 * N + 0] = 0.011f;
  w[33 * N + 0] = 0.5f;
  w[39 * N + 1] = -3.0f;
  const Int8Matrix m(w, K, N);
  // Group (0, 0): scale = the smallest BF16 >= 2.54 / 127, so 2.54 maps to at most 127.
  const float s = int8_weight(m.q.data(), m.scales.data(), K, 0, 0) / m.q[0];
  EXPECT_GE(s, 2.54f / 127.0f);
  EXPECT_LT(s, 2.54f / 127.0f * (1.0f + 1.0f / 128));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(s) & 0xffffu, 0u);  // a BF16
  EXPECT_EQ(m.q[0], static_cast<std::int8_t>(std::nearbyint(2.54f / s)));
  EXPECT_FLOAT_EQ(int8_weight(m.q.data(), m.scales.data(), K, 5, 0), std::nearbyint(-1.0f / s) * s);
  EXPECT_FLOAT_EQ(int8_weight(m.q.data(), m.scales.data(), K, 6, 0), 1.0f * s);  // 0.011 / 0.02 rounds to 1
  // Each group has its own scale: 0.5 is its group's maximum and comes back nearly exact.
  EXPECT_NEAR(int8_weight(m.q.data(), m.scales.data(), K, 33, 0), 0.5f, 0.5f / 127 / 2);
  EXPECT_NEAR(int8_weight(m.q.data(), m.scales.data(), K, 39, 1), -3.0f, 3.0f / 127 / 2);
  EXPECT_EQ(int8_weight(m.q.data(), m.scales.data(), K, 3, 1), 0.0f);  // an all-zero group
  // Layout: weight (k, n) of panel 0 at 64 (k / 4) + 4 n + k % 4. A group's maximum maps to
  // 127, or 126 when rounding its scale up to a BF16 moved it below 126.5.
  EXPECT_GE(m.q[64 * (33 / 4) + 4 * 0 + 33 % 4], 126);
  EXPECT_LE(m.q[64 * (39 / 4) + 4 * 1 + 39 % 4], -126);
  // The transposed source (N, K) gives the same arrays.
  std::vector<float> wt(K * N);
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t n = 0; n < N; ++n) wt[n * K + k] = w[k * N + n];
  const Int8Matrix t(wt, K, N, true);
  EXPECT_EQ(t.q, m.q);
  EXPECT_EQ(t.scales, m.scales);
}

TEST(Int8Format, ErrorIsWithinHalfAStepOfTheGroup) {
  const std::int64_t K = 77, N = 21;
  auto w = random_vector(K * N, 5);
  // Tiny and huge groups keep their relative precision: the scales have F32's range.
  for (std::int64_t k = 32; k < 64; ++k) w[k * N + 3] *= 1e-30f;
  for (std::int64_t k = 0; k < 32; ++k) w[k * N + 4] *= 1e30f;
  const Int8Matrix m(w, K, N);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) {
      const float step = group_max(w, K, N, k, n) / 127 * (1.0f + 1.0f / 128);
      ASSERT_LE(std::abs(int8_weight(m.q.data(), m.scales.data(), K, k, n) - w[k * N + n]), 0.5f * step * 1.0001f)
          << k << "," << n;
    }
}

TEST(Int8Format, NonFiniteWeightsAreRefusedByPosition) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> w(4 * 3, 1.0f);
    w[2 * 3 + 1] = bad;
    std::vector<std::int8_t> q(static_cast<std::size_t>(int8_weight_bytes(4, 3)));
    std::vector<std::uint16_t> s(static_cast<std::size_t>(int8_scale_count(4, 3)));
    try {
      quantize_int8_panels(q.data(), s.data(), w.data(), 4, 3, false);
      FAIL() << "accepted " << bad;
    } catch (const kael::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("(2, 1)"), std::string::npos) << e.what();
    }
  }
}

TEST(Int8Activations, RoundToNearestEvenWithTheGroupMaximumAt127) {
  // One group: max 2.54 maps to 127; 0.01 * 127 / 2.54 = 0.5 exactly rounds to even (0).
  std::vector<float> x(32, 0.0f);
  x[0] = -2.54f;
  x[1] = 1.27f;
  x[2] = 0.01f;
  x[3] = 0.03f;  // 1.5: rounds to 2
  std::vector<std::int8_t> q(32);
  float scale = 0.0f;
  portable::quantize_rows(q.data(), &scale, x.data(), 1, 32);
  EXPECT_EQ(scale, 2.54f / 127.0f);
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], static_cast<std::int8_t>(std::nearbyint(1.27f * (127.0f / 2.54f))));
  EXPECT_EQ(q[2], static_cast<std::int8_t>(std::nearbyint(0.01f * (127.0f / 2.54f))));
  EXPECT_EQ(q[3], static_cast<std::int8_t>(std::nearbyint(0.03f * (127.0f / 2.54f))));
  EXPECT_EQ(q[31], 0);
}

TEST_P(Int8OnIsa, ActivationsQuantizeAsThePortableOneBitForBit) {
  for (std::int64_t K : {1, 5, 31, 32, 33, 100, 768}) {
    const std::int64_t T = 3, Kp = int8_padded_k(K), groups = Kp / kInt8Group;
    auto x = random_vector(T * K, static_cast<unsigned>(K), 3.0f);
    for (std::int64_t k = 0; k < std::min<std::int64_t>(K, 32); ++k) x[static_cast<std::size_t>(K + k)] = 0.0f;  // row 1: a zero group
    if (K > 40) x[static_cast<std::size_t>(2 * K + 40)] = std::numeric_limits<float>::infinity();
    std::vector<std::int8_t> qa(T * Kp, 99), qb(T * Kp, -99);
    std::vector<float> sa(T * groups), sb(T * groups);
    portable::quantize_rows(qa.data(), sa.data(), x.data(), T, K);
    kernels_for(GetParam()).quantize_rows(qb.data(), sb.data(), x.data(), T, K);
    ASSERT_EQ(qa, qb) << "K=" << K;
    for (std::size_t i = 0; i < sa.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(sa[i]), std::bit_cast<std::uint32_t>(sb[i])) << "K=" << K << " i=" << i;
    EXPECT_EQ(sa[static_cast<std::size_t>(groups)], 0.0f);  // the zero group
    if (K > 40) {
      EXPECT_TRUE(std::isnan(sa[static_cast<std::size_t>(2 * groups + 1)]));  // the infinity's group
    }
  }
}

TEST_P(Int8OnIsa, NonFiniteActivationsGiveNaNOutputs) {
  {
    const Isa isa = GetParam();
    const std::int64_t K = 64, N = 16;
    const auto w = random_vector(K * N, 1);
    const Int8Matrix m(w, K, N);
    auto x = random_vector(K, 2);
    x[40] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(N);
    int8_linear(y.data(), x.data(), m.q.data(), m.scales.data(), nullptr, 1, K, N);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << isa_name(isa);
  }
}

TEST_P(Int8OnIsa, ErrorAgainstTheExactProductIsSmall) {
  // Gaussian weights and activations (unit variance): the output's error is a sum of K
  // independent rounding errors of relative size ~1/254 (weights) and ~1/254 (activations),
  // so its RMS is about sqrt(K) * 2 * 0.29 / 127 * (max/sigma ~2.5) ~ 1% of the output's RMS.
  {
    const Isa isa = GetParam();
    const std::int64_t K = 768, N = 96, T = 4;
    const auto w = random_vector(K * N, 11), x = random_vector(T * K, 12);
    const Int8Matrix m(w, K, N);
    std::vector<float> y(T * N);
    int8_linear(y.data(), x.data(), m.q.data(), m.scales.data(), nullptr, T, K, N);
    double err = 0.0, ref = 0.0;
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t n = 0; n < N; ++n) {
        double exact = 0.0;
        for (std::int64_t k = 0; k < K; ++k) exact += static_cast<double>(x[t * K + k]) * w[k * N + n];
        err += (y[t * N + n] - exact) * (y[t * N + n] - exact);
        ref += exact * exact;
      }
    EXPECT_LT(std::sqrt(err / ref), 0.02) << isa_name(isa);
    EXPECT_GT(std::sqrt(err / ref), 1e-4) << isa_name(isa);  // it is quantized, not F32
  }
}

TEST_P(Int8OnIsa, X86GemmsEqualPmaddubswBitForBit) {
  // Integer dots are exact, and every x86 kernel runs the same float steps (one FMA per group,
  // the same vector epilogue): equal bits to AVX2's pmaddubsw kernel for every row count, with
  // VNNI on ymm or zmm alike.
#if KAEL_X86_KERNELS
  const Isa isa = GetParam();
  if (isa == Isa::scalar || isa == Isa::amx) GTEST_SKIP() << isa_name(isa) << ": not an x86 VNNI/pmaddubsw kernel";
  const KernelTable& kt = kernels_for(isa);
  const bool vnni = cpu_features().avx_vnni;
  for (std::int64_t K : {32, 100, 768})
    for (std::int64_t N : {5, 16, 40, 70, 200})  // 200: decode's passes of panels apart, and a rest
      for (std::int64_t M : {1, 2, 3, 5, 9, 17}) {
        const std::int64_t Kp = int8_padded_k(K), panels = int8_padded_n(N) / 16;
        const Int8Matrix m(random_vector(K * N, 21), K, N);
        std::vector<std::int8_t> xq(static_cast<std::size_t>(M * Kp));
        std::vector<float> xs(static_cast<std::size_t>(M * Kp / kInt8Group));
        portable::quantize_rows(xq.data(), xs.data(), random_vector(M * K, 22).data(), M, K);
        const auto bias = random_vector(N, 23);
        for (Epilogue epilogue : {Epilogue::store, Epilogue::gelu, Epilogue::residual}) {
          auto a = random_vector(M * N, 24), b = a, c = a;
          avx2::int8_gemm(a.data(), N, xq.data(), xs.data(), M, Kp, m.q.data(), m.scales.data(), panels, N,
                          bias.data(), epilogue);
          kt.int8_gemm(b.data(), N, xq.data(), xs.data(), M, Kp, m.q.data(), m.scales.data(), panels, N, bias.data(),
                       epilogue);
          if (vnni)
            avx2::int8_gemm_vnni(c.data(), N, xq.data(), xs.data(), M, Kp, m.q.data(), m.scales.data(), panels, N,
                                 bias.data(), epilogue);
          for (std::size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]))
                << kt.int8_dot << " K=" << K << " N=" << N << " M=" << M << " i=" << i;
            if (vnni) {
              ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(c[i]))
                  << "avx-vnni K=" << K << " N=" << N << " M=" << M << " i=" << i;
            }
          }
        }
      }
#else
  GTEST_SKIP() << isa_name(GetParam()) << ": this build has no x86 kernels";
#endif
}

TEST(NeonInt8, SdotEqualsSmullBitForBit) {
  // Both integer dots are exact and the float steps are shared (family/int8.hpp): equal bits for
  // every row count, and both within the format's error of the exact product (ErrorAgainst...).
#if KAEL_NEON_KERNELS
  if (!cpu_features().dotprod) GTEST_SKIP() << "this CPU has no SDOT (or KAEL_DOTPROD=0): only smull runs";
  for (std::int64_t K : {32, 100, 768})
    for (std::int64_t N : {5, 16, 40})
      for (std::int64_t M : {1, 2, 3, 9}) {
        const std::int64_t Kp = int8_padded_k(K), panels = int8_padded_n(N) / 16;
        const Int8Matrix m(random_vector(K * N, 31), K, N);
        std::vector<std::int8_t> xq(static_cast<std::size_t>(M * Kp));
        std::vector<float> xs(static_cast<std::size_t>(M * Kp / kInt8Group));
        portable::quantize_rows(xq.data(), xs.data(), random_vector(M * K, 32).data(), M, K);
        const auto bias = random_vector(N, 33);
        for (Epilogue epilogue : {Epilogue::store, Epilogue::gelu, Epilogue::residual}) {
          auto a = random_vector(M * N, 34), b = a;
          neon::int8_gemm(a.data(), N, xq.data(), xs.data(), M, Kp, m.q.data(), m.scales.data(), panels, N,
                          bias.data(), epilogue);
          neon::int8_gemm_sdot(b.data(), N, xq.data(), xs.data(), M, Kp, m.q.data(), m.scales.data(), panels, N,
                               bias.data(), epilogue);
          for (std::size_t i = 0; i < a.size(); ++i)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]))
                << "K=" << K << " N=" << N << " M=" << M << " i=" << i;
        }
      }
#else
  GTEST_SKIP() << "this build has no NEON kernels";
#endif
}

INSTANTIATE_TEST_SUITE_P(Isas, Int8OnIsa, ::testing::ValuesIn(kAllIsas), isa_param_name);
