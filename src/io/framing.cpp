// The first 8 bytes: the header length N, checked before anything is allocated from it.
#include <cstring>

#include "io/header.hpp"
#include "kael/core/error.hpp"

namespace kael::io {

namespace {
// What `git clone` without git-lfs leaves in place of a large file.
constexpr std::string_view kLfsPointerPrefix = "version https://git-lfs";
}  // namespace

std::uint64_t check_framing(std::span<const std::byte> prefix, std::uint64_t file_size,
                            const LoadOptions& options, std::string_view source) {
  const std::string_view text(reinterpret_cast<const char*>(prefix.data()), prefix.size());
  if (text.starts_with(kLfsPointerPrefix))
    throw ValueError(str(source, " is a Git LFS pointer, not the weights: fetch the real file "
                                 "(`git lfs pull`, or download it directly)"));
  if (file_size < kLengthBytes || prefix.size() < kLengthBytes)
    throw ValueError(str(source, " is ", file_size, " bytes, too short for the ", kLengthBytes,
                         "-byte header length of a safetensors file"));
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < kLengthBytes; ++i)
    length |= static_cast<std::uint64_t>(std::to_integer<unsigned>(prefix[i])) << (8 * i);
  if (length == 0) throw ValueError(str(source, ": header length is 0, expected a JSON object"));
  if (length > options.max_header_bytes)
    throw ValueError(str(source, ": header length ", length, " exceeds the limit of ",
                         options.max_header_bytes, " bytes (LoadOptions::max_header_bytes)"));
  // file_size >= 8 here, so the subtraction cannot wrap (and N + 8 is never computed).
  if (length > file_size - kLengthBytes)
    throw ValueError(str(source, ": header length ", length, " runs past the end of the file (",
                         file_size - kLengthBytes, " bytes follow the length)"));
  return length;
}

}  // namespace kael::io
