// kernels::gemm_bf16 against its plain reference (BF16-rounded operands, sums in double) on
// ragged sizes, all four transposes, strided operands, with and without accumulation, on one
// and two threads, on every set: where a set has the BF16 product it must match; where it has
// none (scalar, avx2, or a CPU without AVX512-BF16) the call must be a ValueError that says why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/dispatch/kernel_table.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;
using test_util::random_vector;

namespace {

struct Case {
  std::int64_t M, N, K;
};
// Below and above a tile (16 rows), a block (32 columns) and a K chunk (32), sizes that
// take the row-split path (few columns, many rows), and one or two rows over many panels (the
// GEMV pairs panels half the blocks apart; 300 columns leave the last pair's second panel empty).
const Case kCases[] = {{1, 1, 1},     {3, 5, 7},     {16, 32, 32},  {17, 33, 31},  {31, 47, 65},   {33, 16, 100},
                       {70, 61, 129}, {130, 20, 40}, {257, 40, 33}, {64, 300, 70}, {1, 300, 70}, {2, 200, 33}};

// Operand (rows, cols) stored with a row stride of cols + 3, so every stride is ragged.
struct Strided {
  std::int64_t ld;
  std::vector<float> data;
};
Strided operand(std::int64_t rows, std::int64_t cols, unsigned seed) {
  const std::int64_t ld = cols + 3;
  return {ld, random_vector(rows * ld, seed)};
}

class GemmBf16 : public test_util::OnEveryIsa {};

TEST_P(GemmBf16, MatchesReferenceOnRaggedSizesOrRefusesByName) {
  std::string why;
  if (!gemm_bf16_available(&why)) {
    std::vector<float> c(4);
    const std::vector<float> a(4), b(4);
    try {
      gemm_bf16(c.data(), 2, a.data(), 2, false, b.data(), 2, false, 2, 2, 2);
      FAIL() << "gemm_bf16 ran on " << isa_name(isa()) << " although it reports itself unavailable";
    } catch (const kael::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("AMX-BF16 or AVX512-BF16"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << isa_name(isa()) << " has no BF16 product: " << why;
  }
  for (const Case& s : kCases)
    for (int variant = 0; variant < 8; ++variant) {
      const bool ta = (variant & 1) != 0, tb = (variant & 2) != 0, accumulate = (variant & 4) != 0;
      const Strided a = ta ? operand(s.K, s.M, 1) : operand(s.M, s.K, 1);
      const Strided b = tb ? operand(s.N, s.K, 2) : operand(s.K, s.N, 2);
      // A bias on two variants of three: each transpose and each mode runs with and without one.
      const std::vector<float> bias_values = random_vector(s.N, 4);
      const float* bias = (variant % 3 == 0) ? nullptr : bias_values.data();
      const std::int64_t ldc = s.N + 5;
      std::vector<float> got = random_vector(s.M * ldc, 3), want = got;
      gemm_bf16(got.data(), ldc, a.data.data(), a.ld, ta, b.data.data(), b.ld, tb, s.M, s.N, s.K, accumulate,
                bias);
      ref::gemm_bf16(want.data(), ldc, a.data.data(), a.ld, ta, b.data.data(), b.ld, tb, s.M, s.N, s.K,
                     accumulate, bias);
      // F32 sums of K products of unit-variance BF16 values: a few ulps of sqrt(K); the
      // padding between rows (ldc > N) must be untouched.
      const double tolerance = 1e-5 * std::sqrt(static_cast<double>(s.K)) + 1e-6;
      for (std::int64_t i = 0; i < s.M; ++i)
        for (std::int64_t j = 0; j < ldc; ++j) {
          const std::size_t at = static_cast<std::size_t>(i * ldc + j);
          if (j >= s.N) {
            ASSERT_EQ(got[at], want[at]) << "wrote past N at (" << i << ", " << j << ")";
            continue;
          }
          ASSERT_NEAR(got[at], want[at], tolerance * (1.0 + std::fabs(want[at])))
              << s.M << "x" << s.N << "x" << s.K << " trans " << ta << tb << " accumulate " << accumulate
              << " bias " << (bias != nullptr) << " at (" << i << ", " << j << ")";
        }
    }
}

// With K = 1 and the other operand 1, each output is one rounded operand, exactly: the
// conversions round to nearest even as core's f32_to_bf16, in every layout (ties included).
TEST_P(GemmBf16, RoundsEachOperandToNearestEven) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  const std::int64_t n = 70;
  std::vector<float> values = random_vector(n, 9);
  values[0] = 1.0f + 0x1p-8f;          // a tie: down to 1 (even)
  values[1] = 1.0f + 3 * 0x1p-8f;      // a tie: up to 1 + 2^-6 (even)
  values[2] = -(1.0f + 0x1p-8f + 0x1p-20f);  // just above a tie: away from zero
  values[3] = 3.0e38f;                 // near the top of the range
  values[4] = 0x1.fffffcp-127f;        // the largest F32 subnormal: up to BF16's smallest normal
  values[40] = -0x1.fffffcp-127f;      // the same in a later vector of a row
  const std::vector<float> ones(n, 1.0f);
  for (bool transposed : {false, true}) {
    std::vector<float> column(n), row(n);
    // c (n, 1) = op(a) (n, 1) @ ones (1, 1): values as a column of a.
    gemm_bf16(column.data(), 1, values.data(), transposed ? n : 1, transposed, ones.data(), 1, transposed, n, 1, 1);
    // c (1, n) = ones (1, 1) @ op(b) (1, n): values as a row of b.
    gemm_bf16(row.data(), n, ones.data(), 1, transposed, values.data(), transposed ? 1 : n, transposed, 1, n, 1);
    for (std::int64_t i = 0; i < n; ++i) {
      const float expected = kael::bf16_to_f32(kael::f32_to_bf16(values[static_cast<std::size_t>(i)]));
      ASSERT_EQ(column[static_cast<std::size_t>(i)], expected) << "a, transposed " << transposed << ", " << i;
      ASSERT_EQ(row[static_cast<std::size_t>(i)], expected) << "b, transposed " << transposed << ", " << i;
    }
  }
}

// op(b) converted once by pack_bf16_operand and used by gemm_bf16_packed (twice, as the head
// of training reuses its weight) gives gemm_bf16's bits, for every case and transpose.
TEST_P(GemmBf16, PackedOperandGivesTheSameBits) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  for (const Case& s : kCases)
    for (int transposes = 0; transposes < 4; ++transposes) {
      const bool ta = (transposes & 1) != 0, tb = (transposes & 2) != 0;
      const Strided a = ta ? operand(s.K, s.M, 6) : operand(s.M, s.K, 6);
      const Strided b = tb ? operand(s.N, s.K, 7) : operand(s.K, s.N, 7);
      std::vector<std::uint16_t> b16(static_cast<std::size_t>(bf16_operand_elements(s.N, s.K)));
      pack_bf16_operand(b16.data(), b.data.data(), b.ld, tb, s.N, s.K);
      const std::int64_t ldc = s.N + 2;
      for (bool accumulate : {false, true}) {
        std::vector<float> got = random_vector(s.M * ldc, 8), want = got;
        gemm_bf16_packed(got.data(), ldc, a.data.data(), a.ld, ta, b16.data(), s.M, s.N, s.K, accumulate);
        gemm_bf16(want.data(), ldc, a.data.data(), a.ld, ta, b.data.data(), b.ld, tb, s.M, s.N, s.K, accumulate);
        ASSERT_EQ(got, want) << s.M << "x" << s.N << "x" << s.K << " trans " << ta << tb << " accumulate "
                             << accumulate;
      }
    }
}

// pack_bf16_operand with column sums: the same BF16 panels as without, and each column's sum
// added to what was there, bit for bit the plain loop over the rows in order (a -0 start
// stays -0: the padding rows are not added), on ragged sizes; a transposed op(b) is refused.
TEST_P(GemmBf16, ColumnSumsBesideThePanelsMatchThePlainLoop) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  for (const Case& s : kCases) {
    Strided b = operand(s.K, s.N, 10);
    for (std::int64_t k = 0; k < s.K; ++k) b.data[static_cast<std::size_t>(k * b.ld)] = -0.0f;  // column 0 sums to -0
    std::vector<std::uint16_t> plain(static_cast<std::size_t>(bf16_operand_elements(s.N, s.K))), with_sums(plain.size());
    pack_bf16_operand(plain.data(), b.data.data(), b.ld, false, s.N, s.K);
    std::vector<float> sums = random_vector(s.N, 11), want = sums;
    sums[0] = want[0] = -0.0f;
    pack_bf16_operand(with_sums.data(), b.data.data(), b.ld, false, s.N, s.K, sums.data());
    ASSERT_EQ(with_sums, plain) << s.K << "x" << s.N;
    for (std::int64_t k = 0; k < s.K; ++k)
      for (std::int64_t n = 0; n < s.N; ++n) want[static_cast<std::size_t>(n)] += b.data[static_cast<std::size_t>(k * b.ld + n)];
    for (std::int64_t n = 0; n < s.N; ++n) {
      const std::size_t at = static_cast<std::size_t>(n);
      ASSERT_EQ(std::signbit(sums[at]), std::signbit(want[at])) << s.K << "x" << s.N << " column " << n;
      ASSERT_EQ(sums[at], want[at]) << s.K << "x" << s.N << " column " << n;
    }
  }
  std::vector<std::uint16_t> dst(static_cast<std::size_t>(bf16_operand_elements(4, 4)));
  std::vector<float> b(16), sums(4);
  EXPECT_THROW(pack_bf16_operand(dst.data(), b.data(), 4, true, 4, 4, sums.data()), kael::ValueError);
}

