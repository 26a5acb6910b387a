// The request a route reads and the response it gives, independent of the HTTP library
// underneath (http_connection.hpp reads and writes them with Boost.Beast).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kael::serve {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

bool iequals(std::string_view a, std::string_view b);  // ASCII case-insensitive

// `s` without leading spaces and tabs and trailing spaces, tabs and CRs.
std::string_view trim(std::string_view s);

// A bounded, printable quote of client bytes for an error message.
std::string quote_prefix(std::string_view bytes, std::size_t max_bytes = 64);

struct Request {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target without its query
  bool http10 = false;
  HeaderFields fields;  // in order, as sent
  std::string body;     // whole, decoded (Content-Length or chunked)

  bool has_header(std::string_view name) const;
  // The first field of that name (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

// A response whose body or status is known only later: a completion waiting for its tokens.
// The scheduler's thread calls the waker set by subscribe() whenever there may be more; the
// connection then polls on its own thread. Polls never block.
class Producer {
 public:
  virtual ~Producer() = default;
  // `wake` may be called from any thread, any number of times, until cancel() or the end.
  virtual void subscribe(std::function<void()> wake) = 0;
  // Moves what is ready into `out`: a streamed response appends body bytes (its head is
  // already sent); a deferred one sets the status and appends headers and body once complete.
  // True when the response is complete.
  virtual bool poll(struct Response& out) = 0;
  // The client left or the server stops: release what the response holds (its jobs).
  virtual void cancel() = 0;
};

struct Response {
  int status = 200;
  HeaderFields headers;
  std::string content_type;
  std::string body;
  // Set for an answer that is not ready yet. `streamed`: the head (status 200, the headers
  // above) goes out at once and the body follows as the producer makes it (SSE); otherwise
  // the whole response waits for the producer.
  std::shared_ptr<Producer> producer;
  bool streamed = false;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

}  // namespace kael::serve
