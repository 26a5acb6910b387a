// Rewrites httplib's HTTP/1.1 response for an HTTP/1.0 client, which cannot parse chunked
// framing: the status line says HTTP/1.0, Transfer-Encoding is dropped and the chunks are
// decoded, and the connection closes after the body, which is how HTTP/1.0 delimits it (a
// streamed completion becomes close-delimited SSE).
#pragma once

#include <string>
#include <string_view>

#include "serve/chunked.hpp"

namespace kael::serve {

class Http10Response {
 public:
  // Appends to `out` what to send for the next `piece` of httplib's output (the head is held
  // until it is whole). False if httplib's chunked framing is malformed, which it never is.
  bool rewrite(std::string_view piece, std::string& out);

 private:
  void rewrite_head(std::string& out);

  bool head_done_ = false;
  bool dechunk_ = false;
  std::string head_;
  ChunkedDecoder decoder_;
};

}  // namespace kael::serve
