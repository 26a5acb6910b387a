// A strided n-dimensional array. Its bytes are either owned (64-byte aligned heap memory)
// or borrowed from something else, such as a file mapping, through a shared owner that keeps
// that memory alive as long as any tensor still points into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"

namespace kael {

using Shape = std::vector<std::int64_t>;

// Product of the dimensions; throws ValueError on a negative dimension or on overflow.
std::int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);

class Tensor {
 public:
  // An empty F32 tensor of shape [0].
  Tensor();

  // A new owned, zero-filled, contiguous tensor.
  static Tensor zeros(DType dtype, Shape shape);
  // A new owned tensor holding a copy of `bytes` (which must be numel * element size long).
  static Tensor from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);
  // A contiguous tensor over `data`, which `owner` keeps alive. No copy is made.
  static Tensor borrow(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  // Strides in elements, one per dimension.
  const std::vector<std::int64_t>& strides() const { return strides_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  std::int64_t size(int axis) const;
  std::int64_t numel() const { return numel_; }
  std::size_t element_size() const { return dtype_size(dtype_); }
  // Bytes the elements occupy when laid out contiguously.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * element_size(); }
  bool is_contiguous() const;
  // True when the bytes belong to someone else (a mapping), false when this tensor allocated them.
  bool is_borrowed() const { return borrowed_; }

  // Pointer to the first element.
  std::byte* raw_data() { return data_; }
  const std::byte* raw_data() const { return data_; }
  // The elements as a contiguous byte span; throws ValueError if the tensor is a strided view.
  std::span<const std::byte> bytes() const;

  // Typed pointer to the first element; throws TypeError when T is not the dtype.
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return reinterpret_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return reinterpret_cast<const T*>(data_);
  }

  // Element access by multi-index with bounds checks (IndexError) and a dtype check (TypeError).
  template <class T>
  T& at(std::initializer_list<std::int64_t> index) {
    check_type(dtype_of<T>());
    return *reinterpret_cast<T*>(data_ + offset_of(index) * static_cast<std::int64_t>(sizeof(T)));
  }
  template <class T>
  const T& at(std::initializer_list<std::int64_t> index) const {
    check_type(dtype_of<T>());
    return *reinterpret_cast<const T*>(data_ + offset_of(index) * static_cast<std::int64_t>(sizeof(T)));
  }
  // The element at a logical (row-major) position, any dtype, as double.
  double value_as_double(std::int64_t flat_index) const;

  // A contiguous tensor with the same values: this one (shared) if already contiguous, else a copy.
  Tensor contiguous() const;
  // An owned contiguous copy.
  Tensor clone() const;
  // A view of a 2-D tensor with the axes swapped (shares the bytes).
  Tensor transpose() const;
  // A contiguous owned F32 copy of any dtype (integers and BOOL by value, F16/BF16 exactly).
  Tensor to_f32() const;

 private:
  void check_type(DType expected) const;
  std::int64_t offset_of(std::initializer_list<std::int64_t> index) const;

  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t numel_ = 0;
  std::shared_ptr<void> owner_;  // keeps data_ alive
  std::byte* data_ = nullptr;
  bool borrowed_ = false;
};

}  // namespace kael
