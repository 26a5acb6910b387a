#include "optim/checks.hpp"

#include <cmath>
#include <sstream>

#include "kael/core/error.hpp"
#include "kael/tensor/ops.hpp"

namespace kael::optim::detail {

namespace {
std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}
}  // namespace

void check_non_negative(const std::string& optimizer, const char* what, double value) {
  if (!(value >= 0.0) || std::isinf(value))  // NaN fails the comparison
    throw ValueError(optimizer + ": invalid " + what + ": " + number(value));
}

void check_beta(const std::string& optimizer, int index, double beta) {
  if (!(beta >= 0.0 && beta < 1.0))
    throw ValueError(optimizer + ": invalid beta parameter at index " + std::to_string(index) + ": " + number(beta));
}

double scalar_value(const std::string& optimizer, const std::map<std::string, Tensor>& values,
                    const std::string& key, std::size_t group) {
  const std::string name = "param_groups." + std::to_string(group) + "." + key;
  const auto it = values.find(key);
  if (it == values.end()) throw ValueError(optimizer + ".load_state_dict: the state has no " + name);
  if (!it->second.defined() || it->second.numel() != 1)
    throw ValueError(optimizer + ".load_state_dict: " + name + " must hold one number");
  return it->second.value_as_double(0);
}

Tensor scalar_tensor(double value) { return full({}, value, DType::F64); }

Tensor zero_buffer(const Tensor& param) { return zeros_like(param.detach()); }

void require_f32_on_device(const std::string& optimizer, const Tensor& param) {
  if (param.dtype() != DType::F32)
    throw Error(str(optimizer, ".step on ", param.device().str(), " is implemented for float32 parameters only so far, got ",
                    dtype_name(param.dtype())));
}

}  // namespace kael::optim::detail
