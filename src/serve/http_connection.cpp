// One connection's life (http_connection.hpp). Every member function runs on the connection's
// strand; the worker pool and the producers' wakers reach it only through net::post.
#include "serve/http_connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>

#include "kael/core/error.hpp"
#include "serve/json_text.hpp"

namespace kael::serve {
namespace {

constexpr std::size_t kReadBytes = 16 * 1024;
constexpr std::chrono::milliseconds kRefusalLinger{1000};

// The value of the first field `name` among the raw header lines left in `input` (for the
// message of a head Beast refused: it keeps the bytes it could not parse).
std::optional<std::string> raw_field(std::string_view input, std::string_view name) {
  while (!input.empty()) {
    const std::size_t newline = input.find('\n');
    const std::string_view line = input.substr(0, newline);
    if (line.size() > name.size() && line[name.size()] == ':' && iequals(line.substr(0, name.size()), name))
      return std::string(trim(line.substr(name.size() + 1)));
    if (newline == std::string_view::npos || line.empty() || line == "\r") break;
    input.remove_prefix(newline + 1);
  }
  return std::nullopt;
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The client went away, or the server closed the socket: nothing to answer.
bool is_disconnect(beast::error_code ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe || ec == net::error::not_connected ||
         ec == net::error::bad_descriptor;
}

// The most client bytes a connection holds unparsed: a head (the parser refuses more first) or
// a chunk-size line or trailer, plus one read.
std::size_t buffer_limit(const HttpLimits& limits) { return limits.max_head_bytes + kReadBytes; }

std::string error_body(const HttpError& error) {
  return dump(error_json(error.what(), error.status() >= 500 ? "server_error" : "invalid_request_error", error.param(),
                         error.status()));
}

}  // namespace

Connection::Connection(tcp::socket socket, ConnectionHost& host)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), buffer_(buffer_limit(host.limits)), host_(host) {}

Connection::~Connection() {
  if (counted_in_flight_) host_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (admitted_) host_.admitted.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard lock(host_.mutex);
  host_.open.erase(this);
}

void Connection::start() {
  admitted_ = true;
  {
    std::lock_guard lock(host_.mutex);
    host_.open.emplace(this, weak_from_this());
  }
  beast::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);  // each streamed token goes out at once
  arm(host_.limits.head_timeout);  // a new connection's first head is due this long after it opened
  read_head();
}

void Connection::refuse(const HttpError& error) {
  {
    std::lock_guard lock(host_.mutex);
    host_.open.emplace(this, weak_from_this());
  }
  answer_error(error);
}

void Connection::close() {
  closing_ = true;
  // An answer being made first writes what its producer still has (at a server's stop the
  // scheduler has already ended every job: a stream's error event and [DONE]), then closes.
  if (writing_ || producer_) return pump();
  shut();
}

void Connection::arm(std::chrono::steady_clock::duration timeout) {
  const unsigned generation = ++timer_generation_;
  timed_out_ = false;
  timer_.expires_after(timeout);
  timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
    if (ec || generation != self->timer_generation_) return;
    self->timed_out_ = true;
    beast::error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void Connection::disarm() {
  ++timer_generation_;
  timer_.cancel();
}

// ---- reading a request

void Connection::await_request() {
  if (buffer_.size() > 0) {  // a pipelined request already arrived
    arm(host_.limits.head_timeout);
    return read_head();
  }
  buffer_.shrink_to_fit();  // an idle connection keeps no large buffer
  arm(host_.limits.idle_timeout);
  socket_.async_read_some(buffer_.prepare(kReadBytes), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    if (ec || self->closed_) return self->shut();  // idle timeout or the client left: close quietly
    self->buffer_.commit(n);
    self->arm(self->host_.limits.head_timeout);  // its head is due this long after its first byte
    self->read_head();
  });
}

void Connection::read_head() {
  http10_ = false;
  head_only_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(host_.limits.max_head_bytes, UINT32_MAX)));
  parser_->body_limit(host_.limits.max_body_bytes);
  http::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_head(ec);
  });
}

