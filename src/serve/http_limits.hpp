// What one HTTP client may cost the server, enforced by the connection front (http_front.hpp)
// before httplib sees a request. Each limit answers with its own status, at once, and closes
// the connection: the server never waits on a slow or oversized request.
#pragma once

#include <chrono>
#include <cstddef>

namespace kael::serve {

struct HttpLimits {
  std::size_t max_body_bytes = 1 << 20;          // decoded body, Content-Length or chunked: 413
  std::size_t max_head_bytes = 32 * 1024;        // request line + headers: 431
  std::size_t max_headers = 100;                 // header fields: 431
  int max_connections = 256;                     // open connections; the next one gets 503
  std::chrono::milliseconds head_timeout{10000}; // whole request head, from its first byte: 408
  std::chrono::milliseconds body_timeout{30000}; // whole body, from the end of the head: 408
  std::chrono::milliseconds idle_timeout{5000};  // a kept-alive connection waiting for its next request
  std::chrono::milliseconds write_timeout{30000};  // one blocked write to a client that stopped reading
  int max_requests_per_connection = 1000;
};

}  // namespace kael::serve
