#include "kael/core/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "core/cuda_runtime.hpp"
#include "core/huge_pages.hpp"

namespace kael {

namespace {

constexpr std::size_t kAlignment = 64;  // a cache line; enough for any SIMD load

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// Tensors from this size up (a model's weight matrices) go on huge pages.
constexpr std::size_t kHugeTensorBytes = std::size_t{2} << 20;

// Freed huge blocks of uninitialized tensors (Tensor::empty, the tensor library's outputs),
// kept for the next uninitialized tensor of the same size. A fresh mapping costs a page fault
// and the kernel's clearing of each 2 MiB page on first touch, and its unmapping a TLB
// shootdown, on every call of an op (or training step) that makes an output of the same shape;
// for a memory-bound op that is a large part of its time. Zeroed tensors (weights) never come
// from or go to it.
//
// How much stays mapped: a training step frees and asks again for far more than 256 MiB (every
// gradient at zero_grad, the logits and their gradient, the activations saved for the
// backward), and a fixed cap made it map and clear most of that again every step. So the cache
// keeps up to as many bytes as the blocks in use ever reached at once (the process has held
// that much already), and never less than kMinCachedBytes; the oldest kept are unmapped first.
// A loop that repeats (a training step, a forward of the same shape) then maps nothing after
// its first passes. A process whose uninitialized tensors never pass 256 MiB at once keeps what
// it always did; the engine's inference makes none but its packed weights, which live as long
// as the model.
class BlockCache {
 public:
  static constexpr std::size_t kMinCachedBytes = std::size_t{256} << 20;

  // A kept block of exactly `bytes`, or null (the caller maps one); either way lent() follows
  // once the caller has its block.
  std::shared_ptr<void> take(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = blocks_.size(); i-- > 0;)
      if (blocks_[i].first == bytes) {
        std::shared_ptr<void> block = std::move(blocks_[i].second);
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        held_ -= bytes;
        return block;
      }
    return nullptr;
  }

  // A block of `bytes` is in use by a tensor until give().
  void lent(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
  }

  void give(std::size_t bytes, std::shared_ptr<void> block) {
    std::vector<std::shared_ptr<void>> unmapped;  // unmapped after the lock
    {
      const std::lock_guard lock(mutex_);
      in_use_ -= bytes;
      const std::size_t limit = std::max(kMinCachedBytes, peak_);  // >= bytes: they were in use
      blocks_.emplace_back(bytes, std::move(block));
      held_ += bytes;
      while (held_ > limit) {
        held_ -= blocks_.front().first;
        unmapped.push_back(std::move(blocks_.front().second));
        blocks_.erase(blocks_.begin());
      }
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::shared_ptr<void>>> blocks_;  // oldest first
  std::size_t held_ = 0;    // bytes in blocks_
  std::size_t in_use_ = 0;  // bytes of blocks lent and not given back
  std::size_t peak_ = 0;    // the most in_use_ has been
};

BlockCache& block_cache() {
  static BlockCache* const cache = new BlockCache;  // never destroyed: tensors may outlive statics
  return *cache;
}

std::shared_ptr<void> allocate_aligned(std::size_t bytes, bool zeroed) {
  if (bytes >= kHugeTensorBytes) {
    if (zeroed) {
      if (std::shared_ptr<void> memory = allocate_huge_aligned(bytes)) return memory;  // zeroed by the mapping
    } else {
      std::shared_ptr<void> block = block_cache().take(bytes);
      if (!block) block = allocate_huge_aligned(bytes);
      if (block) {
        block_cache().lent(bytes);
        void* data = block.get();
        return std::shared_ptr<void>(data, [bytes, block = std::move(block)](void*) mutable {
          block_cache().give(bytes, std::move(block));
        });
      }
    }
  }
  // Round up so aligned_alloc gets a multiple of the alignment; never ask for zero bytes.
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* memory = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (memory == nullptr) throw Error(str("out of memory allocating ", bytes, " bytes for a tensor"));
  if (zeroed) std::memset(memory, 0, rounded == 0 ? kAlignment : rounded);
  return std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
}

}  // namespace

std::int64_t shape_numel(const Shape& shape) {
  std::uint64_t numel = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0) throw ValueError(str("negative dimension in shape ", shape_to_string(shape)));
    if (!checked_mul(numel, static_cast<std::uint64_t>(dim), numel) ||
        numel > static_cast<std::uint64_t>(INT64_MAX))
      throw ValueError(str("shape ", shape_to_string(shape), " has too many elements"));
  }
  return static_cast<std::int64_t>(numel);
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Tensor::Tensor() : shape_{0}, strides_{1} {}

Tensor Tensor::allocate(DType dtype, Shape shape, bool zeroed) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  std::uint64_t bytes;
  if (!checked_mul(static_cast<std::uint64_t>(t.numel_), dtype_size(dtype), bytes))
    throw ValueError(str("tensor of shape ", shape_to_string(shape), " is too large"));
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.owner_ = allocate_aligned(bytes, zeroed);
  t.data_ = static_cast<std::byte*>(t.owner_.get());
  t.version_ = std::make_shared<std::atomic<std::uint64_t>>(0);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) { return allocate(dtype, std::move(shape), true); }
