#include "io/save_plan.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kael/core/error.hpp"
#include "kael/core/utf8.hpp"

namespace kael::io {

namespace {

void check_text(const std::string& text, std::string_view what) {
  if (auto bad = utf8::find_invalid(text))
    throw ValueError(str("cannot save safetensors: ", what, " is not valid UTF-8 (bad byte at offset ", *bad, ")"));
}

}  // namespace

SavePlan plan_save(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  for (const auto& [name, tensor] : tensors) {
    check_text(name, "a tensor name");
    if (name == "__metadata__")
      throw ValueError("cannot save safetensors: \"__metadata__\" is reserved and cannot name a tensor");
  }
  for (const auto& [key, value] : metadata) {
    check_text(key, "a metadata key");
    check_text(value, str("metadata value of \"", key, "\""));
  }

  // Data order: larger elements first, then by name. Since the data starts 8-aligned and every
  // size is a multiple of its element size, each tensor then starts aligned for its dtype, so a
  // mapped load can use all of them in place. The JSON keys themselves are sorted by name.
  std::vector<const std::pair<const std::string, Tensor>*> order;
  for (const auto& entry : tensors) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->second.element_size() > b->second.element_size();
  });

  nlohmann::json header = nlohmann::json::object();  // std::map inside: keys come out sorted
  if (!metadata.empty()) header["__metadata__"] = metadata;
  SavePlan plan;
  std::uint64_t offset = 0;
  for (const auto* entry : order) {
    const Tensor& tensor = entry->second;
    std::uint64_t end = 0;
    if (!checked_add(offset, tensor.nbytes(), end))
      throw ValueError("cannot save safetensors: total size overflows 64 bits");
    header[entry->first] = {{"dtype", dtype_name(tensor.dtype())}, {"shape", tensor.shape()}, {"data_offsets", {offset, end}}};
    plan.data.push_back(tensor.is_contiguous() ? tensor : tensor.packed_copy());  // views are written by value
    offset = end;
  }
  plan.header = header.dump();
  // Pad so 8 (the length) + N is a multiple of 8.
  plan.header.append((8 - plan.header.size() % 8) % 8, ' ');
  return plan;
}

}  // namespace kael::io
