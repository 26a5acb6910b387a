// Tensor's members from the tensor layer: views (sharing the bytes, with their gradients),
// conversions, element access and autograd entry points.
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/device_copy.hpp"
#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/backward.hpp"
#include "tensor/device_elementwise.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

namespace {

// A view of `base` with its gradient flowing back through `backward` (a view of g, sum_to, or
// a named rule of tensor/backward.hpp); its node is marked as a view's, which in-place writes
// check (check_in_place).
Tensor view_of(const char* op, const Tensor& base, Shape shape, std::vector<std::int64_t> strides, std::int64_t offset,
               std::function<Tensor(const Tensor&)> backward, autograd::AddIntoFn add_into = {}) {
  Tensor v = base.as_strided(std::move(shape), std::move(strides), offset);
  if (!autograd::any_requires_grad({&base})) return v;
  return autograd::record(
      op, std::move(v), {&base},
      [backward = std::move(backward)](const Tensor& g) { return std::vector<Tensor>{backward(g)}; }, /*view=*/true,
      std::move(add_into));
}

// torch's computeStride: the strides that let `shape` view a tensor of (old_shape,
// old_strides) without a copy, or nullopt. The old dims split into chunks that are contiguous
// among themselves; each chunk must be covered by whole new dims.
std::optional<std::vector<std::int64_t>> view_strides(const Shape& old_shape, const std::vector<std::int64_t>& old_strides,
                                                      const Shape& shape, std::int64_t numel) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  if (numel == 0 || old_shape.empty()) {
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= std::max<std::int64_t>(shape[i], 1);
    }
    return strides;
  }
  auto view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (auto tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    const auto d = static_cast<std::size_t>(tensor_d);
    tensor_numel *= old_shape[d];
    if (tensor_d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[static_cast<std::size_t>(view_d)] == 1)) {
        strides[static_cast<std::size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= shape[static_cast<std::size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

// The shape with its one -1 (if any) inferred from numel; ValueError naming `op` otherwise.
Shape inferred_shape(Shape shape, const Shape& from, std::int64_t numel, const char* op) {
  std::int64_t known = 1;
  int inferred = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) throw ValueError(str(op, ": only one dim can be -1, got ", shape_to_string(shape)));
      inferred = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      throw ValueError(str(op, ": shape ", shape_to_string(shape), " is invalid for input of shape ", shape_to_string(from)));
    shape[static_cast<std::size_t>(inferred)] = numel / known;
  }
  if (shape_numel(shape) != numel)
    throw ValueError(str(op, ": shape ", shape_to_string(shape), " is invalid for input of shape ", shape_to_string(from),
                         " (", numel, " elements)"));
  return shape;
}

// Writes `source`, broadcast to out's shape, into `out` in out's dtype: through double when
// either side is F64, float when either is another float (so an integer becomes a float in
// one correctly rounded step), int64 otherwise. The one conversion of to() and copy_().
void convert_into(Tensor& out, const Tensor& source) {
  if (on_device(out) && !on_device(source) && source.dim() == 0) {  // fill_: a CPU scalar goes over
    device_convert_into(out, source.to(out.device()));
    return;
  }
  if (on_device(out, source) && out.device() == source.device()) {
    device_convert_into(out, source);
    return;
  }  // a device tensor beside a CPU one: the CPU's accessors below refuse it
  const std::vector<std::int64_t> strides[2] = {broadcast_byte_strides(out, out.shape()),
                                                broadcast_byte_strides(source, out.shape())};
  const Layout<2> layout = coalesce(out.shape(), strides);
  const std::int64_t step_o = layout.shape.empty() ? 0 : layout.strides[0].back();
  const std::int64_t step_s = layout.shape.empty() ? 0 : layout.strides[1].back();
  const DType to = out.dtype(), from = source.dtype();
  std::byte* dst = out.raw_data();
  const std::byte* src = source.raw_data();
  const auto elem = static_cast<std::int64_t>(out.element_size());
  if (to == from) {  // a copy of the bytes, whole rows at once where both sides are dense
    const auto copy = [&]<class Word>() {
      parallel_walk(layout, out.numel(), 1, [&](const std::int64_t* o, std::int64_t count) {
        if (step_o == elem && step_s == elem) {
          std::memcpy(dst + o[0], src + o[1], static_cast<std::size_t>(count * elem));
          return;
        }
        for (std::int64_t i = 0; i < count; ++i)
          write_raw(dst + o[0] + i * step_o, read_raw<Word>(src + o[1] + i * step_s));
      });
    };
    switch (elem) {
      case 1: copy.template operator()<std::uint8_t>(); break;
      case 2: copy.template operator()<std::uint16_t>(); break;
      case 4: copy.template operator()<std::uint32_t>(); break;
      default: copy.template operator()<std::uint64_t>(); break;
    }
    return;
  }
  const DType via = !is_floating(to) && !is_floating(from)       ? DType::I64
                    : to == DType::F64 || from == DType::F64 ? DType::F64
                                                             : DType::F32;
  dispatch(via, [&]<class C>() {
    parallel_walk(layout, out.numel(), 1, [&](const std::int64_t* o, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i) store(to, dst + o[0] + i * step_o, load<C>(from, src + o[1] + i * step_s));
    });
  });
}

}  // namespace