Tensor Tensor::empty(DType dtype, Shape shape) { return allocate(dtype, std::move(shape), false); }

Tensor Tensor::empty(DType dtype, Shape shape, Device device) {
  if (device.type == Device::Type::cpu) return empty(dtype, std::move(shape));
  Tensor t;
  t.numel_ = shape_numel(shape);
  std::uint64_t bytes;
  if (!checked_mul(static_cast<std::uint64_t>(t.numel_), dtype_size(dtype), bytes))
    throw ValueError(str("tensor of shape ", shape_to_string(shape), " is too large"));
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.owner_ = cuda_runtime::allocate(device.index, bytes);
  t.data_ = static_cast<std::byte*>(t.owner_.get());
  t.device_ = device;
  t.version_ = std::make_shared<std::atomic<std::uint64_t>>(0);
  return t;
}

Tensor Tensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes) {
  Tensor t = zeros(dtype, std::move(shape));
  if (bytes.size() != t.nbytes())
    throw ValueError(str("tensor of shape ", shape_to_string(t.shape_), " and dtype ",
                         dtype_name(dtype), " needs ", t.nbytes(), " bytes, got ", bytes.size()));
  if (!bytes.empty()) std::memcpy(t.data_, bytes.data(), bytes.size());
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.borrowed_ = true;
  t.version_ = std::make_shared<std::atomic<std::uint64_t>>(0);
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner, Device device) {
  Tensor t = borrow(dtype, std::move(shape), data, std::move(owner));
  t.device_ = device;
  return t;
}

bool Tensor::owns_dense_storage_alone() const {
  return owner_ && owner_.use_count() == 1 && !borrowed_ && data_ == owner_.get() &&
         strides_ == contiguous_strides(shape_);
}

std::int64_t Tensor::size(int axis) const {
  if (axis < 0) axis += dim();
  if (axis < 0 || axis >= dim())
    throw IndexError(str("axis ", axis, " out of range for a ", dim(), "-D tensor"));
  return shape_[static_cast<std::size_t>(axis)];
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::span<const std::byte> Tensor::bytes() const {
  check_on_cpu();
  if (!is_contiguous()) throw ValueError("bytes() needs a contiguous tensor; call contiguous() first");
  return {data_, nbytes()};
}

void Tensor::throw_not_on_cpu() const {
  throw Error(str("expected a cpu tensor, got one on ", device_.str(),
                  ": this operation is not implemented on CUDA yet (copy it with .cpu() first)"));
}

void Tensor::check_type(DType expected) const {
  if (expected != dtype_)
    throw TypeError(str("tensor has dtype ", dtype_name(dtype_), ", accessed as ", dtype_name(expected)));
}

std::int64_t Tensor::offset_of(std::initializer_list<std::int64_t> index) const {
  if (index.size() != shape_.size())
    throw IndexError(str("index has ", index.size(), " coordinates, tensor has ", shape_.size(), " dimensions"));
  std::int64_t offset = 0;
  std::size_t axis = 0;
  for (std::int64_t i : index) {
    if (i < 0 || i >= shape_[axis])
      throw IndexError(str("index ", i, " out of range for axis ", axis, " of size ", shape_[axis]));
    offset += i * strides_[axis];
    ++axis;
  }
  return offset;
}

namespace {
template <class T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // memcpy: mapped data may be misaligned
  return value;
}

double element_as_double(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::BOOL: return load<std::uint8_t>(p) ? 1.0 : 0.0;
    case DType::U8: return load<std::uint8_t>(p);
    case DType::I8: return load<std::int8_t>(p);
    case DType::I16: return load<std::int16_t>(p);
    case DType::U16: return load<std::uint16_t>(p);
    case DType::I32: return load<std::int32_t>(p);
    case DType::U32: return load<std::uint32_t>(p);
    case DType::I64: return static_cast<double>(load<std::int64_t>(p));
    case DType::U64: return static_cast<double>(load<std::uint64_t>(p));
    case DType::F16: return f16_to_f32(load<std::uint16_t>(p));
    case DType::BF16: return bf16_to_f32(load<std::uint16_t>(p));
    case DType::F32: return load<float>(p);
    case DType::F64: return load<double>(p);
  }
  throw TypeError("unknown dtype");
}
}  // namespace

