// open_regular_file, read_regular_file (kael/core/file.hpp).
#include "kael/core/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kael/core/error.hpp"

namespace kael {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

}  // namespace

int open_regular_file(const std::filesystem::path& path, std::string_view what) {
  // O_NONBLOCK: open() returns at once for a FIFO with no writer (and a device that would
  // wait); it changes nothing for a regular file, and is cleared below anyway.
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT) throw Error(str(what, " not found: '", path.string(), "'"));
    throw Error(str("cannot open ", what, " '", path.string(), "': ", std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int saved = errno;
    const bool stat_failed = !S_ISREG(info.st_mode) && info.st_mode == 0;
    ::close(fd);
    if (stat_failed) throw Error(str("cannot stat ", what, " '", path.string(), "': ", std::strerror(saved)));
    throw Error(str(what, " '", path.string(), "' is not a regular file (it is ", kind_of(info.st_mode), ")"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::filesystem::path& path, std::string_view what, std::uint64_t max_bytes) {
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } const file{open_regular_file(path, what)};
  const int fd = file.fd;
  const auto too_large = [&] {
    return Error(str(what, " '", path.string(), "' is larger than the limit of ", max_bytes, " bytes"));
  };
  struct stat info {};
  if (::fstat(fd, &info) == 0 && static_cast<std::uint64_t>(info.st_size) > max_bytes) throw too_large();
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(str("cannot read ", what, " '", path.string(), "': ", std::strerror(errno)));
    if (got == 0) break;
    if (static_cast<std::uint64_t>(got) > max_bytes - bytes.size()) throw too_large();  // it grew meanwhile
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
  return bytes;
}

}  // namespace kael
