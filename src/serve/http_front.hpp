// The connection front of `kael serve`: an httplib::Server whose connections are read by our
// own code. httplib 0.11 (Debian's) applies its read timeout per recv, not to a whole request,
// has no connection or header-count cap, lets chunked bodies past the payload limit, reads
// "12abc" as a length of 12, drops pipelined requests that arrived together, and answers
// HTTP/1.0 clients with chunked HTTP/1.1; none of it can be configured away. So this front
// takes each accepted socket (a thread per connection, up to a cap), reads and checks the
// request head and body under deadlines (http_head.hpp, chunked.hpp), and only then hands
// httplib one complete, canonical request (Content-Length framing, no Expect) through a Stream
// over our buffer; httplib routes it and writes the response back through the same Stream.
// What httplib still does: routing, the handlers' Request/Response, response framing.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "serve/http.hpp"
#include "serve/http_limits.hpp"

namespace kael::serve {

class FrontServer : public httplib::Server {
 public:
  // `on_refused(status)` counts each request the front answers itself (limits, malformed).
  FrontServer(const HttpLimits& limits, std::function<void(int)> on_refused);

  // Binds and listens on host:port (port 0: a free one); the port bound, or -1. The accept
  // queue is as long as the connection cap: httplib's own is 5, and a burst of connections
  // beyond it waits on SYN retries and may end in a reset instead of an answer.
  int bind(const std::string& host, int port);

  // Requests being answered now (read whole, in httplib's hands, a stream included): what a
  // drain waits for. Idle kept-alive connections do not count.
  int requests_in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  // Overrides httplib's per-connection loop (a private virtual: httplib's accept loop calls it).
  bool process_and_close_socket(socket_t sock) override;
  void serve_connection(int fd);

  HttpLimits limits_;
  std::function<void(int)> on_refused_;
  std::atomic<int> in_flight_{0};
  int listen_fd_ = -1;  // the listening socket, seen in the socket-options callback
};

}  // namespace kael::serve
