// The int8 and F16 weight paths (quant.hpp): the conversions at load, and linear_matrix on
// both instruction sets against the double-precision reference, on ragged sizes (every width
// around 8 and 16, K short and long enough for fewer panels per pass), 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/quant.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "kernels_testing.hpp"

using namespace kael::kernels;
using kael::WeightDType;

namespace {

using test_util::max_error;
using test_util::random_vector;

// A (K, N) weight converted to `type`, with the storage that backs the view.
struct Narrow {
  std::vector<std::int8_t> q;
  std::vector<std::uint16_t> h;
  std::vector<std::uint16_t> scales;
  PackedMatrix view;
};

Narrow narrow(const std::vector<float>& w, std::int64_t K, std::int64_t N, WeightDType type) {
  Narrow n;
  if (type == WeightDType::int8) {
    n.q.resize(static_cast<std::size_t>(int8_weight_bytes(K, N)));
    n.scales.resize(static_cast<std::size_t>(int8_scale_count(K, N)));
    quantize_int8_panels(n.q.data(), n.scales.data(), w.data(), K, N, false);
    n.view = {type, n.q.data(), n.scales.data()};
  } else {
    n.h.resize(w.size());
    convert_f16_panels(n.h.data(), w.data(), K, N, false);
    n.view = {type, n.h.data(), nullptr};
  }
  return n;
}

class QuantKernels : public ::testing::TestWithParam<std::tuple<Isa, int, WeightDType>> {
 protected:
  void SetUp() override {
    const auto [isa, threads, type] = GetParam();
    set_num_threads(threads);
    test_util::use_isa_or_skip(isa);
  }
  void TearDown() override {
    set_isa(detected_isa());
    set_num_threads(0);
  }
};

std::string name(const ::testing::TestParamInfo<std::tuple<Isa, int, WeightDType>>& info) {
  const WeightDType type = std::get<2>(info.param);
  return std::string(isa_name(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) +
         "threads_" + (type == WeightDType::int8 ? "int8" : "f16");
}

}  // namespace

TEST_P(QuantKernels, LinearMatchesReferenceOnRaggedSizes) {
  const WeightDType type = std::get<2>(GetParam());
  const std::int64_t Ks[] = {1, 7, 16, 31, 32, 33, 100, 3000};  // 3000: one panel per pass (long K)
  const std::int64_t Ns[] = {1, 7, 8, 9, 15, 16, 17, 33, 64, 100, 200};  // 200: decode passes panels apart
  const std::int64_t Ts[] = {1, 2, 3, 7};
  for (std::int64_t K : Ks)
    for (std::int64_t N : Ns)
      for (std::int64_t T : Ts) {
        if (K == 3000 && T > 2) continue;  // the reference is slow; the long-K path is per panel
        const auto w = random_vector(K * N, 1);
        const auto inp = random_vector(T * K, 2);
        const auto bias = random_vector(N, 3);
        const Narrow n = narrow(w, K, N, type);
        for (Epilogue epilogue : {Epilogue::store, Epilogue::gelu, Epilogue::residual}) {
          auto got = random_vector(T * N, 4), want = got;  // residual adds to these
          linear_matrix(got.data(), inp.data(), n.view, bias.data(), T, K, N, epilogue);
          ref::linear_matrix(want.data(), inp.data(), n.view, bias.data(), T, K, N, epilogue);
          // Both multiply the same dequantized weights; only F32 vs double summation differs.
          ASSERT_LT(max_error(got, want), 2e-5 * std::sqrt(static_cast<double>(K)))
              << "K=" << K << " N=" << N << " T=" << T;
        }
      }
}

TEST_P(QuantKernels, RowResultDoesNotDependOnRowCount) {
  // Decode (1 row) and prefill (several) give the same row bit for bit, as for F32: row counts
  // of one tile, of tiles of unequal heights and of more than one tile (AVX-512's F16 tiles
  // hold 16 rows), K within one k-block and over several (300: blocks of 256 and 44). And 64
  // rows at K = 3000, which 3 threads quantize (int8) in three ranges of at least
  // min_items_per_thread(4 K) = 21 rows.
  // N = 200: decode reads its passes' panels apart (twelve full panels, one ragged).
  const WeightDType type = std::get<2>(GetParam());
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{3000, 64}};  // (K, T)
  for (std::int64_t K : {64, 300})
    for (std::int64_t T : {9, 16, 17, 33}) shapes.emplace_back(K, T);
  for (std::int64_t N : {50, 200}) {
    for (const auto& [K, T] : shapes) {
      const auto w = random_vector(K * N, 6), inp = random_vector(T * K, 7);
      const Narrow n = narrow(w, K, N, type);
      std::vector<float> all(T * N), one(N);
      linear_matrix(all.data(), inp.data(), n.view, nullptr, T, K, N);
      for (std::int64_t t = 0; t < T; ++t) {
        linear_matrix(one.data(), inp.data() + t * K, n.view, nullptr, 1, K, N);
        for (std::int64_t c = 0; c < N; ++c)
          ASSERT_EQ(one[c], all[t * N + c])
              << "N=" << N << " K=" << K << " T=" << T << " row " << t << ", column " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaThreadsType, QuantKernels,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::Values(1, 3),
                                            ::testing::Values(WeightDType::int8, WeightDType::f16)),
                         name);
