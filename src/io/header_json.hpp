// Turns the header bytes of a safetensors file into a JSON document, refusing what the JSON
// library would accept silently or handle badly: invalid UTF-8, nesting deep enough to hurt,
// duplicate keys (the library keeps the last one, which would let two entries alias).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace kael::io {

// Deepest nesting of objects and arrays accepted. A valid header needs 3 (root, entry, shape);
// the margin only lets wrong-type headers get a precise message instead of a nesting one.
inline constexpr int kMaxJsonDepth = 16;

// Parses `text` (the N header bytes). `source` names the file in messages. Throws ValueError.
nlohmann::json parse_header_json(std::string_view text, std::string_view source);

}  // namespace kael::io
