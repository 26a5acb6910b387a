// HttpServer (http_server.hpp): the acceptor, the I/O thread and the stop.
#include "serve/http_server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <future>
#include <vector>

#include "kael/core/error.hpp"

namespace kael::serve {
namespace {

// After a failed accept (out of descriptors: EMFILE), wait this long before the next one
// instead of spinning on the same error.
constexpr std::chrono::milliseconds kAcceptRetry{50};

}  // namespace

HttpServer::HttpServer(const HttpLimits& limits, int workers, Handler handler, Observer on_answered)
    : workers_(static_cast<std::size_t>(std::max(1, workers))) {
  host_.limits = limits;
  host_.handler = std::move(handler);
  host_.on_answered = std::move(on_answered);
  host_.workers = &workers_;
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::listen(const std::string& host, int port) {
  beast::error_code ec;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec) throw Error(str("cannot listen on ", host, ":", port, ": ", ec.message()));
  for (const auto& entry : endpoints) {
    acceptor_.close(ec);
    acceptor_.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    // SO_REUSEADDR only: with SO_REUSEPORT a second server on the same port would bind
    // without error and silently take half of the connections.
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    acceptor_.bind(entry.endpoint(), ec);
    if (ec) continue;
    acceptor_.listen(std::max(host_.limits.max_connections, 128), ec);  // the kernel caps it at somaxconn
    if (!ec) break;
  }
  if (ec || !acceptor_.is_open())
    throw Error(str("cannot listen on ", host, ":", port, " (", ec ? ec.message() : "no address", ")"));
  const int bound = acceptor_.local_endpoint().port();
  work_.emplace(io_.get_executor());
  accept_next();
  io_thread_ = std::thread([this] { io_.run(); });
  return bound;
}

void HttpServer::accept_next() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open() || ec == net::error::operation_aborted) return;
    if (ec) {
      retry_.expires_after(kAcceptRetry);
      retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) accept_next();
      });
      return;
    }
    auto connection = std::make_shared<Connection>(std::move(socket), host_);
    const int cap = host_.limits.max_connections;
    if (host_.admitted.load(std::memory_order_relaxed) >= cap) {
      connection->refuse(HttpError(503, str("too many open connections (the limit is ", cap, "); retry later"), "",
                                   "server_error"));
    } else {
      host_.admitted.fetch_add(1, std::memory_order_relaxed);
      connection->start();
    }
    accept_next();
  });
}

void HttpServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  host_.stopping.store(true);
  if (io_thread_.joinable()) {
    // On the I/O thread, the one that runs every connection: nothing else touches them meanwhile.
    std::promise<void> closed;
    net::post(io_, [this, &closed] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      retry_.cancel();
      std::vector<std::shared_ptr<Connection>> open;
      {
        std::lock_guard lock(host_.mutex);
        for (auto& [raw, weak] : host_.open)
          if (auto connection = weak.lock()) open.push_back(std::move(connection));
      }
      for (auto& connection : open) connection->close();
      closed.set_value();
    });
    closed.get_future().wait();
  }
  workers_.join();  // a handler still running finishes; its answer finds the connection closed
  // With every socket closed, what is still pending ends at once and the loop runs out of work.
  work_.reset();
  if (io_thread_.joinable()) io_thread_.join();
}

}  // namespace kael::serve