double Tensor::value_as_double(std::int64_t flat_index) const {
  check_on_cpu();
  if (flat_index < 0 || flat_index >= numel_)
    throw IndexError(str("flat index ", flat_index, " out of range for ", numel_, " elements"));
  std::int64_t offset = 0;
  for (std::size_t axis = shape_.size(); axis-- > 0;) {
    offset += (flat_index % shape_[axis]) * strides_[axis];
    flat_index /= shape_[axis];
  }
  return element_as_double(dtype_, data_ + offset * static_cast<std::int64_t>(element_size()));
}

Tensor Tensor::packed_copy() const {
  check_on_cpu();
  Tensor out = empty(dtype_, shape_);
  const auto elem = static_cast<std::int64_t>(element_size());
  if (is_contiguous()) {
    if (nbytes()) std::memcpy(out.data_, data_, nbytes());
    return out;
  }
  if (numel_ == 0) return out;
  // Rows of the last dim in row-major order, the row's start found by a multi-index counter.
  const std::size_t rank = shape_.size();
  const std::int64_t row = shape_[rank - 1], step = strides_[rank - 1] * elem;
  std::vector<std::int64_t> index(rank, 0);
  std::byte* dst = out.data_;
  for (std::int64_t r = 0; r < numel_ / row; ++r) {
    std::int64_t offset = 0;
    for (std::size_t a = 0; a + 1 < rank; ++a) offset += index[a] * strides_[a];
    const std::byte* src = data_ + offset * elem;
    for (std::int64_t i = 0; i < row; ++i, dst += elem) std::memcpy(dst, src + i * step, static_cast<std::size_t>(elem));
    for (std::size_t a = rank - 1; a-- > 0;) {
      if (++index[a] < shape_[a]) break;
      index[a] = 0;
    }
  }
  return out;
}

Tensor Tensor::transpose() const {
  if (dim() != 2) throw ValueError(str("transpose() needs a 2-D tensor, got shape ", shape_to_string(shape_)));
  Tensor view = *this;
  std::swap(view.shape_[0], view.shape_[1]);
  std::swap(view.strides_[0], view.strides_[1]);
  return view;
}

Tensor Tensor::as_strided(Shape shape, std::vector<std::int64_t> strides, std::int64_t offset) const {
  if (shape.size() != strides.size())
    throw ValueError(str("as_strided: shape ", shape_to_string(shape), " and ", strides.size(), " strides"));
  Tensor view = *this;
  view.numel_ = shape_numel(shape);
  view.shape_ = std::move(shape);
  view.strides_ = std::move(strides);
  view.data_ = data_ + offset * static_cast<std::int64_t>(element_size());
  view.autograd_ = nullptr;  // a view made here has no history; the tensor layer adds one
  return view;
}

Tensor Tensor::to_f32() const {
  check_on_cpu();
  Tensor out = zeros(DType::F32, shape_);
  float* dst = reinterpret_cast<float*>(out.data_);
  if (dtype_ == DType::F32 && is_contiguous()) {
    if (nbytes()) std::memcpy(dst, data_, nbytes());
    return out;
  }
  for (std::int64_t i = 0; i < numel_; ++i) dst[i] = static_cast<float>(value_as_double(i));
  return out;
}

}  // namespace kael
