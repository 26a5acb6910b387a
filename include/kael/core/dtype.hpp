// Element types of safetensors files and their conversions to float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kael {

enum class DType : std::uint8_t { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 };

inline constexpr DType kAllDTypes[] = {DType::BOOL, DType::U8,  DType::I8,  DType::I16, DType::U16,
                                       DType::I32,  DType::U32, DType::I64, DType::U64, DType::F16,
                                       DType::BF16, DType::F32, DType::F64};

// Bytes per element.
std::size_t dtype_size(DType dtype);
// The safetensors spelling ("F32", "BF16", ...).
std::string_view dtype_name(DType dtype);
// Parses the safetensors spelling; nullopt for anything else (F8_*, unknown names).
std::optional<DType> dtype_from_name(std::string_view name);
bool is_floating(DType dtype);

// How a model stores its weight matrices (kael::model::LoadOptions, kernels' PackedMatrix):
// F32, IEEE half, int8 (a scale per group of 32 weights, or per column on AMX), or bfloat16.
enum class WeightDType : std::uint8_t { f32, f16, int8, bf16 };

// IEEE half and bfloat16 stored as raw bits, so they never collide with U16 in templates.
struct f16_t {
  std::uint16_t bits;
};
struct bf16_t {
  std::uint16_t bits;
};

// Exact decodes (every half and bfloat16 value is representable in float32).
float f16_to_f32(std::uint16_t bits);
float bf16_to_f32(std::uint16_t bits);
// Round-to-nearest-even encodes; overflow goes to infinity, NaN stays NaN.
std::uint16_t f32_to_f16(float value);
std::uint16_t f32_to_bf16(float value);

// The dtype that stores C++ type T.
template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::BOOL; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<std::int16_t>() { return DType::I16; }
template <> constexpr DType dtype_of<std::uint16_t>() { return DType::U16; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<std::uint32_t>() { return DType::U32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<std::uint64_t>() { return DType::U64; }
template <> constexpr DType dtype_of<f16_t>() { return DType::F16; }
template <> constexpr DType dtype_of<bf16_t>() { return DType::BF16; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }

}  // namespace kael