HttpError Connection::head_error(beast::error_code ec) const {
  const auto& limits = host_.limits;
  if (ec == net::error::operation_aborted && timed_out_)
    return HttpError(408, str("the request head did not arrive within ", limits.head_timeout.count(), " ms"));
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return HttpError(431, str("the request head exceeds ", limits.max_head_bytes, " bytes"));
  const std::string_view input(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  const auto too_large = [&](std::string_view length) {
    return HttpError(413, str("the request body is too large: Content-Length ", quote_prefix(length),
                              " exceeds the limit of ", limits.max_body_bytes, " bytes (--max-body)"));
  };
  // Said by Content-Length once the head was read whole (the parser knows the number; the head's
  // bytes are gone from the buffer): no byte of the body is read.
  if (ec == http::error::body_limit)
    return too_large(parser_->content_length() ? std::to_string(*parser_->content_length()) : std::string("?"));
  // Beast stops at the first Content-Length that conflicts: with an earlier different one
  // (multiple_content_length), with an earlier Transfer-Encoding or Content-Length (the fields
  // before it are gone from the buffer, the parser remembers them), or by not being a number.
  // Each is a malformed framing (400), except a lone number too large for 64 bits (413).
  if (ec == http::error::multiple_content_length) return HttpError(400, "conflicting Content-Length fields");
  if (ec == http::error::bad_content_length) {
    if (parser_->chunked()) return HttpError(400, "a request must not carry both Content-Length and Transfer-Encoding");
    const std::string value = raw_field(input, "Content-Length").value_or("");
    if (!is_digits(value))
      return HttpError(400, str("Content-Length must be a decimal number of bytes, found ", quote_prefix(value)));
    if (parser_->content_length()) return HttpError(400, "conflicting Content-Length fields");
    return too_large(value);  // digits only: past 64 bits
  }
  if (ec == http::error::bad_transfer_encoding)
    return HttpError(400, "a request must carry one Transfer-Encoding and not both it and Content-Length");
  if (ec == http::error::bad_version) {
    const std::string_view line = input.substr(0, input.find('\n'));
    // Beast reads the version, then wants CRLF: a bare LF after "HTTP/1.1" is a malformed line,
    // not an unsupported version.
    if (line.size() < input.size() && !line.ends_with('\r'))
      return HttpError(400, str("malformed request line: it must end with CRLF, not a bare LF: ", quote_prefix(line)));
    const std::string_view version = trim(line.substr(line.rfind(' ') + 1));
    if (version.rfind("HTTP/", 0) == 0)
      return HttpError(505, str("HTTP version ", quote_prefix(version), " is not supported (HTTP/1.0 and HTTP/1.1 are)"));
    return HttpError(400, str("malformed HTTP version in request line ", quote_prefix(line)));
  }
  if (ec == http::error::bad_method || ec == http::error::bad_target)
    return HttpError(400, str("malformed request line: ", ec.message()));
  if (ec == http::error::bad_field || ec == http::error::bad_value || ec == http::error::bad_line_ending)
    return HttpError(400, str("malformed header field: ", ec.message()));
  return HttpError(400, str("malformed request: ", ec.message()));
}

void Connection::check_head() {
  const auto& request = parser_->get();
  const auto& limits = host_.limits;
  const unsigned version = request.version();
  if (version != 10 && version != 11)
    throw HttpError(505, str("HTTP version ", version / 10, ".", version % 10,
                             " is not supported (HTTP/1.0 and HTTP/1.1 are)"));
  http10_ = version == 10;
  head_only_ = request.method() == http::verb::head;
  const auto fields = static_cast<std::size_t>(std::distance(request.begin(), request.end()));
  if (fields > limits.max_headers)
    throw HttpError(431, str("too many header fields: ", fields, " (the limit is ", limits.max_headers, ")"));
  if (const auto te = request.find(http::field::transfer_encoding); te != request.end())
    if (!iequals(trim(te->value()), "chunked"))
      throw HttpError(501, str("Transfer-Encoding ", quote_prefix(te->value()), " is not supported (only 'chunked' is)"));
  if (const auto expect = request.find(http::field::expect); expect != request.end())
    if (!iequals(trim(expect->value()), "100-continue"))
      throw HttpError(417, str("unsupported expectation ", quote_prefix(expect->value())));
  const std::string_view method = request.method_string();
  const bool carries_body = method == "POST" || method == "PUT" || method == "PATCH";
  if (carries_body && !parser_->content_length() && !parser_->chunked())
    throw HttpError(411, str("a ", method, " request needs a Content-Length (or Transfer-Encoding: chunked)"));
  // An HTTP/1.0 connection carries one exchange: its response may be close-delimited.
  keep_alive_ = !http10_ && request.keep_alive() && served_ + 1 < host_.limits.max_requests_per_connection;
}

// A read that ended because the client left or the server closed the socket, not by a deadline.
bool Connection::ended_quietly(beast::error_code ec) const {
  return is_disconnect(ec) || (ec == net::error::operation_aborted && !timed_out_);
}

void Connection::on_head(beast::error_code ec) {
  if (closed_) return;
  if (ec) return ended_quietly(ec) ? shut() : answer_error(head_error(ec));
  try {
    check_head();
  } catch (const HttpError& error) {
    return answer_error(error);
  }
  if (parser_->is_done()) return dispatch_request();
  arm(host_.limits.body_timeout);
  const bool expects = !http10_ && parser_->get().find(http::field::expect) != parser_->get().end();
  if (!expects || buffer_.size() > 0) return read_body();
  // The client waits for a go-ahead before sending its body (Expect: 100-continue).
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                   [self = shared_from_this()](beast::error_code ec, std::size_t) {
                     if (ec) return self->shut();
                     self->read_body();
                   });
}

