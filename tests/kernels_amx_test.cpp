// The formats and products of amx.hpp against their plain references on ragged sizes (M, K,
// N not multiples of 16, 32 or 64): BF16 and per-column int8, through the AVX-512 GEMVs and,
// where the CPU and OS allow, the AMX tiles. A test whose instructions this machine lacks is
// skipped, naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kernels/amx.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels_testing.hpp"

// The AMX units are compiled only for x86 targets (src/CMakeLists.txt); elsewhere this file
// reports the whole set as skipped by name.
#if KAEL_AMX_KERNELS
using namespace kael::kernels;
using test_util::max_error;
using test_util::random_vector;
using kael::str;

namespace {

// Why `isa` cannot run the formats of amx.hpp here, or "" when it can.
std::string unusable(Isa isa, bool bf16) {
  std::string why;
  if (!isa_supported(isa, &why)) return str(isa_name(isa), " unsupported: ", why);
  if (bf16 && !cpu_features().avx512_bf16) return "AVX512-BF16 missing on this CPU";
  if (bf16 && isa == Isa::amx && !cpu_features().amx_bf16) return "AMX-BF16 missing on this CPU";
  if (!bf16 && isa != Isa::amx) return "per-column int8 runs on the amx set only";
  if (!bf16 && !cpu_features().avx512_vnni) return "AVX512-VNNI missing (or hidden by KAEL_VNNI=0)";
  return "";
}

// Runs the test body on `isa` (restoring the detected set after), or skips it by name.
#define ON_ISA(isa, bf16)                                            \
  const std::string why_not = unusable(isa, bf16);                   \
  if (!why_not.empty()) GTEST_SKIP() << why_not;                     \
  const IsaScope isa_scope(isa)

struct IsaScope {
  explicit IsaScope(Isa isa) { set_isa(isa); }
  ~IsaScope() { set_isa(detected_isa()); }
};

// The sets the BF16 tests run on: the GEMV (avx512) and the tiles (amx).
class AmxBf16 : public ::testing::TestWithParam<Isa> {};
INSTANTIATE_TEST_SUITE_P(Sets, AmxBf16, ::testing::Values(Isa::avx512, Isa::amx),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

struct Shape {
  std::int64_t M, K, N;
};
// GEMV sizes (M < 16), tile sizes, a tile block that is partly padding in every direction,
// and rows enough (at a long K) that their conversion is split among threads, at a ragged end.
const Shape kShapes[] = {{1, 7, 5},    {3, 33, 47},  {4, 64, 32},  {5, 100, 70},  {15, 130, 61},
                         {16, 31, 33}, {17, 65, 100}, {33, 129, 61}, {40, 64, 96}, {70, 200, 150},
                         {100, 1100, 40}};
const Epilogue kEpilogues[] = {Epilogue::store, Epilogue::gelu, Epilogue::residual};

std::vector<std::uint16_t> bf16_matrix(const std::vector<float>& w, std::int64_t K, std::int64_t N,
                                       bool transposed = false) {
  std::vector<std::uint16_t> m(static_cast<std::size_t>(bf16_matrix_elements(K, N)));
  convert_bf16_tiles(m.data(), w.data(), K, N, transposed);
  return m;
}

std::vector<std::uint8_t> int8c_matrix(const std::vector<float>& w, std::int64_t K, std::int64_t N,
                                       bool transposed = false) {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(int8c_matrix_bytes(K, N)));
  quantize_int8c(m.data(), w.data(), K, N, transposed);
  return m;
}

}  // namespace

TEST(AmxFormat, PaddedSizes) {
  EXPECT_EQ(bf16_padded_k(1), 32);
  EXPECT_EQ(bf16_padded_k(768), 768);
  EXPECT_EQ(bf16_padded_n(50257), 50272);
  EXPECT_EQ(int8c_padded_k(65), 128);
  EXPECT_EQ(int8c_padded_n(17), 32);
  EXPECT_EQ(int8c_matrix_bytes(768, 50257), 768 * 50272 + 8 * 50272);
}

