// socket_endpoint and ConnectionWatch (http.hpp).
#include "serve/http.hpp"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace kael::serve {

bool socket_endpoint(int fd, bool peer, std::string& host, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? getpeername(fd, raw, &length) : getsockname(fd, raw, &length)) != 0) return false;
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return false;
  char host_buffer[NI_MAXHOST];
  char port_buffer[NI_MAXSERV];
  if (getnameinfo(raw, length, host_buffer, sizeof host_buffer, port_buffer, sizeof port_buffer,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = host_buffer;
  port = std::atoi(port_buffer);
  return true;
}

ConnectionWatch::ConnectionWatch(const httplib::Request& request) {
  // The process's open descriptors: Linux lists them in /proc/self/fd, macOS and the BSDs in
  // /dev/fd. Where neither can be read, fd_ stays -1 and closed() reports a live connection
  // (a disconnect is then noticed only when writing the stream fails).
#if defined(__linux__)
  DIR* dir = opendir("/proc/self/fd");
#else
  DIR* dir = opendir("/dev/fd");
#endif
  if (!dir) return;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::string host;
    int port = -1;
    if (!socket_endpoint(static_cast<int>(fd), true, host, port)) continue;
    if (port != request.remote_port || host != request.remote_addr) continue;
    if (!socket_endpoint(static_cast<int>(fd), false, host, port) || port != request.local_port) continue;
    fd_ = static_cast<int>(fd);
    break;
  }
  closedir(dir);
}

bool ConnectionWatch::closed() const {
  if (fd_ < 0) return false;
  // Peek without consuming: 0 means the peer sent FIN; bytes mean a pipelined request (still
  // connected); EAGAIN means nothing to read yet (still connected).
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) return false;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace kael::serve
