// The server's HTTP layer (serve/http_server.hpp) on a loopback port with a test handler:
// framing, every limit, pipelining, HTTP/1.0, the connection cap, streamed and deferred
// answers, a client that leaves, the lingering close and stop. Raw sockets on the client side,
// so every byte sent and received is the test's own.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "serve/http_server.hpp"

namespace kael::serve {
namespace {

using namespace std::chrono_literals;

// A client socket; recv_all reads until the server closes (or `timeout` passes).
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) ADD_FAILURE() << "connect";
  }
  ~Client() { ::close(fd_); }

  // False when the server closed or reset the connection before taking all of `bytes`.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;  // refused before all of it was read: the answer is waiting
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Half-closes: the client sends nothing more but still reads (shutdown(SHUT_WR), `nc -N`).
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }

  // What arrives until the server closes, or `timeout` passes.
  std::string recv_all(std::chrono::milliseconds timeout = 5000ms) { return recv_until({}, timeout); }

  // What arrives until `marker` has been received (or the server closes, or `timeout`).
  std::string recv_until(std::string_view marker, std::chrono::milliseconds timeout = 5000ms) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (marker.empty() || out.find(marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buffer[16384];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }

  // True once the server has closed its side (a read returns end of file).
  bool closed_by_server(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK) <= 0;
  }

 private:
  int fd_ = -1;
};