TEST(AmxFormat, Bf16WeightsRoundToNearestEvenInBothSourceLayouts) {
  const std::int64_t K = 37, N = 21;
  const std::vector<float> w = random_vector(K * N, 1);
  std::vector<float> wt(w.size());
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t n = 0; n < N; ++n) wt[static_cast<std::size_t>(n * K + k)] = w[static_cast<std::size_t>(k * N + n)];
  const auto m = bf16_matrix(w, K, N), mt = bf16_matrix(wt, K, N, true);
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t n = 0; n < N; ++n) {
      const float expected = kael::bf16_to_f32(kael::f32_to_bf16(w[static_cast<std::size_t>(k * N + n)]));
      ASSERT_EQ(bf16_tile_weight(m.data(), K, k, n), expected) << k << ", " << n;
      ASSERT_EQ(bf16_tile_weight(mt.data(), K, k, n), expected) << k << ", " << n;
    }
}

TEST(AmxFormat, Int8PerColumnScaleIsTheColumnMaximum) {
  const std::int64_t K = 150, N = 19;
  std::vector<float> w = random_vector(K * N, 2);
  for (std::int64_t k = 0; k < K; ++k) w[static_cast<std::size_t>(k * N + 3)] = 0.0f;  // an all-zero column
  const auto m = int8c_matrix(w, K, N);
  for (std::int64_t n = 0; n < N; ++n) {
    float amax = 0.0f;
    for (std::int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(k * N + n)]));
    for (std::int64_t k = 0; k < K; ++k) {
      const float x = w[static_cast<std::size_t>(k * N + n)];
      ASSERT_LE(std::fabs(int8c_weight(m.data(), K, N, k, n) - x), amax / 127.0f * 0.5001f) << k << ", " << n;
    }
  }
  std::vector<float> bad = w;
  bad[5 * N + 7] = std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(int8c_matrix_bytes(K, N)));
  EXPECT_THROW(quantize_int8c(out.data(), bad.data(), K, N, false), kael::ValueError);
}

// The weight conversion at load (gemm_bf16's AVX-512 packer on these sets) writes the plain
// loop's bits, padding included, in both source layouts, on ragged sizes and on the values
// where rounding is delicate: ties, subnormals (kept, unlike vcvtneps2bf16), infinities, NaN.
TEST_P(AmxBf16, WeightConversionEqualsThePlainOneBitForBit) {
  ON_ISA(GetParam(), true);
  const std::int64_t sizes[][2] = {{1, 1}, {7, 5}, {31, 33}, {32, 32}, {33, 17}, {65, 100}, {200, 47}};
  for (const auto& size : sizes) {
    const std::int64_t K = size[0], N = size[1];
    std::vector<float> w = random_vector(K * N, 30);
    const float specials[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-130f, -0x1p-127f,
                              std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::max(), -0.0f};
    for (std::size_t i = 0; i < w.size() && i < 8 * 8; i += 8) w[i] = specials[i / 8];
    for (bool transposed : {false, true}) {
      std::vector<std::uint16_t> got(static_cast<std::size_t>(bf16_matrix_elements(K, N)), 0xAAAA), want = got;
      convert_bf16_tiles(got.data(), w.data(), K, N, transposed);
      ref::convert_bf16_tiles(want.data(), w.data(), K, N, transposed);
      ASSERT_EQ(got, want) << K << "x" << N << " transposed " << transposed;
    }
  }
}

// The BF16 activations, inference's and training's (one conversion, the table's
// bf16_pack_rows), round as core's f32_to_bf16: subnormals kept (vcvtne2ps2bf16 alone flushes
// them), ties to even, NaN quiet; zeros past K, in both layouts.
TEST_P(AmxBf16, ActivationConversionRoundsAsCore) {
  ON_ISA(GetParam(), true);
  const std::int64_t M = 19, K = 70, Kp = bf16_padded_k(K);
  std::vector<float> x = random_vector(M * K, 31);
  const float specials[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-130f, -0x1p-127f, 0x1.fffffcp-127f,
                            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -0.0f};
  for (std::size_t i = 0; i < x.size(); i += 11) x[i] = specials[(i / 11) % std::size(specials)];
  for (bool tiled : {false, true}) {
    std::vector<std::uint16_t> a(static_cast<std::size_t>(round_up(M, 32) * Kp), 0xAAAA);
    active_kernels().bf16_pack_rows(a.data(), x.data(), K, false, M, K, 0, round_up(M, 32) / 16, tiled);
    for (std::int64_t t = 0; t < M; ++t)
      for (std::int64_t k = 0; k < Kp; ++k) {
        const std::uint16_t want = k < K ? kael::f32_to_bf16(x[static_cast<std::size_t>(t * K + k)]) : 0;
        const std::int64_t at = tiled ? t / 16 * 16 * Kp + k / 32 * 512 + t % 16 * 32 + k % 32 : t * Kp + k;
        ASSERT_EQ(a[static_cast<std::size_t>(at)], want) << "row " << t << ", k " << k << ", tiled " << tiled;
      }
  }
}

