// What one HTTP client may cost the server, enforced by each connection (http_connection.hpp)
// with Beast's parser limits and deadlines. Each limit answers with its own status, at once,
// and closes the connection: the server never waits on a slow or oversized request.
#pragma once

#include <chrono>
#include <cstddef>

namespace kael::serve {

struct HttpLimits {
  std::size_t max_body_bytes = 1 << 20;          // decoded body, Content-Length or chunked: 413
  std::size_t max_head_bytes = 32 * 1024;        // request line + headers: 431
  // The connection's buffer holds at most max_head_bytes + 16 KiB of client bytes not yet
  // parsed, which also bounds a chunk-size line (its extensions) and a trailer: 413.
  std::size_t max_headers = 100;                 // header fields: 431
  int max_connections = 256;                     // open connections; the next one gets 503
  std::chrono::milliseconds head_timeout{10000}; // whole request head: 408 (from its first byte on a kept-alive connection)
  std::chrono::milliseconds body_timeout{30000}; // whole body, from the end of the head: 408
  std::chrono::milliseconds idle_timeout{5000};  // a kept-alive connection waiting for its next request
  std::chrono::milliseconds write_timeout{30000};  // one write to a client that stopped reading
  int max_requests_per_connection = 1000;
  // After an error answer the connection reads and discards what the client still sends
  // (nginx's lingering close), so a client that writes its whole body before reading gets the
  // answer instead of a reset: until the client closes, for at most this long in all, this long
  // without a byte, or this many bytes.
  std::chrono::milliseconds linger_time{30000};
  std::chrono::milliseconds linger_idle{2000};
  std::size_t linger_bytes = 256u << 20;
};

}  // namespace kael::serve
