// What the AVX-512 GEMVs of amx.hpp's two formats share (gemv_bf16.cpp, int8c.cpp): rows in
// passes of four, so that one weight load feeds four rows. Internal linkage: the two units are
// built with different flags, and neither may lend the other its copy.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kael::kernels::avx512 {
namespace {

constexpr int kGemvRows = 4;

[[maybe_unused]] std::int32_t load_dword(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// pass(r, rows) for rows [0, M) in passes of kGemvRows, the rest in one last pass; `rows` is an
// std::integral_constant, so each pass's accumulators have a size known when compiling.
template <class Pass>
void over_row_passes(std::int64_t M, Pass pass) {
  std::int64_t r = 0;
  for (; r + kGemvRows <= M; r += kGemvRows) pass(r, std::integral_constant<int, kGemvRows>{});
  switch (M - r) {
    case 3: pass(r, std::integral_constant<int, 3>{}); break;
    case 2: pass(r, std::integral_constant<int, 2>{}); break;
    case 1: pass(r, std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

}  // namespace
}  // namespace kael::kernels::avx512
