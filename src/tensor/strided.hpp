// The loops every tensor op is built from: elements read and written in any dtype through a
// compute type, and a walk over a shape where each operand has its own (broadcast) strides.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::tensor_detail {

template <class T>
T read_raw(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The element at p (of `dtype`) as C.
template <class C>
C load(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::BOOL: return static_cast<C>(read_raw<std::uint8_t>(p) != 0);
    case DType::U8: return static_cast<C>(read_raw<std::uint8_t>(p));
    case DType::I8: return static_cast<C>(read_raw<std::int8_t>(p));
    case DType::I16: return static_cast<C>(read_raw<std::int16_t>(p));
    case DType::U16: return static_cast<C>(read_raw<std::uint16_t>(p));
    case DType::I32: return static_cast<C>(read_raw<std::int32_t>(p));
    case DType::U32: return static_cast<C>(read_raw<std::uint32_t>(p));
    case DType::I64: return static_cast<C>(read_raw<std::int64_t>(p));
    case DType::U64: return static_cast<C>(read_raw<std::uint64_t>(p));
    case DType::F16: return static_cast<C>(f16_to_f32(read_raw<std::uint16_t>(p)));
    case DType::BF16: return static_cast<C>(bf16_to_f32(read_raw<std::uint16_t>(p)));
    case DType::F32: return static_cast<C>(read_raw<float>(p));
    case DType::F64: return static_cast<C>(read_raw<double>(p));
  }
  return C{};
}

template <class T>
void write_raw(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Stores v (any arithmetic type) at p as `dtype`.
template <class V>
void store(DType dtype, std::byte* p, V v) {
  switch (dtype) {
    case DType::BOOL: write_raw<std::uint8_t>(p, v != V{} ? 1 : 0); return;
    case DType::U8: write_raw(p, static_cast<std::uint8_t>(v)); return;
    case DType::I8: write_raw(p, static_cast<std::int8_t>(v)); return;
    case DType::I16: write_raw(p, static_cast<std::int16_t>(v)); return;
    case DType::U16: write_raw(p, static_cast<std::uint16_t>(v)); return;
    case DType::I32: write_raw(p, static_cast<std::int32_t>(v)); return;
    case DType::U32: write_raw(p, static_cast<std::uint32_t>(v)); return;
    case DType::I64: write_raw(p, static_cast<std::int64_t>(v)); return;
    case DType::U64: write_raw(p, static_cast<std::uint64_t>(v)); return;
    case DType::F16: write_raw(p, f32_to_f16(static_cast<float>(v))); return;
    case DType::BF16: write_raw(p, f32_to_bf16(static_cast<float>(v))); return;
    case DType::F32: write_raw(p, static_cast<float>(v)); return;
    case DType::F64: write_raw(p, static_cast<double>(v)); return;
  }
}

// Calls f.template operator()<C>() with the type that computes `dtype`: bool, int64, float
// (F16, BF16 and F32) or double.
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BOOL: return f.template operator()<bool>();
    case DType::F16:
    case DType::BF16:
    case DType::F32: return f.template operator()<float>();
    case DType::F64: return f.template operator()<double>();
    default: return f.template operator()<std::int64_t>();
  }
}

// Strides (in bytes) that read `t` as if it had `shape` (t's shape broadcast to it).
std::vector<std::int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape);

// Calls f(offsets) for every index of `shape` in row-major order, where offsets[k] is the byte
// offset of operand k (strides[k] in bytes).
template <std::size_t N, class F>
void walk(const Shape& shape, const std::vector<std::int64_t> (&strides)[N], F&& f) {
  const std::size_t dims = shape.size();
  for (std::int64_t d : shape)
    if (d == 0) return;
  std::int64_t offsets[N] = {};
  if (dims == 0) {
    f(offsets);
    return;
  }
  std::vector<std::int64_t> index(dims, 0);
  const std::int64_t inner = shape[dims - 1];
  for (;;) {
    std::int64_t base[N];
    for (std::size_t k = 0; k < N; ++k) base[k] = offsets[k];
    for (std::int64_t i = 0; i < inner; ++i) {
      f(offsets);
      for (std::size_t k = 0; k < N; ++k) offsets[k] += strides[k][dims - 1];
    }
    for (std::size_t k = 0; k < N; ++k) offsets[k] = base[k];
    std::size_t axis = dims - 1;
    for (;;) {
      if (axis == 0) return;
      --axis;
      if (++index[axis] < shape[axis]) {
        for (std::size_t k = 0; k < N; ++k) offsets[k] += strides[k][axis];
        break;
      }
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= strides[k][axis] * (shape[axis] - 1);
      index[axis] = 0;
    }
  }
}

// A dim in [-rank, rank) made non-negative; IndexError naming `op` otherwise.
int wrap_dim(int dim, int rank, const char* op);

// The gradient `grad` of a broadcast result summed back to `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace kael::tensor_detail
