// The head of an HTTP/1.x request (request line and header fields), parsed and checked
// before any of the body is read. Every malformed or unacceptable head is an HttpError
// with the status that says why (400, 411, 413, 431, 501, 505).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/http_limits.hpp"

namespace kael::serve {

struct RequestHead {
  std::string method;
  std::string target;
  bool http10 = false;  // HTTP/1.0 (else HTTP/1.1)
  std::vector<std::pair<std::string, std::string>> fields;  // name, value (trimmed), in order
  std::optional<std::uint64_t> content_length;
  bool chunked = false;          // Transfer-Encoding: chunked
  bool expect_continue = false;  // Expect: 100-continue
  bool keep_alive = true;        // HTTP/1.1 without Connection: close
};

// The byte length of the head in `buffer` including its blank line, or 0 while it is not
// complete. Accepts bare LF line ends as well as CRLF.
std::size_t head_length(std::string_view buffer);

// Parses a complete head (what head_length measured) and applies the limits: header count
// (431), Content-Length syntax (400) and size (413), Transfer-Encoding other than chunked
// (501), both framings at once (400), a body-carrying method with neither (411).
RequestHead parse_request_head(std::string_view head, const HttpLimits& limits);

// A bounded, printable quote of client bytes for an error message.
std::string quote_prefix(std::string_view bytes, std::size_t max_bytes = 64);

}  // namespace kael::serve