namespace tensor_detail {
Tensor dense_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.dtype(), t.shape(), t.device());
  convert_into(out, t);
  return out;
}
}  // namespace tensor_detail

Tensor Tensor::view(Shape shape) const {
  shape = inferred_shape(std::move(shape), shape_, numel_, "view");
  auto strides = view_strides(shape_, strides_, shape, numel_);
  if (!strides)
    throw ValueError(str("view: size ", shape_to_string(shape), " is not compatible with the input's size ",
                         shape_to_string(shape_), " and strides ", shape_to_string(strides_),
                         " (at least one dim spans across two contiguous subspaces); use reshape() instead"));
  const Shape from = shape_;
  return view_of("view", *this, std::move(shape), std::move(*strides), 0, [from](const Tensor& g) { return g.reshape(from); });
}

Tensor Tensor::reshape(Shape shape) const {
  shape = inferred_shape(std::move(shape), shape_, numel_, "reshape");
  if (view_strides(shape_, strides_, shape, numel_)) return view(std::move(shape));
  const Tensor copy = autograd::record("reshape", dense_copy(*this), {this},
                                       [](const Tensor& g) { return std::vector<Tensor>{identity_backward(g)}; });
  return copy.view(std::move(shape));
}

Tensor Tensor::flatten() const { return reshape({numel_}); }

Tensor Tensor::transpose(int dim0, int dim1) const {
  const int a = wrap_dim(dim0, dim(), "transpose"), b = wrap_dim(dim1, dim(), "transpose");
  std::vector<int> order(static_cast<std::size_t>(dim()));
  std::iota(order.begin(), order.end(), 0);
  if (dim() > 0) std::swap(order[static_cast<std::size_t>(a)], order[static_cast<std::size_t>(b)]);
  return permute(order);
}

Tensor Tensor::T() const {
  std::vector<int> order(static_cast<std::size_t>(dim()));
  std::iota(order.rbegin(), order.rend(), 0);
  return permute(order);
}

