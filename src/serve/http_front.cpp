// FrontServer (http_front.hpp): the connection cap, the per-connection loop, and the Stream
// that hands httplib one checked request at a time.
#include "serve/http_front.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kael/core/error.hpp"
#include "serve/chunked.hpp"
#include "serve/http10_response.hpp"
#include "serve/http_error.hpp"
#include "serve/http_head.hpp"
#include "serve/json_text.hpp"

namespace kael::serve {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

// Waits are sliced so a connection notices a server shutdown within this long.
constexpr std::chrono::milliseconds kStopCheck{200};
constexpr std::size_t kRecvBytes = 64 * 1024;
// After refusing a request, read (and drop) what the client is still sending for this long
// or this much, so closing does not reset the connection before it has read our answer.
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr std::size_t kLingerBytes = 4 << 20;

// Set while the accept thread itself runs a connection job: the cap was reached.
thread_local bool refusing_connection = false;

// A thread per connection, at most `cap` at once. Past the cap, the job runs at once on the
// accept thread, which (seeing refusing_connection) answers 503 without blocking and closes.
// Threads rather than a fixed pool: a pool's queue is where a slow client's connection waited
// behind others; here every admitted connection is served at once and the cap bounds memory.
class ConnectionQueue final : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(int cap) : cap_(cap) {}

  void enqueue(std::function<void()> job) override {
    {
      std::lock_guard lock(mutex_);
      if (active_ < cap_) {
        ++active_;
        std::thread([this, job = std::move(job)]() mutable {
          job();
          job = nullptr;
          std::lock_guard done(mutex_);  // the last touch of `this`: shutdown() waits on it
          --active_;
          idle_.notify_all();
        }).detach();
        return;
      }
    }
    refusing_connection = true;
    job();
    refusing_connection = false;
  }

  // httplib calls it once listening has stopped: every connection thread has returned after it.
  void shutdown() override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return active_ == 0; });
  }

 private:
  const int cap_;
  int active_ = 0;
  std::mutex mutex_;
  std::condition_variable idle_;
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

// One accepted socket: buffered reads under deadlines, writes under a timeout.
class Connection {
 public:
  enum class Read { data, closed, timeout, stopping };

  Connection(int fd, const HttpLimits& limits, const httplib::Server& server)
      : fd_(fd), limits_(limits), server_(server) {
    const int on = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);  // each streamed token goes out at once
    socket_endpoint(fd_, true, remote_host, remote_port);
    socket_endpoint(fd_, false, local_host, local_port);
  }

  // Appends what arrives before `deadline` to `input`.
  Read receive(Deadline deadline) {
    for (;;) {
      if (!server_.is_running()) return Read::stopping;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0) return Read::timeout;
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min(left, kStopCheck).count()));
      if (ready < 0 && errno != EINTR) return Read::closed;
      if (ready <= 0) continue;
      char buffer[kRecvBytes];
      const ssize_t n = recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) {
        input.append(buffer, static_cast<std::size_t>(n));
        return Read::data;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return Read::closed;
    }
  }

  // Sends all of `bytes`; false (and failed() from then on) when the client stops reading for
  // longer than the write timeout or the connection broke.
  bool send_all(std::string_view bytes) {
    while (!bytes.empty() && !failed_) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (!writable()) failed_ = true;
      } else {
        failed_ = true;
      }
    }
    return !failed_;
  }

  bool writable() const {
    pollfd p{fd_, POLLOUT, 0};
    const int ready = poll(&p, 1, static_cast<int>(limits_.write_timeout.count()));
    return ready > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
  }

  // Answers with an OpenAI-style error and closes (after the linger), as every refusal does.
  void refuse(int status, std::string_view message, bool http10, std::string_view extra_headers = {}) {
    const std::string body = dump(error_json(message, status >= 500 ? "server_error" : "invalid_request_error", "", status));
    send_all(str("HTTP/1.", http10 ? 0 : 1, " ", status, " ", reason_phrase(status),
                 "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                 "\r\nConnection: close\r\n", extra_headers, "\r\n", body));
    linger();
  }

  void linger() {
    shutdown(fd_, SHUT_WR);
    const Deadline until = SteadyClock::now() + kLingerTime;
    std::size_t dropped = 0;
    while (dropped < kLingerBytes) {
      input.clear();
      if (receive(until) != Read::data) break;
      dropped += input.size();
    }
  }

  bool failed() const { return failed_; }
  int fd() const { return fd_; }

  std::string input;  // received, not yet consumed (a pipelined request may follow the current one)
  std::string remote_host, local_host;
  int remote_port = -1, local_port = -1;

 private:
  const int fd_;
  const HttpLimits& limits_;
  const httplib::Server& server_;
  bool failed_ = false;
};

// What httplib reads (one canonical request, then end of input) and writes (to the client,
// rewritten for HTTP/1.0).
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(Connection& connection, std::string request, bool http10)
      : connection_(connection), request_(std::move(request)) {
    if (http10) http10_.emplace();
  }

  bool is_readable() const override { return offset_ < request_.size(); }
  bool is_writable() const override { return !connection_.failed() && connection_.writable(); }

  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, request_.size() - offset_);
    std::copy_n(request_.data() + offset_, n, ptr);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    const std::string_view bytes(ptr, size);
    if (http10_) {
      std::string rewritten;
      if (!http10_->rewrite(bytes, rewritten) || !connection_.send_all(rewritten)) return -1;
    } else if (!connection_.send_all(bytes)) {
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = connection_.remote_host;
    port = connection_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = connection_.local_host;
    port = connection_.local_port;
  }
  socket_t socket() const override { return connection_.fd(); }

 private:
  Connection& connection_;
  std::string request_;
  std::size_t offset_ = 0;
  std::optional<Http10Response> http10_;
};