TEST_P(AmxBf16, LinearMatchesReferenceOnRaggedSizes) {
  ON_ISA(GetParam(), true);
  for (const Shape& s : kShapes)
    for (Epilogue e : kEpilogues) {
      const auto x = random_vector(s.M * s.K, 3), w = random_vector(s.K * s.N, 4, 0.2f), bias = random_vector(s.N, 5);
      const auto m = bf16_matrix(w, s.K, s.N);
      std::vector<float> got = random_vector(s.M * s.N, 6), want = got;
      bf16_linear(got.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N, e);
      ref::bf16_linear(want.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N, e);
      EXPECT_LT(max_error(got, want), 2e-5) << s.M << "x" << s.K << "x" << s.N << " epilogue " << static_cast<int>(e);
    }
}

// Inference and training run the BF16 product through one driver and one set of kernels: a
// linear layer equals the training product on the same converted weights, bit for bit.
TEST_P(AmxBf16, LinearEqualsTheTrainingProduct) {
  ON_ISA(GetParam(), true);
  for (const Shape& s : kShapes) {
    const auto x = random_vector(s.M * s.K, 27), w = random_vector(s.K * s.N, 28, 0.2f), bias = random_vector(s.N, 29);
    const auto m = bf16_matrix(w, s.K, s.N);
    for (bool accumulate : {false, true}) {
      std::vector<float> linear = random_vector(s.M * s.N, 30), product = linear;
      bf16_linear(linear.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N,
                  accumulate ? Epilogue::residual : Epilogue::store);
      gemm_bf16_packed(product.data(), s.N, x.data(), s.K, false, m.data(), s.M, s.N, s.K, accumulate, bias.data());
      ASSERT_EQ(0, std::memcmp(linear.data(), product.data(), linear.size() * sizeof(float)))
          << s.M << "x" << s.K << "x" << s.N << " accumulate " << accumulate;
    }
  }
}

TEST_P(AmxBf16, RowsDoNotDependOnTheirNeighboursOrTheCount) {
  ON_ISA(GetParam(), true);
  const std::int64_t M = 40, K = 200, N = 77;
  const auto x = random_vector(M * K, 24), w = random_vector(K * N, 25, 0.2f), bias = random_vector(N, 26);
  const auto m = bf16_matrix(w, K, N);
  std::vector<float> all(static_cast<std::size_t>(M * N)), one(static_cast<std::size_t>(N));
  bf16_linear(all.data(), x.data(), m.data(), bias.data(), M, K, N);
  for (std::int64_t t = 0; t < M; t += 13) {
    bf16_linear(one.data(), x.data() + t * K, m.data(), bias.data(), 1, K, N);
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * N, one.size() * sizeof(float))) << "row " << t;
  }
}

TEST(AmxInt8, LinearEqualsReferenceBitForBitOnRaggedSizes) {
  ON_ISA(Isa::amx, false);
  for (const Shape& s : kShapes)
    for (Epilogue e : {Epilogue::store, Epilogue::residual}) {
      const auto x = random_vector(s.M * s.K, 7), w = random_vector(s.K * s.N, 8, 0.2f), bias = random_vector(s.N, 9);
      const auto m = int8c_matrix(w, s.K, s.N);
      std::vector<float> got = random_vector(s.M * s.N, 10), want = got;
      int8c_linear(got.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N, e);
      ref::int8c_linear(want.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N, e);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << s.M << "x" << s.K << "x" << s.N << " max error " << max_error(got, want);
    }
}