Tensor Tensor::permute(std::vector<int> dims) const {
  if (static_cast<int>(dims.size()) != dim())
    throw ValueError(str("permute: ", dims.size(), " dims given for a tensor of shape ", shape_to_string(shape_)));
  std::vector<bool> used(dims.size(), false);
  Shape shape(dims.size());
  std::vector<std::int64_t> strides(dims.size());
  std::vector<int> inverse(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int d = wrap_dim(dims[i], dim(), "permute");
    if (used[static_cast<std::size_t>(d)]) throw ValueError(str("permute: dim ", d, " repeated"));
    used[static_cast<std::size_t>(d)] = true;
    shape[i] = shape_[static_cast<std::size_t>(d)];
    strides[i] = strides_[static_cast<std::size_t>(d)];
    inverse[static_cast<std::size_t>(d)] = static_cast<int>(i);
  }
  return view_of("permute", *this, std::move(shape), std::move(strides), 0,
                 [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::unsqueeze(int d) const {
  const int at = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = shape_;
  std::vector<std::int64_t> strides = strides_;
  const std::int64_t stride = at < dim() ? strides_[static_cast<std::size_t>(at)] * shape_[static_cast<std::size_t>(at)] : 1;
  shape.insert(shape.begin() + at, 1);
  strides.insert(strides.begin() + at, stride);
  return view_of("unsqueeze", *this, std::move(shape), std::move(strides), 0, [at](const Tensor& g) { return g.squeeze(at); });
}

Tensor Tensor::squeeze() const {
  Shape shape;
  std::vector<std::int64_t> strides;
  for (std::size_t i = 0; i < shape_.size(); ++i)
    if (shape_[i] != 1) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  const Shape from = shape_;
  return view_of("squeeze", *this, std::move(shape), std::move(strides), 0, [from](const Tensor& g) { return g.reshape(from); });
}

Tensor Tensor::squeeze(int d) const {
  const int at = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape_[static_cast<std::size_t>(at)] != 1) return view_of("squeeze", *this, shape_, strides_, 0, [](const Tensor& g) { return g; });
  Shape shape = shape_;
  std::vector<std::int64_t> strides = strides_;
  shape.erase(shape.begin() + at);
  strides.erase(strides.begin() + at);
  return view_of("squeeze", *this, std::move(shape), std::move(strides), 0, [at](const Tensor& g) { return g.unsqueeze(at); });
}

Tensor Tensor::select(int d, std::int64_t index) const {
  if (dim() == 0) throw IndexError("select: cannot select from a 0-D tensor");
  const int at = wrap_dim(d, dim(), "select");
  const std::int64_t size = shape_[static_cast<std::size_t>(at)];
  if (index < -size || index >= size)
    throw IndexError(str("select: index ", index, " out of range for dim ", at, " of size ", size, " (shape ",
                         shape_to_string(shape_), ")"));
  if (index < 0) index += size;
  Shape shape = shape_;
  std::vector<std::int64_t> strides = strides_;
  const std::int64_t offset = index * strides_[static_cast<std::size_t>(at)];
  shape.erase(shape.begin() + at);
  strides.erase(strides.begin() + at);
  const Shape from = shape_;
  return view_of("select", *this, std::move(shape), std::move(strides), offset,
                 [from, at, index](const Tensor& g) { return select_backward(g, from, at, index); });
}

Tensor tensor_detail::select_backward(const Tensor& g, const Shape& input_shape, int dim, std::int64_t index) {
  Tensor full = Tensor::zeros(g.dtype(), input_shape);
  full.select(dim, index).copy_(g);
  return full;
}

Tensor Tensor::slice(int d, std::int64_t start, std::int64_t end, std::int64_t step) const {
  if (dim() == 0) throw IndexError("slice: cannot slice a 0-D tensor");
  if (step <= 0) throw ValueError(str("slice: step must be positive, got ", step));
  const int at = wrap_dim(d, dim(), "slice");
  const std::int64_t size = shape_[static_cast<std::size_t>(at)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<std::int64_t>(start, 0, size);
  end = std::clamp<std::int64_t>(end, start, size);
  Shape shape = shape_;
  std::vector<std::int64_t> strides = strides_;
  shape[static_cast<std::size_t>(at)] = (end - start + step - 1) / step;
  strides[static_cast<std::size_t>(at)] *= step;
  const std::int64_t offset = start * strides_[static_cast<std::size_t>(at)];
  const Shape from = shape_;
  return view_of(
      "slice", *this, std::move(shape), std::move(strides), offset,
      [from, at, start, end, step](const Tensor& g) { return slice_backward(g, from, at, start, end, step); },
      [from, at, start, end, step](Tensor& base_grad, const Tensor& g) {
        // Only into a gradient no other tensor sees; the sums are those of adding
        // slice_backward's result (x + 0 is x).
        if (!base_grad.owns_dense_storage_alone() || base_grad.shape() != from || base_grad.dtype() != g.dtype() ||
            !(base_grad.device() == g.device()) || base_grad.device().type != Device::Type::cpu)
          return false;
        Tensor part = base_grad.slice(at, start, end, step);
        part.copy_(add(part, g));
        return true;
      });
}

Tensor tensor_detail::slice_backward(const Tensor& g, const Shape& input_shape, int dim, std::int64_t start,
                                     std::int64_t end, std::int64_t step) {
  Tensor full = Tensor::zeros(g.dtype(), input_shape);
  full.slice(dim, start, end, step).copy_(g);
  return full;
}

Tensor Tensor::narrow(int d, std::int64_t start, std::int64_t length) const {
  const int at = wrap_dim(d, dim(), "narrow");
  const std::int64_t size = dim() ? shape_[static_cast<std::size_t>(at)] : 0;
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size)
    throw IndexError(str("narrow: start ", start, " and length ", length, " out of range for dim ", at, " of size ", size));
  return slice(at, start, start + length);
}

Tensor Tensor::expand(Shape shape) const {
  if (shape.size() < shape_.size())
    throw ValueError(str("expand: shape ", shape_to_string(shape), " has fewer dims than the tensor's ",
                         shape_to_string(shape_)));
  const std::size_t lead = shape.size() - shape_.size();
  std::vector<std::int64_t> strides(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) throw ValueError(str("expand: -1 is not allowed in a new leading dim, got ", shape_to_string(shape)));
      continue;
    }
    const std::int64_t have = shape_[i - lead];
    if (shape[i] == -1) shape[i] = have;
    if (have == shape[i]) strides[i] = strides_[i - lead];
    else if (have != 1)
      throw ValueError(str("expand: the tensor of shape ", shape_to_string(shape_), " cannot be expanded to ",
                           shape_to_string(shape), " (dim ", i, ")"));
  }
  const Shape from = shape_;
  return view_of("expand", *this, std::move(shape), std::move(strides), 0, [from](const Tensor& g) { return sum_to(g, from); });
}

