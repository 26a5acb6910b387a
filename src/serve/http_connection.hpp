// One client connection of `kael serve` on Boost.Beast: reads each request under the limits
// (Beast's parser: head and body size, strict Content-Length, chunked bodies counted as they
// arrive; the stream's deadlines: head, body, idle, write), hands it to a worker thread, writes
// the answer (whole, or streamed as its producer makes it), and answers pipelined requests in
// order. It holds no thread: an idle connection costs its socket and a small buffer.
#pragma once

#include <atomic>
#include <chrono>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "serve/http_error.hpp"
#include "serve/http_limits.hpp"
#include "serve/http_message.hpp"

namespace kael::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class Connection;

// What the connections of one server share.
struct ConnectionHost {
  HttpLimits limits;
  std::function<Response(Request&)> handler;  // runs on a worker thread
  // Each answer's status once its head is written; `path` is "" for a request refused before
  // it was read whole (limits, malformed).
  std::function<void(const std::string& path, int status)> on_answered;
  net::thread_pool* workers = nullptr;

  std::atomic<int> in_flight{0};  // requests read whole and not yet answered whole
  std::atomic<int> admitted{0};   // open connections counted against limits.max_connections
  std::atomic<bool> stopping{false};

  // The open connections, so stop() can close them.
  std::mutex mutex;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> open;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ConnectionHost& host);
  ~Connection();

  void start();  // counts itself against the cap and reads the first request
  // Answers `error` to a connection past the cap without reading its request, then closes.
  void refuse(const HttpError& error);
  // The server stops: writes what a pending answer still has ready, then closes the socket
  // (cancelling the answer if it is not complete). On the I/O thread.
  void close();

 private:
  void await_request();
  void read_head();
  void on_head(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  void dispatch_request();
  void respond(Response response);
  void write_whole();
  void send_whole(bool then_linger);  // writes whole_, then the next request or a lingering close
  void start_stream();
  void pump();
  void write_chunk(std::string bytes, bool last);
  void watch_client();
  void end_exchange();
  void answer_error(const HttpError& error);  // counted as refused before routing, then a lingering close
  void linger();
  void discard_until_closed();
  void shut();
  // Deadlines: the timer cancels the socket's operations when it fires, and the read or write
  // that ends with operation_aborted sees timed_out_ (Beast's own timed stream would close
  // the socket instead, leaving no way to answer 408).
  void arm(std::chrono::steady_clock::duration timeout);
  void disarm();

  bool ended_quietly(beast::error_code ec) const;
  HttpError head_error(beast::error_code ec) const;
  HttpError body_error(beast::error_code ec) const;
  void check_head();  // throws HttpError: version, header count, framing, Expect

  tcp::socket socket_;
  net::steady_timer timer_;
  unsigned timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  ConnectionHost& host_;
  std::optional<http::request_parser<http::string_body>> parser_;

  bool admitted_ = false;  // counted against the connection cap (refused ones are not)
  int served_ = 0;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool head_only_ = false;  // a HEAD request: the answer's head alone
  bool counted_in_flight_ = false;
  std::string path_;

  // The current answer.
  Response response_;
  std::shared_ptr<Producer> producer_;
  std::optional<http::response<http::string_body>> whole_;
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
  std::string out_;      // bytes being written
  bool writing_ = false;
  bool ended_ = false;   // the producer finished: end the body once the writes drain
  bool closed_ = false;
  bool closing_ = false;  // the server stops: close once the answer in hand is written

  // Lingering close.
  std::size_t lingered_bytes_ = 0;
  std::chrono::steady_clock::time_point linger_until_{};
};

}  // namespace kael::serve
