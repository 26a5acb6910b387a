// Memory-read bandwidth probe: N threads each sum their own contiguous half (third, ...) of a
// buffer far larger than the last-level cache, with 256-bit loads and 4 independent sums, the
// way a decode step streams the weights. Best of several passes, GB = 1e9 bytes. Prints
//   {"threads", "buffer_mb", "read_gb_s"}
// Usage: bandwidth [threads] [buffer MB, default 1024]
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

__attribute__((target("avx2"))) float sum_avx2(const float* p, long n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (long i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

float sum_plain(const float* p, long n) {
  float s[8] = {};
  for (long i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  float total = 0;
  for (float x : s) total += x;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const long mb = argc > 2 ? std::atol(argv[2]) : 1024;
  const long n = mb * 1000 * 1000 / 4 / (32L * threads) * (32L * threads);  // floats, divisible per thread
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2");
  float* buffer = static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(n) * 4));
  if (buffer == nullptr) return 1;
  // Touch each page from the thread that will read it.
  const long per = n / threads;
  {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([=] { std::memset(buffer + t * per, 1, static_cast<std::size_t>(per) * 4); });
    for (auto& t : pool) t.join();
  }
  double best = 0;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  for (int pass = 0; pass < 8; ++pass) {
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sink[t] = avx2 ? sum_avx2(buffer + t * per, per) : sum_plain(buffer + t * per, per); });
    for (auto& t : pool) t.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gbs = static_cast<double>(n) * 4 / dt / 1e9;
    if (gbs > best) best = gbs;
  }
  std::free(buffer);
  std::printf("{\"threads\": %d, \"buffer_mb\": %ld, \"read_gb_s\": %.2f, \"checksum\": %g}\n", threads, mb, best,
              static_cast<double>(sink[0]));
  return 0;
}