// pack_bf16_both: one read of x (M, N) for both layouts a linear layer's backward reads its
// dout in. Its panels and column sums are pack_bf16_operand's (bit for bit, the padding and a
// -0 sum included); its rows, as op(a) of gemm_bf16_prepacked, give gemm_bf16's bits on x, with
// and without accumulation. Ragged sizes, strided x with a subnormal in it (the slow rounding
// path), buffers filled with NaNs first (all of them must be written); the suite runs on one and
// three threads.
TEST_P(GemmBf16, BothLayoutsFromOneReadMatchEachApart) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  for (const Case& s : kCases) {
    const std::int64_t M = s.M, N = s.N, K = s.K;  // x (M, N), w (K, N): dinp (M, K) = x @ w^T
    Strided x = operand(M, N, 12);
    for (std::int64_t r = 0; r < M; ++r) x.data[static_cast<std::size_t>(r * x.ld)] = -0.0f;  // column 0 sums to -0
    x.data[static_cast<std::size_t>((M - 1) * x.ld + N - 1)] = 1e-39f;
    const Strided w = operand(K, N, 13);
    std::vector<std::uint16_t> rows(static_cast<std::size_t>(bf16_rows_elements(M, N)), 0x7FC0),
        panels(static_cast<std::size_t>(bf16_operand_elements(N, M)), 0x7FC0), want_panels(panels.size());
    std::vector<float> sums = random_vector(N, 14), want_sums = sums;
    sums[0] = want_sums[0] = -0.0f;
    pack_bf16_both(rows.data(), panels.data(), x.data.data(), x.ld, M, N, sums.data());
    pack_bf16_operand(want_panels.data(), x.data.data(), x.ld, false, N, M, want_sums.data());
    ASSERT_EQ(panels, want_panels) << M << "x" << N;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::size_t at = static_cast<std::size_t>(n);
      ASSERT_EQ(std::signbit(sums[at]), std::signbit(want_sums[at])) << M << "x" << N << " column " << n;
      ASSERT_EQ(sums[at], want_sums[at]) << M << "x" << N << " column " << n;
    }
    std::vector<std::uint16_t> w16(static_cast<std::size_t>(bf16_operand_elements(K, N)));
    pack_bf16_operand(w16.data(), w.data.data(), w.ld, true, K, N);
    const std::int64_t ldc = K + 2;
    for (bool accumulate : {false, true}) {
      std::vector<float> got = random_vector(M * ldc, 15), want = got;
      gemm_bf16_prepacked(got.data(), ldc, rows.data(), w16.data(), M, K, N, accumulate);
      gemm_bf16(want.data(), ldc, x.data.data(), x.ld, false, w.data.data(), w.ld, true, M, K, N, accumulate);
      ASSERT_EQ(got, want) << M << "x" << N << "x" << K << " accumulate " << accumulate;
    }
  }
}

