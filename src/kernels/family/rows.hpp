// The row kernels of every vector target, written once against its traits V (family/math.hpp
// says why each is a template on V): softmax, GELU, the C library's exp with sigmoid and tanh on
// it, the float sum of sum.hpp and the LayerNorm row. Each is a RowFn, SumFn or LayerNormRowFn
// of kernel_table.hpp; a ragged end goes through V's tail loads and stores.
#pragma once

#include <cstdint>

#include "kernels/family/math.hpp"
#include "kernels/family/layer_norm_row.hpp"

namespace kael::kernels::family {

// out (n) = f(inp), a vector at a time.
template <class V, typename V::F (*f)(typename V::F)>
void map_row(float* out, const float* inp, std::int64_t n) {
  constexpr long L = V::kLanes;
  long i = 0;
  for (; i + L <= n; i += L) V::store(out + i, f(V::load(inp + i)));
  if (i < n) {
    const auto tail = V::tail(n - i);
    V::store(out + i, f(V::load(inp + i, tail)), tail);
  }
}

template <class V>
void gelu_row(float* out, const float* inp, std::int64_t n) {
  map_row<V, gelu<V>>(out, inp, n);
}
template <class V>
void exp_row(float* out, const float* inp, std::int64_t n) {
  map_row<V, exp_ieee<V>>(out, inp, n);
}
template <class V>
void sigmoid_row(float* out, const float* inp, std::int64_t n) {
  map_row<V, sigmoid<V>>(out, inp, n);
}
template <class V>
void tanh_row(float* out, const float* inp, std::int64_t n) {
  map_row<V, family::tanh<V>>(out, inp, n);
}

// out (n) = softmax(inp): the maximum, e^(x - max) with exp_clamped, the sum in V's lanes
// (added across them by V::hsum), then one scaling pass.
template <class V>
void softmax_row(float* out, const float* inp, std::int64_t n) {
  using F = typename V::F;
  constexpr long L = V::kLanes;
  if (n <= 0) return;
  const long full = n / L * L;
  F vmax = V::set1(-__builtin_inff());
  for (long i = 0; i < full; i += L) vmax = V::max(vmax, V::load(inp + i));
  float max = V::hmax(vmax);
  for (long i = full; i < n; ++i) max = inp[i] > max ? inp[i] : max;

  const F shift = V::set1(max);
  F vsum = V::zero();
  for (long i = 0; i < full; i += L) {
    const F e = exp_clamped<V>(V::sub(V::load(inp + i), shift));
    V::store(out + i, e);
    vsum = V::add(vsum, e);
  }
  const auto tail = V::tail(n - full);
  if (full < n) {
    // Lanes past n load 0 and give e^(0 - max); they are dropped from the sum and the store.
    const F e = V::keep(tail, exp_clamped<V>(V::sub(V::load(inp + full, tail), shift)));
    V::store(out + full, e, tail);
    vsum = V::add(vsum, e);
  }
  const F scale = V::set1(1.0f / V::hsum(vsum));
  for (long i = 0; i < full; i += L) V::store(out + i, V::mul(V::load(out + i), scale));
  if (full < n) V::store(out + full, V::mul(V::load(out + full, tail), scale), tail);
}

// sum.hpp's sum: element i in lane i mod 32 of 32 double lanes (64 / L vectors of doubles),
// each lane added in index order from +0, then the 32 lanes in order.
template <class V>
double sum_row(const float* x, std::int64_t n) {
  constexpr long L = V::kLanes, kAcc = 32 / V::kDoubleLanes;
  typename V::D acc[kAcc];
  for (auto& a : acc) a = V::zero_d();
  const auto add = [&acc](long f, typename V::F v) {  // the f-th vector of a group of 32 floats
    acc[2 * f] = V::add_d(acc[2 * f], V::widen_low(v));
    acc[2 * f + 1] = V::add_d(acc[2 * f + 1], V::widen_high(v));
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (long f = 0; f < 32 / L; ++f) add(f, V::load(x + i + f * L));
  // The ragged end: lanes past n add +0, which leaves a lane (never -0: it starts at +0) as it is.
  for (long f = 0; i + f * L < n; ++f) add(f, V::load(x + i + f * L, tail_from<V>(n - i, f * L)));
  double lanes[32];
  for (long k = 0; k < kAcc; ++k) V::store_d(lanes + k * V::kDoubleLanes, acc[k]);
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

// layer_norm_row.hpp's lane loop, compiled for V's target (the compiler vectorizes it).
template <class V>
void layer_norm_row(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                    std::int64_t C, float eps) {
  layer_norm_row_lanes(out, mean, rstd, x, weight, bias, C, eps);
}

}  // namespace kael::kernels::family
