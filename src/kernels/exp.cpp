// The portable exp kernel and its reference (exp.hpp).
//
// The method, shared by every set: x is clamped to [-104, 89] (NaN passes: both limits are
// past where the result becomes 0 or +inf), n = round(x / ln 2), r = x - n ln 2 in two parts
// (|r| <= ln 2 / 2), e^r = 1 + (r + r^2 P(r)) with Cephes' expf polynomial, added to 1 last
// so that the sum is rounded once, then scaled by 2^n as 2^(n/2) 2^(n - n/2): both factors
// are normal floats, the first product is exact, and the second rounds once into the
// subnormals, to 0 or to +inf exactly as the true product would. sigmoid and tanh follow it
// with the formulas of exp.hpp.
#include "kernels/exp.hpp"

#include <cmath>
#include <cstring>

namespace kael::kernels {

namespace ref {
void exp(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::exp(static_cast<double>(inp[i])));
}
void sigmoid(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(inp[i]))));
}
void tanh(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::tanh(static_cast<double>(inp[i])));
}
}  // namespace ref

namespace portable {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Without an FMA, ln 2 is split so that n * kLn2Hi is exact (Cephes' constants).
float exp_one(float x) {
  x = x < -104.0f ? -104.0f : x;  // comparisons are false for NaN, which passes
  x = x > 89.0f ? 89.0f : x;
  // Adding 1.5 * 2^23 rounds to an integer (to nearest even) in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  const auto ni = static_cast<std::int32_t>(bits_of(t) - bits_of(kRound));
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = (p * (r * r) + r) + 1.0f;
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;  // |n1|, |n2| <= 75: normal scales
  const float s1 = float_of(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = float_of(static_cast<std::uint32_t>(n2 + 127) << 23);
  return y * s1 * s2;
}

float tanh_one(float x) {
  const float ax = std::fabs(x), z = ax * ax;
  const float small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) * z * ax + ax;
  const float large = 1.0f - 2.0f / (exp_one(ax + ax) + 1.0f);
  const std::uint32_t pick_small = 0u - static_cast<std::uint32_t>(ax < 0.625f);
  const std::uint32_t magnitude = (bits_of(small) & pick_small) | (bits_of(large) & ~pick_small);
  return float_of(magnitude | (bits_of(x) & 0x80000000u));  // both forms are >= 0 (or NaN)
}

}  // namespace

void exp(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = exp_one(inp[i]);
}

void sigmoid(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + exp_one(-inp[i]));
}

void tanh(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = tanh_one(inp[i]);
}

}  // namespace portable

}  // namespace kael::kernels