// The scratch of op(a) and op(b) is not zeroed between calls, so the packing must write all of
// it, the padding past M, N and K included: NaN operands of a larger product first, then each
// ragged case must still match the reference (a NaN left in the padding would reach it).
TEST_P(GemmBf16, PaddingOfReusedScratchIsRewritten) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  const std::int64_t big = 300;
  const std::vector<float> nan(big * big, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> sink(big * big);
  for (const Case& s : kCases)
    for (int transposes = 0; transposes < 4; ++transposes) {
      const bool ta = (transposes & 1) != 0, tb = (transposes & 2) != 0;
      gemm_bf16(sink.data(), big, nan.data(), big, ta, nan.data(), big, tb, big, big, big);
      const auto a = random_vector(s.M * s.K, 10), b = random_vector(s.K * s.N, 11);
      std::vector<float> got(s.M * s.N), want(s.M * s.N);
      gemm_bf16(got.data(), s.N, a.data(), ta ? s.M : s.K, ta, b.data(), tb ? s.K : s.N, tb, s.M, s.N, s.K);
      ref::gemm_bf16(want.data(), s.N, a.data(), ta ? s.M : s.K, ta, b.data(), tb ? s.K : s.N, tb, s.M, s.N, s.K);
      const double tolerance = 1e-5 * std::sqrt(static_cast<double>(s.K)) + 1e-6;
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tolerance * (1.0 + std::fabs(want[i])))
            << s.M << "x" << s.N << "x" << s.K << " trans " << ta << tb << " at " << i;
    }
}

// The bits of each output do not depend on the thread count.
TEST_P(GemmBf16, ThreadCountDoesNotChangeTheBits) {
  if (!gemm_bf16_available()) GTEST_SKIP() << isa_name(isa()) << " has no BF16 product";
  const std::int64_t M = 200, N = 90, K = 150;
  const auto a = random_vector(M * K, 4), b = random_vector(K * N, 5);
  std::vector<float> mine(M * N), single(M * N);
  gemm_bf16(mine.data(), N, a.data(), K, false, b.data(), K, true, M, N, K);
  set_num_threads(1);
  gemm_bf16(single.data(), N, a.data(), K, false, b.data(), K, true, M, N, K);
  EXPECT_EQ(mine, single);
}

INSTANTIATE_TEST_SUITE_P(Sets, GemmBf16,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "threads";
                         });

}  // namespace
