// Printing (PyTorch's nested-bracket layout) and allclose.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/device_copy.hpp"
#include "kael/tensor/ops.hpp"

namespace kael {

namespace {

constexpr std::int64_t kSummaryThreshold = 1000;  // past this, only the 3 first and last per dim
constexpr std::int64_t kEdgeItems = 3;

void print_value(std::ostream& out, const Tensor& t, std::int64_t flat) {
  const double v = t.value_as_double(flat);
  if (t.dtype() == DType::BOOL) out << (v != 0.0 ? "True" : "False");
  else if (!is_floating(t.dtype())) out << static_cast<std::int64_t>(v);
  else out << std::setprecision(4) << std::fixed << v << std::defaultfloat;
}

void print_dim(std::ostream& out, const Tensor& t, std::size_t dim, std::int64_t flat, std::int64_t block, bool summarize,
               int indent) {
  const std::int64_t n = t.shape()[dim];
  const std::int64_t inner = block / std::max<std::int64_t>(n, 1);
  out << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      out << "...";
      i = n - kEdgeItems - 1;
      out << (dim + 1 == t.shape().size() ? ", " : ",\n" + std::string(static_cast<std::size_t>(indent + 1), ' '));
      continue;
    }
    if (dim + 1 == t.shape().size()) print_value(out, t, flat + i);
    else print_dim(out, t, dim + 1, flat + i * inner, inner, summarize, indent + 1);
    if (i + 1 < n) out << (dim + 1 == t.shape().size() ? ", " : ",\n" + std::string(static_cast<std::size_t>(indent + 1), ' '));
  }
  out << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  out << "tensor(";
  if (!t.defined()) return out << "undefined)";
  if (t.device().type != Device::Type::cpu) {  // the values from a host copy, the device named as torch does
    std::ostringstream host;
    host << copy_to_device(t, Device::cpu());
    const std::string text = host.str();
    return out << text.substr(7, text.size() - 8) << ", device='" << t.device().str() << "'"
               << (t.requires_grad() ? ", requires_grad=True" : "") << ')';
  }
  if (t.dim() == 0) print_value(out, t, 0);
  else print_dim(out, t, 0, 0, t.numel(), t.numel() > kSummaryThreshold, 7);
  out << ", shape=" << shape_to_string(t.shape()) << ", dtype=" << dtype_name(t.dtype());
  if (t.requires_grad()) out << ", requires_grad=True";
  return out << ')';
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "allclose");
  const Tensor ea = a.detach().expand(shape), eb = b.detach().expand(shape);
  for (std::int64_t i = 0; i < shape_numel(shape); ++i) {
    const double x = ea.value_as_double(i), y = eb.value_as_double(i);
    if (std::isnan(x) || std::isnan(y) || std::abs(x - y) > atol + rtol * std::abs(y)) return false;
  }
  return true;
}

}  // namespace kael
