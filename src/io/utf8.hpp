// Strict UTF-8 validation for safetensors headers and tensor names.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace kael::io {

// The byte offset of the first invalid sequence, or nullopt when `text` is valid UTF-8.
// Strict (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF,
// no truncated sequences.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) { return !find_invalid_utf8(text).has_value(); }

}  // namespace kael::io