int status_of(const std::string& response) {
  if (response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// A producer the test drives: `feed` adds body bytes (or, deferred, the status) and wakes
// the connection; cancel() is recorded.
class TestProducer final : public Producer {
 public:
  void subscribe(std::function<void()> wake) override {
    std::lock_guard lock(mutex_);
    wake_ = std::move(wake);
  }
  bool poll(Response& out) override {
    std::lock_guard lock(mutex_);
    out.body += pending_;
    pending_.clear();
    if (done_ && status_) out.status = status_;
    return done_;
  }
  void cancel() override { cancelled = true; }

  void feed(std::string bytes, bool done, int status = 0) {
    std::function<void()> wake;
    {
      std::lock_guard lock(mutex_);
      pending_ += bytes;
      done_ = done;
      status_ = status;
      wake = wake_;
    }
    if (wake) wake();
  }
  bool subscribed() {
    std::lock_guard lock(mutex_);
    return static_cast<bool>(wake_);
  }

  std::atomic<bool> cancelled{false};

 private:
  std::mutex mutex_;
  std::function<void()> wake_;
  std::string pending_;
  bool done_ = false;
  int status_ = 0;
};

// A server whose handler echoes "METHOD PATH BODY", and answers /stream and /deferred with
// the test's producer.
class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpLimits limits = small_limits()) {
    server_ = std::make_unique<HttpServer>(
        limits, 2,
        [this](Request& request) {
          Response response;
          if (request.path == "/stream" || request.path == "/deferred") {
            response.producer = producer_;
            response.streamed = request.path == "/stream";
            response.content_type = "text/event-stream";
            return response;
          }
          response.set_content(request.method + " " + request.path + " " + request.body, "text/plain");
          return response;
        },
        [this](const std::string& path, int status) {
          std::lock_guard lock(mutex_);
          answered_.push_back(path + ":" + std::to_string(status));
        });
    port_ = server_->listen("127.0.0.1", 0);
  }

  static HttpLimits small_limits() {
    HttpLimits limits;
    limits.max_body_bytes = 1024;
    limits.max_head_bytes = 1024;
    limits.max_headers = 8;
    limits.max_connections = 4;
    limits.head_timeout = 300ms;
    limits.body_timeout = 300ms;
    limits.idle_timeout = 300ms;
    limits.linger_time = 2000ms;
    limits.linger_idle = 500ms;
    return limits;
  }

  // Waits until `done` holds, at most 5 s.
  template <typename Condition>
  static bool eventually(Condition done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

  std::string exchange(std::string_view request) {
    Client client(port_);
    client.send(request);
    return client.recv_all();
  }

  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<TestProducer> producer_ = std::make_shared<TestProducer>();
  int port_ = 0;
  std::mutex mutex_;
  std::vector<std::string> answered_;
};

TEST_F(HttpServerTest, AKeptAliveConnectionAnswersEachRequestAndPipelinedOnesInOrder) {
  start();
  Client client(port_);
  client.send("GET /a HTTP/1.1\r\nHost: k\r\n\r\n");
  const std::string first = client.recv_until("GET /a ");
  EXPECT_EQ(status_of(first), 200);
  EXPECT_NE(first.find("Content-Length: 7"), std::string::npos) << first;
  client.send("POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.1\r\n\r\n"
              "GET /d HTTP/1.1\r\nConnection: close\r\n\r\n");
  const std::string rest = client.recv_all();
  const auto b = rest.find("POST /b hello"), c = rest.find("GET /c "), d = rest.find("GET /d ");
  ASSERT_NE(b, std::string::npos) << rest;
  ASSERT_NE(c, std::string::npos) << rest;
  ASSERT_NE(d, std::string::npos) << rest;
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_NE(rest.find("Connection: close"), std::string::npos);
}

TEST_F(HttpServerTest, AHeadRequestGetsTheHeadAloneWithTheBodysLength) {
  start();
  Client client(port_);
  client.send("HEAD /h HTTP/1.1\r\n\r\nGET /g HTTP/1.1\r\nConnection: close\r\n\r\n");
  const std::string both = client.recv_all();
  const auto second = both.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << both;
  const std::string head = both.substr(0, second);
  EXPECT_NE(head.find("Content-Length: 8"), std::string::npos) << head;  // "HEAD /h "
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;       // and no body after it
  EXPECT_NE(both.find("GET /g "), std::string::npos);
}

TEST_F(HttpServerTest, AHeadPastItsSizeOrFieldCountIs431) {
  start();
  const std::string big = exchange("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'z') + "\r\n\r\n");
  EXPECT_EQ(status_of(big), 431);
  EXPECT_NE(big.find("the request head exceeds 1024 bytes"), std::string::npos) << big;
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-F: 1\r\n";
  const std::string counted = exchange(many + "\r\n");
  EXPECT_EQ(status_of(counted), 431);
  EXPECT_NE(counted.find("too many header fields: 9 (the limit is 8)"), std::string::npos) << counted;
}

TEST_F(HttpServerTest, ContentLengthIsStrictDecimalAndBoundedBeforeTheBodyIsRead) {
  start();
  for (const char* value : {"-1", "12abc", "abc", "", "1 2"}) {
    const std::string answer = exchange(std::string("POST / HTTP/1.1\r\nContent-Length: ") + value + "\r\n\r\n");
    EXPECT_EQ(status_of(answer), 400) << value;
    EXPECT_NE(answer.find("Content-Length must be a decimal number"), std::string::npos) << answer;
  }
  for (const char* value : {"1025", "99999999999999999999"}) {
    const std::string answer = exchange(std::string("POST / HTTP/1.1\r\nContent-Length: ") + value + "\r\n\r\n");
    EXPECT_EQ(status_of(answer), 413) << value;
    EXPECT_NE(answer.find(std::string("Content-Length '") + value + "' exceeds the limit of 1024 bytes"),
              std::string::npos) << answer;
  }
  const std::string missing = exchange("POST / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_of(missing), 411);
  EXPECT_NE(missing.find("a POST request needs a Content-Length"), std::string::npos);
}

TEST_F(HttpServerTest, ChunkedBodiesAreDecodedAndCountedAgainstTheLimitAsTheyArrive) {
  start();
  const std::string ok = exchange("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                  "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(ok), 200);
  EXPECT_NE(ok.find("POST /c abcde"), std::string::npos) << ok;

  Client client(port_);
  client.send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 4; ++i) client.send("200\r\n" + std::string(512, 'x') + "\r\n");  // 2 KiB, never ended
  const std::string over = client.recv_all();
  EXPECT_EQ(status_of(over), 413);
  EXPECT_NE(over.find("the chunked body exceeds the limit of 1024 bytes"), std::string::npos) << over;

  EXPECT_EQ(status_of(exchange("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")), 400);
  const std::string gzip = exchange("POST /c HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(status_of(gzip), 501);
}

TEST_F(HttpServerTest, ConflictingFramingIs400WhicheverFieldComesFirst) {
  start();
  for (const char* fields : {"Content-Length: 5\r\nContent-Length: 6\r\n",
                             "Content-Length: 2000\r\nContent-Length: 5\r\n",
                             "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                             "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"}) {
    const std::string answer = exchange(std::string("POST / HTTP/1.1\r\n") + fields + "\r\nhello");
    EXPECT_EQ(status_of(answer), 400) << fields << answer;
  }
  EXPECT_NE(exchange("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").find("conflicting Content-Length"),
            std::string::npos);
  // The same length twice is one length.
  const std::string same = exchange("POST /s HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
  EXPECT_EQ(status_of(same), 200) << same;
}

TEST_F(HttpServerTest, BareLineFeedsAreAMalformedRequestNotAnUnsupportedVersion) {
  start();
  for (const char* request : {"GET / HTTP/1.1\nHost: k\n\n", "GET / HTTP/1.0\n\n", "GET / HTTP/1.1\r\nHost: k\n\n"}) {
    const std::string answer = exchange(request);
    EXPECT_EQ(status_of(answer), 400) << answer;
  }
  EXPECT_NE(exchange("GET / HTTP/1.1\n\n").find("must end with CRLF"), std::string::npos);
}

TEST_F(HttpServerTest, AChunkLineOrTrailerThatNeverEndsIsCutOffAtTheBufferLimit) {
  start();  // a 1024-byte head limit: the connection holds at most 1024 + 16 KiB unparsed
  const std::string head = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& framing : {"5;ext=" + std::string(200'000, 'x'),  // a chunk extension without end
                                     "3\r\nabc\r\n0\r\nX-Trailer: " + std::string(200'000, 'y')}) {
    Client client(port_);
    client.send(head);
    client.send(framing);  // read and dropped after the answer (the lingering close), never buffered whole
    const std::string answer = client.recv_all();
    EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 300);
    EXPECT_NE(answer.find("a chunk-size line or the trailer of the chunked body exceeds 17408 bytes"),
              std::string::npos) << answer.substr(0, 300);
  }
  // Extensions and trailers within the limit are fine.
  const std::string ok = exchange(head.substr(0, head.size() - 2) + "Connection: close\r\n\r\n"
                                  "3;name=value\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(status_of(ok), 200) << ok;
  EXPECT_NE(ok.find("POST /c abc"), std::string::npos) << ok;
}

TEST_F(HttpServerTest, UnsupportedVersionsAndExpectationsAreRefused) {
  start();
  EXPECT_EQ(status_of(exchange("GET / HTTP/2.0\r\n\r\n")), 505);
  EXPECT_EQ(status_of(exchange("GET / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n")), 417);
  EXPECT_EQ(status_of(exchange("GET / HTTP/1.1\r\nX-\xff: 1\r\n\r\n")), 400);
}

TEST_F(HttpServerTest, ExpectContinueGetsAGoAheadOnlyForABodyWithinTheLimit) {
  start();
  Client client(port_);
  client.send("POST /e HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n");
  EXPECT_NE(client.recv_until("\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  client.send("abc");
  EXPECT_NE(client.recv_all().find("POST /e abc"), std::string::npos);

  const std::string refused = exchange("POST /e HTTP/1.1\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(refused.find("100 Continue"), std::string::npos) << refused;
  EXPECT_EQ(status_of(refused), 413);
}

TEST_F(HttpServerTest, SlowHeadsAndBodiesGet408AndIdleConnectionsCloseQuietly) {
  start();
  Client slow_head(port_);
  slow_head.send("GET / HT");
  const std::string head = slow_head.recv_all();
  EXPECT_EQ(status_of(head), 408);
  EXPECT_NE(head.find("the request head did not arrive within 300 ms"), std::string::npos) << head;

  Client slow_body(port_);
  slow_body.send("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  const std::string body = slow_body.recv_all();
  EXPECT_EQ(status_of(body), 408);
  EXPECT_NE(body.find("the request body did not arrive within 300 ms"), std::string::npos) << body;

  Client idle(port_);
  idle.send("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_of(idle.recv_until("GET / ")), 200);
  EXPECT_EQ(idle.recv_all(2000ms), "");  // closed after the keep-alive timeout, with nothing sent
}

TEST_F(HttpServerTest, ConnectionsPastTheCapGet503AtOnceAndTheAdmittedOnesAreStillServed) {
  start();
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<Client>(port_));
  ASSERT_TRUE(eventually([&] { return server_->open_connections() == 4; }));
  const auto start_time = std::chrono::steady_clock::now();
  const std::string refused = exchange("");
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, 1s);
  EXPECT_EQ(status_of(refused), 503);
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(refused.find("too many open connections (the limit is 4)"), std::string::npos) << refused;
  held[0]->send("GET /x HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(held[0]->recv_all()), 200);
}

TEST_F(HttpServerTest, AStreamIsChunkedForHttp11AndCloseDelimitedForHttp10) {
  start();
  {
    Client client(port_);
    client.send("GET /stream HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(eventually([&] { return producer_->subscribed(); }));
    producer_->feed("data: one\n\n", false);
    const std::string head = client.recv_until("one");
    EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
    producer_->feed("data: two\n\n", true);
    const std::string tail = client.recv_until("0\r\n\r\n");
    EXPECT_NE(tail.find("data: two"), std::string::npos);
    EXPECT_NE(tail.find("\r\n0\r\n\r\n"), std::string::npos) << tail;
    EXPECT_TRUE(eventually([&] { return server_->requests_in_flight() == 0; }));
    EXPECT_FALSE(client.closed_by_server(100ms));  // kept alive after the last chunk
  }
  producer_ = std::make_shared<TestProducer>();
  Client client(port_);
  client.send("GET /stream HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return producer_->subscribed(); }));
  producer_->feed("data: only\n\n", true);
  const std::string whole = client.recv_all();
  EXPECT_EQ(whole.rfind("HTTP/1.0 200", 0), 0u) << whole;
  EXPECT_EQ(whole.find("chunked"), std::string::npos);
  EXPECT_NE(whole.find("Connection: close"), std::string::npos);
  EXPECT_EQ(whole.substr(whole.size() - 12), "data: only\n\n");
}

TEST_F(HttpServerTest, ADeferredAnswerIsWrittenWholeWithTheStatusItEndsWith) {
  start();
  Client client(port_);
  client.send("GET /deferred HTTP/1.1\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return producer_->subscribed(); }));
  EXPECT_EQ(server_->requests_in_flight(), 1);
  producer_->feed("{\"error\": 1}", true, 504);
  const std::string answer = client.recv_all();
  EXPECT_EQ(status_of(answer), 504) << answer;
  EXPECT_NE(answer.find("Content-Length: 12"), std::string::npos);
  std::lock_guard lock(mutex_);
  EXPECT_EQ(answered_.back(), "/deferred:504");
}

TEST_F(HttpServerTest, AClientThatLeavesCancelsItsPendingAnswer) {
  start();
  {
    Client client(port_);
    client.send("GET /stream HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(eventually([&] { return producer_->subscribed(); }));
  }
  EXPECT_TRUE(eventually([&] { return producer_->cancelled.load(); }));
  EXPECT_TRUE(eventually([&] { return server_->requests_in_flight() == 0 && server_->open_connections() == 0; }));
}

// docs/behaviour.md, "Server access": the end of a client's sending side cannot be told from
// the end of the client, so an answer that waits on the model is cancelled; one made at once
// is written.
TEST_F(HttpServerTest, AHalfClosedClientGetsAnAnswerMadeAtOnceAndItsPendingAnswerIsCancelled) {
  start();
  {
    Client client(port_);
    client.send("POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
    client.finish_sending();
    const std::string answer = client.recv_all();
    EXPECT_EQ(status_of(answer), 200) << answer;
    EXPECT_NE(answer.find("POST /a hi"), std::string::npos) << answer;
  }
  Client client(port_);
  client.send("GET /deferred HTTP/1.1\r\n\r\n");
  client.finish_sending();
  EXPECT_TRUE(eventually([&] { return producer_->cancelled.load(); }));
  EXPECT_TRUE(client.closed_by_server(1000ms));
}

TEST_F(HttpServerTest, AnErrorAnswerLingersSoAClientStillSendingItsBodyReadsIt) {
  start();
  Client client(port_);
  client.send("POST / HTTP/1.1\r\nContent-Length: 4000000\r\n\r\n");
  std::this_thread::sleep_for(50ms);  // the 413 is written; the client has not read it yet
  EXPECT_TRUE(client.send(std::string(4'000'000, 'x')));  // read and dropped by the server, not reset
  const std::string answer = client.recv_all();
  EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
}

TEST_F(HttpServerTest, StopClosesEveryConnectionAndCancelsPendingAnswers) {
  start();
  Client idle(port_);
  Client streaming(port_);
  streaming.send("GET /stream HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return producer_->subscribed(); }));
  server_->stop();
  EXPECT_TRUE(producer_->cancelled.load());
  EXPECT_TRUE(idle.closed_by_server(1000ms));
  EXPECT_EQ(status_of(streaming.recv_all(1000ms)), 200);  // its head had gone out; then the close
  EXPECT_TRUE(streaming.closed_by_server(100ms));
  server_->stop();  // idempotent
}

}  // namespace
}  // namespace kael::serve
