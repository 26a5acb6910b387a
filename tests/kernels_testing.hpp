// Helpers shared by the kernel tests: seeded random inputs and a scale-aware error measure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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

// Seeded normal values in any arithmetic type, and token ids below `vocab`.
template <class R>
std::vector<R> random_values(std::int64_t n, unsigned seed, double scale = 1.0, double mean = 0.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(mean, scale);
  std::vector<R> v(static_cast<std::size_t>(n));
  for (R& x : v) x = static_cast<R>(normal(rng));
  return v;
}

inline std::vector<std::int32_t> random_ids(std::int64_t n, std::int32_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
  return ids;
}

// Largest |a - b| over the largest |b| (at least 1e-30).
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

// Checks an analytic gradient d(loss)/dx against central differences for every element of x
// (the references' tests, in double).
inline void expect_gradient(std::vector<double>& x, const std::function<double()>& loss,
                            const std::vector<double>& analytic, const char* what) {
  ASSERT_EQ(x.size(), analytic.size());
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-6 * (1 + std::abs(numeric))) << what << " element " << i;
  }
}

// sum(out * g): the scalar whose gradient is the backward of `out` given g.
inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& g) {
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * g[i];
  return s;
}

}  // namespace kael::kernels::test_util
