// The optimizers' shared argument checks and helpers, with torch.optim's messages.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/optim/optimizer.hpp"
#include "kernels/infra/thread_pool.hpp"

namespace kael::optim::detail {

// ValueError "<optimizer>: invalid <what>: <value>" unless value is a number >= 0.
void check_non_negative(const std::string& optimizer, const char* what, double value);
// ValueError unless 0 <= beta < 1 (torch: "Invalid beta parameter at index 0").
void check_beta(const std::string& optimizer, int index, double beta);
// The one number of parameter group `group`'s saved hyperparameter (ValueError naming `key`
// unless it holds one value).
double scalar_value(const std::string& optimizer, const std::map<std::string, Tensor>& values,
                    const std::string& key, std::size_t group = 0);
// A saved F64 scalar.
Tensor scalar_tensor(double value);
// The zero-filled state buffer of a parameter: contiguous, of its dtype and shape, on its device.
Tensor zero_buffer(const Tensor& param);
// Error unless a parameter on a device is float32, the one dtype of the device updates so far.
void require_f32_on_device(const std::string& optimizer, const Tensor& param);
// Runs body(begin, end) over [0, n) on the kernel threads when n is large. Each element's
// update reads only that element, so the split never changes a result.
template <class F>
void parallel_elements(std::int64_t n, F&& body) {
  kernels::parallel_for(n, kernels::min_items_per_thread(16), std::forward<F>(body));
}

}  // namespace kael::optim::detail
