// Validation of the parts of a safetensors file that come before the tensor bytes: the framing
// (the 8-byte length N) and the JSON header, checked against the size of the data section.
// Nothing here allocates more than the header itself, which the framing has already bounded.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kael/io/safetensors.hpp"

namespace kael::io {

// Bytes of the little-endian header length that starts every file.
inline constexpr std::uint64_t kLengthBytes = 8;
// How many leading bytes check_framing wants to see (fewer when the file is shorter).
inline constexpr std::size_t kFramingPrefixBytes = 64;

// Checks the file's first bytes (`prefix`: the first min(file_size, kFramingPrefixBytes) of
// them) and returns N, the header length. Refuses a Git LFS pointer with a message saying so.
std::uint64_t check_framing(std::span<const std::byte> prefix, std::uint64_t file_size,
                            const LoadOptions& options, std::string_view source);

// Validates the N header bytes of a file of `file_size` bytes: JSON, entries, dtypes, shapes,
// offsets, sizes, and that the tensors tile the data section exactly. Throws ValueError, or
// TypeError for an unsupported dtype.
Header validate_header(std::string_view text, std::uint64_t file_size, std::string_view source);

// Offset in the file where the data section starts.
inline std::uint64_t data_start(const Header& header) { return kLengthBytes + header.header_length; }

}  // namespace kael::io