// The tile-less kernels of per-column int8 live in the avx512 table (with AVX512-VNNI), so
// they are tested where the tiles are not.
#define ON_AVX512_VNNI()                                                                              \
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "avx512 unsupported on this CPU";                 \
  if (!cpu_features().avx512_vnni) GTEST_SKIP() << "AVX512-VNNI missing (or hidden by KAEL_VNNI=0)"; \
  const IsaScope isa_scope(Isa::avx512)

TEST(AmxInt8, Avx512RowQuantizerEqualsThePlainOne) {
  ON_AVX512_VNNI();
  for (std::int64_t K : {1, 15, 16, 17, 100, 768}) {
    const std::int64_t T = 5, Kp = int8c_padded_k(K);
    auto x = random_vector(T * K, 30, 3.0f);
    x[static_cast<std::size_t>(K - 1)] = std::numeric_limits<float>::infinity();  // row 0
    for (std::int64_t k = 0; k < K; ++k) x[static_cast<std::size_t>(2 * K + k)] = 0.0f;  // row 2
    std::vector<std::int8_t> q1(static_cast<std::size_t>(T * Kp), 7), q2(q1.size(), 9);
    std::vector<float> s1(static_cast<std::size_t>(T)), s2(s1.size());
    quantize_rows_int8c(q1.data(), s1.data(), x.data(), T, K);
    active_kernels().int8c_quantize_rows(q2.data(), s2.data(), x.data(), T, K, Kp, false);
    EXPECT_EQ(q1, q2) << "K = " << K;
    EXPECT_TRUE(std::isnan(s1[0]) && std::isnan(s2[0]));
    EXPECT_EQ(0, std::memcmp(s1.data() + 1, s2.data() + 1, (s1.size() - 1) * sizeof(float))) << "K = " << K;
  }
}

// The GEMV straight (what the amx set runs below kAmxMinRows rows), on every epilogue.
TEST(AmxInt8, VnniGemvEqualsReferenceBitForBit) {
  ON_AVX512_VNNI();
  const KernelTable& kt = active_kernels();
  for (const Shape& s : kShapes)
    for (Epilogue e : kEpilogues) {
      const std::int64_t Kp = int8c_padded_k(s.K), Np = int8c_padded_n(s.N);
      const auto x = random_vector(s.M * s.K, 43), w = random_vector(s.K * s.N, 44, 0.2f), bias = random_vector(s.N, 45);
      const auto m = int8c_matrix(w, s.K, s.N);
      std::vector<std::int8_t> xq(static_cast<std::size_t>(s.M * Kp));
      std::vector<float> xs(static_cast<std::size_t>(s.M));
      kt.int8c_quantize_rows(xq.data(), xs.data(), x.data(), s.M, s.K, Kp, false);
      const auto* q = reinterpret_cast<const std::int8_t*>(m.data());
      const auto* scales = reinterpret_cast<const float*>(m.data() + Kp * Np);
      const auto* sums = reinterpret_cast<const std::int32_t*>(scales + Np);
      std::vector<float> got = random_vector(s.M * s.N, 46), want = got;
      kt.int8c_gemv(got.data(), s.N, xq.data(), xs.data(), s.M, Kp, q, scales, sums, Np / 32, s.N, bias.data(), e);
      ref::int8c_linear(want.data(), x.data(), m.data(), bias.data(), s.M, s.K, s.N, e);
      if (e == Epilogue::gelu) {
        EXPECT_LT(max_error(got, want), 1e-6) << s.M << "x" << s.K << "x" << s.N;
      } else {
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << s.M << "x" << s.K << "x" << s.N << " max error " << max_error(got, want);
      }
    }
}

TEST(AmxInt8, GeluEpilogueMatchesReference) {
  ON_ISA(Isa::amx, false);
  for (const Shape& s : kShapes) {
    const auto x = random_vector(s.M * s.K, 11), w = random_vector(s.K * s.N, 12, 0.2f);
    const auto m = int8c_matrix(w, s.K, s.N);
    std::vector<float> got(static_cast<std::size_t>(s.M * s.N)), want = got;
    int8c_linear(got.data(), x.data(), m.data(), nullptr, s.M, s.K, s.N, Epilogue::gelu);
    ref::int8c_linear(want.data(), x.data(), m.data(), nullptr, s.M, s.K, s.N, Epilogue::gelu);
    EXPECT_LT(max_error(got, want), 1e-6) << s.M << "x" << s.K << "x" << s.N;
  }
}