// The request as httplib will read it: the client's fields minus the framing we decoded
// (Transfer-Encoding, Content-Length, Expect), then our Content-Length and the body.
std::string canonical_request(const RequestHead& head, std::string_view body) {
  std::string out = str(head.method, " ", head.target, head.http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  for (const auto& [name, value] : head.fields) {
    const std::string lower = [&] {
      std::string s = name;
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }();
    if (lower == "content-length" || lower == "transfer-encoding" || lower == "expect") continue;
    out += str(name, ": ", value, "\r\n");
  }
  if (head.content_length || head.chunked) out += str("Content-Length: ", body.size(), "\r\n");
  out += "\r\n";
  out.append(body);
  return out;
}

}  // namespace

FrontServer::FrontServer(const HttpLimits& limits, std::function<void(int)> on_refused)
    : limits_(limits), on_refused_(std::move(on_refused)) {
  new_task_queue = [cap = limits_.max_connections] { return new ConnectionQueue(cap); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the
  // same port binds without error and silently takes half of the connections.
  set_socket_options([this](socket_t sock) {
    const int on = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    listen_fd_ = sock;
  });
  set_payload_max_length(limits_.max_body_bytes);  // never reached: the front checks first
  // What httplib announces in its Keep-Alive header; the front enforces both.
  set_keep_alive_max_count(static_cast<std::size_t>(limits_.max_requests_per_connection));
  set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits_.idle_timeout).count());
}

int FrontServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  // listen() again on a listening socket sets its backlog (the kernel caps it at somaxconn).
  if (bound > 0 && listen_fd_ >= 0) ::listen(listen_fd_, std::max(limits_.max_connections, 128));
  return bound;
}

