// cpp-httplib as kael uses it. Debian ships it as a compiled library (libcpp-httplib.so)
// built with TLS, zlib and brotli support; the header must see the same macros, or the structs
// the library shares with us (httplib::Request has a TLS member) would differ in layout.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

namespace kael::serve {

// The numeric host and port of one end of a connected TCP socket (peer: the client's), spelled
// as httplib spells them (getnameinfo with NI_NUMERICHOST); false when `fd` is not one.
bool socket_endpoint(int fd, bool peer, std::string& host, int& port);

// Tells whether the client of a request has hung up, so a handler waiting on the model can
// cancel its job at once (httplib 0.11 offers no such call, and a streamed response only
// notices on a failed write). It finds the request's TCP socket among the process's open
// descriptors by the connection's two endpoints (what httplib itself reports in
// Request::remote_addr/remote_port/local_port): the connection stays open, on this thread,
// until the handler returns, so the descriptor cannot be closed or reused meanwhile.
class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& request);
  // True once the peer closed the connection (FIN received) or the socket failed. False when
  // the socket was not found: then only a failed write reveals a departed client.
  bool closed() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace kael::serve