Tensor Tensor::detach() const {
  Tensor t = *this;
  t.autograd_ = nullptr;
  return t;
}

Tensor Tensor::clone() const {
  return autograd::record("clone", dense_copy(*this), {this},
                          [](const Tensor& g) { return std::vector<Tensor>{identity_backward(g)}; });
}

Tensor tensor_detail::identity_backward(const Tensor& g) { return g; }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = Tensor::empty(dtype, shape_, device_);
  convert_into(out, *this);
  const DType from = dtype_;
  if (!is_floating(dtype) || !requires_grad() || !autograd::grad_mode_enabled()) return out;
  return autograd::record("to", std::move(out), {this},
                          [from](const Tensor& g) { return std::vector<Tensor>{to_backward(g, from)}; });
}

Tensor tensor_detail::to_backward(const Tensor& g, DType from) { return g.to(from); }

Tensor Tensor::to(Device device) const {
  check_device_available(device);
  if (device == device_) return *this;
  Tensor out = copy_to_device(*this, device);
  const Device from = device_;
  if (!requires_grad() || !autograd::grad_mode_enabled()) return out;
  return autograd::record("to", std::move(out), {this},
                          [from](const Tensor& g) { return std::vector<Tensor>{to_backward(g, from)}; });
}

Tensor tensor_detail::to_backward(const Tensor& g, Device from) { return g.to(from); }

Tensor Tensor::to(std::string_view device) const { return to(parse_device(device)); }

template <class T>
T Tensor::item() const {
  if (numel_ != 1)
    throw ValueError(str("item: a tensor with ", numel_, " elements (shape ", shape_to_string(shape_),
                         ") cannot be converted to a scalar"));
  if (device_.type != Device::Type::cpu) return copy_to_device(*this, Device::cpu()).item<T>();
  if constexpr (std::is_same_v<T, bool>) return load<double>(dtype_, data_) != 0.0;
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(load<double>(dtype_, data_));
  else return static_cast<T>(is_floating(dtype_) ? static_cast<std::int64_t>(load<double>(dtype_, data_))
                                                : load<std::int64_t>(dtype_, data_));
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  if (dtype_of<T>() != dtype_)
    throw TypeError(str("to_vector: the tensor has dtype ", dtype_name(dtype_), ", asked for ", dtype_name(dtype_of<T>())));
  if (device_.type != Device::Type::cpu) return copy_to_device(*this, Device::cpu()).to_vector<T>();
  const Tensor flat = dense(*this);
  const T* p = reinterpret_cast<const T*>(flat.raw_data());
  return std::vector<T>(p, p + numel_);
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template bool Tensor::item<bool>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::uint8_t> Tensor::to_vector<std::uint8_t>() const;

template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  if (dtype_ != DType::BOOL) throw TypeError(str("to_vector: the tensor has dtype ", dtype_name(dtype_), ", asked for BOOL"));
  if (device_.type != Device::Type::cpu) return copy_to_device(*this, Device::cpu()).to_vector<bool>();
  std::vector<bool> out(static_cast<std::size_t>(numel_));
  for (std::int64_t i = 0; i < numel_; ++i) out[static_cast<std::size_t>(i)] = value_as_double(i) != 0.0;
  return out;
}

// --- autograd ---

bool Tensor::requires_grad() const { return autograd_ && autograd_->requires_grad.load(std::memory_order_relaxed); }

