// The window arguments of convolution and pooling (spatial sizes, kernel sizes, strides,
// paddings, dilations). Output sizes multiply and add them in int64, so each is bounded far
// inside it: a padding of 2**62 from Python is refused, never wrapped around.
#pragma once

#include <cstdint>

#include "kael/core/error.hpp"

namespace kael::tensor_detail {

inline constexpr std::int64_t kMaxWindowArg = (std::int64_t{1} << 31) - 1;

inline void check_window_arg(const char* op, const char* what, std::int64_t value) {
  if (value > kMaxWindowArg)
    throw ValueError(str(op, ": ", what, " ", value, " is too large (at most ", kMaxWindowArg, ")"));
}

}  // namespace kael::tensor_detail
