// The HTTP server of `kael serve` on Boost.Asio: one I/O thread runs every connection
// (http_connection.hpp) on an event loop, and a pool of worker threads runs the handler, so
// an idle connection costs a socket and a few kilobytes, not a thread. Past the connection cap
// a new connection gets a 503 at once.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <thread>

#include "serve/http_connection.hpp"

namespace kael::serve {

class HttpServer {
 public:
  using Handler = std::function<Response(Request&)>;
  using Observer = std::function<void(const std::string& path, int status)>;

  // `handler` answers every request read whole, on one of `workers` threads; `on_answered`
  // sees each status (path "" for a request refused before routing), on the I/O thread.
  HttpServer(const HttpLimits& limits, int workers, Handler handler, Observer on_answered);
  ~HttpServer();  // stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: a free one) with SO_REUSEADDR and an accept queue as long as the
  // connection cap, and starts accepting; returns the port. Error when it cannot.
  int listen(const std::string& host, int port);

  int requests_in_flight() const { return host_.in_flight.load(std::memory_order_relaxed); }
  int open_connections() const { return host_.admitted.load(std::memory_order_relaxed); }

  // Stops accepting, closes every connection (a pending answer's producer is cancelled), waits
  // for the handlers that run and joins the threads. Idempotent.
  void stop();

 private:
  void accept_next();

  ConnectionHost host_;  // before io_ and workers_: connections they still hold refer to it
  net::thread_pool workers_;
  net::io_context io_{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  tcp::acceptor acceptor_{io_};
  net::steady_timer retry_{io_};
  std::thread io_thread_;
  bool stopped_ = false;
};

}  // namespace kael::serve
