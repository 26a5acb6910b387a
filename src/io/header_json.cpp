#include "io/header_json.hpp"

#include <set>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/core/json.hpp"
#include "kael/core/utf8.hpp"

namespace kael::io {

nlohmann::json parse_header_json(std::string_view text, std::string_view source) {
  if (auto bad = utf8::find_invalid(text))
    throw ValueError(str(source, ": header is not valid UTF-8 (bad byte at header offset ", *bad, ")"));
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{...}" padded with NULs would
  // parse; NUL is not JSON (not even whitespace), and the reference reader refuses it.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw ValueError(str(source, ": header holds a NUL byte at header offset ", nul,
                         ", which is not JSON (a header is padded with spaces)"));
  // JSON whitespace may come first, as the reference reader allows; then the object itself.
  const std::size_t start = text.find_first_not_of(" \t\n\r");
  if (start == std::string_view::npos || text[start] != '{')
    throw ValueError(str(source, ": header must start with '{' (after any JSON whitespace), found ",
                         start == std::string_view::npos
                             ? std::string("nothing")
                             : str("byte ", static_cast<int>(static_cast<unsigned char>(text[start])))));
  // One set of seen keys per open object; a repeated key is refused as soon as it appears.
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw ValueError(str(source, ": header JSON repeats the key \"", key, "\""));
    }
    return true;
  };
  // Trailing whitespace (the writer's padding) is allowed by the parser; anything else after
  // the document is a parse error.
  return json::parse(text, str(source, ": header"), kMaxJsonDepth, on_event);
}

}  // namespace kael::io
