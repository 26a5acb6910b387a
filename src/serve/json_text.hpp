// JSON output helpers. Generated text can end inside a UTF-8 character (max_tokens cut it)
// and single tokens are often partial characters, so every dump replaces invalid bytes with
// U+FFFD instead of throwing (nlohmann's default), and token strings use OpenAI's
// "bytes:\xNN" spelling when their bytes are not valid UTF-8.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kael::serve {

// Ordered, so responses keep OpenAI's field order and top_logprobs stay most likely first.
using Json = nlohmann::ordered_json;

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD.
std::string dump(const Json& value);

// A token's display string: its bytes when they are valid UTF-8, else "bytes:\xe2\x80"
// (OpenAI's legacy completions spelling), so distinct tokens never share a key.
std::string token_string(std::string_view bytes);

// Number of characters (UTF-8 lead bytes) in `bytes`: the offset a Python str would use.
std::size_t char_count(std::string_view bytes);

// {"error": {"message", "type", "param", "code"}}: OpenAI's error shape.
Json error_json(std::string_view message, std::string_view type, std::string_view param, int status);

}  // namespace kael::serve