void Connection::read_body() {
  http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_body(ec);
  });
}

HttpError Connection::body_error(beast::error_code ec) const {
  const auto& limits = host_.limits;
  if (ec == net::error::operation_aborted && timed_out_)
    return HttpError(408, str("the request body did not arrive within ", limits.body_timeout.count(), " ms"));
  if (ec == http::error::body_limit)
    return HttpError(413, str("the request body is too large: the chunked body exceeds the limit of ",
                              limits.max_body_bytes, " bytes (--max-body)"));
  // Beast bounds neither a chunk-size line (its extensions) nor the trailer: the buffer does.
  if (ec == http::error::buffer_overflow)
    return HttpError(413, str("a chunk-size line or the trailer of the chunked body exceeds ", buffer_.max_size(),
                              " bytes"));
  return HttpError(400, str("malformed chunked body: ", ec.message()));
}

void Connection::on_body(beast::error_code ec) {
  if (closed_) return;
  if (ec) return ended_quietly(ec) ? shut() : answer_error(body_error(ec));
  dispatch_request();
}

// ---- answering it

void Connection::dispatch_request() {
  disarm();
  auto message = parser_->release();
  parser_.reset();
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  request.http10 = http10_;
  for (const auto& field : message) request.fields.emplace_back(field.name_string(), field.value());
  request.body = std::move(message.body());
  path_ = request.path;
  ++served_;
  counted_in_flight_ = true;
  host_.in_flight.fetch_add(1, std::memory_order_relaxed);
  net::post(*host_.workers, [self = shared_from_this(), request = std::move(request)]() mutable {
    Response response;
    try {
      response = self->host_.handler(request);
    } catch (const std::exception& e) {  // the handler answers its own errors; this is the last resort
      response = Response{};
      response.status = 500;
      response.set_content(error_body(HttpError(500, str("internal error: ", e.what()), "", "server_error")),
                           "application/json");
    }
    net::post(self->socket_.get_executor(),
              [self, response = std::move(response)]() mutable { self->respond(std::move(response)); });
  });
}

void Connection::respond(Response response) {
  if (closed_) {
    if (response.producer) response.producer->cancel();
    return;
  }
  response_ = std::move(response);
  producer_ = std::move(response_.producer);
  if (!producer_) return write_whole();
  // The producer wakes this connection from the scheduler's thread.
  std::weak_ptr<Connection> weak = weak_from_this();
  producer_->subscribe([weak, executor = socket_.get_executor()] {
    net::post(executor, [weak] {
      if (auto self = weak.lock()) self->pump();
    });
  });
  watch_client();
  if (response_.streamed) return start_stream();
  pump();
}

// Notices a client that closes its connection while its answer is being made, so its jobs
// end at the scheduler's next step instead of running to max_tokens.
void Connection::watch_client() {
  // The exchange's number, not its producer: an idle connection must not keep a finished answer alive.
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), exchange = served_](beast::error_code ec) {
    if (ec || self->closed_ || !self->producer_ || self->served_ != exchange) return;
    char byte;
    const ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // a pipelined request: the client is still there
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch_client();
    self->shut();
  });
}

void Connection::pump() {
  if (closed_ || writing_ || !producer_) return;
  if (!response_.streamed) {  // deferred: the whole answer once it is complete
    if (!producer_->poll(response_)) return closing_ ? shut() : void();
    producer_.reset();
    return write_whole();
  }
  if (!ended_) ended_ = producer_->poll(response_);
  std::string bytes = std::move(response_.body);
  response_.body.clear();
  if (bytes.empty() && !ended_) return closing_ ? shut() : void();
  write_chunk(std::move(bytes), ended_);
}

void Connection::write_whole() {
  const int status = response_.status;
  whole_.emplace();
  whole_->version(http10_ ? 10 : 11);
  whole_->result(static_cast<unsigned>(status));
  for (auto& [name, value] : response_.headers) whole_->insert(name, value);
  if (!response_.content_type.empty()) whole_->set(http::field::content_type, response_.content_type);
  whole_->body() = std::move(response_.body);
  const bool keep = keep_alive_ && !host_.stopping.load(std::memory_order_relaxed);
  keep_alive_ = keep;
  whole_->keep_alive(keep);
  if (!keep) whole_->set(http::field::connection, "close");
  if (host_.on_answered) host_.on_answered(path_, status);
  send_whole(false);
}

