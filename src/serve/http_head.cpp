// parse_request_head (http_head.hpp).
#include "serve/http_head.hpp"

#include <algorithm>
#include <cctype>

#include "kael/core/error.hpp"
#include "serve/http_error.hpp"

namespace kael::serve {
namespace {

// RFC 9110 tchar: what a method or a field name may hold.
bool is_token_char(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_token_char(static_cast<unsigned char>(c)); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// True when the comma-separated list `value` holds `token` (case-insensitive).
bool list_has(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

HttpError bad_request(std::string message) { return HttpError(400, std::move(message)); }

// Content-Length is 1*DIGIT: no sign, no spaces inside, no list. Values past the body limit
// are refused here (413), before a byte of the body is read.
std::uint64_t parse_content_length(std::string_view value, const HttpLimits& limits) {
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw bad_request(str("Content-Length must be a decimal number of bytes, found ", quote_prefix(value)));
  std::uint64_t length = 0;
  for (const char c : value) {
    length = length * 10 + static_cast<std::uint64_t>(c - '0');
    if (length > limits.max_body_bytes)
      throw HttpError(413, str("the request body is too large: Content-Length ", quote_prefix(value),
                               " exceeds the limit of ", limits.max_body_bytes, " bytes (--max-body)"));
  }
  return length;
}

void parse_request_line(std::string_view line, RequestHead& head) {
  const std::size_t first = line.find(' ');
  const std::size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last)
    throw bad_request(str("malformed request line ", quote_prefix(line)));
  head.method = std::string(line.substr(0, first));
  head.target = std::string(line.substr(first + 1, last - first - 1));
  const std::string_view version = line.substr(last + 1);
  if (!is_token(head.method)) throw bad_request(str("malformed method in request line ", quote_prefix(line)));
  if (head.target.empty() || std::any_of(head.target.begin(), head.target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
      }))
    throw bad_request(str("malformed request target in ", quote_prefix(line)));
  if (version == "HTTP/1.1") {
    head.http10 = false;
  } else if (version == "HTTP/1.0") {
    head.http10 = true;
  } else if (version.substr(0, 5) == "HTTP/") {
    throw HttpError(505, str("HTTP version ", quote_prefix(version), " is not supported (HTTP/1.0 and HTTP/1.1 are)"));
  } else {
    throw bad_request(str("malformed HTTP version in request line ", quote_prefix(line)));
  }
}

}  // namespace

std::string quote_prefix(std::string_view bytes, std::size_t max_bytes) {
  std::string out = "'";
  for (const char c : bytes.substr(0, max_bytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\' && c != '\'') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  out += '\'';
  if (bytes.size() > max_bytes) out += str("... (", bytes.size(), " bytes)");
  return out;
}

std::size_t head_length(std::string_view buffer) {
  // Leading empty lines before a request line are allowed (RFC 9112 section 2.2) and counted.
  std::size_t start = 0;
  while (start < buffer.size() && (buffer[start] == '\r' || buffer[start] == '\n')) ++start;
  for (std::size_t i = buffer.find('\n', start); i != std::string_view::npos; i = buffer.find('\n', i + 1)) {
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
  }
  return 0;
}

RequestHead parse_request_head(std::string_view head, const HttpLimits& limits) {
  while (!head.empty() && (head.front() == '\r' || head.front() == '\n')) head.remove_prefix(1);
  RequestHead result;
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const std::size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    head.remove_prefix(newline == std::string_view::npos ? head.size() : newline + 1);
    if (line.empty()) break;
    lines.push_back(line);
  }
  if (lines.empty()) throw bad_request("empty request head");
  if (lines.size() - 1 > limits.max_headers)
    throw HttpError(431, str("too many header fields: ", lines.size() - 1, " (the limit is ", limits.max_headers, ")"));
  parse_request_line(lines.front(), result);

  std::optional<std::string> transfer_encoding;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t')
      throw bad_request(str("folded header lines are not accepted: ", quote_prefix(line)));
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      throw bad_request(str("malformed header field ", quote_prefix(line)));
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      const std::uint64_t length = parse_content_length(value, limits);
      if (result.content_length && *result.content_length != length)
        throw bad_request("conflicting Content-Length fields");
      result.content_length = length;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (transfer_encoding) throw bad_request("more than one Transfer-Encoding field");
      transfer_encoding = std::string(value);
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue"))
        throw HttpError(417, str("unsupported expectation ", quote_prefix(value)));
      result.expect_continue = !result.http10;
    } else if (iequals(name, "Connection")) {
      if (list_has(value, "close")) result.keep_alive = false;
    }
    result.fields.emplace_back(std::string(name), std::string(value));
  }
  // An HTTP/1.0 connection carries one exchange: its response may be close-delimited.
  if (result.http10) result.keep_alive = false;

  if (transfer_encoding) {
    if (!iequals(*transfer_encoding, "chunked"))
      throw HttpError(501, str("Transfer-Encoding ", quote_prefix(*transfer_encoding),
                               " is not supported (only 'chunked' is)"));
    if (result.content_length) throw bad_request("a request must not carry both Content-Length and Transfer-Encoding");
    result.chunked = true;
  }
  const bool carries_body = result.method == "POST" || result.method == "PUT" || result.method == "PATCH";
  if (carries_body && !result.content_length && !result.chunked)
    throw HttpError(411, str("a ", result.method, " request needs a Content-Length (or Transfer-Encoding: chunked)"));
  return result;
}

}  // namespace kael::serve