bool FrontServer::process_and_close_socket(socket_t sock) {
  if (refusing_connection) {
    // On the accept thread: answer without waiting for the client (its request is unread).
    const std::string body = dump(error_json(str("too many open connections (the limit is ", limits_.max_connections,
                                                 "); retry later"), "server_error", "", 503));
    const std::string response = str("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                     "Content-Length: ", body.size(), "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", body);
    [[maybe_unused]] const ssize_t sent = send(sock, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (on_refused_) on_refused_(503);
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return true;
  }
  try {
    serve_connection(sock);
  } catch (const std::exception&) {
    // Out of memory building a request: drop this connection, keep the server.
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return true;
}

void FrontServer::serve_connection(int fd) {
  Connection connection(fd, limits_, *this);
  for (int served = 0; served < limits_.max_requests_per_connection; ++served) {
    // A new connection has the head timeout for its whole first head; a kept-alive one may
    // idle before its next request, whose head timeout starts with its first byte.
    bool started = served == 0 || !connection.input.empty();
    Deadline head_deadline = SteadyClock::now() + (started ? limits_.head_timeout : limits_.idle_timeout);
    bool http10 = false;
    try {
      std::size_t length = 0;
      while ((length = head_length(connection.input)) == 0) {
        if (connection.input.size() > limits_.max_head_bytes)
          throw HttpError(431, str("the request head exceeds ", limits_.max_head_bytes, " bytes"));
        const Connection::Read read = connection.receive(head_deadline);
        if (read == Connection::Read::closed || read == Connection::Read::stopping) return;
        if (read == Connection::Read::timeout) {
          if (!started) return;  // an idle kept-alive connection: close quietly
          throw HttpError(408, str("the request head did not arrive within ", limits_.head_timeout.count(), " ms"));
        }
        if (!started) {
          started = true;
          head_deadline = SteadyClock::now() + limits_.head_timeout;
        }
      }
      if (length > limits_.max_head_bytes)
        throw HttpError(431, str("the request head exceeds ", limits_.max_head_bytes, " bytes"));
      const RequestHead head = parse_request_head(std::string_view(connection.input).substr(0, length), limits_);
      http10 = head.http10;
      connection.input.erase(0, length);

      // The body, under its own deadline.
      const Deadline body_deadline = SteadyClock::now() + limits_.body_timeout;
      const auto receive_body = [&] {
        const Connection::Read read = connection.receive(body_deadline);
        if (read == Connection::Read::timeout)
          throw HttpError(408, str("the request body did not arrive within ", limits_.body_timeout.count(), " ms"));
        if (read != Connection::Read::data) throw HttpError(400, "the connection closed inside the request body");
      };
      std::string body;
      if (head.content_length) {
        const auto want = static_cast<std::size_t>(*head.content_length);
        if (head.expect_continue && connection.input.size() < want && !connection.send_all("HTTP/1.1 100 Continue\r\n\r\n")) return;
        while (connection.input.size() < want) receive_body();
        body = connection.input.substr(0, want);
        connection.input.erase(0, want);
      } else if (head.chunked) {
        if (head.expect_continue && connection.input.empty() && !connection.send_all("HTTP/1.1 100 Continue\r\n\r\n")) return;
        ChunkedDecoder decoder;
        for (;;) {
          std::string_view pending = connection.input;
          const ChunkedDecoder::Status status = decoder.feed(pending, body);
          connection.input.erase(0, connection.input.size() - pending.size());
          if (body.size() > limits_.max_body_bytes)
            throw HttpError(413, str("the request body is too large: the chunked body exceeds the limit of ",
                                     limits_.max_body_bytes, " bytes (--max-body)"));
          if (status == ChunkedDecoder::Status::malformed) throw HttpError(400, "malformed chunked body: " + decoder.error());
          if (status == ChunkedDecoder::Status::done) break;
          receive_body();
        }
      }

      const bool close_after = !head.keep_alive || served + 1 >= limits_.max_requests_per_connection || !is_running();
      RequestStream stream(connection, canonical_request(head, body), head.http10);
      body.clear();
      body.shrink_to_fit();
      bool connection_closed = false;
      in_flight_.fetch_add(1, std::memory_order_relaxed);
      struct Answered {
        std::atomic<int>& count;
        ~Answered() { count.fetch_sub(1, std::memory_order_relaxed); }
      } answered{in_flight_};
      const bool ok = process_request(stream, close_after, connection_closed, nullptr);
      if (!ok || close_after || connection_closed || connection.failed()) return;
    } catch (const HttpError& e) {
      if (on_refused_) on_refused_(e.status());
      connection.refuse(e.status(), e.what(), http10);
      return;
    }
  }
}

}  // namespace kael::serve
