// A strided n-dimensional array. Its bytes are either owned (64-byte aligned heap memory, or a
// CUDA device's memory from its caching allocator) or borrowed from something else, such as a
// file mapping, through a shared owner that keeps that memory alive as long as any tensor still
// points into it.
//
// The CPU's code reaches the bytes only through data<T>(), raw_data(), at(), bytes() and the
// members that read values: each refuses a tensor that is not on the CPU, so no CPU loop ever
// reads device memory as host memory. Device code uses device_data<T>() / device_raw_data().
//
// Copies of a Tensor are handles to the same values, gradient and history (as libtorch's).
// The operations, views and autograd declared as members below are defined by the tensor
// layer (src/tensor/, include/kael/tensor/); the core layer keeps only storage and layout.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "kael/core/device.hpp"
#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"

namespace kael {

namespace autograd {
struct Meta;  // requires_grad, the gradient, the node that made the tensor (tensor/autograd.hpp)
}

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
  // A new owned, contiguous tensor whose bytes are not initialized (torch.empty): for outputs
  // that are written in full before they are read.
  static Tensor empty(DType dtype, Shape shape);
  // The same on `device` (a CUDA device's memory is not initialized; Error if it is not usable).
  static Tensor empty(DType dtype, Shape shape, Device device);
  // A new owned tensor holding a copy of `bytes` (which must be numel * element size long).
  static Tensor from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);
  // A contiguous tensor over `data`, which `owner` keeps alive. No copy is made.
  static Tensor borrow(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner);
  // The same over memory of `device` (say, from another CUDA library); the caller vouches that
  // `data` is that device's memory.
  static Tensor borrow(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner, Device device);

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
  // True when this handle alone holds its bytes (no copy, view or saved value shares them), it
  // allocated them itself, and it spans them from their start with contiguous strides: autograd
  // may then keep a gradient it is done with as a leaf's .grad, or add into it in place, and no
  // one can tell (torch's AccumulateGrad steals such a buffer the same way).
  bool owns_dense_storage_alone() const;

  // Pointer to the first element, for the CPU's code: an Error for a tensor on another device.
  std::byte* raw_data() {
    check_on_cpu();
    return data_;
  }
  const std::byte* raw_data() const {
    check_on_cpu();
    return data_;
  }
  // Pointer to the first element on whatever device holds it: for device code and copies only.
  std::byte* device_raw_data() { return data_; }
  const std::byte* device_raw_data() const { return data_; }
  template <class T>
  T* device_data() {
    check_type(dtype_of<T>());
    return reinterpret_cast<T*>(data_);
  }
  template <class T>
  const T* device_data() const {
    check_type(dtype_of<T>());
    return reinterpret_cast<const T*>(data_);
  }
  // The elements as a contiguous byte span; throws ValueError if the tensor is a strided view.
  std::span<const std::byte> bytes() const;

  // Typed pointer to the first element, for the CPU's code; throws TypeError when T is not the
  // dtype, Error for a tensor on another device.
  template <class T>
  T* data() {
    check_on_cpu();
    check_type(dtype_of<T>());
    return reinterpret_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    check_on_cpu();
    check_type(dtype_of<T>());
    return reinterpret_cast<const T*>(data_);
  }

  // Element access by multi-index with bounds checks (IndexError) and a dtype check (TypeError).
  template <class T>
  T& at(std::initializer_list<std::int64_t> index) {
    check_on_cpu();
    check_type(dtype_of<T>());
    return *reinterpret_cast<T*>(data_ + offset_of(index) * static_cast<std::int64_t>(sizeof(T)));
  }
  template <class T>
  const T& at(std::initializer_list<std::int64_t> index) const {
    check_on_cpu();
    check_type(dtype_of<T>());
    return *reinterpret_cast<const T*>(data_ + offset_of(index) * static_cast<std::int64_t>(sizeof(T)));
  }
  // The element at a logical (row-major) position, any dtype, as double.
  double value_as_double(std::int64_t flat_index) const;

  // An owned contiguous copy of the values, without history, on one thread: for the layers
  // below the tensor library (io, model, train). The tensor library's clone() and
  // contiguous() below are differentiable and threaded.
  Tensor packed_copy() const;
  // A view of a 2-D tensor with the axes swapped (shares the bytes).
  Tensor transpose() const;
  // A contiguous owned F32 copy of any dtype (integers and BOOL by value, F16/BF16 exactly).
  Tensor to_f32() const;

  // False only for a default-constructed tensor (an absent gradient, for one).
  bool defined() const { return owner_ != nullptr; }
  Device device() const { return device_; }
  // Bumped by every in-place write through the tensor library; shared by all views of the
  // same bytes, so autograd can tell that a value it saved has changed since. Atomic: a
  // backward on one thread reads it while another thread may write the storage.
  std::uint64_t version() const { return version_ ? version_->load(std::memory_order_relaxed) : 0; }
  void bump_version() const {
    if (version_) version_->fetch_add(1, std::memory_order_relaxed);
  }
  // A view of the same bytes with another shape and strides (in elements, from `offset`).
  Tensor as_strided(Shape shape, std::vector<std::int64_t> strides, std::int64_t offset = 0) const;

  // --- the tensor library (defined in src/tensor/) ---
  // Views (share the bytes; dims may be negative, counted from the end).
  Tensor view(Shape shape) const;
  Tensor reshape(Shape shape) const;
  Tensor flatten() const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor T() const;  // reverses the dimensions
  Tensor permute(std::vector<int> dims) const;
  Tensor unsqueeze(int dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int dim) const;
  Tensor select(int dim, std::int64_t index) const;
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(int dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor expand(Shape shape) const;
  Tensor detach() const;
  // A new contiguous tensor with the same values, whose gradient flows back to this one
  // (torch.clone); and contiguous(): this tensor itself (shared) where it is contiguous
  // already, else clone().
  Tensor clone() const;
  Tensor contiguous() const;
  // Conversions: a copy unless already of that dtype / on that device.
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(std::string_view device) const;
  Tensor cpu() const { return to(Device::cpu()); }

  // The single value of a one-element tensor, and all values in row-major order.
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;

  // Autograd.
  bool requires_grad() const;
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;
  Tensor grad() const;  // undefined (defined() false) until a backward reaches this leaf
  // Assigns the gradient (torch's `t.grad = g`): a floating tensor's, of its dtype and shape;
  // an undefined `grad` drops it. TypeError / ValueError otherwise.
  void set_grad(const Tensor& grad);
  void zero_grad();     // drops the gradient, as PyTorch's set_to_none
  // Gradient of this tensor with respect to every leaf that requires one. Without `gradient`
  // the tensor must hold one element. The graph is freed after, unless retain_graph.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  const std::shared_ptr<autograd::Meta>& autograd_meta() const { return autograd_; }
  void set_autograd_meta(std::shared_ptr<autograd::Meta> meta) { autograd_ = std::move(meta); }

  // Math (see tensor/ops.hpp for the free functions and broadcasting rules).
  Tensor sum() const;
  Tensor sum(std::vector<int> dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::vector<int> dims, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor pow(double exponent) const;
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double value);
  Tensor& copy_(const Tensor& source);
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
  Tensor& operator+=(double value);
  Tensor& operator-=(double value);
  Tensor& operator*=(double value);
  Tensor& operator/=(double value);

 private:
  static Tensor allocate(DType dtype, Shape shape, bool zeroed);
  void check_type(DType expected) const;
  void check_on_cpu() const {
    if (device_.type != Device::Type::cpu) throw_not_on_cpu();
  }
  [[noreturn]] void throw_not_on_cpu() const;
  std::int64_t offset_of(std::initializer_list<std::int64_t> index) const;

  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t numel_ = 0;
  std::shared_ptr<void> owner_;  // keeps data_ alive
  std::byte* data_ = nullptr;
  bool borrowed_ = false;
  Device device_ = Device::cpu();
  std::shared_ptr<std::atomic<std::uint64_t>> version_;  // shared by the views of one storage
  std::shared_ptr<autograd::Meta> autograd_;      // null: no gradient, no history
};

}  // namespace kael