Tensor& Tensor::requires_grad_(bool enabled) {
  if (autograd_ && autograd_->grad_fn) {
    if (!enabled)
      throw ValueError("requires_grad_(false) on a tensor that is not a leaf; use detach() for one without history");
    return *this;
  }
  if (enabled && !is_floating(dtype_))
    throw TypeError(str("requires_grad_: only floating tensors can require a gradient, got ", dtype_name(dtype_)));
  if (!autograd_) autograd_ = std::make_shared<autograd::Meta>();
  autograd_->requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const { return !autograd_ || !autograd_->grad_fn; }

Tensor Tensor::grad() const { return autograd_ ? autograd_->grad() : Tensor(); }

void Tensor::zero_grad() {
  if (autograd_) autograd_->set_grad(Tensor());
}

void Tensor::set_grad(const Tensor& grad) {
  if (!grad.defined()) {
    zero_grad();
    return;
  }
  // torch's rules for `t.grad = g`, except that torch lets an integer tensor hold a gradient of
  // its own dtype: kael's gradients are floating only, as requires_grad_ is.
  if (!is_floating(dtype_))
    throw TypeError(str("grad: only floating tensors can hold a gradient, this one is ", dtype_name(dtype_)));
  if (grad.dtype() != dtype_)
    throw TypeError(str("grad: assigned a gradient of dtype ", dtype_name(grad.dtype()), " to a tensor of dtype ",
                        dtype_name(dtype_), "; the gradient must have the tensor's dtype"));
  if (grad.shape() != shape_)
    throw ValueError(str("grad: assigned a gradient of shape ", shape_to_string(grad.shape()), " to a tensor of shape ",
                         shape_to_string(shape_)));
  if (!autograd_) autograd_ = std::make_shared<autograd::Meta>();
  autograd_->set_grad(grad.detach());
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  if (!requires_grad()) throw ValueError("backward: the tensor does not require a gradient and has no grad_fn");
  Tensor seed;
  if (!gradient.defined()) {
    if (numel_ != 1)
      throw ValueError(str("backward: the gradient can be implied only for a one-element output, got shape ",
                           shape_to_string(shape_), "; pass a gradient of that shape"));
    seed = ones(shape_, dtype_);
  } else {
    if (gradient.shape() != shape_)
      throw ValueError(str("backward: the gradient has shape ", shape_to_string(gradient.shape()), ", the tensor ",
                           shape_to_string(shape_)));
    seed = gradient.detach().to(dtype_);
  }
  autograd::run_backward(*this, seed, retain_graph);
}

// --- members that forward to the free functions ---

Tensor Tensor::sum() const { return kael::sum(*this); }
Tensor Tensor::sum(std::vector<int> dims, bool keepdim) const { return kael::sum(*this, std::move(dims), keepdim); }
Tensor Tensor::mean() const { return kael::mean(*this); }
Tensor Tensor::mean(std::vector<int> dims, bool keepdim) const { return kael::mean(*this, std::move(dims), keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return kael::matmul(*this, other); }
Tensor Tensor::exp() const { return kael::exp(*this); }
Tensor Tensor::log() const { return kael::log(*this); }
Tensor Tensor::pow(double exponent) const { return kael::pow(*this, exponent); }

// --- in place ---
//
// torch's rules under grad mode: a leaf that requires a gradient cannot be written in place
// (the write would be invisible to its gradient); any other tensor can. Its values are then
// those of the out-of-place op, and this handle takes that op's history, whose node reads the
// tensor's history from before the write (Python's tensor object is this handle). The old
// history is marked as written: a C++ copy made before, or a view taken before, keeps it, and
// its backward is then an error naming the op (torch rebases such a view's history instead).
// Writing a view whose base requires a gradient is refused: the base's history could not see
// the write (Python's index assignment writes the base).

namespace {

// After an in-place write that records history: `t` takes `result`'s, and its old state is
// marked, so that views taken before the write (and C++ copies of t) refuse their backward.
void take_history(Tensor& t, const Tensor& result, const char* op) {
  if (const auto& old = t.autograd_meta()) old->mark_written_in_place(op);
  t.set_autograd_meta(result.autograd_meta());
}

}  // namespace

namespace tensor_detail {

void check_in_place(const Tensor& t, const char* op) {
  if (!autograd::grad_mode_enabled() || !t.requires_grad()) return;
  if (t.is_leaf())
    throw ValueError(str(op, ": a leaf tensor that requires a gradient cannot be modified in place; wrap the update in "
                         "NoGradGuard (kael.no_grad() in Python) or use the out-of-place op"));
  if (t.autograd_meta()->grad_fn->view)
    throw ValueError(str(op, ": cannot modify in place a view (made by ", t.autograd_meta()->grad_fn->name,
                         ") of a tensor that requires a gradient; write the base tensor (in Python t[index] = value) or "
                         "use the out-of-place op"));
}

Tensor& assign_in_place(Tensor& t, const char* op, const std::function<Tensor(const Tensor&)>& compute) {
  check_in_place(t, op);
  const Tensor result = compute(autograd::any_requires_grad({&t}) ? t.clone() : t);
  if (result.shape() != t.shape())
    throw ValueError(str(op, ": the result has shape ", shape_to_string(result.shape()), ", the tensor written ",
                         shape_to_string(t.shape()), " (an in-place op cannot change the shape)"));
  convert_into(t, result);
  t.bump_version();
  if (autograd::grad_mode_enabled() && result.requires_grad()) take_history(t, result, op);
  return t;
}

}  // namespace tensor_detail

Tensor& Tensor::copy_(const Tensor& source) {
  check_in_place(*this, "copy_");
  const Shape shape = broadcast_shapes(shape_, source.shape(), "copy_");
  if (shape != shape_)
    throw ValueError(str("copy_: source of shape ", shape_to_string(source.shape()), " does not broadcast to ",
                         shape_to_string(shape_)));
  const bool history = autograd::any_requires_grad({this, &source});
  convert_into(*this, source);
  bump_version();
  if (history) {
    const DType from = source.dtype();
    const Shape source_shape = source.shape();
    const Tensor result = autograd::record("copy_", detach(), {this, &source}, [from, source_shape](const Tensor& g) {
      return copy_backward(g, source_shape, from);
    });
    take_history(*this, result, "copy_");
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_in_place(*this, "fill_");
  const DType via = is_floating(dtype_) ? DType::F64 : DType::I64;
  Tensor scalar = Tensor::empty(via, {});
  if (via == DType::F64) store(via, scalar.raw_data(), value);
  else store(via, scalar.raw_data(), static_cast<std::int64_t>(value));
  convert_into(*this, scalar);
  bump_version();
  if (autograd::any_requires_grad({this}))
    take_history(*this,
                 autograd::record("fill_", detach(), {this},
                                  [](const Tensor& g) { return std::vector<Tensor>{fill_backward(g)}; }),
                 "fill_");
  return *this;
}

// d(result)/d(old self) is 0 (every value replaced); the source gets g summed to its shape.
std::vector<Tensor> tensor_detail::copy_backward(const Tensor& g, const Shape& source_shape, DType source_dtype) {
  return {Tensor(), sum_to(g, source_shape).to(source_dtype)};
}

// The old values no longer count: a zero gradient, left undefined.
Tensor tensor_detail::fill_backward(const Tensor&) { return Tensor(); }

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return assign_in_place(*this, "add_", [&](const Tensor& self) { return add(self, other, alpha); });
}
Tensor& Tensor::mul_(double value) {
  return assign_in_place(*this, "mul_", [&](const Tensor& self) { return mul(self, value); });
}
Tensor& Tensor::operator+=(const Tensor& other) {
  return assign_in_place(*this, "add_", [&](const Tensor& self) { return add(self, other); });
}
Tensor& Tensor::operator-=(const Tensor& other) {
  return assign_in_place(*this, "sub_", [&](const Tensor& self) { return sub(self, other); });
}
Tensor& Tensor::operator*=(const Tensor& other) {
  return assign_in_place(*this, "mul_", [&](const Tensor& self) { return mul(self, other); });
}
Tensor& Tensor::operator/=(const Tensor& other) {
  return assign_in_place(*this, "div_", [&](const Tensor& self) { return div(self, other); });
}
Tensor& Tensor::operator+=(double value) {
  return assign_in_place(*this, "add_", [&](const Tensor& self) { return add(self, value); });
}
Tensor& Tensor::operator-=(double value) {
  return assign_in_place(*this, "sub_", [&](const Tensor& self) { return sub(self, value); });
}
Tensor& Tensor::operator*=(double value) {
  return assign_in_place(*this, "mul_", [&](const Tensor& self) { return mul(self, value); });
}
Tensor& Tensor::operator/=(double value) {
  return assign_in_place(*this, "div_", [&](const Tensor& self) { return div(self, value); });
}

}  // namespace kael
