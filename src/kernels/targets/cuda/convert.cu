// Copies and dtype conversions on CUDA devices: a strided view packed, or converted, into a
// contiguous output, by the CPU's rules (tensor/views.cpp, convert_into).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "core/cuda_runtime.hpp"
#include "kernels/targets/cuda/walk.cuh"

namespace kael::kernels::cuda {

namespace {

// Element i of an array of type e, as C.
template <class C>
__device__ inline C load_as(Element e, const void* base, std::int64_t i) {
  switch (e) {
    case Element::boolean: return static_cast<C>(static_cast<const std::uint8_t*>(base)[i] != 0);
    case Element::u8: return static_cast<C>(static_cast<const std::uint8_t*>(base)[i]);
    case Element::i8: return static_cast<C>(static_cast<const std::int8_t*>(base)[i]);
    case Element::i16: return static_cast<C>(static_cast<const std::int16_t*>(base)[i]);
    case Element::i32: return static_cast<C>(static_cast<const std::int32_t*>(base)[i]);
    case Element::i64: return static_cast<C>(static_cast<const std::int64_t*>(base)[i]);
    case Element::f16: return static_cast<C>(__half2float(__ushort_as_half(static_cast<const unsigned short*>(base)[i])));
    case Element::bf16:
      return static_cast<C>(__bfloat162float(__ushort_as_bfloat16(static_cast<const unsigned short*>(base)[i])));
    case Element::f32: return static_cast<C>(static_cast<const float*>(base)[i]);
    case Element::f64: return static_cast<C>(static_cast<const double*>(base)[i]);
  }
  return C{};
}

template <class C>
__device__ inline void store_as(Element e, void* base, std::int64_t i, C v) {
  switch (e) {
    case Element::boolean: static_cast<std::uint8_t*>(base)[i] = v != C{} ? 1 : 0; return;
    case Element::u8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(v); return;
    case Element::i8: static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(v); return;
    case Element::i16: static_cast<std::int16_t*>(base)[i] = static_cast<std::int16_t>(v); return;
    case Element::i32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); return;
    case Element::i64: static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(v); return;
    case Element::f16:
      static_cast<unsigned short*>(base)[i] = __half_as_ushort(__float2half_rn(static_cast<float>(v)));
      return;
    case Element::bf16:
      static_cast<unsigned short*>(base)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v)));
      return;
    case Element::f32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case Element::f64: static_cast<double*>(base)[i] = static_cast<double>(v); return;
  }
}

template <class C>
__global__ void convert_kernel(void* out, Element to, const void* in, Element from, Walk<1> walk, std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[1];
    walk_offsets(walk, i, at);
    store_as<C>(to, out, i, load_as<C>(from, in, at[0]));
  }
}

// The same element type: a copy of the element's bytes.
template <class Word>
__global__ void copy_kernel(Word* out, const Word* in, Walk<1> walk, std::int64_t n) {
  KAEL_CUDA_FOR_EACH(i, n) {
    std::int64_t at[1];
    walk_offsets(walk, i, at);
    out[i] = in[at[0]];
  }
}

std::size_t size_of(Element e) {
  switch (e) {
    case Element::boolean:
    case Element::u8:
    case Element::i8: return 1;
    case Element::i16:
    case Element::f16:
    case Element::bf16: return 2;
    case Element::i32:
    case Element::f32: return 4;
    case Element::i64:
    case Element::f64: return 8;
  }
  return 1;
}

bool floating(Element e) { return e == Element::f16 || e == Element::bf16 || e == Element::f32 || e == Element::f64; }

}  // namespace

void convert(int device, void* out, Element to, const void* in, Element from, const Walk<1>& walk, std::int64_t n) {
  if (n == 0) return;
  cuda_runtime::set_device(device);
  const unsigned blocks = blocks_for(n);
  if (to == from) {
    switch (size_of(to)) {
      case 1: copy_kernel<<<blocks, kThreads>>>(static_cast<std::uint8_t*>(out), static_cast<const std::uint8_t*>(in), walk, n); break;
      case 2: copy_kernel<<<blocks, kThreads>>>(static_cast<std::uint16_t*>(out), static_cast<const std::uint16_t*>(in), walk, n); break;
      case 4: copy_kernel<<<blocks, kThreads>>>(static_cast<std::uint32_t*>(out), static_cast<const std::uint32_t*>(in), walk, n); break;
      default: copy_kernel<<<blocks, kThreads>>>(static_cast<std::uint64_t*>(out), static_cast<const std::uint64_t*>(in), walk, n); break;
    }
  } else if (!floating(to) && !floating(from)) {
    convert_kernel<std::int64_t><<<blocks, kThreads>>>(out, to, in, from, walk, n);
  } else if (to == Element::f64 || from == Element::f64) {
    convert_kernel<double><<<blocks, kThreads>>>(out, to, in, from, walk, n);
  } else {
    convert_kernel<float><<<blocks, kThreads>>>(out, to, in, from, walk, n);
  }
  cuda_runtime::check_launch(device, "convert");
}

}  // namespace kael::kernels::cuda
