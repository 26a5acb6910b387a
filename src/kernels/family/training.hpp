// The training kernels (training.hpp) written once over a target's traits V: GELU's backward
// on the vector exp of math.hpp, and the AdamW update and the sum of squares lane for lane as
// the portable loops (targets/portable/training.cpp), so every set gives their bits.
//
// A target instantiates them in its unit named training.cpp (fill_training there), which the
// build compiles with -ffp-contract=off: AdamW promises the portable loop's roundings, and a
// product and sum fused behind its back would change them. Nothing else may instantiate them
// for that target, or the linker could keep a copy built without the flag.
#pragma once

#include <cstdint>

#include "kernels/dispatch/kernel_table.hpp"
#include "kernels/family/math.hpp"

namespace kael::kernels::family {

template <class V>
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += V::kLanes) {
    const auto tail = tail_from<V>(n, i);
    V::store(dinp + i, V::mul(V::load(dout + i, tail), gelu_derivative<V>(V::load(inp + i, tail))), tail);
  }
}

// The portable loop's operations in its order, one rounding each.
template <class V>
void adamw_update(float* param, float* m, float* v, const float* grad, std::int64_t n, const AdamWScalars& s) {
  using F = typename V::F;
  for (std::int64_t i = 0; i < n; i += V::kLanes) {
    const auto tail = tail_from<V>(n, i);
    const F g = V::mul(V::load(grad + i, tail), V::set1(s.grad_scale));
    const F x = V::mul(V::load(param + i, tail), V::set1(s.decay));
    F mi = V::load(m + i, tail), vi = V::load(v + i, tail);
    mi = V::add(mi, V::mul(V::set1(s.one_minus_beta1), V::sub(g, mi)));
    vi = V::add(V::mul(vi, V::set1(s.beta2)), V::mul(V::mul(V::set1(s.one_minus_beta2), g), g));
    const F denom = V::add(V::div(V::sqrt(vi), V::set1(s.bias_correction2_sqrt)), V::set1(s.eps));
    const F p = V::add(x, V::div(V::mul(V::set1(s.neg_step_size), mi), denom));
    V::store(m + i, mi, tail);
    V::store(v + i, vi, tail);
    V::store(param + i, p, tail);
  }
}

// The portable loop's 16 lanes (lane j sums the squares of x[i], i % 16 == j, in double), then
// the lanes in order. A float's square is exact in double, so each lane's sums round alike.
template <class V>
double sum_of_squares(const float* x, std::int64_t n) {
  constexpr int kLanes = 16, kVectors = kLanes / V::kLanes;
  typename V::D acc[2 * kVectors];
  for (auto& a : acc) a = V::zero_d();
  for (std::int64_t i = 0; i < n; i += kLanes)
    for (int q = 0; q < kVectors; ++q) {
      const std::int64_t at = i + q * V::kLanes;
      const typename V::F v = V::load(x + at, tail_from<V>(n, at));
      const typename V::D low = V::widen_low(v), high = V::widen_high(v);
      acc[2 * q] = V::add_d(acc[2 * q], V::mul_d(low, low));
      acc[2 * q + 1] = V::add_d(acc[2 * q + 1], V::mul_d(high, high));
    }
  double lanes[kLanes];
  for (int q = 0; q < 2 * kVectors; ++q) V::store_d(lanes + q * V::kDoubleLanes, acc[q]);
  double total = 0;
  for (double lane : lanes) total += lane;
  return total;
}

template <class V>
void fill_training(KernelTable& table) {
  table.gelu_backward = gelu_backward<V>;
  table.adamw_update = adamw_update<V>;
  table.sum_of_squares = sum_of_squares<V>;
}

}  // namespace kael::kernels::family
