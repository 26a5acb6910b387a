// The one way kael reads JSON that comes from outside it: request bodies, config.json, training
// state, JSON lines, safetensors headers. nlohmann's parser builds a document without recursion,
// but its dump(), copies, comparisons and (in places) destructor recurse once per level of
// nesting, so a small hostile text of 50,000 '[' would later crash whatever thread touches it.
// The nesting is bounded here, by a plain scan, before the parser sees the bytes.
//
// This header includes nlohmann/json.hpp; kael/kael.hpp does not include it.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace kael::json {

// Deepest nesting of objects and arrays accepted by default: far above what any document kael
// reads needs (a config is 1 level, a request 3), far below what hurts a thread's stack.
inline constexpr int kMaxDepth = 64;

// ValueError "<source> nests deeper than <max_depth> levels (at byte <i>)" when `text` opens
// more than `max_depth` objects and arrays at once (brackets inside strings do not count).
void check_depth(std::string_view text, std::string_view source, int max_depth = kMaxDepth);

// `text` parsed as one JSON document (whitespace around it allowed, comments not), its depth
// checked first. `source` names it in messages: ValueError "<source> is not valid JSON: ..."
// or the depth error above. `callback`, if given, sees each parse event as nlohmann's does
// (it may throw to refuse the document).
nlohmann::json parse(std::string_view text, std::string_view source, int max_depth = kMaxDepth,
                     const nlohmann::json::parser_callback_t& callback = nullptr);
// The same, keeping the order of object keys (for documents that are written back).
nlohmann::ordered_json parse_ordered(std::string_view text, std::string_view source, int max_depth = kMaxDepth);

}  // namespace kael::json
