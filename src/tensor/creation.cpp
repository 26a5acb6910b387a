// Creation functions and the process-wide random generator.
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>

#include "kael/tensor/autograd.hpp"
#include "kael/tensor/ops.hpp"
#include "tensor/device_elementwise.hpp"
#include "tensor/seed.hpp"
#include "tensor/strided.hpp"

namespace kael {

using namespace tensor_detail;

Tensor empty(Shape shape, DType dtype) { return Tensor::empty(dtype, std::move(shape)); }
Tensor zeros(Shape shape, DType dtype) { return Tensor::zeros(dtype, std::move(shape)); }
Tensor ones(Shape shape, DType dtype) { return full(std::move(shape), 1, dtype); }

Tensor full(Shape shape, Scalar value, DType dtype) {
  if (value.value == 0.0) return Tensor::zeros(dtype, std::move(shape));
  Tensor t = Tensor::empty(dtype, std::move(shape));
  t.fill_(value.value);
  return t;
}

// The *_like functions keep the tensor's device, as torch's do.
Tensor zeros_like(const Tensor& like) { return full_like(like, 0); }
Tensor ones_like(const Tensor& like) { return full_like(like, 1); }
Tensor full_like(const Tensor& like, Scalar value) {
  if (on_device(like)) return device_full(like.shape(), value.value, like.dtype(), like.device());
  return full(like.shape(), value, like.dtype());
}

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0.0) throw ValueError("arange: step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ValueError(str("arange: start ", start, ", end ", end, " and step ", step, " must be finite"));
  const double count = std::ceil((end - start) / step);
  if (count > 1e12) throw ValueError(str("arange: ", count, " values is too many"));
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  Tensor t = Tensor::empty(dtype, {n});
  const auto elem = static_cast<std::int64_t>(t.element_size());
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = start + static_cast<double>(i) * step;
    if (is_integral(dtype, true)) store(dtype, t.raw_data() + i * elem, static_cast<std::int64_t>(v));
    else store(dtype, t.raw_data() + i * elem, v);
  }
  return t;
}

Tensor arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor linspace(double start, double end, std::int64_t steps, DType dtype) {
  if (steps < 0) throw ValueError(str("linspace: steps must be non-negative, got ", steps));
  Tensor t = Tensor::empty(dtype, {steps});
  const auto elem = static_cast<std::int64_t>(t.element_size());
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Both halves count from their own end, as PyTorch does, so the last value is exactly `end`.
  for (std::int64_t i = 0; i < steps; ++i) {
    const double v = i < steps / 2 ? start + step * static_cast<double>(i)
                                   : end - step * static_cast<double>(steps - 1 - i);
    store(dtype, t.raw_data() + i * elem, v);
  }
  return t;
}

Tensor eye(std::int64_t n, DType dtype) {
  Tensor t = Tensor::zeros(dtype, {n, n});
  const auto elem = static_cast<std::int64_t>(t.element_size());
  for (std::int64_t i = 0; i < n; ++i) store(dtype, t.raw_data() + (i * n + i) * elem, 1);
  return t;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, Shape shape) {
  const std::int64_t n = shape_numel(shape);
  if (n != static_cast<std::int64_t>(values.size()))
    throw ValueError(str("from_vector: ", values.size(), " values do not fill shape ", shape_to_string(shape)));
  Tensor t = Tensor::empty(dtype_of<T>(), std::move(shape));
  T* out = t.data<T>();
  for (std::int64_t i = 0; i < n; ++i) out[i] = values[static_cast<std::size_t>(i)];
  return t;
}

template Tensor from_vector(const std::vector<float>&, Shape);
template Tensor from_vector(const std::vector<double>&, Shape);
template Tensor from_vector(const std::vector<std::int64_t>&, Shape);
template Tensor from_vector(const std::vector<std::int32_t>&, Shape);
template Tensor from_vector(const std::vector<std::uint8_t>&, Shape);

template <>
Tensor from_vector(const std::vector<bool>& values, Shape shape) {
  std::vector<std::uint8_t> bytes(values.begin(), values.end());
  Tensor t = from_vector(bytes, std::move(shape));
  return Tensor::from_bytes(DType::BOOL, t.shape(), t.bytes());
}

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  Tensor t = from_vector(std::vector<double>(values), {static_cast<std::int64_t>(values.size())});
  return dtype == DType::F64 ? t : t.to(dtype);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> values;
  const std::size_t width = rows.size() ? rows.begin()->size() : 0;
  for (const auto& row : rows) {
    if (row.size() != width)
      throw ValueError(str("tensor: rows of different lengths (", width, " and ", row.size(), ")"));
    values.insert(values.end(), row.begin(), row.end());
  }
  Tensor t = from_vector(values, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(width)});
  return dtype == DType::F64 ? t : t.to(dtype);
}

// --- random ---

namespace {

struct Generator {
  std::mutex mutex;
  std::mt19937_64 engine{0x6b61656cULL};  // a fixed default seed: runs are reproducible without manual_seed
};

Generator& generator() {
  static Generator g;
  return g;
}

// Uniform in [0, 1) with 53 random bits.
double uniform(std::mt19937_64& engine) { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }

template <class F>
Tensor fill_random(Shape shape, DType dtype, F draw) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  const auto elem = static_cast<std::int64_t>(t.element_size());
  Generator& g = generator();
  const std::lock_guard lock(g.mutex);
  for (std::int64_t i = 0; i < t.numel(); ++i) store(dtype, t.raw_data() + i * elem, draw(g.engine));
  return t;
}

void require_floating(const char* op, DType dtype) {
  if (!is_floating(dtype)) throw TypeError(str(op, ": dtype must be floating, got ", dtype_name(dtype)));
}

}  // namespace

