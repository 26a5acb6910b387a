// Http10Response (http10_response.hpp).
#include "serve/http10_response.hpp"

#include <algorithm>
#include <cctype>

#include "serve/http_head.hpp"

namespace kael::serve {
namespace {

bool has_name(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  return std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

}  // namespace

void Http10Response::rewrite_head(std::string& out) {
  std::string_view rest = head_;
  bool first = true;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    if (first) {
      first = false;
      out += "HTTP/1.0";
      out += line.substr(std::min(line.find(' '), line.size()));
      out += "\r\n";
      continue;
    }
    if (has_name(line, "Transfer-Encoding")) {
      dechunk_ = true;  // httplib frames only with chunked
      continue;
    }
    if (has_name(line, "Connection") || has_name(line, "Keep-Alive")) continue;
    out += line;
    out += "\r\n";
  }
  out += "Connection: close\r\n\r\n";
}

bool Http10Response::rewrite(std::string_view piece, std::string& out) {
  if (!head_done_) {
    const std::size_t before = head_.size();
    head_.append(piece);
    const std::size_t length = head_length(head_);
    if (length == 0) return true;
    head_done_ = true;
    piece.remove_prefix(length - before);
    head_.resize(length);
    rewrite_head(out);
  }
  if (!dechunk_) {
    out.append(piece);
    return true;
  }
  return decoder_.feed(piece, out) != ChunkedDecoder::Status::malformed;
}

}  // namespace kael::serve