TEST(AmxInt8, ErrorAgainstTheExactProductIsSmall) {
  ON_ISA(Isa::amx, false);
  const std::int64_t M = 24, K = 768, N = 96;
  const auto x = random_vector(M * K, 13), w = random_vector(K * N, 14, 0.05f);
  const auto m = int8c_matrix(w, K, N);
  std::vector<float> got(static_cast<std::size_t>(M * N)), exact(got.size());
  int8c_linear(got.data(), x.data(), m.data(), nullptr, M, K, N);
  double worst = 0.0, norm = 0.0;
  for (std::int64_t t = 0; t < M; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      double y = 0.0;
      for (std::int64_t k = 0; k < K; ++k) y += double{x[static_cast<std::size_t>(t * K + k)]} * w[static_cast<std::size_t>(k * N + n)];
      worst = std::max(worst, std::fabs(y - got[static_cast<std::size_t>(t * N + n)]));
      norm = std::max(norm, std::fabs(y));
    }
  EXPECT_LT(worst, 0.03 * norm);  // two 8-bit roundings per product, summed over 768 terms
}

// The activations' conversion and the tile columns are split among the threads: one thread
// and three give the same bits (100 rows at K = 1100 make three conversion ranges, ragged).
TEST(AmxInt8, ThreadCountChangesNoBit) {
  ON_ISA(Isa::amx, false);
  const std::int64_t M = 100, K = 1100, N = 200;
  const auto x = random_vector(M * K, 40), w = random_vector(K * N, 41, 0.2f), bias = random_vector(N, 42);
  const auto q = int8c_matrix(w, K, N);
  const bool bf16 = cpu_features().avx512_bf16;
  const auto b = bf16 ? bf16_matrix(w, K, N) : std::vector<std::uint16_t>{};
  std::vector<float> q1(static_cast<std::size_t>(M * N)), q3 = q1, b1 = q1, b3 = q1;
  set_num_threads(1);
  int8c_linear(q1.data(), x.data(), q.data(), bias.data(), M, K, N, Epilogue::gelu);
  if (bf16) bf16_linear(b1.data(), x.data(), b.data(), bias.data(), M, K, N, Epilogue::gelu);
  set_num_threads(3);
  int8c_linear(q3.data(), x.data(), q.data(), bias.data(), M, K, N, Epilogue::gelu);
  if (bf16) bf16_linear(b3.data(), x.data(), b.data(), bias.data(), M, K, N, Epilogue::gelu);
  set_num_threads(0);
  EXPECT_EQ(0, std::memcmp(q1.data(), q3.data(), q1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b1.data(), b3.data(), b1.size() * sizeof(float)));
}

TEST(AmxInt8, RowsDoNotDependOnTheirNeighboursOrTheCount) {
  ON_ISA(Isa::amx, false);
  // 40 rows take the tiles (where AMX is usable), one row the GEMV: each row's bits must agree.
  const std::int64_t M = 40, K = 200, N = 77;
  const auto x = random_vector(M * K, 15), w = random_vector(K * N, 16, 0.2f), bias = random_vector(N, 17);
  const auto m = int8c_matrix(w, K, N);
  std::vector<float> all(static_cast<std::size_t>(M * N)), one(static_cast<std::size_t>(N));
  int8c_linear(all.data(), x.data(), m.data(), bias.data(), M, K, N);
  for (std::int64_t t = 0; t < M; t += 13) {
    int8c_linear(one.data(), x.data() + t * K, m.data(), bias.data(), 1, K, N);
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * N, one.size() * sizeof(float))) << "row " << t;
  }
}

TEST(AmxInt8, NonFiniteRowGivesNaNOnlyInItsOutputs) {
  ON_ISA(Isa::amx, false);
  const std::int64_t M = 20, K = 70, N = 40;
  auto x = random_vector(M * K, 18);
  x[3 * K + 5] = std::numeric_limits<float>::quiet_NaN();
  const auto m = int8c_matrix(random_vector(K * N, 19, 0.2f), K, N);
  std::vector<float> out(static_cast<std::size_t>(M * N));
  int8c_linear(out.data(), x.data(), m.data(), nullptr, M, K, N);
  for (std::int64_t t = 0; t < M; ++t)
    for (std::int64_t n = 0; n < N; ++n) ASSERT_EQ(std::isnan(out[static_cast<std::size_t>(t * N + n)]), t == 3);
}