void manual_seed(std::uint64_t seed) {
  Generator& g = generator();
  const std::lock_guard lock(g.mutex);
  g.engine.seed(seed);
}

Tensor rand(Shape shape, DType dtype) {
  require_floating("rand", dtype);
  return fill_random(std::move(shape), dtype, [](std::mt19937_64& e) { return uniform(e); });
}

Tensor randn(Shape shape, DType dtype) {
  require_floating("randn", dtype);
  // Box-Muller, one normal per pair of uniforms, so each element costs the same two draws.
  return fill_random(std::move(shape), dtype, [](std::mt19937_64& e) {
    const double u1 = 1.0 - uniform(e);  // (0, 1]: log stays finite
    const double u2 = uniform(e);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

namespace {

// In [0, span), every value equally likely (rejection).
std::uint64_t below(std::mt19937_64& engine, std::uint64_t span) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  std::uint64_t r;
  do r = engine(); while (r >= limit);
  return r % span;
}

}  // namespace

Tensor randint(std::int64_t low, std::int64_t high, Shape shape, DType dtype) {
  if (high <= low) throw ValueError(str("randint: high (", high, ") must be greater than low (", low, ")"));
  const auto span = static_cast<std::uint64_t>(high - low);
  return fill_random(std::move(shape), dtype,
                     [low, span](std::mt19937_64& e) { return low + static_cast<std::int64_t>(below(e, span)); });
}

std::uint64_t tensor_detail::draw_seed() {
  Generator& g = generator();
  const std::lock_guard lock(g.mutex);
  return below(g.engine, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
}

Tensor randperm(std::int64_t n, DType dtype) {
  if (n < 0) throw ValueError(str("randperm: n must be non-negative, got ", n));
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  {
    Generator& g = generator();
    const std::lock_guard lock(g.mutex);
    for (std::int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates, the index drawn by rejection
      const auto span = static_cast<std::uint64_t>(i + 1);
      const std::uint64_t limit = UINT64_MAX - UINT64_MAX % span;
      std::uint64_t r;
      do r = g.engine(); while (r >= limit);
      std::swap(values[static_cast<std::size_t>(i)], values[static_cast<std::size_t>(r % span)]);
    }
  }
  return from_vector(values, {n}).to(dtype);
}

Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement) {
  if (probs.dim() != 1 && probs.dim() != 2)
    throw ValueError(str("multinomial: probs must be 1-D or 2-D, got shape ", shape_to_string(probs.shape())));
  if (!is_floating(probs.dtype())) throw TypeError(str("multinomial: probs must be floating, got ", dtype_name(probs.dtype())));
  const Tensor weights = probs.detach().to(DType::F64).contiguous().reshape({-1, probs.shape().back()});
  const std::int64_t rows = weights.shape()[0], classes = weights.shape()[1];
  if (num_samples <= 0) throw ValueError(str("multinomial: num_samples must be positive, got ", num_samples));
  if (!replacement && num_samples > classes)
    throw ValueError(str("multinomial: cannot draw ", num_samples, " samples without replacement from ", classes, " classes"));
  const double* w = weights.data<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double total = 0;
    std::int64_t nonzero = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const double x = w[r * classes + c];
      if (!std::isfinite(x) || x < 0) throw ValueError("multinomial: probs must be finite and non-negative (inf, nan or < 0 found)");
      total += x;
      nonzero += x > 0;
    }
    if (total <= 0) throw ValueError(str("multinomial: row ", r, " of probs sums to zero"));
    if (!replacement && nonzero < num_samples)
      throw ValueError(str("multinomial: row ", r, " has ", nonzero, " nonzero weights, fewer than the ", num_samples,
                           " samples asked for without replacement"));
  }
  Tensor out = Tensor::empty(DType::I64, {rows, num_samples});
  std::int64_t* o = out.data<std::int64_t>();
  std::vector<double> row(static_cast<std::size_t>(classes));
  Generator& g = generator();
  const std::lock_guard lock(g.mutex);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy(w + r * classes, w + (r + 1) * classes, row.begin());
    double total = std::accumulate(row.begin(), row.end(), 0.0);
    for (std::int64_t s = 0; s < num_samples; ++s) {
      // The first class whose running sum passes u * total (skipping zero weights, which
      // rounding could otherwise land on).
      const double target = uniform(g.engine) * total;
      double running = 0;
      std::int64_t pick = -1;
      for (std::int64_t c = 0; c < classes; ++c) {
        if (row[static_cast<std::size_t>(c)] <= 0) continue;
        pick = c;
        running += row[static_cast<std::size_t>(c)];
        if (running > target) break;
      }
      o[r * num_samples + s] = pick;
      if (!replacement) {  // drawn once: its weight leaves the row
        total -= row[static_cast<std::size_t>(pick)];
        row[static_cast<std::size_t>(pick)] = 0;
        if (total <= 0) total = std::accumulate(row.begin(), row.end(), 0.0);
      }
    }
  }
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

Tensor& normal_(Tensor& t, double mean, double std) {
  tensor_detail::check_in_place(t, "normal_");
  if (std < 0) throw ValueError(str("normal_: std must be non-negative, got ", std));
  const Tensor draws = randn(t.shape(), DType::F64);
  const autograd::NoGradGuard no_grad;
  return t.copy_(add(mul(draws, std), mean));
}

Tensor& uniform_(Tensor& t, double from, double to) {
  tensor_detail::check_in_place(t, "uniform_");
  if (from > to) throw ValueError(str("uniform_: expects from <= to, got from=", from, " to=", to));
  const Tensor draws = rand(t.shape(), DType::F64);
  const autograd::NoGradGuard no_grad;
  return t.copy_(add(mul(draws, to - from), from));
}

}  // namespace kael
