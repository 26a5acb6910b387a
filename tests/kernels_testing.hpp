// Helpers shared by the kernel tests: seeded random inputs and a scale-aware error measure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::kernels::test_util {

// Makes `isa` the active set for this test, or skips the test naming the set and what this
// CPU or build lacks (never a silent pass). Call from SetUp.
inline void use_isa_or_skip(Isa isa) {
  std::string why;
  if (!isa_supported(isa, &why)) GTEST_SKIP() << isa_name(isa) << " not run: " << why;
  set_isa(isa);
}

// A test over (instruction set, threads): every set kael knows, each skipped by name where it
// cannot run, with 1 and several threads.
class OnEveryIsa : public ::testing::TestWithParam<std::tuple<Isa, int>> {
 protected:
  void SetUp() override {
    set_num_threads(std::get<1>(GetParam()));
    use_isa_or_skip(std::get<0>(GetParam()));
  }
  void TearDown() override {
    set_isa(detected_isa());
    set_num_threads(0);
  }
  Isa isa() const { return std::get<0>(GetParam()); }
};

inline auto every_isa_and_threads() {
  return ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::Values(1, 3));
}

inline std::string isa_threads_name(const ::testing::TestParamInfo<std::tuple<Isa, int>>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "threads";
}

inline std::vector<float> random_vector(std::int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Largest |a - b| / (1 + |b|): absolute near zero, relative for large values.
inline double max_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::abs(b[i])));
  return worst;
}

}  // namespace kael::kernels::test_util
