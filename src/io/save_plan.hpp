// What save_safetensors writes, decided in memory before any file is touched: the padded
// header and the tensors (contiguous) in the order their bytes go into the data section.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::io {

struct SavePlan {
  std::string header;           // JSON padded with spaces so the data starts at a multiple of 8
  std::vector<Tensor> data;     // contiguous tensors, in data-section order
};

// Throws ValueError for a name "__metadata__", a name, metadata key or value that is not valid
// UTF-8, or sizes that overflow.
SavePlan plan_save(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace kael::io
