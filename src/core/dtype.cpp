#include "kael/core/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "kael/core/error.hpp"

namespace kael {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::BOOL, "BOOL", 1}, {DType::U8, "U8", 1},     {DType::I8, "I8", 1},
    {DType::I16, "I16", 2},   {DType::U16, "U16", 2},   {DType::I32, "I32", 4},
    {DType::U32, "U32", 4},   {DType::I64, "I64", 8},   {DType::U64, "U64", 8},
    {DType::F16, "F16", 2},   {DType::BF16, "BF16", 2}, {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kInfo)
    if (entry.dtype == dtype) return entry;
  throw TypeError(str("unknown dtype code ", static_cast<int>(dtype)));
}
}  // namespace

std::size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& entry : kInfo)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: value = mantissa * 2^-24, exact in float32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  std::uint32_t out;
  if (exponent == 0x1F)
    out = sign | 0x7F800000u | (mantissa << 13);  // infinity or NaN (payload kept)
  else
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  return std::bit_cast<float>(out);
}

float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in half: round |value| / 2^-24 to an integer, ties to even.
    const float scaled = std::ldexp(std::bit_cast<float>(abs), 24);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias exponent and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t half = ((abs >> 13) - (112u << 10));
  const std::uint32_t dropped = abs & 0x1FFFu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

}  // namespace kael
