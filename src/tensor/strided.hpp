// The loops every tensor op is built from: elements read and written in any dtype through a
// compute type, and a walk over a shape where each operand has its own (broadcast) strides.
#pragma once

#include <functional>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kael/core/tensor.hpp"
#include "tensor/parallel.hpp"

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

// A walk's shape and each operand's byte strides over it, with dims of extent 1 dropped and
// neighbours merged where every operand steps through them as through one dim (contiguous
// operands of one shape become a single dim, a broadcast bias a stride-0 dim), so that rows,
// the runs along the last dim, are as long as the layouts allow.
template <std::size_t N>
struct Layout {
  Shape shape;
  std::vector<std::int64_t> strides[N];
};

template <std::size_t N>
Layout<N> coalesce(const Shape& shape, const std::vector<std::int64_t> (&strides)[N]) {
  Layout<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k) merge = out.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
      continue;
    }
    out.shape.push_back(shape[d]);
    for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
  }
  return out;
}

// Calls row(offsets, count) for the elements [begin, end) of layout's shape in row-major order,
// a run of `count` elements along the last dim at a time: offsets[k] is operand k's byte
// offset of the run's first element, and its next ones follow at layout.strides[k].back()
// (for a 0-D layout, one run of one element at offset 0).
template <std::size_t N, class F>
void walk_rows(const Layout<N>& layout, std::int64_t begin, std::int64_t end, F&& row) {
  std::int64_t offsets[N] = {};
  const std::size_t dims = layout.shape.size();
  if (begin >= end) return;
  if (dims == 0) {
    row(static_cast<const std::int64_t*>(offsets), std::int64_t{1});
    return;
  }
  const std::int64_t inner = layout.shape[dims - 1];
  std::vector<std::int64_t> index(dims, 0);
  std::int64_t col = begin % inner;
  for (std::int64_t rest = begin / inner, d = static_cast<std::int64_t>(dims) - 2; d >= 0; --d) {
    const auto axis = static_cast<std::size_t>(d);
    index[axis] = rest % layout.shape[axis];
    rest /= layout.shape[axis];
    for (std::size_t k = 0; k < N; ++k) offsets[k] += index[axis] * layout.strides[k][axis];
  }
  for (std::size_t k = 0; k < N; ++k) offsets[k] += col * layout.strides[k][dims - 1];
  for (std::int64_t at = begin;;) {
    const std::int64_t count = std::min(inner - col, end - at);
    row(static_cast<const std::int64_t*>(offsets), count);
    at += count;
    if (at >= end) return;
    for (std::size_t k = 0; k < N; ++k) offsets[k] -= col * layout.strides[k][dims - 1];
    col = 0;
    for (std::size_t axis = dims - 1; axis-- > 0;) {
      if (++index[axis] < layout.shape[axis]) {
        for (std::size_t k = 0; k < N; ++k) offsets[k] += layout.strides[k][axis];
        break;
      }
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= layout.strides[k][axis] * (layout.shape[axis] - 1);
      index[axis] = 0;
    }
  }
}

// True when some operand steps through the last dim by more than a cache line and through the
// dim before it by less (a transposed view): row by row, each of its elements would be a new
// cache line (and a new page every few), which are gone again by the time the next row wants
// their neighbours.
template <std::size_t N>
bool crosswise(const Layout<N>& layout) {
  const std::size_t dims = layout.shape.size();
  if (dims < 2) return false;
  for (std::size_t k = 0; k < N; ++k) {
    const std::int64_t inner = std::abs(layout.strides[k][dims - 1]), outer = std::abs(layout.strides[k][dims - 2]);
    if (inner > 64 && outer < inner) return true;
  }
  return false;
}

// walk_rows' calls over the whole layout in tiles of the last two dims, kTileRows rows of
// kTileColumns elements, threaded by bands of kTileRows rows: a crosswise operand's tile is
// kTileColumns cache lines, which stay in cache while the tile's rows use up their floats (few
// enough lines that a power-of-two row stride, which puts them all in a few cache sets, does
// not evict them).
template <std::size_t N, class F>
void parallel_walk_tiles(const Layout<N>& layout, std::int64_t numel, std::int64_t work_per_element, F& row) {
  constexpr std::int64_t kTileRows = 16, kTileColumns = 64;
  const std::size_t dims = layout.shape.size();
  const std::int64_t R = layout.shape[dims - 2], C = layout.shape[dims - 1];
  const std::int64_t bands = (R + kTileRows - 1) / kTileRows, outer = numel / (R * C);
  parallel_range(outer * bands, work_per_element * kTileRows * C, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t band = first; band < last; ++band) {
      std::int64_t base[N] = {};
      for (std::int64_t rest = band / bands, d = static_cast<std::int64_t>(dims) - 3; d >= 0; --d) {
        const auto axis = static_cast<std::size_t>(d);
        for (std::size_t k = 0; k < N; ++k) base[k] += rest % layout.shape[axis] * layout.strides[k][axis];
        rest /= layout.shape[axis];
      }
      const std::int64_t r0 = band % bands * kTileRows, r1 = std::min(R, r0 + kTileRows);
      for (std::int64_t c0 = 0; c0 < C; c0 += kTileColumns)
        for (std::int64_t r = r0; r < r1; ++r) {
          std::int64_t offsets[N];
          for (std::size_t k = 0; k < N; ++k)
            offsets[k] = base[k] + r * layout.strides[k][dims - 2] + c0 * layout.strides[k][dims - 1];
          row(static_cast<const std::int64_t*>(offsets), std::min(kTileColumns, C - c0));
        }
    }
  });
}

// walk_rows over all `numel` elements, split into ranges over the pool's threads as
// parallel_range does (`work_per_element` units each), or in tiles where an operand is read
// crosswise. Each element is visited once, in any range, so an op that computes each element
// alone gives the same bits whatever the split or the order.
template <std::size_t N, class F>
void parallel_walk(const Layout<N>& layout, std::int64_t numel, std::int64_t work_per_element, F&& row) {
  if (numel <= 0) return;
  if (crosswise(layout)) {
    parallel_walk_tiles(layout, numel, work_per_element, row);
    return;
  }
  parallel_range(numel, work_per_element, [&](std::int64_t begin, std::int64_t end) { walk_rows(layout, begin, end, row); });
}

// A new contiguous tensor with t's values (no history), copied on the pool's threads; and t
// itself where it is contiguous already. The tensor layer's contiguous() and clone().
Tensor dense_copy(const Tensor& t);
inline Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : dense_copy(t); }

// A dim in [-rank, rank) made non-negative; IndexError naming `op` otherwise.
int wrap_dim(int dim, int rank, const char* op);

// The gradient `grad` of a broadcast result summed back to `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// In-place writes (views.cpp): check_in_place refuses, naming `op`, what torch refuses under
// grad mode (a leaf that requires a gradient, a view of a tensor with history);
// assign_in_place writes compute(t) (the out-of-place op, of t's shape) into t and gives t its
// history. Where that history is recorded compute gets a differentiable copy of t, so that
// what the op saves is not the tensor the write then changes.
void check_in_place(const Tensor& t, const char* op);
Tensor& assign_in_place(Tensor& t, const char* op, const std::function<Tensor(const Tensor&)>& compute);

}  // namespace kael::tensor_detail