void Connection::send_whole(bool then_linger) {
  whole_->prepare_payload();
  if (head_only_) {  // HEAD: the GET's head, Content-Length included, without its body
    whole_->body().clear();
    whole_->body().shrink_to_fit();
  }
  arm(host_.limits.write_timeout);
  writing_ = true;
  http::async_write(socket_, *whole_, [self = shared_from_this(), then_linger](beast::error_code ec, std::size_t) {
    self->writing_ = false;
    self->disarm();
    if (ec || self->closed_) return self->shut();
    if (then_linger) return self->linger();
    self->end_exchange();
  });
}

void Connection::start_stream() {
  stream_head_.emplace();
  stream_head_->version(http10_ ? 10 : 11);
  stream_head_->result(static_cast<unsigned>(response_.status));
  for (auto& [name, value] : response_.headers) stream_head_->insert(name, value);
  if (!response_.content_type.empty()) stream_head_->set(http::field::content_type, response_.content_type);
  // HTTP/1.1: chunked; HTTP/1.0 knows no chunks, so its body ends where the connection closes.
  if (http10_) {
    keep_alive_ = false;
    stream_head_->set(http::field::connection, "close");
  } else {
    stream_head_->chunked(true);
    stream_head_->keep_alive(keep_alive_);
    if (!keep_alive_) stream_head_->set(http::field::connection, "close");
  }
  stream_serializer_.emplace(*stream_head_);
  if (host_.on_answered) host_.on_answered(path_, response_.status);
  arm(host_.limits.write_timeout);
  writing_ = true;
  http::async_write_header(socket_, *stream_serializer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->writing_ = false;
    self->disarm();
    if (ec || self->closed_) return self->shut();
    self->pump();
  });
}

void Connection::write_chunk(std::string bytes, bool last) {
  out_ = std::move(bytes);
  writing_ = true;
  arm(host_.limits.write_timeout);
  auto done = [self = shared_from_this(), last](beast::error_code ec, std::size_t) {
    self->writing_ = false;
    self->disarm();
    if (ec || self->closed_) return self->shut();
    if (!last) return self->pump();
    if (self->http10_) return self->shut();  // the close ends an HTTP/1.0 body
    self->end_exchange();
  };
  if (http10_) return net::async_write(socket_, net::buffer(out_), std::move(done));
  if (out_.empty()) return net::async_write(socket_, http::make_chunk_last(), std::move(done));
  if (!last) return net::async_write(socket_, http::make_chunk(net::buffer(out_)), std::move(done));
  net::async_write(socket_, http::make_chunk(net::buffer(out_)),
                   [self = shared_from_this(), done = std::move(done)](beast::error_code ec, std::size_t n) mutable {
                     if (ec || self->closed_) return done(ec, n);
                     net::async_write(self->socket_, http::make_chunk_last(), std::move(done));
                   });
}

void Connection::end_exchange() {
  if (counted_in_flight_) {
    counted_in_flight_ = false;
    host_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  response_ = Response{};
  producer_.reset();
  whole_.reset();
  stream_serializer_.reset();
  stream_head_.reset();
  out_ = std::string();
  ended_ = false;
  if (!keep_alive_ || host_.stopping.load(std::memory_order_relaxed)) return shut();
  await_request();
}

// ---- refusing and closing

void Connection::answer_error(const HttpError& error) {
  if (host_.on_answered) host_.on_answered("", error.status());
  keep_alive_ = false;
  whole_.emplace();
  whole_->version(http10_ ? 10 : 11);
  whole_->result(static_cast<unsigned>(error.status()));
  whole_->set(http::field::content_type, "application/json");
  if (error.status() == 503) whole_->set(http::field::retry_after, "1");
  whole_->set(http::field::connection, "close");
  whole_->body() = error_body(error);
  send_whole(true);
}

void Connection::linger() {
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);  // the client reads our answer and its end
  linger_until_ = std::chrono::steady_clock::now() + (admitted_ ? host_.limits.linger_time : kRefusalLinger);
  lingered_bytes_ = 0;
  discard_until_closed();
}

void Connection::discard_until_closed() {
  const auto left = linger_until_ - std::chrono::steady_clock::now();
  if (closed_ || left <= decltype(left)::zero() || lingered_bytes_ >= host_.limits.linger_bytes) return shut();
  buffer_.consume(buffer_.size());
  arm(std::min<std::chrono::steady_clock::duration>(left, host_.limits.linger_idle));
  socket_.async_read_some(buffer_.prepare(kReadBytes), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    if (ec) return self->shut();  // the client closed, or the linger ran out
    self->lingered_bytes_ += n;
    self->discard_until_closed();
  });
}

void Connection::shut() {
  if (closed_) return;
  closed_ = true;
  disarm();
  if (producer_) {
    producer_->cancel();
    producer_.reset();
  }
  if (counted_in_flight_) {
    counted_in_flight_ = false;
    host_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace kael::serve
