// Writing: plan everything in memory (refusing bad names first), then replace the file atomically.
#include <array>

#include "io/atomic_write.hpp"
#include "io/header.hpp"
#include "io/save_plan.hpp"
#include "kael/io/safetensors.hpp"

namespace kael::io {

void save_safetensors(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const SavePlan plan = plan_save(tensors, metadata);
  std::array<std::byte, kLengthBytes> length{};
  for (std::size_t i = 0; i < length.size(); ++i)
    length[i] = static_cast<std::byte>((static_cast<std::uint64_t>(plan.header.size()) >> (8 * i)) & 0xFF);
  std::vector<std::span<const std::byte>> pieces{length, std::as_bytes(std::span(plan.header))};
  for (const Tensor& tensor : plan.data) pieces.push_back(tensor.bytes());
  write_atomically(path, pieces);
}

}  // namespace kael::io