// The tile kernels straight, against the GEMVs on the same padded operands.
TEST(AmxTiles, Int8TilesEqualTheVnniGemvBitForBit) {
  ON_ISA(Isa::amx, false);
  const std::int64_t M = 45, K = 300, N = 70, Kp = int8c_padded_k(K);
  const auto x = random_vector(M * K, 20), w = random_vector(K * N, 21, 0.2f);
  const auto m = int8c_matrix(w, K, N);
  std::vector<std::int8_t> xq(static_cast<std::size_t>(round_up(M, 32) * Kp)), xq_tiled(xq.size());
  std::vector<float> xs(static_cast<std::size_t>(round_up(M, 32)));
  const KernelTable& kt = active_kernels();
  kt.int8c_quantize_rows(xq.data(), xs.data(), x.data(), M, K, Kp, false);
  kt.int8c_quantize_rows(xq_tiled.data(), xs.data(), x.data(), M, K, Kp, true);
  const auto* q = reinterpret_cast<const std::int8_t*>(m.data());
  const auto* scales = reinterpret_cast<const float*>(m.data() + Kp * int8c_padded_n(N));
  const auto* sums = reinterpret_cast<const std::int32_t*>(scales + int8c_padded_n(N));
  const std::int64_t blocks = int8c_padded_n(N) / 32;
  std::vector<float> tiles(static_cast<std::size_t>(M * N)), gemv(tiles.size());
  kt.int8c_tile_gemm(tiles.data(), N, xq_tiled.data(), xs.data(), M, Kp, q, scales, sums, blocks, N, nullptr,
                     Epilogue::store);
  kt.int8c_gemv(gemv.data(), N, xq.data(), xs.data(), M, Kp, q, scales, sums, blocks, N, nullptr, Epilogue::store);
  EXPECT_EQ(0, std::memcmp(tiles.data(), gemv.data(), tiles.size() * sizeof(float)));
}

TEST(AmxTiles, Bf16TilesAgreeWithTheGemv) {
  ON_ISA(Isa::amx, true);
  const std::int64_t M = 45, K = 300, N = 70, Kp = bf16_padded_k(K);
  const auto x = random_vector(M * K, 22), w = random_vector(K * N, 23, 0.2f);
  const auto m = bf16_matrix(w, K, N);
  std::vector<std::uint16_t> a(static_cast<std::size_t>(round_up(M, 32) * Kp)), a_tiled(a.size());
  const KernelTable& tiled = kernels_for(Isa::amx);
  const KernelTable& rows = kernels_for(Isa::avx512);
  ASSERT_TRUE(tiled.gemm_bf16_tiled && !rows.gemm_bf16_tiled);
  rows.bf16_pack_rows(a.data(), x.data(), K, false, M, K, 0, round_up(M, 32) / 16, false);
  tiled.bf16_pack_rows(a_tiled.data(), x.data(), K, false, M, K, 0, round_up(M, 32) / 16, true);
  const std::int64_t blocks = bf16_padded_n(N) / 32;
  std::vector<float> tiles(static_cast<std::size_t>(M * N)), gemv(tiles.size()), want(tiles.size());
  tiled.gemm_bf16(tiles.data(), N, a_tiled.data(), M, Kp, m.data(), blocks, N, nullptr, Epilogue::store);
  rows.gemm_bf16(gemv.data(), N, a.data(), M, Kp, m.data(), blocks, N, nullptr, Epilogue::store);
  ref::bf16_linear(want.data(), x.data(), m.data(), nullptr, M, K, N);
  EXPECT_LT(max_error(tiles, want), 2e-5);
  EXPECT_LT(max_error(gemv, want), 2e-5);
  std::size_t equal = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) equal += tiles[i] == gemv[i];
  std::printf("bf16 tiles vs gemv: %zu of %zu outputs bit-identical\n", equal, tiles.size());
}

#else

TEST(AmxTiles, NotBuiltForThisTarget) { GTEST_SKIP() << "amx: this build has no AMX kernels (not an x86 target)"; }

#endif  // KAEL_AMX_KERNELS
