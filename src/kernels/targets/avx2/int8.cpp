// AVX2 kernels of int8.hpp: the activation quantizer, and the GEMM (family/int8.hpp) with
// pmaddubsw, which any AVX2 CPU has. With |x|, |w| <= 127 a pair sums to at most
// 2 * 127 * 127 = 32258, inside int16, so pmaddubsw never saturates; pmaddwd by 1 widens the
// pairs to int32. Four instructions per 32 multiply-adds keep a core ahead of the memory that
// streams the weights.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/targets/avx2/int8_dot.hpp"
#include "kernels/targets/avx2/kernels.hpp"
#include "kernels/targets/avx2/vec.hpp"
#include "kernels/family/int8.hpp"

namespace kael::kernels::avx2 {
namespace {

constexpr long kGroup = kInt8Group;

// The dot step of family/int8.hpp: pmaddubsw's pairs, widened by pmaddwd.
struct Pmaddubsw : SignedBytes<Pmaddubsw> {
  static Sum step(Sum sum, const Activations& a, __m256i w) {
    const __m256i pairs = _mm256_maddubs_epi16(a.xabs, _mm256_sign_epi8(w, a.x));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};

}  // namespace

void quantize_rows(std::int8_t* xq, float* xs, const float* x, std::int64_t T, std::int64_t K) {
  const long Kp = int8_padded_k(K), groups = Kp / kGroup;
  const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (long t = 0; t < T; ++t) {
    const float* row = x + t * K;
    for (long g = 0; g < groups; ++g) {
      const long k0 = g * kGroup;
      alignas(32) float padded[kGroup] = {};
      const float* src = row + k0;
      if (k0 + kGroup > K) {  // the ragged last group: zeros past K
        std::memcpy(padded, src, static_cast<std::size_t>(K - k0) * sizeof(float));
        src = padded;
      }
      __m256 v[4], amax = zero, probe = zero;  // probe: NaN when the group holds an infinity or NaN
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(src + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
        probe = _mm256_add_ps(probe, _mm256_mul_ps(v[i], zero));
      }
      std::int8_t* q = xq + t * Kp + k0;
      float& scale = xs[t * groups + g];
      const float m = Vec::hmax(amax);
      const bool finite = _mm256_movemask_ps(_mm256_cmp_ps(probe, probe, _CMP_UNORD_Q)) == 0;
      if (!finite || m == 0.0f) {
        std::memset(q, 0, kGroup);
        scale = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      scale = m / 127.0f;
      const __m256 inv = _mm256_set1_ps(127.0f / m);
      __m256i n[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));  // round to nearest even
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(bytes, order));
    }
  }
}

void int8_gemm(float* c, std::int64_t ldc, const std::int8_t* xq, const float* xs, std::int64_t M, std::int64_t Kp,
               const std::int8_t* w, const std::uint16_t* scales, std::int64_t panels, std::int64_t n_valid,
               const float* bias, Epilogue epilogue) {
  family::int8_gemm<Vec, Pmaddubsw>(c, ldc, xq, xs, M, Kp, w, scales, panels, n_valid, bias, epilogue);
}

}  // namespace kael::kernels::avx2
