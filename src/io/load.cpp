// Reading: validate the framing and header first, then copy or map the tensor bytes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "io/header.hpp"
#include "io/mapping.hpp"
#include "io/posix_file.hpp"
#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

namespace kael::io {

namespace {

std::string file_source(const std::filesystem::path& path) { return str("'", path.string(), "'"); }

Header read_header(const PosixFile& file, std::uint64_t file_size, const LoadOptions& options,
                   std::string_view source) {
  std::array<std::byte, kFramingPrefixBytes> prefix{};
  const auto prefix_size = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, prefix.size()));
  file.read_exact(0, {prefix.data(), prefix_size});
  const std::uint64_t length = check_framing({prefix.data(), prefix_size}, file_size, options, source);
  std::string text(static_cast<std::size_t>(length), '\0');  // bounded by the cap and the file size
  file.read_exact(kLengthBytes, std::as_writable_bytes(std::span(text)));
  return validate_header(text, file_size, source);
}

// BOOL is one byte per element; anything but 0 and 1 would make `bool` reads undefined.
void check_bool_bytes(const TensorInfo& info, std::span<const std::byte> bytes, std::string_view source) {
  if (info.dtype != DType::BOOL) return;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (std::to_integer<unsigned>(bytes[i]) > 1)
      throw ValueError(str(source, ": BOOL tensor '", info.name, "' holds byte ", std::to_integer<unsigned>(bytes[i]),
                           " at element ", i, ", expected 0 or 1"));
}

void check_unchanged(const PosixFile& file, const Header& header, std::string_view source) {
  const std::uint64_t now = file.size();
  if (now != header.file_size)
    throw ValueError(str(source, " changed size from ", header.file_size, " to ", now, " bytes while being loaded"));
}

// Aligned tensors point into the mapping (and keep it alive); misaligned ones are copied,
// since kernels may load their elements with aligned instructions.
SafetensorsFile tensors_from_mapping(const Header& header, const std::shared_ptr<Mapping>& mapping,
                                     std::string_view source) {
  SafetensorsFile out;
  out.metadata = header.metadata;
  const std::shared_ptr<void> owner = mapping;
  for (const TensorInfo& info : header.tensors) {
    std::byte* data = mapping->data() + data_start(header) + info.begin;
    const std::span<const std::byte> bytes(data, info.end - info.begin);
    check_bool_bytes(info, bytes, source);
    const bool aligned = reinterpret_cast<std::uintptr_t>(data) % dtype_size(info.dtype) == 0;
    out.tensors.emplace(info.name, aligned && !bytes.empty() ? Tensor::borrow(info.dtype, info.shape, data, owner)
                                                             : Tensor::from_bytes(info.dtype, info.shape, bytes));
  }
  return out;
}

SafetensorsFile tensors_from_reads(const Header& header, const PosixFile& file, std::string_view source) {
  SafetensorsFile out;
  out.metadata = header.metadata;
  for (const TensorInfo& info : header.tensors) {
    // Allocation is safe: validation proved the tensors tile the file, so they sum to its size.
    Tensor tensor = Tensor::zeros(info.dtype, info.shape);
    const std::span<std::byte> bytes(tensor.raw_data(), tensor.nbytes());
    file.read_exact(data_start(header) + info.begin, bytes);
    check_bool_bytes(info, bytes, source);
    out.tensors.emplace(info.name, std::move(tensor));
  }
  check_unchanged(file, header, source);
  return out;
}

}  // namespace

Header read_safetensors_header(const std::filesystem::path& path, const LoadOptions& options) {
  const PosixFile file(path);
  return read_header(file, file.size(), options, file_source(path));
}

SafetensorsFile read_safetensors(const std::filesystem::path& path, LoadMode mode) {
  return read_safetensors(path, LoadOptions{.mmap = mode == LoadMode::Mapped});
}

TensorMap load_safetensors(const std::filesystem::path& path, LoadMode mode) {
  return read_safetensors(path, mode).tensors;
}

SafetensorsFile read_safetensors(const std::filesystem::path& path, const LoadOptions& options) {
  const std::string source = file_source(path);
  const PosixFile file(path);
  const Header header = read_header(file, file.size(), options, source);
  if (options.mmap) {
    if (auto mapping = Mapping::map(file.fd(), header.file_size)) {
      // Pages past a shrunken end would fault on access: refuse a file that changed under us.
      check_unchanged(file, header, source);
      return tensors_from_mapping(header, mapping, source);
    }
  }
  return tensors_from_reads(header, file, source);
}

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, const LoadOptions& options) {
  constexpr std::string_view source = "safetensors bytes";
  const auto prefix = bytes.first(std::min<std::size_t>(bytes.size(), kFramingPrefixBytes));
  const std::uint64_t length = check_framing(prefix, bytes.size(), options, source);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + kLengthBytes,
                              static_cast<std::size_t>(length));
  const Header header = validate_header(text, bytes.size(), source);
  SafetensorsFile out;
  out.metadata = header.metadata;
  for (const TensorInfo& info : header.tensors) {
    const auto data = bytes.subspan(data_start(header) + info.begin, info.end - info.begin);
    check_bool_bytes(info, data, source);
    out.tensors.emplace(info.name, Tensor::from_bytes(info.dtype, info.shape, data));
  }
  return out;
}

}  // namespace kael::io
