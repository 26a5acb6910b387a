// Copies between devices, behind Tensor::to(Device), item(), to_vector() and printing.
#pragma once

#include "kael/core/tensor.hpp"

namespace kael {

// A contiguous owned copy of `t`'s values on `device`, without history (any layout of `t`).
// Error if `device` is not usable here.
Tensor copy_to_device(const Tensor& t, Device device);

}  // namespace kael
