// Counter-based random numbers: each value is a pure function of (seed, stream, index), so
// threads can draw any element in any order, a backward redraws the mask its forward applied
// instead of keeping it, and a run resumed from a saved counter draws what an uninterrupted
// one would have.
#pragma once

#include <cmath>
#include <cstdint>

namespace kael::kernels {

// splitmix64's finalizer: a bijection of 64-bit words that mixes every input bit.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A 64-bit random word for element `index` of stream `stream` under `seed`.
inline std::uint64_t random_word(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return mix64(mix64(mix64(seed) ^ stream) ^ index);
}

// Uniform in [0, 1) with 24 bits, exactly representable as a float.
inline float uniform_float(std::uint64_t word) { return static_cast<float>(word >> 40) * 0x1.0p-24f; }

// A standard normal value for `index` (Box-Muller on two 32-bit halves of one word).
inline double standard_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t w = random_word(seed, stream, index);
  const double u1 = (static_cast<double>(w >> 32) + 1.0) * 0x1.0p-32;  // (0, 1]
  const double u2 = static_cast<double>(w & 0xFFFFFFFFull) * 0x1.0p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// One dropout site of one forward pass: element i is kept (and scaled by 1 / (1 - p)) when its
// uniform draw is at least p. `stream` names the (call, site) pair. p == 0 keeps everything;
// p must be below 1 (a finite scale). `first` is the index of this call's element 0 in the
// whole batch's site (nonzero on the data-parallel ranks after the first, which hold later rows
// of one global batch).
struct DropoutMask {
  float p = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t first = 0;

  bool active() const { return p > 0.0f; }
  float scale() const { return 1.0f / (1.0f - p); }
  bool kept(std::uint64_t i) const { return uniform_float(random_word(seed, stream, first + i)) >= p; }
  // scale() when element i is kept, else 0.
  float factor(std::uint64_t i) const { return kept(i) ? scale() : 0.0f; }
};

}  // namespace kael::kernels
