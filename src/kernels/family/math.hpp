// Vector exp, GELU and the output epilogue of the kernel families, written once against a
// target's vector traits V (avx2/vec.hpp, avx512/vec.hpp, neon/vec.hpp) and compiled in that
// target's units. Every function of a family is a template on V, so each target's copy has a
// name of its own: a non-template inline function here, compiled with AVX-512 flags, could be
// the copy the linker keeps for an AVX2 caller (kernels_isa_test checks the table's entries).
// The same operations in the same order on every target: the lanes give the same bits.
#pragma once

#include "kernels/family/scalar_math.hpp"
#include "kernels/gemm.hpp"

namespace kael::kernels::family {

// Cephes' expf polynomial P(r), e^r = 1 + r + r^2 P(r) for |r| <= ln2 / 2.
template <class V>
typename V::F expf_polynomial(typename V::F r) {
  typename V::F p = V::set1(1.9875691500e-4f);
  p = V::fma(p, r, V::set1(1.3981999507e-3f));
  p = V::fma(p, r, V::set1(8.3334519073e-3f));
  p = V::fma(p, r, V::set1(4.1665795894e-2f));
  p = V::fma(p, r, V::set1(1.6666665459e-1f));
  p = V::fma(p, r, V::set1(5.0000001201e-1f));
  return p;
}

// e^x for the GELU and softmax kernels, Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, the
// polynomial for e^r, and 2^n put into the exponent bits; about 2 ulp. x is clamped to
// [-87.3, 88.3], where e^x and 2^n stay normal floats; below -87.3 the result is 0 (softmax
// relies on e^-inf = 0). (exp_ieee below keeps the C library's semantics instead.)
template <class V>
typename V::F exp_clamped(typename V::F x) {
  using F = typename V::F;
  const auto underflow = V::less(x, V::set1(-87.3f));
  x = V::min(V::max(x, V::set1(-87.3f)), V::set1(88.3f));
  const F n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  // ln2 in two parts, so n * ln2_hi is exact and r keeps its low bits.
  F r = V::fnma(n, V::set1(0.693359375f), x);
  r = V::fnma(n, V::set1(-2.12194440e-4f), r);
  F p = expf_polynomial<V>(r);
  p = V::fma(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  const auto exponent = V::template shl<23>(V::iadd(V::to_int(n), V::iset1(127)));
  return V::zero_where(underflow, V::mul(p, V::from_bits(exponent)));
}

// GELU's constants (scalar_math.hpp) in float, for the vector forms.
inline constexpr float kGeluScaleF = static_cast<float>(kGeluScale);
inline constexpr float kGeluCubicF = static_cast<float>(kGeluCubic);

// gelu_new(x) = 0.5 x (1 + tanh(u)), u = kGeluScale (x + kGeluCubic x^3). Since
// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), this is x / (1 + e^(-2u)): one exp, one division, and
// no cancellation near u = 0.
template <class V>
typename V::F gelu(typename V::F x) {
  using F = typename V::F;
  const F x3 = V::mul(V::mul(x, x), x);
  const F u = V::mul(V::set1(kGeluScaleF), V::fma(V::set1(kGeluCubicF), x3, x));
  const F e = exp_clamped<V>(V::mul(V::set1(-2.0f), u));
  return V::div(x, V::add(V::set1(1.0f), e));
}

// gelu_new'(x) with s = sigmoid(2u) = (1 + tanh u) / 2 and 1 - tanh^2 u = 4 s (1 - s):
// s + 2 x s (1 - s) du, du = kGeluScale (1 + 3 kGeluCubic x^2).
// 1 - s = e s with e = e^(-2u) avoids the cancellation of 1 - s near s = 1.
template <class V>
typename V::F gelu_derivative(typename V::F x) {
  using F = typename V::F;
  const F k = V::set1(kGeluScaleF), cubic = V::set1(kGeluCubicF), one = V::set1(1.0f);
  const F x2 = V::mul(x, x);
  const F u = V::mul(k, V::fma(V::mul(cubic, x2), x, x));
  const F du = V::mul(k, V::fma(V::set1(3.0f * kGeluCubicF), x2, one));
  const F e = exp_clamped<V>(V::mul(V::set1(-2.0f), u));
  const F s = V::div(one, V::add(one, e));
  const F s_complement = V::mul(e, s);
  const F slope = V::mul(V::mul(V::set1(2.0f), x), V::mul(du, s_complement));
  return V::fma(slope, s, s);
}


// e^x with the C library's semantics (exp.hpp): the reduction x - n ln 2 exact in its first
// step through FMAs, and 2^n applied in two halves so that subnormal results round as such.
template <class V>
typename V::F exp_ieee(typename V::F x) {
  using F = typename V::F;
  // On x86, max/min return their second operand when either is NaN, so NaN passes the clamp
  // (NEON's propagate it anyway).
  x = V::min(V::set1(89.0f), V::max(V::set1(-104.0f), x));
  const F round = V::set1(12582912.0f);  // 1.5 * 2^23
  const F t = V::fma(x, V::set1(1.44269504088896341f), round);
  const F n = V::sub(t, round);
  const auto ni = V::isub(V::bits(t), V::bits(round));
  F r = V::fma(n, V::set1(-0.693145751953125f), x);
  r = V::fma(n, V::set1(-1.428606765330187045e-6f), r);
  const F p = expf_polynomial<V>(r);
  const F y = V::add(V::fma(p, V::mul(r, r), r), V::set1(1.0f));
  const auto n1 = V::template sra<1>(ni), n2 = V::isub(ni, n1);
  const auto bias = V::iset1(127);
  const F s1 = V::from_bits(V::template shl<23>(V::iadd(n1, bias)));
  const F s2 = V::from_bits(V::template shl<23>(V::iadd(n2, bias)));
  return V::mul(V::mul(y, s1), s2);
}

// 1 / (1 + e^-x) (exp.hpp).
template <class V>
typename V::F sigmoid(typename V::F x) {
  const typename V::F one = V::set1(1.0f);
  return V::div(one, V::add(one, exp_ieee<V>(V::negate(x))));
}

// Cephes' tanhf (exp.hpp), its polynomial with FMAs; both forms computed, one kept by a mask.
template <class V>
typename V::F tanh(typename V::F x) {
  using F = typename V::F;
  const F ax = V::abs(x), z = V::mul(ax, ax);
  F p = V::fma(V::set1(-5.70498872745e-3f), z, V::set1(2.06390887954e-2f));
  p = V::fma(p, z, V::set1(-5.37397155531e-2f));
  p = V::fma(p, z, V::set1(1.33314422036e-1f));
  p = V::fma(p, z, V::set1(-3.33332819422e-1f));
  const F small = V::fma(V::mul(p, z), ax, ax);
  const F one = V::set1(1.0f);
  const F large = V::sub(one, V::div(V::set1(2.0f), V::add(exp_ieee<V>(V::add(ax, ax)), one)));
  return V::copy_sign(V::select(V::less(ax, V::set1(0.625f)), small, large), x);
}

// Stores one vector of outputs after the epilogue: + bias (may be null), GELU, or + the
// residual already in c. MASKED: only the lanes of `tail` are read and written.
template <class V, bool MASKED>
void finish(float* c, typename V::F y, const float* bias, Epilogue epilogue, typename V::Tail tail) {
  const auto load = [&](const float* p) { return MASKED ? V::load(p, tail) : V::load(p); };
  if (bias != nullptr) y = V::add(y, load(bias));
  if (epilogue == Epilogue::gelu) y = gelu<V>(y);
  if (epilogue == Epilogue::residual) y = V::add(load(c), y);
  if (MASKED)
    V::store(c, y, tail);
  else
    V::store(c, y);
}

// Lanes [0, n) of a vector whose first lane is element `first` of a row of `n` valid ones.
template <class V>
typename V::Tail tail_from(long n, long first) {
  const long left = n - first;
  return V::tail(left <= 0 ? 0 : left >= V::kLanes ? V::kLanes : left);
}

}  // namespace kael::kernels::family
